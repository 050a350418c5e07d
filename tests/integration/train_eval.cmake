# Validation during training (issue "the training workflow users expect"): eval metrics across layouts, resume,
# objectives and bad eval sets.
if(VEOMNI_MPIEXEC)
  foreach(case layouts resume objectives errors)
    add_test(NAME train_eval.${case}
      COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/train_eval.sh ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR} ${case})
    set_tests_properties(train_eval.${case} PROPERTIES LABELS "integration;mpi" RESOURCE_LOCK mpi TIMEOUT 300)
  endforeach()
endif()
