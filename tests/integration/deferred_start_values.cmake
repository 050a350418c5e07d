# Deferred start values (issue #19): every rank builds only its own FSDP shards from the initialisation or the HF
# checkpoint's rows, with the same bits as from materialised values and host memory of about its share of the model:
# the DeferredStartValues gtests on two and three MPI ranks (CPU).
if(VEOMNI_MPIEXEC)
  foreach(np 2 3)
    add_test(NAME deferred_start_values_${np}ranks
      COMMAND ${VEOMNI_MPIEXEC} --oversubscribe --bind-to none -np ${np} $<TARGET_FILE:veomni_unit_tests>
              --gtest_filter=DeferredStartValues* --gtest_brief=1)
    set_tests_properties(deferred_start_values_${np}ranks PROPERTIES LABELS "integration;mpi" RESOURCE_LOCK mpi
      TIMEOUT 300 ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1;OMPI_MCA_mpi_yield_when_idle=1")
  endforeach()
endif()
