# Instrumented builds, each in its own build directory: VEOMNI_FUZZ (clang, libFuzzer targets of tests/fuzz with
# ASan+UBSan, see scripts/fuzz.sh) and VEOMNI_SANITIZE (ASan+UBSan of everything, see scripts/sanitize.sh).
option(VEOMNI_FUZZ "Build the libFuzzer targets of tests/fuzz (needs clang; CUDA off)" OFF)
option(VEOMNI_SANITIZE "Build everything with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)

set(VEOMNI_SANITIZER_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
if(VEOMNI_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "VEOMNI_FUZZ needs clang (libFuzzer): configure with CC=clang CXX=clang++")
  endif()
  if(VEOMNI_HAVE_CUDA)
    message(FATAL_ERROR "VEOMNI_FUZZ needs -DVEOMNI_CUDA=OFF")
  endif()
  # Coverage instrumentation for libFuzzer in every object; the fuzz targets add -fsanitize=fuzzer at link time.
  add_compile_options(-fsanitize=fuzzer-no-link ${VEOMNI_SANITIZER_FLAGS})
  add_link_options(${VEOMNI_SANITIZER_FLAGS})
elseif(VEOMNI_SANITIZE)
  add_compile_options(${VEOMNI_SANITIZER_FLAGS})
  add_link_options(${VEOMNI_SANITIZER_FLAGS})
endif()
