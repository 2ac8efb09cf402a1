"""A job that records nothing is never silent, and no other process says so (pytest; CTest label
e2e). The process the user started under the preload ends with exactly one line when the job
recorded nothing, if it is a Python interpreter or started children (a launcher); ranks, fork
children, shells without children and plain programs stay silent. traintime.torch.instrument
and the framework callbacks warn once when the library is not preloaded."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from testlib import SOURCE_DIR, SYSTEM_PYTHON, check, clean_env

LINE = "traintime: nothing was recorded"


def env_for(build_dir: Path, out: Path, preload: bool = True, **extra: str) -> dict[str, str]:
    env = clean_env({"TRAINTIME_OUTPUT": str(out), "PYTHONPATH": str(SOURCE_DIR / "annotate" / "python")})
    if preload:
        env["LD_PRELOAD"] = str(build_dir / "lib" / "libtraintime.so")
    env.update(extra)
    return env


def run(cmd: list[str], env: dict[str, str], rc: int = 0) -> subprocess.CompletedProcess[str]:
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    check(p.returncode == rc, f"{cmd} exited {p.returncode}, expected {rc}:\n{p.stderr}")
    return p


def said(p: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in p.stderr.splitlines() if line.startswith(LINE)]


def test_a_python_job_that_records_nothing_ends_with_one_line(build_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    p = run([str(SYSTEM_PYTHON), "-c", "import sys; sum(range(10**5)); sys.exit(3)"], env_for(build_dir, out), rc=3)
    lines = p.stderr.splitlines()
    check(len(lines) == 1 and lines[0].startswith(LINE), f"expected one line, got {p.stderr!r}")
    check(str(out) in lines[0] and "traintime.torch.instrument(model, optimizer)" in lines[0]
          and "traintime.step()" in lines[0], f"the line names no folder or nothing to add: {lines[0]}")
    check(not out.exists(), "a job that recorded nothing created its output folder")
    # A fork child that exits normally inherits the exit handler: only the parent says it.
    fork = "import os, sys\nif os.fork() == 0:\n    sys.exit(0)\nos.wait()\n"
    p = run([str(SYSTEM_PYTHON), "-c", fork], env_for(build_dir, out))
    check(len(said(p)) == 1, f"a fork child said it too, or nobody did: {p.stderr!r}")
    # A shell that exec's the program (its pid stays the user's process) still says it once.
    p = run(["bash", "-c", f"exec {SYSTEM_PYTHON} -c pass"], env_for(build_dir, out))
    check(len(said(p)) == 1, f"exec'd Python: {p.stderr!r}")


def test_processes_that_are_not_the_job_stay_silent(build_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    python = str(SYSTEM_PYTHON)
    quiet = [
        (["/bin/true"], {}),                                          # a plain program
        (["bash", "-c", "exit 0"], {}),                               # a shell with no child
        ([python, "-c", "pass"], {"RANK": "1", "WORLD_SIZE": "2"}),   # a rank
        ([python, "-c", "pass"], {"TRAINTIME_DISABLE": "1"}),         # turned off
        ([python, "-c", "pass"], {"TRAINTIME_LOG_LEVEL": "off"}),     # told to be quiet
    ]
    for cmd, extra in quiet:
        p = run(cmd, env_for(build_dir, out, **extra))
        check(p.stderr == "", f"{cmd} {extra} printed {p.stderr!r}")
    # A shell whose child recorded: the rank file is there, so nothing is said.
    child = f"{python} -c 'import traintime; traintime.step()'; true"
    p = run(["bash", "-c", child], env_for(build_dir, out))
    check(not said(p) and (out / "rank-00000.json").exists(), f"recording child: {p.stderr!r}")


def test_a_launcher_whose_ranks_record_nothing_says_it_once(build_dir: Path, tmp_path: Path) -> None:
    mpirun = shutil.which("mpirun")
    check(mpirun, "mpirun not found (install openmpi-bin)")
    out = tmp_path / "out"
    cmd = [mpirun, "-np", "2", "--oversubscribe", "-x", "LD_PRELOAD", "-x", "TRAINTIME_OUTPUT", "-x", "PYTHONPATH",
           str(SYSTEM_PYTHON), "-c"]
    p = run(cmd + ["pass"], env_for(build_dir, out))
    check(len(said(p)) == 1, f"expected one line from mpirun, got {said(p)}:\n{p.stderr}")
    p = run(cmd + ["import traintime; traintime.step()"], env_for(build_dir, out))
    check(not said(p), f"the ranks recorded, yet: {p.stderr}")


INSTRUMENT = """\
import warnings
import torch
import traintime.torch
from traintime._callback import Instrumenting
model = torch.nn.Linear(2, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    traintime.torch.instrument(model, opt)
    traintime.torch.instrument(model, opt)
    Instrumenting()._start(model, opt)
for w in caught:
    print(w.category.__name__, w.message)
"""


def test_instrument_warns_once_when_the_library_is_not_preloaded(build_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    p = run([str(SYSTEM_PYTHON), "-c", INSTRUMENT], env_for(build_dir, out, preload=False))
    lines = p.stdout.splitlines()
    check(len(lines) == 1 and lines[0].startswith("RuntimeWarning traintime: traintime.torch.instrument records "
                                                  "nothing: libtraintime.so is not preloaded")
          and "LD_PRELOAD=" in lines[0], f"expected one warning, got {lines}")
    # Turned off on purpose, or on: no warning.
    for extra in ({"TRAINTIME_DISABLE": "1"}, {}):
        p = run([str(SYSTEM_PYTHON), "-c", INSTRUMENT], env_for(build_dir, out, **extra))
        check(p.stdout == "", f"{extra}: warned {p.stdout!r}")
