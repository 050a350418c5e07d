# GPU tests: every CUDA op against its CPU twin, the CUDA runtime and allocator. Built only with the CUDA backend;
# label `gpu` (ctest -L gpu). Without a GPU each test reports SKIPPED, which ctest lists as skipped, not passed.
if(VEOMNI_HAVE_CUDA)
  file(GLOB VEOMNI_GPU_TEST_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/gpu/*.cc)
  add_executable(veomni_gpu_tests ${VEOMNI_GPU_TEST_SOURCES})
  target_link_libraries(veomni_gpu_tests PRIVATE veomni_common veomni_hdf5 GTest::gtest GTest::gtest_main veomni_warnings)
  target_compile_definitions(veomni_gpu_tests PRIVATE
    VEOMNI_SOURCE_DIR="${CMAKE_SOURCE_DIR}" VEOMNI_BIN_DIR="${VEOMNI_BIN_DIR}" VEOMNI_FIXTURES_DIR="${VEOMNI_FIXTURES_DIR}")
  target_compile_options(veomni_gpu_tests PRIVATE ${VEOMNI_TEST_CXX_FLAGS})
  # The skip pattern has no closing bracket: CMake 4 writes discovered properties inside [[...]] bracket arguments.
  gtest_discover_tests(veomni_gpu_tests DISCOVERY_TIMEOUT 60 TEST_PREFIX "gpu."
    PROPERTIES LABELS gpu SKIP_REGULAR_EXPRESSION "\\[  SKIPPED")
  # The grouped GEMMs again through their other path: one cuBLASLt call per group (used for dtype pairs that
  # cuBLAS's grouped API does not take).
  add_test(NAME gpu.CudaGemm.GroupedThroughTheLoop
    COMMAND veomni_gpu_tests --gtest_filter=CudaGemm.Grouped*)
  set_tests_properties(gpu.CudaGemm.GroupedThroughTheLoop PROPERTIES LABELS gpu ENVIRONMENT VEOMNI_GROUPED_GEMM=loop
    SKIP_REGULAR_EXPRESSION "\\[  SKIPPED")
endif()
