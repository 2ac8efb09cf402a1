"""Tiny CPU training runs of the frameworks users train with, each instrumented by its one line
(test_frameworks.py runs them under LD_PRELOAD): Hugging Face's Trainer with
`traintime.hf.Callback()` on a GPT-2 built from a config (nothing is downloaded), PyTorch
Lightning with `traintime.lightning.Callback()`, and an Accelerate loop instrumenting what
`accelerator.prepare` returned. STEPS optimizer steps of ACCUM micro-batches of
BATCH sequences of SEQ tokens (per rank, also under torchrun); prints one JSON line saying what
ran."""
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
                                       callbacks=[traintime.hf.Callback(depth=3)])
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
            (ids,) = batch
            return torch.nn.functional.cross_entropy(self(ids).reshape(-1, VOCAB), ids.reshape(-1))

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


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("framework", choices=["hf", "hf-checkpointing", "lightning", "accelerate"])
    a = ap.parse_args()
    ran = (lightning() if a.framework == "lightning" else accelerate() if a.framework == "accelerate"
           else hf(a.framework == "hf-checkpointing"))
    ran["enabled"] = traintime.enabled()
    import traintime.torch
    ran["recompute_category"] = traintime.torch.recompute_category()
    print(json.dumps(ran))
