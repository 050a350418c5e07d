# Parallel-equivalence tests (issue "distributed training"): layouts of the toy models agree with one process.
if(VEOMNI_MPIEXEC)
  add_test(NAME parallel_align_dense
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/parallel_align.sh ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR}
            qwen3_toy 1e-4 1e-6 1:1:1 2:1:1 4:1:1 2:2:1 4:2:1 1:1:1:2 2:2:1:2)
  add_test(NAME parallel_align_moe
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/parallel_align.sh ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR}
            qwen3_moe_toy 1e-4 1e-6 1:1:1 2:1:2 4:2:2 4:1:4)
  set_tests_properties(parallel_align_dense parallel_align_moe PROPERTIES
    LABELS "integration;mpi" RESOURCE_LOCK mpi TIMEOUT 600)
endif()
