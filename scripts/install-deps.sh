#!/usr/bin/env bash
# Installs what traintime needs to build and test, from Debian/Ubuntu packages. Sourced or run
# by test.sh and demo.sh. A prepared machine is detected with dpkg and left alone. Arguments name
# further packages a caller needs (fuzz.sh: clang-14 libclang-rt-14-dev).
set -euo pipefail

# Build: compiler, CMake, the header-only libraries and Catch2, Open MPI for the multi-rank runs.
# Tests: Debian's python3 (/usr/bin/python3, which the tests call by path) with pytest, pip and
# setuptools (the Python package is installed with pip in a test) and PyTorch 1.13; pkg-config
# for the out-of-tree consumer test; headless Chromium renders the HTML report in tests/report;
# the Prometheus client library parses the live-metrics file; python3-venv makes the virtual
# environment PyPI's packages go into (scripts/pyenv.py).
TRAINTIME_DEPS=(g++ cmake make libspdlog-dev libfmt-dev nlohmann-json3-dev catch2 libcli11-dev
                openmpi-bin libopenmpi-dev libbenchmark-dev
                pkg-config python3 python3-pytest python3-pip python3-setuptools python3-torch
                python3-prometheus-client python3-venv chromium)

missing=()
for pkg in "${TRAINTIME_DEPS[@]}" "$@"; do
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
