"""End-to-end GPU capture on the SIMULATED GPU (simgpu): sim_train under LD_PRELOAD, one pytest
function (and so one CTest test) per mode.

Default expectations, for every rank: the rank file equals sim_train's --truth exactly
(tests/sim/compare_truth.py: categories, steps, comm, memcpy, regions); gpu_capture is "cupti";
dropped_records is 0; exactly one libcupti is mapped in the process (a maps probe preloaded
beside libtraintime.so lists them at exit); every communicator id is 16 hex digits and the same
on every rank. The modes change that as each test says.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from testlib import SOURCE_DIR, Checks, clean_env, load_json, load_module

compare_truth = load_module(SOURCE_DIR / "tests" / "sim" / "compare_truth.py", "compare_truth")
reference = load_module(SOURCE_DIR / "tools" / "reference_breakdown.py", "reference_breakdown")


@dataclass
class Mode:
    np: int = 1
    steps: int = 20
    graphs: bool = False
    nvtx: bool = False
    stray_work: bool = False     # sim_train --stray-work: unattributed work, a partial final step
    trace: bool = False          # also: reference_breakdown.py agrees with the TRAINTIME_TRACE dump
    drop_every: int = 0          # simgpu drops every K-th record
    refuse: bool = False         # simgpu refuses the subscription
    wheel_cupti: bool = False    # a second libcupti copy is loaded by path first, as wheels do
    cupti_off: bool = False      # TRAINTIME_CUPTI=0
    foreign_injection: bool = False  # CUDA_INJECTION64_PATH names another library
    # TRAINTIME_CUPTI_LIB: "sim" names simgpu's libcupti; "unset" leaves it to the loader's search
    # path (LD_LIBRARY_PATH holds simgpu's); "missing" names a file that does not exist;
    # "not-cupti" names a library that loads but is no CUPTI (the maps probe).
    cupti_lib: str = "sim"
    cupti_api: int = 0           # SIMGPU_CUPTI_API_VERSION: simgpu reports and writes that release's layouts
    tiny_pool: bool = False      # one 1 MiB activity buffer: requests are refused while it is out
    record_before_cuda: bool = False  # sim_train opens a region before CUDA initialises
    refuse_kind: int = 0         # simgpu refuses to enable this activity kind (CUpti_ActivityKind)
    # SIMGPU_DRIVER_LACKS: the callbacks (name prefixes) a CUPTI newer than the driver names but
    # cannot enable; LAUNCHES lacks every kernel-launch callback.
    driver_lacks: str = ""
    # sim_train --profiler-window: a second in-process CUPTI client that uses CUPTI as
    # torch.profiler's Kineto does runs over these step windows; each window must see every kernel
    # the simulated GPU ran inside it, get back no buffer it did not allocate, and the rank file
    # must still equal the truth.
    profiler_windows: tuple = ()
    teardown_cupti: bool = False  # TEARDOWN_CUPTI=1: the profiler tears CUPTI down at each stop
    static_cupti_host: bool = False  # a library with CUPTI linked in statically is preloaded too
    untraced_ids: int = 0        # SIMGPU_UNTRACED_IDS: ids run ahead of records
    buffers_when_full: bool = False  # SIMGPU_BUFFERS_WHEN_FULL: buffers arrive only when full
    no_tool_threads: bool = False  # every thread libtraintime.so starts fails (EAGAIN)
    fork_workers: int = 0        # sim_train --fork-workers: DataLoader-like children after CUDA init
    workers_record: bool = False  # ... that each open a region of their own
    alloc_per_step: bool = False  # sim_train --alloc-per-step: device memory per step in the truth
    vmm: bool = False            # ... and --vmm: CUDA VMM memory (cuMemCreate/cuMemMap) too
    vmm_records: str = ""        # SIMGPU_VMM_MEMORY_RECORDS: CUPTI also reports VMM memory (create, map)
    step_sleep_us: int = 0       # sim_train --step-sleep-us: real time per step
    snapshot_sec: int = 0        # TRAINTIME_SNAPSHOT_SEC: mid-run summaries while the steps run
    # sim_train --no-step-marker: no tt_step, no NVTX "step" range; the steps traintime finds from
    # the launch sequence must be the truth's iterations, with steps.source "detected".
    no_marker: bool = False
    layers: int = 0              # sim_train --layers (0: its default)
    bucket_layers: int = 0       # sim_train --bucket-layers (0: its default)
    slowdown: str = ""           # SIMGPU_SLOWDOWN=RANK:FACTOR: a straggler
    train_args: tuple = ()       # more sim_train options (--accumulate, --eval-every, --pause-at)
    # TRAINTIME_STEP_ANCHOR: steps end at each launch it names; the file must say it was used.
    steps_anchor: str = ""


MEMORY2 = 49  # CUPTI_ACTIVITY_KIND_MEMORY2
# Every kernel- and graph-launch callback's name starts with one of these (callback_selection.cpp).
LAUNCHES = "cudaLaunch,__cudaLaunch,cuLaunch,cudaGraphLaunch,cuGraphLaunch"


def run_capture(build: Path, work: Path, mode: Mode) -> None:
    sim = build / "sim"
    probe_dir = work / "maps"
    probe_dir.mkdir()
    env = clean_env({
        "LD_LIBRARY_PATH": str(sim),
        "LD_PRELOAD": f"{build / 'lib' / 'libtraintime.so'}:{build / 'lib' / 'libtt_maps_probe.so'}",
        "TRAINTIME_OUTPUT": str(work / "out"),
        "TT_PROBE_DIR": str(probe_dir),
    })
    if mode.cupti_lib == "sim":
        env["TRAINTIME_CUPTI_LIB"] = str(sim / "libcupti.so.13")
    elif mode.cupti_lib == "missing":
        env["TRAINTIME_CUPTI_LIB"] = str(work / "no-such-dir" / "libcupti.so.13")
    elif mode.cupti_lib == "not-cupti":
        env["TRAINTIME_CUPTI_LIB"] = str(build / "lib" / "libtt_maps_probe.so")
    wheel_copy = None
    if mode.wheel_cupti:
        wheel_dir = work / "site-packages" / "nvidia" / "cuda_cupti" / "lib"
        wheel_dir.mkdir(parents=True)
        wheel_copy = wheel_dir / "libcupti.so.13"
        shutil.copy(sim / "libcupti.so.13", wheel_copy)
        env["TT_PROBE_PRELOAD_CUPTI"] = str(wheel_copy)
    if mode.trace:
        env["TRAINTIME_TRACE"] = "1"
    if mode.drop_every:
        env["SIMGPU_DROP_EVERY"] = str(mode.drop_every)
    if mode.refuse:
        env["SIMGPU_REFUSE_SUBSCRIBE"] = "1"
    if mode.cupti_off:
        env["TRAINTIME_CUPTI"] = "0"
    if mode.cupti_api:
        env["SIMGPU_CUPTI_API_VERSION"] = str(mode.cupti_api)
    if mode.untraced_ids:
        env["SIMGPU_UNTRACED_IDS"] = str(mode.untraced_ids)
    if mode.buffers_when_full:
        env["SIMGPU_BUFFERS_WHEN_FULL"] = "1"
    if mode.driver_lacks:
        env["SIMGPU_DRIVER_LACKS"] = LAUNCHES if mode.driver_lacks == "LAUNCHES" else mode.driver_lacks
    if mode.refuse_kind:
        env["SIMGPU_REFUSE_ACTIVITY_KIND"] = str(mode.refuse_kind)
        env["SIMGPU_ENABLED_KINDS_AT_EXIT"] = str(work / "kinds-at-exit.txt")
    if mode.fork_workers and mode.workers_record and "ASAN_OPTIONS" in env:
        # The same runtime limitation beyond LeakSanitizer: GCC 12's ASan allocator takes no lock
        # around fork(), so a size class another parent thread was refilling at fork() (e.g.
        # traintime's hang watchdog building its summary string) stays locked in the child, and
        # the recording child's first allocation at exit (writing its rank file) waits for ever
        # (seen in 2 of 8 runs: every child thread in FutexWait under
        # SizeClassAllocator64::GetFromAllocator). glibc's malloc locks its arenas around fork(),
        # so real programs are not affected; this mode runs under TSan and without sanitizers.
        pytest.skip("ASan's allocator is not fork-safe (GCC 12): a recording forked child can "
                    "deadlock in the runtime; covered by the TSan and unsanitized runs")
    if mode.fork_workers and "ASAN_OPTIONS" in env:
        # GCC 12's LeakSanitizer hangs in a child forked from a multi-threaded parent: its exit
        # check locks every allocator size class, and one that another parent thread held at
        # fork() stays locked in the child for ever (seen under load: FutexWait in
        # SizeClassAllocator64::ForceLock under __lsan::DoLeakCheck, after the child's own exit
        # handlers, traintime's included, had run). The runtime does not lock its allocator around
        # fork(); glibc's malloc does, so real programs are not affected. ASan's address checks
        # stay on; the parent's leaks are checked by every other capture test.
        env["ASAN_OPTIONS"] += ":detect_leaks=0"
    if mode.teardown_cupti:
        env["TEARDOWN_CUPTI"] = "1"
    if mode.vmm_records:
        env["SIMGPU_VMM_MEMORY_RECORDS"] = mode.vmm_records
    if mode.snapshot_sec:
        env["TRAINTIME_SNAPSHOT_SEC"] = str(mode.snapshot_sec)
    if mode.slowdown:
        env["SIMGPU_SLOWDOWN"] = mode.slowdown
    if mode.steps_anchor:
        env["TRAINTIME_STEP_ANCHOR"] = mode.steps_anchor
    if mode.tiny_pool:
        env["TRAINTIME_BUFFER_COUNT"] = "1"
        env["TRAINTIME_BUFFER_MB"] = "1"
    if mode.static_cupti_host:
        env["LD_PRELOAD"] += f":{build / 'lib' / 'libtt_static_cupti_host.so'}"
    if mode.no_tool_threads:
        env["LD_PRELOAD"] += f":{build / 'lib' / 'libtt_fail_tool_threads.so'}"
    if mode.foreign_injection:
        # Any library that is not traintime: the maps probe exports no InitializeInjection.
        env["CUDA_INJECTION64_PATH"] = str(build / "lib" / "libtt_maps_probe.so")

    cmd = [str(build / "bin" / "sim_train"), "--steps", str(mode.steps), "--truth", str(work / "truth-%r.json")]
    cmd += ["--graphs"] * mode.graphs + ["--nvtx"] * mode.nvtx + ["--stray-work"] * mode.stray_work
    cmd += ["--record-before-cuda"] * mode.record_before_cuda + ["--alloc-per-step"] * mode.alloc_per_step
    cmd += ["--vmm"] * mode.vmm + ["--no-step-marker"] * mode.no_marker
    if mode.layers:
        cmd += ["--layers", str(mode.layers)]
    if mode.bucket_layers:
        cmd += ["--bucket-layers", str(mode.bucket_layers)]
    cmd += list(mode.train_args)
    if mode.step_sleep_us:
        cmd += ["--step-sleep-us", str(mode.step_sleep_us)]
    if mode.fork_workers:
        cmd += ["--fork-workers", str(mode.fork_workers)] + ["--workers-record"] * mode.workers_record
    if mode.profiler_windows:
        cmd += ["--profiler-client", str(sim / "libsimgpu_profiler_client.so")]
        for window in mode.profiler_windows:
            cmd += ["--profiler-window", window]
    if mode.np > 1:
        passed = ["LD_LIBRARY_PATH", "LD_PRELOAD", "TRAINTIME_CUPTI_LIB", "TRAINTIME_OUTPUT",
                  "TT_PROBE_DIR", "TT_PROBE_PRELOAD_CUPTI", "TRAINTIME_TRACE", "SIMGPU_DROP_EVERY",
                  "SIMGPU_REFUSE_SUBSCRIBE", "TRAINTIME_CUPTI", "CUDA_INJECTION64_PATH",
                  "SIMGPU_CUPTI_API_VERSION", "TRAINTIME_BUFFER_COUNT", "TRAINTIME_BUFFER_MB",
                  "SIMGPU_UNTRACED_IDS", "SIMGPU_BUFFERS_WHEN_FULL", "SIMGPU_VMM_MEMORY_RECORDS",
                  "SIMGPU_SLOWDOWN", "TRAINTIME_STEPS", "TRAINTIME_STEP_ANCHOR"]
        mpi = ["mpirun", "-np", str(mode.np), "--oversubscribe"]
        for var in passed:
            if var in env:
                mpi += ["-x", var]
        cmd = mpi + cmd
    run = subprocess.run(cmd, env=env, cwd=work, capture_output=True, text=True, timeout=240)
    aux = sorted((work / "out").glob("rank-*.pid*.json")) if (work / "out").exists() else []
    assert run.returncode == 0, f"{' '.join(cmd)} exited {run.returncode}\n{run.stdout}\n{run.stderr}"

    c = Checks()
    if mode.wheel_cupti:
        c.check("TRAINTIME_CUPTI_LIB=" in run.stderr and "is not used" in run.stderr,
                f"no warning that the loaded libcupti overrides TRAINTIME_CUPTI_LIB: {run.stderr!r}")
    if mode.cupti_lib == "missing":
        c.check("cannot be loaded" in run.stderr, f"no warning about TRAINTIME_CUPTI_LIB: {run.stderr!r}")
    if mode.cupti_lib == "not-cupti":
        # One warning: the library named, why, and the one used instead (simgpu's, found on the
        # loader's search path); it stays mapped (preloaded here), and the warning says so.
        told = [x for x in run.stderr.splitlines() if "TRAINTIME_CUPTI_LIB=" in x]
        used = os.path.realpath(sim / "libcupti.so.13")
        c.check(len(told) == 1 and "libtt_maps_probe.so cannot be used" in told[0]
                and "lacks cuptiGetVersion" in told[0] and f"from {used} instead" in told[0]
                and "stays mapped" in told[0],
                f"not one clear warning about TRAINTIME_CUPTI_LIB: {told!r}")
    # The file used, as gpu_capture_reason names it: the wheel's copy, else simgpu's.
    expected_cupti = os.path.realpath(wheel_copy or (sim / "libcupti.so.13"))
    for rank in range(mode.np):
        rank_path = work / "out" / f"rank-{rank:05d}.json"
        if not c.check(rank_path.exists(), f"rank {rank}: no rank file {rank_path}"):
            continue
        rf, truth = load_json(rank_path), load_json(work / f"truth-{rank}.json")
        where = f"rank {rank}"
        steps = rf.get("steps", {}).get("count")
        if mode.no_marker:
            # Several ranks: steps numbered by their first collective's NCCL sequence number, so
            # step k is the same step on every rank (compare_truth holds each rank's numbers to the
            # truth's); one rank has no collective and numbers them alone, and says so.
            numbering = rf.get("steps", {}).get("detection", {}).get("numbering")
            want = "nccl" if mode.np > 1 and not mode.graphs else "local"
            c.check(numbering == want, f"{where}: steps.detection.numbering {numbering!r}, want {want!r}")
            anchor = rf.get("steps", {}).get("detection", {}).get("anchor")
            c.check(anchor == (mode.steps_anchor or None),
                    f"{where}: steps.detection.anchor {anchor!r}, TRAINTIME_STEP_ANCHOR {mode.steps_anchor!r}")
        if mode.cupti_lib == "not-cupti":
            reason = rf.get("gpu_capture_reason", "")
            c.check(f"({expected_cupti})" in reason and "TRAINTIME_CUPTI_LIB=" in reason
                    and "libtt_maps_probe.so not used (" in reason,
                    f"{where}: gpu_capture_reason does not name both libraries: {reason!r}")
        if mode.refuse:
            c.check(rf.get("gpu_capture") == "unavailable",
                    f"{where}: gpu_capture {rf.get('gpu_capture')!r}, want 'unavailable'")
            c.check("MULTIPLE_SUBSCRIBERS" in rf.get("gpu_capture_reason", ""),
                    f"{where}: gpu_capture_reason {rf.get('gpu_capture_reason')!r} does not name the refusal")
            # cuptiSubscribe_v2 names the holder (simgpu's stand-in for an outside tool).
            c.check("held by Nsight Systems" in rf.get("gpu_capture_reason", ""),
                    f"{where}: gpu_capture_reason {rf.get('gpu_capture_reason')!r} does not name the holder")
            c.check(steps == truth["steps"]["count"], f"{where}: CPU steps {steps} != {truth['steps']['count']}")
            continue
        if mode.driver_lacks == "LAUNCHES":
            reason = rf.get("gpu_capture_reason", "")
            c.check(rf.get("gpu_capture") == "unavailable" and
                    "refused every kernel-launch callback" in reason and "newer than the driver" in reason,
                    f"{where}: gpu_capture {rf.get('gpu_capture')!r} ({reason!r})")
            c.check(steps == truth["steps"]["count"], f"{where}: CPU steps {steps} != {truth['steps']['count']}")
            continue
        if mode.driver_lacks:
            told = [w for w in rf.get("warnings", []) if "were refused by this CUPTI and driver" in w]
            c.check(len(told) == 1 and mode.driver_lacks in told[0],
                    f"{where}: no one warning naming the refused callbacks: {rf.get('warnings')}")
        if mode.no_tool_threads:
            c.check(rf.get("gpu_capture") == "unavailable" and
                    "could not start GPU capture" in rf.get("gpu_capture_reason", ""),
                    f"{where}: gpu_capture {rf.get('gpu_capture')!r} ({rf.get('gpu_capture_reason')!r})")
            c.check(steps == truth["steps"]["count"], f"{where}: CPU steps {steps} != {truth['steps']['count']}")
            continue
        if mode.cupti_off:
            c.check(rf.get("gpu_capture") == "none", f"{where}: gpu_capture {rf.get('gpu_capture')!r}, want 'none'")
            continue
        if mode.refuse_kind == MEMORY2:
            # Optional: the capture goes on without memory figures, and says why.
            c.check(rf.get("gpu_capture") == "cupti" and "memory" not in rf and
                    not any("memory" in d for d in rf.get("steps", {}).get("detail", [])),
                    f"{where}: gpu_capture {rf.get('gpu_capture')!r}, memory {rf.get('memory')!r} with MEMORY2 refused")
            c.check(any("CUPTI_ACTIVITY_KIND_MEMORY2" in w for w in rf.get("warnings", [])),
                    f"{where}: no warning names the refused memory records: {rf.get('warnings')}")
        elif mode.refuse_kind:
            c.check(rf.get("gpu_capture") == "unavailable" and
                    "cuptiActivityEnable failed" in rf.get("gpu_capture_reason", ""),
                    f"{where}: gpu_capture {rf.get('gpu_capture')!r} ({rf.get('gpu_capture_reason')!r})")
            c.check(steps == truth["steps"]["count"], f"{where}: CPU steps {steps} != {truth['steps']['count']}")
            # The kinds enabled before the refused one were switched off again.
            left_on = (work / "kinds-at-exit.txt").read_text().split()
            c.check(not left_on, f"{where}: activity kinds left enabled after giving up: {left_on}")
            continue
        c.check(rf.get("gpu_capture") == "cupti", f"{where}: gpu_capture {rf.get('gpu_capture')!r} "
                f"({rf.get('gpu_capture_reason')!r}), want 'cupti'")
        used = re.search(r"\(([^)]*libcupti[^)]*)\)", rf.get("gpu_capture_reason", ""))
        c.check(used is not None and os.path.realpath(used.group(1)) == expected_cupti,
                f"{where}: gpu_capture_reason {rf.get('gpu_capture_reason')!r} does not name {expected_cupti}")
        if mode.foreign_injection:
            # sim_train creates its NCCL communicator before its first kernel, and a new
            # communicator is a lazy start point: every kernel is seen, so the full truth must
            # match below.
            c.check("lazily" in rf.get("gpu_capture_reason", ""),
                    f"{where}: gpu_capture_reason {rf.get('gpu_capture_reason')!r} does not say capture started lazily")
        if mode.tiny_pool and rf.get("dropped_records", 0) > 0:
            # Records of refused requests went to scratch buffers (CUPTI before API 27 must never
            # get none) and were counted as dropped: together with the counted ones, the truth.
            counted = sum(v.get("count", 0) for v in rf.get("categories", {}).values())
            want = sum(v["count"] for v in truth["categories"].values())
            dropped = rf["dropped_records"]
            c.check(counted + dropped == want,
                    f"{where}: {counted} activities counted + {dropped} dropped != {want} in the truth")
            continue
        if mode.drop_every:
            # Every activity the truth counts was either counted or reported dropped, none lost.
            counted = sum(v.get("count", 0) for v in rf.get("categories", {}).values())
            want = sum(v["count"] for v in truth["categories"].values())
            dropped = rf.get("dropped_records", 0)
            c.check(dropped > 0, f"{where}: dropped_records is {dropped} with SIMGPU_DROP_EVERY={mode.drop_every}")
            # The same number as the GPU section's typed counter, which the warning states.
            section = rf.get("modules", {}).get("cupti", {}).get("counters", {})
            c.check(section.get("dropped_records") == dropped,
                    f"{where}: modules.cupti.counters {section} does not count the {dropped} dropped records")
            c.check(any(w.startswith(f"{dropped} GPU activity records were dropped") for w in rf["warnings"]),
                    f"{where}: no warning states the {dropped} dropped records: {rf['warnings']}")
            c.check(counted + dropped == want,
                    f"{where}: {counted} activities counted + {dropped} dropped != {want} in the truth")
            continue
        c.extend(compare_truth.compare(rf, truth), f"{where}: ")
        if mode.vmm:
            # Every cuMemCreate counted once: by the VMM ledger, CUPTI's own records of those calls
            # (when it makes them) dropped and counted. sim_train --vmm makes layers + 1 a step.
            counters = rf.get("modules", {}).get("cupti", {}).get("counters", {})
            want_allocations = (4 + 1) * mode.steps
            c.check(counters.get("memory_vmm_allocations") == want_allocations,
                    f"{where}: memory_vmm_allocations {counters.get('memory_vmm_allocations')}, "
                    f"want {want_allocations}")
            dropped = counters.get("memory_vmm_records")
            c.check((dropped > 0) == bool(mode.vmm_records),
                    f"{where}: memory_vmm_records {dropped} with SIMGPU_VMM_MEMORY_RECORDS={mode.vmm_records!r}")
        if mode.fork_workers:
            # The parent's file is the truth (checked below); the children wrote nothing of it.
            want_aux = mode.fork_workers if mode.workers_record else 0
            c.check(len(aux) == want_aux, f"{len(aux)} aux files from forked workers, want {want_aux}: {aux}")
            for path in aux:
                doc = load_json(path)
                paths = sorted(r["path"] for r in doc.get("regions", []))
                c.check(doc.get("role") == "aux" and paths == ["loader_worker"],
                        f"{path.name}: role {doc.get('role')!r}, regions {paths}: the parent's data leaked")
                c.check(sum(v.get("count", 0) for v in doc.get("categories", {}).values()) == 0,
                        f"{path.name}: GPU activity in a worker that launched none")
        if mode.static_cupti_host:
            c.check(any("libtt_static_cupti_host.so" in w and "statically linked CUPTI" in w
                        for w in rf.get("warnings", [])),
                    f"{where}: no warning naming the library with a static CUPTI: {rf.get('warnings')}")
            c.check("libtt_static_cupti_host.so" in run.stderr, f"no warning on stderr: {run.stderr!r}")
        if mode.profiler_windows:
            windows = truth.get("profiler_windows", [])
            c.check(len(windows) == len(mode.profiler_windows),
                    f"{where}: {len(windows)} profiler windows in the truth, want {len(mode.profiler_windows)}")
            for w in windows:
                span = f"{where}: profiler window {w['start_step']}:{w['stop_step']}"
                c.check(w["kernels_expected"] > 0, f"{span}: no kernels ran inside it")
                c.check(w["kernels_seen"] == w["kernels_expected"],
                        f"{span}: the profiler saw {w['kernels_seen']} kernels, the GPU ran {w['kernels_expected']}")
                c.check(w["foreign_buffers"] == 0,
                        f"{span}: the profiler was handed {w['foreign_buffers']} buffer(s) it did not allocate")
                # Its subscription: the launch callbacks it enabled, each ENTER with its EXIT, with
                # its own userdata, and nothing it did not enable.
                c.check(w["launch_enter"] > 0 and w["launch_enter"] == w["launch_exit"],
                        f"{span}: launch callbacks ENTER {w['launch_enter']} / EXIT {w['launch_exit']}")
                c.check(w["unwanted_callbacks"] == 0,
                        f"{span}: {w['unwanted_callbacks']} callback(s) the profiler did not enable")
                c.check(w["wrong_userdata"] == 0,
                        f"{span}: {w['wrong_userdata']} callback(s) with another userdata than the profiler's")
            c.check("shared with another in-process client" in rf.get("gpu_capture_reason", "")
                    and "subscription(s) served from traintime's" in rf.get("gpu_capture_reason", ""),
                    f"{where}: gpu_capture_reason {rf.get('gpu_capture_reason')!r} does not say CUPTI "
                    "and its subscription were shared")
        if not mode.stray_work:
            unattributed = rf.get("categories", {}).get("unattributed", {}).get("count", 0)
            c.check(unattributed == 0, f"{where}: {unattributed} unattributed activities")
        # capture_stats: every record decoded joined a launch; ids advance at least once a launch.
        stats = rf.get("capture_stats")
        if c.check(isinstance(stats, dict), f"{where}: no capture_stats although CUPTI captured"):
            counted = sum(v.get("count", 0) for v in rf.get("categories", {}).values())
            c.check(stats.get("records") == counted,
                    f"{where}: capture_stats.records {stats.get('records')} != {counted} activities counted")
            c.check(stats.get("missing_context") == 0 and stats.get("overwritten") == 0,
                    f"{where}: launch contexts lost: {stats}")
            c.check(stats.get("launch_callbacks", 0) > 0 and stats.get("correlation_ids_per_callback", 0) >= 1,
                    f"{where}: no launches or an id rate below 1: {stats}")
            if mode.graphs:
                c.check(stats.get("graph_node_context", 0) > 0,
                        f"{where}: graph replays took no graph node's context: {stats}")
        c.check(rf.get("dropped_records", 0) == 0, f"{where}: dropped_records {rf.get('dropped_records')}")
        if mode.trace:
            trace_path = work / "out" / f"rank-{rank:05d}.trace.json"
            if c.check(trace_path.exists(), f"{where}: no trace {trace_path}"):
                ref = reference.breakdown(load_json(trace_path))
                c.extend(reference.compare(ref, rf), f"{where}: reference: ")

    # Communicator ids are the 16-hex stable ids in every capture mode, the same on every rank.
    ids_by_rank = []
    for rank in range(mode.np):
        rank_path = work / "out" / f"rank-{rank:05d}.json"
        if not rank_path.exists():
            continue
        comms = load_json(rank_path).get("communicators", [])
        c.check(bool(comms), f"rank {rank}: no communicators although sim_train uses NCCL")
        for comm in comms:
            c.check(re.fullmatch(r"[0-9a-f]{16}", comm.get("id", "")) is not None,
                    f"rank {rank}: communicator id {comm.get('id')!r} is not 16 hex digits")
        ids_by_rank.append(sorted(comm.get("id", "") for comm in comms))
    c.check(len({tuple(ids) for ids in ids_by_rank}) <= 1, f"communicator ids differ across ranks: {ids_by_rank}")

    maps = sorted(probe_dir.glob("maps-*.txt"))
    procs = mode.np * (1 + mode.fork_workers)  # forked workers exit normally and report too
    c.check(len(maps) == procs, f"{len(maps)} sim_train processes reported their maps, want {procs}")
    for path in maps:
        libs = [line.strip() for line in path.read_text().splitlines() if line.strip()]
        if mode.cupti_off:
            c.check(not libs, f"{path.name}: TRAINTIME_CUPTI=0 but mapped {libs}")
        elif c.check(len(libs) == 1, f"{path.name}: {len(libs)} libcupti files mapped: {libs}") and wheel_copy:
            c.check(os.path.realpath(libs[0]) == os.path.realpath(wheel_copy),
                    f"{path.name}: mapped {libs[0]}, not the wheel's {wheel_copy}")
    c.done()


@pytest.fixture
def capture(build_dir: Path, tmp_path: Path):
    return lambda **kw: run_capture(build_dir, tmp_path, Mode(**kw))


def test_sim_capture_single_rank_matches_truth(capture) -> None:
    capture()


def test_sim_capture_single_rank_graphs_matches_truth(capture) -> None:
    capture(graphs=True)


def test_sim_capture_single_rank_nvtx_matches_truth(capture) -> None:
    capture(nvtx=True)


def test_sim_capture_unattributed_work_and_partial_final_step_match_truth(capture) -> None:
    capture(stray_work=True)


def test_sim_capture_mpirun4_matches_truth(capture) -> None:
    capture(np=4)


def test_sim_capture_no_marker_steps_found_match_truth(capture) -> None:
    capture(no_marker=True, layers=24, bucket_layers=3)


def test_sim_capture_no_marker_graphs_nvtx_steps_found_match_truth(capture) -> None:
    capture(no_marker=True, graphs=True, nvtx=True)


def test_sim_capture_mpirun4_no_marker_straggler_steps_found_match_truth(capture) -> None:
    capture(np=4, no_marker=True, layers=24, bucket_layers=3, slowdown="2:1.5")


def test_sim_capture_no_marker_accumulation_eval_and_pause_steps_found_match_truth(capture) -> None:
    # One rank: no collective, so the optimizer alone tells the step from its micro-batches.
    capture(no_marker=True, layers=24, bucket_layers=3,
            train_args=("--accumulate", "3", "--eval-every", "4", "--pause-at", "6:50"))


def test_sim_capture_mpirun4_no_marker_accumulation_eval_straggler_steps_found_match_truth(capture) -> None:
    # DDP's no_sync: the gradient AllReduce buckets in the last micro-batch only.
    capture(np=4, no_marker=True, layers=24, bucket_layers=3, slowdown="2:1.5",
            train_args=("--accumulate", "2", "--eval-every", "5", "--pause-at", "7:40"))


def test_sim_capture_no_marker_anchor_kernel_steps_match_truth_where_the_search_is_fooled(capture) -> None:
    # One optimizer step of 24 identical layers: searched alone, a layer's kernels are taken for
    # the step (8 steps of 6 launches). sim_train --anchor-kernel launches amp_update_scale_kernel
    # last in every optimizer step; with TRAINTIME_STEP_ANCHOR naming it, the one step is the
    # truth's, and the file says the anchor made it.
    capture(no_marker=True, steps=1, layers=24, train_args=("--anchor-kernel",), steps_anchor="amp_update_scale")


def test_sim_capture_no_marker_anchor_kernel_accumulation_eval_and_pause_steps_match_truth(capture) -> None:
    # The anchor ends optimizer steps only: micro-batches, evaluation loops (in the step that
    # follows, as between two tt_step calls) and a pause change nothing.
    capture(no_marker=True, layers=24, bucket_layers=3, steps_anchor="amp_update_scale",
            train_args=("--anchor-kernel", "--accumulate", "3", "--eval-every", "4", "--pause-at", "6:50"))


def test_sim_capture_step_anchor_naming_no_launch_is_one_clear_warning(build_dir: Path, tmp_path: Path) -> None:
    # An anchor that names nothing the job launches: no step is found, nothing recorded is lost,
    # and one line (stderr at exit, and the file's warnings) names the variable and what to do.
    out = tmp_path / "out"
    env = clean_env({"LD_LIBRARY_PATH": str(build_dir / "sim"),
                     "LD_PRELOAD": str(build_dir / "lib" / "libtraintime.so"),
                     "TRAINTIME_CUPTI_LIB": str(build_dir / "sim" / "libcupti.so.13"),
                     "TRAINTIME_OUTPUT": str(out), "TRAINTIME_STEP_ANCHOR": "no_such_kernel"})
    cmd = [str(build_dir / "bin" / "sim_train"), "--steps", "5", "--no-step-marker", "--truth",
           str(tmp_path / "truth-%r.json")]
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    rf, truth = load_json(out / "rank-00000.json"), load_json(tmp_path / "truth-0.json")
    c = Checks()
    told = [line for line in run.stderr.splitlines() if "TRAINTIME_STEP_ANCHOR" in line]
    c.check(len(told) == 1 and "no_such_kernel matched none of the" in told[0] and "unset it" in told[0],
            f"not one warning naming TRAINTIME_STEP_ANCHOR and what to do on stderr: {run.stderr!r}")
    in_file = [w for w in rf.get("warnings", []) if "TRAINTIME_STEP_ANCHOR" in w]
    c.check(len(in_file) == 1 and told and in_file[0] in told[0],
            f"the file's warnings {rf.get('warnings')} do not carry the one line")
    steps = rf.get("steps", {})
    detection = steps.get("detection", {})
    c.check(steps.get("source") == "none" and steps.get("count") == 0 and detection.get("anchor") == "no_such_kernel"
            and "no_such_kernel matched no launch" in detection.get("reason", ""),
            f"steps {steps.get('source')!r} count {steps.get('count')}, detection {detection}")
    c.check(rf.get("categories") == truth["categories"],
            f"categories {rf.get('categories')} != the truth's {truth['categories']}")
    c.done()


def test_sim_capture_steps_off_has_no_steps_and_says_so(build_dir: Path, tmp_path: Path) -> None:
    # TRAINTIME_STEPS=off: with no marker, nothing is detected; with tt_step every step, the
    # markers end no step either. Either way every activity is counted, in one partial step,
    # and steps.detection.reason says why there are no steps.
    c = Checks()
    for marked in (False, True):
        work = tmp_path / ("marked" if marked else "unmarked")
        env = clean_env({"LD_LIBRARY_PATH": str(build_dir / "sim"),
                         "LD_PRELOAD": str(build_dir / "lib" / "libtraintime.so"),
                         "TRAINTIME_CUPTI_LIB": str(build_dir / "sim" / "libcupti.so.13"),
                         "TRAINTIME_OUTPUT": str(work / "out"), "TRAINTIME_STEPS": "off"})
        cmd = [str(build_dir / "bin" / "sim_train"), "--steps", "20", "--truth", str(work / "truth-%r.json")]
        run = subprocess.run(cmd + ["--no-step-marker"] * (not marked), env=env, capture_output=True, text=True,
                             timeout=120)
        assert run.returncode == 0, run.stderr
        rf, truth = load_json(work / "out" / "rank-00000.json"), load_json(work / "truth-0.json")
        where = "marked" if marked else "no marker"
        steps = rf.get("steps", {})
        reason = steps.get("detection", {}).get("reason", "")
        c.check(steps.get("source") == "none" and steps.get("count") == 0 and steps.get("detection", {}).get("steps") == 0,
                f"{where}: steps.source {steps.get('source')!r}, count {steps.get('count')}, detection "
                f"{steps.get('detection')}")
        c.check(reason.startswith("TRAINTIME_STEPS=off: "), f"{where}: steps.detection.reason {reason!r}")
        c.check(("20 step marker(s)" in reason) == marked, f"{where}: the reason {reason!r} on the markers")
        c.check(steps.get("wall_ns", {}).get("count", 0) == 0, f"{where}: step wall times {steps.get('wall_ns')}")
        rows = steps.get("detail", [])
        c.check([(r.get("index"), r.get("partial")) for r in rows] == [(0, True)],
                f"{where}: detail rows {[(r.get('index'), r.get('partial')) for r in rows]}, want one partial step 0")
        if rows:
            c.check(rows[0].get("totals", {}).get("gpu_busy_ns") == truth["steps"]["totals"]["gpu_busy_ns"],
                    f"{where}: step 0's GPU busy time {rows[0].get('totals')} is not the run's "
                    f"{truth['steps']['totals']}")
        c.check(rf.get("categories") == truth["categories"],
                f"{where}: categories {rf.get('categories')} != the truth's {truth['categories']}")
    c.done()


def test_sim_capture_no_marker_long_first_step_of_identical_layers_steps_found_match_truth(capture) -> None:
    # 3000 layers: one backward layer (three kernels) repeats 3000 times in a row, past the
    # mid-run evidence, before the optimizer breaks it for good. That layer is not a step (it was:
    # 3000 detected steps, period 9); the three steps are.
    capture(no_marker=True, steps=3, layers=3000)


def test_sim_capture_marker_after_a_long_first_step_of_identical_layers_matches_truth(capture) -> None:
    # The same with tt_step: detection runs until the first marker, through the first step's
    # 3000 identical backward layers, and must not leave a step per layer before it (it left
    # 1000: steps.count 1003).
    capture(steps=3, layers=3000)


def test_sim_capture_mpirun4_graphs_matches_truth(capture) -> None:
    capture(np=4, graphs=True)


def test_sim_capture_mpirun4_nvtx_graphs_matches_truth(capture) -> None:
    capture(np=4, nvtx=True, graphs=True)


def test_sim_capture_trace_matches_reference_breakdown(capture) -> None:
    capture(np=2, trace=True, graphs=True)


def test_sim_capture_reuses_already_loaded_libcupti(capture) -> None:
    capture(wheel_cupti=True)


def test_sim_capture_dropped_records_reported(capture) -> None:
    capture(drop_every=7)


def test_sim_capture_refused_subscription_reports_unavailable(capture) -> None:
    capture(refuse=True)


def test_sim_capture_cupti_newer_than_driver_skips_the_callbacks_the_driver_lacks(capture) -> None:
    # sim_train makes none of these calls: the capture stays exact, and says what it skipped.
    capture(driver_lacks="cudaLaunchCooperativeKernel")


def test_sim_capture_cupti_newer_than_driver_without_launch_callbacks_is_unavailable(capture) -> None:
    capture(driver_lacks="LAUNCHES")


def test_sim_capture_off_loads_no_libcupti(capture) -> None:
    capture(cupti_off=True)


def test_sim_capture_finds_libcupti_on_the_loader_search_path_before_the_toolkit(capture) -> None:
    # No TRAINTIME_CUPTI_LIB: the libcupti on LD_LIBRARY_PATH (simgpu's) must win over the
    # toolkit the library was built against (/usr/local/cuda's real one).
    capture(cupti_lib="unset")


def test_sim_capture_unloadable_cupti_lib_gives_way_to_the_next_candidate(capture) -> None:
    capture(cupti_lib="missing")


def test_sim_capture_cupti_lib_that_is_no_cupti_is_told_and_gives_way(capture) -> None:
    capture(cupti_lib="not-cupti")


def test_sim_capture_cupti_12_4_layouts_match_truth(capture) -> None:
    # PyTorch cu124 wheels: CUPTI API 22 writes Kernel9 and Memcpy5 records.
    capture(cupti_api=22, graphs=True)


def test_sim_capture_cupti_12_8_layouts_match_truth(capture) -> None:
    # CUPTI 12.8 (API 26) writes Memcpy6; mpirun so NCCL kernels are in the records too.
    capture(cupti_api=26, np=2)


def test_sim_capture_cupti_12_4_refused_buffer_requests_get_scratch_buffers(capture) -> None:
    # Below API 27 a refused buffer request can crash CUPTI (simgpu aborts there): the pool of one
    # buffer is exhausted while it is being processed, and nothing may abort.
    capture(cupti_api=22, tiny_pool=True, steps=200)


def test_sim_capture_torch_profiler_started_twice_mid_run_loses_nothing_on_either_side(capture) -> None:
    capture(steps=14, profiler_windows=("3:6", "9:11"))


def test_sim_capture_torch_profiler_tearing_cupti_down_at_each_stop_keeps_both_sides(capture) -> None:
    # TEARDOWN_CUPTI=1: at each stop the profiler enables every runtime and driver callback and
    # unsubscribes and finalizes in the next call's exit callback (Kineto waits for it for ever);
    # the next window subscribes again.
    capture(steps=14, profiler_windows=("3:6", "9:11"), teardown_cupti=True)


def test_sim_capture_torch_profiler_with_cupti_12_4_layouts_loses_nothing(capture) -> None:
    capture(steps=10, cupti_api=22, profiler_windows=("2:5",))


def test_sim_capture_launch_heavy_loop_with_ids_far_ahead_of_records_attributes_every_kernel(capture) -> None:
    # Two launching threads (the training thread and the backward worker), every API call taking
    # 65536 correlation ids, and buffers that arrive only when full: far more ids go by before a
    # record arrives than the correlation table has slots (16384, indexed by launch), and ids a
    # power of two apart would all land in a handful of slots of a table indexed by id; the
    # buffers, sized with the table, still arrive in time. No kernel is unattributed.
    capture(steps=30, untraced_ids=65535, buffers_when_full=True)


def test_sim_capture_rarely_launching_thread_beside_a_launch_bound_loop_keeps_its_contexts(capture) -> None:
    # A prefetch thread launches one kernel a step in "io" while the training thread and the
    # backward worker launch about 20 000 a step (--layers 4000), more than the launch-context
    # window (16384 launches). CUPTI hands the prefetch thread's partly filled buffer over only at
    # a flush, so flushes by time or by steps alone let its contexts be evicted before its records
    # arrive (every one of them was, before); the window asks for a flush every quarter of itself.
    # Every rare kernel is in "io" (the truth), none is unattributed, no context is lost. Steps by
    # sim_train's steps by tt_step, with auto mode's detection running until the first one
    # through step 0's 4000 identical backward layers.
    capture(steps=6, layers=4000, train_args=("--rare-thread",))


def test_sim_capture_rarely_launching_thread_beside_a_10000_launch_step_matches_truth(capture) -> None:
    # The same with about 10 000 launches a step (--layers 2000), against the whole truth: without
    # flushes by launch count, 5 of the 6 rare kernels went unattributed.
    capture(steps=6, layers=2000, train_args=("--rare-thread",))


def test_sim_capture_no_thread_for_the_profiler_degrades_to_capture_unavailable(capture) -> None:
    capture(steps=4, no_tool_threads=True)


def test_sim_capture_dataloader_workers_forked_after_cuda_init_write_nothing(capture) -> None:
    capture(steps=4, fork_workers=3)


def test_sim_capture_recording_forked_workers_write_only_their_own_data(capture) -> None:
    capture(steps=4, fork_workers=2, workers_record=True)


def test_sim_capture_names_a_library_with_a_statically_linked_cupti(capture) -> None:
    capture(steps=4, static_cupti_host=True)


def test_sim_capture_region_before_cuda_init_flushes_before_cuda_teardown(capture) -> None:
    # The rank file's exit hook is registered at the first region, before cuInit, so it runs
    # after CUDA's own atexit teardown; the capture's forced flush must not (simgpu aborts on a
    # forced flush after its teardown), and every record must still reach the rank file.
    capture(record_before_cuda=True)


def sigterm_run(build_dir: Path, tmp_path: Path, flush_hangs: bool) -> tuple[subprocess.CompletedProcess, Path]:
    sim = build_dir / "sim"
    out = tmp_path / "out"
    env = clean_env({
        "LD_LIBRARY_PATH": str(sim),
        "LD_PRELOAD": str(build_dir / "lib" / "libtraintime.so"),
        "TRAINTIME_CUPTI_LIB": str(sim / "libcupti.so.13"),
        "TRAINTIME_OUTPUT": str(out),
    })
    if flush_hangs:
        env["SIMGPU_FORCED_FLUSH_HANGS"] = "1"
    run = subprocess.run([str(build_dir / "bin" / "sim_train"), "--steps", "50", "--sigterm-after-step", "7"],
                         env=env, capture_output=True, text=True, timeout=60)
    return run, out


def test_sim_capture_sigterm_writes_every_record_cupti_holds(build_dir: Path, tmp_path: Path) -> None:
    # A launcher's cancel with CUPTI healthy: the processing thread's forced flush (bounded) puts
    # the GPU work of every step before the signal into the file (seen on an H200: without it,
    # an abort() 3 s into a run kept the GPU work of 9 of 43 steps, the rest still in CUPTI's
    # buffers), and the process still dies by SIGTERM.
    run, out = sigterm_run(build_dir, tmp_path, flush_hangs=False)
    assert run.returncode == -15, f"sim_train exited {run.returncode}, want death by SIGTERM\n{run.stderr}"
    rf = load_json(out / "rank-00000.json")
    assert rf["exit_reason"] == "signal SIGTERM" and rf["steps"]["count"] == 7
    assert rf["gpu_records_complete"] is True, rf["warnings"]
    assert not any("CUPTI's records were all in" in w for w in rf["warnings"]), rf["warnings"]
    busy = {d["index"]: d["totals"]["gpu_busy_ns"] for d in rf["steps"]["detail"]}
    assert all(busy.get(i, 0) > 0 for i in range(7)), busy


def test_sim_capture_sigterm_writes_the_file_without_waiting_for_cupti(build_dir: Path, tmp_path: Path) -> None:
    # A launcher's cancel: SIGTERM mid-run while CUPTI would never finish a forced flush. The
    # file must be written from what was processed, flagged, and the process must still die by
    # SIGTERM (not hang until the handler gives up and leave no file).
    run, out = sigterm_run(build_dir, tmp_path, flush_hangs=True)
    assert run.returncode == -15, f"sim_train exited {run.returncode}, want death by SIGTERM\n{run.stderr}"
    rf = load_json(out / "rank-00000.json")
    assert rf["exit_reason"] == "signal SIGTERM"
    assert rf["snapshot"] is False
    assert rf["steps"]["count"] == 7
    assert rf["gpu_capture"] == "cupti", rf["gpu_capture_reason"]
    assert rf["gpu_records_complete"] is False
    assert any("before CUPTI's records were all in" in w for w in rf["warnings"]), rf["warnings"]


def test_sim_capture_partly_failed_enable_turns_off_what_it_turned_on(capture) -> None:
    # MEMSET (CUPTI_ACTIVITY_KIND_MEMSET = 2) is enabled last and refused: the kernel and memcpy
    # kinds enabled before it must not stay on with nobody reading their records.
    capture(refuse_kind=2)


def test_sim_capture_device_memory_per_step_matches_truth(capture) -> None:
    # cudaMalloc/cudaFree and cudaMallocAsync/cudaFreeAsync: each step's peak and end-of-step use
    # and the run's peak, against sim_train's own bookkeeping (compare_truth's memory).
    capture(alloc_per_step=True, steps=12)


def test_sim_capture_no_marker_device_memory_per_detected_step_matches_truth(capture) -> None:
    # No marker: each detected step's device memory rows are the truth's steps', as with tt_step.
    capture(alloc_per_step=True, steps=12, no_marker=True)


def test_sim_capture_device_memory_cupti_12_layout_mpirun2(capture) -> None:
    # API 22 (CUPTI 12.4) writes Memory3 records, 8 bytes shorter than 12.6's Memory4.
    capture(alloc_per_step=True, cupti_api=22, np=2, steps=8)


def test_sim_capture_device_memory_beside_profiler_client(capture) -> None:
    # A torch.profiler-like client that starts and stops (enabling and disabling its kinds) must
    # leave traintime's memory records flowing.
    capture(alloc_per_step=True, steps=10, profiler_windows=("2:5",))


def test_sim_capture_vmm_memory_matches_truth(capture) -> None:
    # PyTorch's expandable segments and NCCL's buffers: cuMemCreate'd pages mapped and unmapped,
    # handles released early, retained, released late. CUPTI makes no memory record of them.
    capture(alloc_per_step=True, vmm=True, steps=8)


def test_sim_capture_no_marker_vmm_memory_per_detected_step_matches_truth(capture) -> None:
    # No marker: the VMM calls' events (no memory record, no launch) take the detected step their
    # call falls in, as tt_step would give them (they were all in step 0).
    capture(alloc_per_step=True, vmm=True, steps=8, no_marker=True)


def test_sim_capture_vmm_memory_per_step_exact_across_mid_run_summaries(capture) -> None:
    # The VMM calls' events arrive at once, the CUPTI records of the same step only with their
    # buffer: snapshots (and the hang watchdog's summaries, every second) in the middle of the
    # run must not apply the early ones first, or the late records count in a later step. Four
    # 0.4 s steps: three or more mid-run summaries; buffers delivered only when full, so each
    # summary finds the records of the steps since the last full buffer still in CUPTI.
    capture(alloc_per_step=True, vmm=True, steps=4, step_sleep_us=400_000, snapshot_sec=1,
            buffers_when_full=True)


def test_sim_capture_vmm_memory_counted_once_when_cupti_reports_it_too(capture) -> None:
    # Nothing documents whether CUPTI makes memory records for VMM calls: both ways it might
    # (a record per cuMemCreate and free, or per mapping) must give the same figures, once.
    capture(alloc_per_step=True, vmm=True, vmm_records="create", steps=6)


def test_sim_capture_vmm_memory_counted_once_when_cupti_reports_mappings_mpirun2(capture) -> None:
    capture(alloc_per_step=True, vmm=True, vmm_records="map", cupti_api=22, np=2, steps=5)


def test_sim_capture_refused_memory_records_leave_capture_on(capture) -> None:
    capture(refuse_kind=MEMORY2)


def test_sim_capture_starts_lazily_when_injection_is_taken(capture) -> None:
    capture(foreign_injection=True)


def test_sim_capture_lazy_start_mpirun2_has_stable_communicator_ids(capture) -> None:
    # The lazy start is reached at the first NCCL communicator, before step 0's kernels, and the
    # communicator ids are the stable ids on every rank in that mode too.
    capture(np=2, foreign_injection=True)


def test_sim_capture_no_marker_snapshot_before_sigkill_counts_undecided_work(build_dir: Path, tmp_path: Path) -> None:
    # No marker, steps of 0.3 s, a snapshot every second, SIGKILL after the second: too few steps
    # for a lock, so detection still holds every activity when the snapshots are written. The
    # file the kill leaves must count them (as the step in progress), not an empty GPU section.
    import signal
    import time
    sim = build_dir / "sim"
    out = tmp_path / "out"
    env = clean_env({
        "LD_LIBRARY_PATH": str(sim),
        "LD_PRELOAD": str(build_dir / "lib" / "libtraintime.so"),
        "TRAINTIME_CUPTI_LIB": str(sim / "libcupti.so.13"),
        "TRAINTIME_OUTPUT": str(out),
        "TRAINTIME_SNAPSHOT_SEC": "1",
        "TRAINTIME_HANG_SEC": "0",
    })
    cmd = [str(build_dir / "bin" / "sim_train"), "--steps", "1000", "--no-step-marker",
           "--step-sleep-us", "300000", "--steps-file", str(tmp_path / "done")]
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rank_file = out / "rank-00000.json"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not rank_file.exists():
            time.sleep(0.05)
        time.sleep(1.5)  # a second snapshot, after more steps
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=60)
    c = Checks()
    if c.check(rank_file.exists(), f"no rank file {rank_file} after {time.monotonic()} s"):
        rf = load_json(rank_file)
        counted = sum(v.get("count", 0) for v in rf.get("categories", {}).values())
        detection = rf.get("steps", {}).get("detection", {})
        c.check(counted > 0, f"the snapshot counts no GPU activity: {rf.get('categories')}")
        c.check(detection.get("undecided_launches", 0) > 0,
                f"steps.detection.undecided_launches {detection.get('undecided_launches')!r}: "
                "the snapshot does not say detection still held work")
        c.check(rf.get("steps", {}).get("partial_final_step") is True,
                "the undecided work is not the partial step in progress")
    c.done()


def test_sim_capture_no_marker_mid_run_file_has_the_memory_rows_of_complete_steps(build_dir: Path, tmp_path: Path) -> None:
    # No marker, a snapshot every second while 5000 short steps run (the GPU kept up with the
    # CPU, as a real launch queue makes it): once detection has locked, a file written mid-run
    # carries the device memory rows of the detected steps whose records are all in, as a marked
    # run's snapshot carries its complete steps' rows (they had none: memory.complete_below 0).
    # Each row equals the truth's step of the same index.
    import time
    sim = build_dir / "sim"
    out = tmp_path / "out"
    env = clean_env({
        "LD_LIBRARY_PATH": str(sim),
        "LD_PRELOAD": str(build_dir / "lib" / "libtraintime.so"),
        "TRAINTIME_CUPTI_LIB": str(sim / "libcupti.so.13"),
        "TRAINTIME_OUTPUT": str(out),
        "TRAINTIME_SNAPSHOT_SEC": "1",
        "SIMGPU_SLOWDOWN": "0:0.05",
        # Every step's row in the file, not the newest 64 (the default): the steps whose records
        # are all in trail the newest by the processing thread's lag, which under a sanitizer
        # (and a loaded machine) passes 64 steps of 0.5 ms, so the default window can hold none.
        "TRAINTIME_STEP_DETAIL": "8192",
    })
    cmd = [str(build_dir / "bin" / "sim_train"), "--steps", "5000", "--no-step-marker", "--alloc-per-step",
           "--step-sleep-us", "500", "--truth", str(tmp_path / "truth-%r.json")]
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    rank_file = out / "rank-00000.json"
    kept = None  # the newest mid-run file with detected steps that has memory rows
    seen = []
    deadline = time.monotonic() + 200
    while p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
        try:
            doc = load_json(rank_file)
        except (OSError, ValueError):
            continue
        if not doc.get("snapshot"):
            continue
        steps = doc.get("steps", {})
        seen.append((steps.get("source"), steps.get("count"),
                     sum(1 for row in steps.get("detail", []) if "memory" in row)))
        if steps.get("source") == "detected" and any("memory" in row for row in steps.get("detail", [])):
            kept = doc
    _, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    c = Checks()
    if c.check(kept is not None, f"no mid-run file had detected steps with memory rows (source, count, rows): {seen}"):
        truth = {s["index"]: s for s in load_json(tmp_path / "truth-0.json")["memory"]["by_step"]}
        rows = [row for row in kept["steps"]["detail"] if "memory" in row]
        c.check(len(rows) >= 2, f"{len(rows)} memory rows in the mid-run file")
        for row in rows:
            want = truth.get(row["index"])
            if c.check(want is not None, f"mid-run step {row['index']}: not in the truth"):
                got = (row["memory"]["peak_bytes"], row["memory"]["in_use_bytes"])
                c.check(got == (want["peak_bytes"], want["in_use_bytes"]),
                        f"mid-run step {row['index']}: memory (peak, in use) {got}, truth "
                        f"{(want['peak_bytes'], want['in_use_bytes'])}")
    c.done()


def test_sim_capture_no_marker_gpu_health_rows_take_the_detected_steps(build_dir: Path, tmp_path: Path) -> None:
    # No marker, an NVML sample every 10 ms through 20 steps of 50 ms: each sample goes to the
    # detected step its time falls in (they all went to marker step 0). Every sample is in a
    # step row at exit, the rows spread over the run's steps, and none is past its last step.
    sim = build_dir / "sim"
    out = tmp_path / "out"
    env = clean_env({
        "LD_LIBRARY_PATH": str(sim),
        "LD_PRELOAD": str(build_dir / "lib" / "libtraintime.so"),
        "TRAINTIME_CUPTI_LIB": str(sim / "libcupti.so.13"),
        "TRAINTIME_OUTPUT": str(out),
        "TRAINTIME_NVML_INTERVAL_MS": "10",
    })
    cmd = [str(build_dir / "bin" / "sim_train"), "--steps", "20", "--no-step-marker", "--step-sleep-us", "50000"]
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    rf = load_json(out / "rank-00000.json")
    assert rf["steps"]["source"] == "detected" and rf["steps"]["count"] == 20, rf["steps"]
    device = rf["gpu_health"]["devices"][0]
    rows = {s["index"]: s["samples"] for s in device["steps"]}
    assert sum(rows.values()) == device["run"]["samples"], (rows, device["run"])
    assert len(rows) >= 10, f"samples in only {len(rows)} detected steps: {rows}"
    assert max(rows) <= 19, rows
