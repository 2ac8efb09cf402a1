"""The frameworks users train with, each instrumented by its one line and run for real on the CPU
under the preload (frameworks_train.py, PyPI environment of scripts/pyenv.py): Hugging Face's
Trainer with traintime.hf.Callback() (with and without gradient checkpointing), PyTorch
Lightning with traintime.lightning.Callback(), Accelerate's prepared objects instrumented as
they are, the real torchrun with DDP and FSDP2 over gloo (torchrun_train.py, 2 ranks),
Megatron-core's GPT layers with their NVTX ranges on (no traintime code but the step) and
DeepSpeed's engine on its CPU accelerator, also under the deepspeed launcher (2 ranks). The rank
file must show one step per optimizer step (gradient accumulation), the forward/backward/
optimizer/io regions and the per-layer paths with their counts (or Megatron's NVTX ranges), the
samples and tokens of the batches, with the rank and world size of each process and no file from
a launcher."""
from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path
from typing import Any

from testlib import SOURCE_DIR, Checks, check_regions, clean_env, load_json, missing_dependency, pyenv_python

HERE = Path(__file__).resolve().parent
STEPS, ACCUM, BATCH, SEQ = 3, 2, 4, 8  # frameworks_train.py's
FORWARDS = STEPS * ACCUM


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(build_dir: Path, out: Path, framework: str, module: str, torchrun: bool = False,
        script: str = "", deepspeed: bool = False, env_extra: dict[str, str] | None = None) -> dict[str, Any]:
    python = pyenv_python(build_dir)
    # MASTER_PORT: the single-process runs' gloo rendezvous (the launchers choose their own).
    env = clean_env({"TRAINTIME_OUTPUT": str(out), "PYTHONPATH": str(SOURCE_DIR / "annotate" / "python"),
                     "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), **(env_extra or {})})
    # Installed or not, asked without importing it (the run below imports it: importing it here
    # too cost every test a second torch import). A package that is there but fails to import
    # fails the run itself.
    package = module.split(".")[0]
    probe = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({package!r}) is None)"
    if subprocess.run([str(python), "-c", probe], env=env, capture_output=True).returncode != 0:
        missing_dependency(f"{module} is not installed in {python.parent.parent}: run scripts/pyenv.py "
                           f"{build_dir / 'pyenv'} (needs PyPI)")
    env["LD_PRELOAD"] = str(build_dir / "lib" / "libtraintime.so")
    # The launcher's own process runs under the preload too, as it does for users.
    script = script or ("torchrun_train.py" if torchrun else "frameworks_train.py")
    launcher = ([str(python), "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"] if torchrun
                else [str(python), "-m", "deepspeed.launcher.runner", "--num_gpus", "2", "--master_port",
                      env["MASTER_PORT"]] if deepspeed else [str(python)])
    command = launcher + [str(HERE / script), framework]
    p = subprocess.run(command, env=env, capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, f"{command[1:]} exited {p.returncode}\n{p.stdout}\n{p.stderr}"
    ours = [x for x in p.stderr.splitlines() if x.startswith("traintime") and "rank files" not in x]
    assert not ours, f"traintime said: {ours}"
    # the script's one JSON line (the deepspeed launcher logs to stdout after it)
    return json.loads([x for x in p.stdout.splitlines() if x.startswith("{")][-1])


# The comm regions traintime.torch gives collectives on gloo (test_torch_comm.py checks them): a
# framework's own collectives, whatever it runs, beside the regions each test is about.
GLOO_COMM = {"AllReduce", "Broadcast", "Reduce", "AllGather", "ReduceScatter", "AlltoAll", "Gather", "Scatter",
             "ddp_comm_hook"}


def check_rank_file(c: Checks, out: Path, expect: dict[str, tuple[str, int]], rank: int = 0, world: int = 1) -> None:
    if rank == 0:  # one file per rank: none from a launcher or a DataLoader worker
        files = sorted(x.name for x in out.iterdir())
        c.check(files == [f"rank-{r:05d}.json" for r in range(world)], f"files written: {files}")
    doc = load_json(out / f"rank-{rank:05d}.json")
    c.check((doc["rank"], doc["world_size"]) == (rank, world), f"rank {doc['rank']} of {doc['world_size']}")
    comm = [r for r in doc["regions"] if r["path"] in GLOO_COMM and r["path"] not in expect]
    c.check(all(r["category"] == "comm" for r in comm), f"rank {rank}: collective regions {comm}")
    if world > 1:  # ranks over gloo communicate: it shows as comm time
        c.check(comm, f"rank {rank}: no comm region of the gloo collectives")
    doc["regions"] = [r for r in doc["regions"] if r not in comm]
    check_regions(c, doc, expect, f"rank {rank}: ")
    steps = doc["steps"]
    c.check((steps["count"], steps["samples"], steps["tokens"]) == (STEPS, FORWARDS * BATCH, FORWARDS * BATCH * SEQ),
            f"steps {steps['count']}, samples {steps['samples']}, tokens {steps['tokens']}")


def hf_expected(checkpointing: bool, recompute: str = "") -> dict[str, tuple[str, int]]:
    # GPT-2 with two layers, depth=2 reaching its blocks: transformer.h is a ModuleList (never
    # called: no region and no level of its own, its name stays in the blocks' paths, the same in
    # forward and backward); transformer itself returns a ModelOutput, which PyTorch runs no
    # backward hooks for; drop has no parameters (no backward range).
    expect = {"forward": ("forward", FORWARDS), "backward": ("backward", FORWARDS),
              "optimizer": ("optimizer", STEPS), "dataloader": ("io", FORWARDS)}
    for name in ("transformer", "transformer/wte", "transformer/wpe", "transformer/drop", "transformer/h/0",
                 "transformer/h/1", "transformer/ln_f", "lm_head"):
        expect[f"forward/{name}"] = ("forward", FORWARDS)
    for name in ("transformer/wte", "transformer/wpe", "transformer/h/0", "transformer/h/1", "transformer/ln_f",
                 "lm_head"):
        expect[f"backward/{name}"] = ("backward", FORWARDS)
    if checkpointing:
        # transformers 5 checkpoints each layer's forward (inside the layer's hooks): one recompute
        # per layer and forward, in backward, and none of it in forward's counts.
        expect["backward/recompute"] = (recompute, FORWARDS * 2)
    return expect


def test_hf_trainer_callback_gives_one_step_per_optimizer_step(build_dir: Path, tmp_path: Path) -> None:
    c = Checks()
    ran = run(build_dir, tmp_path / "out", "hf", "transformers")
    c.check(ran["steps"] == STEPS and ran["enabled"], f"ran {ran}")
    check_rank_file(c, tmp_path / "out", hf_expected(False))
    c.done()


def test_hf_trainer_gradient_checkpointing_is_recompute(build_dir: Path, tmp_path: Path) -> None:
    c = Checks()
    ran = run(build_dir, tmp_path / "out", "hf-checkpointing", "transformers")
    c.check(ran["steps"] == STEPS and ran["enabled"], f"ran {ran}")
    c.check(ran["recompute_category"] == "recompute", f"ran {ran}")
    check_rank_file(c, tmp_path / "out", hf_expected(True, ran["recompute_category"]))
    c.done()


def test_hf_trainer_under_torchrun_two_ranks(build_dir: Path, tmp_path: Path) -> None:
    """The Trainer under the real torchrun (DDP over gloo on the CPU): each worker's file, of its
    rank in a world of 2, with the same steps and regions; none from torchrun itself."""
    c = Checks()
    ran = run(build_dir, tmp_path / "out", "hf", "transformers", torchrun=True, script="frameworks_train.py")
    c.check(ran["steps"] == STEPS and ran["enabled"], f"ran {ran}")
    for rank in (0, 1):
        check_rank_file(c, tmp_path / "out", hf_expected(False), rank, 2)
    c.done()


def test_lightning_callback_keeps_forward_and_backward_out_of_the_optimizer(build_dir: Path, tmp_path: Path) -> None:
    """Lightning runs forward and backward inside optimizer.step(closure): they must still be
    forward and backward, not optimizer/forward. training_step calls the submodules directly
    (not self(x)): forward is training_step, with samples and tokens from the batch."""
    c = Checks()
    ran = run(build_dir, tmp_path / "out", "lightning", "lightning")
    c.check(ran["steps"] == STEPS and ran["enabled"], f"ran {ran}")
    expect = {"forward": ("forward", FORWARDS), "backward": ("backward", FORWARDS),
              "optimizer": ("optimizer", STEPS)}
    for name in ("embed", "head"):
        expect[f"forward/{name}"] = ("forward", FORWARDS)
        expect[f"backward/{name}"] = ("backward", FORWARDS)
    check_rank_file(c, tmp_path / "out", expect)
    c.done()


def sequential_expected() -> dict[str, tuple[str, int]]:
    """The regions of frameworks_train.py's two-layer nn.Sequential, instrumented with its loader
    (Accelerate, DeepSpeed)."""
    expect = {"forward": ("forward", FORWARDS), "backward": ("backward", FORWARDS),
              "optimizer": ("optimizer", STEPS),
              # the for loop's last next() is timed too: it finds the loader exhausted
              "dataloader": ("io", FORWARDS + 1)}
    for name in ("0", "1"):
        expect[f"forward/{name}"] = ("forward", FORWARDS)
        expect[f"backward/{name}"] = ("backward", FORWARDS)
    return expect


def test_accelerate_prepared_objects_step_only_when_gradients_sync(build_dir: Path, tmp_path: Path) -> None:
    """instrument(*accelerator.prepare(...)) as written: a DataLoaderShard, and an optimizer
    called every micro-batch under accelerator.accumulate() that steps every ACCUM-th."""
    c = Checks()
    ran = run(build_dir, tmp_path / "out", "accelerate", "accelerate")
    c.check(ran["steps"] == STEPS and ran["enabled"], f"ran {ran}")
    check_rank_file(c, tmp_path / "out", sequential_expected())
    c.done()


def check_torchrun(build_dir: Path, tmp_path: Path, wrap: str, layers: list[str],
                   recomputed: tuple[str, ...] = ()) -> None:
    c = Checks()
    ran = run(build_dir, tmp_path / "out", wrap, "torch.distributed.run", torchrun=True)
    c.check(ran["wrap"] == wrap and ran["enabled"], f"ran {ran}")
    expect = {"forward": ("forward", FORWARDS), "backward": ("backward", FORWARDS),
              "optimizer": ("optimizer", STEPS)}
    for name in layers:
        expect[f"forward/{name}"] = ("forward", FORWARDS)
        expect[f"backward/{name}"] = ("backward", FORWARDS)
    if recomputed:
        c.check(ran["recompute_category"] == "recompute", f"ran {ran}")
        expect["backward/recompute"] = (ran["recompute_category"], FORWARDS)
        for name in recomputed:
            expect[f"backward/recompute/{name}"] = (ran["recompute_category"], FORWARDS)
    for rank in (0, 1):
        check_rank_file(c, tmp_path / "out", expect, rank, 2)
        # Each worker ended by returning (a worker PyTorch aborted at its shutdown, which gloo's
        # thread freeing a callback of ours once caused, is "signal SIGABRT" even when torchrun
        # exits 0).
        reason = load_json(tmp_path / "out" / f"rank-{rank:05d}.json").get("exit_reason")
        c.check(reason == "exit", f"rank {rank}: exit_reason {reason!r}")
    c.done()


def test_torchrun_ddp_gloo_two_ranks(build_dir: Path, tmp_path: Path) -> None:
    """The real torchrun, DDP over gloo: one rank file per worker, none from torchrun itself."""
    # DDP's `module` is a wrapper: no level and no name of its own.
    check_torchrun(build_dir, tmp_path, "ddp", ["embed", "body", "head"])


def test_torchrun_fsdp2_fully_shard_gloo_two_ranks(build_dir: Path, tmp_path: Path) -> None:
    """FSDP2 (fully_shard on a CPU device mesh, gloo): the sharded model's layers and steps."""
    check_torchrun(build_dir, tmp_path, "fsdp", ["embed", "body", "head"])


def test_torchrun_fsdp2_checkpoint_wrapper_is_recompute(build_dir: Path, tmp_path: Path) -> None:
    """FSDP's checkpoint_wrapper re-runs its module in backward: backward/recompute, not forward."""
    # The wrapper's inner module is the same layer: its re-run is body's, under recompute.
    check_torchrun(build_dir, tmp_path, "fsdp-checkpoint", ["embed", "body", "head"], ("body",))


def test_megatron_core_nvtx_ranges_are_regions(build_dir: Path, tmp_path: Path) -> None:
    """Megatron-core's GPT layers with its NVTX ranges on: each range a region under its parent
    range, entered once per layer and micro-batch; the loss function's range from Megatron's
    nvtx_decorator (the `nvtx` package); the steps traintime.step() marks. No instrument()."""
    c = Checks()
    ran = run(build_dir, tmp_path / "out", "megatron", "megatron.core")
    c.check(ran["steps"] == STEPS and ran["enabled"], f"ran {ran}")
    layer = "megatron.core.transformer.transformer_layer."
    attention, mlp = layer + "_forward_attention.self_attention", layer + "_forward_mlp.mlp"
    per_layer = FORWARDS * 2  # two transformer layers, the same range names in each
    expect = {path: ("forward", per_layer) for path in (
        attention, layer + "_forward_attention.self_attn_bda", mlp, layer + "_forward_post_mlp.mlp_bda")}
    for name in ("qkv", "adjust_key_value", "rotary_pos_emb", "core_attention", "linear_proj"):
        expect[f"{attention}/megatron.core.transformer.attention.forward.{name}"] = ("forward", per_layer)
    for name in ("linear_fc1", "activation", "linear_fc2"):
        expect[f"{mlp}/megatron.core.transformer.mlp.forward.{name}"] = ("forward", per_layer)
    expect["loss_func"] = ("other", FORWARDS)
    check_rank_file(c, tmp_path / "out", expect)
    c.done()


def test_deepspeed_engine_steps_only_at_accumulation_boundaries(build_dir: Path, tmp_path: Path) -> None:
    """deepspeed.initialize on the CPU accelerator, instrumented as the README says (the engine's
    module and optimizer): engine.step() every micro-batch, one step per ACCUM of them."""
    c = Checks()
    ran = run(build_dir, tmp_path / "out", "deepspeed-zero0", "deepspeed")
    c.check(ran["steps"] == STEPS and ran["enabled"] and ran["accelerator"] == "cpu", f"ran {ran}")
    check_rank_file(c, tmp_path / "out", sequential_expected())
    c.done()


def test_deepspeed_launcher_zero1_two_ranks(build_dir: Path, tmp_path: Path) -> None:
    """The deepspeed launcher (its runner and launch processes under the preload too), 2 ranks,
    ZeRO stage 1 (the engine's optimizer is DeepSpeed's ZeRO wrapper): each worker's file, none
    from the launcher."""
    c = Checks()
    ran = run(build_dir, tmp_path / "out", "deepspeed-zero1", "deepspeed", deepspeed=True)
    c.check(ran["steps"] == STEPS and ran["enabled"] and ran["optimizer"] == "DeepSpeedZeroOptimizer", f"ran {ran}")
    for rank in (0, 1):
        check_rank_file(c, tmp_path / "out", sequential_expected(), rank, 2)
    c.done()


def test_deepspeed_own_nvtx_ranges_nest_the_regions_unless_their_domain_is_left_out(build_dir: Path,
                                                                                   tmp_path: Path) -> None:
    """DeepSpeed's own NVTX ranges, as its CUDA accelerator emits them on a GPU (domain
    "DeepSpeed"), wrap the engine's forward and backward: the instrumented regions open inside
    them. TRAINTIME_NVTX_DOMAINS=*,-NCCL,-DeepSpeed (the README's advice) gives the paths of the
    CPU run back."""
    c = Checks()
    ran = run(build_dir, tmp_path / "nested", "deepspeed-zero0-cuda-nvtx", "deepspeed")
    c.check(ran["steps"] == STEPS and ran["enabled"], f"ran {ran}")
    nested: dict[str, tuple[str, int]] = {}
    for path, row in sequential_expected().items():
        top = path.split("/")[0]
        # backward's per-layer regions are start/end ranges with a top-level path of their own
        under = {"forward": "DeepSpeedEngine.forward/", "backward": "DeepSpeedEngine.backward/"}.get(top, "")
        nested[path if path.startswith("backward/") else under + path] = row
    nested["DeepSpeedEngine.forward"] = ("forward", FORWARDS)
    nested["DeepSpeedEngine.backward"] = ("backward", FORWARDS)
    nested["DeepSpeedEngine.backward/DeepSpeedEngine.allreduce_gradients"] = ("backward", FORWARDS)
    check_rank_file(c, tmp_path / "nested", nested)
    run(build_dir, tmp_path / "flat", "deepspeed-zero0-cuda-nvtx", "deepspeed",
        env_extra={"TRAINTIME_NVTX_DOMAINS": "*,-NCCL,-DeepSpeed"})
    check_rank_file(c, tmp_path / "flat", sequential_expected())
    c.done()
