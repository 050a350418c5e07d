# FP8 linears on a GPU (label gpu; skipped, exit 77, without one): the toy model trains with train.accelerator.fp8
# on within 2% of the same bf16 run at every step (the ops themselves: veomni_gpu_tests' CudaFp8.*).
if(VEOMNI_HAVE_CUDA AND VEOMNI_MPIEXEC)
  add_test(NAME gpu.train.fp8_vs_bf16_toy
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/gpu/train_gpu.sh 1 ${CMAKE_CURRENT_SOURCE_DIR}/gpu/train_fp8.sh
            ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR} 2e-2)
  set_tests_properties(gpu.train.fp8_vs_bf16_toy PROPERTIES
    LABELS "gpu;mpi" RESOURCE_LOCK gpu SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()
