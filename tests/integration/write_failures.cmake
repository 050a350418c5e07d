# Writers on a full disk (issue "Reliability"): exit 1 with the file and the reason, no crash, no partial output.
# (veomni-train's checkpoint is not among them: MPI's own start-up files need more than the toy checkpoint's size.)
foreach(case dummy_data ckpt_shard)
  add_test(NAME write_failures.${case}
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/write_failures.sh ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR} ${case})
  set_tests_properties(write_failures.${case} PROPERTIES LABELS integration TIMEOUT 120)
endforeach()
