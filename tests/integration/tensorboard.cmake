# veomni-train's TensorBoard event files: checked with veomni's own reader (every metric, every step, resume, a
# corrupt record) and, where python3 can import tensorboard, with TensorBoard's EventAccumulator (skipped elsewhere).
add_executable(tensorboard_vs_log ${CMAKE_CURRENT_SOURCE_DIR}/fixtures_tools/tensorboard_vs_log.cc)
target_link_libraries(tensorboard_vs_log PRIVATE veomni_common veomni_warnings)
set_target_properties(tensorboard_vs_log PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${VEOMNI_BIN_DIR})
if(VEOMNI_HAVE_TENSORBOARD)
  add_test(NAME tensorboard.events
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/tensorboard.sh ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR} events)
  add_test(NAME tensorboard.python_reader
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/tensorboard.sh ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR} python)
  set_tests_properties(tensorboard.python_reader PROPERTIES LABELS "integration" TIMEOUT 300)
  set_tests_properties(tensorboard.events PROPERTIES LABELS "integration;mpi" RESOURCE_LOCK mpi TIMEOUT 300)
  set_tests_properties(tensorboard.python_reader PROPERTIES SKIP_RETURN_CODE 77)
else()
  add_test(NAME tensorboard.disabled_build
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/tensorboard.sh ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR} disabled)
  set_tests_properties(tensorboard.disabled_build PROPERTIES LABELS "integration" TIMEOUT 300)
endif()
