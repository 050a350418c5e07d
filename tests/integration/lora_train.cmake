# LoRA in veomni-train: the adapted model at init is the base model, the adapters train, unmatched entries exit 2.
add_test(NAME lora_train
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/lora_train.sh ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR})
set_tests_properties(lora_train PROPERTIES LABELS "integration" TIMEOUT 300)
