# veomni-generate (issue #21): token-id prompts on the HF toy, chat prompts through the Qwen3 tokenizer (skipped,
# exit 77, without the tokenizer library or tokenizer.json), bad inputs exit 2 with no output file
# (media_bad_inputs: its media-file cases skip, exit 77, without the media library or tokenizer.json). CPU only.
foreach(case ids text bad_inputs media_bad_inputs)
  add_test(NAME generate.${case}
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/generate.sh ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR} ${case})
  set_tests_properties(generate.${case} PROPERTIES LABELS integration TIMEOUT 300 SKIP_RETURN_CODE 77)
endforeach()
