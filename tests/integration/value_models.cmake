# Reward and value models (issue "One engine, many objectives"): train from a causal LM, merge to the HF
# classification classes, shard back and resume; bad heads and labels. One process on the CPU, seconds each.
set(VEOMNI_VALUE_MODELS_SH ${CMAKE_CURRENT_SOURCE_DIR}/integration/value_models.sh ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR})
foreach(name reward value bad_inputs)
  add_test(NAME value_models.${name} COMMAND bash ${VEOMNI_VALUE_MODELS_SH} ${name})
  set_tests_properties(value_models.${name} PROPERTIES LABELS "integration" TIMEOUT 300)
endforeach()
