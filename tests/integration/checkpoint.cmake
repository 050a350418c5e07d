# Checkpoints (issue "Checkpoints"): exact resume after a fault or a SIGKILL, resharded resume, HF round trips,
# np1 vs np4 weights, merge memory, bad inputs. Toy models, a few steps each, under mpirun on the CPU.
if(VEOMNI_MPIEXEC)
  set(VEOMNI_CKPT_SH ${CMAKE_CURRENT_SOURCE_DIR}/integration/checkpoint.sh ${VEOMNI_BIN_DIR} ${CMAKE_SOURCE_DIR})
  set(VEOMNI_CKPT_CASES
    "resume.dense_np1|resume dense 1:1:1"
    "resume.dense_np4|resume dense 4:2:1"
    "resume.moe_np1|resume moe 1:1:1"
    "resume.moe_np4|resume moe 4:2:2"
    "kill9|kill9"
    "reshard.dense_np2_np4|reshard dense 2:1:1 4:1:1"
    "reshard.moe_ep2_ep4|reshard moe 2:1:2 4:1:4"
    "reshard.dense_sp2_off|reshard dense 4:2:1 2:1:1"
    "reshard.moe_np1_sp2_ep2|reshard moe 1:1:1 4:2:2"
    "hf_roundtrip|hf_roundtrip"
    "np1_np4_weights|np1_np4_weights"
    "merge_memory|merge_memory"
    "bad_inputs|bad_inputs"
    "cli|cli")
  foreach(entry ${VEOMNI_CKPT_CASES})
    string(REPLACE "|" ";" parts "${entry}")
    list(GET parts 0 name)
    list(GET parts 1 args)
    separate_arguments(args)
    add_test(NAME checkpoint.${name} COMMAND bash ${VEOMNI_CKPT_SH} ${args})
    set_tests_properties(checkpoint.${name} PROPERTIES LABELS "integration;mpi" RESOURCE_LOCK mpi TIMEOUT 300)
  endforeach()
endif()
