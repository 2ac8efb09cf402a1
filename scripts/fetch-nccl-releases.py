#!/usr/bin/env python3
"""Fetches the released libnccl.so.2 of each NCCL whose entry points traintime checks, for the tests.

tests/nccl/test_nccl_exports.py reads every entry point such a library exports and fails on one
that traintime neither wraps nor lists as launching no GPU work. The wheels come from PyPI
(nvidia-nccl-cu12, pinned below: the NCCL PyTorch pins, and the newest) through `pip download
--no-deps`; the library and its nccl.h are unpacked to CACHE/nccl-<version>/ (CACHE: --cache,
default ~/.cache/traintime) and the wheel (300-350 MB) is deleted, so an unpacked release is
fetched once per user, not once per build folder or checkout (a clean clone in CI reuses it).
OUT/releases.txt has one line per release: "<version> <library> <header>", or
"<version> missing <why>" when PyPI could not give it (no network); the test of a missing
release then fails under TRAINTIME_CI=1 and is reported Not Run elsewhere, never passed.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from user_cache import traintime_cache  # noqa: E402  (the scripts' one cache folder)

# PyPI versions of nvidia-nccl-cu12: 2.28.9 is what torch 2.11 pins; 2.32.3 brought the *Config
# collectives and the one-sided calls (ncclPutSignal, ncclSignal, ncclWaitSignal).
RELEASES = ("2.28.9", "2.32.3")
PACKAGE = "nvidia-nccl-cu12"
MEMBERS = {"libnccl.so.2": "nvidia/nccl/lib/libnccl.so.2", "nccl.h": "nvidia/nccl/include/nccl.h"}


def fetch(version: str, cache: Path, python: str) -> str:
    """The releases.txt line of `version`, downloading and unpacking it into the cache when needed."""
    folder = cache / f"nccl-{version}"
    lib, header = folder / "libnccl.so.2", folder / "nccl.h"
    if lib.is_file() and header.is_file():
        return f"{version} {lib} {header}"
    wheels_dir = cache / "nccl-wheels"
    wheels_dir.mkdir(parents=True, exist_ok=True)
    pattern = f"{PACKAGE.replace('-', '_')}-{version}-*.whl"
    wheels = sorted(wheels_dir.glob(pattern))
    if not wheels:
        p = subprocess.run([python, "-m", "pip", "download", "--no-deps", "--quiet", "--timeout", "60",
                            "--retries", "3", "--dest", str(wheels_dir), f"{PACKAGE}=={version}"],
                           capture_output=True, text=True)
        wheels = sorted(wheels_dir.glob(pattern))
        if not wheels:
            last = (p.stderr.strip().splitlines() or ["no output"])[-1]
            print(f"fetch-nccl-releases: warning: NCCL {version} not checked: pip could not download "
                  f"{PACKAGE}=={version} ({last})", file=sys.stderr)
            return f"{version} missing pip could not download {PACKAGE}=={version}: {last}"
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheels[0]) as wheel:
        names = set(wheel.namelist())
        for target, member in MEMBERS.items():
            if member not in names:
                raise SystemExit(f"fetch-nccl-releases: {wheels[0]} holds no {member}")
            partial = folder / (target + ".part")
            with wheel.open(member) as src, open(partial, "wb") as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
            partial.rename(folder / target)
    wheels[0].unlink()
    return f"{version} {lib} {header}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="folder for the unpacked releases and releases.txt")
    ap.add_argument("--python", default=sys.executable, help="interpreter whose pip downloads")
    ap.add_argument("--cache", type=Path, help="folder of the unpacked releases (default: ~/.cache/traintime)")
    args = ap.parse_args()
    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    cache: Path = (args.cache or traintime_cache()).resolve()
    lines = [fetch(version, cache, args.python) for version in RELEASES]
    (out / "releases.txt").write_text("".join(line + "\n" for line in lines))
    found = sum(" missing " not in line for line in lines)
    print(f"fetch-nccl-releases: {found} of {len(lines)} NCCL releases in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
