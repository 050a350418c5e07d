# A rank of a 2-GPU run stopped with SIGSTOP (issue "Reliability"; label gpu, skipped with fewer GPUs): the other
# aborts after the collective timeout (NCCL watchdog thread or MPI wait) with a message naming the stopped rank.
# 20 s rather than the CPU test's 3: NCCL start-up must not count as a peer that stopped.
if(VEOMNI_HAVE_CUDA AND VEOMNI_MPIEXEC)
  add_test(NAME gpu.collective_timeout_2gpu
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/gpu/train_gpu.sh 2 ${CMAKE_CURRENT_SOURCE_DIR}/integration/collective_timeout.sh
            ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR} env cuda 20)
  set_tests_properties(gpu.collective_timeout_2gpu PROPERTIES
    LABELS "gpu;mpi" RESOURCE_LOCK gpu TIMEOUT 600 SKIP_RETURN_CODE 77)
endif()
