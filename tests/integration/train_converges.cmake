# veomni-train learns: the loss of both toy models falls clearly over 50 steps.
if(VEOMNI_MPIEXEC)
  foreach(model qwen3_toy qwen3_moe_toy)
    add_test(NAME train_converges.${model}
      COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/train_converges.sh ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR} ${model})
    set_tests_properties(train_converges.${model} PROPERTIES LABELS "integration;mpi" RESOURCE_LOCK mpi TIMEOUT 300)
  endforeach()
endif()
