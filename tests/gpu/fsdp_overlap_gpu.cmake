# FSDP communication overlap on two GPUs (issue #7; label gpu, skipped with fewer GPUs): the FsdpOverlap gtests over
# NCCL with the communication stream (every gathered value, shard gradient and master the same bits as the blocking
# path, bf16 reductions included), and veomni-train with train.accelerator.fsdp_config.overlap true against false.
if(VEOMNI_HAVE_CUDA AND VEOMNI_MPIEXEC)
  set(run2 bash ${CMAKE_CURRENT_SOURCE_DIR}/gpu/train_gpu.sh 2)
  set(fsdp_overlap ${CMAKE_CURRENT_SOURCE_DIR}/integration/fsdp_overlap.sh)
  add_test(NAME gpu.fsdp_overlap.unit_2gpu COMMAND ${run2} ${fsdp_overlap} unit $<TARGET_FILE:veomni_unit_tests> cuda)
  set(gpu_fsdp_overlap_tests gpu.fsdp_overlap.unit_2gpu)
  foreach(precision fp32 bf16)
    add_test(NAME gpu.fsdp_overlap.train_${precision}_dense
      COMMAND ${run2} ${fsdp_overlap} train ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR} cuda ${precision})
    # EP 2: the FSDP collectives on the communication stream beside the expert all-to-alls on the compute stream.
    add_test(NAME gpu.fsdp_overlap.train_${precision}_moe_ep2
      COMMAND ${run2} ${fsdp_overlap} train ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR} cuda ${precision} qwen3_moe_toy 2)
    list(APPEND gpu_fsdp_overlap_tests gpu.fsdp_overlap.train_${precision}_dense gpu.fsdp_overlap.train_${precision}_moe_ep2)
  endforeach()
  set_tests_properties(${gpu_fsdp_overlap_tests} PROPERTIES
    LABELS "gpu;mpi" RESOURCE_LOCK gpu TIMEOUT 900 SKIP_RETURN_CODE 77)
endif()
