"""Checks scripts/demo.sh as a user runs it (CTest label demo; pytest, one CTest test per function).

run (test_sim_demo_4_ranks_match_truth):  the full demo with a failing fake nvidia-smi first on PATH (so it takes the no-GPU path on
      any machine), started from another directory: exit 0, SIMULATED said at the top and the
      bottom, nothing claimed as real hardware, exactly rank-00000..3.json and truth-0..3.json,
      every rank file equal to its simulated truth, the report's per-rank figures equal the rank
      file's, the simulated straggler named, the HTML report written, and files in the output
      folder that are not the demo's left alone.
plan (test_demo_picks_real_gpu_only_with_a_gpu_and_cuda_mlp): `demo.sh --plan` with fake nvidia-smi programs and fake build folders: the real-GPU demo
      is chosen only when nvidia-smi -L lists GPUs and cuda_mlp is built, with one rank per GPU.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from testlib import SOURCE_DIR, Checks

@pytest.fixture
def args(build_dir: Path) -> SimpleNamespace:
    work = build_dir / "tests" / "demo"
    work.mkdir(parents=True, exist_ok=True)
    return SimpleNamespace(demo=str(SOURCE_DIR / "scripts" / "demo.sh"), build=str(build_dir), work=str(work))


def test_sim_demo_4_ranks_match_truth(args: SimpleNamespace) -> None:
    c = Checks()  # one per test: a failure of one test never shows up in another
    run_demo(args, c)
    c.done()


def test_demo_picks_real_gpu_only_with_a_gpu_and_cuda_mlp(args: SimpleNamespace) -> None:
    c = Checks()
    plan_demo(args, c)
    c.done()


def write_exe(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def fake_smi_dir(work, name, body):
    d = os.path.join(work, "fake-smi-" + name)
    os.makedirs(d, exist_ok=True)
    write_exe(os.path.join(d, "nvidia-smi"), "#!/bin/sh\n" + body)
    return d


def demo_env(build, path_first=None, **extra):
    env = dict(os.environ)
    env.pop("TT_NVIDIA_SMI", None)
    env["TRAINTIME_BUILD_DIR"] = build
    if path_first:
        env["PATH"] = path_first + os.pathsep + env.get("PATH", "")
    env.update(extra)
    return env


def run_demo(args: SimpleNamespace, c: Checks) -> None:
    build, work = args.build, args.work
    needed = ["lib/libtraintime.so", "bin/sim_train", "sim/libcuda.so.1", "sim/libcudart.so.13",
              "sim/libcupti.so.13", "sim/libnccl.so.2"]
    missing = [n for n in needed if not os.path.exists(os.path.join(build, n))]
    # demo.sh would build them itself; inside CTest that is a mistake, not a test.
    assert not missing, "build these first: " + ", ".join(missing)
    out_dir = os.path.join(work, "demo-out")
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    # A stale rank file from an older run must go; a file that is not the demo's must stay.
    with open(os.path.join(out_dir, "rank-00007.json"), "w", encoding="utf-8") as f:
        f.write("{}")
    with open(os.path.join(out_dir, "keep.txt"), "w", encoding="utf-8") as f:
        f.write("not the demo's")
    no_gpu = fake_smi_dir(work, "no-driver", 'echo "NVIDIA-SMI has failed because it couldn\'t '
                          'communicate with the NVIDIA driver." ; exit 9\n')
    cwd = os.path.join(work, "elsewhere")
    os.makedirs(cwd, exist_ok=True)
    p = subprocess.run(["bash", args.demo], cwd=cwd, capture_output=True, text=True, timeout=280,
                       env=demo_env(build, no_gpu, TRAINTIME_OUTPUT=out_dir))
    out = p.stdout
    print(out)
    print(p.stderr, file=sys.stderr)
    c.check(p.returncode == 0, f"demo.sh exited with {p.returncode}")
    lines = [l for l in out.splitlines() if l.strip()]
    c.check(any("SIMULATED" in l for l in lines[:4]), "SIMULATED is not said at the top")
    c.check(any("SIMULATED" in l for l in lines[-4:]), "SIMULATED is not said at the bottom")
    c.check("simulated" in out.lower(), "the output never says simulated")
    c.check("REAL HARDWARE" not in out, "the simulated demo claims real hardware")

    ranks = sorted(f for f in os.listdir(out_dir) if f.startswith("rank-"))
    want = [f"rank-{r:05d}.json" for r in range(4)]
    c.check(ranks == want, f"rank files {ranks}, want {want}")
    truth_dir = os.path.join(out_dir, "simgpu-truth")
    truths = sorted(os.listdir(truth_dir)) if os.path.isdir(truth_dir) else []
    c.check(truths == [f"truth-{r}.json" for r in range(4)], f"truth files {truths}")
    c.check(os.path.exists(os.path.join(out_dir, "keep.txt")), "demo.sh deleted a file not its own")
    c.check(len(re.findall(r"^MATCH: ", out, re.M)) == 4, "not 4 MATCH verdicts from compare_truth.py")
    c.check("MISMATCH" not in out, "a rank file disagrees with its simulated truth")

    # The report must show what the files say (read independently here): per rank, the steps and
    # the GPU compute per step; the simulated straggler (rank 3, SIMGPU_SLOWDOWN's default 3:1.5)
    # named with its cost; the HTML report written where the output says.
    c.check("== traintime-report " in out, "the demo does not run traintime-report")
    for r in range(4):
        path = os.path.join(out_dir, f"rank-{r:05d}.json")
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
        with open(os.path.join(truth_dir, f"truth-{r}.json"), encoding="utf-8") as f:
            truth = json.load(f)
        steps = truth["steps"]["count"]
        per_step = steps + (1 if truth["steps"].get("partial_final_step") else 0)
        compute = d["steps"]["totals"]["compute_ns"] / 1e6 / per_step
        c.check(re.search(rf"^\s+{r}\s+\S+\s+{steps}\s+\S+\s+{compute:.3f}\s", out, re.M) is not None,
              f"rank {r}: the report's per-rank row does not show {steps} steps and {compute:.3f} ms/step compute")
    flat = " ".join(out.split())
    c.check(re.search(r"rank 3 \(host [^)]*\) costs the job \d+\.\d+ (ms|us)/step", flat) is not None,
          "the report does not name the simulated straggler rank 3 with its cost")
    # The report's first screen (its first 30 lines) says what a newcomer needs first: simulated,
    # one step time with its source, the straggler; nothing about a second, CPU "median step".
    report = out[out.index("traintime-report: job "):]
    first = " ".join(" ".join(report.splitlines()[:30]).split())
    c.check("SIMULATED GPU (simgpu)" in first, "the report's heading does not say SIMULATED GPU")
    c.check(re.search(r"step time p50 \d+\.\d+ (ms|us) \(p90 [^)]*\) over \d+ \(rank, step\) values after warm-up, "
                    r"measured as the GPU step span", first) is not None,
          "the first screen does not give the one step time with its source")
    c.check("device simgpu (SIMULATED GPU)" in first, "the first screen does not name the simulated device")
    c.check("rank 3 (host" in first, "the straggler is not on the first screen")
    c.check("CPU wall" not in first, "the first screen mentions a CPU wall step time beside the GPU span")
    html = os.path.join(out_dir, "report.html")
    c.check(os.path.exists(html), "no HTML report in the output folder")
    c.check(f"HTML report (SIMULATED GPU): {html}" in out, "the demo does not say where the HTML report is")
    # It ends with the answer: the straggler and its cost, the largest share, where the HTML is.
    # (A line wider than 100 columns goes on in lines indented by four spaces.)
    logical: list[str] = []
    for l in lines:
        if l.startswith("    ") and logical:
            logical[-1] += " " + l.strip()
        else:
            logical.append(l)
    tail = [" ".join(l.split()) for l in logical[-4:]]
    c.check(len(tail) == 4 and tail[0].startswith("SUMMARY -- SIMULATED GPU"), f"the demo does not end with the summary: {tail}")
    c.check(len(tail) == 4 and re.match(r"straggler: rank 3 costs the job \d+\.\d+ (ms|us)/step", tail[1]) is not None
            and tail[2].startswith("largest share: compute, ") and tail[3] == f"HTML: {html} (the same, with charts)",
            f"the summary's three lines: {tail}")


def plan(args, smi_dir, build, **extra):
    p = subprocess.run(["bash", args.demo, "--plan"], capture_output=True, text=True, timeout=50,
                       env=demo_env(build, smi_dir, **extra), cwd=args.work)
    print(f"--- plan with {smi_dir or extra}, build {build}:\n{p.stdout}{p.stderr}")
    if p.returncode != 0:
        return None, p.stdout
    m = re.search(r"^demo plan: mode=(\w+) ranks=(\d+)$", p.stdout, re.M)
    return (m.group(1), int(m.group(2))) if m else None, p.stdout


def plan_demo(args: SimpleNamespace, c: Checks) -> None:
    work = args.work
    with_mlp = os.path.join(work, "fake-build-with-cuda_mlp")
    without = os.path.join(work, "fake-build-without")
    os.makedirs(os.path.join(with_mlp, "bin"), exist_ok=True)
    os.makedirs(without, exist_ok=True)
    write_exe(os.path.join(with_mlp, "bin", "cuda_mlp"), "#!/bin/sh\nexit 0\n")
    # The fakes answer only `-L`, as the demo must ask.
    two = fake_smi_dir(work, "two", 'if [ "$*" != "-L" ]; then exit 2; fi\n'
                       'echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)"\n'
                       'echo "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-2)"\n')
    none = fake_smi_dir(work, "none", 'echo "No devices were found"; exit 6\n')
    empty = fake_smi_dir(work, "empty", "exit 0\n")

    got, _ = plan(args, two, with_mlp)
    c.check(got == ("gpu", 2), f"2 GPUs + cuda_mlp: got {got}, want real GPU with 2 ranks")
    got, text = plan(args, two, without)
    c.check(got == ("sim", 4), f"2 GPUs, no cuda_mlp: got {got}, want the simulated demo")
    c.check("not built" in text, "the fallback does not say cuda_mlp is not built")
    got, text = plan(args, none, with_mlp)
    c.check(got == ("sim", 4), f"'No devices were found': got {got}")
    c.check("no GPU" in text, "the no-GPU reason is not given")
    got, _ = plan(args, empty, with_mlp)
    c.check(got == ("sim", 4), f"nvidia-smi listing nothing: got {got}")
    got, _ = plan(args, None, with_mlp, TT_NVIDIA_SMI=os.path.join(work, "no-such-nvidia-smi"))
    c.check(got == ("sim", 4), f"no nvidia-smi at all: got {got}")
    c.check(not os.path.exists(os.path.join(without, "lib")), "--plan built something")



def test_demo_installs_only_what_the_demo_uses(args: SimpleNamespace) -> None:
    """install-deps.sh --demo (what demo.sh calls) asks for the demo's packages only; without
    --demo (test.sh) for everything. A fake dpkg says nothing is installed and a fake id says the
    user is not root, so the script only names what it would install."""
    c = Checks()
    fakes = os.path.join(args.work, "fake-no-packages")
    os.makedirs(fakes, exist_ok=True)
    write_exe(os.path.join(fakes, "dpkg"), "#!/bin/sh\nexit 1\n")
    write_exe(os.path.join(fakes, "id"), "#!/bin/sh\necho 1000\n")
    script = str(SOURCE_DIR / "scripts" / "install-deps.sh")
    env = dict(os.environ, PATH=fakes + os.pathsep + os.environ.get("PATH", ""))

    def asked(*extra: str) -> set[str]:
        p = subprocess.run(["bash", script, *extra], capture_output=True, text=True, timeout=30, env=env)
        c.check(p.returncode == 1, f"install-deps.sh {extra}: exit {p.returncode}, want 1 (not root)")
        m = re.search(r"^traintime: missing packages: (.*)$", p.stderr, re.M)
        c.check(m is not None, f"install-deps.sh {extra} does not name the missing packages: {p.stderr!r}")
        return set(m.group(1).split()) if m else set()

    demo = asked("--demo")
    for needed in ("g++", "cmake", "openmpi-bin", "libcli11-dev", "python3"):
        c.check(needed in demo, f"the demo needs {needed}, but install-deps.sh --demo does not ask for it")
    for test_only in ("python3-torch", "chromium", "python3-pytest", "libbenchmark-dev"):
        c.check(test_only not in demo, f"install-deps.sh --demo asks for {test_only}, which only the tests use")
    everything = asked()
    c.check(demo < everything and {"python3-torch", "chromium"} <= everything,
          f"install-deps.sh (for test.sh) no longer asks for everything: {sorted(everything)}")
    # demo.sh asks for the demo's set, not for everything.
    text = (SOURCE_DIR / "scripts" / "demo.sh").read_text()
    c.check('install-deps.sh" --demo' in text, "demo.sh does not call install-deps.sh --demo")
    c.done()
