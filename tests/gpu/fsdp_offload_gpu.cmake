# Optimizer offload on GPUs (issue #19; label gpu, skipped with too few GPUs): veomni-train with
# train.accelerator.fsdp_config.offload true against false on one GPU in bf16 and fp32 (the same losses bit for bit
# where the GPU run is reproducible, and in bf16 a peak GPU memory lower by at least the AdamW moments), and on two
# GPUs over NCCL in bf16 with float32 and bfloat16 reductions (the reduced shards stream to the host at the step).
if(VEOMNI_HAVE_CUDA AND VEOMNI_MPIEXEC)
  set(fsdp_offload ${CMAKE_CURRENT_SOURCE_DIR}/integration/fsdp_offload.sh)
  set(gpu_fsdp_offload_tests)
  foreach(precision bf16 fp32)
    add_test(NAME gpu.fsdp_offload.train_${precision}_1gpu COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/gpu/train_gpu.sh 1
      ${fsdp_offload} train ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR} cuda ${precision} 1)
    list(APPEND gpu_fsdp_offload_tests gpu.fsdp_offload.train_${precision}_1gpu)
  endforeach()
  foreach(reduce float32 bfloat16)
    add_test(NAME gpu.fsdp_offload.train_bf16_reduce_${reduce}_2gpu COMMAND bash
      ${CMAKE_CURRENT_SOURCE_DIR}/gpu/train_gpu.sh 2 ${fsdp_offload} train ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR} cuda bf16 2
      qwen3_toy 1 ${reduce})
    list(APPEND gpu_fsdp_offload_tests gpu.fsdp_offload.train_bf16_reduce_${reduce}_2gpu)
  endforeach()
  set_tests_properties(${gpu_fsdp_offload_tests} PROPERTIES
    LABELS "gpu;mpi" RESOURCE_LOCK gpu TIMEOUT 900 SKIP_RETURN_CODE 77)
endif()
