#!/usr/bin/env python3
"""Fetches the released libnccl.so.2 of each NCCL whose entry points traintime checks, for the tests.

tests/nccl/test_nccl_exports.py reads every entry point such a library exports and fails on one
that traintime neither wraps nor lists as launching no GPU work. The wheels come from PyPI
(nvidia-nccl-cu12, pinned below: the NCCL PyTorch pins, and the newest) through `pip download
--no-deps` into OUT/wheels; the library and its nccl.h are unpacked to OUT/<version>/ and the
wheel (300-350 MB) is deleted, so an unpacked release is the cache and is never fetched again.
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

# PyPI versions of nvidia-nccl-cu12: 2.28.9 is what torch 2.11 pins; 2.32.3 brought the *Config
# collectives and the one-sided calls (ncclPutSignal, ncclSignal, ncclWaitSignal).
RELEASES = ("2.28.9", "2.32.3")
PACKAGE = "nvidia-nccl-cu12"
MEMBERS = {"libnccl.so.2": "nvidia/nccl/lib/libnccl.so.2", "nccl.h": "nvidia/nccl/include/nccl.h"}


def fetch(version: str, out: Path, python: str) -> str:
    """The releases.txt line of `version`, downloading and unpacking it when needed."""
    folder = out / version
    lib, header = folder / "libnccl.so.2", folder / "nccl.h"
    if lib.is_file() and header.is_file():
        return f"{version} {lib} {header}"
    wheels_dir = out / "wheels"
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
    args = ap.parse_args()
    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    lines = [fetch(version, out, args.python) for version in RELEASES]
    (out / "releases.txt").write_text("".join(line + "\n" for line in lines))
    found = sum(" missing " not in line for line in lines)
    print(f"fetch-nccl-releases: {found} of {len(lines)} NCCL releases in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
