"""Live metrics on the SIMULATED GPU (simgpu): tt_metrics() called by sim_train after every step,
the Prometheus file and rank 0's console line, checked against sim_train's own truth.

Every GPU figure here is simulated. What is checked:
- each step's published GPU figures (traintime/gpu_*) equal the truth of that step (steps.by_step)
  to the nanosecond, they appear while the run goes on (not only at exit), and they trail the
  CPU's step by at least one step (the published step's records have all arrived: no late
  records);
- the CPU figures belong to the step that just ended: step time, samples/s, TFLOP/s and MFU lie
  within the bounds sim_train's own clock readings around the step markers give (not derived
  from traintime's figures); so do the rank file's step times, TFLOP/s and MFU;
- TRAINTIME_PRINT_EVERY=N prints a "traintime: step ..." line every N steps on rank 0 only, and
  nothing of the kind without it;
- TRAINTIME_PROMETHEUS_FILE parses with Debian's prometheus_client, one file per rank, labelled
  with job, rank and host;
- the MFU peak comes from the table by the device's CUDA name (SIMGPU_DEVICE_NAME), or from
  TRAINTIME_PEAK_TFLOPS.
"""
from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from testlib import SOURCE_DIR, Checks, clean_env, load_json, load_module, reason_names

compare_truth = load_module(SOURCE_DIR / "tests" / "sim" / "compare_truth.py", "compare_truth")

STEPS = 60
WORLD = 2
FLOPS_PER_STEP = 2.5e9
# Fields of the truth's steps.by_step[] and the metric that must equal each (ms).
FIGURES = {"span_ns": "gpu_span_ms", "gpu_busy_ns": "gpu_busy_ms", "compute_ns": "gpu_compute_ms",
           "comm_ns": "gpu_comm_ms", "exposed_comm_ns": "gpu_exposed_comm_ms", "io_ns": "gpu_io_ms",
           "idle_ns": "gpu_idle_ms"}
CATEGORIES = ("forward", "backward", "optimizer", "other", "recompute", "unattributed")


def sim_run(build: Path, work: Path, np: int, extra_env: dict[str, str], args: list[str]) -> subprocess.CompletedProcess:
    sim = build / "sim"
    env = clean_env({
        "LD_LIBRARY_PATH": str(sim),
        "LD_PRELOAD": str(build / "lib" / "libtraintime.so"),
        "TRAINTIME_OUTPUT": str(work / "out"),
        "TRAINTIME_CUPTI_LIB": str(sim / "libcupti.so.13"),
        **extra_env,
    })
    cmd = [str(build / "bin" / "sim_train"), "--steps", str(STEPS), "--truth", str(work / "truth-%r.json"),
           *args]
    if np > 1:
        mpi = ["mpirun", "-np", str(np), "--oversubscribe"]
        for var in ["LD_LIBRARY_PATH", "LD_PRELOAD", *[k for k in env if k.startswith(("TRAINTIME_", "SIMGPU_"))]]:
            mpi += ["-x", var]
        cmd = mpi + cmd
    p = subprocess.run(cmd, env=env, cwd=work, capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, f"{' '.join(cmd)} exited {p.returncode}\n{p.stdout}\n{p.stderr}"
    return p


def near(a: float, b: float, rel: float = 1e-9) -> bool:
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-300)


def step_bounds_s(lines: list[dict[str, Any]]) -> dict[int, tuple[float, float]]:
    """Step k (k >= 1) began inside tt_step call k-1 and ended inside call k: its time lies between
    before_k - after_k-1 and after_k - before_k-1 on sim_train's monotonic clock (seconds), widened by
    a slack for rounding. Step 0 began at an origin sim_train does not see: no bound."""
    marks = {x["after_step"]: x["step_marks_ns"] for x in lines}
    out: dict[int, tuple[float, float]] = {}
    for k in sorted(marks):
        if k - 1 in marks:
            lo = (marks[k][0] - marks[k - 1][1]) / 1e9
            hi = (marks[k][1] - marks[k - 1][0]) / 1e9
            out[k] = (lo * (1 - 1e-3) - 1e-6, hi * (1 + 1e-3) + 1e-6)
    return out


def within(value: float, lo: float, hi: float) -> bool:
    return lo <= value <= hi


def check_lines(c: Checks, rank: int, lines: list[dict[str, Any]], truth: dict[str, Any]) -> dict[int, dict[str, float]]:
    """The per-step checks of one rank's metrics log; returns the GPU figures seen per step."""
    by_step = {d["index"]: d for d in truth["steps"]["by_step"]}
    bounds = step_bounds_s(lines)
    published: dict[int, dict[str, float]] = {}
    c.check(len(lines) == STEPS, f"rank {rank}: {len(lines)} metrics lines, expected {STEPS}")
    c.check(len(bounds) == STEPS - 1, f"rank {rank}: step marks bound {len(bounds)} steps")
    samples = truth_samples(truth)
    memory = {d["index"]: d for d in truth["memory"]["by_step"]} if "memory" in truth else {}
    last_gpu_step = -1
    for line in lines:
        s, m = line["after_step"], line["metrics"]
        where = f"rank {rank} after step {s}"
        c.check(m.get("traintime/step") == s, f"{where}: traintime/step {m.get('traintime/step')}")
        if s in bounds:
            lo, hi = bounds[s]
            c.check(within(m["traintime/step_ms"] / 1e3, lo, hi),
                    f"{where}: step_ms {m['traintime/step_ms']}, sim_train's clock says [{lo * 1e3}, {hi * 1e3}] ms")
            c.check(within(m["traintime/samples_per_s"], samples / hi, samples / lo),
                    f"{where}: samples_per_s {m['traintime/samples_per_s']}, {samples} samples in [{lo}, {hi}] s")
            tf = (FLOPS_PER_STEP / hi / 1e12, FLOPS_PER_STEP / lo / 1e12)
            c.check(within(m.get("traintime/tflops", -1), *tf), f"{where}: tflops {m.get('traintime/tflops')} not in {tf}")
            c.check(within(m.get("traintime/mfu", -1), tf[0] / 100.0, tf[1] / 100.0),
                    f"{where}: mfu {m.get('traintime/mfu')} not in {tf} / 100 TFLOP/s")
        if "traintime/gpu_step" not in m:
            continue
        k = int(m["traintime/gpu_step"])
        c.check(k >= last_gpu_step, f"{where}: GPU figures of step {k} after those of step {last_gpu_step}")
        last_gpu_step = k
        # Never the figures of a step whose records may still come (how far they trail depends
        # on the machine's pace: not checked here).
        c.check(s - k >= 1, f"{where}: GPU figures of step {k} (lag {s - k}, expected at least 1)")
        c.check(m["traintime/gpu_lag_steps"] == s - k, f"{where}: gpu_lag_steps {m['traintime/gpu_lag_steps']}")
        c.check(m["traintime/gpu_late_records"] == 0, f"{where}: {m['traintime/gpu_late_records']} late records")
        t = by_step.get(k)
        if not c.check(t is not None, f"{where}: gpu_step {k} not in the truth"):
            continue
        for field, name in FIGURES.items():
            c.check(abs(m[f"traintime/{name}"] * 1e6 - t[field]) < 0.5,
                    f"{where}: {name} of step {k} = {m[f'traintime/{name}']} ms, truth {t[field]} ns")
        for cat in CATEGORIES:
            c.check(abs(m[f"traintime/gpu_{cat}_ms"] * 1e6 - t["busy_ns_by_category"][cat]) < 0.5,
                    f"{where}: gpu_{cat}_ms of step {k} = {m[f'traintime/gpu_{cat}_ms']}, truth "
                    f"{t['busy_ns_by_category'][cat]} ns")
        c.check(near(m["traintime/gpu_compute_pct"], 100.0 * t["compute_ns"] / t["span_ns"], 1e-9),
                f"{where}: gpu_compute_pct {m['traintime/gpu_compute_pct']}")
        if memory:  # sim_train --alloc-per-step: the step's device memory peak, to the byte
            c.check(m.get("traintime/gpu_memory_peak_bytes") == memory[k]["peak_bytes"],
                    f"{where}: gpu_memory_peak_bytes of step {k} = {m.get('traintime/gpu_memory_peak_bytes')}, "
                    f"truth {memory[k]['peak_bytes']}")
        published[k] = m
    return published


def truth_samples(truth: dict[str, Any]) -> float:
    return truth["options"]["samples_per_step"]


def test_sim_live_metrics_mpirun2_match_truth_every_step(build_dir: Path, tmp_path: Path) -> None:
    p = sim_run(build_dir, tmp_path, WORLD,
                {"TRAINTIME_PRINT_EVERY": "10", "TRAINTIME_PROMETHEUS_FILE": str(tmp_path / "tt-%r.prom"),
                 "TRAINTIME_PEAK_TFLOPS": "100", "SIMGPU_SLOWDOWN": "1:1.3"},
                ["--metrics-log", str(tmp_path / "metrics-%r.jsonl"), "--flops-per-step", str(FLOPS_PER_STEP),
                 "--step-sleep-us", "5000", "--alloc-per-step"])
    c = Checks()
    last: dict[int, dict[str, float]] = {}
    for rank in range(WORLD):
        truth = load_json(tmp_path / f"truth-{rank}.json")
        lines = [json.loads(x) for x in (tmp_path / f"metrics-{rank}.jsonl").read_text().splitlines()]
        published = check_lines(c, rank, lines, truth)
        # Published while the run went on (every line is written during it; how many steps get
        # figures depends on the machine's pace, so only their presence and their values, against
        # the truth above, are checked).
        c.check(len(published) >= 1, f"rank {rank}: no GPU figures published during the run")
        c.check(any(m["traintime/gpu_exposed_comm_ms"] > 0 for m in published.values()) or rank == 1,
                f"rank {rank}: no exposed communication in any published step (rank 1 is slowed, "
                f"so rank 0 waits in its AllReduces)")
        doc = load_json(tmp_path / "out" / f"rank-{rank:05d}.json")
        steps = doc["steps"]
        c.check(near(steps.get("flops_per_step", -1), FLOPS_PER_STEP, 1e-9), f"rank {rank}: flops_per_step {steps.get('flops_per_step')}")
        # Over the steps after warm-up (all bounded: warm-up is at least step 0).
        bounds = step_bounds_s(lines)
        after = [bounds[k] for k in range(steps["warmup"], STEPS) if k in bounds]
        c.check(steps["warmup"] >= 1 and len(after) == steps["wall_ns"]["count"],
                f"rank {rank}: {steps['wall_ns']['count']} measured steps, {len(after)} bounded")
        lo_s, hi_s = sum(b[0] for b in after), sum(b[1] for b in after)
        tf = (FLOPS_PER_STEP * len(after) / hi_s / 1e12, FLOPS_PER_STEP * len(after) / lo_s / 1e12)
        c.check(within(steps.get("tflops", -1), *tf), f"rank {rank}: rank-file tflops {steps.get('tflops')} not in {tf}")
        c.check(within(steps.get("mfu", -1), tf[0] / 100.0, tf[1] / 100.0), f"rank {rank}: rank-file mfu {steps.get('mfu')}")
        for row in steps["detail"]:
            if row["index"] in bounds:
                lo, hi = bounds[row["index"]]
                c.check(within(row["wall_ns"] / 1e9, lo, hi),
                        f"rank {rank}: steps.detail[{row['index']}].wall_ns {row['wall_ns']} not in [{lo}, {hi}] s")
        device = doc.get("device", {})
        c.check(device.get("name") == "simgpu (SIMULATED GPU)" and device.get("peak_tflops") == 100
                and device.get("peak_source") == "TRAINTIME_PEAK_TFLOPS", f"rank {rank}: device {device}")
        last[rank] = lines[-1]["metrics"]

        # The Prometheus file, written at exit with the last figures.
        text = (tmp_path / f"tt-{rank:05d}.prom").read_text()
        families = {f.name: f for f in text_string_to_metric_families(text)}
        for name in ("traintime_step_ms", "traintime_gpu_exposed_comm_ms", "traintime_mfu"):
            c.check(name in families and families[name].type == "gauge", f"rank {rank}: {name} missing or not a gauge")
        c.check("traintime_steps" in families and families["traintime_steps"].type == "counter",
                f"rank {rank}: no counter traintime_steps_total ({sorted(families)})")
        for fam in families.values():
            for sample in fam.samples:
                # The GPU health gauges (simgpu's NVML is found beside its libcuda) name their device.
                device = {"device": "0"} if sample.name.startswith("traintime_health_") else {}
                c.check(sample.labels == {"job": doc["job_id"], "rank": str(rank), "host": socket.gethostname(), **device},
                        f"rank {rank}: {sample.name} labelled {sample.labels}")
        steps_total = [s.value for s in families["traintime_steps"].samples if s.name == "traintime_steps_total"]
        c.check(steps_total == [STEPS], f"rank {rank}: traintime_steps_total {steps_total}")
        step_ms = [s.value for s in families["traintime_step_ms"].samples]
        c.check(step_ms == [last[rank]["traintime/step_ms"]],
                f"rank {rank}: traintime_step_ms {step_ms} != the last step's {last[rank]['traintime/step_ms']}")

    # Rank 0 alone prints, every 10 steps.
    console = [x for x in p.stderr.splitlines() if x.startswith("traintime: step ")]
    c.check(len(console) == STEPS // 10, f"{len(console)} console lines, expected {STEPS // 10}:\n" + p.stderr)
    for i, line in enumerate(console):
        c.check(line.startswith(f"traintime: step {10 * (i + 1) - 1} | ") and " ms/step | " in line
                and " samples/s | " in line and " TFLOP/s (MFU " in line,
                f"console line {i}: {line!r}")
    c.check(any("| GPU step " in line and "exposed comm" in line for line in console),
            f"no console line with a GPU breakdown: {console}")
    c.done()


HEALTH = ("traintime/health_step", "traintime/health_sm_clock_mhz", "traintime/health_power_w",
          "traintime/health_temperature_c", "traintime/health_throttled")


def health_truth(truth: dict[str, Any]) -> dict[str, float]:
    """The live health figures simgpu's NVML must give for every sampled step of this rank (its
    readings do not change over the run): SM clock, power, temperature, and whether a clock-event
    reason other than gpu_idle (bit 0) is among the reported ones."""
    t = truth["gpu_health"]
    return {"traintime/health_sm_clock_mhz": t["sm_clock_mhz"], "traintime/health_power_w": t["power_w"],
            "traintime/health_temperature_c": t["temperature_c"],
            "traintime/health_throttled": 1.0 if t["clock_event_reasons"] & ~1 else 0.0}


def same_health(seen: float, name: str, truth: float) -> bool:
    """Clocks, temperature and the throttle flag exactly; power to the 0.1 W the median is kept in."""
    return abs(seen - truth) <= 0.05 + 1e-9 if name == "traintime/health_power_w" else seen == truth


def test_sim_live_gpu_health_matches_simgpus_nvml_and_is_absent_when_off(build_dir: Path, tmp_path: Path) -> None:
    """SIMGPU_THROTTLE=1:0.7 (SIMULATED NVML: rank 1's SM clock x 0.7, thermal clock-event reasons).
    Every metrics line that has GPU health carries all of it, of a step that had ended, with
    simgpu's figures for the rank; so do the Prometheus gauges (labelled with the device) and the
    rank file's steps.detail[].gpu_health. With TRAINTIME_NVML=0 none of it exists anywhere."""
    c = Checks()
    on = tmp_path / "on"
    on.mkdir()
    sim_run(build_dir, on, WORLD, {"SIMGPU_THROTTLE": "1:0.7", "TRAINTIME_NVML_INTERVAL_MS": "10",
                                   "TRAINTIME_PROMETHEUS_FILE": str(on / "tt-%r.prom")},
            ["--metrics-log", str(on / "metrics-%r.jsonl"), "--step-sleep-us", "20000"])
    truths = [load_json(on / f"truth-{rank}.json") for rank in range(WORLD)]
    c.check(truths[1]["gpu_health"]["sm_clock_mhz"] < truths[0]["gpu_health"]["sm_clock_mhz"],
            "the throttle knob did not reach simgpu")
    c.check(health_truth(truths[1])["traintime/health_throttled"] == 1.0, f"rank 1's truth {truths[1]['gpu_health']}")
    for rank in range(WORLD):
        want = health_truth(truths[rank])
        lines = [json.loads(x) for x in (on / f"metrics-{rank}.jsonl").read_text().splitlines()]
        sampled = [x for x in lines if "traintime/health_step" in x["metrics"]]
        # From the first line with GPU health on, every line has it (when it begins depends on the
        # machine's pace: not checked).
        first = lines.index(sampled[0]) if sampled else len(lines)
        c.check(len(sampled) >= 1 and sampled == lines[first:],
                f"rank {rank}: GPU health in {len(sampled)} of {len(lines)} lines, from line {first}")
        last_step = -1
        for x in sampled:
            m, where = x["metrics"], f"rank {rank} after step {x['after_step']}"
            c.check(all(name in m for name in HEALTH), f"{where}: {sorted(k for k in m if 'health' in k)}")
            k = m["traintime/health_step"]
            c.check(last_step <= k <= x["after_step"], f"{where}: health of step {k} (an ended one) after step {last_step}")
            last_step = k
            for name, value in want.items():
                c.check(same_health(m.get(name, -1), name, value), f"{where}: {name} {m.get(name)}, simgpu's {value}")
        # The Prometheus file, written at exit: the same figures, labelled with the device.
        families = {f.name: f for f in text_string_to_metric_families((on / f"tt-{rank:05d}.prom").read_text())}
        for name, value in want.items():
            prom = name.replace("/", "_")
            samples = families[prom].samples if prom in families else []
            c.check(len(samples) == 1 and samples[0].labels.get("device") == "0" and same_health(samples[0].value, name, value),
                    f"rank {rank}: {prom} {samples}, simgpu's {value}")
        # The rank file's per-step rows: every one NVML sampled, with simgpu's figures.
        doc = load_json(on / "out" / f"rank-{rank:05d}.json")
        sampled_steps = {st["index"] for st in doc["gpu_health"]["devices"][0]["steps"]}
        rows = [row for row in doc["steps"]["detail"] if "gpu_health" in row]
        c.check(len(rows) >= 1 and {row["index"] for row in rows}
                == sampled_steps & {row["index"] for row in doc["steps"]["detail"]},
                f"rank {rank}: detail rows with gpu_health {[row['index'] for row in rows]}, sampled {sorted(sampled_steps)}")
        t = truths[rank]["gpu_health"]
        names = reason_names(t["clock_event_reasons"])
        for row in rows:
            h = row["gpu_health"]
            c.check(len(h) == 1 and h[0]["cuda_device"] == 0 and h[0]["samples"] >= 1
                    and h[0]["sm_clock_mhz"] == {"median": t["sm_clock_mhz"], "min": t["sm_clock_mhz"]}
                    and same_health(h[0]["power_w"]["median"], "traintime/health_power_w", t["power_w"])
                    and h[0]["temperature_c"] == {"max": t["temperature_c"]} and h[0]["clock_event_reasons"] == names,
                    f"rank {rank}: steps.detail[{row['index']}].gpu_health {h}, simgpu's {t}")

    off = tmp_path / "off"
    off.mkdir()
    sim_run(build_dir, off, 1, {"SIMGPU_THROTTLE": "0:0.7", "TRAINTIME_NVML": "0",
                                "TRAINTIME_PROMETHEUS_FILE": str(off / "tt-%r.prom")},
            ["--metrics-log", str(off / "metrics-%r.jsonl"), "--step-sleep-us", "20000"])
    lines = [json.loads(x) for x in (off / "metrics-0.jsonl").read_text().splitlines()]
    c.check(len(lines) == STEPS and not any("health" in name for x in lines for name in x["metrics"]),
            "TRAINTIME_NVML=0: health figures in the metrics")
    c.check("health" not in (off / "tt-00000.prom").read_text(), "TRAINTIME_NVML=0: health in the Prometheus file")
    doc = load_json(off / "out" / "rank-00000.json")
    c.check(doc["gpu_health"]["status"] == "off", f"gpu_health {doc['gpu_health']}")
    c.check(not any("gpu_health" in row for row in doc["steps"]["detail"]), "TRAINTIME_NVML=0: steps.detail gpu_health")
    c.done()


def test_sim_live_metrics_peak_from_the_table_and_quiet_by_default(build_dir: Path, tmp_path: Path) -> None:
    # A GPU named as an H100 SXM reports itself (simulated); no output option is set.
    p = sim_run(build_dir, tmp_path, 1, {"SIMGPU_DEVICE_NAME": "NVIDIA H100 80GB HBM3"},
                ["--metrics-log", str(tmp_path / "metrics-%r.jsonl"), "--flops-per-step", str(FLOPS_PER_STEP),
                 "--step-sleep-us", "5000"])
    c = Checks()
    doc = load_json(tmp_path / "out" / "rank-00000.json")
    device = doc.get("device", {})
    c.check(device == {"name": "NVIDIA H100 80GB HBM3", "peak_tflops": 989.5,
                       "peak_source": "table: H100 SXM, bf16"}, f"device {device}")
    c.check(near(doc["steps"].get("mfu", -1), doc["steps"]["tflops"] / 989.5, 1e-9), f"steps {doc['steps']}")
    lines = [json.loads(x) for x in (tmp_path / "metrics-0.jsonl").read_text().splitlines()]
    # MFU needs the device's name, known once its first record arrived: from then on in every line.
    with_mfu = [x["after_step"] for x in lines if "traintime/mfu" in x["metrics"]]
    c.check(with_mfu and with_mfu == list(range(with_mfu[0], STEPS)), f"steps with mfu: {with_mfu}")
    m = lines[-1]["metrics"]
    c.check(near(m.get("traintime/mfu", -1), m["traintime/tflops"] / 989.5, 1e-9), f"last metrics {m}")
    # No activation checkpointing, so no recompute: HFU is unknown, never MFU's copy.
    c.check("hfu" not in doc["steps"], f"steps {doc['steps']}")
    c.check(not any("traintime/hfu" in x["metrics"] for x in lines), "traintime/hfu without recompute")
    # Unasked, the library prints only its one exit line.
    own = [x for x in p.stderr.splitlines() if x.startswith("traintime:")]
    c.check(len(own) == 1 and "rank files" in own[0], f"stderr lines of traintime: {own}")
    c.done()


def test_sim_activation_checkpointing_hfu_beside_mfu(build_dir: Path, tmp_path: Path) -> None:
    """sim_train --recompute re-runs half the layers' forward in backward/recompute (TT_RECOMPUTE).
    The rank file equals the truth, recompute included; MFU is the model's FLOPs only (tflops /
    peak, as without recompute); HFU = MFU x (1 + recompute / forward GPU busy), from the truth's
    times for the rank file and from each published step's for the live metric; the report
    shows the rank file's."""
    p = sim_run(build_dir, tmp_path, 1, {"TRAINTIME_PEAK_TFLOPS": "100", "TRAINTIME_PRINT_EVERY": "10"},
            ["--metrics-log", str(tmp_path / "metrics-%r.jsonl"), "--flops-per-step", str(FLOPS_PER_STEP),
             "--step-sleep-us", "2000", "--recompute"])
    c = Checks()
    truth = load_json(tmp_path / "truth-0.json")
    doc = load_json(tmp_path / "out" / "rank-00000.json")
    c.extend(compare_truth.compare(doc, truth), "rank file vs truth: ")
    rec, fwd = truth["categories"]["recompute"]["gpu_busy_ns"], truth["categories"]["forward"]["gpu_busy_ns"]
    c.check(rec > 0 and fwd > 0, f"truth: recompute {rec} ns, forward {fwd} ns")
    c.check(any(r["path"] == "backward/recompute" and r["category"] == "recompute" for r in doc["regions"]),
            f"no backward/recompute region: {[r['path'] for r in doc['regions']]}")
    steps = doc["steps"]
    c.check(near(steps.get("mfu", -1), steps["tflops"] / 100.0, 1e-9), f"mfu {steps.get('mfu')}, tflops {steps['tflops']}")
    c.check(near(steps.get("hfu", -1), steps["mfu"] * (1 + rec / fwd), 1e-9),
            f"hfu {steps.get('hfu')}, mfu {steps['mfu']}, recompute {rec} ns / forward {fwd} ns")

    by_step = {d["index"]: d for d in truth["steps"]["by_step"]}
    lines = [json.loads(x) for x in (tmp_path / "metrics-0.jsonl").read_text().splitlines()]
    with_hfu = 0
    for line in lines:
        m = line["metrics"]
        if "traintime/gpu_step" not in m or "traintime/mfu" not in m:
            c.check("traintime/hfu" not in m, f"after step {line['after_step']}: hfu without GPU figures or MFU")
            continue
        t = by_step[int(m["traintime/gpu_step"])]["busy_ns_by_category"]
        want = m["traintime/mfu"] * (1 + t["recompute"] / t["forward"])
        with_hfu += 1
        c.check(near(m.get("traintime/hfu", -1), want, 1e-9),
                f"after step {line['after_step']}: hfu {m.get('traintime/hfu')}, expected {want} (truth {t})")
    c.check(with_hfu > 0, "no metrics line with GPU figures and MFU")
    # The console line: HFU beside MFU once a step with recompute was published.
    console = [x for x in p.stderr.splitlines() if x.startswith("traintime: step ")]
    c.check(all(", HFU " in x for x in console if "| GPU step " in x) and any("| GPU step " in x for x in console),
            f"console lines: {console}")

    proc = subprocess.run([str(build_dir / "bin" / "traintime-report"), str(tmp_path / "out"), "--format", "json"],
                          capture_output=True, text=True, timeout=120)
    c.check(proc.returncode == 0, f"traintime-report exited {proc.returncode}: {proc.stderr}")
    if proc.returncode == 0:
        tp = json.loads(proc.stdout)["throughput"]
        c.check(near(tp["hfu"], steps["hfu"], 1e-9) and tp["ranks_with_hfu"] == 1 and near(tp["mfu"], steps["mfu"], 1e-9),
                f"report throughput {tp}")
    c.done()


def gpu_figures_match(c: Checks, where: str, m: dict[str, float], t: dict[str, Any]) -> None:
    for field, name in FIGURES.items():
        c.check(abs(m[f"traintime/{name}"] * 1e6 - t[field]) < 0.5,
                f"{where}: {name} = {m[f'traintime/{name}']} ms, truth {t[field]} ns")
    for cat in CATEGORIES:
        c.check(abs(m[f"traintime/gpu_{cat}_ms"] * 1e6 - t["busy_ns_by_category"][cat]) < 0.5,
                f"{where}: gpu_{cat}_ms = {m[f'traintime/gpu_{cat}_ms']}, truth {t['busy_ns_by_category'][cat]} ns")


def test_sim_live_metrics_detected_steps_without_a_marker(build_dir: Path, tmp_path: Path) -> None:
    """sim_train --no-step-marker: no tt_step, no NVTX step range. The steps traintime detects from
    the launch sequence drive tt_metrics() and the Prometheus file as tt_step would: a detected
    step is published once the next one has ended too (its wall time is the GPU's step period, from
    its first GPU start to the next step's), and its GPU figures equal the truth of that step.

    During the run (3000 steps: detection waits for 65 536 newer correlation ids, sim_train's
    step has 58; the GPU made 20 times faster, SIMGPU_SLOWDOWN=0:0.05, and a 0.5 ms step sleep so
    that it keeps up with the CPU, as a real GPU's launch queue makes it): lines carry
    traintime/step and the GPU figures of the same step, equal to the truth, with no late records
    (held records of a published step that arrived behind a newer one are what would make them).
    At exit (2 ranks, 60 steps): the Prometheus file of
    each rank counts the 59 steps whose period is known (the last, partial step has no next one)
    and gives step 58's figures, equal to the truth."""
    c = Checks()
    run = tmp_path / "run"
    run.mkdir()
    steps = 3000
    sim = build_dir / "sim"
    env = clean_env({"LD_LIBRARY_PATH": str(sim), "LD_PRELOAD": str(build_dir / "lib" / "libtraintime.so"),
                     "TRAINTIME_OUTPUT": str(run / "out"), "TRAINTIME_CUPTI_LIB": str(sim / "libcupti.so.13"),
                     "TRAINTIME_PROMETHEUS_FILE": str(run / "tt-%r.prom"), "SIMGPU_SLOWDOWN": "0:0.05"})
    cmd = [str(build_dir / "bin" / "sim_train"), "--steps", str(steps), "--truth", str(run / "truth-%r.json"),
           "--no-step-marker", "--metrics-log", str(run / "metrics-%r.jsonl"), "--step-sleep-us", "500"]
    p = subprocess.run(cmd, env=env, cwd=run, capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, f"{' '.join(cmd)} exited {p.returncode}\n{p.stdout}\n{p.stderr}"
    truth = {d["index"]: d for d in load_json(run / "truth-0.json")["steps"]["by_step"]}
    lines = [json.loads(x) for x in (run / "metrics-0.jsonl").read_text().splitlines()]
    published = [x for x in lines if "traintime/gpu_step" in x.get("metrics", {})]
    c.check(len(published) >= 100, f"{len(published)} of {len(lines)} metrics lines have detected steps' figures")
    last_step = -1
    for x in published:
        m, where = x["metrics"], f"after sim_train's step {x['after_step']}"
        k = int(m["traintime/gpu_step"])
        c.check(m.get("traintime/step") == k and m.get("traintime/gpu_lag_steps") == 0,
                f"{where}: step {m.get('traintime/step')}, gpu_step {k}, lag {m.get('traintime/gpu_lag_steps')}")
        c.check(k >= last_step and k < x["after_step"], f"{where}: detected step {k} after {last_step}")
        last_step = k
        c.check(m.get("traintime/step_ms", 0) > 0 and "traintime/samples_per_s" in m, f"{where}: {m}")
        c.check(m["traintime/gpu_late_records"] == 0, f"{where}: {m['traintime/gpu_late_records']} late records")
        if c.check(k in truth, f"{where}: detected step {k} not in the truth"):
            gpu_figures_match(c, f"{where}, detected step {k}", m, truth[k])

    # At exit, 2 ranks: the Prometheus file has every detected step whose period is known.
    end = tmp_path / "end"
    end.mkdir()
    sim_run(build_dir, end, WORLD, {"TRAINTIME_PROMETHEUS_FILE": str(end / "tt-%r.prom")}, ["--no-step-marker"])
    for rank in range(WORLD):
        doc = load_json(end / "out" / f"rank-{rank:05d}.json")
        c.check(doc["steps"]["source"] == "detected" and doc["steps"]["count"] == STEPS,
                f"rank {rank}: steps {doc['steps']['source']} {doc['steps']['count']}")
        families = {f.name: f for f in text_string_to_metric_families((end / f"tt-{rank:05d}.prom").read_text())}
        value = {s.name: s.value for f in families.values() for s in f.samples}
        c.check(value.get("traintime_steps_total") == STEPS - 1 and value.get("traintime_step") == STEPS - 2
                and value.get("traintime_gpu_step") == STEPS - 2 and value.get("traintime_step_ms", 0) > 0,
                f"rank {rank}: steps_total {value.get('traintime_steps_total')}, step {value.get('traintime_step')}, "
                f"gpu_step {value.get('traintime_gpu_step')}, step_ms {value.get('traintime_step_ms')}")
        t = {d["index"]: d for d in load_json(end / f"truth-{rank}.json")["steps"]["by_step"]}[STEPS - 2]
        m = {f"traintime/{k[len('traintime_'):]}": v for k, v in value.items()}
        if all(f"traintime/{n}" in m for n in FIGURES.values()):
            gpu_figures_match(c, f"rank {rank} Prometheus", m, t)
        else:
            c.check(False, f"rank {rank}: no GPU figures in the Prometheus file: {sorted(value)}")
    c.done()


def test_sim_live_outputs_under_steps_off_have_no_steps_but_keep_samples(build_dir: Path, tmp_path: Path) -> None:
    """TRAINTIME_STEPS=off is no steps anywhere (docs/attribution.md): the rank file counts none
    though sim_train calls tt_step, and the live outputs say the same. Every metrics line and the
    Prometheus file count no step and carry no step time nor any step's GPU, health or self-cost
    figures; rank 0 prints no step line with TRAINTIME_PRINT_EVERY; the samples and tokens
    sim_train reported (its truth's per-step figures times its steps) are kept. Killed outright
    (SIGKILL) mid-run, the always-current record the report reads has no steps either (its step
    counters are the ones a finished step stores)."""
    import signal
    import time
    c = Checks()
    run = tmp_path / "run"
    run.mkdir()
    extra = {"TRAINTIME_STEPS": "off", "TRAINTIME_PRINT_EVERY": "10", "TRAINTIME_PROMETHEUS_FILE": str(run / "tt-%r.prom")}
    p = sim_run(build_dir, run, 1, extra, ["--metrics-log", str(run / "metrics-%r.jsonl")])
    truth = load_json(run / "truth-0.json")
    doc = load_json(run / "out" / "rank-00000.json")
    c.check(doc["steps"]["count"] == 0 and doc["steps"]["source"] == "none", f"rank file steps {doc['steps']}")
    c.check("traintime: step" not in p.stderr, f"a step line printed under TRAINTIME_STEPS=off:\n{p.stderr[-2000:]}")
    lines = [json.loads(x) for x in (run / "metrics-0.jsonl").read_text().splitlines()]
    c.check(len(lines) == STEPS, f"{len(lines)} metrics lines, expected {STEPS}")
    for x in lines:
        stepped = sorted(k for k in x.get("metrics", {}) if k.startswith(("traintime/step", "traintime/gpu_", "traintime/health_",
                                                                    "traintime/samples_per_s", "traintime/self_cost")))
        c.check(not stepped, f"after sim_train's step {x['after_step']}: per-step figures {stepped}")
    families = {f.name: f for f in text_string_to_metric_families((run / "tt-00000.prom").read_text())}
    value = {s.name: s.value for f in families.values() for s in f.samples}
    c.check(value.get("traintime_steps_total") == 0 and value.get("traintime_step_seconds_total") == 0,
            f"Prometheus steps_total {value.get('traintime_steps_total')}, "
            f"step_seconds_total {value.get('traintime_step_seconds_total')}")
    c.check(value.get("traintime_samples_total") == STEPS * truth["options"]["samples_per_step"]
            and value.get("traintime_tokens_total") == STEPS * truth["options"]["tokens_per_step"],
            f"Prometheus samples {value.get('traintime_samples_total')}, tokens {value.get('traintime_tokens_total')}; "
            f"sim_train made {STEPS} steps of {truth['options']['samples_per_step']} samples, "
            f"{truth['options']['tokens_per_step']} tokens")
    c.check(not any(k.startswith(("traintime_step_ms", "traintime_gpu_", "traintime_health_")) for k in value),
            f"Prometheus per-step figures: {sorted(k for k in value if k.startswith(('traintime_step_ms', 'traintime_gpu_')))}")

    # SIGKILL mid-run: the record left behind counts no step though sim_train finished some.
    killed = tmp_path / "killed"
    killed.mkdir()
    sim = build_dir / "sim"
    env = clean_env({"LD_LIBRARY_PATH": str(sim), "LD_PRELOAD": str(build_dir / "lib" / "libtraintime.so"),
                     "TRAINTIME_OUTPUT": str(killed / "out"), "TRAINTIME_CUPTI_LIB": str(sim / "libcupti.so.13"),
                     "TRAINTIME_STEPS": "off", "TRAINTIME_HANG_SEC": "0"})
    proc = subprocess.Popen([str(build_dir / "bin" / "sim_train"), "--steps", "100000", "--step-sleep-us", "3000",
                             "--steps-file", str(killed / "done")], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    record = killed / "out" / "rank-00000.live"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not record.exists():
            time.sleep(0.05)
        time.sleep(1.5)  # steps end after the record exists
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    done = int((killed / "done").read_text() or 0) if (killed / "done").exists() else 0
    c.check(record.exists() and done > 0, f"record {record.exists()}, {done} steps finished before the kill")
    report = subprocess.run([str(build_dir / "bin" / "traintime-report"), str(killed / "out"), "--format", "json"],
                            capture_output=True, text=True, timeout=120)
    if c.check(bool(report.stdout), f"no report of the killed run: {report.stderr}"):
        ranks = json.loads(report.stdout).get("per_rank", [])
        c.check([x.get("steps") for x in ranks] == [0],
                f"the report of the killed run reads steps {[x.get('steps') for x in ranks]} "
                f"({done} tt_step calls under TRAINTIME_STEPS=off)")
    c.done()
