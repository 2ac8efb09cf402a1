"""The HTML report rendered by a headless Chromium (Debian's chromium; this file is registered
only when CMake found it, and then it never skips): the screenshot is taken, the page's script
runs without an error, every chart is present, and a region named <script>alert(1)</script>
shows as text."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from reportlib import GOLDEN, copy_golden, cpu_only, edit, run

CHARTS = ("chart-breakdown", "chart-steps", "chart-bandwidth", "chart-waits")


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    exe = os.environ.get("TRAINTIME_TEST_CHROMIUM", "")
    assert exe and Path(exe).exists(), "TRAINTIME_TEST_CHROMIUM does not name chromium (tests/report/CMakeLists.txt)"
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}",
           "--enable-logging=stderr", "--v=0", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_html_renders_in_headless_chromium(build_dir: Path, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    proc = run(build_dir, GOLDEN, "--format", "html", "-o", page)
    assert proc.returncode == 0, proc.stderr
    html = page.read_text()
    # Self-contained: no URL the browser would fetch.
    assert not re.search(r'(src|href)\s*=\s*"(https?:)?//', html)
    for chart in CHARTS:
        assert f'id="{chart}"' in html
    # Data is escaped, never markup: exactly one script element, the page's own.
    assert html.count("<script") == 1
    assert "step/&lt;script&gt;alert(1)&lt;/script&gt;" in html

    shot = tmp_path / "report.png"
    p = chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,3000", page.as_uri())
    assert shot.exists() and shot.stat().st_size > 10_000, f"no screenshot:\n{p.stderr}"
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    p = chromium(tmp_path, "--dump-dom", page.as_uri())
    dom = p.stdout
    assert "Uncaught" not in p.stderr, p.stderr
    # The page's script ran to its end and counted every chart as an <svg class="chart">.
    assert f'data-charts="{len(CHARTS)}"' in dom, dom[:2000]
    assert dom.count("<script") == 1
    # The region's name is text in a table cell, not an element.
    assert "<td>step/&lt;script&gt;alert(1)&lt;/script&gt;</td>" in dom
    for chart in CHARTS:
        svg = re.search(rf'<figure id="{chart}"><svg class="chart".*?</svg>', dom, re.S)
        assert svg, f"{chart} missing from the rendered page"
        body = svg.group(0)
        # Axes with units and a legend (or, for an empty chart, the reason).
        assert 'class="axis"' in body and 'class="label"' in body
    for chart in ("chart-breakdown", "chart-waits", "chart-bandwidth", "chart-steps"):
        body = re.search(rf'<figure id="{chart}">.*?</figure>', dom, re.S).group(0)
        assert 'class="legend"' in body, f"{chart} has no legend"
    assert "ms per step" in dom and "GB/s" in dom


def test_html_renders_with_empty_charts(build_dir: Path, tmp_path: Path) -> None:
    """A page with empty charts (no per-step rows, no lined-up collectives) still renders."""
    import json
    d = tmp_path / "job"
    d.mkdir()
    doc = json.loads((GOLDEN / "rank-00000.json").read_text())
    doc["steps"]["detail"] = []
    doc["communicators"] = []
    doc.update(world_size=1)
    (d / "rank-00000.json").write_text(json.dumps(doc))
    page = tmp_path / "empty.html"
    assert run(build_dir, d, "--format", "html", "-o", page).returncode == 0
    p = chromium(tmp_path, "--dump-dom", page.as_uri())
    assert "Uncaught" not in p.stderr
    assert f'data-charts="{len(CHARTS)}"' in p.stdout
    assert "no per-step rows" in p.stdout


def test_html_of_a_cpu_only_run_draws_its_cpu_charts_and_says_why_the_others_are_left_out(
        build_dir: Path, tmp_path: Path) -> None:
    d = copy_golden(tmp_path / "cpu")
    cpu_only(d)
    page = tmp_path / "cpu.html"
    assert run(build_dir, d, "--format", "html", "-o", page).returncode == 0
    p = chromium(tmp_path, "--dump-dom", page.as_uri())
    dom = p.stdout
    assert "Uncaught" not in p.stderr
    # The per-rank CPU time by region and the step time: no blank GPU charts.
    assert 'data-charts="2"' in dom, dom[:2000]
    body = re.search(r'<figure id="chart-steps">.*?</figure>', dom, re.S).group(0)
    assert 'class="axis"' in body and 'class="legend"' in body and "step time, ms (CPU wall)" in body
    regions = re.search(r'<figure id="chart-breakdown">.*?</figure>', dom, re.S).group(0)
    assert "CPU time per step by rank: its top-level regions" in regions and "step/backward" in regions
    assert "the charts of GPU time (bus bandwidth, GPU breakdown) are left out" in dom
    shot = tmp_path / "cpu.png"
    chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,2000", page.as_uri())
    assert shot.exists() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def chart_facts(dom: str, chart: str) -> dict:
    """What the rendered chart shows: its axis titles, legend entries, and its data marks (lines
    as their points, bars as their heights) measured against the chart's own x axis."""
    body = re.search(rf'<figure id="{chart}"><svg class="chart".*?</svg>', dom, re.S)
    assert body, f"{chart} missing from the rendered page"
    svg = body.group(0)
    base = [float(m.group(1)) for m in re.finditer(r'<line [^>]*y1="([\d.]+)" y2="\1" class="axis"', svg)]
    assert len(base) == 1, f"{chart}: no x axis"
    labels = re.findall(r'class="label">([^<]*)</text>', svg)
    legend = re.search(r'<g class="legend">(.*?)</g>', svg, re.S)
    lines = [(m.group(1), [tuple(float(v) for v in p.split(",")) for p in m.group(2).split()], m.group(3))
             for m in re.finditer(r'<polyline class="data"([^>]*?) points="([^"]*)"><title>([^<]*)</title>', svg)]
    bars = [float(h) for h in re.findall(r'<rect [^>]*height="([\d.]+)"[^>]*class="data"', svg)]
    return {"baseline": base[0], "labels": labels, "legend": re.findall(r">([^<]+)</text>", legend.group(1)) if legend else [],
            "lines": lines, "bars": bars}


def assert_chart_has_data(dom: str, chart: str) -> dict:
    f = chart_facts(dom, chart)
    x_title, y_title = f["labels"][0], f["labels"][1]
    assert x_title, f"{chart}: no x axis title"
    assert re.search(r"\b(ms|GB/s)\b", y_title), f"{chart}: the y axis says no unit: {y_title!r}"
    assert f["legend"], f"{chart}: no legend"
    if f["lines"]:
        for attrs, points, name in f["lines"]:
            assert len(points) >= 2, f"{chart}: line {name} has {len(points)} point(s)"
        # Above the x axis somewhere: values, not a line flat at 0.
        assert any(y < f["baseline"] - 1 for _, points, _ in f["lines"] for _, y in points), f"{chart}: every line at 0"
        assert {name for _, _, name in f["lines"]} <= set(f["legend"]), f"{chart}: a line missing from the legend"
    else:
        assert any(h > 0 for h in f["bars"]), f"{chart}: no bar above 0 ({len(f['bars'])} bars)"
    return f


def test_html_every_chart_has_data_points_axes_with_units_and_a_legend(build_dir: Path, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    assert run(build_dir, GOLDEN, "--format", "html", "-o", page).returncode == 0
    p = chromium(tmp_path, "--dump-dom", page.as_uri())
    dom = p.stdout
    assert "Uncaught" not in p.stderr, p.stderr
    for chart in CHARTS:
        assert_chart_has_data(dom, chart)
    # The golden rank files carry both per-step figures: each rank's GPU step span (solid) and its
    # CPU wall time (dashed), each in the legend.
    steps = chart_facts(dom, "chart-steps")
    names = {name: attrs for attrs, _, name in steps["lines"]}
    assert {"rank 0 GPU span", "rank 0 CPU wall", "rank 1 GPU span", "rank 2 CPU wall"} <= set(names), names
    assert "stroke-dasharray" in names["rank 0 CPU wall"] and "stroke-dasharray" not in names["rank 0 GPU span"]
    assert "GPU step span" in steps["labels"][1] and "CPU wall" in steps["labels"][1]
    # Rank 0's CPU wall grows 15, 16, 17, 20 ms over its four steps (the fixture): the line rises.
    wall0 = next(points for _, points, name in steps["lines"] if name == "rank 0 CPU wall")
    assert [y for _, y in wall0] == sorted((y for _, y in wall0), reverse=True) and wall0[0][1] > wall0[-1][1]


def test_html_step_chart_without_cpu_wall_plots_the_gpu_step_span(build_dir: Path, tmp_path: Path) -> None:
    """Per-step rows without a CPU wall time (as the simulated job writes when steps are not timed
    on the CPU): the chart plots each rank's GPU step span, not a line flat at 0."""
    d = copy_golden(tmp_path / "nowall")

    def no_wall(doc: dict) -> None:
        for row in doc["steps"]["detail"]:
            row["wall_ns"] = 0
    for f in sorted(d.glob("rank-*.json")):
        edit(f, no_wall)
    page = tmp_path / "nowall.html"
    assert run(build_dir, d, "--format", "html", "-o", page).returncode == 0
    p = chromium(tmp_path, "--dump-dom", page.as_uri())
    assert "Uncaught" not in p.stderr, p.stderr
    f = assert_chart_has_data(p.stdout, "chart-steps")
    assert {name for _, _, name in f["lines"]} == {"rank 0", "rank 1", "rank 2"}
    assert "GPU step span" in f["labels"][1]
