# Objectives' per-sequence sums over a Ulysses SP group of two MPI ranks (a sequence spanning both ranks).
if(VEOMNI_MPIEXEC)
  add_test(NAME objective_sequence_sums_2ranks
    COMMAND ${VEOMNI_MPIEXEC} --oversubscribe --bind-to none -np 2 $<TARGET_FILE:veomni_unit_tests>
            --gtest_filter=SequenceSums.*:SequenceLastValues.* --gtest_brief=1)
  set_tests_properties(objective_sequence_sums_2ranks PROPERTIES
    LABELS "integration;mpi" RESOURCE_LOCK mpi TIMEOUT 120
    ENVIRONMENT
    "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1;OMPI_MCA_mpi_yield_when_idle=1")
endif()

# Every objective beyond SFT aligned across layouts with one process (CPU fp32): the dense toy under FSDP2, FSDP4,
# SP2 and FSDP2 x SP2, the MoE toy under EP2, EP2 x SP2 and EP4. DPO's rewards are differences of sequence log-prob
# sums of a few hundred nats, so their absolute tolerance is 1e-5 (float32 rounding of those sums); the loss and
# the gradient norm hold 1e-4 relative.
if(VEOMNI_MPIEXEC)
  foreach(objective dpo reward value ppo_actor)
    add_test(NAME parallel_align_${objective}_dense
      COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/parallel_align.sh ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR}
              qwen3_toy 1e-4 1e-5 1:1:1 2:1:1 4:1:1 2:2:1 4:2:1)
    add_test(NAME parallel_align_${objective}_moe
      COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/parallel_align.sh ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR}
              qwen3_moe_toy 1e-4 1e-5 1:1:1 2:1:2 4:2:2 4:1:4)
    set_tests_properties(parallel_align_${objective}_dense parallel_align_${objective}_moe PROPERTIES
      ENVIRONMENT "ALIGN_OBJECTIVE=${objective}" LABELS "integration;mpi" RESOURCE_LOCK mpi TIMEOUT 300)
  endforeach()
  # DPO with the reference log-probs from the dataset (no reference model), micro-batches of two pairs.
  add_test(NAME parallel_align_dpo_dataset_reference
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/parallel_align.sh ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR}
            qwen3_toy 1e-4 1e-5 1:1:1:2 2:1:1:2 2:2:1:2)
  set_tests_properties(parallel_align_dpo_dataset_reference PROPERTIES
    ENVIRONMENT "ALIGN_OBJECTIVE=dpo;ALIGN_DATA_EXTRA=--ref-logps;ALIGN_EXTRA=--train.dpo_config.loss_type ipo"
    LABELS "integration;mpi" RESOURCE_LOCK mpi TIMEOUT 300)
endif()

# veomni-train's objectives end to end: DPO separates a separable preference set, resumes exactly, and data without
# an objective's keys are refused naming them.
foreach(case dpo_resume missing_keys)
  add_test(NAME train_objectives.${case}
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/train_objectives.sh ${case} ${VEOMNI_BIN_DIR}
            ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/train_objectives/${case})
  set_tests_properties(train_objectives.${case} PROPERTIES LABELS integration TIMEOUT 300)
endforeach()
if(TARGET veomni_text)
  add_test(NAME train_objectives.dpo_separable
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/train_objectives.sh dpo_separable ${VEOMNI_BIN_DIR}
            ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/train_objectives/dpo_separable ${VEOMNI_TOKENIZER_JSON})
  set_tests_properties(train_objectives.dpo_separable PROPERTIES LABELS integration TIMEOUT 300)
endif()
