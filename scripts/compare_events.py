#!/usr/bin/env python3
"""Compare traintime's per-rank GPU figures with CUDA-event timings of the same run.

    compare_events.py --rank-file traintime-out/rank-00000.json --events events-0.json
    compare_events.py --self-test [--fixtures tests/gpu/data]

The events file is written by the examples (cuda_mlp --events-out, nccl_sweep --events-out,
examples/torch_loop.py --events-out); schema "traintime-example-events/1".

Regions. Each event region (a path such as "forward" or "backward/comm", timed on one stream
with a CUDA-event pair per entry) is compared with the rank file's exclusive row of the same
path: `regions[].gpu_span_ns`, which DESIGN §6 defines as the sum over entries of
[first start, last end] of the region's GPU work. On one stream both measure the same interval
up to the launch latency at the region's start, so they must agree within --tolerance-pct
(default 1 %) wherever the region's mean time per entry is at least --min-ms (default 1 ms);
shorter regions are listed but not judged, because a few microseconds of start latency is then
a large fraction.

Comm. Each op of the events file's "comm" list is put beside the rank file's comm row of the
same op and communicator size. Calls and bytes (nccl-tests convention on both sides) must match
exactly: every call the sweep makes is an outermost NCCL call. Times are printed, not judged: at
world size 1 NCCL launches no collective kernel (it copies or does nothing), so no bandwidth is
claimed.

Exit status: 0 everything judged agrees, 1 a disagreement (or nothing could be judged),
2 unusable input (missing or malformed file, GPU capture not active).
Standard library only: it runs on the GPU machine, which has no network.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
from typing import Any, Iterable

EXIT_OK, EXIT_DISAGREE, EXIT_UNUSABLE = 0, 1, 2


class Unusable(Exception):
    """Input that cannot be compared at all."""


def load_json(path: str, what: str) -> Any:
    """A JSON file, or a gzipped one when the name ends in .gz (torch.profiler writes both)."""
    try:
        with (gzip.open(path, "rt", encoding="utf-8") if str(path).endswith(".gz")
              else open(path, encoding="utf-8")) as f:
            return json.load(f)
    except OSError as e:
        raise Unusable(f"cannot read the {what} {path}: {e.strerror}") from e
    except json.JSONDecodeError as e:
        raise Unusable(f"the {what} {path} is not valid JSON: {e}") from e


def check_rank_file(rank: Any, path: str) -> None:
    schema = rank.get("schema", "")
    if not isinstance(schema, str) or not schema.startswith("traintime/"):
        raise Unusable(f"{path} is not a traintime rank file (schema {schema!r})")
    capture = rank.get("gpu_capture")
    if capture != "cupti":
        reason = rank.get("gpu_capture_reason") or "no reason given"
        raise Unusable(f"{path}: GPU capture was {capture!r} ({reason}); nothing to compare")


def check_events_file(events: Any, path: str) -> None:
    if events.get("schema") != "traintime-example-events/1":
        raise Unusable(f"{path} is not an events file (schema {events.get('schema')!r})")


def fmt_ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    line = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()
    out = [line(header), line(["-" * w for w in widths])]
    out += [line(r) for r in rows]
    return "\n".join(out)


def compare_regions(rank: dict, events: dict, tolerance_pct: float, min_ms: float) -> tuple:
    """Returns (text, judged, failures)."""
    rows_by_path = {}
    for row in rank.get("regions", []):
        rows_by_path[row.get("path")] = row
    header = ["region", "entries tt/ev", "traintime ms", "events ms", "diff %", "verdict"]
    rows, judged, failures = [], 0, 0
    for reg in events.get("regions", []):
        path = reg["path"]
        per_step = reg.get("per_step_ms", [])
        ev_ms = float(reg.get("total_ms", sum(per_step)))
        entries = int(reg.get("entries", len(per_step)))
        mean = ev_ms / entries if entries else 0.0
        row = rows_by_path.get(path)
        big = mean >= min_ms
        if row is None:
            verdict = "MISSING in rank file" if big else f"skip (< {min_ms:g} ms/entry)"
            rows.append([path, f"-/{entries}", "-", fmt_ms(ev_ms), "-", verdict])
            if big:
                judged += 1
                failures += 1
            continue
        tt_ms = int(row.get("gpu_span_ns", 0)) / 1e6
        diff = (tt_ms - ev_ms) / ev_ms * 100.0 if ev_ms > 0 else None
        count = row.get("count")
        note = "" if count == entries else " (entry count differs)"
        if not big:
            verdict = f"skip (< {min_ms:g} ms/entry)"
        elif diff is not None and abs(diff) <= tolerance_pct:
            verdict = "ok"
            judged += 1
        else:
            verdict = f"DISAGREE (> {tolerance_pct:g} %)"
            judged += 1
            failures += 1
        rows.append([path, f"{count}/{entries}", fmt_ms(tt_ms), fmt_ms(ev_ms),
                     "-" if diff is None else f"{diff:+.2f}", verdict + note])
    return table(header, rows), judged, failures


def compare_comm(rank: dict, events: dict) -> tuple:
    """Returns (text, judged, failures)."""
    world = int(events.get("world_size", 1))
    tt_rows = {(r.get("op"), int(r.get("comm_size", 0))): r for r in rank.get("comm", [])}
    header = ["op", "comm_size", "calls tt/ev", "bytes tt", "bytes ev", "traintime ms",
              "events ms", "verdict"]
    rows, judged, failures = [], 0, 0
    for op in events.get("comm", []):
        name, size = op["op"], int(op.get("comm_size", world))
        tt = tt_rows.get((name, size))
        judged += 1
        if tt is None:
            failures += 1
            rows.append([name, size, f"-/{op['calls']}", "-", op["bytes"], "-",
                         fmt_ms(op["total_ms"]), "MISSING in rank file"])
            continue
        calls_ok = int(tt.get("calls", -1)) == int(op["calls"])
        # bytes_known false: found by kernel name only, bytes are 0 by design (schema.md).
        bytes_known = tt.get("bytes_known", True)
        bytes_ok = not bytes_known or int(tt.get("bytes", -1)) == int(op["bytes"])
        bad = [w for w, ok in (("calls", calls_ok), ("bytes", bytes_ok)) if not ok]
        failures += 1 if bad else 0
        verdict = f"DISAGREE ({', '.join(bad)})" if bad else (
            "calls, bytes ok" if bytes_known else "calls ok (bytes unknown)")
        rows.append([name, size, f"{tt.get('calls')}/{op['calls']}", tt.get("bytes"),
                     op["bytes"], fmt_ms(int(tt.get("gpu_ns", 0)) / 1e6),
                     fmt_ms(op["total_ms"]), verdict])
    text = table(header, rows)
    if world == 1:
        text += ("\nworld size 1: NCCL launches no collective kernel here (an out-of-place call"
                 " copies the buffer, an in-place one does nothing); the times are copy times and"
                 " no bandwidth is claimed from them.")
    return text, judged, failures


def compare(rank_path: str, events_path: str, tolerance_pct: float = 1.0, min_ms: float = 1.0,
            informational: bool = False) -> tuple[int, str]:
    """Returns (exit status, report text)."""
    try:
        rank = load_json(rank_path, "rank file")
        events = load_json(events_path, "events file")
        check_rank_file(rank, rank_path)
        check_events_file(events, events_path)
    except Unusable as e:
        return EXIT_UNUSABLE, f"compare_events: {e}"
    parts = [f"{events.get('program', '?')} on {events.get('device', '?')}, rank "
             f"{events.get('rank')}/{events.get('world_size')}: traintime {rank_path} vs "
             f"CUDA events {events_path}",
             f"events: {events.get('timing', '')}"]
    judged = failures = 0
    if events.get("regions"):
        text, j, f = compare_regions(rank, events, tolerance_pct, min_ms)
        parts += ["", text]
        judged, failures = judged + j, failures + f
    if events.get("comm"):
        text, j, f = compare_comm(rank, events)
        parts += ["", text]
        judged, failures = judged + j, failures + f
    for note in events.get("notes", []):
        parts.append(f"note: {note}")
    if informational:
        parts.append("informational comparison: not judged")
        return EXIT_OK, "\n".join(parts)
    if judged == 0:
        parts.append("RESULT: nothing could be judged (no region reached the threshold)")
        return EXIT_DISAGREE, "\n".join(parts)
    if failures:
        parts.append(f"RESULT: {failures} of {judged} judged rows DISAGREE")
        return EXIT_DISAGREE, "\n".join(parts)
    parts.append(f"RESULT: all {judged} judged rows agree")
    return EXIT_OK, "\n".join(parts)


# ---------------------------------------------------------------------------------------------
# Self-test: hand-made files from --fixtures (tests/gpu/data) plus edge cases built here. The
# script under test runs as a subprocess, exactly as gpu-validate.sh runs it.


def _run_cli(*args: str) -> tuple[int, str]:
    p = subprocess.run([sys.executable, os.path.abspath(__file__), *args],
                       capture_output=True, text=True, check=False)
    return p.returncode, p.stdout + p.stderr


def _events(regions: Iterable = (), comm: Iterable = (), world: int = 1) -> dict:
    return {"schema": "traintime-example-events/1", "program": "selftest", "rank": 0,
            "world_size": world, "device": "none", "timing": "hand-made",
            "regions": [{"path": p, "entries": len(v), "total_ms": sum(v), "per_step_ms": v}
                        for p, v in regions],
            "comm": list(comm), "notes": []}


def _rank(regions: Iterable = (), comm: Iterable = (), capture: str = "cupti") -> dict:
    return {"schema": "traintime/1", "gpu_capture": capture,
            "gpu_capture_reason": "" if capture == "cupti" else "CUPTI subscriber taken",
            "regions": [{"path": p, "count": c, "gpu_span_ns": ns} for p, c, ns in regions],
            "comm": list(comm)}


def self_test(fixtures: str | None) -> int:
    failures = []

    def expect(name: str, args: list[str], code: int, *needles: str) -> None:
        got, out = _run_cli(*args)
        missing = [n for n in needles if n not in out]
        if got != code or missing:
            failures.append(f"{name}: exit {got} (wanted {code}), missing {missing}\n{out}")
        else:
            print(f"ok: {name}")

    if fixtures:
        d = fixtures
        expect("hand-made run that agrees passes",
               ["--rank-file", f"{d}/agree-rank.json", "--events", f"{d}/agree-events.json"],
               EXIT_OK, "RESULT: all", "skip (< 1 ms/entry)")
        expect("hand-made run that disagrees fails",
               ["--rank-file", f"{d}/disagree-rank.json", "--events",
                f"{d}/disagree-events.json"], EXIT_DISAGREE, "DISAGREE (> 1 %)")
        expect("hand-made sweep with matching calls passes",
               ["--rank-file", f"{d}/sweep-rank.json", "--events", f"{d}/sweep-events.json"],
               EXIT_OK, "calls, bytes ok", "no bandwidth is claimed")

    with tempfile.TemporaryDirectory() as tmp:
        def write(name, obj):
            path = os.path.join(tmp, name)
            with open(path, "w", encoding="utf-8") as f:
                json.dump(obj, f)
            return path

        ev = write("ev.json", _events([("forward", [2.0] * 10)]))
        # 0.9 % and 1.1 % either side of the 1 % line.
        expect("0.9 % off is within tolerance",
               ["--rank-file", write("r1.json", _rank([("forward", 10, 20_180_000)])),
                "--events", ev], EXIT_OK, "+0.90", "ok")
        expect("1.1 % off is a disagreement",
               ["--rank-file", write("r2.json", _rank([("forward", 10, 19_780_000)])),
                "--events", ev], EXIT_DISAGREE, "-1.10", "DISAGREE")
        expect("a region of >= 1 ms missing from the rank file fails",
               ["--rank-file", write("r3.json", _rank([("backward", 10, 20_000_000)])),
                "--events", ev], EXIT_DISAGREE, "MISSING in rank file")
        expect("only sub-millisecond regions: nothing judged is a failure",
               ["--rank-file", write("r4.json", _rank([("io", 10, 900_000)])),
                "--events", write("ev4.json", _events([("io", [0.05] * 10)]))],
               EXIT_DISAGREE, "nothing could be judged")
        expect("GPU capture unavailable is unusable input",
               ["--rank-file", write("r5.json", _rank([("forward", 10, 20_000_000)],
                                                      capture="unavailable")),
                "--events", ev], EXIT_UNUSABLE, "CUPTI subscriber taken")
        expect("a missing events file is unusable input",
               ["--rank-file", write("r6.json", _rank()), "--events", f"{tmp}/none.json"],
               EXIT_UNUSABLE, "cannot read the events file")
        sweep_ev = write("sev.json", _events(comm=[{"op": "AllReduce", "comm_size": 1,
                                                    "calls": 12, "bytes": 4096,
                                                    "total_ms": 0.1}]))
        expect("comm calls that differ fail",
               ["--rank-file", write("r7.json", _rank(comm=[{"op": "AllReduce", "comm_size": 1,
                                                             "calls": 11, "bytes": 4096,
                                                             "gpu_ns": 0}])),
                "--events", sweep_ev], EXIT_DISAGREE, "DISAGREE (calls)")
        expect("comm bytes that differ fail",
               ["--rank-file", write("r9.json", _rank(comm=[{"op": "AllReduce", "comm_size": 1,
                                                             "calls": 12, "bytes": 4000,
                                                             "gpu_ns": 0}])),
                "--events", sweep_ev], EXIT_DISAGREE, "DISAGREE (bytes)")
        expect("bytes found by kernel name only are not judged",
               ["--rank-file", write("r10.json", _rank(comm=[{"op": "AllReduce", "comm_size": 1,
                                                              "calls": 12, "bytes": 0,
                                                              "bytes_known": False,
                                                              "gpu_ns": 0}])),
                "--events", sweep_ev], EXIT_OK, "calls ok (bytes unknown)")
        expect("--informational never fails",
               ["--rank-file", write("r8.json", _rank([("forward", 10, 30_000_000)])),
                "--events", ev, "--informational"], EXIT_OK, "DISAGREE", "not judged")

    for f in failures:
        print(f"FAIL: {f}", file=sys.stderr)
    print(f"self-test: {'FAILED' if failures else 'passed'}")
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rank-file", help="traintime rank file (rank-00000.json)")
    ap.add_argument("--events", help="events JSON written by the example")
    ap.add_argument("--tolerance-pct", type=float, default=1.0)
    ap.add_argument("--min-ms", type=float, default=1.0,
                    help="judge only regions whose mean time per entry reaches this")
    ap.add_argument("--informational", action="store_true",
                    help="print the table but never fail on a disagreement")
    ap.add_argument("--table-out", help="also append the report to this file")
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("--fixtures", help="folder of hand-made files for --self-test")
    a = ap.parse_args(argv)
    if a.self_test:
        return self_test(a.fixtures)
    if not a.rank_file or not a.events:
        ap.error("--rank-file and --events are required")
    code, text = compare(a.rank_file, a.events, a.tolerance_pct, a.min_ms, a.informational)
    print(text)
    if a.table_out:
        with open(a.table_out, "a", encoding="utf-8") as f:
            f.write(text + "\n\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
