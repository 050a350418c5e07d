# HF weights during training (issue "the training workflow users expect"): hf_ckpt equals veomni-ckpt-merge's.
if(VEOMNI_MPIEXEC)
  foreach(case full lora)
    add_test(NAME train_hf_weights.${case}
      COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/train_hf_weights.sh ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR}
              ${case})
    set_tests_properties(train_hf_weights.${case} PROPERTIES LABELS "integration;mpi" RESOURCE_LOCK mpi TIMEOUT 300)
  endforeach()
endif()
