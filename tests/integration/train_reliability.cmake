# veomni-train / veomni-ckpt-merge reliability (issue "Reliability"): output_dir lock and checks, lazy epochs,
# resume-position checks, untrained data, token budgets, NaN weights, merge cross-checks, SIGTERM with a checkpoint.
if(VEOMNI_MPIEXEC)
  foreach(case lock stale_lock output_dir many_epochs resume_position untrained_data token_budget nan_weights
               merge_crosscheck signal)
    add_test(NAME train_reliability.${case}
      COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/train_reliability.sh ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR}
              ${case})
    set_tests_properties(train_reliability.${case} PROPERTIES LABELS "integration;mpi" RESOURCE_LOCK mpi TIMEOUT 300)
  endforeach()
endif()
