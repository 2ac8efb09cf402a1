"""SIMULATED NCCL end-to-end checks: run sim_nccl_ops under mpirun with libtraintime.so
preloaded, then compare every rank file with the truth the program wrote itself. One pytest
function (one CTest test, sim_nccl_MODE_npN) per mode and world size.

MODE
  counts    calls and bytes per (op, comm_size) equal the truth exactly (groups, ncclBcast
            once, all ops); two communicators of the same size kept apart in `communicators`,
            each with the same stable id on every rank and its ops_enqueued; rank/world_size.
  busbw     for every row of the truth: the rank file has it, with GPU time when the op
            launched a kernel; algbw = bytes / gpu_ns and
            busbw = algbw x the nccl-tests factor of the row's comm_size (factors spelled here).
  fail      SIMGPU_NCCL_FAIL makes ncclAllReduce, then ncclBroadcast (and so ncclBcast), fail:
            the program sees the fake's return code and errno through the wrappers, and the
            failed calls are not counted.
  graph     NCCL calls captured into a CUDA graph count once per replay (calls, bytes, GPU time),
            not at capture.
  driver    SIMGPU_NCCL_LAUNCH=driver: NCCL launches through cuLaunchKernelEx (driver callbacks
            only), as real NCCL does with runtime and driver >= 11.8; the busbw checks hold and
            every communicator's ops_completed reaches its ops_enqueued (each kernel linked to
            its call's sequence number).
  v2_32     NCCL 2.32's *Config collectives and one-sided calls (ncclPutSignal, ncclSignal,
            ncclWaitSignal): the counts and busbw checks hold, the one-sided calls have rows of
            their own (op, bytes, communicator size), no GPU time and no sequence numbers.
  nonblocking  communicators created with config.blocking = 0: every call returns ncclInProgress
            and simgpu's NCCL launches from a thread it creates, where the calling thread's
            context is absent; counts, busbw and ops_completed == ops_enqueued still hold.
  fallback  TRAINTIME_NCCL=0: no interposition, yet comm kernels are found by name: rows with
            comm_size 0, bytes unknown, one call per kernel per op the kernel name says.

And sim_train --nccl-2-32 (rank 1 of 4; gradients through ncclAllReduceConfig, a one-sided
exchange per step): its rank file equals its truth (tests/sim/compare_truth.py), the one-sided
rows included, and its communicator's ops_enqueued counts the AllReduces only.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from types import SimpleNamespace

from testlib import SOURCE_DIR, Checks, clean_env, load_json, load_module

compare_truth = load_module(SOURCE_DIR / "tests" / "sim" / "compare_truth.py", "compare_truth")


# NCCL 2.32's one-sided calls: NCCL's proxy thread and copy engines do the work, no kernel.
ONE_SIDED = ("PutSignal", "Signal", "WaitSignal")


def busbw_factor(op, n):
    """nccl-tests doc/PERFORMANCE.md (and its gather/scatter tests)."""
    if op == "AllReduce":
        return 2.0 * (n - 1) / n
    if op in ("AllGather", "ReduceScatter", "AlltoAll", "Gather", "Scatter"):
        return (n - 1) / n
    if op in ("Broadcast", "Reduce", "Send", "Recv", "PutSignal"):
        return 1.0
    return 0.0


def close(a, b):
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1e-12)


def run_job(ck: Checks, args, workdir, extra_env, prog_args):
    out = os.path.join(workdir, "out")
    env = clean_env()
    env.update({
        "LD_PRELOAD": args.lib,
        "TRAINTIME_OUTPUT": out,
        "TRAINTIME_CUPTI_LIB": args.cupti,  # simgpu's CUPTI, never a real one
        "OMPI_ALLOW_RUN_AS_ROOT": "1",
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
        "OMPI_MCA_rmaps_base_oversubscribe": "1",
    })
    env.update(extra_env)
    mpirun = shutil.which("mpirun")
    assert mpirun, "mpirun not found (install openmpi-bin)"
    cmd = [mpirun, "-np", str(args.np), "--oversubscribe"]
    for var in ["LD_PRELOAD", "TRAINTIME_OUTPUT", "TRAINTIME_CUPTI_LIB"] + sorted(extra_env):
        cmd += ["-x", var]
    truth_pattern = os.path.join(workdir, "truth-%d.json")
    # Each rank writes its own truth file, named after its launcher rank.
    cmd += ["sh", "-c", 'p="$0"; t="$1"; shift; exec "$p" --truth "$t-$OMPI_COMM_WORLD_RANK.json" "$@"',
            args.prog, os.path.join(workdir, "truth")] + prog_args
    res = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         timeout=240, universal_newlines=True)
    if "SKIP [SIMULATED GPU]" in res.stdout:
        # simgpu is built with the tests and reports stream capture: a skip is a broken fake.
        raise AssertionError("simgpu could not report stream capture; the graph mode cannot be "
                             "checked:\n" + res.stdout)
    assert res.returncode == 0, "the simulated job failed (exit %d):\n%s" % (res.returncode, res.stdout)
    ranks = []
    for r in range(args.np):
        truth = load_json(truth_pattern % r)
        path = os.path.join(out, "rank-%05d.json" % r)
        if not ck.check(os.path.exists(path), "rank %d wrote no %s" % (r, path)):
            continue
        ranks.append((r, truth, load_json(path)))
    return ranks


def rows_with_calls(doc):
    return {(c["op"], c["comm_size"]): c for c in doc.get("comm", []) if c["calls"] > 0}


def check_counts(ck: Checks, ranks, n):
    ids = {}
    for r, truth, doc in ranks:
        ck.check(doc["rank"] == r and doc["world_size"] == n,
                 "rank %d: file says rank %s of %s" % (r, doc["rank"], doc["world_size"]))
        rows = rows_with_calls(doc)
        want = {(t["op"], t["comm_size"]): t for t in truth["comm"]}
        ck.check(set(rows) == set(want),
                 "rank %d: comm rows %s, truth %s" % (r, sorted(rows), sorted(want)))
        for key, t in want.items():
            got = rows.get(key)
            if got is None:
                continue
            ck.check(got["calls"] == t["calls"] and got["bytes"] == t["bytes"],
                     "rank %d %s: calls/bytes %d/%d, truth %d/%d" %
                     (r, key, got["calls"], got["bytes"], t["calls"], t["bytes"]))
            ck.check(got.get("bytes_known", True), "rank %d %s: bytes_known false" % (r, key))
            hist_calls = sum(b["calls"] for b in got.get("sizes", []))
            hist_bytes = sum(b["bytes"] for b in got.get("sizes", []))
            ck.check(hist_calls == t["calls"] and hist_bytes == t["bytes"],
                     "rank %d %s: size histogram sums to %d calls/%d bytes" %
                     (r, key, hist_calls, hist_bytes))
        comms = doc.get("communicators", [])
        ck.check(len(comms) == len(truth["communicators"]),
                 "rank %d: %d communicators, truth %d" % (r, len(comms), len(truth["communicators"])))
        for tc in truth["communicators"]:
            match = [c for c in comms if c["size"] == tc["size"] and c["rank"] == tc["rank"] and
                     c["ops_enqueued"] == tc["ops_enqueued"]]
            if ck.check(len(match) == 1, "rank %d: communicator %s (size %d, %d ops) found %d times"
                        % (r, tc["name"], tc["size"], tc["ops_enqueued"], len(match))):
                ids.setdefault(tc["name"], set()).add(match[0]["id"])
    for name, seen in ids.items():
        ck.check(len(seen) == 1, "communicator %s has different ids across ranks: %s" % (name, seen))
    all_ids = [i for seen in ids.values() for i in seen]
    ck.check(len(set(all_ids)) == len(all_ids), "two communicators share an id: %s" % ids)


def check_busbw(ck: Checks, ranks, n):
    for r, truth, doc in ranks:
        ck.check(doc.get("gpu_capture") == "cupti",
                 "rank %d: gpu_capture is %r (%s)" % (r, doc.get("gpu_capture"),
                                                     doc.get("gpu_capture_reason")))
        rows = rows_with_calls(doc)
        want = {(t["op"], t["comm_size"]): t for t in truth["comm"]}
        ck.check(want, "rank %d: the truth has no comm rows" % r)
        ck.check(set(rows) == set(want), "rank %d: comm rows %s, truth %s" % (r, sorted(rows), sorted(want)))
        # Every op the program called (the truth's rows), not only those the rank file reports.
        for key in sorted(want):
            op, size = key
            row = rows.get(key)
            if not ck.check(row is not None, "rank %d %s: no row in the rank file" % (r, key)):
                continue
            # One rank: no collective kernel. One-sided calls: never a kernel.
            launched = op not in ONE_SIDED and (size > 1 or op in ("Send", "Recv"))
            if op in ONE_SIDED:
                ck.check(row["gpu_ns"] == 0, "rank %d %s: GPU time %d for a call that launches no "
                         "kernel" % (r, key, row["gpu_ns"]))
            if launched and not ck.check(row["gpu_ns"] > 0, "rank %d %s: no GPU time" % (r, key)):
                continue
            if row["gpu_ns"] == 0:
                ck.check(row["algbw_gbps"] == 0 and row["busbw_gbps"] == 0,
                         "rank %d %s: bandwidth without GPU time" % (r, key))
                continue
            algbw = row["bytes"] / row["gpu_ns"]  # bytes per ns = 1e9 bytes/s
            ck.check(close(row["algbw_gbps"], algbw),
                     "rank %d %s: algbw %r, bytes/time %r" % (r, key, row["algbw_gbps"], algbw))
            want = algbw * busbw_factor(op, size)
            ck.check(close(row["busbw_gbps"], want),
                     "rank %d %s: busbw %r, expected %r" % (r, key, row["busbw_gbps"], want))
        comm = doc.get("categories", {}).get("comm", {})
        ck.check(comm.get("gpu_busy_ns", 0) > 0, "rank %d: no comm GPU time" % r)
        for c in doc.get("communicators", []):
            ck.check(c["ops_completed"] <= c["ops_enqueued"],
                     "rank %d communicator %s: %d completed > %d enqueued" %
                     (r, c["id"], c["ops_completed"], c["ops_enqueued"]))


def check_graph(ck: Checks, ranks, n):
    for r, truth, doc in ranks:
        rows = rows_with_calls(doc)
        want = {(t["op"], t["comm_size"]): t for t in truth["comm"]}
        ck.check(want, "rank %d: the truth has no rows (world size 1 captures no kernel)" % r)
        ck.check(set(rows) == set(want), "rank %d: comm rows %s, truth %s" % (r, sorted(rows), sorted(want)))
        for key, t in want.items():
            got = rows.get(key)
            if got is None:
                continue
            ck.check(got["calls"] == t["calls"] and got["bytes"] == t["bytes"],
                     "rank %d %s: calls/bytes %d/%d, truth %d/%d (one per replay)" %
                     (r, key, got["calls"], got["bytes"], t["calls"], t["bytes"]))
            ck.check(got["gpu_ns"] > 0, "rank %d %s: no GPU time" % (r, key))


def check_fallback(ck: Checks, ranks, n):
    for r, truth, doc in ranks:
        ck.check(doc.get("gpu_capture") == "cupti",
                 "rank %d: gpu_capture is %r" % (r, doc.get("gpu_capture")))
        rows = rows_with_calls(doc)
        got = {op: row for (op, size), row in rows.items()}
        ck.check(all(size == 0 for (_, size) in rows),
                 "rank %d: rows with a comm_size without interposition: %s" % (r, sorted(rows)))
        ck.check(set(got) == set(truth["kernels_by_name"]),
                 "rank %d: ops %s, kernels by name %s" % (r, sorted(got), sorted(truth["kernels_by_name"])))
        for op, kernels in truth["kernels_by_name"].items():
            row = got.get(op)
            if row is None:
                continue
            ck.check(row["calls"] == kernels, "rank %d %s: %d calls, %d kernels" %
                     (r, op, row["calls"], kernels))
            ck.check(row["gpu_ns"] > 0, "rank %d %s: no GPU time" % (r, op))
            ck.check(row.get("bytes_known") is False, "rank %d %s: bytes claimed known" % (r, op))
        ck.check(doc.get("categories", {}).get("comm", {}).get("gpu_busy_ns", 0) > 0,
                 "rank %d: no comm GPU time" % r)


def run_mode(build: Path, mode: str, np: int) -> None:
    args = SimpleNamespace(lib=str(build / "lib" / "libtraintime.so"),
                           prog=str(build / "tests" / "nccl" / "sim_nccl_ops"),
                           cupti=str(build / "sim" / "libcupti.so.13"), np=np)
    ck = Checks()  # one per test: a failure never leaks into the next test's verdict
    with tempfile.TemporaryDirectory(prefix="sim_nccl_") as work:
        if mode == "counts":
            check_counts(ck, run_job(ck, args, work, {}, []), np)
        elif mode == "busbw":
            check_busbw(ck, run_job(ck, args, work, {}, []), np)
        elif mode == "fail":
            for spec in ("ncclAllReduce:5", "ncclBroadcast:2"):
                sub = os.path.join(work, spec.split(":")[0])
                os.makedirs(sub)
                ranks = run_job(ck, args, sub, {"SIMGPU_NCCL_FAIL": spec}, ["--expect-fail", spec])
                check_counts(ck, ranks, np)
        elif mode in ("driver", "nonblocking"):
            if mode == "driver":
                ranks = run_job(ck, args, work, {"SIMGPU_NCCL_LAUNCH": "driver"}, [])
            else:
                ranks = run_job(ck, args, work, {"SIMGPU_NCCL_LAUNCH": "driver"}, ["--nonblocking"])
                check_counts(ck, ranks, np)
            check_busbw(ck, ranks, np)
            for r, _, doc in ranks:
                for c in doc.get("communicators", []):
                    ck.check(c["ops_completed"] == c["ops_enqueued"],
                             "rank %d communicator %s: %d of %d ops completed" %
                             (r, c["id"], c["ops_completed"], c["ops_enqueued"]))
        elif mode == "v2_32":
            ranks = run_job(ck, args, work, {}, ["--v2-32"])
            check_counts(ck, ranks, np)
            check_busbw(ck, ranks, np)
            for r, truth, doc in ranks:
                ops = {row["op"] for row in truth["comm"]}
                ck.check(set(ONE_SIDED) <= ops, "rank %d: the truth has no one-sided rows: %s" % (r, ops))
        elif mode == "graph":
            check_graph(ck, run_job(ck, args, work, {}, ["--graph-replays", "4"]), np)
        else:
            check_fallback(ck, run_job(ck, args, work, {"TRAINTIME_NCCL": "0"}, []), np)
    ck.done()


def test_sim_nccl_counts_np1(build_dir: Path) -> None:
    run_mode(build_dir, "counts", 1)


def test_sim_nccl_counts_np2(build_dir: Path) -> None:
    run_mode(build_dir, "counts", 2)


def test_sim_nccl_counts_np4(build_dir: Path) -> None:
    run_mode(build_dir, "counts", 4)


def test_sim_nccl_busbw_np1(build_dir: Path) -> None:
    run_mode(build_dir, "busbw", 1)


def test_sim_nccl_busbw_np2(build_dir: Path) -> None:
    run_mode(build_dir, "busbw", 2)


def test_sim_nccl_busbw_np4(build_dir: Path) -> None:
    run_mode(build_dir, "busbw", 4)


def test_sim_nccl_fail_np2(build_dir: Path) -> None:
    run_mode(build_dir, "fail", 2)


def test_sim_nccl_v2_32_np2(build_dir: Path) -> None:
    run_mode(build_dir, "v2_32", 2)


def test_sim_nccl_graph_np2(build_dir: Path) -> None:
    run_mode(build_dir, "graph", 2)


def test_sim_nccl_driver_np2(build_dir: Path) -> None:
    run_mode(build_dir, "driver", 2)


def test_sim_nccl_nonblocking_np2(build_dir: Path) -> None:
    run_mode(build_dir, "nonblocking", 2)


def test_sim_nccl_fallback_np2(build_dir: Path) -> None:
    run_mode(build_dir, "fallback", 2)


def test_sim_nccl_sim_train_v2_32_matches_its_truth(build_dir: Path) -> None:
    ck = Checks()
    steps = 3
    with tempfile.TemporaryDirectory(prefix="sim_nccl_train_") as work:
        env = clean_env({
            "LD_LIBRARY_PATH": str(build_dir / "sim"),
            "LD_PRELOAD": str(build_dir / "lib" / "libtraintime.so"),
            "TRAINTIME_OUTPUT": os.path.join(work, "out"),
            "TRAINTIME_CUPTI_LIB": str(build_dir / "sim" / "libcupti.so.13"),
            "RANK": "1", "WORLD_SIZE": "4",
        })
        truth_path = os.path.join(work, "truth-1.json")
        cmd = [str(build_dir / "bin" / "sim_train"), "--steps", str(steps), "--nccl-2-32",
               "--truth", os.path.join(work, "truth-%r.json")]
        res = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             timeout=120, universal_newlines=True)
        assert res.returncode == 0, "sim_train --nccl-2-32 failed (exit %d):\n%s" % (res.returncode, res.stdout)
        truth = load_json(truth_path)
        doc = load_json(os.path.join(work, "out", "rank-00001.json"))
    ck.extend(compare_truth.compare(doc, truth), "rank file vs truth: ")
    rows = rows_with_calls(doc)
    # Spelled here from sim_train's schedule, not from its truth: 1 KiB put, two bare signals.
    for op, nbytes in (("PutSignal", 1024), ("Signal", 0), ("WaitSignal", 0)):
        row = rows.get((op, 4))
        if ck.check(row is not None, "no %s row of comm_size 4: %s" % (op, sorted(rows))):
            ck.check(row["calls"] == steps and row["bytes"] == steps * nbytes and row["gpu_ns"] == 0,
                     "%s: calls %d bytes %d gpu_ns %d, want %d, %d, 0" %
                     (op, row["calls"], row["bytes"], row["gpu_ns"], steps, steps * nbytes))
    allreduce = rows.get(("AllReduce", 4))
    comms = doc.get("communicators", [])
    if ck.check(allreduce is not None and len(comms) == 1,
                "AllReduce row %s, communicators %s" % (allreduce, comms)):
        ck.check(comms[0]["size"] == 4 and comms[0]["rank"] == 1 and
                 comms[0]["ops_enqueued"] == allreduce["calls"],
                 "communicator %s: the one-sided calls took sequence numbers (AllReduce calls %d)"
                 % (comms[0], allreduce["calls"]))
    ck.done()
