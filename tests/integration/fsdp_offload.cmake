# Optimizer offload (issue #19) on the CPU, on two ranks unless said otherwise: the FsdpOffload gtests (placement,
# steps with AdamW equal to the device path bit for bit), veomni-train with train.accelerator.fsdp_config.offload true and false giving the same
# metrics and checkpoint bytes, the same with LoRA adapters, and an offloaded run's checkpoint resumed with and without
# offload.
if(VEOMNI_MPIEXEC)
  set(fsdp_offload ${CMAKE_CURRENT_SOURCE_DIR}/integration/fsdp_offload.sh)
  add_test(NAME fsdp_offload_2ranks COMMAND bash ${fsdp_offload} unit $<TARGET_FILE:veomni_unit_tests>)
  add_test(NAME fsdp_offload_train_bitwise_dense
    COMMAND bash ${fsdp_offload} train ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR} cpu fp32 2)
  # One rank: groups of one, whose gradients backward sums in place and the step's end moves to the host.
  add_test(NAME fsdp_offload_train_bitwise_np1
    COMMAND bash ${fsdp_offload} train ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR} cpu fp32 1)
  add_test(NAME fsdp_offload_train_bitwise_moe_ep2
    COMMAND bash ${fsdp_offload} train ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR} cpu fp32 2 qwen3_moe_toy 2)
  add_test(NAME fsdp_offload_resume COMMAND bash ${fsdp_offload} resume ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR})
  # LoRA: the adapters' state offloaded, the frozen base left on the compute device.
  add_test(NAME fsdp_offload_lora_bitwise_dense
    COMMAND bash ${fsdp_offload} lora ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR} qwen3_toy 1)
  add_test(NAME fsdp_offload_lora_bitwise_moe_ep2
    COMMAND bash ${fsdp_offload} lora ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR} qwen3_moe_toy 2)
  set_tests_properties(fsdp_offload_2ranks fsdp_offload_train_bitwise_dense fsdp_offload_train_bitwise_np1
    fsdp_offload_train_bitwise_moe_ep2 fsdp_offload_resume fsdp_offload_lora_bitwise_dense
    fsdp_offload_lora_bitwise_moe_ep2 PROPERTIES LABELS "integration;mpi" RESOURCE_LOCK mpi TIMEOUT 600)
endif()
