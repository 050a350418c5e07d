# Multimodal training (issue "Omni-modal training") under mpirun on the CPU: layouts agree with one process, frozen
# towers stay unchanged, a multimodal run resumes.
if(VEOMNI_MPIEXEC)
  set(multimodal_cases omni_layouts vl_layouts freeze resume)
  # Samples with and without media need veomni-preprocess multimodal (the optional media library).
  if(TARGET veomni_media)
    list(APPEND multimodal_cases mixed_media)
  endif()
  foreach(case ${multimodal_cases})
    add_test(NAME parallel_align_multimodal.${case}
      COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/parallel_align_multimodal.sh ${case} ${VEOMNI_BIN_DIR}
              ${CMAKE_SOURCE_DIR} ${VEOMNI_TOKENIZER_JSON})
    set_tests_properties(parallel_align_multimodal.${case} PROPERTIES LABELS "integration;mpi" RESOURCE_LOCK mpi
      TIMEOUT 300)
  endforeach()
  # Preprocessing the mixed-media samples must give the committed dataset exactly; that dataset then trains across
  # the layouts below.
  if(TARGET veomni_media)
    set_tests_properties(parallel_align_multimodal.mixed_media PROPERTIES
      ENVIRONMENT "MM_EXPECT_DATA=${CMAKE_SOURCE_DIR}/tests/fixtures/multimodal_train/mixed_media.h5")
  endif()
  # The same layouts on the committed preprocessed dataset (tests/fixtures/multimodal_train/mixed_media.h5, made by
  # this case with MM_SAVE_DATA), which is what the GPU machine runs (gpu.train.2gpu_*_mixed_media): it has no media
  # libraries to preprocess with.
  add_test(NAME parallel_align_multimodal.mixed_media_fixture
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/parallel_align_multimodal.sh mixed_media ${VEOMNI_BIN_DIR}
            ${CMAKE_SOURCE_DIR})
  set_tests_properties(parallel_align_multimodal.mixed_media_fixture PROPERTIES LABELS "integration;mpi"
    RESOURCE_LOCK mpi TIMEOUT 300
    ENVIRONMENT "MM_DATA=${CMAKE_SOURCE_DIR}/tests/fixtures/multimodal_train/mixed_media.h5")
endif()
