#!/usr/bin/env python3
"""Judge the real-stack checks of a GPU validation run (docs/validation.md, issue 11 item 4).

    check_gpu_run.py context  --rank-file R
    check_gpu_run.py profiler --rank-file R --trace T
    check_gpu_run.py graphs   --rank-file R --events E
    check_gpu_run.py exit     --rank-file R --expect X
    check_gpu_run.py live     --rank-file R --metrics-log M
    check_gpu_run.py memory   --rank-file R --events E
    check_gpu_run.py health   --rank-file R --smi-log L
    check_gpu_run.py abort    --rank-file R --status S --steps N
    check_gpu_run.py plugin   --rank-file R
    check_gpu_run.py health --print-query
    check_gpu_run.py --self-test

context   An annotated loop (examples/torch_loop.py runs every GPU operation inside a region):
          no unattributed GPU work, no launch context lost (capture_stats.missing_context 0), no
          record dropped. Prints how many CUPTI correlation ids the process consumed per launch
          callback, which sizes traintime's correlation table against real PyTorch.
profiler  A torch.profiler session ran in the middle of the traintime run: the user's Chrome
          trace holds GPU kernels (the profiler works), and traintime says how it shared CUPTI
          with it (gpu_capture_reason) or warns that it cannot share with it. traintime's own figures of
          the same run are judged against CUDA events by compare_events.py.
graphs    torch_loop.py --cuda-graphs: the replayed kernels belong to the regions open at capture
          ("forward", "backward"), none to the "replay" region the graph launch ran in, none
          unattributed, at least one record took its graph node's context, and the GPU span of
          the captured regions (per replay: first start to last end, DESIGN §6) is within
          --tolerance-pct of the CUDA-event time of all replays (the replay's kernels run back to
          back on one stream, so the two measure the same up to the gap between the regions).
exit      examples/torch_exit_in_region.py: a region opened before CUDA initialised is still
          open at exit. The rank file was written at a normal exit, with every GPU record
          delivered, and the region holds at least the kernels the program says it launched.
live      torch_loop.py --metrics-log: traintime.metrics() published GPU figures while the run
          went on (traintime/gpu_step advanced), and no record arrived after its step was
          published (traintime/gpu_late_records 0 at the end).
memory    torch_loop.py under PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (its events file
          has torch.cuda.max_memory_reserved()): the caching allocator grows by CUDA virtual
          memory (cuMemCreate/cuMemMap), so traintime's memory.peak_bytes must hold at least
          what PyTorch reserved (VMM memory was seen) and at most that plus --slack-mib and
          --slack-pct (it was not counted twice, once by the VMM calls and once by CUPTI's
          records), with memory_vmm_allocations > 0. Prints memory_vmm_records: whether this
          CUPTI makes memory records for VMM calls at all, which nothing documents.
health    traintime's NVML sampler (gpu_health) against nvidia-smi sampling the same GPU during
          the same run (`nvidia-smi --query-gpu=FIELDS --format=csv,nounits -lms 100`, FIELDS from
          --print-query): the same PCI bus id, memory total and power limit exactly (to NVML's
          units), and the sampled figures (SM clock, power, temperature, PCIe link, memory used)
          inside the range nvidia-smi saw over the run. The two sample at different instants, so
          the sampled figures are judged by range, not equality; both medians are printed.
abort     cuda_mlp --abort-after N: the program called abort() with work in flight. It must have
          died by SIGABRT (shell status 134), and still left its final rank file: exit_reason
          "signal SIGABRT", at least the N tt_step calls it made, and every record CUPTI held:
          the signal-time write has the processing thread flush and ingest them (bounded), so
          gpu_records_complete is true, and the steps the GPU had run are in steps.detail. The
          CPU runs ahead of the GPU (CUDA queues about a thousand launches), so the steps with
          GPU work are a prefix: at least a third of them in a run of about 3 s.
plugin    A real NCCL under the preload at world size 1 (nccl_sweep): NCCL found traintime as its
          profiler plugin with no user step and initialised it per communicator
          (profiler_plugin_inits >= 1) in the newest version it probes (3 ... 7), traintime read
          NCCL's version (profiler_plugin_nccl_version), the API events of the collectives called
          arrived (profiler_plugin_coll_api_events > 0) and none was counted twice
          (profiler_plugin_counted_calls 0: the wrappers counted them). At world size 1 NCCL
          enqueues no collective, so no task or kernel-channel event is expected.

Exit status: 0 the check passes, 1 it fails, 2 unusable input. Standard library only (it runs
on the GPU machine); rank files are read with compare_events.py's reader.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_events import EXIT_DISAGREE, EXIT_OK, EXIT_UNUSABLE, Unusable, check_rank_file, load_json  # noqa: E402

Result = tuple[int, list[str]]


def _rank(path: str) -> dict:
    rank = load_json(path, "rank file")
    if not isinstance(rank, dict):
        raise Unusable(f"{path} is not a JSON object")
    check_rank_file(rank, path)
    return rank


def _count(rank: dict, category: str) -> int:
    return int(rank.get("categories", {}).get(category, {}).get("count", 0))


def _row(rank: dict, path: str) -> dict:
    return next((r for r in rank.get("regions", []) if r.get("path") == path), {})


def _verdict(lines: list[str], failures: list[str], what: str) -> Result:
    lines += [f"  FAIL: {f}" for f in failures]
    lines.append(f"RESULT: {what}: " + ("PASS" if not failures else f"FAIL ({len(failures)})"))
    return (EXIT_DISAGREE if failures else EXIT_OK), lines


def check_context(rank: dict) -> Result:
    stats = rank.get("capture_stats")
    if not isinstance(stats, dict):
        raise Unusable("the rank file has no capture_stats (written by traintime since the GPU "
                       "validation tooling; rebuild the carried tree)")
    records, callbacks = stats.get("records", 0), stats.get("launch_callbacks", 0)
    lines = [
        f"gpu_capture_reason: {rank.get('gpu_capture_reason', '')}",
        f"CUPTI records {records}, launch callbacks {callbacks}, buffers {stats.get('buffers', 0)}",
        f"correlation ids per launch callback: {stats.get('correlation_ids_per_callback', 0):.2f}",
        f"joined {stats.get('joined', 0)}, graph-node context {stats.get('graph_node_context', 0)}, "
        f"missing context {stats.get('missing_context', 0)} "
        f"(overwritten {stats.get('overwritten', 0)})",
        f"unattributed activities {_count(rank, 'unattributed')}, dropped records "
        f"{rank.get('dropped_records', 0)}",
    ]
    failures = []
    if records == 0:
        failures.append("no GPU record was captured")
    if stats.get("missing_context", 0):
        failures.append(f"{stats['missing_context']} records found no launch context")
    if _count(rank, "unattributed"):
        failures.append(f"{_count(rank, 'unattributed')} activities are unattributed in a loop "
                        "that runs every GPU operation inside a region")
    if rank.get("dropped_records", 0):
        failures.append(f"{rank['dropped_records']} records were dropped")
    return _verdict(lines, failures, "launch context")


def check_profiler(rank: dict, trace: Any) -> Result:
    events = trace.get("traceEvents", []) if isinstance(trace, dict) else []
    kernels = sum(1 for e in events if isinstance(e, dict) and e.get("cat") == "kernel")
    reason = rank.get("gpu_capture_reason", "")
    # What traintime writes when another CUPTI client is in the process: the sharing in
    # gpu_capture_reason (cupti/src/client_mux.cpp), or a warning naming the profiler it cannot
    # share with (a statically linked CUPTI). Other CUPTI warnings say nothing about the profiler.
    shared = "shared with another in-process client" in reason
    gap_warnings = [w for w in rank.get("warnings", []) if "profiler" in w]
    lines = [f"torch.profiler trace: {len(events)} events, {kernels} GPU kernels",
             f"traintime gpu_capture_reason: {reason}"]
    lines += [f"traintime warning: {w}" for w in gap_warnings]
    failures = []
    if kernels == 0:
        failures.append("the user's torch.profiler trace has no GPU kernel: traintime kept the "
                        "profiler from seeing the GPU")
    if not shared and not gap_warnings:
        failures.append("traintime says nothing about the profiler: neither that CUPTI was shared "
                        "(gpu_capture_reason) nor a gap (warnings)")
    return _verdict(lines, failures, "torch.profiler in the run")


def check_graphs(rank: dict, events: Any, tolerance_pct: float) -> Result:
    replay = events.get("graph_replay") if isinstance(events, dict) else None
    if not isinstance(replay, dict):
        raise Unusable("the events file has no graph_replay (run torch_loop.py --cuda-graphs)")
    captured = replay.get("captured_paths", ["forward", "backward"])
    rows = {p: _row(rank, p) for p in captured}
    lines = []
    failures = []
    gpu_ms = 0.0
    for path, row in rows.items():
        lines.append(f"region {path}: {row.get('kernels', 0)} kernels, "
                     f"{row.get('gpu_busy_ns', 0) / 1e6:.3f} ms busy, "
                     f"{row.get('gpu_span_ns', 0) / 1e6:.3f} ms span")
        if row.get("kernels", 0) == 0:
            failures.append(f"no replayed kernel landed in the captured region {path!r}")
        gpu_ms += row.get("gpu_span_ns", 0) / 1e6
    replay_row = _row(rank, "replay")
    lines.append(f"region replay (the graph launch): {replay_row.get('kernels', 0)} kernels")
    if replay_row.get("kernels", 0):
        failures.append(f"{replay_row['kernels']} replayed kernels went to the region of the graph "
                        "launch instead of the regions open at capture")
    if _count(rank, "unattributed"):
        failures.append(f"{_count(rank, 'unattributed')} activities are unattributed")
    stats = rank.get("capture_stats")  # absent in a fixture replay's output
    if isinstance(stats, dict) and not stats.get("graph_node_context", 0):
        failures.append("no record took its graph node's context (capture_stats.graph_node_context 0)")
    ev_ms = float(replay.get("total_ms", 0))
    diff = (gpu_ms - ev_ms) / ev_ms * 100 if ev_ms > 0 else None
    lines.append(f"{replay.get('replays', 0)} replays: CUDA events {ev_ms:.3f} ms, traintime "
                 f"span of {', '.join(captured)} {gpu_ms:.3f} ms"
                 + (f" ({diff:+.2f} %)" if diff is not None else ""))
    if diff is None:
        failures.append("the events file timed no replay")
    elif abs(diff) > tolerance_pct:
        failures.append(f"captured regions' GPU time differs from the replays' CUDA-event time by "
                        f"{diff:+.2f} % (> {tolerance_pct:g} %)")
    return _verdict(lines, failures, "CUDA graph attribution")


def check_exit(rank: dict, expect: Any) -> Result:
    if not isinstance(expect, dict) or "kernels_launched" not in expect:
        raise Unusable("the expectation file has no kernels_launched")
    region = expect.get("region", "startup")
    row = _row(rank, region)
    want = int(expect["kernels_launched"])
    lines = [f"exit_reason {rank.get('exit_reason')!r}, gpu_records_complete "
             f"{rank.get('gpu_records_complete', True)}, snapshot {rank.get('snapshot')}",
             f"region {region}: {row.get('kernels', 0)} kernels (the program launched {want})"]
    failures = []
    if rank.get("exit_reason") != "exit" or rank.get("snapshot"):
        failures.append(f"the rank file is not the one written at a normal exit "
                        f"(exit_reason {rank.get('exit_reason')!r})")
    if rank.get("gpu_records_complete", True) is not True:
        failures.append("records were still undelivered when the exit file was written")
    if not row:
        failures.append(f"no region {region!r} in the rank file")
    elif row.get("kernels", 0) < want:
        failures.append(f"region {region!r} has {row.get('kernels', 0)} kernels, the program "
                        f"launched {want}: work in flight at exit was lost")
    if _count(rank, "unattributed"):
        failures.append(f"{_count(rank, 'unattributed')} activities are unattributed although "
                        "the region was open from before CUDA initialised")
    return _verdict(lines, failures, "exit with a region open from before CUDA init")


def check_live(rank: dict, metrics: list[dict]) -> Result:
    if not metrics:
        raise Unusable("the metrics log is empty")
    steps = [m.get("traintime/gpu_step", -1) for m in metrics]
    published = [s for s in steps if s is not None and s >= 0]
    # The last line is read after the loop's final synchronise; the ones before it ran mid-run.
    during = [s for s in steps[:-1] if s is not None and s >= 0]
    late = metrics[-1].get("traintime/gpu_late_records", 0)
    lines = [f"{len(metrics)} metrics() reads, gpu_step published during the run: "
             f"{min(during) if during else '-'}..{max(during) if during else '-'}, "
             f"at the end {steps[-1]}", f"gpu_late_records at the end: {late}"]
    failures = []
    if not during:
        failures.append("no GPU step was published while the run went on")
    if late:
        failures.append(f"{late} records arrived after their step's figures were published")
    if published and any(b < a for a, b in zip(published, published[1:])):
        failures.append("traintime/gpu_step went backwards")
    return _verdict(lines, failures, "live metrics")


def check_memory(rank: dict, events: Any, slack_mib: float, slack_pct: float) -> Result:
    memory = events.get("memory") if isinstance(events, dict) else None
    reserved = memory.get("max_memory_reserved") if isinstance(memory, dict) else None
    if not isinstance(reserved, int):
        raise Unusable("the events file has no memory.max_memory_reserved (torch_loop.py writes it)")
    run = rank.get("memory")
    counters = rank.get("modules", {}).get("cupti", {}).get("counters", {})
    allocations = counters.get("memory_vmm_allocations", 0)
    records = counters.get("memory_vmm_records", 0)
    peak = run.get("peak_bytes", 0) if isinstance(run, dict) else 0
    ceiling = reserved * (1 + slack_pct / 100) + slack_mib * 2**20
    mib = 2**20
    lines = [f"PYTORCH_CUDA_ALLOC_CONF={memory.get('allocator_conf', '')!r}: torch max_memory_reserved "
             f"{reserved / mib:.1f} MiB, traintime memory.peak_bytes {peak / mib:.1f} MiB",
             f"memory_vmm_allocations {allocations}, memory_vmm_records {records} (CUPTI "
             f"{'does' if records else 'does not'} make memory records for VMM calls)"]
    failures = []
    if not isinstance(run, dict):
        failures.append("the rank file has no memory figures")
    if allocations == 0:
        failures.append("no cuMemCreate was counted although the allocator uses expandable segments")
    if peak < reserved:
        failures.append(f"memory.peak_bytes is {(reserved - peak) / mib:.1f} MiB short of what PyTorch "
                        "reserved: VMM memory was missed")
    if peak > ceiling:
        failures.append(f"memory.peak_bytes exceeds what PyTorch reserved by {(peak - reserved) / mib:.1f} "
                        f"MiB, more than {slack_pct:g} % + {slack_mib:g} MiB: counted twice?")
    return _verdict(lines, failures, "device memory with expandable segments")


# nvidia-smi --query-gpu fields, in the order of the CSV the validation records.
SMI_FIELDS = ("timestamp", "pci.bus_id", "clocks.sm", "clocks.mem", "power.draw", "power.limit",
              "temperature.gpu", "pcie.link.gen.current", "pcie.link.width.current",
              "memory.used", "memory.total")


def _pci(bus_id: str) -> tuple[int, ...] | None:
    """'00000000:19:00.0' (nvidia-smi) and '0000:19:00.0' (CUDA) name the same device."""
    try:
        domain, bus, rest = bus_id.strip().split(":")
        dev, fn = rest.split(".")
        return int(domain, 16), int(bus, 16), int(dev, 16), int(fn, 16)
    except ValueError:
        return None


def _read_smi(path: str) -> list[dict[str, Any]]:
    """nvidia-smi's CSV (a header line, then one line per sample); '[N/A]' reads None."""
    try:
        lines = [ln for ln in Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
                 if ln.strip()]
    except OSError as e:
        raise Unusable(f"cannot read the nvidia-smi log {path}: {e.strerror}") from e
    rows = []
    for ln in lines:
        cells = [c.strip() for c in ln.split(",")]
        if len(cells) != len(SMI_FIELDS) or cells[0].startswith("timestamp"):
            continue
        row: dict[str, Any] = {"timestamp": cells[0], "pci.bus_id": cells[1]}
        for name, cell in zip(SMI_FIELDS[2:], cells[2:]):
            try:
                row[name] = float(cell)
            except ValueError:
                row[name] = None
        rows.append(row)
    if not rows:
        raise Unusable(f"the nvidia-smi log {path} has no sample line of {len(SMI_FIELDS)} fields "
                       f"(first line: {lines[0][:120] if lines else 'none'!r})")
    return rows


def check_health(rank: dict, smi: list[dict[str, Any]]) -> Result:
    health = rank.get("gpu_health")
    if not isinstance(health, dict):
        raise Unusable("the rank file has no gpu_health (NVML sampling off or an older writer)")
    devices = health.get("devices", [])
    lines = [f"gpu_health status {health.get('status')!r}, interval {health.get('interval_ms')} ms, "
             f"{len(devices)} device(s); nvidia-smi: {len(smi)} samples"]
    failures = []
    if health.get("status") != "sampled" or not devices:
        failures.append(f"NVML was not sampled (status {health.get('status')!r})")
        return _verdict(lines, failures, "GPU health (NVML) against nvidia-smi")
    dev = devices[0]
    mine = [r for r in smi if _pci(r["pci.bus_id"]) == _pci(str(dev.get("pci_bus_id", "")))]
    lines.append(f"device {dev.get('cuda_device')}: pci_bus_id {dev.get('pci_bus_id')!r}, "
                 f"{len(mine)} nvidia-smi samples of it")
    if not mine:
        failures.append(f"nvidia-smi sampled no GPU with PCI bus id {dev.get('pci_bus_id')!r} "
                        f"(it saw {sorted({r['pci.bus_id'] for r in smi})})")
        return _verdict(lines, failures, "GPU health (NVML) against nvidia-smi")
    run = dev.get("run", {})

    def seen(field: str) -> list[float]:
        return [r[field] for r in mine if r.get(field) is not None]

    def median(v: list[float]) -> float:
        v = sorted(v)
        return (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2

    def in_range(what: str, value: float | None, field: str, rel: float, absolute: float,
                 median_pct: float | None = None) -> None:
        """Inside what nvidia-smi saw (widened by rel and absolute); a median also within
        median_pct of nvidia-smi's median (the two sample the same run at other instants)."""
        v = seen(field)
        if value is None or not v:
            lines.append(f"{what}: traintime {value}, nvidia-smi {'n/a' if not v else median(v)}: "
                         "not judged")
            return
        lo, hi, mid = min(v), max(v), median(v)
        ok = lo - abs(lo) * rel - absolute <= value <= hi + abs(hi) * rel + absolute
        near = median_pct is None or abs(value - mid) <= abs(mid) * median_pct / 100
        lines.append(f"{what}: traintime {value:g}, nvidia-smi median {mid:g} "
                     f"(min {lo:g}, max {hi:g}) {'ok' if ok and near else 'DIFFERS'}")
        if not ok:
            failures.append(f"{what} {value:g} is outside what nvidia-smi saw ({lo:g}..{hi:g})")
        elif not near:
            failures.append(f"{what} {value:g} is more than {median_pct:g} % from nvidia-smi's "
                            f"median {mid:g}")

    def exact(what: str, value: float | None, field: str, scale: float, tol: float) -> None:
        v = seen(field)
        if value is None or not v:
            failures.append(f"{what}: traintime {value}, nvidia-smi {v[:1] or 'n/a'}: missing")
            return
        ref = max(v) * scale
        ok = abs(value - ref) <= tol
        lines.append(f"{what}: traintime {value:g}, nvidia-smi {ref:g} {'ok' if ok else 'DIFFERS'}")
        if not ok:
            failures.append(f"{what}: traintime {value:g}, nvidia-smi {ref:g}")

    if int(run.get("samples", 0)) <= 0:
        failures.append("gpu_health.devices[0].run has no sample")
    mem = run.get("memory", {})
    exact("memory total (MiB)", mem.get("total_bytes", 0) / 2**20 if mem.get("total_bytes") else None,
          "memory.total", 1.0, 1.0)
    exact("power limit (W)", run.get("power_w", {}).get("limit"), "power.limit", 1.0, 1.0)
    in_range("SM clock median (MHz)", run.get("sm_clock_mhz", {}).get("median"), "clocks.sm", 0.02, 0,
             median_pct=15)
    in_range("SM clock min (MHz)", run.get("sm_clock_mhz", {}).get("min"), "clocks.sm", 0.02, 0)
    in_range("memory clock median (MHz)", run.get("mem_clock_mhz", {}).get("median"), "clocks.mem",
             0.02, 0)
    in_range("power median (W)", run.get("power_w", {}).get("median"), "power.draw", 0.05, 5)
    in_range("temperature max (C)", run.get("temperature_c", {}).get("max"), "temperature.gpu", 0, 2)
    pcie = run.get("pcie", {})
    in_range("PCIe generation", pcie.get("gen") or None, "pcie.link.gen.current", 0, 0)
    in_range("PCIe width", pcie.get("width") or None, "pcie.link.width.current", 0, 0)
    used = mem.get("used_bytes_max")
    in_range("memory used max (MiB)", used / 2**20 if used else None, "memory.used", 0.05, 64)
    lines.append(f"clock-event reasons (traintime): {run.get('clock_event_reasons', [])}")
    return _verdict(lines, failures, "GPU health (NVML) against nvidia-smi")


def check_abort(rank: dict, status: int, steps: int) -> Result:
    count = int(rank.get("steps", {}).get("count", 0))
    gpu = sum(int(v.get("count", 0)) for v in rank.get("categories", {}).values()
              if isinstance(v, dict))
    detail = rank.get("steps", {}).get("detail", [])
    with_gpu = sum(1 for d in detail if d.get("totals", {}).get("gpu_busy_ns", 0) > 0)
    lines = [f"process status {status} (134 is death by SIGABRT), exit_reason "
             f"{rank.get('exit_reason')!r}, snapshot {rank.get('snapshot')}",
             f"steps.count {count} (the program called tt_step {steps} times), GPU activities {gpu}, "
             f"steps with GPU work {with_gpu}, gpu_records_complete {rank.get('gpu_records_complete')}"]
    failures = []
    if status != 134:
        failures.append(f"the process ended with status {status}, not by SIGABRT (134): traintime "
                        "changed how it died")
    if rank.get("exit_reason") != "signal SIGABRT" or rank.get("snapshot"):
        failures.append(f"the rank file is not the final file of an abort (exit_reason "
                        f"{rank.get('exit_reason')!r})")
    if count < steps:
        failures.append(f"steps.count {count} < the {steps} tt_step calls made before abort()")
    if rank.get("gpu_records_complete") is not True:
        failures.append("the signal-time flush of CUPTI's records did not finish (gpu_records_complete "
                        f"{rank.get('gpu_records_complete')})")
    if gpu == 0:
        failures.append("no GPU activity in the file written at abort")
    elif with_gpu * 3 < steps:
        failures.append(f"only {with_gpu} of the {steps} steps have GPU work in the file written at "
                        "abort: records CUPTI had delivered were lost")
    return _verdict(lines, failures, "abort() with work in flight")


def check_plugin(rank: dict) -> Result:
    c = rank.get("modules", {}).get("nccl", {}).get("counters", {})
    keys = ("profiler_plugin_inits", "profiler_plugin_version", "profiler_plugin_nccl_version",
            "profiler_plugin_kernel_ch", "profiler_plugin_coll_api_events", "profiler_plugin_counted_calls",
            "profiler_plugin_chained_version")
    lines = ["nccl counters: " + ", ".join(f"{k} {c.get(k, 'absent')}" for k in keys)]
    failures = []
    if int(c.get("profiler_plugin_inits", 0)) < 1:
        failures.append("NCCL never initialised traintime's profiler plugin (no profiler_plugin_inits): "
                        "the STATIC_PLUGIN registration did not reach this NCCL")
    elif int(c.get("profiler_plugin_version", 0)) not in range(3, 8):
        failures.append(f"plugin API version {c.get('profiler_plugin_version')} is not one traintime offers (3 ... 7)")
    if c.get("profiler_plugin_inits") and int(c.get("profiler_plugin_nccl_version", 0)) < 22300:
        failures.append(f"NCCL's version read as {c.get('profiler_plugin_nccl_version')}: ncclGetVersion was "
                        "not found, though a NCCL with the plugin API (>= 2.23) called the plugin")
    if c.get("profiler_plugin_inits") and int(c.get("profiler_plugin_coll_api_events", 0)) == 0:
        failures.append("no CollApi event arrived although collectives were called")
    if int(c.get("profiler_plugin_counted_calls", 0)) != 0:
        failures.append(f"{c.get('profiler_plugin_counted_calls')} call(s) counted from plugin events although "
                        "the wrappers saw every call: calls counted twice")
    return _verdict(lines, failures, "NCCL profiler plugin on real NCCL")


def _read_metrics(path: str) -> list[dict]:
    try:
        with open(path, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    except OSError as e:
        raise Unusable(f"cannot read the metrics log {path}: {e.strerror}") from e
    except json.JSONDecodeError as e:
        raise Unusable(f"the metrics log {path} is not JSON lines: {e}") from e


def run(args: argparse.Namespace) -> Result:
    rank = _rank(args.rank_file)
    if args.check == "context":
        return check_context(rank)
    if args.check == "profiler":
        return check_profiler(rank, load_json(args.trace, "torch.profiler trace"))
    if args.check == "graphs":
        return check_graphs(rank, load_json(args.events, "events file"), args.tolerance_pct)
    if args.check == "exit":
        return check_exit(rank, load_json(args.expect, "expectation file"))
    if args.check == "memory":
        return check_memory(rank, load_json(args.events, "events file"), args.slack_mib, args.slack_pct)
    if args.check == "health":
        return check_health(rank, _read_smi(args.smi_log))
    if args.check == "abort":
        return check_abort(rank, args.status, args.steps)
    if args.check == "plugin":
        return check_plugin(rank)
    return check_live(rank, _read_metrics(args.metrics_log))


def self_test() -> int:
    """Hand-made rank files and side files, each with the exit status it must give."""
    plugin_ok = {"profiler_plugin_inits": 1, "profiler_plugin_version": 7, "profiler_plugin_nccl_version": 23203,
                 "profiler_plugin_coll_api_events": 40, "profiler_plugin_counted_calls": 0}

    def rank(**over: Any) -> dict:
        r = {"schema": "traintime/1", "gpu_capture": "cupti", "gpu_capture_reason": "CUPTI 130000",
             "exit_reason": "exit", "snapshot": False, "gpu_records_complete": True,
             "dropped_records": 0, "warnings": [],
             "categories": {"forward": {"count": 10}, "unattributed": {"count": 0}},
             "capture_stats": {"records": 10, "launch_callbacks": 20, "buffers": 1,
                               "correlation_ids_per_callback": 3.5, "joined": 10,
                               "graph_node_context": 4, "missing_context": 0, "overwritten": 0},
             "regions": [{"path": "forward", "kernels": 6, "gpu_span_ns": 6_000_000},
                         {"path": "backward", "kernels": 4, "gpu_span_ns": 3_950_000},
                         {"path": "replay", "kernels": 0, "gpu_busy_ns": 0},
                         {"path": "startup", "kernels": 2000, "gpu_busy_ns": 1}]}
        for k, v in over.items():
            r[k] = v
        return r

    lost = rank(capture_stats={**rank()["capture_stats"], "missing_context": 3})
    stray = rank(categories={"forward": {"count": 10}, "unattributed": {"count": 2}})
    vmm = {"counters": {"memory_vmm_allocations": 12, "memory_vmm_records": 0}}
    vmm_events = {"memory": {"max_memory_reserved": 1000 * 2**20,
                             "allocator_conf": "expandable_segments:True"}}
    graph_events = {"graph_replay": {"captured_paths": ["forward", "backward"], "replays": 5,
                                     "total_ms": 10.0}}
    def health(pci: str = "0000:19:00.0", limit: float = 700.0, sm: float = 1755.0,
               temp: int = 41) -> dict:
        return {"status": "sampled", "interval_ms": 100, "devices": [{
            "cuda_device": 0, "pci_bus_id": pci, "run": {
                "samples": 40, "sm_clock_mhz": {"median": sm, "min": 1755},
                "mem_clock_mhz": {"median": 3201}, "power_w": {"median": 420.5, "limit": limit},
                "temperature_c": {"max": temp}, "pcie": {"gen": 5, "width": 16},
                "memory": {"used_bytes_max": 9000 * 2**20, "total_bytes": 143771 * 2**20},
                "clock_event_reasons": ["sw_power_cap"]}}]}

    def abort_steps(count: int, with_gpu: int) -> dict:
        return {"count": count, "detail": [{"index": i, "totals": {"gpu_busy_ns": 1000 if i < with_gpu else 0}}
                                           for i in range(count)]}

    def smi_rows() -> list[dict[str, Any]]:
        text = ", ".join(SMI_FIELDS) + "\n" + "".join(
            f"2026/11/28 00:00:0{i}.000, 00000000:19:00.0, {sm}, 3201, {pw}, 700.00, {t}, 5, 16, "
            f"{used}, 143771\n" for i, (sm, pw, t, used) in
            enumerate([(345, 80.1, 35, 500), (1755, 300.0, 38, 8000), (1980, 650.2, 41, 9010)]))
        text += "2026/11/28 00:00:09.000, 00000000:1A:00.0, 1200, 3201, 70, 700, 30, 5, 16, 0, 143771\n"
        with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
            f.write(text)
        try:
            return _read_smi(f.name)
        finally:
            Path(f.name).unlink()

    cases: list[tuple[str, Callable[[], Result], int, str]] = [
        ("context: healthy run passes", lambda: check_context(rank()), EXIT_OK, "3.50"),
        ("context: a lost launch context fails", lambda: check_context(lost), EXIT_DISAGREE,
         "found no launch context"),
        ("context: unattributed work fails", lambda: check_context(stray), EXIT_DISAGREE,
         "unattributed"),
        ("profiler: kernels in the trace and CUPTI shared passes",
         lambda: check_profiler(rank(gpu_capture_reason="CUPTI 130000; CUPTI shared with another "
                                     "in-process client (e.g. torch.profiler): 1 registration(s)"),
                                {"traceEvents": [{"cat": "kernel"}]}), EXIT_OK, "1 GPU kernels"),
        ("profiler: a trace without kernels fails",
         lambda: check_profiler(rank(gpu_capture_reason="CUPTI shared with another in-process client"),
                                {"traceEvents": [{"cat": "cpu_op"}]}), EXIT_DISAGREE, "no GPU kernel"),
        ("profiler: a CUPTI warning that does not name the profiler does not count",
         lambda: check_profiler(rank(warnings=["3 CUPTI buffer requests refused"]),
                                {"traceEvents": [{"cat": "kernel"}]}), EXIT_DISAGREE, "says nothing"),
        ("profiler: a warning naming the profiler passes",
         lambda: check_profiler(rank(warnings=["libx.so contains a statically linked CUPTI that "
                                               "traintime cannot share: a profiler using it in this "
                                               "process may disturb GPU capture"]),
                                {"traceEvents": [{"cat": "kernel"}]}), EXIT_OK, "traintime warning"),
        ("profiler: traintime silent about the profiler fails",
         lambda: check_profiler(rank(), {"traceEvents": [{"cat": "kernel"}]}), EXIT_DISAGREE,
         "says nothing"),
        ("graphs: captured regions hold the replay (-0.50 %) passes",
         lambda: check_graphs(rank(), graph_events, 1.0), EXIT_OK, "-0.50 %"),
        ("graphs: kernels in the replay region fail",
         lambda: check_graphs(rank(regions=[{"path": "forward", "kernels": 6, "gpu_span_ns": 6e6},
                                            {"path": "backward", "kernels": 4, "gpu_span_ns": 4e6},
                                            {"path": "replay", "kernels": 3}]), graph_events, 1.0),
         EXIT_DISAGREE, "graph launch instead"),
        ("graphs: 2 % short of the events fails",
         lambda: check_graphs(rank(regions=[{"path": "forward", "kernels": 6, "gpu_span_ns": 5.8e6},
                                            {"path": "backward", "kernels": 4, "gpu_span_ns": 4e6}]),
                              graph_events, 1.0), EXIT_DISAGREE, "-2.00 %"),
        ("exit: every launched kernel in the open region passes",
         lambda: check_exit(rank(), {"kernels_launched": 2000}), EXIT_OK, "2000 kernels"),
        ("exit: kernels lost at exit fail",
         lambda: check_exit(rank(), {"kernels_launched": 2500}), EXIT_DISAGREE, "lost"),
        ("exit: a snapshot instead of the exit file fails",
         lambda: check_exit(rank(exit_reason="snapshot", snapshot=True), {"kernels_launched": 1}),
         EXIT_DISAGREE, "normal exit"),
        ("live: steps published during the run, none late, passes",
         lambda: check_live(rank(), [{"traintime/gpu_step": -1}, {"traintime/gpu_step": 0},
                                     {"traintime/gpu_step": 2, "traintime/gpu_late_records": 0}]),
         EXIT_OK, "0..0"),
        ("memory: the reserved memory and a little more passes",
         lambda: check_memory(rank(memory={"peak_bytes": 1030 * 2**20}, modules={"cupti": vmm}),
                              vmm_events, 64, 5), EXIT_OK, "does not make memory records"),
        ("memory: VMM memory missed fails",
         lambda: check_memory(rank(memory={"peak_bytes": 40 * 2**20}, modules={"cupti": vmm}),
                              vmm_events, 64, 5), EXIT_DISAGREE, "VMM memory was missed"),
        ("memory: VMM memory counted twice fails",
         lambda: check_memory(rank(memory={"peak_bytes": 2000 * 2**20},
                                   modules={"cupti": {"counters": {"memory_vmm_allocations": 12,
                                                                   "memory_vmm_records": 24}}}),
                              vmm_events, 64, 5), EXIT_DISAGREE, "counted twice"),
        ("memory: no cuMemCreate seen fails",
         lambda: check_memory(rank(memory={"peak_bytes": 1000 * 2**20}), vmm_events, 64, 5),
         EXIT_DISAGREE, "no cuMemCreate"),
        ("health: NVML and nvidia-smi agree",
         lambda: check_health(rank(gpu_health=health()), smi_rows()), EXIT_OK, "max 1980) ok"),
        ("health: another GPU's samples do not count",
         lambda: check_health(rank(gpu_health=health(pci="0000:3B:00.0")), smi_rows()),
         EXIT_DISAGREE, "no GPU with PCI bus id"),
        ("health: a power limit that differs fails",
         lambda: check_health(rank(gpu_health=health(limit=500.0)), smi_rows()), EXIT_DISAGREE,
         "power limit (W): traintime 500"),
        ("health: an SM clock nvidia-smi never saw fails",
         lambda: check_health(rank(gpu_health=health(sm=1200.0)), smi_rows()), EXIT_DISAGREE,
         "SM clock median (MHz) 1200 is more than 15 %"),
        ("health: a temperature above any nvidia-smi saw fails",
         lambda: check_health(rank(gpu_health=health(temp=60)), smi_rows()), EXIT_DISAGREE,
         "temperature max (C) 60 is outside"),
        ("health: NVML unavailable fails",
         lambda: check_health(rank(gpu_health={"status": "unavailable: libnvidia-ml.so.1 not found",
                                               "devices": []}), smi_rows()), EXIT_DISAGREE,
         "NVML was not sampled"),
        ("abort: died by SIGABRT with its final file passes",
         lambda: check_abort(rank(exit_reason="signal SIGABRT", steps=abort_steps(8, 5)), 134, 8),
         EXIT_OK, "steps.count 8"),
        ("abort: GPU work of too few steps fails",
         lambda: check_abort(rank(exit_reason="signal SIGABRT", steps=abort_steps(8, 2)), 134, 8),
         EXIT_DISAGREE, "only 2 of the 8 steps"),
        ("abort: a normal exit status fails (traintime swallowed the abort)",
         lambda: check_abort(rank(exit_reason="signal SIGABRT", steps=abort_steps(8, 8)), 0, 8),
         EXIT_DISAGREE, "not by SIGABRT"),
        ("abort: the snapshot, not the final file, fails",
         lambda: check_abort(rank(exit_reason="killed", steps=abort_steps(8, 8)), 134, 8),
         EXIT_DISAGREE, "not the final file"),
        ("abort: a signal-time flush that did not finish fails",
         lambda: check_abort(rank(exit_reason="signal SIGABRT", steps=abort_steps(8, 8),
                                  gpu_records_complete=False), 134, 8),
         EXIT_DISAGREE, "did not finish"),
        ("abort: steps lost fails",
         lambda: check_abort(rank(exit_reason="signal SIGABRT", steps=abort_steps(5, 5)), 134, 8),
         EXIT_DISAGREE, "steps.count 5 < the 8"),
        ("live: late records fail",
         lambda: check_live(rank(), [{"traintime/gpu_step": 1},
                                     {"traintime/gpu_step": 2, "traintime/gpu_late_records": 7}]),
         EXIT_DISAGREE, "7 records arrived"),
        ("live: nothing published mid-run fails",
         lambda: check_live(rank(), [{"traintime/gpu_step": -1}, {"traintime/gpu_step": 3}]),
         EXIT_DISAGREE, "no GPU step was published"),
        ("plugin: registered, initialised, API events, nothing counted twice passes",
         lambda: check_plugin(rank(modules={"nccl": {"counters": plugin_ok}})), EXIT_OK, "profiler_plugin_inits 1"),
        ("plugin: never initialised fails",
         lambda: check_plugin(rank(modules={"nccl": {"counters": {"missing_real": 0}}})), EXIT_DISAGREE,
         "never initialised"),
        ("plugin: calls counted twice fail",
         lambda: check_plugin(rank(modules={"nccl": {"counters": {**plugin_ok, "profiler_plugin_counted_calls": 4}}})),
         EXIT_DISAGREE, "counted twice"),
    ]
    failures = []
    for name, fn, want, needle in cases:
        code, lines = fn()
        text = "\n".join(lines)
        if code != want or needle not in text:
            failures.append(f"{name}: exit {code} (wanted {want}), {needle!r} in output: "
                            f"{needle in text}\n{text}")
        else:
            print(f"ok: {name}")
    # Unusable input through the command line: exit 2 with one line.
    with tempfile.TemporaryDirectory() as tmp:
        r = Path(tmp) / "rank.json"
        r.write_text(json.dumps(rank(capture_stats=None)))
        code = main(["context", "--rank-file", str(r)])
        if code != EXIT_UNUSABLE:
            failures.append(f"context without capture_stats: exit {code}, wanted {EXIT_UNUSABLE}")
        else:
            print("ok: a rank file without capture_stats is unusable input")
        code = main(["live", "--rank-file", str(r), "--metrics-log", str(Path(tmp) / "none")])
        if code != EXIT_UNUSABLE:
            failures.append(f"missing metrics log: exit {code}, wanted {EXIT_UNUSABLE}")
        else:
            print("ok: a missing metrics log is unusable input")
    for f in failures:
        print("FAIL: " + f)
    print("self-test: " + ("passed" if not failures else f"{len(failures)} failed"))
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--self-test", action="store_true", help="check this script on hand-made input")
    sub = ap.add_subparsers(dest="check")
    for name, extra in (("context", []), ("profiler", ["--trace"]), ("graphs", ["--events"]),
                        ("exit", ["--expect"]), ("live", ["--metrics-log"]), ("memory", ["--events"]),
                        ("health", ["--smi-log"]), ("abort", ["--status", "--steps"]), ("plugin", [])):
        p = sub.add_parser(name)
        if name == "health":
            p.add_argument("--print-query", action="store_true",
                           help="print the nvidia-smi --query-gpu fields this check reads, and stop")
        p.add_argument("--rank-file", required=name != "health")
        for opt in extra:
            p.add_argument(opt, required=name != "health",
                           type=int if name == "abort" else str)
        if name == "graphs":
            p.add_argument("--tolerance-pct", type=float, default=1.0)
        if name == "memory":
            # Beyond the caching allocator: cuBLAS/cuDNN workspaces outside it, CUDA graphs' pools.
            p.add_argument("--slack-mib", type=float, default=256.0)
            p.add_argument("--slack-pct", type=float, default=5.0)
    a = ap.parse_args(argv)
    if a.self_test:
        return self_test()
    if not a.check:
        ap.error("name a check (context, profiler, graphs, exit, live, memory, health, abort, plugin) or "
                 "--self-test")
    if a.check == "health" and a.print_query:
        print(",".join(SMI_FIELDS))
        return EXIT_OK
    if a.check == "health" and not (a.rank_file and a.smi_log):
        ap.error("health needs --rank-file and --smi-log (or --print-query)")
    try:
        code, lines = run(a)
    except Unusable as e:
        print(f"check_gpu_run {a.check}: {e}", file=sys.stderr)
        return EXIT_UNUSABLE
    print("\n".join(lines))
    return code


if __name__ == "__main__":
    sys.exit(main())
