#!/usr/bin/env python3
"""The CUDA libraries a GPU program built here misses on the GPU machine, and where they are.

    python3 scripts/gpu_libs.py PROGRAM...

The GPU machine may keep libcublas.so.13, libnccl.so.2 or libcupti.so.13 in the CUDA toolkit or
only in PyTorch's nvidia-* wheels. For every library ldd reports "not found" in a PROGRAM (or
shared object), the first folder holding it is taken from the CUDA toolkit's library folders,
then every sys.path entry's nvidia/*/lib. Prints the LD_LIBRARY_PATH to use (those folders
before the current one) on stdout and one "using FOLDER" line per folder added on stderr; exits
2 with one line naming the program and the library when one is nowhere. A file ldd cannot read
(a script) needs nothing.

The one lookup of scripts/gpu-validate.sh and scripts/gpu_overhead.py (which imports it).
"""
from __future__ import annotations

import argparse
import glob
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Tuple

TOOLKIT_DIRS = ("/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib")


class MissingLibrary(Exception):
    """A library a program needs is in none of the folders looked in: the message says which."""


def search_dirs() -> List[str]:
    dirs = list(TOOLKIT_DIRS)
    for p in sys.path:
        dirs += sorted(glob.glob(os.path.join(p, "nvidia", "*", "lib")))
    return [d for d in dirs if os.path.isdir(d)]


def ldd(path: Path, env: Dict[str, str]) -> Dict[str, Optional[str]]:
    """soname -> resolved path (None when not found); {} for a file ldd cannot read."""
    try:
        out = subprocess.run(["ldd", str(path)], env=env, capture_output=True, text=True,
                             timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    libs: Dict[str, Optional[str]] = {}
    for line in out.splitlines():
        m = re.match(r"\s*(\S+) => (not found|(\S+))", line)
        if m:
            libs[m.group(1)] = None if m.group(2) == "not found" else m.group(3)
    return libs


def library_env(files: List[Path], env: Dict[str, str]) -> Tuple[Dict[str, str], List[str]]:
    """A copy of env whose LD_LIBRARY_PATH lets every file load, and the folders it added."""
    env = dict(env)
    added: List[str] = []
    dirs = search_dirs()
    for f in files:
        for lib, where in ldd(f, env).items():
            if where is not None:
                continue
            hit = next((d for d in dirs if os.path.exists(os.path.join(d, lib))), None)
            if hit is None:
                raise MissingLibrary(f"{f} cannot load: {lib} not found (looked in the CUDA toolkit "
                                     f"and python's nvidia-* packages); put its folder on "
                                     f"LD_LIBRARY_PATH")
            if hit not in added:
                added.append(hit)
                old = env.get("LD_LIBRARY_PATH")
                env["LD_LIBRARY_PATH"] = hit + (":" + old if old else "")
    return env, added


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("programs", nargs="+", type=Path, help="programs or shared objects to load")
    a = ap.parse_args(argv)
    try:
        env, added = library_env(a.programs, dict(os.environ))
    except MissingLibrary as e:
        print(f"gpu_libs: {e}", file=sys.stderr)
        return 2
    for d in added:
        print(f"using {d}", file=sys.stderr)
    print(env.get("LD_LIBRARY_PATH", ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
