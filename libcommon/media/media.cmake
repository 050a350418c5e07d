# libveomni_media (image, audio and video decoding and processing for multimodal preprocessing): built only where
# libpng, libjpeg, libsndfile, libsoxr and FFmpeg's libraries are found, and the text library (libveomni_text: the
# multimodal pipeline tokenizes) is built. The GPU machine lacks their development
# headers, so there it, the media tests and veomni-preprocess's multimodal mode are left out. Included from
# libcommon/CMakeLists.txt.
find_package(PkgConfig QUIET)
set(VEOMNI_MEDIA_MODULES libpng libjpeg sndfile soxr libavformat libavcodec libswscale libavutil)
set(VEOMNI_MEDIA_FOUND OFF)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(VEOMNI_MEDIA_LIBS QUIET IMPORTED_TARGET ${VEOMNI_MEDIA_MODULES})
  set(VEOMNI_MEDIA_FOUND ${VEOMNI_MEDIA_LIBS_FOUND})
endif()

if(VEOMNI_MEDIA_FOUND AND TARGET veomni_text)
  file(GLOB VEOMNI_MEDIA_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/media/*.cc)
  add_library(veomni_media SHARED ${VEOMNI_MEDIA_SOURCES})
  add_library(veomni::media ALIAS veomni_media)
  target_link_libraries(veomni_media PUBLIC veomni_common veomni_text PRIVATE PkgConfig::VEOMNI_MEDIA_LIBS veomni_warnings)
  target_compile_definitions(veomni_media PUBLIC VEOMNI_HAVE_MEDIA=1)
  set_target_properties(veomni_media PROPERTIES VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR})
  install(TARGETS veomni_media LIBRARY DESTINATION lib)
  message(STATUS "veomni: media decoding enabled (libpng, libjpeg, libsndfile, libsoxr, FFmpeg)")
else()
  message(STATUS "veomni: media decoding disabled (needs pkg-config and libpng-dev libjpeg-dev libsndfile1-dev "
                 "libsoxr-dev libavformat-dev libavcodec-dev libswscale-dev libavutil-dev, and the text library)")
endif()
