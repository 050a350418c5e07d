# veomni-train's op profile: warm-up steps left out with VEOMNI_PROFILE_OPS_SKIP_STEPS, bad values rejected.
add_test(NAME train_profile.skip_steps
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/train_profile.sh ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR})
set_tests_properties(train_profile.skip_steps PROPERTIES LABELS "integration" TIMEOUT 300)
