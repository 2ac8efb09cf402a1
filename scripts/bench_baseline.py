"""A bench run's figures against an earlier run's results.json (bench/baseline.json is the committed
one): per row the change and whether it is beyond the spread both runs measured. Used by
scripts/bench_summary.py (one run) and scripts/bench_rounds.py (the best of several rounds)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def load_baseline(path: Path, problems: list[str]) -> dict[str, Any] | None:
    """The baseline's whole document, or None with the problem named by the file's path."""
    try:
        base = json.loads(path.read_text())
        base["rows"]
        return base
    except (OSError, ValueError, KeyError, TypeError) as e:
        problems.append(f"{path}: not a bench results file ({e})")
        return None


def print_against_baseline(path: Path, figures: dict[str, tuple[str, float, str, float | None]], machine: str,
                           problems: list[str]) -> None:
    """figures: what -> (key, value, unit, spread), as results.json has them."""
    base = load_baseline(path, problems)
    if base is None:
        return
    base_rows = base["rows"]
    print(f"\nagainst {path} (commit {base.get('commit') or '?'}, {base.get('date', '?')}, "
          f"load {base.get('loadavg', '?')}):")
    # The budgets are ratios, but CPUs still rank the rows differently: a change measured
    # against another machine's run compares the machines as much as the trees.
    if base.get("machine") and base["machine"] != machine:
        print(f"NOTE: the baseline ran on {base['machine']}, this run on {machine}: the change "
              "column compares machines as well as trees (bench/ keeps a baseline per machine class)")
    table = [("what", "now", "baseline", "change", "beyond spread?")]
    for what, (key, value, unit, sp_) in figures.items():
        b = base_rows.get(key)
        if b is None:
            table.append((what, f"{value:.4g} {unit}", "-", "new row", "-"))
            continue
        delta = value - b["value"]
        rel = f"{delta / b['value'] * 100:+.1f} %" if b["value"] else f"{delta:+.4g} {unit}"
        spreads = [x for x in (sp_, b.get("spread")) if x is not None]
        if not spreads:
            verdict = "spread not measured"
        else:
            # Beyond the spread both runs showed for this row (their sum: two noisy samples).
            verdict = "YES" if abs(delta) > sum(spreads) else "no"
        table.append((what, f"{value:.4g} {unit}", f"{b['value']:.4g} {unit}", rel, verdict))
    for key in sorted(set(base_rows) - {k for k, *_ in figures.values()}):
        table.append((base_rows[key].get("what", key), "-", f"{base_rows[key]['value']:.4g}", "not measured now", "-"))
    w = [max(len(r[i]) for r in table) for i in range(5)]
    for n, r in enumerate(table):
        print("  ".join(c.ljust(x) for c, x in zip(r, w)).rstrip())
        if n == 0:
            print("  ".join("-" * x for x in w))
