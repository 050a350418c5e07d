# Integration tests of veomni-dummy-data (tests/integration/dummy_data.sh runs each case).
foreach(case help version bad_flag bad_type bad_seq_len huge_seq_len range_messages stdout_refused text_run qwen3omni_run
        shards_run deterministic preference_run preference_media_run rollout_run out_exists)
  add_test(NAME dummy_data.${case}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/dummy_data.sh ${case}
                   ${VEOMNI_BIN_DIR}/veomni-dummy-data ${CMAKE_CURRENT_BINARY_DIR}/dummy_data/${case})
  set_tests_properties(dummy_data.${case} PROPERTIES LABELS integration TIMEOUT 120)
endforeach()
