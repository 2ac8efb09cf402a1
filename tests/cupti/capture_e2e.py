#!/usr/bin/env python3
"""End-to-end GPU capture checks on the SIMULATED GPU (simgpu): sim_train under LD_PRELOAD.

usage: capture_e2e.py --build BUILD_DIR [--np N] [--steps S] [--graphs] [--nvtx] [--trace]
                      [--drop-every K] [--refuse] [--wheel-cupti] [--cupti-off]

Default expectations, for every rank: the rank file's categories, steps.count and steps.totals
(and comm rows) equal sim_train's --truth exactly (tests/sim/compare_truth.py); gpu_capture is
"cupti"; nothing is unattributed; dropped_records is 0; exactly one libcupti is mapped in the
process (a maps probe preloaded beside libtraintime.so lists them at exit).
  --trace        also: tools/reference_breakdown.py recomputes the same breakdown from the
                 TRAINTIME_TRACE=1 dump
  --wheel-cupti  a second copy of the (simulated) libcupti is loaded by path before CUDA starts,
                 as PyTorch's wheels do; traintime must reuse it, not load its own
  --drop-every K simgpu drops every K-th record: the job still succeeds and dropped_records > 0
  --refuse       simgpu refuses the subscription: the job succeeds, gpu_capture "unavailable"
                 with the reason, CPU-side steps still counted
  --cupti-off    TRAINTIME_CUPTI=0: no libcupti mapped, gpu_capture "none"
  --foreign-injection  CUDA_INJECTION64_PATH already names another library, so the driver never
                 calls traintime: capture starts lazily at the first tt_step; gpu_capture
                 "cupti" with a reason saying so, and only the work before it is missing
Exit 0 when every check passes; 1 with one line per failure.
"""
import argparse
import glob
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))


def load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--np", type=int, default=1)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--graphs", action="store_true")
    ap.add_argument("--nvtx", action="store_true")
    ap.add_argument("--trace", action="store_true")
    ap.add_argument("--drop-every", type=int, default=0)
    ap.add_argument("--refuse", action="store_true")
    ap.add_argument("--wheel-cupti", action="store_true")
    ap.add_argument("--cupti-off", action="store_true")
    ap.add_argument("--foreign-injection", action="store_true")
    args = ap.parse_args()

    build = os.path.abspath(args.build)
    sim = os.path.join(build, "sim")
    work = tempfile.mkdtemp(prefix="tt-capture-")
    failures = []
    try:
        env = dict(os.environ)
        for var in ("CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH", "TRAINTIME_OUTPUT",
                    "TRAINTIME_DISABLE", "TRAINTIME_CUPTI", "TRAINTIME_TRACE", "RANK", "WORLD_SIZE"):
            env.pop(var, None)
        probe_dir = os.path.join(work, "maps")
        os.makedirs(probe_dir)
        env.update({
            "LD_LIBRARY_PATH": sim,
            "LD_PRELOAD": os.path.join(build, "lib", "libtraintime.so") + ":" +
                          os.path.join(build, "lib", "libtt_maps_probe.so"),
            "TRAINTIME_CUPTI_LIB": os.path.join(sim, "libcupti.so.13"),
            "TRAINTIME_OUTPUT": os.path.join(work, "out"),
            "TT_PROBE_DIR": probe_dir,
            "OMPI_ALLOW_RUN_AS_ROOT": "1",
            "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
        })
        wheel_copy = None
        if args.wheel_cupti:
            wheel_dir = os.path.join(work, "site-packages", "nvidia", "cuda_cupti", "lib")
            os.makedirs(wheel_dir)
            wheel_copy = os.path.join(wheel_dir, "libcupti.so.13")
            shutil.copy(os.path.join(sim, "libcupti.so.13"), wheel_copy)
            env["TT_PROBE_PRELOAD_CUPTI"] = wheel_copy
        if args.trace:
            env["TRAINTIME_TRACE"] = "1"
        if args.drop_every:
            env["SIMGPU_DROP_EVERY"] = str(args.drop_every)
        if args.refuse:
            env["SIMGPU_REFUSE_SUBSCRIBE"] = "1"
        if args.cupti_off:
            env["TRAINTIME_CUPTI"] = "0"
        if args.foreign_injection:
            # Any library that is not traintime: the maps probe exports no InitializeInjection.
            env["CUDA_INJECTION64_PATH"] = os.path.join(build, "lib", "libtt_maps_probe.so")

        cmd = [os.path.join(build, "bin", "sim_train"), "--steps", str(args.steps),
               "--truth", os.path.join(work, "truth-%r.json")]
        if args.graphs:
            cmd.append("--graphs")
        if args.nvtx:
            cmd.append("--nvtx")
        if args.np > 1:
            passed = ["LD_LIBRARY_PATH", "LD_PRELOAD", "TRAINTIME_CUPTI_LIB", "TRAINTIME_OUTPUT",
                      "TT_PROBE_DIR", "TT_PROBE_PRELOAD_CUPTI", "TRAINTIME_TRACE", "SIMGPU_DROP_EVERY",
                      "SIMGPU_REFUSE_SUBSCRIBE", "TRAINTIME_CUPTI", "CUDA_INJECTION64_PATH"]
            mpi = ["mpirun", "-np", str(args.np), "--oversubscribe"]
            for var in passed:
                if var in env:
                    mpi += ["-x", var]
            cmd = mpi + cmd
        run = subprocess.run(cmd, env=env, cwd=work, capture_output=True, text=True, timeout=240)
        if run.returncode != 0:
            print(f"FAIL: {' '.join(cmd)} exited {run.returncode}\n{run.stdout}\n{run.stderr}")
            return 1

        compare_truth = load_module(os.path.join(SRC, "tests", "sim", "compare_truth.py"), "compare_truth")
        reference = load_module(os.path.join(SRC, "tools", "reference_breakdown.py"), "reference_breakdown")
        for rank in range(args.np):
            rank_path = os.path.join(work, "out", f"rank-{rank:05d}.json")
            truth_path = os.path.join(work, f"truth-{rank}.json")
            if not os.path.exists(rank_path):
                failures.append(f"rank {rank}: no rank file {rank_path}")
                continue
            with open(rank_path) as f:
                rf = json.load(f)
            with open(truth_path) as f:
                truth = json.load(f)
            where = f"rank {rank}"
            if args.refuse:
                if rf.get("gpu_capture") != "unavailable":
                    failures.append(f"{where}: gpu_capture {rf.get('gpu_capture')!r}, want 'unavailable'")
                if "MULTIPLE_SUBSCRIBERS" not in rf.get("gpu_capture_reason", ""):
                    failures.append(f"{where}: gpu_capture_reason {rf.get('gpu_capture_reason')!r} "
                                    "does not name the refusal")
                if rf.get("steps", {}).get("count") != truth["steps"]["count"]:
                    failures.append(f"{where}: CPU steps {rf.get('steps', {}).get('count')} != "
                                    f"{truth['steps']['count']}")
                continue
            if args.cupti_off:
                if rf.get("gpu_capture") != "none":
                    failures.append(f"{where}: gpu_capture {rf.get('gpu_capture')!r}, want 'none'")
                continue
            if rf.get("gpu_capture") != "cupti":
                failures.append(f"{where}: gpu_capture {rf.get('gpu_capture')!r} "
                                f"({rf.get('gpu_capture_reason')!r}), want 'cupti'")
            if args.foreign_injection:
                if "lazily" not in rf.get("gpu_capture_reason", ""):
                    failures.append(f"{where}: gpu_capture_reason {rf.get('gpu_capture_reason')!r} "
                                    "does not say capture started lazily")
                if rf.get("steps", {}).get("count") != truth["steps"]["count"]:
                    failures.append(f"{where}: steps {rf.get('steps', {}).get('count')} != "
                                    f"{truth['steps']['count']}")
                got = rf.get("categories", {}).get("forward", {}).get("count", 0)
                want = truth["categories"]["forward"]["count"]
                # Step 0 ran before the first tt_step, so its kernels are not seen; the rest are.
                per_step = want // truth["steps"]["count"]
                if got != want - per_step:
                    failures.append(f"{where}: {got} forward kernels captured lazily, want "
                                    f"{want - per_step} (all but step 0's {per_step})")
                continue
            if args.drop_every:
                if not rf.get("dropped_records"):
                    failures.append(f"{where}: dropped_records is {rf.get('dropped_records')} with "
                                    f"SIMGPU_DROP_EVERY={args.drop_every}")
                continue
            failures += [f"{where}: {d}" for d in compare_truth.compare(rf, truth)]
            unattributed = rf.get("categories", {}).get("unattributed", {}).get("count", 0)
            if unattributed:
                failures.append(f"{where}: {unattributed} unattributed activities")
            if rf.get("dropped_records", 0) != 0:
                failures.append(f"{where}: dropped_records {rf.get('dropped_records')}")
            if args.trace:
                trace_path = os.path.join(work, "out", f"rank-{rank:05d}.trace.json")
                if not os.path.exists(trace_path):
                    failures.append(f"{where}: no trace {trace_path}")
                else:
                    with open(trace_path) as f:
                        ref = reference.breakdown(json.load(f))
                    failures += [f"{where}: reference: {d}" for d in reference.compare(ref, rf)]

        maps = sorted(glob.glob(os.path.join(probe_dir, "maps-*.txt")))
        if len(maps) != args.np:
            failures.append(f"{len(maps)} sim_train processes reported their maps, want {args.np}")
        for path in maps:
            with open(path) as f:
                libs = [line.strip() for line in f if line.strip()]
            if args.cupti_off:
                if libs:
                    failures.append(f"{os.path.basename(path)}: TRAINTIME_CUPTI=0 but mapped {libs}")
                continue
            if len(libs) != 1:
                failures.append(f"{os.path.basename(path)}: {len(libs)} libcupti files mapped: {libs}")
            elif wheel_copy and os.path.realpath(libs[0]) != os.path.realpath(wheel_copy):
                failures.append(f"{os.path.basename(path)}: mapped {libs[0]}, not the wheel's {wheel_copy}")
    finally:
        if not failures:
            shutil.rmtree(work, ignore_errors=True)
    if failures:
        print(f"FAIL ({work} kept):")
        for line in failures:
            print("  " + line)
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
