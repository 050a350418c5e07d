# veomni-generate speaking (issue #21, Qwen3-Omni's talker and code2wav): WAV files from a small random Omni
# directory, codec codes for [thinker, talker], bad stage files and models that cannot speak exit 2 with no output.
# CPU only; needs the media library (libsndfile) for the WAV files.
if(TARGET veomni_media)
  foreach(case speak bad_inputs)
    add_test(NAME generate_speech.${case}
      COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/generate_speech.sh ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR}
              $<TARGET_FILE:make_omni_speech_toy> ${case})
    set_tests_properties(generate_speech.${case} PROPERTIES LABELS integration TIMEOUT 300)
  endforeach()
endif()
