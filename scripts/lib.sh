# Shared helpers for veomni's scripts (sourced, not run).
veomni_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
veomni_build_dir=${VEOMNI_BUILD_DIR:-$veomni_root/build}

veomni_say() { printf '\033[1m[veomni]\033[0m %s\n' "$*" >&2; }

# Configures (first time) and builds everything with ninja; warnings are errors.
veomni_build() {
  if [ ! -f "$veomni_build_dir/build.ninja" ]; then
    veomni_say "configuring $veomni_build_dir"
    cmake -S "$veomni_root" -B "$veomni_build_dir" -G Ninja -DVEOMNI_WERROR=ON "$@" >/dev/null
  fi
  veomni_say "building"
  cmake --build "$veomni_build_dir" -- -j"$(nproc)"
}

# mpirun as root in containers needs these; harmless otherwise.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
