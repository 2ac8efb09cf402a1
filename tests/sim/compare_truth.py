#!/usr/bin/env python3
"""Compare a traintime rank file with a simgpu truth file (SIMULATED GPU), exactly, to the ns.

usage: compare_truth.py RANK_FILE TRUTH_FILE

Compared: `categories` (gpu_busy_ns, gpu_sum_ns, count per category; a category missing on one
side counts as all zeros), `steps.count` and every field of `steps.totals`, and the `comm` rows
keyed by (op, comm_size) with calls, bytes and gpu_ns. Exit 0 when everything matches, 1 with
one line per difference otherwise, 2 when a file cannot be read.
"""
import json
import sys

CATEGORY_FIELDS = ("gpu_busy_ns", "gpu_sum_ns", "count")
TOTAL_FIELDS = ("gpu_busy_ns", "compute_ns", "comm_ns", "comm_overlapped_ns", "exposed_comm_ns",
                "io_ns", "idle_ns")
COMM_FIELDS = ("calls", "bytes", "gpu_ns")


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        print(f"compare_truth: cannot read {path}: {e}", file=sys.stderr)
        sys.exit(2)


def diff_value(where, got, want, out):
    if got != want:
        delta = ""
        if isinstance(got, int) and isinstance(want, int):
            delta = f" (rank file {'+' if got > want else ''}{got - want})"
        out.append(f"{where}: rank file {got} != truth {want}{delta}")


def compare(rank, truth):
    out = []
    rc, tc = rank.get("categories", {}), truth.get("categories", {})
    for cat in sorted(set(rc) | set(tc)):
        for field in CATEGORY_FIELDS:
            diff_value(f"categories.{cat}.{field}", rc.get(cat, {}).get(field, 0),
                       tc.get(cat, {}).get(field, 0), out)
    rs, ts = rank.get("steps", {}), truth.get("steps", {})
    diff_value("steps.count", rs.get("count"), ts.get("count"), out)
    for field in TOTAL_FIELDS:
        diff_value(f"steps.totals.{field}", rs.get("totals", {}).get(field),
                   ts.get("totals", {}).get(field), out)

    def rows(doc):
        return {(r.get("op"), r.get("comm_size")): r for r in doc.get("comm", [])}

    rr, tr = rows(rank), rows(truth)
    for key in sorted(set(rr) | set(tr), key=str):
        name = f"comm[{key[0]}, size {key[1]}]"
        if key not in rr:
            out.append(f"{name}: missing from the rank file")
            continue
        if key not in tr:
            out.append(f"{name}: in the rank file but not in the truth")
            continue
        for field in COMM_FIELDS:
            diff_value(f"{name}.{field}", rr[key].get(field), tr[key].get(field), out)
    return out


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    diffs = compare(load(argv[1]), load(argv[2]))
    if diffs:
        print(f"MISMATCH between {argv[1]} and the simulated-GPU truth {argv[2]}:")
        for line in diffs:
            print("  " + line)
        return 1
    print(f"MATCH: {argv[1]} equals the simulated-GPU truth {argv[2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
