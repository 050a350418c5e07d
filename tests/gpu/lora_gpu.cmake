# LoRA on GPUs (label gpu; skipped, exit 77, without a GPU): the MoE toy's per-expert adapters in fp32 against the
# CPU fp32 reference at 1e-4; dense and shared-expert adapters in bf16 against it at 2e-2; lora_train.sh on a GPU
# (the first step equals the base model's, the adapters train, an unmatched lora_modules entry exits 2).
if(VEOMNI_HAVE_CUDA AND VEOMNI_MPIEXEC)
  set(align ${CMAKE_CURRENT_SOURCE_DIR}/integration/parallel_align.sh ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR})
  set(run1 bash ${CMAKE_CURRENT_SOURCE_DIR}/gpu/train_gpu.sh 1)
  add_test(NAME gpu.lora.moe_cpu_vs_gpu_fp32
    COMMAND ${run1} ${align} qwen3_moe_toy 1e-4 1e-6 1:1:1:1:cpu:fp32 1:1:1:1:cuda:fp32)
  set_tests_properties(gpu.lora.moe_cpu_vs_gpu_fp32 PROPERTIES ENVIRONMENT "ALIGN_EXTRA=--model.lora_config.rank 4")
  add_test(NAME gpu.lora.moe_shared_cpu_fp32_vs_gpu_bf16
    COMMAND ${run1} ${align} qwen3_moe_toy 2e-2 1e-3 1:1:1:1:cpu:fp32 1:1:1:1:cuda:bf16)
  set_tests_properties(gpu.lora.moe_shared_cpu_fp32_vs_gpu_bf16 PROPERTIES
    ENVIRONMENT "ALIGN_EXTRA=--model.lora_config.rank 4 --model.lora_config.share_expert_lora true")
  add_test(NAME gpu.lora.dense_cpu_fp32_vs_gpu_bf16
    COMMAND ${run1} ${align} qwen3_toy 2e-2 1e-3 1:1:1:1:cpu:fp32 1:1:1:1:cuda:bf16)
  set_tests_properties(gpu.lora.dense_cpu_fp32_vs_gpu_bf16 PROPERTIES ENVIRONMENT "ALIGN_EXTRA=--model.lora_config.rank 4")
  add_test(NAME gpu.lora.train
    COMMAND ${run1} ${CMAKE_CURRENT_SOURCE_DIR}/integration/lora_train.sh ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR} cuda)
  set_tests_properties(gpu.lora.moe_cpu_vs_gpu_fp32 gpu.lora.moe_shared_cpu_fp32_vs_gpu_bf16
    gpu.lora.dense_cpu_fp32_vs_gpu_bf16 gpu.lora.train PROPERTIES
    LABELS "gpu;mpi" RESOURCE_LOCK gpu SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()
