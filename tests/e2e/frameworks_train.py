"""Tiny CPU training runs of the frameworks users train with, each instrumented by its one line
(test_frameworks.py runs them under LD_PRELOAD): Hugging Face's Trainer with
`traintime.hf.Callback()` on a GPT-2 built from a config (nothing is downloaded), PyTorch
Lightning with `traintime.lightning.Callback()`, an Accelerate loop instrumenting what
`accelerator.prepare` returned, Megatron-core's GPT layers with their NVTX ranges on (only
`traintime.step()` added) and DeepSpeed's engine instrumented through its module and optimizer.
STEPS optimizer steps of ACCUM micro-batches of BATCH sequences of SEQ tokens (per rank, also
under torchrun or the deepspeed launcher); rank 0 prints one JSON line saying what ran."""
from __future__ import annotations

import argparse
import json
import os
import tempfile

import torch

import traintime

STEPS, ACCUM, BATCH, SEQ, VOCAB = 3, 2, 4, 8, 64


def token_ids() -> torch.Tensor:
    """Enough batches for STEPS steps on every rank (torchrun sets WORLD_SIZE)."""
    torch.manual_seed(0)
    return torch.randint(0, VOCAB, (STEPS * ACCUM * BATCH * int(os.environ.get("WORLD_SIZE", "1")), SEQ))


def hf(checkpointing: bool) -> dict:
    import transformers

    import traintime.hf

    transformers.logging.set_verbosity_error()
    config = transformers.GPT2Config(vocab_size=VOCAB, n_positions=SEQ, n_embd=16, n_layer=2, n_head=2)
    model = transformers.GPT2LMHeadModel(config)
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    data = [{"input_ids": ids, "labels": ids} for ids in token_ids()]
    with tempfile.TemporaryDirectory() as out:
        args = transformers.TrainingArguments(
            output_dir=out, per_device_train_batch_size=BATCH, gradient_accumulation_steps=ACCUM,
            max_steps=STEPS, use_cpu=True, report_to=[], save_strategy="no", logging_strategy="no",
            disable_tqdm=True, dataloader_num_workers=0, seed=0)
        trainer = transformers.Trainer(model=model, args=args, train_dataset=data,
                                       callbacks=[traintime.hf.Callback(depth=2)])
        trainer.train()
    return {"framework": "transformers", "version": transformers.__version__, "steps": trainer.state.global_step}


def lightning() -> dict:
    import lightning as L

    import traintime.lightning

    class Net(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(VOCAB, 16)
            self.head = torch.nn.Linear(16, VOCAB)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.head(self.embed(ids))

        def training_step(self, batch: list, batch_idx: int) -> torch.Tensor:
            # Submodules called directly, as Lightning's own examples do (not self(ids)).
            (ids,) = batch
            logits = self.head(self.embed(ids))
            return torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), ids.reshape(-1))

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.01)

    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(token_ids()), batch_size=BATCH)
    trainer = L.Trainer(accelerator="cpu", devices=1, max_steps=STEPS, accumulate_grad_batches=ACCUM,
                        logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=[traintime.lightning.Callback(depth=1)])
    trainer.fit(Net(), loader)
    return {"framework": "lightning", "version": L.__version__, "steps": trainer.global_step}


def accelerate() -> dict:
    import accelerate

    import traintime.torch

    model = torch.nn.Sequential(torch.nn.Embedding(VOCAB, 16), torch.nn.Linear(16, VOCAB))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(token_ids()), batch_size=BATCH)
    acc = accelerate.Accelerator(cpu=True, gradient_accumulation_steps=ACCUM)
    model, opt, loader = acc.prepare(model, opt, loader)
    traintime.torch.instrument(model, opt, depth=1, dataloader=loader)
    steps = 0
    for (ids,) in loader:
        with acc.accumulate(model):
            loss = torch.nn.functional.cross_entropy(model(ids).reshape(-1, VOCAB), ids.reshape(-1))
            acc.backward(loss)
            opt.step()
            steps += int(acc.sync_gradients)
            opt.zero_grad()
    return {"framework": "accelerate", "version": accelerate.__version__, "steps": steps}


def one_process_rendezvous() -> None:
    """What a launcher would set, for a run without one: a world of this one process (the test
    passes a free MASTER_PORT)."""
    for name, value in (("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", "29500"), ("RANK", "0"),
                        ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1")):
        os.environ.setdefault(name, value)


def megatron() -> dict:
    """Megatron-core's GPT model (two layers, its layer spec without Transformer Engine) trained in
    a plain loop with NVTX ranges on, as Megatron-LM's --nvtx-ranges turns them on: the regions are
    Megatron's own ranges (torch.cuda.nvtx inside its layers; its nvtx_decorator(), which uses the
    `nvtx` package, on the loss function) and the one traintime line is traintime.step() after
    each optimizer step."""
    import torch.distributed as dist

    one_process_rendezvous()
    dist.init_process_group("gloo")
    import megatron.core
    from megatron.core import parallel_state
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.models.gpt.gpt_model import GPTModel
    from megatron.core.tensor_parallel.random import initialize_rng_tracker
    from megatron.core.transformer.transformer_config import TransformerConfig
    from megatron.core.utils import GlobalMemoryBuffer, configure_nvtx_profiling, nvtx_decorator

    configure_nvtx_profiling(True)
    parallel_state.initialize_model_parallel(1, 1)
    # Megatron's training tracker forks CUDA's random state around dropout; its inference tracker
    # leaves the random state alone (the CPU generator is used as is).
    initialize_rng_tracker(inference_rng_tracker=True)

    # The one CUDA-only piece on this path: attention's scratch buffer is allocated on the current
    # CUDA device. Here the same tensor comes from the CPU.
    def cpu_buffer(self: object, tensor_shape: tuple, dtype: torch.dtype, name: str,
                   mem_alloc_context: object = None) -> torch.Tensor:
        return torch.empty(tensor_shape, dtype=dtype)

    GlobalMemoryBuffer.get_tensor = cpu_buffer
    config = TransformerConfig(num_layers=2, hidden_size=16, num_attention_heads=2, use_cpu_initialization=True,
                               pipeline_dtype=torch.float32)
    model = GPTModel(config=config, transformer_layer_spec=get_gpt_layer_local_spec(), vocab_size=VOCAB,
                     max_sequence_length=SEQ)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    @nvtx_decorator(message="loss_func")
    def loss_func(per_token: torch.Tensor) -> torch.Tensor:
        return per_token.float().mean() / ACCUM

    batches = token_ids().split(BATCH)
    position_ids = torch.arange(SEQ).expand(BATCH, SEQ)
    causal = torch.ones(BATCH, 1, SEQ, SEQ, dtype=torch.bool).triu(1)  # True: masked out
    for step in range(STEPS):
        for micro in range(ACCUM):
            ids = batches[step * ACCUM + micro]
            loss_func(model(ids, position_ids, causal, labels=ids)).backward()
        opt.step()
        opt.zero_grad()
        traintime.step(samples=ACCUM * BATCH, tokens=ACCUM * BATCH * SEQ)
    dist.destroy_process_group()
    return {"framework": "megatron-core", "version": megatron.core.__version__, "steps": STEPS}


def deepspeed(stage: int, cuda_nvtx: bool) -> dict:
    """DeepSpeed's engine on its CPU accelerator (gloo), ZeRO stage `stage`, instrumented as the
    README says: the inner module and the engine's optimizer, the engine's DataLoader.
    cuda_nvtx: DeepSpeed's own NVTX ranges (instrument_w_nvtx on the engine's forward, backward,
    allreduce_gradients) go through the accelerator, and the CPU accelerator's range_push does
    nothing; here they go through the CUDA accelerator's, as on a GPU (the `nvtx` package, domain
    "DeepSpeed")."""
    import deepspeed as ds
    from deepspeed.accelerator import get_accelerator

    import traintime.torch

    if cuda_nvtx:
        from deepspeed.accelerator.cuda_accelerator import CUDA_Accelerator

        cuda = CUDA_Accelerator()  # its NVTX calls need no device
        cpu = type(get_accelerator())
        cpu.supports_nvtx_domain = True
        cpu.range_push = lambda self, msg, domain=None, category=None: cuda.range_push(msg, domain, category)
        cpu.range_pop = lambda self, domain=None: cuda.range_pop(domain)

    one_process_rendezvous()
    ds.init_distributed(dist_backend="gloo")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(VOCAB, 16), torch.nn.Linear(16, VOCAB))
    config = {"train_micro_batch_size_per_gpu": BATCH, "gradient_accumulation_steps": ACCUM,
              "zero_optimization": {"stage": stage}, "zero_allow_untested_optimizer": True}
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    engine, _, loader, _ = ds.initialize(model=model, optimizer=opt, config=config,
                                         training_data=torch.utils.data.TensorDataset(token_ids()))
    traintime.torch.instrument(engine.module, engine.optimizer, depth=1, dataloader=loader)
    for (batch,) in loader:
        loss = torch.nn.functional.cross_entropy(engine(batch).reshape(-1, VOCAB), batch.reshape(-1))
        engine.backward(loss)
        engine.step()
    return {"framework": "deepspeed", "version": ds.__version__, "steps": engine.global_steps,
            "accelerator": get_accelerator().device_name(), "optimizer": type(engine.optimizer).__name__}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("framework", choices=["hf", "hf-checkpointing", "lightning", "accelerate", "megatron",
                                          "deepspeed-zero0", "deepspeed-zero1", "deepspeed-zero0-cuda-nvtx"])
    ap.add_argument("--local_rank", type=int, default=0, help="the deepspeed launcher passes it")
    a = ap.parse_args()
    ran = (lightning() if a.framework == "lightning" else accelerate() if a.framework == "accelerate"
           else megatron() if a.framework == "megatron"
           else deepspeed(int(a.framework[len("deepspeed-zero")]), a.framework.endswith("cuda-nvtx"))
           if a.framework.startswith("deepspeed")
           else hf(a.framework == "hf-checkpointing"))
    ran["enabled"] = traintime.enabled()
    import traintime.torch
    ran["recompute_category"] = traintime.torch.recompute_category()
    if os.environ.get("RANK", "0") == "0":
        print(json.dumps(ran))
