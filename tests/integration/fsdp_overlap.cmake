# FSDP communication overlap (issue #7) on two MPI ranks: the FsdpOverlap gtests (prefetched gathers are issued and
# used; wrong predictions and deferred reduce-scatters change no bit against the blocking path), and veomni-train
# with train.accelerator.fsdp_config.overlap true and false giving the same bits.
if(VEOMNI_MPIEXEC)
  set(fsdp_overlap ${CMAKE_CURRENT_SOURCE_DIR}/integration/fsdp_overlap.sh)
  add_test(NAME fsdp_overlap_2ranks COMMAND bash ${fsdp_overlap} unit $<TARGET_FILE:veomni_unit_tests> cpu)
  add_test(NAME fsdp_overlap_train_bitwise_dense
    COMMAND bash ${fsdp_overlap} train ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR} cpu fp32)
  # EP 1: expert weights gather over ep_fsdp, a second communicator in every layer; EP 2: beside the all-to-alls.
  foreach(ep 1 2)
    add_test(NAME fsdp_overlap_train_bitwise_moe_ep${ep}
      COMMAND bash ${fsdp_overlap} train ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR} cpu fp32 qwen3_moe_toy ${ep})
  endforeach()
  set_tests_properties(fsdp_overlap_2ranks fsdp_overlap_train_bitwise_dense fsdp_overlap_train_bitwise_moe_ep1
    fsdp_overlap_train_bitwise_moe_ep2 PROPERTIES
    LABELS "integration;mpi" RESOURCE_LOCK mpi TIMEOUT 600)
endif()
