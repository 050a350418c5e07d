# veomni-score (issue "One engine, many objectives"): scores agree across layouts, --as-reference feeds DPO,
# perplexity falls after training, bad inputs exit 2. Toy models on the CPU under mpirun.
add_executable(dataset_diff ${CMAKE_CURRENT_SOURCE_DIR}/fixtures_tools/dataset_diff.cc)
target_link_libraries(dataset_diff PRIVATE veomni_common veomni_warnings)
set_target_properties(dataset_diff PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${VEOMNI_BIN_DIR})
if(VEOMNI_MPIEXEC)
  foreach(case layouts as_reference perplexity bad_inputs multimodal)
    add_test(NAME score.${case}
      COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/score.sh ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR} ${case})
    set_tests_properties(score.${case} PROPERTIES LABELS "integration;mpi" RESOURCE_LOCK mpi TIMEOUT 300)
  endforeach()
endif()
