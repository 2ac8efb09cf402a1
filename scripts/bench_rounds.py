#!/usr/bin/env python3
"""The verdict of several rounds of scripts/bench.sh in one invocation (OUT/round-1, round-2, ...):
each round judged by scripts/bench_summary.py as a run of its own, then per row the best round
judged (a met verdict over a miss, then the better figure), with the spread over the rounds and
the reference rows' drift (per round against the fastest, and against --baseline), so a noisy
stretch of one round cannot flip a verdict.

A row that misses in its best round is marked noise, not MISSED, when all of these hold: the
change did not touch its code (--touched names the rows it did; without --touched every row
counts as touched), --baseline is given, the reference rows are slower than in the baseline
beyond 5 %, and the row itself moved against the baseline no more than the references did (it
would meet had the machine been as fast as when the baseline ran).

Exit 0 when every round produced every figure, 1 otherwise (each round's problems in its
summary.txt), 2 on bad arguments.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_baseline import load_baseline, print_against_baseline  # noqa: E402

SUMMARY = Path(__file__).resolve().parent / "bench_summary.py"
SLOWED = 1.05  # references slower than the baseline by more than this: the machine is slowed


def higher_is_better(unit: str) -> bool:
    return unit.endswith("/s")


def better(a: float, b: float, unit: str) -> bool:
    return a > b if higher_is_better(unit) else a < b


def slowdown(now: float, then: float, unit: str) -> float:
    """How much slower `now` is than `then` (1.0: as fast; 1.2: 20 % slower)."""
    if now <= 0 or then <= 0:
        return 1.0
    return then / now if higher_is_better(unit) else now / then


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="the folder holding round-1, round-2, ...")
    ap.add_argument("rounds", type=int, help="how many rounds bench.sh ran")
    ap.add_argument("summary_args", nargs=5, metavar="ARG",
                    help="bench_summary.py's REPORT CORES LOADAVG CPU FAILED, passed on to each round")
    ap.add_argument("--baseline", type=Path, help="an earlier run's results.json (bench/baseline.json)")
    ap.add_argument("--touched", default=None,
                    help="comma-separated row keys (results.json) the change touched, or 'none'; "
                         "without it every row counts as touched")
    ap.add_argument("--commit", default="", help="the commit measured (recorded in results.json)")
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error("rounds must be at least 1")

    problems: list[str] = []
    rounds: list[dict[str, Any]] = []
    for k in range(1, args.rounds + 1):
        d = args.out / f"round-{k}"
        with open(d / "summary.txt", "w") as f:
            rc = subprocess.run([sys.executable, str(SUMMARY), str(d), "0", *args.summary_args,
                                 "--commit", args.commit], stdout=f, stderr=subprocess.STDOUT).returncode
        if rc != 0:
            problems.append(f"round {k}: problems listed in {d / 'summary.txt'}")
        try:
            rounds.append(json.loads((d / "results.json").read_text()))
        except (OSError, ValueError) as e:
            problems.append(f"round {k}: no results ({e})")
    if not rounds:
        print("\nproblems:", *problems, sep="\n  ")
        return 1
    first = rounds[0]
    keys = list(dict.fromkeys(k for r in rounds for k in r["rows"]))
    known = set(keys)
    touched: set[str] | None = None
    if args.touched is not None:
        touched = set() if args.touched == "none" else {t.strip() for t in args.touched.split(",") if t.strip()}
        unknown = sorted(touched - known)
        if unknown:
            print(f"bench_rounds.py: --touched names no row: {', '.join(unknown)} (rows: {', '.join(keys)})",
                  file=sys.stderr)
            return 2
    base = load_baseline(args.baseline, problems) if args.baseline else None
    base_rows = base["rows"] if base else {}

    # The reference rows (budget "reference": two counter reads, a clock_gettime pair): their
    # drift says how fast the machine was in each round and against the baseline.
    refs = [k for k in keys if all(r["rows"].get(k, {}).get("budget") == "reference" for r in rounds)]
    ref_best = {k: min(r["rows"][k]["value"] for r in rounds) for k in refs}
    round_drift = [statistics.median(r["rows"][k]["value"] / ref_best[k] for k in refs) if refs else 1.0
                   for r in rounds]
    vs_base = [slowdown(ref_best[k], base_rows[k]["value"], base_rows[k].get("unit", ""))
               for k in refs if k in base_rows and base_rows[k].get("value")]
    machine_slowed = statistics.median(vs_base) if vs_base else None

    table = [("what", "best of rounds", "over the rounds", "budget", "verdict")]
    figures: dict[str, tuple[str, float, str, float | None]] = {}
    combined: dict[str, Any] = {}
    met = missed = noise = 0
    for key in keys:
        per = [(n, r["rows"][key]) for n, r in enumerate(rounds, 1) if key in r["rows"]]
        unit = per[0][1]["unit"]
        # The best round: one whose verdict met the budget, else any; then the better figure.
        best_n, best = per[0]
        for n, row in per[1:]:
            row_met, best_met = row["verdict"].startswith("met"), best["verdict"].startswith("met")
            if (row_met and not best_met) or (row_met == best_met and better(row["value"], best["value"], unit)):
                best_n, best = n, row
        values = [row["value"] for _, row in per]
        lo, hi = min(values), max(values)
        verdict = best["verdict"]
        if verdict.startswith("MISSED") and touched is not None and key not in touched and machine_slowed:
            b = base_rows.get(key)
            moved = slowdown(best["value"], b["value"], unit) if b and b.get("value") else None
            if machine_slowed > SLOWED and moved is not None and moved <= machine_slowed:
                verdict = (f"noise: missed with the references {100 * (machine_slowed - 1):+.0f} % vs the baseline, "
                           f"the row {100 * (moved - 1):+.0f} %; not touched")
        if verdict.startswith("met"):
            met += 1
        elif verdict.startswith("MISSED"):
            missed += 1
        elif verdict.startswith("noise"):
            noise += 1
        spread = f"{lo:.4g}..{hi:.4g} {unit} (n={len(per)}, best: round {best_n})"
        table.append((best["what"], f"{best['value']:.4g} {unit}", spread, best["budget"], verdict))
        own = best.get("spread")
        half_range = (hi - lo) / 2
        figures[best["what"]] = (key, best["value"], unit, max(own or 0.0, half_range) if len(per) > 1 or own else own)
        combined[key] = dict(best, verdict=verdict, rounds=values)

    print(f"traintime budgets (docs/design.md §9), best of {len(rounds)} rounds")
    print(f"machine: {first.get('machine', '?')}; load average at the end {args.summary_args[2]}")
    print("SIMULATED rows run against simgpu (build/sim), not a real GPU or NCCL. Each round's own table: "
          f"{args.out}/round-N/summary.txt")
    if refs:
        drift = ", ".join(f"round {n} {100 * (d - 1):+.1f} %" for n, d in enumerate(round_drift, 1))
        line = f"reference rows ({', '.join(refs)}) against their fastest round: {drift}"
        if machine_slowed is not None:
            line += f"; against the baseline: {100 * (machine_slowed - 1):+.1f} %"
        print(line)
    print()
    w = [max(len(r[i]) for r in table) for i in range(5)]
    for n, r in enumerate(table):
        print("  ".join(c.ljust(x) for c, x in zip(r, w)).rstrip())
        if n == 0:
            print("  ".join("-" * x for x in w))
    print(f"\n{met} of {met + missed + noise} measured budgets met" +
          (f", {noise} missed as noise (untouched rows, references slowed)" if noise else "") + ".")
    if touched is None and missed:
        print("NOTE: a miss in a row the change did not touch can be judged as noise: name the touched rows "
              "with --touched (or --touched none) and give --baseline.")

    results = {"date": first.get("date"), "commit": args.commit, "machine": first.get("machine"),
               "loadavg": args.summary_args[2], "smoke": False, "rounds": len(rounds),
               "reference_drift": round_drift, "rows": combined}
    (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    if args.baseline:
        print_against_baseline(args.baseline, figures, first.get("machine", ""), problems)
    if problems:
        print("\nproblems:", *problems, sep="\n  ")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
