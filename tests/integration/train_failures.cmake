# Failure paths of veomni-train under mpirun (no hang, right exit codes) and FSDP memory scaling.
if(VEOMNI_MPIEXEC)
  foreach(case injected_fault nan_loss missing_data bad_token_id unknown_key bad_layout no_gpu fp8_on_cpu
      fp8_auto_without_gpu fp8_fp32 memory_scaling)
    add_test(NAME train_failures.${case}
      COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/train_failures.sh ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR} ${case})
    set_tests_properties(train_failures.${case} PROPERTIES LABELS "integration;mpi" RESOURCE_LOCK mpi TIMEOUT 300)
  endforeach()
endif()
