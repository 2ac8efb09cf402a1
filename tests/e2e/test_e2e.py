"""End-to-end tests of libtraintime.so under LD_PRELOAD, run by pytest (one CTest test per
function: tests/CMakeLists.txt, tt_add_pytest).

Each test runs real processes in a fresh temporary directory and asserts on the rank files they
leave. Expected values come from what the example programs do (tests/e2e/*.py,
examples/annotated_loop.cpp), never from the library's own output.
"""
from __future__ import annotations

import contextlib
import glob
import os
import re
import resource
import shutil
import signal
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Iterator

import pytest

from testlib import SOURCE_DIR, SYSTEM_PYTHON, check, clean_env, load_json

HERE = Path(__file__).resolve().parent
ARGS = SimpleNamespace(lib="", example="", pypath="", expected_exports="")


@pytest.fixture(autouse=True)
def _paths(build_dir: Path, request: pytest.FixtureRequest) -> None:
    """The build tree's layout is a contract (CMakeLists.txt): lib/, bin/. --lib runs the same
    tests against another build of the library (tests/wheel: the wheel's, from zig and libc++)."""
    lib = request.config.getoption("--lib") or build_dir / "lib" / "libtraintime.so"
    if not lib.exists():
        from testlib import missing_dependency
        missing_dependency(f"{lib} is missing (tests/wheel: the wheel was not built)")
    ARGS.lib = str(lib)
    ARGS.example = str(build_dir / "bin" / "annotated_loop")
    ARGS.pypath = str(SOURCE_DIR / "annotate" / "python")
    ARGS.expected_exports = str(HERE / "expected_exports.txt")


def base_env(out: str, preload: bool = True, **extra: str) -> dict[str, str]:
    env = clean_env({"TRAINTIME_OUTPUT": out, "PYTHONPATH": ARGS.pypath})
    if preload:
        env["LD_PRELOAD"] = ARGS.lib
    env.update(extra)
    return env


def run(cmd: list[str], env: dict[str, str], timeout: int = 120,
        expect_rc: int | None = 0) -> subprocess.CompletedProcess:
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=timeout)
    if expect_rc is not None and p.returncode != expect_rc:
        raise AssertionError("%s exited with %s (expected %s)\nstdout:\n%s\nstderr:\n%s"
                      % (" ".join(cmd), p.returncode, expect_rc, p.stdout, p.stderr))
    return p


def rank_files(out: str) -> list[str]:
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(out, "rank-*.json")))


def load(out: str, name: str) -> Any:
    return load_json(os.path.join(out, name))


def regions(doc: dict) -> dict[str, dict]:
    return {r["path"]: r for r in doc["regions"]}


def check_region(doc: dict, path: str, category: str, count: int) -> None:
    rows = regions(doc)
    check(path in rows, "region %r missing; have %s" % (path, sorted(rows)))
    r = rows[path]
    check(r["category"] == category, "%s: category %r, expected %r" % (path, r["category"], category))
    check(r["count"] == count, "%s: count %d, expected %d" % (path, r["count"], count))
    check(r["cpu_ns"] > 0, "%s: cpu_ns is 0" % path)
    check(r["cpu_min_ns"] <= r["cpu_max_ns"] <= r["cpu_ns"], "%s: min/max/total inconsistent" % path)


def check_identity(doc: dict, rank: int, world_size: int, role: str, pid: int | None = None) -> None:
    check(doc["schema"] == "traintime/1", "schema %r" % doc["schema"])
    check(doc["rank"] == rank, "rank %r, expected %r" % (doc["rank"], rank))
    check(doc["world_size"] == world_size, "world_size %r, expected %r" % (doc["world_size"], world_size))
    check(doc["role"] == role, "role %r, expected %r" % (doc["role"], role))
    check(doc["job_id"], "empty job_id")
    check(doc["snapshot"] is False, "final file marked as snapshot")
    if pid is not None:
        check(doc["pid"] == pid, "pid %r, expected %r" % (doc["pid"], pid))
    # GPU fields exist even without GPU capture.
    check(doc["gpu_capture"] in ("none", "cupti", "unavailable"), "gpu_capture %r" % doc["gpu_capture"])
    for cat in ("forward", "backward", "optimizer", "comm", "io", "other", "recompute", "unattributed"):
        check(cat in doc["categories"], "category %s missing" % cat)


# ---------------------------------------------------------------------------------------------

def test_region_times_are_nanoseconds_of_the_wall_clock(tmp_path: Path) -> None:
    """The hot path reads the CPU's counter (ticks); the rank file says nanoseconds. Each leaf
    region of the example spins until steady_clock has moved --work-us on, so no entry is shorter
    than that. Read as ticks of a GHz counter, the times would be 2-3 times too long: the
    main thread's top-level regions, which fill almost every step, would then add up to more than
    the whole process lived. That bound holds however often a loaded machine preempts the
    example (preemption lengthens the regions and the process alike), where a bound on one
    entry's length does not."""
    out = str(tmp_path / "out")
    work_us, steps = 5000, 40
    began = time.monotonic_ns()
    run([ARGS.example, "--steps", str(steps), "--work-us", str(work_us)], env=base_env(out))
    lived_ns = time.monotonic_ns() - began
    rows = regions(load(out, "rank-00000.json"))
    for path in ("forward/layer0", "forward/layer1", "backward"):
        shortest = rows[path]["cpu_min_ns"]
        check(shortest >= work_us * 1000,
              "%s: shortest entry %d ns for %d us of wall-clock work" % (path, shortest, work_us))
    top_level = ("data_load", "forward", "backward", "optimizer")
    spent = sum(rows[path]["cpu_ns"] for path in top_level)
    check(spent >= steps * work_us * 4000,
          "top-level regions %d ns, less than the %d steps' work" % (spent, steps))
    check(spent <= lived_ns,
          "top-level regions add up to %d ns, more than the process's %d ns of life" % (spent, lived_ns))


def test_cpp_annotations_produce_rank_file(tmp_path: Path) -> None:
    tmp = str(tmp_path)
    out = os.path.join(tmp, "out")
    p = subprocess.Popen([ARGS.example, "--steps", "4", "--work-us", "100"], env=base_env(out),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    stdout, stderr = p.communicate(timeout=60)
    check(p.returncode == 0, "example failed: %s" % stderr)
    check(rank_files(out) == ["rank-00000.json"], "files: %s" % rank_files(out))
    doc = load(out, "rank-00000.json")
    check_identity(doc, 0, 1, "rank", pid=p.pid)
    check(doc["exit_reason"] == "exit", "exit_reason %r" % doc["exit_reason"])
    check_region(doc, "data_load", "io", 4)
    check_region(doc, "forward", "forward", 4)
    for layer in ("layer0", "layer1", "layer2"):
        check_region(doc, "forward/" + layer, "forward", 4)
    check_region(doc, "backward", "backward", 4)
    check_region(doc, "grad_hook", "comm", 4)  # explicit category, on its own thread
    check_region(doc, "optimizer", "optimizer", 4)
    check(len(doc["regions"]) == 8, "unexpected regions: %s" % sorted(regions(doc)))
    # Nesting: forward includes its three layers of >= 100 us each.
    rows = regions(doc)
    check(rows["forward"]["cpu_ns"] >= sum(rows["forward/layer%d" % i]["cpu_ns"] for i in range(3)),
          "forward shorter than its children")
    check(rows["forward/layer0"]["cpu_min_ns"] >= 100000, "layer0 shorter than its busy work")
    steps = doc["steps"]
    check(steps["count"] == 4 and steps["warmup"] == 2, "steps %s" % steps)
    check(steps["samples"] == 4 * 32 and steps["tokens"] == 4 * 32 * 128, "samples/tokens %s" % steps)
    check(steps["wall_ns"]["count"] == 2, "wall stats should skip 2 warm-up steps: %s" % steps["wall_ns"])
    check(steps["samples_per_s"] > 0, "samples_per_s is 0")
    check(doc["unbalanced_pops"] == 0, "unbalanced pops")
    check("rank files" in stderr and out in stderr, "rank 0 did not say where the files are: %r" % stderr)
    check(len(stderr.strip().splitlines()) == 1, "expected exactly one line on stderr: %r" % stderr)


def test_python_annotations_produce_rank_file(tmp_path: Path) -> None:
    tmp = str(tmp_path)
    out = os.path.join(tmp, "out")
    p = run([str(SYSTEM_PYTHON), os.path.join(HERE, "annotated_script.py"), "3"], base_env(out))
    check(p.stdout.strip() == "enabled", "stdout %r" % p.stdout)
    doc = load(out, "rank-00000.json")
    check_identity(doc, 0, 1, "rank")
    check_region(doc, "data_load", "io", 3)       # decorator
    check_region(doc, "forward", "forward", 3)
    check_region(doc, "forward/attention", "forward", 3)  # no rule: parent's category
    check_region(doc, "backward", "backward", 3)
    check_region(doc, "allreduce", "comm", 3)     # explicit category
    check_region(doc, "prefetch", "other", 3)     # ranges ended on another thread
    check(doc["steps"]["count"] == 3 and doc["steps"]["samples"] == 24 and doc["steps"]["tokens"] == 3072,
          "steps %s" % doc["steps"])


def test_python_step_region_ends_a_step_and_never_twice(tmp_path: Path) -> None:
    """The one rule for "step": traintime.region("step") ends a step like an NVTX range named
    step; with traintime.step() also called inside it, each step still counts once."""
    code = ("import traintime\n"
            "for i in range(3):\n"
            "    with traintime.region('step'):\n"
            "        with traintime.region('forward'):\n"
            "            pass\n"
            "for i in range(2):\n"
            "    with traintime.region('step'):\n"
            "        traintime.step(samples=4)\n")
    out = str(tmp_path / "out")
    run([str(SYSTEM_PYTHON), "-c", code], base_env(out))
    doc = load(out, "rank-00000.json")
    check(doc["steps"]["count"] == 5, "steps.count %r, expected 3 + 2" % doc["steps"]["count"])


def test_python_package_installs_with_pip(tmp_path: Path) -> None:
    tmp = str(tmp_path)
    # Installed from a copy: setuptools writes build/ next to the sources.
    src = os.path.join(tmp, "src")
    shutil.copytree(ARGS.pypath, src)
    site = os.path.join(tmp, "site")
    run([str(SYSTEM_PYTHON), "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps",
         "--no-index", "--target", site, src], base_env(os.path.join(tmp, "unused"), preload=False),
        timeout=180)
    check(os.path.isfile(os.path.join(site, "traintime", "torch.py")), "traintime.torch not installed")
    out = os.path.join(tmp, "out")
    env = base_env(out)
    env["PYTHONPATH"] = site
    p = run([str(SYSTEM_PYTHON), os.path.join(HERE, "annotated_script.py"), "2"], env)
    check(p.stdout.strip() == "enabled", "installed package not enabled: %r" % p.stdout)
    check_region(load(out, "rank-00000.json"), "forward/attention", "forward", 2)


def test_constructor_points_children_at_the_library(tmp_path: Path) -> None:
    tmp = str(tmp_path)
    out = os.path.join(tmp, "out")
    script = 'echo "$TRAINTIME_JOB_ID|$CUDA_INJECTION64_PATH|$NVTX_INJECTION64_PATH"'
    p = run(["bash", "-c", script], base_env(out))
    job, cuda, nvtx = p.stdout.strip().split("|")
    lib = os.path.realpath(ARGS.lib)
    check(job, "TRAINTIME_JOB_ID not set for children")
    check(cuda == lib and nvtx == lib, "injection variables %r %r, expected %r" % (cuda, nvtx, lib))
    # Variables another tool set are left alone, and a launcher's job id is kept.
    p = run(["bash", "-c", script],
            base_env(out, CUDA_INJECTION64_PATH="/opt/other/libtool.so", TRAINTIME_JOB_ID="given"))
    job, cuda, nvtx = p.stdout.strip().split("|")
    check(job == "given" and cuda == "/opt/other/libtool.so" and nvtx == lib,
          "got %r" % p.stdout)
    check(not os.path.exists(out), "bash wrote output")


def test_torch_instrument_one_line(tmp_path: Path) -> None:
    tmp = str(tmp_path)
    out = os.path.join(tmp, "out")
    p = run([str(SYSTEM_PYTHON), "-W", "error", os.path.join(HERE, "torch_train.py"), "5"],
            base_env(out, RANK="1", WORLD_SIZE="2"))
    check(p.stdout.strip() == "ok True", "stdout %r stderr %r" % (p.stdout, p.stderr))
    check(rank_files(out) == ["rank-00001.json"], "files: %s" % rank_files(out))
    doc = load(out, "rank-00001.json")
    check_identity(doc, 1, 2, "rank")
    check_region(doc, "forward", "forward", 5)
    check_region(doc, "backward", "backward", 5)
    check_region(doc, "optimizer", "optimizer", 5)
    check(doc["steps"]["count"] == 5, "steps %s" % doc["steps"])
    check(doc["steps"]["samples"] == 5 * 8, "samples from the batch dimension: %s" % doc["steps"])
    # Rank 1 stays silent at exit.
    check("rank files" not in p.stderr, "a rank other than 0 printed the summary: %r" % p.stderr)


def loaded_libraries(debug_prefix: Path) -> str:
    """What the dynamic loader wrote under LD_DEBUG=files (one file per process)."""
    return "".join(p.read_text() for p in debug_prefix.parent.glob(debug_prefix.name + ".*"))


def test_nvml_is_loaded_only_by_a_process_that_uses_cuda(build_dir: Path, tmp_path: Path) -> None:
    """The GPU health sampler opens libnvidia-ml.so.1 once the process launched GPU work, never
    before: a CPU-only process with simgpu's libnvidia-ml.so.1 on its library path never loads it
    and its rank file has no gpu_health, while sim_train (SIMULATED GPU) loads it and, with
    TRAINTIME_NVML=0, still does not and writes status "off"."""
    sim = build_dir / "sim"
    cpu_out, cpu_debug = tmp_path / "cpu", tmp_path / "cpu-ld"
    run([ARGS.example, "--steps", "2", "--work-us", "10"],
        base_env(str(cpu_out), LD_LIBRARY_PATH=str(sim), LD_DEBUG="files", LD_DEBUG_OUTPUT=str(cpu_debug)))
    check("libnvidia-ml" not in loaded_libraries(cpu_debug), "a CPU-only process loaded NVML")
    check("gpu_health" not in load(str(cpu_out), "rank-00000.json"), "gpu_health in a CPU-only rank file")

    def sim_train(name: str, **extra: str) -> tuple[str, dict]:
        out, debug = tmp_path / name, tmp_path / (name + "-ld")
        run([str(build_dir / "bin" / "sim_train"), "--steps", "3"],
            base_env(str(out), LD_LIBRARY_PATH=str(sim), TRAINTIME_CUPTI_LIB=str(sim / "libcupti.so.13"),
                     LD_DEBUG="files", LD_DEBUG_OUTPUT=str(debug), **extra))
        return loaded_libraries(debug), load(str(out), "rank-00000.json")

    loaded, doc = sim_train("gpu")
    check("file=libnvidia-ml.so.1 [0];  dynamically loaded by " + ARGS.lib in loaded,
          "sim_train did not load NVML through libtraintime.so")
    check(doc["gpu_health"]["status"] == "sampled", "status %r" % doc["gpu_health"]["status"])
    loaded, doc = sim_train("off", TRAINTIME_NVML="0")
    check("libnvidia-ml" not in loaded, "TRAINTIME_NVML=0 loaded NVML")
    check(doc["gpu_health"] == {"status": "off", "interval_ms": 0, "devices": []}, "gpu_health %r" % doc["gpu_health"])
    check("nvml" not in doc.get("modules", {}), "modules.nvml written while off")


def test_without_preload_runs_and_writes_nothing(tmp_path: Path) -> None:
    tmp = str(tmp_path)
    out = os.path.join(tmp, "out")
    run([ARGS.example, "--steps", "2", "--work-us", "10"], base_env(out, preload=False))
    p = run([str(SYSTEM_PYTHON), os.path.join(HERE, "annotated_script.py"), "1"], base_env(out, preload=False))
    check(p.stdout.strip() == "disabled", "python annotations not a no-op: %r" % p.stdout)
    check(not os.path.exists(out), "output written without the preload")


def test_disable_turns_everything_off(tmp_path: Path) -> None:
    tmp = str(tmp_path)
    out = os.path.join(tmp, "out")
    run([ARGS.example, "--steps", "2", "--work-us", "10"], base_env(out, TRAINTIME_DISABLE="1"))
    p = run([str(SYSTEM_PYTHON), os.path.join(HERE, "annotated_script.py"), "1"],
            base_env(out, TRAINTIME_DISABLE="1"))
    check(p.stdout.strip() == "disabled", "stdout %r" % p.stdout)
    check(not os.path.exists(out), "output written with TRAINTIME_DISABLE=1")


def test_inert_processes_write_nothing(tmp_path: Path) -> None:
    tmp = str(tmp_path)
    out = os.path.join(tmp, "out")
    env = base_env(out)
    p = run(["/bin/true"], env)
    check(p.stderr == "", "noise from /bin/true: %r" % p.stderr)
    # A shell the user started under the preload that starts a child is a launcher: its output is
    # unchanged but for the one line saying the job recorded nothing (test_never_silent.py).
    p = run(["bash", "-c", "ls / >/dev/null; echo hi"], env)
    check(p.stdout == "hi\n" and p.stderr.startswith("traintime: nothing was recorded")
          and p.stderr.count("\n") == 1, "bash output changed: %r %r" % (p.stdout, p.stderr))
    run(["bash", "-c", "exit 7"], env, expect_rc=7)
    check(not os.path.exists(out), "an inert process created %s" % out)


def test_mpirun_np4_gives_one_file_per_rank(tmp_path: Path) -> None:
    tmp = str(tmp_path)
    out = os.path.join(tmp, "out")
    mpirun = shutil.which("mpirun")
    check(mpirun, "mpirun not found (install openmpi-bin)")
    run([mpirun, "-np", "4", "--oversubscribe", "-x", "LD_PRELOAD", "-x", "TRAINTIME_OUTPUT",
         ARGS.example, "--steps", "3", "--work-us", "50"], base_env(out), timeout=180)
    files = rank_files(out)
    check(files == ["rank-%05d.json" % r for r in range(4)], "files: %s" % files)
    jobs = set()
    for r in range(4):
        doc = load(out, "rank-%05d.json" % r)
        check_identity(doc, r, 4, "rank")
        check_region(doc, "forward", "forward", 3)
        jobs.add(doc["job_id"])
    check(len(jobs) == 1, "ranks disagree on the job id: %s" % jobs)


def test_sigterm_to_mpirun_20_times_under_load_leaves_every_rank_file(tmp_path: Path) -> None:
    """What Ctrl-C or a scheduler's cancel does: SIGTERM to mpirun, which forwards it to the
    ranks and kills the rest once one has died. With both cores kept busy, 20 jobs of 4 ranks
    in a row must each leave 4 complete rank files written on the signal."""
    mpirun = shutil.which("mpirun")
    check(mpirun, "mpirun not found (install openmpi-bin)")
    busy_loops = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(2)]
    failures = []
    try:
        for i in range(20):
            out = str(tmp_path / ("job%02d" % i))
            p = subprocess.Popen([mpirun, "-np", "4", "--oversubscribe", "-x", "LD_PRELOAD",
                                  "-x", "TRAINTIME_OUTPUT", ARGS.example, "--steps", "3",
                                  "--work-us", "50", "--wait-for-signal"],
                                 env=base_env(out), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 universal_newlines=True)
            ready = 0
            while ready < 4:
                line = p.stdout.readline()
                if not line:
                    break
                ready += line.strip() == "ready"
            p.send_signal(signal.SIGTERM)
            p.communicate(timeout=120)
            files = rank_files(out)
            if files != ["rank-%05d.json" % r for r in range(4)]:
                failures.append("job %d: %s" % (i, files))
                continue
            for name in files:
                doc = load(out, name)
                if doc.get("exit_reason") != "signal SIGTERM" or doc.get("snapshot"):
                    failures.append("job %d %s: exit_reason %r" % (i, name, doc.get("exit_reason")))
    finally:
        for busy in busy_loops:
            busy.kill()
            busy.wait()
    check(not failures, "rank files missing or not written on the signal:\n  " + "\n  ".join(failures))


def test_child_inheriting_rank_writes_aux_file(tmp_path: Path) -> None:
    tmp = str(tmp_path)
    out = os.path.join(tmp, "out")
    p = subprocess.Popen([ARGS.example, "--steps", "3", "--work-us", "50", "--fork", "--spawn-self"],
                         env=base_env(out, RANK="0", WORLD_SIZE="1"),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    _, stderr = p.communicate(timeout=60)
    check(p.returncode == 0, "example failed: %s" % stderr)
    files = rank_files(out)
    check(len(files) == 3 and "rank-00000.json" in files, "files: %s" % files)
    main = load(out, "rank-00000.json")
    check_identity(main, 0, 1, "rank", pid=p.pid)
    check_region(main, "forward", "forward", 3)
    check("child_work" not in regions(main), "the fork child's region leaked into the parent's file")
    aux_regions = {}
    for name in files:
        if name == "rank-00000.json":
            continue
        m = re.match(r"rank-00000\.pid(\d+)\.json$", name)
        check(m, "unexpected file %s" % name)
        doc = load(out, name)
        check_identity(doc, 0, 1, "aux", pid=int(m.group(1)))
        check(doc["job_id"] == main["job_id"], "aux file of another job")
        aux_regions[name] = set(regions(doc))
    # One fork child (recorded only child_work: it started clean) and one exec'd copy (2 steps).
    kinds = sorted(sorted(r) for r in aux_regions.values())
    check(["child_work"] in kinds, "fork child's aux file missing or not clean: %s" % kinds)
    check(any("forward/layer0" in r for r in aux_regions.values()), "exec'd child's aux file missing")


def test_rerun_into_same_directory_replaces_previous_job(tmp_path: Path) -> None:
    tmp = str(tmp_path)
    out = os.path.join(tmp, "out")
    run([ARGS.example, "--steps", "1", "--work-us", "10"], base_env(out))
    first = load(out, "rank-00000.json")["job_id"]
    run([ARGS.example, "--steps", "2", "--work-us", "10"], base_env(out))
    check(rank_files(out) == ["rank-00000.json"], "files: %s" % rank_files(out))
    doc = load(out, "rank-00000.json")
    check(doc["job_id"] != first and doc["steps"]["count"] == 2, "second run did not own rank 0")


def test_unwritable_output_is_reported_at_the_first_record_and_keeps_exit_status(tmp_path: Path) -> None:
    tmp = str(tmp_path)
    blocker = os.path.join(tmp, "a_file")
    open(blocker, "w").close()
    out = os.path.join(blocker, "out")  # a directory below a regular file cannot exist
    # The program says when its first region has closed: the error must come before that line
    # (a ten-hour job learns it at its first step, not at exit), and only once.
    code = ("import sys, traintime\nwith traintime.region('forward'):\n    pass\n"
            "print('FIRST-REGION-DONE', file=sys.stderr, flush=True)\nsys.exit(3)\n")
    p = run([str(SYSTEM_PYTHON), "-c", code], base_env(out), expect_rc=3)
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    check(len(lines) == 2 and lines[1] == "FIRST-REGION-DONE",
          "expected one error line before the program's own line, got %r" % p.stderr)
    check(out in lines[0] and "TRAINTIME_OUTPUT" in lines[0] and lines[0].startswith("traintime: "),
          "error line does not name the directory and TRAINTIME_OUTPUT: %r" % lines[0])
    run([ARGS.example, "--steps", "1", "--work-us", "10"], base_env(out), expect_rc=0)


def test_misspelled_variable_gets_one_line_naming_the_nearest_known_one(tmp_path: Path) -> None:
    out = str(tmp_path / "out")
    env = base_env(out, TRAINTIME_OUPUT=str(tmp_path / "typo"), TRAINTIME_SNAPSHOT_SECS="5")
    # A process that records nothing (a shell, a launcher) stays silent.
    quiet = run(["/bin/true"], env)
    check(quiet.stderr == "", "a process that recorded nothing printed %r" % quiet.stderr)
    p = run([ARGS.example, "--steps", "1", "--work-us", "10"], env)
    lines = [l for l in p.stderr.splitlines() if l.startswith("traintime: ")]
    want = {"TRAINTIME_OUPUT": "TRAINTIME_OUTPUT", "TRAINTIME_SNAPSHOT_SECS": "TRAINTIME_SNAPSHOT_SEC"}
    for typo, known in want.items():
        mine = [l for l in lines if typo + " " in l]
        check(len(mine) == 1 and "did you mean " + known + "?" in mine[0],
              "%s: expected one line naming %s, got %r" % (typo, known, lines))
    check(rank_files(out) == ["rank-00000.json"], "the run did not write into TRAINTIME_OUTPUT")


def test_full_disk_gives_one_error_line_and_keeps_exit_status(tmp_path: Path) -> None:
    """A write that fails for lack of space (here: a file-size limit, as a quota or a full disk
    refuses it) costs one error line naming the file, leaves no temporary file behind, and the
    program's exit status is its own."""
    out = str(tmp_path / "out")

    def limit_file_size() -> None:
        # SIGXFSZ keeps its default action (end the process): traintime's own write must fail
        # with EFBIG instead of ending a program that writes nothing itself.
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
        resource.setrlimit(resource.RLIMIT_FSIZE, (512, 512))

    # A C++ program: CPython ignores SIGXFSZ itself, which would hide the difference.
    p = subprocess.run([ARGS.example, "--steps", "2", "--work-us", "10"], env=base_env(out),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                       timeout=60, preexec_fn=limit_file_size)
    check(p.returncode == 0, "exit status %r, expected the program's own 0" % p.returncode)
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    check(len(lines) == 1 and lines[0].startswith("traintime: ") and "rank-00000.json" in lines[0],
          "expected one error line naming the rank file, got %r" % p.stderr)
    left = os.listdir(out) if os.path.isdir(out) else []
    # The rank's claim marker stays by design (rank_file_output.cpp); a half-written file must not.
    check(not [f for f in left if ".tmp." in f or f.startswith("rank-")],
          "temporary or partial files left behind: %s" % left)


def start_waiting(out: str, extra_env: dict[str, str] | None = None,
                  preexec: Callable[[], Any] | None = None) -> subprocess.Popen:
    p = subprocess.Popen([ARGS.example, "--steps", "3", "--work-us", "50", "--wait-for-signal"],
                         env=base_env(out, **(extra_env or {})), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, universal_newlines=True, preexec_fn=preexec)
    line = p.stdout.readline()
    check(line.strip() == "ready", "example did not get ready: %r" % line)
    return p


PAUSE_SYSCALL = {"x86_64": 34}.get(os.uname().machine)  # pause(2); aarch64 has none (ppoll)


def wait_back_in_pause(p: subprocess.Popen, timeout_s: float) -> bool:
    """Waits until the waiting example has no signal pending and sits in pause() again: a
    signal sent before is then discarded or fully handled. False if it died or the time ran out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and p.poll() is None:
        try:
            status = Path(f"/proc/{p.pid}/status").read_text()
            syscall = Path(f"/proc/{p.pid}/syscall").read_text().split()
        except OSError:
            return False
        pending = [line.split()[1] for line in status.splitlines() if line.startswith(("SigPnd:", "ShdPnd:"))]
        in_pause = (syscall[:1] == [str(PAUSE_SYSCALL)] if PAUSE_SYSCALL is not None
                    else "S (sleeping)" in status)
        if all(int(x, 16) == 0 for x in pending) and in_pause:
            return True
        time.sleep(0.01)
    return False


@contextlib.contextmanager
def waiting(out: str, extra_env: dict[str, str] | None = None,
            preexec: Callable[[], Any] | None = None) -> Iterator[subprocess.Popen]:
    """start_waiting, and the process killed on the way out if the test left it running."""
    p = start_waiting(out, extra_env, preexec)
    try:
        yield p
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(timeout=30)


def test_sigterm_writes_file_and_dies_by_sigterm(tmp_path: Path) -> None:
    tmp = str(tmp_path)
    out = os.path.join(tmp, "out")
    p = start_waiting(out)
    p.send_signal(signal.SIGTERM)
    p.send_signal(signal.SIGTERM)  # launchers often send more than one
    p.wait(timeout=30)
    check(p.returncode == -signal.SIGTERM, "exit status %r, expected death by SIGTERM" % p.returncode)
    doc = load(out, "rank-00000.json")
    check(doc["exit_reason"] == "signal SIGTERM", "exit_reason %r" % doc["exit_reason"])
    check_region(doc, "forward", "forward", 3)
    check(doc["steps"]["count"] == 3, "steps %s" % doc["steps"])


def test_sigint_with_default_disposition_writes_file(tmp_path: Path) -> None:
    tmp = str(tmp_path)
    out = os.path.join(tmp, "out")
    p = start_waiting(out)
    p.send_signal(signal.SIGINT)
    p.wait(timeout=30)
    check(p.returncode == -signal.SIGINT, "exit status %r, expected death by SIGINT" % p.returncode)
    check(load(out, "rank-00000.json")["exit_reason"] == "signal SIGINT", "exit_reason")


def test_inherited_sigterm_ignore_is_kept(tmp_path: Path) -> None:
    tmp = str(tmp_path)
    out = os.path.join(tmp, "out")
    with waiting(out, preexec=lambda: signal.signal(signal.SIGTERM, signal.SIG_IGN)) as p:
        p.send_signal(signal.SIGTERM)
        check(wait_back_in_pause(p, 30), "the SIGTERM was neither discarded nor handled within 30 s")
        check(p.poll() is None, "SIGTERM killed a process that inherited SIG_IGN for it")
        # An ignored signal is no exit: traintime must not have written the final file for it.
        check(rank_files(out) == [], "a file was written for an ignored SIGTERM: %s" % rank_files(out))
        # The process still ends normally on a signal it does not ignore.
        p.send_signal(signal.SIGINT)
        p.wait(timeout=30)
    check(p.returncode == -signal.SIGINT, "exit status %r, expected death by SIGINT" % p.returncode)
    doc = load(out, "rank-00000.json")
    check(doc["snapshot"] is False and doc["exit_reason"] == "signal SIGINT",
          "final file after SIGINT: snapshot %r, exit_reason %r" % (doc["snapshot"], doc["exit_reason"]))


def wait_for_snapshot(out: str, newer_than: int, timeout_s: float) -> dict | None:
    """The first snapshot in out whose end_unix_ns is later than newer_than, or None."""
    path = os.path.join(out, "rank-00000.json")
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if os.path.exists(path):
            doc = load(out, "rank-00000.json")  # written aside and renamed: never torn
            if doc.get("end_unix_ns", 0) > newer_than:
                return doc
        time.sleep(0.1)
    return None


def test_killed_or_crashing_rank_leaves_its_last_snapshot(tmp_path: Path) -> None:
    # SIGKILL cannot be handled, and a crash (segfault) skips the exit hooks: with
    # TRAINTIME_SNAPSHOT_SEC the last periodic snapshot is what remains, complete and marked
    # (SIGABRT writes its own file: test_abnormal_exits.py).
    for sig in (signal.SIGKILL, signal.SIGSEGV):
        out = os.path.join(str(tmp_path), "out-%d" % sig)
        no_core = lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # noqa: E731
        with waiting(out, {"TRAINTIME_SNAPSHOT_SEC": "1"}, preexec=no_core) as p:
            snap = wait_for_snapshot(out, 0, 10)
            check(snap is not None, "no snapshot within 10 s")
            p.send_signal(sig)
            p.wait(timeout=30)
        check(p.returncode == -sig, "exit status %r, expected death by %s" % (p.returncode, sig))
        left = load(out, "rank-00000.json")  # parses: a complete file, never a torn one
        check(left["snapshot"] is True and left["exit_reason"] == "snapshot",
              "after %s: snapshot %r, exit_reason %r" % (sig, left["snapshot"], left["exit_reason"]))
        check(left["steps"]["count"] == 3, "steps %s" % left["steps"])
        check_region(left, "forward", "forward", 3)
        check(rank_files(out) == ["rank-00000.json"], "files: %s" % rank_files(out))


def test_periodic_snapshots_then_final_file(tmp_path: Path) -> None:
    tmp = str(tmp_path)
    out = os.path.join(tmp, "out")
    with waiting(out, {"TRAINTIME_SNAPSHOT_SEC": "1"}) as p:
        first = wait_for_snapshot(out, 0, 10)
        check(first is not None, "no snapshot within 10 s")
        check(first["snapshot"] is True and first["exit_reason"] == "snapshot" and
              first["steps"]["count"] == 3,
              "snapshot content: snapshot %r, exit_reason %r, steps %s"
              % (first["snapshot"], first["exit_reason"], first["steps"]))
        # Periodic: another, later snapshot follows while the process keeps running.
        second = wait_for_snapshot(out, first["end_unix_ns"], 10)
        check(second is not None, "no second, later snapshot within 10 s of the first")
        check(second["snapshot"] is True and p.poll() is None, "second snapshot not from the live process")
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=30)
    check(p.returncode == -signal.SIGTERM, "exit status %r" % p.returncode)
    final = load(out, "rank-00000.json")
    check(final["snapshot"] is False and final["exit_reason"] == "signal SIGTERM", "final file")
    check(final["end_unix_ns"] > second["end_unix_ns"], "final file not later than the snapshots")
    check(rank_files(out) == ["rank-00000.json"], "files: %s" % rank_files(out))


def test_app_with_its_own_spdlog_fmt_and_json_runs_unchanged(build_dir: Path, tmp_path: Path) -> None:
    app = str(build_dir / "bin" / "own_libraries_app")
    alone = run([app], base_env(str(tmp_path / "alone"), preload=False))
    out = str(tmp_path / "out")
    profiled = run([app], base_env(out, TRAINTIME_LOG_LEVEL="debug"))
    check(profiled.stdout == alone.stdout,
          "the app's own logging changed under the preload:\n%s\n--- without ---\n%s"
          % (profiled.stdout, alone.stdout))
    check("[app] info default logger is still 'app', level debug" in alone.stdout, alone.stdout)
    check(rank_files(out) == ["rank-00000.json"], "no rank file from the profiled run: %s" % rank_files(out))
    check(regions(load(out, "rank-00000.json"))["forward"]["count"] == 3, "forward not recorded 3 times")


def test_exec_chains_behave_exactly_as_without_the_preload(tmp_path: Path) -> None:
    """Shells, make and compilers under the preload: the same output, exit status and built
    program as without it, and no files (they record nothing). The process started under the
    preload that started children (a launcher, to traintime) adds one line at its end: the job
    recorded nothing (test_never_silent.py); nothing else changes."""
    (tmp_path / "hello.c").write_text('#include <stdio.h>\nint main(void) { puts("built"); return 0; }\n')
    (tmp_path / "Makefile").write_text("hello: hello.c\n\tcc -O1 -o $@ $<\n\t./$@\n")
    results = []
    for preload in (False, True):
        out = str(tmp_path / ("out-preload" if preload else "out-plain"))
        env = base_env(out, preload=preload)
        shell = run(["bash", "-c", "echo out; echo err >&2; (exit 7)"], env, expect_rc=7)
        make = run(["make", "-s", "-B", "-C", str(tmp_path), "hello"], env)
        said = "traintime: nothing was recorded"
        for p in (shell, make):
            check(p.stderr.count(said) == (1 if preload else 0), "expected the one line (preloaded only): %r" % p.stderr)
        results.append(tuple("".join(l for l in text.splitlines(keepends=True) if not l.startswith(said))
                             for text in (shell.stdout, shell.stderr, make.stdout, make.stderr)))
        written = os.listdir(out) if os.path.exists(out) else []
        check(not written, "files written by %s: %s"
              % ("the preloaded chain" if preload else "the plain chain", written))
    check(results[0] == results[1], "output differs under the preload: %r vs %r" % tuple(results))
    check(results[1][2].strip() == "built", "make did not build and run the program: %r" % results[1][2])


def test_exported_symbols_are_exactly_the_expected_set() -> None:
    with open(ARGS.expected_exports) as f:
        expected = {l.strip() for l in f if l.strip() and not l.startswith("#")}
    p = run(["nm", "-D", "--defined-only", ARGS.lib], os.environ)
    exported = set()
    for line in p.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] not in ("A",):  # version-node "A" entries are not symbols
            exported.add(parts[2])
    check(exported == expected, "unexpected exports: %s; missing: %s"
          % (sorted(exported - expected), sorted(expected - exported)))


def test_no_dt_needed_on_cuda_cupti_nccl_or_cxx_runtime() -> None:
    p = run(["readelf", "-d", ARGS.lib], os.environ)
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", p.stdout)
    check(needed, "readelf found no NEEDED entries at all: %s" % p.stdout)
    # libm too: loading it is a cost every preloaded process pays at start (the inert-process row).
    bad = [n for n in needed if re.search(r"cuda|cupti|nccl|nvrtc|nvToolsExt|stdc\+\+|gcc_s|fmt|spdlog|^libm\.", n)]
    check(not bad, "forbidden DT_NEEDED entries: %s (all: %s)" % (bad, needed))


def test_report_names_a_killed_rank_with_the_step_it_reached(build_dir: Path, tmp_path: Path) -> None:
    """Two ranks of one job: rank 1 is SIGKILLed after its periodic snapshot (3 steps), rank 0
    finishes 5 steps. The report's diagnosis names rank 1 and the step it reached; it does not
    hide it behind "2 of 2 ranks merged" and a table's state column."""
    out = str(tmp_path / "out")
    job = {"TRAINTIME_JOB_ID": "killed-1", "WORLD_SIZE": "2"}
    with waiting(out, {**job, "RANK": "1", "TRAINTIME_SNAPSHOT_SEC": "1"}) as p:
        path = os.path.join(out, "rank-00001.json")
        deadline = time.time() + 15
        while time.time() < deadline and not os.path.exists(path):
            time.sleep(0.1)
        check(os.path.exists(path), "rank 1 wrote no snapshot within 15 s")
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
    run([ARGS.example, "--steps", "5", "--work-us", "10"], base_env(out, **job, RANK="0"))
    report = run([str(build_dir / "bin" / "traintime-report"), out], clean_env())
    flat = " ".join(report.stdout.split())
    check(re.search(r"DIAGNOSIS Ranks that died: - rank 1 \(host [^)]*\) killed at step 3 \(the other ranks "
                    r"reached up to step 5\)", flat) is not None,
          "the diagnosis does not name the killed rank 1 with its step:\n%s" % report.stdout[:3000])
