# data.chat_template: datasets record their chat template, veomni-train checks it, veomni-preprocess info shows it.
if(NOT TARGET veomni_text)
  return()
endif()
foreach(case match mismatch info)
  add_test(NAME train_chat_template.${case}
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/train_chat_template.sh ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR}
            ${VEOMNI_TOKENIZER_JSON} ${case})
  set_tests_properties(train_chat_template.${case} PROPERTIES LABELS integration TIMEOUT 180)
endforeach()
