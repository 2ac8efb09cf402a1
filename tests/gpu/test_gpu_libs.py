"""scripts/gpu_libs.py, the one lookup of the libraries a GPU program misses on the GPU machine
(gpu-validate.sh and gpu_overhead.py): a program linked to a library that only a python
package's nvidia/*/lib holds gets that folder, and then loads; a library found nowhere is one
line naming the program and the library, exit 2; a script needs nothing."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from testlib import SOURCE_DIR, clean_env

GPU_LIBS = SOURCE_DIR / "scripts" / "gpu_libs.py"


def build_program(tmp: Path) -> tuple[Path, Path]:
    """A program needing libttprobe.so, which sits in tmp/site/nvidia/probe/lib (no rpath)."""
    lib_dir = tmp / "site" / "nvidia" / "probe" / "lib"
    lib_dir.mkdir(parents=True)
    (tmp / "probe.c").write_text("int tt_probe(void) { return 7; }\n")
    (tmp / "main.c").write_text("int tt_probe(void);\nint main(void) { return tt_probe() == 7 ? 0 : 1; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib_dir / "libttprobe.so"), str(tmp / "probe.c")],
                   check=True)
    program = tmp / "needs_probe"
    subprocess.run(["gcc", "-o", str(program), str(tmp / "main.c"), f"-L{lib_dir}", "-lttprobe"], check=True)
    return program, lib_dir


def run(args: list[str], pythonpath: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in clean_env().items() if k not in ("LD_LIBRARY_PATH", "PYTHONPATH")}
    if pythonpath:
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run([sys.executable, str(GPU_LIBS), *args], env=env, capture_output=True,
                          text=True, timeout=60)


def test_a_library_in_a_python_nvidia_package_is_found_and_the_program_then_loads(tmp_path: Path) -> None:
    program, lib_dir = build_program(tmp_path)
    p = run([str(program)], pythonpath=tmp_path / "site")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().split(":")[0] == str(lib_dir), p.stdout
    assert f"using {lib_dir}" in p.stderr, p.stderr
    ran = subprocess.run([str(program)], env={**os.environ, "LD_LIBRARY_PATH": p.stdout.strip()})
    assert ran.returncode == 0, "the program does not load with the LD_LIBRARY_PATH printed"


def test_a_library_found_nowhere_is_one_line_naming_program_and_library(tmp_path: Path) -> None:
    program, _ = build_program(tmp_path)
    p = run([str(program)])
    assert p.returncode == 2, p.stdout + p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and str(program) in lines[0] and "libttprobe.so" in lines[0], p.stderr


def test_a_script_needs_no_library(tmp_path: Path) -> None:
    script = tmp_path / "fake.sh"
    script.write_text("#!/bin/sh\necho fake\n")
    script.chmod(0o755)
    p = run([str(script)])
    assert p.returncode == 0 and p.stdout.strip() == "" and p.stderr == "", p
