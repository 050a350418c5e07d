# veomni-align-check: aligned and misaligned runs, every kind of bad input (exit 2), --help and --version.
foreach(case aligned misaligned json steps keys tolerance missing_file invalid_json nan unequal_steps too_few_runs
             missing_key no_common_key bad_tolerance help version timing_keys)
  add_test(NAME align_check.${case}
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/align_check.sh ${VEOMNI_BIN_DIR}/veomni-align-check ${case})
  set_tests_properties(align_check.${case} PROPERTIES LABELS integration TIMEOUT 60)
endforeach()
