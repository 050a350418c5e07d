# tests/integration/man_pages.sh: every man page renders without groff warnings; every tool has a page.
add_test(NAME man_pages.render
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/man_pages.sh ${CMAKE_SOURCE_DIR})
set_tests_properties(man_pages.render PROPERTIES LABELS "integration" TIMEOUT 60)
