# train.optimizer.type anyprecision_adamw through veomni-train on two CPU ranks: smaller state, close losses, the
# moment dtype in the checkpoint, bit-exact resume, and exit 2 for a checkpoint of the other optimizer type.
if(VEOMNI_MPIEXEC)
  add_test(NAME optimizer_precision
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/optimizer_precision.sh ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR})
  set_tests_properties(optimizer_precision PROPERTIES LABELS "integration;mpi" RESOURCE_LOCK mpi TIMEOUT 600)
endif()
