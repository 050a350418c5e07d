# veomni-preprocess preference integration tests, built only with the optional text library (the tokenizer).
if(NOT TARGET veomni_text)
  return()
endif()

foreach(case help good_run ref_logps bad_missing_rejected bad_different_prompts bad_empty_answer bad_json skip_bad
        too_long shards_and_overwrite endless_line streaming template_chatml_file template_model template_errors)
  add_test(NAME preprocess_preference.${case}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/preprocess_preference.sh ${case} ${VEOMNI_BIN_DIR}
                   ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/preprocess_preference/${case}
                   ${VEOMNI_TOKENIZER_JSON})
  set_tests_properties(preprocess_preference.${case} PROPERTIES LABELS integration TIMEOUT 180)
endforeach()
