# veomni-preprocess multimodal --chat-template: chatml unchanged, Qwen3-VL's template through the node worker, and
# placeholder mismatches; built only with the optional media library.
if(NOT TARGET veomni_media)
  return()
endif()

foreach(case chatml_identical model_identical mismatch)
  add_test(NAME preprocess_multimodal_chat_template.${case}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/preprocess_multimodal_chat_template.sh ${case}
                   ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR}
                   ${CMAKE_CURRENT_BINARY_DIR}/preprocess_multimodal_chat_template/${case} ${VEOMNI_TOKENIZER_JSON})
  set_tests_properties(preprocess_multimodal_chat_template.${case} PROPERTIES LABELS integration TIMEOUT 120)
endforeach()
