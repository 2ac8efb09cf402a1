"""traintime.torch.instrument on real PyTorch (CPU): Debian's 1.13 and PyPI's current release
(scripts/pyenv.py). A small model with a DataLoader, instrumented with one line and depth=2,
must give per-layer forward (and, on PyTorch 2, backward) regions whose counts match the loop,
an io region for the loader, steps with samples and tokens, nothing doubled when instrument is
called twice, torch.compile without graph breaks, and nothing at all without the preload."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from testlib import SOURCE_DIR, SYSTEM_PYTHON, Checks, check_regions, clean_env, load_json, pyenv_python

HERE = Path(__file__).resolve().parent
STEPS, ACCUM, BATCH, SEQ = 3, 2, 4, 8
FORWARDS = STEPS * ACCUM
LAYERS = ["embed", "blocks", "blocks/0", "blocks/1", "head"]


def run_layers(python: Path, build_dir: Path, out: Path, *flags: str, preload: bool = True) -> dict[str, Any]:
    env = clean_env({"TRAINTIME_OUTPUT": str(out), "PYTHONPATH": str(SOURCE_DIR / "annotate" / "python")})
    # Without the preload instrument says once that it records nothing (test_never_silent.py);
    # every other warning is still an error.
    warn = ["-W", "error"] if preload else ["-W", "error", "-W", "ignore:traintime:RuntimeWarning"]
    if preload:
        env["LD_PRELOAD"] = str(build_dir / "lib" / "libtraintime.so")
    p = subprocess.run([str(python), *warn, str(HERE / "torch_layers.py"), "--steps", str(STEPS),
                        "--accum", str(ACCUM), *flags], env=env, capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, f"torch_layers.py {flags} exited {p.returncode}\n{p.stdout}\n{p.stderr}"
    ran = json.loads(p.stdout.splitlines()[-1])
    # Nothing from traintime but its exit line (warnings of the library or PyTorch would show here).
    noise = [x for x in p.stderr.splitlines() if x.strip() and not x.startswith("traintime: rank files")]
    assert not noise, f"unexpected stderr: {noise}"
    return ran


def regions(out: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    doc = load_json(out / "rank-00000.json")
    return doc, {r["path"]: r for r in doc["regions"]}


def check_run(c: Checks, out: Path, ran: dict[str, Any], backward_layers: bool, layers: bool = True) -> None:
    doc, _ = regions(out)
    c.check(ran["forwards"] == FORWARDS and ran["nexts"] == FORWARDS, f"the loop ran {ran}")
    expect = {"forward": ("forward", FORWARDS), "backward": ("backward", FORWARDS),
              "optimizer": ("optimizer", STEPS), "dataloader": ("io", FORWARDS)}
    for name in LAYERS if layers else []:
        expect[f"forward/{name}"] = ("forward", FORWARDS)
        if backward_layers:
            expect[f"backward/{name}"] = ("backward", FORWARDS)
    check_regions(c, doc, expect)  # no depth 3, no activations' backward
    steps = doc["steps"]
    c.check((steps["count"], steps["samples"], steps["tokens"]) == (STEPS, FORWARDS * BATCH, FORWARDS * BATCH * SEQ),
            f"steps {steps['count']}, samples {steps['samples']}, tokens {steps['tokens']}")
    # The hooks' own cost (self_cost, timed in Python, reported through the annotation table):
    # every forward pre and post hook, loader next() and optimizer step counted.
    hooks = [r for r in doc.get("self_cost", {}).get("callbacks", [])
             if (r["module"], r["what"]) == ("torch", "traintime.torch hooks")]
    least = FORWARDS * 2 * (len(LAYERS) if layers else 1) + FORWARDS + STEPS
    if c.check(len(hooks) == 1, f"self_cost has {len(hooks)} rows of traintime.torch's hooks"):
        h = hooks[0]
        c.check(h["calls"] >= least and h["sampled_every"] == 64 and h["estimated"],
                f"traintime.torch hooks: {h} (at least {least} calls, one in 64 timed)")
        c.check(h["samples"] >= 1 and h.get("estimated_ns", 0) > 0, f"traintime.torch hooks not measured: {h}")


def test_debian_torch_1_13_per_layer_forward_and_loader(build_dir: Path, tmp_path: Path) -> None:
    c = Checks()
    ran = run_layers(SYSTEM_PYTHON, build_dir, tmp_path / "out")
    c.check(ran["torch"].startswith("1.13") and ran["backward_modules"] == 0, f"ran {ran}")
    check_run(c, tmp_path / "out", ran, backward_layers=False)
    ran = run_layers(SYSTEM_PYTHON, build_dir, tmp_path / "twice", "--twice")
    check_run(c, tmp_path / "twice", ran, backward_layers=False)
    run_layers(SYSTEM_PYTHON, build_dir, tmp_path / "half", "--half-tokens")
    doc, _ = regions(tmp_path / "half")
    c.check(doc["steps"]["tokens"] == FORWARDS * BATCH * SEQ // 2, f"tokens_per_batch: {doc['steps']['tokens']}")
    c.done()


def test_pypi_torch_per_layer_forward_and_backward(build_dir: Path, tmp_path: Path) -> None:
    python = pyenv_python(build_dir)
    c = Checks()
    ran = run_layers(python, build_dir, tmp_path / "out")
    c.check(ran["torch"].startswith("2.") and ran["backward_modules"] == len(LAYERS), f"ran {ran}")
    check_run(c, tmp_path / "out", ran, backward_layers=True)
    ran = run_layers(python, build_dir, tmp_path / "twice", "--twice")
    check_run(c, tmp_path / "twice", ran, backward_layers=True)
    c.done()


def test_pypi_torch_compile_keeps_the_step_regions_without_graph_breaks(build_dir: Path, tmp_path: Path) -> None:
    python = pyenv_python(build_dir)
    c = Checks()
    ran = run_layers(python, build_dir, tmp_path / "out", "--compile")
    # The compiled module's own hooks run outside the compiled code: forward, samples and tokens
    # stay. Its layers run inside it, where the hooks add nothing (and break no graph).
    c.check(ran["graph_breaks"] == 0, f"graph breaks: {ran}")
    c.check(ran["backward_modules"] == 0, f"ran {ran}")
    check_run(c, tmp_path / "out", ran, backward_layers=False, layers=False)
    c.done()


def own_peak(k: int) -> int:
    """torch_layers.own_allocated_peak: the fake allocator's own peak of step k."""
    return 1000 * (k + 1) if k % 2 == 0 else 500


def test_pypi_torch_allocator_figures_per_step_into_the_rank_file(build_dir: Path, tmp_path: Path) -> None:
    """PyTorch's allocator figures at each step's end (faked on this CPU-only torch: see
    torch_layers.fake_cuda_memory) land in steps.detail[k].memory.torch. By default the peaks are
    never reset, so the user's own max_memory_allocated() is untouched and each row holds the
    running peak; with reset_peak_memory=True, one reset per step and each row holds the step's
    own peak. A CPU run (CUDA never initialised) writes none."""
    python = pyenv_python(build_dir)
    c = Checks()
    for reset in (False, True):
        out = tmp_path / ("reset" if reset else "out")
        ran = run_layers(python, build_dir, out, "--fake-cuda-memory", *(["--reset-peak-memory"] if reset else []))
        if reset:
            c.check(ran["memory_resets"] == STEPS and ran["memory_reset_devices"] == [0] * STEPS, f"ran {ran}")
        else:
            c.check(ran["memory_resets"] == 0, f"the user's peaks were reset: {ran}")
        doc = load_json(out / "rank-00000.json")
        rows = {d["index"]: d for d in doc["steps"]["detail"]}
        for k in range(STEPS):
            got = rows.get(k, {}).get("memory", {}).get("torch")
            want = {"allocated_peak_bytes": own_peak(k) if reset else max(own_peak(j) for j in range(k + 1)),
                    "reserved_peak_bytes": 4096 * (k + 1), "peaks": "step" if reset else "run",
                    "allocated_bytes": 100 * (k + 1), "reserved_bytes": 2048 * (k + 1)}
            c.check(got == want, f"reset={reset} step {k}: memory.torch {got}, expected {want}")
    ran = run_layers(python, build_dir, tmp_path / "cpu")
    doc = load_json(tmp_path / "cpu" / "rank-00000.json")
    c.check(ran["memory_resets"] == 0 and not any("memory" in d for d in doc["steps"]["detail"]),
            f"a CPU run wrote memory figures: {doc['steps']['detail']}")
    c.done()


def test_without_the_preload_torch_is_untouched(build_dir: Path, tmp_path: Path) -> None:
    ran = run_layers(SYSTEM_PYTHON, build_dir, tmp_path / "out", preload=False)
    assert ran["enabled"] is False and ran["backward_modules"] == 0 and ran["loader_class"] == "DataLoader"
    assert not (tmp_path / "out").exists()


def test_pypi_torch_activation_checkpointing_is_recompute_under_backward(build_dir: Path, tmp_path: Path) -> None:
    """torch.utils.checkpoint re-runs the blocks' forward inside backward: that run is
    backward/recompute (per-layer paths below it), the forward rows and the samples and tokens
    count each forward once, and reentrant checkpointing's inner backward adds no second region."""
    python = pyenv_python(build_dir)
    category = "recompute"
    c = Checks()
    for mode in ("reentrant", "non-reentrant"):
        out = tmp_path / mode
        ran = run_layers(python, build_dir, out, "--checkpoint", mode)
        doc, _ = regions(out)
        expect = {"forward": ("forward", FORWARDS), "backward": ("backward", FORWARDS),
                  "optimizer": ("optimizer", STEPS), "dataloader": ("io", FORWARDS),
                  "backward/recompute": (category, FORWARDS)}
        for name in LAYERS:
            expect[f"forward/{name}"] = ("forward", FORWARDS)
            expect[f"backward/{name}"] = ("backward", FORWARDS)
        for name in ("blocks", "blocks/0", "blocks/1"):  # what runs under the checkpoint
            expect[f"backward/recompute/{name}"] = (category, FORWARDS)
        check_regions(c, doc, expect, f"{mode}: ")
        steps = doc["steps"]
        c.check((steps["count"], steps["samples"], steps["tokens"]) == (STEPS, FORWARDS * BATCH, FORWARDS * BATCH * SEQ),
                f"{mode}: steps {steps['count']}, samples {steps['samples']}, tokens {steps['tokens']}")
        c.check(ran["backward_modules"] == len(LAYERS), f"{mode}: ran {ran}")
    c.done()
