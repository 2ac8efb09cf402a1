#!/usr/bin/env python3
"""Fetches the released libcupti of every CUPTI 12.x that traintime decodes, for the tests.

PyTorch's cu12x wheels load these libraries; each answers cuptiGetVersion and walks activity
buffers without a GPU, so tests/cupti/cupti_release_test.cpp checks the adapter against each one.
The wheels come from PyPI (nvidia-cuda-cupti-cu12, pinned below) into a cache folder kept between
builds (~/.cache/traintime/cupti-wheels); the library is extracted to OUT/<release>/libcupti.so.12
and OUT/releases.txt lists "release api path" lines for CMake, which makes a test of each. A
release PyPI cannot give (no network) is left out with one warning line naming it; its test then
does not exist, and the others still run. The API version beside each release is what that release's libcupti reports: it is
the expectation the test checks, written here from the releases, not from the code under test.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import zipfile
from pathlib import Path

# release: (PyPI version of nvidia-cuda-cupti-cu12, cuptiGetVersion() of its libcupti)
RELEASES: dict[str, tuple[str, int]] = {
    "12.1": ("12.1.105", 18),
    "12.2": ("12.2.142", 20),
    "12.3": ("12.3.101", 21),
    "12.4": ("12.4.127", 22),
    "12.6": ("12.6.80", 24),
    "12.8": ("12.8.90", 26),
    "12.9": ("12.9.79", 28),
}


def fetch(release: str, version: str, cache: Path, out: Path, python: str) -> Path | None:
    lib = out / release / "libcupti.so.12"
    if lib.is_file():
        return lib
    wheels = sorted(cache.glob(f"nvidia_cuda_cupti_cu12-{version}-*.whl"))
    if not wheels:
        p = subprocess.run([python, "-m", "pip", "download", "--no-deps", "--quiet", "--dest", str(cache),
                            f"nvidia-cuda-cupti-cu12=={version}"], capture_output=True, text=True)
        wheels = sorted(cache.glob(f"nvidia_cuda_cupti_cu12-{version}-*.whl"))
        if not wheels:
            last = (p.stderr.strip().splitlines() or ["no output"])[-1]
            print(f"fetch-cupti-releases: warning: CUPTI {release} not tested: pip could not download "
                  f"nvidia-cuda-cupti-cu12=={version} ({last})", file=sys.stderr)
            return None
    with zipfile.ZipFile(wheels[0]) as wheel:
        member = next((n for n in wheel.namelist() if n.endswith("/lib/libcupti.so.12")), None)
        if member is None:
            raise SystemExit(f"fetch-cupti-releases: {wheels[0]} holds no lib/libcupti.so.12")
        lib.parent.mkdir(parents=True, exist_ok=True)
        lib.write_bytes(wheel.read(member))
    return lib


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="folder for the extracted libraries and releases.txt")
    ap.add_argument("--cache", type=Path, help="wheel cache (default: ~/.cache/traintime/cupti-wheels)")
    ap.add_argument("--python", default=sys.executable, help="interpreter whose pip downloads")
    args = ap.parse_args()
    out: Path = args.out.resolve()
    default_cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "traintime" / "cupti-wheels"
    cache: Path = (args.cache or default_cache).resolve()
    cache.mkdir(parents=True, exist_ok=True)
    lines = []
    for release, (version, api) in RELEASES.items():
        lib = fetch(release, version, cache, out, args.python)
        if lib is not None:
            lines.append(f"{release} {api} {lib}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "releases.txt").write_text("".join(line + "\n" for line in lines))
    print(f"fetch-cupti-releases: {len(lines)} CUPTI 12.x releases in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
