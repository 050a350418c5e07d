# Media unit tests (tests/unit/test_media*.cc), built only with the optional media library.
file(GLOB VEOMNI_MEDIA_TEST_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_media*.cc)
if(NOT TARGET veomni_media)
  set_source_files_properties(${VEOMNI_MEDIA_TEST_SOURCES} PROPERTIES HEADER_FILE_ONLY ON)
  return()
endif()
target_link_libraries(veomni_unit_tests PRIVATE veomni_media)
