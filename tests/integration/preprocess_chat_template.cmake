# veomni-preprocess --chat-template: the CLI cases (node worker, Qwen3's template), and the unit test against
# transformers' renderings, compiled in once scripts/gen_chat_template_fixtures.py's output is committed.
if(NOT TARGET veomni_text)
  return()
endif()

# A glob (re-checked at every build) rather than EXISTS, so that committing the file reconfigures the build.
file(GLOB VEOMNI_CHAT_TEMPLATE_RENDERINGS CONFIGURE_DEPENDS
     ${CMAKE_SOURCE_DIR}/tests/fixtures/chat_templates/transformers_renderings.jsonl)
if(VEOMNI_CHAT_TEMPLATE_RENDERINGS)
  set_property(SOURCE ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_tokenizer_chat_template_model.cc APPEND PROPERTY
               COMPILE_DEFINITIONS VEOMNI_CHAT_TEMPLATE_FIXTURES=1)
endif()

foreach(case chatml_identical model_qwen3 model_vl_parts errors)
  add_test(NAME preprocess_chat_template.${case}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/preprocess_chat_template.sh ${case} ${VEOMNI_BIN_DIR}
                   ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/preprocess_chat_template/${case}
                   ${VEOMNI_TOKENIZER_JSON})
  set_tests_properties(preprocess_chat_template.${case} PROPERTIES LABELS integration TIMEOUT 120)
endforeach()
