# TensorBoard event files need protobuf: the Event messages (metrics/tensorboard_event.proto) are generated with
# protoc. Where protobuf is missing (libprotobuf-dev and protobuf-compiler), veomni builds without TensorBoard
# support: train.use_tensorboard defaults to false and setting it true is an input error. Included from
# libcommon/CMakeLists.txt after veomni_common is defined.
option(VEOMNI_TENSORBOARD "Write TensorBoard event files (needs protobuf)" ON)
if(VEOMNI_TENSORBOARD)
  find_package(Protobuf QUIET)
endif()
if(VEOMNI_TENSORBOARD AND Protobuf_FOUND AND Protobuf_PROTOC_EXECUTABLE AND TARGET protobuf::libprotobuf-lite)
  # The generated code is compiled without our warnings and its header is included as a system header.
  set(VEOMNI_PROTO_OUT ${CMAKE_BINARY_DIR}/generated_proto)
  file(MAKE_DIRECTORY ${VEOMNI_PROTO_OUT})
  add_library(veomni_tensorboard_proto OBJECT ${CMAKE_CURRENT_SOURCE_DIR}/metrics/tensorboard_event.proto)
  protobuf_generate(TARGET veomni_tensorboard_proto LANGUAGE cpp
    IMPORT_DIRS ${CMAKE_CURRENT_SOURCE_DIR} PROTOC_OUT_DIR ${VEOMNI_PROTO_OUT})
  target_include_directories(veomni_tensorboard_proto SYSTEM PUBLIC ${VEOMNI_PROTO_OUT})
  target_link_libraries(veomni_tensorboard_proto PUBLIC protobuf::libprotobuf-lite)
  target_sources(veomni_common PRIVATE $<TARGET_OBJECTS:veomni_tensorboard_proto>)
  target_include_directories(veomni_common SYSTEM PRIVATE ${VEOMNI_PROTO_OUT})
  target_link_libraries(veomni_common PRIVATE protobuf::libprotobuf-lite)
  add_dependencies(veomni_common veomni_tensorboard_proto)
  target_compile_definitions(veomni_common PRIVATE VEOMNI_HAVE_TENSORBOARD=1)
  set(VEOMNI_HAVE_TENSORBOARD ON CACHE INTERNAL "")
  message(STATUS "veomni: TensorBoard event files enabled (protobuf ${Protobuf_VERSION})")
else()
  set(VEOMNI_HAVE_TENSORBOARD OFF CACHE INTERNAL "")
  message(STATUS "veomni: TensorBoard event files disabled (needs libprotobuf-dev and protobuf-compiler; "
                 "train.use_tensorboard true is then an error)")
endif()
