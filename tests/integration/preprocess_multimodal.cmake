# veomni-preprocess multimodal integration tests, built only with the optional media library (which needs the text one).
if(NOT TARGET veomni_media)
  return()
endif()

foreach(case help version usage_errors vl_run omni_run media_root bad_media skip_bad too_long throughput endless_line)
  add_test(NAME preprocess_multimodal.${case}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/preprocess_multimodal.sh ${case} ${VEOMNI_BIN_DIR}
                   ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/preprocess_multimodal/${case}
                   ${VEOMNI_TOKENIZER_JSON})
  set_tests_properties(preprocess_multimodal.${case} PROPERTIES LABELS integration TIMEOUT 180)
endforeach()
