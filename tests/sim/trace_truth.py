#!/usr/bin/env python3
"""The truth of a real trace's replay: what traintime's rank file of `sim_replay TRACE --mode M` must say.

    tests/sim/trace_truth.py TRACE --mode bare|annotated [-o FILE]

Computed from the torch.profiler (Kineto) trace alone, sharing no code with traintime or sim_replay
(SIMULATED GPU: the replay runs on simgpu). It reads the trace with Python's json module, times
exactly (microseconds with three decimals -> integer ns, half up, never through a float), and
applies the replay's contract (tests/sim/README.md, "Replaying real traces") and traintime's
attribution rules (DESIGN §3-4) by brute force:

  - replayed GPU work: every kernel, memcpy and memset whose launch (the CUDA runtime or driver
    call with its correlation id, also one Kineto names INVALID: its name table ends before CUDA
    13's <<<>>> launch) is in the trace; it runs at its recorded
    start, or at its launch's start when the recording puts it earlier, for its recorded duration
  - order: a launch at time t comes after every range end and step mark at t and after every range
    start at t (so [start, end) ranges hold the launches made at start <= t < end)
  - steps (annotated): each ProfilerStep#N ends a step at its end; a launch's step is the number
    of step ends at or before it. Bare: no step ends, all work is one final partial step
  - ranges (annotated): user_annotation ranges other than ProfilerStep#N, nested per thread in
    opening order (start, then the longer first); one that outlives the range it opened in is cut at
    that range's end
  - category: NCCL kernels (by name) are comm; other work takes the innermost range open on its
    launching thread, else the innermost range open on the step thread (the thread of the last
    step end, before the first one the first thread that opened a range or ended a step), else it
    is unattributed; a range's category is the first rule its name's tokens match (forward, then
    backward, optimizer, io), else its parent's, else other. Bare: every non-comm activity is
    unattributed
  - per step: GPU busy = |union of all|, compute = |union of non-comm, non-io|, comm, exposed comm
    = |comm - compute|, comm overlapped, io, span (and its first start and last end), idle = span -
    busy, busy by category, kernel
    time by name, copies by kind, work launched with no range open (unattributed)
  - NCCL calls: op and count from the trace's arguments (Collective name, In/Out msg nelems, dtype,
    Group size, on the kernel or on the CPU op with its External id), else op and type from the
    kernel's name with bytes unknown (a SendRecv kernel: one Send and one Recv)

Prints the truth in the form tests/sim/compare_truth.py reads (categories, steps with by_step,
memcpy, regions) plus kernels, comm_calls and comm_gpu_ns. Exit 2 when the file is not a trace.
"""
from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from collections import defaultdict
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any, Iterable

CATEGORIES = ("forward", "backward", "optimizer", "io", "other", "recompute", "comm", "unattributed")
RULES = (("forward", {"forward", "fwd"}), ("backward", {"backward", "bwd"}),
         ("optimizer", {"optimizer", "optim", "adam", "sgd"}), ("io", {"io", "data", "dataloader", "load", "h2d"}))
GPU_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "memcpy": "memcpy", "gpu_memset": "memset", "memset": "memset"}
CALL_CATS = {"cuda_runtime", "runtime", "cuda_driver", "driver"}
# Launch before: a step end or range end at the same microsecond comes first, then range starts.
RANGE_END, STEP_END, RANGE_START, CALL = 0, 1, 2, 4
TYPE_SIZE = {"float": 4, "double": 8, "half": 2, "bfloat16": 2, "int": 4, "long": 8, "char": 1, "byte": 1,
             "bool": 1, "uint32": 4, "uint64": 8, "float8_e4m3fn": 1, "float8_e5m2": 1}


class NotATrace(Exception):
    pass


def ns(value: Any) -> int:
    """Kineto's microseconds (int, or Decimal read from the text) -> integer nanoseconds, half up."""
    return int((Decimal(value) * 1000).to_integral_value(rounding=ROUND_HALF_UP))


def load_trace(path: Path) -> dict:
    try:
        raw = path.read_bytes()
        text = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
        doc = json.loads(text, parse_float=Decimal)
    except (OSError, EOFError, ValueError) as e:
        raise NotATrace(f"{path}: cannot be read as a (gzipped) JSON trace: {e}") from e
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise NotATrace(f"{path}: is not a Kineto trace: it has no traceEvents")
    return doc


def tokens(name: str) -> list[str]:
    """A name's tokens, lower-cased: split on non-alphanumerics and where camelCase starts a word
    (after a lower-case letter; before the last capital of an acronym followed by lower case;
    after digits that follow a lower-case letter: "layer3Fwd" -> layer3 fwd, "H2D" stays whole)."""
    out: list[str] = []
    cur = ""
    for i, ch in enumerate(name):
        if not ch.isascii() or not ch.isalnum():
            if cur:
                out.append(cur)
            cur = ""
            continue
        if ch.isupper() and cur:
            prev = name[i - 1]
            next_lower = i + 1 < len(name) and name[i + 1].islower()
            j = i
            while j > 0 and name[j - 1].isdigit():
                j -= 1
            digits_after_lower = j < i and j > 0 and name[j - 1].islower()
            if prev.islower() or (next_lower and (prev.isupper() or prev.isdigit())) or digits_after_lower:
                out.append(cur)
                cur = ""
        cur += ch.lower()
    if cur:
        out.append(cur)
    return out


def own_category(name: str) -> str | None:
    toks = set(tokens(name))
    for category, words in RULES:
        if toks & words:
            return category
    return None


def path_category(path: list[str]) -> str:
    category = "other"
    for name in path:
        if name.lower() == "step":
            continue  # a step marker keeps its parent's category
        category = own_category(name) or category
    return category


def is_nccl_kernel(name: str) -> bool:
    ident = name[5:] if name.startswith("void ") else name
    return ident.startswith(("ncclKernel_", "ncclDevKernel_", "ncclSymk"))


def union(intervals: Iterable[tuple[int, int]]) -> int:
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(iv for iv in intervals if iv[1] > iv[0]):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + (cur_e - cur_s if cur_e is not None else 0)


def subtract(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    """|union(a) - union(b)|."""
    return union(a + b) - union(b)


def copy_kind(name: str) -> str:
    for kind in ("HtoD", "DtoH", "DtoD", "PtoP"):
        if kind in name:
            return kind
    return "Other"


def nccl_op_from_args(args: dict) -> tuple[str, int | None, str] | None:
    """(op, count, dtype) from PyTorch's record_param_comms arguments, or None."""
    name = str(args.get("Collective name", "")).lower()
    dtype = str(args.get("dtype", "")).lower()
    if not name or dtype not in TYPE_SIZE:
        return None
    size = int(args.get("Group size") or 1)
    inn, out = args.get("In msg nelems"), args.get("Out msg nelems")
    first = lambda *xs: next((int(x) for x in xs if x is not None), None)  # noqa: E731
    table = [("all_to_all", "AlltoAll"), ("alltoall", "AlltoAll"), ("allreduce", "AllReduce"),
             ("all_reduce", "AllReduce"), ("barrier", "AllReduce"), ("reduce_scatter", "ReduceScatter"),
             ("reducescatter", "ReduceScatter"), ("allgather", "AllGather"), ("all_gather", "AllGather"),
             ("broadcast", "Broadcast"), ("reduce", "Reduce"), ("send", "Send"), ("recv", "Recv"),
             ("gather", "Gather"), ("scatter", "Scatter")]
    op = next((o for key, o in table if key in name), None)
    if op is None:
        return None
    if op in ("AllReduce", "Broadcast", "Reduce", "Send", "Gather"):
        count = first(inn, out)
    elif op in ("Recv", "Scatter"):
        count = first(out, inn)
    elif op == "AllGather":
        count = int(inn) if inn is not None else (int(out) // size if out is not None else None)
    elif op == "ReduceScatter":
        count = int(out) if out is not None else (int(inn) // size if inn is not None else None)
    else:  # AlltoAll: per peer
        total = first(inn, out)
        count = total // size if total is not None else None
    if count is None:
        return None
    return op, count, dtype


def nccl_bytes(op: str, count: int, type_size: int, n: int) -> int:
    """nccl-tests' size: the total array for AllGather, ReduceScatter, AlltoAll, Gather, Scatter."""
    per = count * type_size
    return per * n if op in ("AllGather", "ReduceScatter", "AlltoAll", "Gather", "Scatter") else per


def nccl_ops_from_name(name: str) -> list[str]:
    ident = (name[5:] if name.startswith("void ") else name).split("(")[0]
    parts = ident.split("_")
    op = parts[1] if len(parts) > 1 else ""
    if op in ("AllReduce", "Broadcast", "Reduce", "AllGather", "ReduceScatter"):
        return [op]
    return ["Send", "Recv"]  # SendRecv, Generic: a grouped send and receive


def compute(doc: dict, mode: str, path: Path | str = "trace", with_activities: bool = False) -> dict:
    """The truth of the trace's replay; with_activities adds "activities": every replayed GPU activity
    as {kind, name, start, end, step, cat} (for tests/sim/hta_compare.py, which needs the intervals)."""
    events = doc["traceEvents"]
    dist = doc.get("distributedInfo") or {}
    world = int(dist.get("world_size") or 1)
    calls: dict[int, dict] = {}
    acts: list[dict] = []
    annotations: list[tuple[int, dict]] = []
    coll_args: dict[int, dict] = {}
    for order, e in enumerate(events):
        if not isinstance(e, dict) or e.get("ph") != "X" or "ts" not in e:
            continue
        cat = str(e.get("cat", "")).lower()
        args = e.get("args") or {}
        if cat in CALL_CATS:
            c = args.get("correlation")
            driver = cat in ("cuda_driver", "driver")
            if c is not None and (c not in calls or (calls[c]["driver"] and not driver)):
                calls[c] = {"ts": ns(e["ts"]), "tid": e.get("tid"), "driver": driver}
        elif cat in GPU_CATS and "correlation" in args:
            acts.append({"kind": GPU_CATS[cat], "name": e.get("name", ""), "start": ns(e["ts"]),
                         "dur": max(ns(e.get("dur", 0)), 0), "bytes": int(args.get("bytes", 0) or 0),
                         "corr": args["correlation"], "args": args})
        elif cat == "user_annotation":
            annotations.append((order, e))
        if "Collective name" in args and cat not in GPU_CATS and args.get("External id") is not None:
            coll_args[args["External id"]] = args

    launched = [a for a in acts if a["corr"] in calls]
    if not launched:
        raise NotATrace(f"{path}: holds no GPU activity whose launch is in it")
    clamped = 0
    for a in launched:
        call = calls[a["corr"]]
        a["launch"] = (call["ts"], CALL, a["corr"])
        a["tid"] = call["tid"]
        clamped += a["start"] < call["ts"]
        a["start"] = max(a["start"], call["ts"])
        a["end"] = a["start"] + a["dur"]

    # Steps and ranges (annotated).
    marks: list[tuple[int, Any]] = []           # (end ts, tid)
    ranges: dict[Any, list[tuple[int, int, int, str]]] = defaultdict(list)  # tid -> (start, end, order, name)
    first_recorder: tuple | None = None
    if mode == "annotated":
        by_thread: dict[Any, list[tuple[int, dict]]] = defaultdict(list)
        for order, e in annotations:
            by_thread[e.get("tid")].append((order, e))
        for tid, lst in by_thread.items():
            lst.sort(key=lambda oe: (ns(oe[1]["ts"]), -ns(oe[1].get("dur", 0)), oe[0]))
            open_ends: list[int] = []
            for k, (order, e) in enumerate(lst):
                s, d = ns(e["ts"]), max(ns(e.get("dur", 0)), 0)
                name = e.get("name", "")
                if name.startswith("ProfilerStep#"):
                    marks.append((s + d, tid))
                    key = (s + d, STEP_END)
                else:
                    while open_ends and open_ends[-1] <= s:
                        open_ends.pop()
                    end = min(s + d, open_ends[-1]) if open_ends else s + d
                    ranges[tid].append((s, end, k, name))
                    if name.lower() == "step":  # traintime: a region named step ends a step when it closes
                        marks.append((end, tid))
                    if end > s:
                        open_ends.append(end)
                    key = (s, RANGE_START)
                if first_recorder is None or key < first_recorder[0]:
                    first_recorder = (key, tid)
        marks.sort(key=lambda m: m[0])

    for lst in ranges.values():
        lst.sort(key=lambda r: (r[0], r[2]))

    def open_path(tid: Any, t: tuple) -> list[str]:
        """Names of the ranges of `tid` open at sequencer position t, outermost first."""
        return [name for (s, e, _k, name) in ranges.get(tid, []) if (s, RANGE_START) < t < (e, RANGE_END)]

    def context_path(a: dict) -> list[str]:
        """The ranges open for a launch: its thread's, else the step thread's (DESIGN §4 rule 2)."""
        t = a["launch"]
        path = open_path(a["tid"], t)
        if not path:
            before = [tid for m, tid in marks if (m, STEP_END) < t]
            step_thread = before[-1] if before else (first_recorder[1] if first_recorder else None)
            if step_thread is not None and step_thread != a["tid"]:
                path = open_path(step_thread, t)
        return path

    # Attribution.
    for a in launched:
        a["step"] = sum(1 for m, _ in marks if (m, STEP_END) < a["launch"])
        path = context_path(a) if mode == "annotated" else []
        a["path"] = "/".join(path)
        if a["kind"] == "kernel" and is_nccl_kernel(a["name"]):
            a["cat"] = "comm"
        else:
            a["cat"] = path_category(path) if path else "unattributed"

    steps_count = len(marks)
    by_step: dict[int, list[dict]] = defaultdict(list)
    for a in launched:
        by_step[a["step"]].append(a)

    cats = {c: {"gpu_busy_ns": 0, "gpu_sum_ns": 0, "count": 0} for c in CATEGORIES}
    totals = dict.fromkeys(("gpu_busy_ns", "compute_ns", "comm_ns", "comm_overlapped_ns", "exposed_comm_ns",
                            "io_ns", "idle_ns"), 0)
    rows = []
    for step in sorted(by_step):
        work = by_step[step]
        iv = lambda pred: [(a["start"], a["end"]) for a in work if pred(a)]  # noqa: E731
        everything = iv(lambda a: True)
        compute_iv = iv(lambda a: a["cat"] not in ("comm", "io"))
        comm_iv = iv(lambda a: a["cat"] == "comm")
        busy = union(everything)
        first_start, last_end = min(a["start"] for a in work), max(a["end"] for a in work)
        span = last_end - first_start
        row = {"index": step, "first_start_ns": first_start, "last_end_ns": last_end, "span_ns": span, "gpu_busy_ns": busy, "compute_ns": union(compute_iv),
               "comm_ns": union(comm_iv), "exposed_comm_ns": subtract(comm_iv, compute_iv),
               "io_ns": union(iv(lambda a: a["cat"] == "io")), "idle_ns": span - busy,
               "busy_ns_by_category": {}}
        row["comm_overlapped_ns"] = row["comm_ns"] - row["exposed_comm_ns"]
        for c in CATEGORIES:
            u = union(iv(lambda a, c=c: a["cat"] == c))
            if any(a["cat"] == c for a in work):
                row["busy_ns_by_category"][c] = u
            cats[c]["gpu_busy_ns"] += u
        kernels: dict[str, dict] = defaultdict(lambda: {"count": 0, "gpu_sum_ns": 0})
        copies: dict[str, dict] = defaultdict(lambda: {"count": 0, "bytes": 0, "gpu_ns": 0})
        for a in work:
            cats[a["cat"]]["gpu_sum_ns"] += a["dur"]
            cats[a["cat"]]["count"] += 1
            if a["kind"] == "kernel":
                kernels[a["name"]]["count"] += 1
                kernels[a["name"]]["gpu_sum_ns"] += a["dur"]
            elif a["kind"] == "memcpy":
                c = copies[copy_kind(a["name"])]
                c["count"] += 1
                c["bytes"] += a["bytes"]
                c["gpu_ns"] += a["dur"]
        row["kernels_by_name"] = dict(sorted(kernels.items()))
        row["memcpy"] = dict(sorted(copies.items()))
        row["unattributed"] = {"count": sum(1 for a in work if a["cat"] == "unattributed"),
                               "gpu_busy_ns": row["busy_ns_by_category"].get("unattributed", 0)}
        for field in totals:
            totals[field] += row[field]
        rows.append(row)

    memcpy: dict[str, dict] = {}
    kernels: dict[str, dict] = {}
    for row in rows:
        for kind, c in row["memcpy"].items():
            m = memcpy.setdefault(kind, {"count": 0, "bytes": 0, "gpu_ns": 0})
            for f in m:
                m[f] += c[f]
        for name, k in row["kernels_by_name"].items():
            m = kernels.setdefault(name, {"count": 0, "gpu_sum_ns": 0})
            for f in m:
                m[f] += k[f]

    # Regions (annotated): each path's own work; comm kernels only in kernels_by_name.
    regions: dict[str, dict] = {}
    if mode == "annotated":
        for a in launched:
            if not a["path"]:
                continue
            r = regions.setdefault(a["path"], {"path": a["path"], "category": path_category(a["path"].split("/")),
                                               "kernels": 0, "activities": 0, "gpu_sum_ns": 0, "gpu_busy_ns": 0,
                                               "kernels_by_name": {}, "_iv": defaultdict(list)})
            if a["kind"] == "kernel":
                k = r["kernels_by_name"].setdefault(a["name"], {"count": 0, "gpu_sum_ns": 0})
                k["count"] += 1
                k["gpu_sum_ns"] += a["dur"]
            if a["cat"] == "comm":
                continue
            r["kernels"] += a["kind"] == "kernel"
            r["activities"] += 1
            r["gpu_sum_ns"] += a["dur"]
            r["_iv"][a["step"]].append((a["start"], a["end"]))
        for r in regions.values():
            r["gpu_busy_ns"] = sum(union(v) for v in r.pop("_iv").values())

    # NCCL calls as the replay makes them.
    comm_calls: dict[tuple[str, int], dict] = {}
    comm_gpu = 0
    for a in launched:
        if a["cat"] != "comm":
            continue
        comm_gpu += a["dur"]
        args = a["args"] if "Collective name" in a["args"] else coll_args.get(a["args"].get("External id"), {})
        parsed = nccl_op_from_args(args) if args else None
        if parsed:
            op, count, dtype = parsed
            size = int(args.get("Group size") or world)
            ops = [(op, size, nccl_bytes(op, count, TYPE_SIZE[dtype], size))]
        else:
            ops = [(op, world, None) for op in nccl_ops_from_name(a["name"])]
        for op, size, nbytes in ops:
            row = comm_calls.setdefault((op, size), {"op": op, "comm_size": size, "calls": 0, "bytes": 0})
            row["calls"] += 1
            row["bytes"] = None if nbytes is None or row["bytes"] is None else row["bytes"] + nbytes

    last = max(by_step)
    extra = {"activities": [{k: a[k] for k in ("kind", "name", "start", "end", "step", "cat")} for a in launched]
             } if with_activities else {}
    return extra | {
        "source": "trace_truth",
        "mode": mode,
        "rank": dist.get("rank", 0),
        "world_size": world,
        "activities_without_launch": len(acts) - len(launched),
        "clamped": clamped,
        "categories": cats,
        "steps": {"count": steps_count, "partial_final_step": last >= steps_count, "totals": totals,
                  "by_step": rows},
        "memcpy": memcpy,
        "kernels": dict(sorted(kernels.items())),
        "regions": sorted(regions.values(), key=lambda r: r["path"]),
        "comm_calls": sorted(comm_calls.values(), key=lambda r: (r["op"], r["comm_size"])),
        "comm_gpu_ns": comm_gpu,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", type=Path)
    ap.add_argument("--mode", choices=("bare", "annotated"), required=True)
    ap.add_argument("-o", "--output", type=Path, help="write the JSON here instead of stdout")
    args = ap.parse_args()
    try:
        truth = compute(load_trace(args.trace), args.mode, args.trace)
    except NotATrace as e:
        print(f"trace_truth: {e}", file=sys.stderr)
        return 2
    text = json.dumps(truth, indent=1, sort_keys=True)
    if args.output:
        args.output.write_text(text + "\n", encoding="utf-8")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
