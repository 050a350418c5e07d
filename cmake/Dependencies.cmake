# Finds the Debian-packaged dependencies and normalises their target names across versions.
find_package(Threads REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
find_package(yaml-cpp CONFIG REQUIRED)
find_package(spdlog CONFIG REQUIRED)
find_package(nlohmann_json CONFIG REQUIRED)
find_package(HDF5 REQUIRED COMPONENTS C)
find_package(MPI REQUIRED COMPONENTS C)

# yaml-cpp 0.7 exports `yaml-cpp`, 0.8 exports `yaml-cpp::yaml-cpp` (and deprecates the bare name).
if(TARGET yaml-cpp::yaml-cpp)
  set(VEOMNI_YAML_TARGET yaml-cpp::yaml-cpp)
else()
  set(VEOMNI_YAML_TARGET yaml-cpp)
endif()

# HDF5's imported target appeared in newer CMake modules; build our own from the variables to be safe.
if(NOT TARGET veomni_hdf5)
  add_library(veomni_hdf5 INTERFACE)
  target_include_directories(veomni_hdf5 SYSTEM INTERFACE ${HDF5_INCLUDE_DIRS})
  target_link_libraries(veomni_hdf5 INTERFACE ${HDF5_C_LIBRARIES})
  target_compile_definitions(veomni_hdf5 INTERFACE ${HDF5_DEFINITIONS} H5_USE_110_API)
endif()
