# libveomni_text (tokenizer, chat template, text preprocessing): built only where PCRE2 and utf8proc are found.
# data/{tokenizer,chat_template,text_preprocess}*.cc leave veomni_common for it. Where either library is missing (the
# GPU machine has neither's headers) it, veomni-preprocess, bench_tokenizer and the tokenizer tests are left out; the
# training tools never link it. Included from libcommon/CMakeLists.txt.
set(VEOMNI_TEXT_SOURCE_REGEX "/data/(tokenizer|chat_template|text_preprocess)[^/]*\\.cc$")
list(FILTER VEOMNI_COMMON_SOURCES EXCLUDE REGEX "${VEOMNI_TEXT_SOURCE_REGEX}")
# Finding a chat template and naming it by its hash need neither library, and veomni-train checks data.chat_template
# with them: they stay in veomni_common.
set(VEOMNI_TEXT_COMMON_SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/data/chat_template_source.cc
    ${CMAKE_CURRENT_SOURCE_DIR}/data/chat_template_identity.cc ${CMAKE_CURRENT_SOURCE_DIR}/data/tokenizer_sha256.cc)
list(APPEND VEOMNI_COMMON_SOURCES ${VEOMNI_TEXT_COMMON_SOURCES})

find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(VEOMNI_PCRE2 QUIET IMPORTED_TARGET libpcre2-8)
  pkg_check_modules(VEOMNI_UTF8PROC QUIET IMPORTED_TARGET libutf8proc)
endif()

# Where tests and benchmarks find the real Qwen3 tokenizer.json (scripts/setup.sh fetches it there).
set(VEOMNI_TOKENIZER_JSON ${CMAKE_SOURCE_DIR}/.cache/tokenizers/qwen3/tokenizer.json
    CACHE FILEPATH "The Qwen3 tokenizer.json used by tests and benchmarks")

if(VEOMNI_PCRE2_FOUND AND VEOMNI_UTF8PROC_FOUND)
  file(GLOB VEOMNI_TEXT_SOURCES CONFIGURE_DEPENDS
    ${CMAKE_CURRENT_SOURCE_DIR}/data/tokenizer*.cc
    ${CMAKE_CURRENT_SOURCE_DIR}/data/chat_template*.cc
    ${CMAKE_CURRENT_SOURCE_DIR}/data/text_preprocess*.cc)
  list(REMOVE_ITEM VEOMNI_TEXT_SOURCES ${VEOMNI_TEXT_COMMON_SOURCES})
  add_library(veomni_text SHARED ${VEOMNI_TEXT_SOURCES})
  add_library(veomni::text ALIAS veomni_text)
  target_link_libraries(veomni_text PUBLIC veomni_common
    PRIVATE PkgConfig::VEOMNI_PCRE2 PkgConfig::VEOMNI_UTF8PROC veomni_warnings)
  target_compile_definitions(veomni_text PUBLIC VEOMNI_HAVE_TOKENIZER=1)
  # --chat-template model: the node worker (copied into the build tree's share/veomni as installed beside bin/) and
  # the folder holding @huggingface/jinja (scripts/setup.sh installs it into .cache/node_modules).
  set(VEOMNI_CHAT_TEMPLATE_WORKER ${CMAKE_SOURCE_DIR}/tools/veomni-preprocess/chat_template_worker.mjs)
  set(VEOMNI_NODE_MODULES ${CMAKE_SOURCE_DIR}/.cache/node_modules
      CACHE PATH "The node_modules folder holding @huggingface/jinja (veomni-preprocess --chat-template model)")
  configure_file(${VEOMNI_CHAT_TEMPLATE_WORKER} ${CMAKE_BINARY_DIR}/share/veomni/chat_template_worker.mjs COPYONLY)
  install(FILES ${VEOMNI_CHAT_TEMPLATE_WORKER} DESTINATION share/veomni)
  # An installed tree carries the package beside the worker, where the tool looks first.
  if(EXISTS ${VEOMNI_NODE_MODULES}/@huggingface/jinja)
    install(DIRECTORY ${VEOMNI_NODE_MODULES}/@huggingface/jinja DESTINATION share/veomni/node_modules/@huggingface)
  endif()
  set_property(SOURCE ${CMAKE_CURRENT_SOURCE_DIR}/data/chat_template_worker.cc APPEND PROPERTY COMPILE_DEFINITIONS
               VEOMNI_CHAT_TEMPLATE_WORKER_DEFAULT="${VEOMNI_CHAT_TEMPLATE_WORKER}"
               VEOMNI_NODE_MODULES_DEFAULT="${VEOMNI_NODE_MODULES}")
  set_target_properties(veomni_text PROPERTIES VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR})
  install(TARGETS veomni_text LIBRARY DESTINATION lib)
  set(VEOMNI_HAVE_TOKENIZER ON CACHE INTERNAL "")
  message(STATUS "veomni: tokenizer and veomni-preprocess enabled (PCRE2 ${VEOMNI_PCRE2_VERSION}, "
                 "utf8proc ${VEOMNI_UTF8PROC_VERSION})")
else()
  set(VEOMNI_HAVE_TOKENIZER OFF CACHE INTERNAL "")
  message(STATUS "veomni: tokenizer and veomni-preprocess disabled (needs pkg-config, libpcre2-dev and "
                 "libutf8proc-dev)")
endif()
