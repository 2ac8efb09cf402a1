"""Helpers shared by every Python test of traintime (run under pytest; see tests/conftest.py).

One place for what each test file used to carry its own copy of: collecting failed checks,
reading JSON, building a clean child environment, loading a script as a module.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Iterable, Mapping, NoReturn

SOURCE_DIR = Path(__file__).resolve().parent.parent
# Debian's interpreter (python3-torch, python3-pytest); the first python3 on PATH may be another.
SYSTEM_PYTHON = Path("/usr/bin/python3")
# Variables through which a CI runner or launcher would leak a rank, a job or a tool into a test.
LEAKY_PREFIXES = ("TRAINTIME_", "OMPI_COMM_WORLD", "PMI", "SLURM_", "SIMGPU_")
LEAKY_NAMES = ("RANK", "WORLD_SIZE", "TORCHELASTIC_RUN_ID", "LD_PRELOAD", "CUDA_INJECTION64_PATH",
               "NVTX_INJECTION64_PATH")


class Checks:
    """Collects every failed check, so one run reports all differences, then fails once."""

    def __init__(self) -> None:
        self.failures: list[str] = []

    def check(self, cond: Any, what: str) -> bool:
        if not cond:
            self.failures.append(what)
        return bool(cond)

    def extend(self, lines: Iterable[str], prefix: str = "") -> None:
        self.failures += [prefix + line for line in lines]

    def done(self) -> None:
        """Raises AssertionError listing every failure (pytest shows it); nothing when all held."""
        assert not self.failures, "\n  ".join([f"{len(self.failures)} check(s) failed:"] + self.failures)


def check(cond: Any, what: str) -> None:
    """A single check that stops the test at once."""
    assert cond, what


def check_regions(c: Checks, doc: Mapping[str, Any], expect: Mapping[str, tuple[str, int]], what: str = "") -> None:
    """A rank file's regions are exactly `expect`: path -> (category, count), none more."""
    rows = {r["path"]: r for r in doc["regions"]}
    for path, (category, count) in expect.items():
        row = rows.get(path)
        c.check(row is not None and (row["category"], row["count"]) == (category, count),
                f"{what}{path}: {row and (row['category'], row['count'])}, expected {(category, count)}")
    extra = sorted(set(rows) - set(expect))
    c.check(not extra, f"{what}regions not expected: {extra}")


# NVML's clock-event reason bits, by bit index (nvml.h nvmlClocksEventReason*): the names the
# rank file and the report use.
REASON_BITS = ["gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown", "sync_boost",
               "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "display_clock_setting"]


def reason_names(mask: int) -> list[str]:
    """The names of NVML's clock-event reason bits set in mask, in bit order."""
    return [name for bit, name in enumerate(REASON_BITS) if mask & (1 << bit)]


def load_json(path: Path | str) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment without the variables that decide rank, job or tools."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(LEAKY_PREFIXES) and k not in LEAKY_NAMES}
    if os.geteuid() == 0:
        env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
        env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    env.update(extra or {})
    return env


def sim_env(build_dir: Path, out: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A clean environment that runs a program under traintime on the SIMULATED GPU (simgpu's
    libraries first on the path), writing rank files to `out`; fails when those are not built."""
    for f in (build_dir / "lib" / "libtraintime.so", build_dir / "bin" / "sim_train",
              build_dir / "sim" / "libcupti.so.13"):
        check(f.exists(), f"{f} is not built")
    return clean_env({"LD_LIBRARY_PATH": str(build_dir / "sim"),
                      "LD_PRELOAD": str(build_dir / "lib" / "libtraintime.so"),
                      "TRAINTIME_CUPTI_LIB": str(build_dir / "sim" / "libcupti.so.13"),
                      "TRAINTIME_OUTPUT": str(out), **(extra or {})})


def load_module(path: Path, name: str) -> ModuleType:
    """Imports a script (e.g. tools/reference_breakdown.py) that is not on sys.path. It is entered
    in sys.modules under `name` before it runs, as an import would (dataclasses look it up there)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader, f"cannot load {path}"
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def missing_dependency(what: str) -> NoReturn:
    """Stops the calling test because something it needs was not installed. Under TRAINTIME_CI
    (.ci/run sets it) that is a failure; elsewhere the test is skipped, which CTest shows as
    "Not Run" (tests/conftest.py), never as "Passed"."""
    import pytest
    if os.environ.get("TRAINTIME_CI"):
        pytest.fail(f"{what} (TRAINTIME_CI is set: a missing dependency fails the run)", pytrace=False)
    pytest.skip(what)


def pyenv_python(build_dir: Path) -> Path:
    """The PyPI virtual environment's interpreter (scripts/pyenv.py; scripts/test.sh makes it in
    <build>/pyenv); missing_dependency(), naming the path and the script, when it is missing."""
    python = build_dir / "pyenv" / "bin" / "python"
    if not python.exists():
        missing_dependency(f"{python} is missing: run scripts/pyenv.py {build_dir / 'pyenv'} (needs PyPI)")
    return python


def wheel_dir(build_dir: Path) -> Path:
    """Where tests/wheel/test_wheel_build.py leaves the wheel (dist/), the virtual environments it
    is installed in (venv/: nothing else; venv-torch/: Debian's python3-torch through
    --system-site-packages) and the links to the cached tools (wheel-tools/, debian11-root.tar)."""
    return build_dir / "wheel"


def wheel_venv(build_dir: Path, torch: bool = False) -> Path:
    """A virtual environment with the built wheel installed (its bin/ has `traintime`);
    missing_dependency() when the wheel was not built (no PyPI)."""
    venv = wheel_dir(build_dir) / ("venv-torch" if torch else "venv")
    if not (venv / "bin" / "traintime").exists():
        missing_dependency(f"{venv}/bin/traintime is missing: the wheel was not built and installed "
                           "(ctest -R wheel_build_and_install; it needs PyPI)")
    return venv


def kill_job(p: subprocess.Popen) -> None:
    """SIGKILL to mpirun and its ranks at once (the ranks sit in process groups of their own, and
    a rank whose mpirun is gone can run on forever)."""
    pids = [p.pid]
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and os.getsid(int(proc.name)) == p.pid:
                pids.append(int(proc.name))
        except OSError:
            continue
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    p.wait(timeout=60)


def mpirun() -> str:
    path = shutil.which("mpirun")
    check(path, "mpirun not found (install openmpi-bin)")
    return str(path)


def sim_cmd(build_dir: Path, out: Path, np: int, env: dict[str, str], argv: list[str]) -> list[str]:
    """mpirun of `argv` as NP simulated ranks (simgpu from build/sim) under libtraintime.so,
    writing into OUT, with `env` exported to every rank."""
    for f in (build_dir / "lib" / "libtraintime.so", build_dir / "bin" / "sim_train",
              build_dir / "sim" / "libcupti.so.13"):
        check(f.exists(), f"{f} is not built")
    cmd = [mpirun(), "--oversubscribe", "-np", str(np), "-x", f"LD_LIBRARY_PATH={build_dir / 'sim'}",
           "-x", f"LD_PRELOAD={build_dir / 'lib' / 'libtraintime.so'}",
           "-x", f"TRAINTIME_CUPTI_LIB={build_dir / 'sim' / 'libcupti.so.13'}", "-x", f"TRAINTIME_OUTPUT={out}"]
    for k, v in env.items():
        cmd += ["-x", f"{k}={v}"]
    return cmd + argv
