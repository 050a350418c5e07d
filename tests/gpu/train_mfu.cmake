# veomni-train's MFU on one GPU against the hand count of the toy model (label gpu; skipped without a GPU).
if(VEOMNI_HAVE_CUDA)
  add_test(NAME gpu.train.mfu COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/gpu/train_gpu.sh 1
    ${CMAKE_CURRENT_SOURCE_DIR}/gpu/train_mfu.sh ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR})
  set_tests_properties(gpu.train.mfu PROPERTIES LABELS gpu TIMEOUT 300 SKIP_RETURN_CODE 77)
endif()
