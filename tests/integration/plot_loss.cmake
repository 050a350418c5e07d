# scripts/plot_loss.sh: loss curves of several runs (one with a sparse eval_loss) into a PNG; skipped without gnuplot.
add_test(NAME plot_loss.png
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/plot_loss.sh ${CMAKE_SOURCE_DIR})
set_tests_properties(plot_loss.png PROPERTIES LABELS "integration" TIMEOUT 60 SKIP_RETURN_CODE 77)
