# Objectives' per-sequence sums over a Ulysses SP group of two MPI ranks (a sequence spanning both ranks).
if(VEOMNI_MPIEXEC)
  add_test(NAME objective_sequence_sums_2ranks
    COMMAND ${VEOMNI_MPIEXEC} --oversubscribe --bind-to none -np 2 $<TARGET_FILE:veomni_unit_tests>
            --gtest_filter=SequenceSums.*:SequenceLastValues.* --gtest_brief=1)
  set_tests_properties(objective_sequence_sums_2ranks PROPERTIES
    LABELS "integration;mpi" RESOURCE_LOCK mpi TIMEOUT 120
    ENVIRONMENT
    "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1;OMPI_MCA_mpi_yield_when_idle=1")
endif()
