# Shared helpers for veomni's scripts (sourced, not run).
veomni_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
veomni_build_dir=${VEOMNI_BUILD_DIR:-$veomni_root/build}

veomni_say() { printf '\033[1m[veomni]\033[0m %s\n' "$*" >&2; }

# Configures (first time) and builds everything with ninja; warnings are errors. A first build from scratch is what
# new users and CI pay, so it is made short: the library in unity batches (each batch parses and instantiates the
# shared headers once) and no debug info. VEOMNI_CMAKE_ARGS adds or overrides options (e.g. a RelWithDebInfo build:
# VEOMNI_CMAKE_ARGS="-DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_UNITY_BUILD=OFF").
veomni_build() {
  if [ ! -f "$veomni_build_dir/build.ninja" ]; then
    veomni_say "configuring $veomni_build_dir"
    local launcher=()
    command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache
      -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
    # shellcheck disable=SC2086
    cmake -S "$veomni_root" -B "$veomni_build_dir" -G Ninja -DVEOMNI_WERROR=ON -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" -DCMAKE_C_FLAGS_RELEASE="-O2 -DNDEBUG" -DCMAKE_UNITY_BUILD=ON \
      -DCMAKE_UNITY_BUILD_BATCH_SIZE=16 "${launcher[@]}" ${VEOMNI_CMAKE_ARGS:-} "$@" >/dev/null
  fi
  veomni_say "building"
  cmake --build "$veomni_build_dir" -- -j"$(nproc)"
}

# mpirun as root in containers needs these; harmless otherwise.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
