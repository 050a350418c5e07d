# veomni-ckpt-merge keeps a Qwen3-Omni model's talker and code2wav tensors (issue #21): from the run's base model,
# from --speech-from, none (with a warning) after a random initialisation.
add_test(NAME ckpt_merge_omni_speech
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/ckpt_merge_omni_speech.sh ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR})
set_tests_properties(ckpt_merge_omni_speech PROPERTIES LABELS "integration" TIMEOUT 300)
