# LoRA training (issue #19, the training side): layouts aligned with one process at 1e-4 (FSDP2, FSDP4, SP2 on the
# dense toy; EP2, EP2 x SP2 on the MoE toy; DPO whose reference is the base), adapter checkpoints: exact and resharded
# resume, a changed base refused (exit 2), whole-model tools refusing an adapter checkpoint. CPU, under mpirun.
if(VEOMNI_MPIEXEC)
  set(lora_align ${CMAKE_CURRENT_SOURCE_DIR}/integration/parallel_align.sh ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR})
  set(lora_extra "ALIGN_EXTRA=--model.lora_config.rank 4 --model.lora_config.alpha 8")
  add_test(NAME lora_align_dense COMMAND bash ${lora_align} qwen3_toy 1e-4 1e-6 1:1:1 2:1:1 4:1:1 2:2:1)
  set_tests_properties(lora_align_dense PROPERTIES ENVIRONMENT "${lora_extra}")
  add_test(NAME lora_align_moe COMMAND bash ${lora_align} qwen3_moe_toy 1e-4 1e-6 1:1:1 2:1:2 4:2:2)
  set_tests_properties(lora_align_moe PROPERTIES ENVIRONMENT "${lora_extra}")
  add_test(NAME lora_align_dpo COMMAND bash ${lora_align} qwen3_toy 1e-4 1e-6 1:1:1 2:1:1 2:2:1)
  set_tests_properties(lora_align_dpo PROPERTIES ENVIRONMENT "${lora_extra};ALIGN_OBJECTIVE=dpo")
  set(lora_sh ${CMAKE_CURRENT_SOURCE_DIR}/integration/lora.sh ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR})
  set(lora_cases
    "resume_dense_np2|resume dense 2:1:1"
    "resume_moe_ep2_sp2|resume moe 4:2:2"
    "reshard_dense_np2_np4|reshard dense 2:1:1 4:1:1"
    "reshard_moe_ep2_np1|reshard moe 2:1:2 1:1:1"
    "base_changed|base_changed"
    "whole_model_tools|whole_model_tools"
    "merge_outputs|merge_outputs"
    "merge_outputs_vl|merge_outputs_vl")
  foreach(entry ${lora_cases})
    string(REPLACE "|" ";" parts "${entry}")
    list(GET parts 0 name)
    list(GET parts 1 args)
    separate_arguments(args)
    add_test(NAME lora.${name} COMMAND bash ${lora_sh} ${args})
    set_tests_properties(lora.${name} PROPERTIES LABELS "integration;mpi" RESOURCE_LOCK mpi TIMEOUT 300)
  endforeach()
  # PEFT's directory and the merged model checked against transformers + PEFT where python3 has them (77 otherwise).
  add_test(NAME lora.peft_in_transformers
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/peft_in_transformers.sh ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR})
  set_tests_properties(lora.peft_in_transformers PROPERTIES LABELS "integration;mpi;python" RESOURCE_LOCK mpi
    SKIP_RETURN_CODE 77 TIMEOUT 300)
  set_tests_properties(lora_align_dense lora_align_moe lora_align_dpo
    PROPERTIES LABELS "integration;mpi" RESOURCE_LOCK mpi TIMEOUT 600)
endif()
