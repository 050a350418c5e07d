# Hostile inputs to veomni-train and veomni-ckpt-shard (tests/integration/input_hardening.sh runs each case).
foreach(case config_not_regular config_two_documents config_octal huge_intermediate huge_vocab many_layers
        number_overflow range_messages)
  add_test(NAME input_hardening.${case}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/input_hardening.sh ${case} ${VEOMNI_BIN_DIR}
                   ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/input_hardening/${case})
  set_tests_properties(input_hardening.${case} PROPERTIES LABELS integration TIMEOUT 120)
endforeach()
