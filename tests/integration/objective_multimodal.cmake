# The objectives on multimodal data aligned across layouts with one process (CPU fp32): DPO and the reward model on
# preference pairs (veomni-dummy-data --type preference --media: the prompt's images, video and audio in both
# halves), the value model and the PPO actor on rollouts (--type rollout --media: the family's sample, the second
# half of its text the response); the Qwen3-VL toy under FSDP2 and SP2, the Qwen3-Omni thinker toy under EP2, SP2
# and EP2 x SP2. DPO trains against the frozen reference copy, so the vision tower and the audio encoder run for the
# policy and the reference in every layout.
if(VEOMNI_MPIEXEC)
  foreach(objective dpo reward value ppo_actor)
    if(objective STREQUAL dpo OR objective STREQUAL reward)
      set(data pairs)
    else()
      set(data rollouts)
    endif()
    add_test(NAME parallel_align_${objective}_vl_${data}
      COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/parallel_align.sh ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR}
              qwen3_vl_toy 1e-4 1e-5 1:1:1 2:1:1 2:2:1)
    set_tests_properties(parallel_align_${objective}_vl_${data} PROPERTIES
      ENVIRONMENT
      "ALIGN_OBJECTIVE=${objective};ALIGN_DATA_EXTRA=--media qwen3vl;ALIGN_SEQ_LEN=128;ALIGN_VOCAB_SIZE=2048;ALIGN_STEPS=2"
      LABELS "integration;mpi" RESOURCE_LOCK mpi TIMEOUT 300)
    add_test(NAME parallel_align_${objective}_omni_${data}
      COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/parallel_align.sh ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR}
              qwen3_omni_moe_toy 1e-4 1e-5 1:1:1 2:1:2 2:2:1 4:2:2)
    set_tests_properties(parallel_align_${objective}_omni_${data} PROPERTIES
      ENVIRONMENT
      "ALIGN_OBJECTIVE=${objective};ALIGN_DATA_EXTRA=--media qwen3omni;ALIGN_SEQ_LEN=336;ALIGN_VOCAB_SIZE=2048;ALIGN_STEPS=2"
      LABELS "integration;mpi" RESOURCE_LOCK mpi TIMEOUT 300)
  endforeach()
endif()
