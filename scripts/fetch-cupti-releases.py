#!/usr/bin/env python3
"""Fetches the released libcupti and headers of every CUPTI 12.x and 13.x that traintime decodes.

PyTorch's cu12x wheels load the 12.x libraries, its cu13x wheels and PyPI's nvidia-cuda-cupti the
13.x ones. tests/cupti/cupti_release_test.cpp checks the adapter against each release: its record
layout against the release's own cupti_activity.h (every release), and, where the library answers
without a GPU (12.x, 13.1), its version and its own buffer walker. The wheels come from PyPI
(pinned below) into a cache folder kept between builds (~/.cache/traintime/cupti-wheels); the
library is extracted to OUT/<release>/libcupti.so.<major> and the headers to OUT/<release>/include.
OUT/releases.txt lists "release api library include kernel memcpy ptop memset walks" lines for
CMake, which makes the tests of each: the newest record struct of each family in the release's
header (the one it writes) and whether its library answers without a GPU (1 or 0). A release PyPI
cannot give (no network) is left out with one warning line naming it; its tests then do not
exist, and the others still run. The API version beside each release is what that release's
libcupti reports (13.x: its cupti_version.h): it is the expectation the tests check, written here
from the releases, not from the code under test.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from user_cache import traintime_cache  # noqa: E402  (the scripts' one cache folder)

# release: (PyPI package, version, cuptiGetVersion() of its libcupti, whether the library answers
# without a GPU). Without a driver CUPTI 13.2 crashes in cuptiGetVersion and 13.3-13.5 answer every
# call with CUPTI_ERROR_UNKNOWN: their libraries are checked on a GPU machine only (headers here).
RELEASES: dict[str, tuple[str, str, int, bool]] = {
    "12.1": ("nvidia-cuda-cupti-cu12", "12.1.105", 18, True),
    "12.2": ("nvidia-cuda-cupti-cu12", "12.2.142", 20, True),
    "12.3": ("nvidia-cuda-cupti-cu12", "12.3.101", 21, True),
    "12.4": ("nvidia-cuda-cupti-cu12", "12.4.127", 22, True),
    "12.6": ("nvidia-cuda-cupti-cu12", "12.6.80", 24, True),
    "12.8": ("nvidia-cuda-cupti-cu12", "12.8.90", 26, True),
    "12.9": ("nvidia-cuda-cupti-cu12", "12.9.79", 28, True),
    "13.1": ("nvidia-cuda-cupti", "13.1.115", 130101, True),
    "13.2": ("nvidia-cuda-cupti", "13.2.86", 130202, False),
    "13.3": ("nvidia-cuda-cupti", "13.3.75", 130301, False),
    "13.4": ("nvidia-cuda-cupti", "13.4.92", 130401, False),
    "13.5": ("nvidia-cuda-cupti", "13.5.25", 130500, False),
}
FAMILIES = ("Kernel", "Memcpy", "MemcpyPtoP", "Memset")


def newest_structs(header: Path) -> list[str]:
    """The newest record struct of each family the release's cupti_activity.h declares."""
    text = header.read_text(errors="replace")
    out = []
    for family in FAMILIES:
        numbers = [int(n) for n in re.findall(rf"}}\s*CUpti_Activity{family}(\d+)\s*;", text)]
        if not numbers:
            raise SystemExit(f"fetch-cupti-releases: {header} declares no CUpti_Activity{family}<N>")
        out.append(f"CUpti_Activity{family}{max(numbers)}")
    return out


def fetch(release: str, package: str, version: str, cache: Path, out: Path, python: str) -> Path | None:
    soname = f"libcupti.so.{release.split('.')[0]}"
    lib = out / release / soname
    include = out / release / "include"
    if lib.is_file() and (include / "cupti_activity.h").is_file():
        return lib
    stem = package.replace("-", "_")
    wheels = sorted(cache.glob(f"{stem}-{version}-*.whl"))
    if not wheels:
        p = subprocess.run([python, "-m", "pip", "download", "--no-deps", "--quiet", "--dest", str(cache),
                            f"{package}=={version}"], capture_output=True, text=True)
        wheels = sorted(cache.glob(f"{stem}-{version}-*.whl"))
        if not wheels:
            last = (p.stderr.strip().splitlines() or ["no output"])[-1]
            print(f"fetch-cupti-releases: warning: CUPTI {release} not tested: pip could not download "
                  f"{package}=={version} ({last})", file=sys.stderr)
            return None
    with zipfile.ZipFile(wheels[0]) as wheel:
        names = wheel.namelist()
        member = next((n for n in names if n.endswith(f"/lib/{soname}")), None)
        if member is None:
            raise SystemExit(f"fetch-cupti-releases: {wheels[0]} holds no lib/{soname}")
        lib.parent.mkdir(parents=True, exist_ok=True)
        lib.write_bytes(wheel.read(member))
        prefix = member[: -len(f"lib/{soname}")] + "include/"
        for name in names:
            if name.startswith(prefix) and name.endswith(".h"):
                target = include / name[len(prefix):]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(wheel.read(name))
    return lib


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="folder for the extracted libraries and releases.txt")
    ap.add_argument("--cache", type=Path, help="wheel cache (default: ~/.cache/traintime/cupti-wheels)")
    ap.add_argument("--python", default=sys.executable, help="interpreter whose pip downloads")
    args = ap.parse_args()
    out: Path = args.out.resolve()
    cache: Path = (args.cache or traintime_cache() / "cupti-wheels").resolve()
    cache.mkdir(parents=True, exist_ok=True)
    lines = []
    for release, (package, version, api, walks) in RELEASES.items():
        lib = fetch(release, package, version, cache, out, args.python)
        if lib is not None:
            include = lib.parent / "include"
            structs = " ".join(newest_structs(include / "cupti_activity.h"))
            lines.append(f"{release} {api} {lib} {include} {structs} {int(walks)}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "releases.txt").write_text("".join(line + "\n" for line in lines))
    print(f"fetch-cupti-releases: {len(lines)} CUPTI 12.x and 13.x releases in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
