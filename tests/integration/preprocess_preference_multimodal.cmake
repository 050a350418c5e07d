# veomni-preprocess preference --model-type (multimodal pairs) integration tests, built only with the optional media
# library (which needs the text one).
if(NOT TARGET veomni_media)
  return()
endif()

foreach(case help vl_run omni_run bad_records usage_errors)
  add_test(NAME preprocess_preference_multimodal.${case}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/preprocess_preference_multimodal.sh ${case}
                   ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR}
                   ${CMAKE_CURRENT_BINARY_DIR}/preprocess_preference_multimodal/${case} ${VEOMNI_TOKENIZER_JSON})
  set_tests_properties(preprocess_preference_multimodal.${case} PROPERTIES LABELS integration TIMEOUT 180)
endforeach()
