"""The report leads with the answer (pytest; CTest label report): it ends with three lines (the
straggler and its cost, the largest share, where the HTML is), gives each straggler one cost
figure with a sentence saying what it is, and leaves out what is empty for this job with one line
saying why. Names are never cut from the left, and every job gets its charts in HTML."""
from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

from reportlib import GOLDEN, copy_golden, cpu_only, edit, run, summary


def logical_lines(text: str) -> list[str]:
    """The text report's lines with each wrapped continuation joined: a line wider than 100
    columns goes on indented four spaces (eight under an evidence line, itself indented six)."""
    out: list[str] = []
    for line in text.splitlines():
        indent = len(line) - len(line.lstrip(" "))
        if indent in (4, 8) and out:
            out[-1] += " " + line.strip()
        elif line.strip():
            out.append(line)
    return out


def test_the_text_report_ends_with_a_three_line_summary(build_dir: Path, tmp_path: Path) -> None:
    lines = logical_lines(run(build_dir, GOLDEN).stdout)
    assert lines[-4] == "SUMMARY", lines[-6:]
    assert lines[-3] == "  straggler: rank 2 costs the job 2.500 ms/step (16.7% of the 15.000 ms median step)"
    assert lines[-2].startswith("  largest share: compute, 73.1% of the GPU step span (then exposed comm 14.0%")
    assert lines[-1] == f"  HTML: traintime-report {GOLDEN} --format html -o report.html (the same, with charts)"
    # With an HTML report written after the rank files, the last line says where it is.
    d = copy_golden(tmp_path / "job")
    html = d / "report.html"
    assert run(build_dir, d, "--format", "html", "-o", html).returncode == 0
    assert logical_lines(run(build_dir, d).stdout)[-1] == f"  HTML: {html} (the same, with charts)"
    # ... and not one older than them.
    old = time.time() - 3600
    os.utime(html, (old, old))
    assert logical_lines(run(build_dir, d).stdout)[-1].startswith("  HTML: traintime-report ")
    # The Markdown ends the same way.
    md = [line for line in run(build_dir, GOLDEN, "--format", "md").stdout.splitlines() if line.strip()]
    assert md[-4] == "## SUMMARY" and md[-3].startswith("- straggler: rank 2 costs the job 2.500 ms/step"), md[-5:]


def test_a_cpu_job_summary_names_its_largest_region_and_an_unmeasured_straggler(build_dir: Path,
                                                                                tmp_path: Path) -> None:
    d = copy_golden(tmp_path / "cpu")
    cpu_only(d)
    lines = logical_lines(run(build_dir, d).stdout)
    assert lines[-3] == "  straggler: not measured (no GPU time, and no collective timed on the CPU)", lines[-4:]
    # step/backward is the largest region below the step marker (the step itself is all of it).
    assert re.match(r"  largest share: step/backward \(backward\), \d+\.\d% of the median step's CPU wall time "
                    r"\(then step/forward ", lines[-2]), lines[-2]


def test_each_straggler_has_one_cost_figure_said_in_a_sentence(build_dir: Path) -> None:
    s, _ = summary(build_dir, GOLDEN)
    st = s["stragglers"][0]
    assert st["cost_basis"] == "counterfactual" and st["rank"] == 2
    lines = logical_lines(run(build_dir, GOLDEN).stdout)
    at = next(k for k, line in enumerate(lines) if line.startswith("  - rank 2 (host node-2) costs the job"))
    assert lines[at] == ("  - rank 2 (host node-2) costs the job 2.500 ms/step (16.7% of the 15.000 ms median step): had "
                         "it run at the median of its peers, the job's step would go 15.00 -> 12.50 ms/step")
    # The evidence follows, one line each, with no second cost-like figure in the sentence.
    assert lines[at + 1] == "      arrived last at 4 of 8 collectives lined up across ranks"
    assert lines[at + 2].startswith("      GPU compute 14.000 ms/step is 1.40x the median")
    assert "without rank" not in " ".join(lines) and "for it alone" not in " ".join(lines[:at + 3])


def test_what_is_empty_for_this_job_is_left_out_with_one_line(build_dir: Path, tmp_path: Path) -> None:
    clean = copy_golden(tmp_path / "clean")
    for f in clean.glob("rank-*.json"):
        edit(f, lambda j: j.update(warnings=[]))
    text = run(build_dir, clean).stdout
    for title in ("Warnings written in the rank files", "Input problems"):
        assert title not in text, title
    flat = " ".join(text.split())
    # The golden files predate self_cost: its table is left out too, in the same line.
    assert ("Left out, nothing to show for this job: self_cost (no rank file has self_cost: older files lack it); "
            "warnings (no rank file has one); problems (every file was read and merged).") in flat
    assert "(none)" not in text
    # A job with a warning shows its table, and the line no longer names it.
    d = copy_golden(tmp_path / "warned")
    edit(d / "rank-00001.json", lambda j: j.update(warnings=["3 activity record(s) dropped"]))
    text = run(build_dir, d).stdout
    assert "Warnings written in the rank files" in text and "warnings (no rank file has one)" not in text
    # CSV keeps every view, empty or not (a script reads a fixed set of files).
    csv = run(build_dir, clean, "--format", "csv").stdout
    assert "# view: warnings" in csv and "# view: problems" in csv and "# view: throughput" in csv


def test_compare_rows_measured_in_neither_run_are_left_out(build_dir: Path, tmp_path: Path) -> None:
    base = copy_golden(tmp_path / "base")
    now = copy_golden(tmp_path / "now")
    s, _ = summary(build_dir, now, "--compare", base)
    rows = {m["metric"]: m for m in s["compare"]["metrics"]}
    neither = [name for name, m in rows.items() if m["value"] is None and m["baseline"] is None]
    assert "tflops" in neither and "mfu_pct" in neither, neither  # the golden files have no FLOPs
    text = run(build_dir, now, "--compare", base).stdout
    table = text[text.index(f"\nCompared with {base}\n") + 1:]
    table = table[:table.index("\n\n")]
    for name in neither:
        assert not re.search(rf"^  {name} ", table, re.M), f"{name}: a row of n/a in\n{table}"
    flat = " ".join(text.split())
    assert "Left out, measured in neither run: " in flat and all(name in flat for name in neither)
    assert re.search(r"^  step_time_p50 ", table, re.M), table


def test_long_region_names_wrap_and_are_never_cut_from_the_left(build_dir: Path, tmp_path: Path) -> None:
    d = copy_golden(tmp_path / "long")
    long_path = "step/forward/" + "/".join(f"encoder_block_{k}" for k in range(8)) + "/self_attention/qkv_projection"

    def rename(doc: dict) -> None:
        doc["regions"][0]["path"] = long_path
    for f in d.glob("rank-*.json"):
        edit(f, rename)
    text = run(build_dir, d).stdout
    assert max(len(line) for line in text.splitlines()) <= 100
    table = text[text.index("Regions: self GPU busy"):]
    table = table[:table.index("  Note:")]
    # The name's parts, in order, each whole, across the cell's lines: nothing cut from its left.
    cells = "".join(line[2:2 + table.splitlines()[2].index(" ", 2) - 1].strip() for line in table.splitlines()[3:])
    assert long_path in cells, cells
    assert "..." not in table, table


def test_watch_fits_the_terminal_width(build_dir: Path) -> None:
    env = dict(os.environ, COLUMNS="60")
    proc = __import__("subprocess").run([str(build_dir / "bin" / "traintime-report"), str(GOLDEN), "--watch", "--once"],
                                        capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert max(len(line) for line in lines) <= 60, [line for line in lines if len(line) > 60]
    flat = " ".join(proc.stdout.split())
    assert "had it run at the median of its peers, the job's step would go 15.00 -> 12.50 ms/step" in flat


def chart(page: str, chart_id: str) -> str:
    start = page.index(f'<figure id="{chart_id}">')
    return page[start:page.index("</figure>", start)]


def test_a_job_without_gpu_time_gets_per_rank_cpu_region_charts(build_dir: Path, tmp_path: Path) -> None:
    d = copy_golden(tmp_path / "cpu")
    cpu_only(d)
    out = tmp_path / "cpu.html"
    assert run(build_dir, d, "--format", "html", "-o", out).returncode == 0
    page = out.read_text()
    breakdown = chart(page, "chart-breakdown")
    # One bar segment per (rank, top-level region): step/backward's and step/forward's CPU time.
    for rank in (0, 1, 2):
        for region in ("step/backward", "step/forward"):
            assert f"<title>{rank} {region}: " in breakdown, (rank, region)
    assert "ms per step" in breakdown and "no region" not in breakdown


def test_compare_gets_an_a_b_chart(build_dir: Path, tmp_path: Path) -> None:
    base = copy_golden(tmp_path / "base")
    now = copy_golden(tmp_path / "now")
    edit(now / "rank-00000.json", lambda j: j["steps"].update(samples_per_s=j["steps"]["samples_per_s"] * 2))
    out = tmp_path / "ab.html"
    assert run(build_dir, now, "--compare", base, "--format", "html", "-o", out).returncode == 0
    ab = chart(out.read_text(), "chart-compare")
    assert "<title>step_time_p50 baseline: 100 % of the baseline</title>" in ab, ab[:2000]
    assert "<title>step_time_p50 this run: 100 % of the baseline</title>" in ab
    assert re.search(r"<title>samples_per_s this run: 1[0-9]{2}(\.\d+)? % of the baseline</title>", ab), ab[:3000]
    assert "tflops" not in ab  # measured in neither run


def test_the_step_chart_legend_tells_every_series_apart(build_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "golden.html"
    assert run(build_dir, GOLDEN, "--format", "html", "-o", out).returncode == 0
    steps = chart(out.read_text(), "chart-steps")
    legend = steps[steps.index('<g class="legend">'):]
    keys = re.findall(r'<line [^>]*stroke="(#[0-9a-f]+)"[^>]*?( stroke-dasharray="5 3")?/><text [^>]*>([^<]+)</text>',
                      legend)
    names = [k[2] for k in keys]
    assert len(keys) == 6 and len(set(names)) == 6, keys  # 3 ranks' GPU span and CPU wall
    assert len({(color, dash) for color, dash, _ in keys}) == len(keys), f"two series drawn alike: {keys}"
    assert all(bool(dash) == name.endswith("CPU wall") for _, dash, name in keys), keys
