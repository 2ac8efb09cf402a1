#!/usr/bin/env python3
"""Makes a minimal Debian root with debootstrap, once per content, cached as a tarball.

tests/wheel installs the wheel into Debian 11 (bullseye: glibc 2.31, Python 3.9, what a cluster
older than our Debian 12 has) and runs traintime there. The root is debootstrap's minbase of the
suite plus PACKAGES, from the Debian registry this machine's apt uses (as fresh-machine.sh makes
Debian 12's). It is made once per (suite, variant, packages): CACHE/debian-<suite>-<key>.tar
(CACHE: --cache-dir, TRAINTIME_PYENV_CACHE or ~/.cache/traintime, as scripts/pyenv.py), and OUT
is a symbolic link to it. Needs root and debootstrap (scripts/install-deps.sh installs it).
Without the registry the root is not made: one warning line, and the tests that need it show as
"Not Run" (failed under TRAINTIME_CI).
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pyenv import default_cache, point  # noqa: E402  (one cache folder, one way to link it)

SUITE = "bullseye"
VARIANT = "minbase"
# python3-venv: ensurepip's pip, to install the wheel with no network inside the root.
PACKAGES = ["python3", "python3-venv"]
DEFAULT_MIRROR = "http://deb.debian.org/debian"


def mirror() -> str:
    """The Debian registry this machine's apt uses."""
    sources = Path("/etc/apt/sources.list.d/debian.sources")
    if sources.is_file():
        for line in sources.read_text().splitlines():
            if line.startswith("URIs:"):
                return line.split()[1]
    return DEFAULT_MIRROR


def root_key(suite: str, variant: str, packages: list[str]) -> str:
    return hashlib.sha256(f"{suite}\n{variant}\n{','.join(sorted(packages))}".encode()).hexdigest()[:16]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="where the tarball is linked (e.g. build/debian11-root.tar)")
    ap.add_argument("--cache-dir", type=Path, default=None,
                    help="folder of the cached roots (default: TRAINTIME_PYENV_CACHE or ~/.cache/traintime)")
    args = ap.parse_args()
    key = root_key(SUITE, VARIANT, PACKAGES)
    tar = (args.cache_dir or default_cache()).resolve() / f"debian-{SUITE}-{key}.tar"
    if not tar.is_file():
        if shutil.which("debootstrap") is None:
            print("debian_root: warning: debootstrap is missing (apt-get install debootstrap); the Debian 11 "
                  "tests do not run (they fail under TRAINTIME_CI)", file=sys.stderr)
            return 0
        tar.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="debian-root-", dir=tar.parent) as tmp:
            root = Path(tmp) / "root"
            made = subprocess.run(["debootstrap", f"--variant={VARIANT}", "--include=" + ",".join(PACKAGES),
                                   SUITE, str(root), mirror()], capture_output=True, text=True)
            if made.returncode != 0:
                last = (made.stdout.strip().splitlines() or made.stderr.strip().splitlines() or ["no output"])[-1]
                print(f"debian_root: warning: debootstrap {SUITE} failed ({last}); the Debian 11 tests do not run "
                      "(they fail under TRAINTIME_CI)", file=sys.stderr)
                return 0
            partial = Path(tmp) / "root.tar"
            subprocess.run(["tar", "-C", str(root), "-cf", str(partial), "."], check=True)
            os.replace(partial, tar)
    point_file(args.out, tar)
    return 0


def point_file(out: Path, target: Path) -> None:
    """OUT as a link to the cached tarball (pyenv.point does the same for folders)."""
    if out.is_symlink() and out.resolve() == target:
        return
    point(out, target)


if __name__ == "__main__":
    sys.exit(main())
