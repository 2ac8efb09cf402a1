"""Collectives on gloo become comm time, and a CPU trial shows the straggler (pytest; CTest label
e2e). Two ranks of tests/e2e/ddp_gloo_train.py (DDP over gloo on the CPU, one process per rank as
torchrun starts them) under the preload: rank 1's DataLoader sleeps 40 ms a batch, so rank 0 waits
for it in every bucket's allreduce. The report names rank 1 with its cost from the collectives' CPU
durations; a hook the user registers after instrument is timed and still runs; one registered
before is left alone with a warning; a collective on NCCL (interposed already) is never timed again."""
from __future__ import annotations

import importlib
import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from testlib import SOURCE_DIR, SYSTEM_PYTHON, Checks, check, clean_env, load_json, pyenv_python

HERE = Path(__file__).resolve().parent
SLOW_MS = 40
STEPS = 12


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_ddp(python: Path, build_dir: Path, out: Path, *flags: str) -> list[dict[str, Any]]:
    """Both ranks, started as torchrun would (RANK, WORLD_SIZE, MASTER_*), their JSON lines."""
    port = str(free_port())
    procs = []
    for rank in (0, 1):
        env = clean_env({"LD_PRELOAD": str(build_dir / "lib" / "libtraintime.so"), "TRAINTIME_OUTPUT": str(out),
                         "TRAINTIME_JOB_ID": out.name, "RANK": str(rank), "WORLD_SIZE": "2",
                         "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port,
                         "PYTHONPATH": str(SOURCE_DIR / "annotate" / "python")})
        procs.append(subprocess.Popen([str(python), str(HERE / "ddp_gloo_train.py"), *flags], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    ran = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=240)
        check(p.returncode == 0, f"a rank exited {p.returncode}:\n{stderr[-3000:]}")
        ran.append(json.loads(stdout.splitlines()[-1]))
    return ran


def report(build_dir: Path, out: Path) -> dict[str, Any]:
    p = subprocess.run([str(build_dir / "bin" / "traintime-report"), str(out), "--format", "json"],
                       capture_output=True, text=True, timeout=120)
    check(p.returncode == 0 and p.stdout, f"report failed ({p.returncode}): {p.stderr}")
    return json.loads(p.stdout)


def straggler_named(c: Checks, python: Path, build_dir: Path, out: Path) -> None:
    ran = run_ddp(python, build_dir, out, "--steps", str(STEPS), "--slow-rank", "1", "--slow-ms", str(SLOW_MS))
    # The timing hook DDP's reducer (C++) holds must not hold the model: the collector cannot see
    # that edge, and the model, its process group and gloo's threads then lived into the shutdown.
    c.check(all(r["model_freed"] for r in ran), f"{python}: a rank's DDP model outlived the script: {ran}")
    s = report(build_dir, out)
    stragglers = s["stragglers"]
    c.check(stragglers and stragglers[0]["rank"] == 1, f"{python}: rank 1 not named first: {stragglers}")
    if stragglers and stragglers[0]["rank"] == 1:
        # It arrives last at every bucket; what it costs is most of its 40 ms a step, never more
        # than a step (the waits of one step's buckets are not added up).
        cost = stragglers[0]["cost_ms_per_step"]
        c.check(0.5 * SLOW_MS <= cost <= s["reference_step_ms"], f"{python}: cost {cost} ms/step")
        c.check("CPU durations on gloo" in " ".join(stragglers[0]["reasons"]), f"reasons: {stragglers[0]['reasons']}")
    c.check(s["metrics"]["stragglers"] is not None and s["cpu_collectives_matched"] >= STEPS,
            f"stragglers not measured from the CPU collectives: {s['metrics']}, {s['cpu_collectives_matched']}")
    gloo = [row for row in s["comm"] if row["backend"] == "gloo" and row["op"] == "AllReduce"]
    c.check(len(gloo) == 1 and gloo[0]["cpu_ms_per_step"]["max_rank"] == 0,
            f"the waiting rank 0 should have the most AllReduce CPU time: {s['comm']}")
    # The waiting shows as comm time of its own, beside backward.
    for rank in (0, 1):
        doc = load_json(out / f"rank-{rank:05d}.json")
        rows = {r["path"]: r for r in doc["regions"]}
        c.check(rows.get("AllReduce", {}).get("category") == "comm", f"rank {rank}: no comm region AllReduce: {list(rows)}")
        comms = [x for x in doc["communicators"] if x.get("clock") == "cpu"]
        c.check(len(comms) == 1 and comms[0]["backend"] == "gloo" and comms[0]["size"] == 2 and comms[0]["rank"] == rank
                and comms[0]["ops_enqueued"] == len(comms[0]["recent"]) >= STEPS,
                f"rank {rank}: the gloo group's record: {comms}")
    wait0 = load_json(out / "rank-00000.json")["regions"]
    wait1 = load_json(out / "rank-00001.json")["regions"]
    cpu = {r: {x["path"]: x["cpu_ns"] for x in regions} for r, regions in ((0, wait0), (1, wait1))}
    c.check(cpu[0]["AllReduce"] > 5 * cpu[1]["AllReduce"], f"AllReduce CPU ns by rank: {cpu}")


def test_gloo_ddp_straggler_is_named_with_its_cost(build_dir: Path, tmp_path: Path) -> None:
    c = Checks()
    straggler_named(c, pyenv_python(build_dir), build_dir, tmp_path / "pypi")
    c.done()


def test_gloo_ddp_straggler_on_debian_torch_1_13(build_dir: Path, tmp_path: Path) -> None:
    c = Checks()
    straggler_named(c, SYSTEM_PYTHON, build_dir, tmp_path / "debian")
    c.done()


def test_a_hook_registered_after_instrument_is_timed_and_one_before_is_left_alone(build_dir: Path,
                                                                                 tmp_path: Path) -> None:
    python = pyenv_python(build_dir)
    c = Checks()
    after = run_ddp(python, build_dir, tmp_path / "after", "--steps", "4", "--hook", "after")
    c.check(all(r["hook_calls"] == 4 and r["steps"] == 4 and not r["warnings"] and r["model_freed"] for r in after),
            f"after: {after}")
    doc = load_json(tmp_path / "after" / "rank-00000.json")
    rows = {(r["op"], r.get("backend")): r["calls"] for r in doc["comm"]}
    # Each bucket through the user's hook (op unknown: the hook chooses), and the loop's own all_reduce.
    c.check(rows == {("unknown", "gloo"): 4, ("AllReduce", "gloo"): 1}, f"after: comm rows {rows}")
    c.check("ddp_comm_hook" in {r["path"] for r in doc["regions"]}, "after: no ddp_comm_hook region")
    before = run_ddp(python, build_dir, tmp_path / "before", "--steps", "4", "--hook", "before")
    c.check(all(r["hook_calls"] == 4 and r["steps"] == 4 for r in before), f"before: {before}")
    c.check(all(len(r["warnings"]) == 1 and "registered before traintime.torch.instrument" in r["warnings"][0]
                for r in before), f"before: warnings {[r['warnings'] for r in before]}")
    doc = load_json(tmp_path / "before" / "rank-00000.json")
    rows = {(r["op"], r.get("backend")): r["calls"] for r in doc["comm"]}
    # Untimed buckets; the user's hook's own all_reduce calls are collectives like any other.
    c.check(rows == {("AllReduce", "gloo"): 5}, f"before: comm rows {rows}")
    c.done()


def test_collectives_on_nccl_are_never_timed_a_second_time() -> None:
    """NCCL's calls are the library's already (interposed): a collective on an NCCL group, or on a
    CUDA tensor of a group that runs "cpu:gloo,cuda:nccl", gets no record from traintime.torch;
    gloo and MPI, and the CPU half of the mixed group, do. The backend as torch.distributed names
    it, through a stand-in for its get_backend (no NCCL runs on this machine)."""
    sys.path.insert(0, str(SOURCE_DIR / "annotate" / "python"))
    comm = importlib.import_module("traintime._torch_comm")
    dist = SimpleNamespace(get_backend=lambda group: group, get_rank=lambda group: 0,
                           get_process_group_ranks=lambda group: [0, 1], group=SimpleNamespace(WORLD="gloo"))
    cpu, cuda = SimpleNamespace(device=SimpleNamespace(type="cpu")), SimpleNamespace(device=SimpleNamespace(type="cuda"))
    c = Checks()
    for backend, tensor, want in (("nccl", cuda, None), ("NCCL", cpu, None), ("cpu:gloo,cuda:nccl", cuda, None),
                                  ("cpu:gloo,cuda:nccl", cpu, "gloo"), ("gloo", cpu, "gloo"), ("mpi", cpu, "mpi"),
                                  ("undefined", cpu, None)):
        got = comm._group_of(dist, backend, tensor)
        c.check((got.backend if got else None) == want, f"{backend} on {tensor.device.type}: timed as {got}")
    c.done()


def test_a_callback_that_ran_on_the_groups_thread_is_freed_before_the_interpreter_shuts_down() -> None:
    """A future's Python callback runs on gloo's thread, which then frees it, taking the GIL: once
    the interpreter shuts down, that ends the thread and PyTorch aborts the process ("terminate
    called without an active exception", 1 run in 4 of a two-rank DDP job under torchrun). The
    exit function traintime registers waits, the GIL released, for every callback of its that ran
    and is not freed yet; one that never ran (its collective still pending) is not waited for.
    Here gloo's thread is a Python thread that frees the callback 50 ms after it ran."""
    sys.path.insert(0, str(SOURCE_DIR / "annotate" / "python"))
    comm = importlib.import_module("traintime._torch_comm")
    ran = comm._FutureCallback(lambda fut: "value")
    never_ran = comm._FutureCallback(lambda fut: None)
    check(ran("future") == "value", "the callback does not return what its function returns")
    held = [ran]
    del ran

    def group_thread() -> None:
        time.sleep(0.05)
        held.clear()  # the last reference: freed here, as PythonFunctionGuard frees it

    t = threading.Thread(target=group_thread)
    t.start()
    check(len(comm._in_flight) == 1, f"in flight: {comm._in_flight}")
    comm._drain_at_exit()
    check(not comm._in_flight, "the exit function returned before the callback that ran was freed")
    t.join()
    check(never_ran is not None and not comm._in_flight, "a callback that never ran is counted in flight")
