# Parallel-equivalence tests (issue "distributed training"): layouts of the toy models agree with one process.
if(VEOMNI_MPIEXEC)
  add_test(NAME parallel_align_dense
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/parallel_align.sh ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR}
            qwen3_toy 1e-4 1e-6 1:1:1 2:1:1 4:1:1 2:2:1 4:2:1 1:1:1:2 2:2:1:2)
  add_test(NAME parallel_align_moe
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/parallel_align.sh ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR}
            qwen3_moe_toy 1e-4 1e-6 1:1:1 2:1:2 4:2:2 4:1:4)
  # The 4- and 8-rank layouts of issue "4- and 8-GPU runs" on the CPU: FSDP4, FSDP8, SP4, SP8 (a toy with 8 heads,
  # so that 8 sequence-parallel ranks split them), SP2 over 8 ranks; EP4, EP8, EP4 x SP2. Global batch 8 (8 ranks).
  add_test(NAME parallel_align_dense_8ranks
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/parallel_align.sh ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR}
            qwen3_toy 1e-4 1e-6 1:1:1 4:1:1 8:1:1 4:4:1 8:8:1 8:2:1)
  set_tests_properties(parallel_align_dense_8ranks PROPERTIES ENVIRONMENT
    "ALIGN_GLOBAL_BATCH=8;ALIGN_MODEL_CONFIG=${CMAKE_SOURCE_DIR}/configs/model_configs/qwen3_toy_8heads")
  add_test(NAME parallel_align_moe_8ranks
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/parallel_align.sh ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR}
            qwen3_moe_toy 1e-4 1e-6 1:1:1 4:1:4 8:1:8 8:2:4)
  set_tests_properties(parallel_align_moe_8ranks PROPERTIES ENVIRONMENT "ALIGN_GLOBAL_BATCH=8")
  # LoRA (adapters on attention, MLP and experts, per expert or shared): FSDP, SP and EP agree with one process.
  add_test(NAME parallel_align_dense_lora
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/parallel_align.sh ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR}
            qwen3_toy 1e-4 1e-6 1:1:1 2:1:1 2:2:1)
  set_tests_properties(parallel_align_dense_lora PROPERTIES ENVIRONMENT "ALIGN_EXTRA=--model.lora_config.rank 4")
  add_test(NAME parallel_align_moe_lora
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/parallel_align.sh ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR}
            qwen3_moe_toy 1e-4 1e-6 1:1:1 2:1:2 4:2:2)
  set_tests_properties(parallel_align_moe_lora PROPERTIES ENVIRONMENT "ALIGN_EXTRA=--model.lora_config.rank 4")
  add_test(NAME parallel_align_moe_shared_lora
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/parallel_align.sh ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR}
            qwen3_moe_toy 1e-4 1e-6 1:1:1 2:1:2 4:2:2)
  set_tests_properties(parallel_align_moe_shared_lora PROPERTIES ENVIRONMENT
    "ALIGN_EXTRA=--model.lora_config.rank 4 --model.lora_config.share_expert_lora true")
  set_tests_properties(parallel_align_dense parallel_align_moe parallel_align_dense_8ranks parallel_align_moe_8ranks
    parallel_align_dense_lora parallel_align_moe_lora parallel_align_moe_shared_lora
    PROPERTIES LABELS "integration;mpi" RESOURCE_LOCK mpi TIMEOUT 600)
endif()
