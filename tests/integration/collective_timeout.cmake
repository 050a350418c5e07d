# A rank stopped with SIGSTOP under mpirun: the other aborts after the collective timeout naming it (issue
# "Reliability"), with the timeout from the config key and from the environment.
if(VEOMNI_MPIEXEC)
  foreach(case config env)
    add_test(NAME collective_timeout.${case}
      COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/collective_timeout.sh ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR} ${case})
    set_tests_properties(collective_timeout.${case} PROPERTIES LABELS "integration;mpi" RESOURCE_LOCK mpi TIMEOUT 300)
  endforeach()
endif()
