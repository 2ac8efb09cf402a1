"""Real training jobs on the SIMULATED GPU: torch.profiler (Kineto) traces of real jobs replayed by
sim_replay through the public CUDA, NVTX and NCCL calls, with traintime preloaded and unmodified.

Each replay's rank file must equal the truth tests/sim/trace_truth.py computes from the trace
alone (tests/sim/compare_truth.py), in both modes, with no record lost. The traces are real
(tests/sim/README.md, "Replaying real traces"); they are found in TRAINTIME_REAL_TRACES, else
../shared/data/real-traces beside the repository, and never copied into it; the trace of a real-GPU
run kept in tests/fixtures with its rank file is replayed too, and held to that rank file.
"""
from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import time
from pathlib import Path

from testlib import SOURCE_DIR, Checks, clean_env, load_json, load_module, missing_dependency

trace_truth = load_module(SOURCE_DIR / "tests" / "sim" / "trace_truth.py", "trace_truth")
compare_truth = load_module(SOURCE_DIR / "tests" / "sim" / "compare_truth.py", "compare_truth")

TRACES = Path(os.environ.get("TRAINTIME_REAL_TRACES") or SOURCE_DIR.parent / "shared" / "data" / "real-traces")
# Real-GPU runs whose torch.profiler trace and traintime rank file were kept together
# (tests/fixtures/README.md: scripts/gpu-validate.sh's torch_loop --profile-steps run).
PROFILED_RUNS = sorted(p.parent for p in (SOURCE_DIR / "tests" / "fixtures").glob("gpu-*/*/profiler-trace.json*")
                       if (p.parent / "rank.json").exists() and (p.parent / "events.json").exists())
RESOLUTION_NS = 1000  # Kineto's timestamps are CUPTI's moved to its own clock: within a microsecond
SUMMARY = re.compile(r"^sim_replay: replayed .*; (\d+) GPU activit(?:y|ies) \((\d+) started at their launch, "
                     r"recorded earlier\); skipped: .* (\d+) GPU activit(?:y|ies) without its launch")


def real_traces() -> list[Path]:
    """The traces in TRAINTIME_REAL_TRACES, and those of the real-GPU runs kept in tests/fixtures."""
    found = sorted(p for p in TRACES.glob("*.json*") if p.name.endswith((".json", ".json.gz")))
    if not found:
        missing_dependency(f"no real traces in {TRACES}: set TRAINTIME_REAL_TRACES to the folder of "
                           "torch.profiler traces (tests/sim/README.md, 'Replaying real traces')")
    return found + [next(run.glob("profiler-trace.json*")) for run in PROFILED_RUNS]


def replay(build: Path, trace: Path, mode: str, out: Path, env: dict[str, str] | None = None,
           speed: str = "max") -> subprocess.CompletedProcess:
    sim = build / "sim"
    variables = {"LD_LIBRARY_PATH": str(sim), "LD_PRELOAD": str(build / "lib" / "libtraintime.so"),
                 "TRAINTIME_CUPTI_LIB": str(sim / "libcupti.so.13"), "TRAINTIME_OUTPUT": str(out),
                 "TRAINTIME_TOP_KERNELS": "65536"}  # every kernel listed: the truth has every one
    variables.update(env or {})
    return subprocess.run([str(build / "bin" / "sim_replay"), str(trace), "--mode", mode, "--speed", speed],
                          env=clean_env(variables), capture_output=True, text=True, timeout=240)


def rank_file(out: Path) -> dict | None:
    files = sorted(out.glob("rank-*.json"))
    return load_json(files[0]) if len(files) == 1 else None


def check_replay(c: Checks, build: Path, trace: Path, doc: dict, mode: str, work: Path) -> None:
    what = f"{trace.name} --mode {mode}"
    truth = trace_truth.compute(doc, mode, trace)
    out = work / f"{trace.name}-{mode}"
    # The bare truth is a job with no marker and no detected steps: detection has its own test below.
    p = replay(build, trace, mode, out, {"TRAINTIME_STEPS": "marker"} if mode == "bare" else None)
    if not c.check(p.returncode == 0, f"{what}: sim_replay exited {p.returncode}: {p.stderr[-2000:]}"):
        return
    lines = [line for line in p.stderr.splitlines() if line.startswith("sim_replay:")]
    c.check(len(lines) == 1, f"{what}: {len(lines)} summary lines, one expected: {lines}")
    m = SUMMARY.match(lines[0]) if lines else None
    launched = sum(row["count"] for row in truth["categories"].values())
    if c.check(m is not None, f"{what}: summary line not understood: {lines}"):
        c.check(int(m.group(1)) == launched, f"{what}: replayed {m.group(1)} GPU activities, the trace has {launched}")
        c.check(int(m.group(2)) == truth["clamped"], f"{what}: {m.group(2)} started at their launch, truth {truth['clamped']}")
        c.check(int(m.group(3)) == truth["activities_without_launch"],
                f"{what}: {m.group(3)} skipped without launch, truth {truth['activities_without_launch']}")
    rank = rank_file(out)
    if not c.check(rank is not None, f"{what}: expected exactly one rank file in {out}"):
        return
    c.extend(compare_truth.compare(rank, truth), f"{what}: ")
    c.check((rank["rank"], rank["world_size"]) == (truth["rank"], truth["world_size"]),
            f"{what}: rank {rank['rank']} of {rank['world_size']}, the trace's is {truth['rank']} of {truth['world_size']}")
    c.check(rank["dropped_records"] == 0, f"{what}: {rank['dropped_records']} records dropped")
    device = rank.get("device", {}).get("name", "")
    c.check("SIMULATED" in device and f"replaying {trace.name}" in device,
            f"{what}: the rank file does not say it is a simulated replay of the trace: device {device!r}")


# Under a sanitizer (scripts/sanitize.sh exports its options) the point is the capture path's memory
# and threads, not the figures once more: the annotated mode alone, which plays all the bare one
# does and the NVTX ranges and steps besides, keeps the sanitized runs' CI time in bounds.
SANITIZED = "ASAN_OPTIONS" in os.environ or "TSAN_OPTIONS" in os.environ
MODES = ("annotated",) if SANITIZED else ("bare", "annotated")


def test_replay_of_every_real_trace_equals_its_truth(build_dir: Path, tmp_path: Path) -> None:
    c = Checks()
    for trace in real_traces():
        doc = trace_truth.load_trace(trace)
        for mode in MODES:
            check_replay(c, build_dir, trace, doc, mode, tmp_path)
    c.done()


def profiler_steps_repeat(doc: dict) -> bool:
    """Whether two consecutive ProfilerStep#N ranges of the trace launch the same kernels in the
    same order (by name): what a period found from the launches alone can rest on."""
    events = [e for e in doc["traceEvents"] if isinstance(e, dict) and e.get("ph") == "X" and "ts" in e]
    steps = sorted((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))) for e in events
                   if str(e.get("name", "")).startswith("ProfilerStep#"))
    launches = {(e.get("args") or {}).get("correlation"): float(e["ts"]) for e in events
                if str(e.get("cat", "")).lower() in ("cuda_runtime", "cuda_driver")}
    kernels = sorted(((e.get("args") or {}).get("correlation"), e.get("name")) for e in events
                     if str(e.get("cat", "")).lower() == "kernel" and (e.get("args") or {}).get("correlation") in launches)
    per_step: list[list[str]] = [[] for _ in steps]
    for corr, name in kernels:
        for i, (start, end) in enumerate(steps):
            if start <= launches[corr] < end:
                per_step[i].append(name)
    return any(a and a == b for a, b in zip(per_step, per_step[1:]))


def test_bare_replay_finds_the_traces_own_profiler_steps(build_dir: Path, tmp_path: Path) -> None:
    """A real job replayed with no marker at all (bare mode: no ProfilerStep, no range) gets its
    steps from the launch sequence (docs/attribution.md "Steps without a marker"). Where two of the
    trace's ProfilerStep#N ranges in a row launch the same kernels, it finds as many steps as the
    ProfilerSteps end, each with the GPU time of the annotated replay's step of the same index
    within 1 % (steps.source "detected"); where no two do (a data-dependent job recorded for two
    steps), it has no steps and says why."""
    c = Checks()
    detected = 0
    for trace in real_traces():
        doc = trace_truth.load_trace(trace)
        ann = trace_truth.compute(doc, "annotated", trace)
        out = tmp_path / f"{trace.name}-detect"
        p = replay(build_dir, trace, "bare", out)
        rank = rank_file(out)
        what = f"{trace.name} --mode bare"
        if not c.check(p.returncode == 0 and rank is not None, f"{what}: sim_replay exited {p.returncode}: {p.stderr[-2000:]}"):
            continue
        steps = rank["steps"]
        detection = steps.get("detection", {})
        if not c.check(detection, f"{what}: no steps.detection: detection did not run"):
            continue
        if not profiler_steps_repeat(doc):
            c.check(steps.get("source") == "none" and steps["count"] == 0 and "no period" in detection.get("reason", ""),
                    f"{what}: its ProfilerSteps never repeat, yet source {steps.get('source')!r}, "
                    f"{steps['count']} steps ({detection})")
            continue
        detected += 1
        c.check(steps.get("source") == "detected" and steps["count"] == ann["steps"]["count"],
                f"{what}: {steps['count']} steps ({steps.get('source')}), the trace's ProfilerSteps end "
                f"{ann['steps']['count']} ({detection})")
        want = {row["index"]: row for row in ann["steps"]["by_step"]}
        for row in steps.get("detail", []):
            index = row["index"]
            if not c.check(index in want, f"{what}: detected step {index} is no step of the trace"):
                continue
            got, expected = row["totals"]["gpu_busy_ns"], want[index]["gpu_busy_ns"]
            c.check(abs(got - expected) <= expected / 100,
                    f"{what}: step {index} GPU busy {got} ns, the annotated replay's {expected} ns")
    c.check(detected > 0, "no real trace whose ProfilerSteps repeat: the test proved nothing")
    c.done()


# A hand-made trace whose truth is worked out below by hand (ns = µs × 1000): two threads, two
# steps and a partial one, ranges, an NCCL kernel with PyTorch's arguments, a copy Kineto put
# before its launch, a kernel launched by CUDA 13's <<<>>> (which torch 2.11's Kineto names
# INVALID), a kernel without launch and an INVALID call without GPU work.
def hand_trace() -> dict:
    def x(cat: str, name: str, tid: int, ts: int, dur: int, **args: object) -> dict:
        pid = 0 if cat in ("kernel", "gpu_memcpy", "gpu_memset") else 100
        return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}
    nccl_args = {"Collective name": "allreduce", "In msg nelems": 256, "Out msg nelems": 256, "Group size": 2,
                 "dtype": "Float", "Process Group Name": "0", "Process Group Ranks": "[0, 1]"}
    events = [
        x("user_annotation", "ProfilerStep#1", 100, 0, 100), x("user_annotation", "forward", 100, 10, 50),
        x("user_annotation", "## optimizer ##", 100, 70, 25), x("user_annotation", "ProfilerStep#2", 100, 100, 100),
        x("user_annotation", "dataloader", 100, 110, 20),
        x("cuda_runtime", "cudaLaunchKernel", 100, 20, 3, correlation=1),
        x("kernel", "gemm", 7, 25, 20, correlation=1, stream=7, device=0),
        x("cuda_runtime", "cudaLaunchKernel", 101, 30, 3, correlation=2),
        x("kernel", "bwd_k", 7, 45, 10, correlation=2, stream=7, device=0),
        x("cuda_runtime", "cudaLaunchKernelExC", 100, 40, 5, correlation=3),
        x("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 20, 50, 30, correlation=3, stream=20, device=0, **nccl_args),
        x("cuda_runtime", "cudaMemcpyAsync", 100, 72, 2, correlation=4),
        x("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 7, 70, 5, correlation=4, stream=7, device=0, bytes=1000),
        x("cuda_runtime", "INVALID", 101, 100, 2, correlation=5, cbid=505),  # CUDA 13's <<<>>> launch
        x("kernel", "late_k", 7, 101, 4, correlation=5, stream=7, device=0),
        x("cuda_runtime", "cudaMemsetAsync", 100, 115, 1, correlation=6),
        x("gpu_memset", "Memset (Device)", 7, 116, 2, correlation=6, stream=7, device=0, bytes=64),
        x("cuda_runtime", "INVALID", 100, 120, 1, correlation=7),
        x("kernel", "orphan", 7, 121, 4, correlation=99, stream=7, device=0),
        x("cuda_runtime", "cudaStreamSynchronize", 100, 150, 20, correlation=8),
        x("cuda_runtime", "cudaLaunchKernel", 100, 210, 2, correlation=9),
        x("kernel", "gemm", 7, 212, 10, correlation=9, stream=7, device=0),
        {"ph": "M", "name": "thread_name", "pid": 100, "tid": 101, "args": {"name": "thread 101 (pt_autograd_0)"}},
    ]
    return {"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": 1, "world_size": 2},
            "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB"}], "traceEvents": events}


US = 1000


def test_trace_truth_of_a_hand_worked_trace(build_dir: Path, tmp_path: Path) -> None:
    c = Checks()
    path = tmp_path / "hand.json"
    path.write_text(json.dumps(hand_trace()))
    doc = trace_truth.load_trace(path)
    ann = trace_truth.compute(doc, "annotated", path)
    # Step 0: gemm [25,45] and bwd_k [45,55] in forward (bwd_k's thread has no range: the step
    # thread's), the AllReduce [50,80], the copy moved to its launch [72,77] in the optimizer.
    # Step 1: late_k [101,105] launched at the step end's microsecond (after it), nothing open:
    # unattributed; the memset [116,118] in dataloader: io. Step 2 (partial): gemm [212,222].
    steps = {s["index"]: s for s in ann["steps"]["by_step"]}
    want0 = {"gpu_busy_ns": 55 * US, "compute_ns": 35 * US, "comm_ns": 30 * US, "exposed_comm_ns": 20 * US,
             "comm_overlapped_ns": 10 * US, "io_ns": 0, "span_ns": 55 * US, "idle_ns": 0}
    want1 = {"gpu_busy_ns": 6 * US, "compute_ns": 4 * US, "comm_ns": 0, "io_ns": 2 * US, "span_ns": 17 * US,
             "idle_ns": 11 * US}
    for index, want in ((0, want0), (1, want1), (2, {"gpu_busy_ns": 10 * US, "span_ns": 10 * US})):
        for field, value in want.items():
            c.check(steps[index][field] == value, f"annotated step {index} {field}: {steps[index][field]}, hand {value}")
    c.check(steps[0]["busy_ns_by_category"] == {"forward": 30 * US, "comm": 30 * US, "optimizer": 5 * US},
            f"annotated step 0 by category: {steps[0]['busy_ns_by_category']}")
    c.check(steps[1]["unattributed"] == {"count": 1, "gpu_busy_ns": 4 * US}, f"step 1 unattributed {steps[1]['unattributed']}")
    c.check((ann["steps"]["count"], ann["steps"]["partial_final_step"]) == (2, True), f"steps {ann['steps']['count']}")
    c.check(ann["categories"]["unattributed"] == {"gpu_busy_ns": 14 * US, "gpu_sum_ns": 14 * US, "count": 2},
            f"unattributed {ann['categories']['unattributed']}")
    c.check(ann["memcpy"] == {"HtoD": {"count": 1, "bytes": 1000, "gpu_ns": 5 * US}}, f"memcpy {ann['memcpy']}")
    c.check(ann["kernels"]["gemm"] == {"count": 2, "gpu_sum_ns": 30 * US}, f"kernels {ann['kernels']}")
    c.check(ann["comm_calls"] == [{"op": "AllReduce", "comm_size": 2, "calls": 1, "bytes": 1024}],
            f"comm calls {ann['comm_calls']}")
    regions = {r["path"]: (r["category"], r["kernels"], r["activities"], r["gpu_busy_ns"]) for r in ann["regions"]}
    c.check(regions == {"forward": ("forward", 2, 2, 30 * US), "## optimizer ##": ("optimizer", 0, 1, 5 * US),
                        "dataloader": ("io", 0, 1, 2 * US)}, f"regions {regions}")
    c.check((ann["clamped"], ann["activities_without_launch"]) == (1, 1), "clamped / without launch")
    bare = trace_truth.compute(doc, "bare", path)
    t = bare["steps"]["totals"]
    c.check((bare["steps"]["count"], bare["steps"]["partial_final_step"]) == (0, True), "bare: one partial step")
    c.check((t["gpu_busy_ns"], t["compute_ns"], t["exposed_comm_ns"], t["io_ns"], t["idle_ns"])
            == (71 * US, 51 * US, 20 * US, 0, 126 * US), f"bare totals {t}")
    c.check(bare["regions"] == [], "bare: no regions")

    # And the replay of that trace under traintime says the same.
    for mode, truth in (("annotated", ann), ("bare", bare)):
        out = tmp_path / mode
        p = replay(build_dir, path, mode, out)
        if c.check(p.returncode == 0, f"{mode}: sim_replay exited {p.returncode}: {p.stderr}"):
            rank = rank_file(out)
            if c.check(rank is not None, f"{mode}: no single rank file"):
                c.extend(compare_truth.compare(rank, truth), f"hand-made {mode}: ")
    c.done()


def test_replay_refuses_what_is_not_a_trace(build_dir: Path, tmp_path: Path) -> None:
    c = Checks()
    text = json.dumps(hand_trace()).encode()
    cases = {
        "notjson.json": (b"<html>not a trace</html>", "is not valid JSON"),
        "truncated.json.gz": (gzip.compress(text)[: len(gzip.compress(text)) // 2], "gzip stream ends early"),
        "cut.json": (text[: len(text) // 2], "truncated"),
        "nolaunch.json": (json.dumps({"traceEvents": [e for e in hand_trace()["traceEvents"]
                                                      if e.get("cat") != "cuda_runtime"]}).encode(),
                          "holds no GPU activity whose launch is in it"),
        "noevents.json": (b'{"schemaVersion": 1}', "has no traceEvents"),
    }
    for name, (data, why) in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        out = tmp_path / f"out-{name}"
        p = replay(build_dir, path, "bare", out)
        lines = p.stderr.strip().splitlines()
        c.check(p.returncode == 2, f"{name}: exit {p.returncode}, 2 expected")
        c.check(len(lines) == 1 and str(path) in lines[0] and why in lines[0],
                f"{name}: one line naming the file and '{why}' expected: {lines}")
        c.check(not list(out.glob("rank-*.json")), f"{name}: a rank file was written for a refused trace")
    c.done()


def test_replay_claims_the_traces_rank_unless_the_launcher_set_one(build_dir: Path, tmp_path: Path) -> None:
    c = Checks()
    path = tmp_path / "hand.json"
    path.write_text(json.dumps(hand_trace()))
    for env, want in (({}, (1, 2)), ({"RANK": "5", "WORLD_SIZE": "16"}, (5, 16))):
        out = tmp_path / f"out-{len(env)}"
        p = replay(build_dir, path, "bare", out, env)
        rank = rank_file(out)
        if c.check(p.returncode == 0 and rank is not None, f"{env}: exit {p.returncode} {p.stderr}"):
            c.check((rank["rank"], rank["world_size"]) == want, f"{env}: rank {rank['rank']} of {rank['world_size']}")
            c.check((out / f"rank-{want[0]:05d}.json").exists(), f"{env}: rank file name")
            device = rank["device"]["name"]
            c.check(device.startswith("simgpu (SIMULATED GPU) replaying hand.json")
                    and "NVIDIA A100-SXM4-80GB" in device, f"device name {device!r}")
    c.done()


def test_replay_paces_the_cpu_at_the_recorded_speed(build_dir: Path, tmp_path: Path) -> None:
    # Two launches 400 ms apart in the recording: at --speed 2 the replay takes at least 200 ms
    # (a lower bound only: the order, not the machine's speed, decides every figure).
    trace = hand_trace()
    for e in trace["traceEvents"]:
        if e.get("ts", 0) >= 200:
            e["ts"] += 400_000
    path = tmp_path / "slow.json"
    path.write_text(json.dumps(trace))
    t0 = time.monotonic()
    p = replay(build_dir, path, "annotated", tmp_path / "paced", speed="2")
    paced = time.monotonic() - t0
    assert p.returncode == 0, p.stderr
    assert paced >= 0.2, f"--speed 2 replayed a 400 ms recording in {paced:.3f} s"
    rank = rank_file(tmp_path / "paced")
    truth = trace_truth.compute(trace_truth.load_trace(path), "annotated", path)
    assert rank is not None and not compare_truth.compare(rank, truth)
    bad = replay(build_dir, path, "annotated", tmp_path / "bad", speed="fast")
    assert bad.returncode == 2 and "--speed fast" in bad.stderr



def test_replay_of_a_real_gpu_run_gives_its_rank_files_step_figures(build_dir: Path, tmp_path: Path) -> None:
    """The trace of a real run, replayed in annotated mode, gives per step what traintime measured
    on the real GPU in the same run (its rank file), within the trace's resolution: GPU busy time,
    span, idle and comm, and the busy time of every category whose regions the trace carries as
    ranges (all of them when it carries them all: no unattributed work left in the replay)."""
    if not PROFILED_RUNS:
        missing_dependency("no real-GPU run with a profiler trace in tests/fixtures (tests/fixtures/README.md)")
    c = Checks()
    for run in PROFILED_RUNS:
        trace = next(run.glob("profiler-trace.json*"))
        steps = load_json(run / "events.json")["profiler_steps"]  # "ProfilerStep#N" -> the run's step
        real = {row["index"]: row for row in load_json(run / "rank.json")["steps"]["detail"]}
        out = tmp_path / run.name
        p = replay(build_dir, trace, "annotated", out)
        rank = rank_file(out)
        if not c.check(p.returncode == 0 and rank is not None, f"{run}: sim_replay exited {p.returncode}: {p.stderr}"):
            continue
        replayed = {row["index"]: row for row in rank["steps"]["detail"]}
        c.check(rank["steps"]["count"] == len(steps), f"{run}: {rank['steps']['count']} steps replayed, {len(steps)} recorded")
        for index, name in enumerate(sorted(steps, key=lambda s: int(s.split("#")[1]))):
            got, want = replayed.get(index), real.get(steps[name])
            what = f"{run.name} {name} (step {steps[name]} of the run)"
            if not c.check(got is not None and want is not None, f"{what}: a step row is missing"):
                continue
            pairs = {"span_ns": (got["span_ns"], want["span_ns"])}
            for field in ("gpu_busy_ns", "idle_ns", "comm_ns"):
                pairs[field] = (got["totals"][field], want["totals"][field])
            unattributed = got["busy_ns_by_category"].get("unattributed", 0)
            for cat, busy in got["busy_ns_by_category"].items():
                if busy and cat != "unattributed" or not unattributed:
                    pairs[f"busy_ns_by_category.{cat}"] = (busy, want["busy_ns_by_category"].get(cat, 0))
            for field, (g, w) in pairs.items():
                c.check(abs(g - w) <= RESOLUTION_NS, f"{what}: {field} replayed {g}, measured {w} ({g - w:+d} ns)")
    c.done()


def test_a_real_jobs_two_ranks_replay_as_one_job_and_read_in_the_report(build_dir: Path, tmp_path: Path) -> None:
    """The trace_filter traces are ranks 0 and 1 of a 128-rank job: replayed as a 2-rank job and
    merged by traintime-report, both ranks are one job of 2 steps, the straggler is the rank whose
    recorded compute is longer (rank 1: 136.9 against 104.4 ms a step), and the real templated
    kernel names read apart in text and in full in html."""
    reportlib = load_module(SOURCE_DIR / "tests" / "report" / "reportlib.py", "reportlib")
    traces = [TRACES / f"trace_filter--sampled_rank-{r}.json.gz" for r in (0, 1)]
    if not all(t.exists() for t in traces):
        missing_dependency(f"the trace_filter traces are not in {TRACES} (tests/sim/README.md)")
    out = tmp_path / "job"
    for r, trace in enumerate(traces):
        p = replay(build_dir, trace, "annotated", out, {"RANK": str(r), "WORLD_SIZE": "2",
                                                        "TORCHELASTIC_RUN_ID": "trace-filter-job",
                                                        "TRAINTIME_WARMUP_STEPS": "0"})
        assert p.returncode == 0, p.stderr
    text = reportlib.run(build_dir, out)
    assert text.returncode == 0, text.stderr
    assert "job trace-filter-job, 2 of 2 ranks, 2 steps (warm-up 0)" in text.stdout, text.stdout[:400]
    stragglers = text.stdout.split("Stragglers:")[1].split("Where the GPU step time goes:")[0]
    assert stragglers.strip().startswith("- rank 1 (host"), stragglers
    kernels = reportlib.text_table(text.stdout, "Top kernels by GPU time")
    names = [row[-1] for row in kernels.values()]
    assert len(names) == 10 and len(set(names)) == 10, names
    assert not any("GenericPackedTensorAccessor" in n or n.startswith("void ") for n in names), names
    assert any("unweighted_kernel_cta_per_row_1" in n for n in names) and \
        any("unweighted_kernel_warp_per_row_1" in n for n in names), names
    html = tmp_path / "job.html"
    assert reportlib.run(build_dir, out, "--format", "html", "-o", html).returncode == 0
    page = html.read_text()
    whole = ("split_embedding_backward_codegen_rowwise_adagrad_unweighted_kernel_cta_per_row_1&lt;c10::Half, "
             "float, c10::Half, 2ul, 32&gt;(at::GenericPackedTensorAccessor&lt;float, 2ul")
    assert "<details><summary><code>split_embedding_backward_codegen_rowwise_adagrad_unweighted_kernel_cta_per_row_1" \
           "&lt;...&gt;</code></summary>" in page and whole in page
