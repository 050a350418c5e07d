# Weight-decay exclusion keys (issue "the training workflow users expect").
add_test(NAME train_no_decay
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/train_no_decay.sh ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR})
set_tests_properties(train_no_decay PROPERTIES LABELS "integration" TIMEOUT 300)
