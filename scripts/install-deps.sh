#!/usr/bin/env bash
# Installs what traintime needs, from Debian/Ubuntu packages. A prepared machine is detected with
# dpkg and left alone.
#
#   scripts/install-deps.sh [PACKAGE...]          build and test (test.sh, sanitize.sh): everything
#   scripts/install-deps.sh --demo [PACKAGE...]   only what scripts/demo.sh builds and runs
#
# Further arguments name packages a caller needs besides (fuzz.sh: clang-14 libclang-rt-14-dev).
set -euo pipefail

# The demo: compiler, CMake, the header-only libraries, simdjson (traintime-report's rank-file
# parser), Catch2 and pkg-config (the configure step looks for them even when only the demo's
# targets are built), Open MPI's mpirun for the 4 simulated ranks (its development package only with
# the tests: nothing the demo builds includes mpi.h; examples/cuda_mlp uses it when present),
# Debian's python3 (the demo compares each rank file with the simulated truth), and zlib's headers
# (sim_replay reads gzipped traces; the configure step looks for them).
DEMO_DEPS=(g++ cmake make pkg-config libspdlog-dev libfmt-dev nlohmann-json3-dev libsimdjson-dev catch2
           libcli11-dev openmpi-bin python3 zlib1g-dev)
# The tests besides: Open MPI's headers (examples/cuda_mlp's MPI build), Google Benchmark
# (bench/), pytest, pip and setuptools (the Python package is installed with pip in a test) and
# PyTorch 1.13 for Debian's python3 (/usr/bin/python3, which the tests call by path); headless
# Chromium renders the HTML report in tests/report; the Prometheus client library parses the
# live-metrics file; python3-venv makes the virtual environment PyPI's packages go into
# (scripts/pyenv.py) and the ones the wheel is installed in; ccache keeps the compiled objects of
# every build folder between builds and CI runs (cmake/CompilerCache.cmake); debootstrap makes the
# Debian 11 root the wheel is tested in (scripts/debian_root.py).
TEST_DEPS=(libopenmpi-dev libbenchmark-dev python3-pytest python3-pip python3-setuptools python3-torch
           python3-prometheus-client python3-venv chromium ccache debootstrap)

wanted=("${DEMO_DEPS[@]}")
if [ "${1:-}" = "--demo" ]; then
  shift
else
  wanted+=("${TEST_DEPS[@]}")
fi

missing=()
for pkg in "${wanted[@]}" "$@"; do
  if ! dpkg -s "$pkg" >/dev/null 2>&1; then missing+=("$pkg"); fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "traintime: missing packages: ${missing[*]}" >&2
  echo "traintime: install them as root, e.g.: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi

echo "traintime: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
