"""Builds the wheel once per run, as a user does (`pip wheel . -w DIR` from the checkout, with
build isolation: scikit-build-core, PyPI's zig and the nvidia-* headers come from PyPI), and
installs it into fresh virtual environments for the other tests of tests/wheel and the README
test (the CTest fixture "wheel"). Also links the cached wheel tools (auditwheel) and the Debian
11 root. Without PyPI the wheel is not built and the tests that need it are "Not Run" (failed
under TRAINTIME_CI)."""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from testlib import SOURCE_DIR, SYSTEM_PYTHON, check, clean_env, missing_dependency, wheel_dir

OFFLINE_SIGNS = ("NewConnectionError", "No matching distribution found", "Could not find a version",
                 "Temporary failure in name resolution", "Network is unreachable")


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)


def test_build_and_install(build_dir: Path) -> None:
    out = wheel_dir(build_dir)
    dist = out / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    for venv in ("venv", "venv-torch"):
        shutil.rmtree(out / venv, ignore_errors=True)
    dist.mkdir(parents=True)
    started = time.monotonic()
    # The user's command. The build folder is build-wheel/ in the checkout: a later build there
    # (the README's pip install) compiles only what changed.
    # PATH as the README test has it (PyPI's packages first): the same ninja builds here and in its
    # pip install, and a build folder whose log another ninja version wrote is rebuilt from scratch.
    env = clean_env()
    pyenv_bin = build_dir / "pyenv" / "bin"
    if pyenv_bin.is_dir():
        env["PATH"] = f"{pyenv_bin}{os.pathsep}{env.get('PATH', '')}"
    built = run([SYSTEM_PYTHON, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check", "-w", dist,
                 SOURCE_DIR], env=env, timeout=1700)
    print(built.stdout[-4000:], built.stderr[-4000:])
    print(f"wheel built in {time.monotonic() - started:.0f} s")
    if built.returncode != 0 and any(sign in built.stderr for sign in OFFLINE_SIGNS):
        missing_dependency("pip could not reach PyPI for the wheel's build requirements (pyproject.toml)")
    check(built.returncode == 0, f"pip wheel failed:\n{built.stderr[-3000:]}")
    wheels = sorted(dist.glob("traintime-*.whl"))
    check(len(wheels) == 1, f"expected one wheel in {dist}, found {wheels}")

    # Fresh environments with nothing but pip: no compiler, CMake or CUDA is needed to install.
    for venv, extra in (("venv", []), ("venv-torch", ["--system-site-packages"])):
        made = run([SYSTEM_PYTHON, "-m", "venv", *extra, out / venv])
        check(made.returncode == 0, f"python3 -m venv {venv}: {made.stderr}")
        installed = run([out / venv / "bin" / "pip", "install", "--no-index", "--no-deps",
                         "--disable-pip-version-check", wheels[0]], env=clean_env())
        check(installed.returncode == 0, f"pip install of the wheel into {venv} failed:\n{installed.stderr}")
        check((out / venv / "bin" / "traintime").exists(), f"{venv}/bin/traintime was not installed")
    installed_lib = sorted((out / "venv").glob("lib/python3*/site-packages/traintime/_lib/libtraintime.so"))
    check(len(installed_lib) == 1, f"the wheel installed no traintime/_lib/libtraintime.so: {installed_lib}")
    link = out / "libtraintime.so"  # what the wheel's run of tests/e2e preloads (--lib)
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(installed_lib[0])

    tools = run([SYSTEM_PYTHON, SOURCE_DIR / "scripts" / "pyenv.py", "--set", "wheel-tools", out / "wheel-tools"])
    check(tools.returncode == 0, f"scripts/pyenv.py --set wheel-tools: {tools.stderr}")
    root = run([SYSTEM_PYTHON, SOURCE_DIR / "scripts" / "debian_root.py", out / "debian11-root.tar"], timeout=900)
    check(root.returncode == 0, f"scripts/debian_root.py: {root.stderr}")
