# Tokenizer unit tests and veomni-preprocess integration tests, built only with the optional text library.
file(GLOB VEOMNI_TOKENIZER_TEST_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_tokenizer*.cc)
if(NOT TARGET veomni_text)
  set_source_files_properties(${VEOMNI_TOKENIZER_TEST_SOURCES} PROPERTIES HEADER_FILE_ONLY ON)
  return()
endif()

# The tests read the real tokenizer.json (scripts/setup.sh fetches it); they fail, naming it, when it is missing.
target_link_libraries(veomni_unit_tests PRIVATE veomni_text)
target_compile_definitions(veomni_unit_tests PRIVATE VEOMNI_TOKENIZER_JSON="${VEOMNI_TOKENIZER_JSON}")

foreach(case help version usage_errors tokenize_known_ids text_run pack_and_shards progress_and_threads bad_json
        bad_missing_messages bad_role bad_content bad_utf8 bad_empty bad_array skip_bad trains out_is_input out_exists
        nul_byte number_overflow endless_line range_messages streaming_identical streaming_memory)
  add_test(NAME preprocess_text.${case}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/preprocess_text.sh ${case} ${VEOMNI_BIN_DIR}
                   ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/preprocess_text/${case} ${VEOMNI_TOKENIZER_JSON})
  set_tests_properties(preprocess_text.${case} PROPERTIES LABELS integration TIMEOUT 180)
endforeach()
