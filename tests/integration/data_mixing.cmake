# Data mixing (data.datasets): exact resume, resume under another layout, per-source losses, bad mixes.
if(VEOMNI_MPIEXEC)
  foreach(case resume reshard per_source_loss veomni_file bad_inputs)
    add_test(NAME data_mixing.${case}
             COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/data_mixing.sh ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR}
                     ${case})
    set_tests_properties(data_mixing.${case} PROPERTIES LABELS "integration;mpi" RESOURCE_LOCK mpi TIMEOUT 300)
  endforeach()
endif()
