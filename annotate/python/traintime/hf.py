"""Hugging Face Trainer in one line: ``Trainer(..., callbacks=[traintime.hf.Callback()])``.

When training begins, the callback calls ``traintime.torch.instrument`` on the model, the
optimizer and the training DataLoader the Trainer built, so every run shows ``forward``,
``backward`` (with ``backward/recompute`` under gradient checkpointing), ``optimizer`` and the
``dataloader`` region (io), and a step ends at each of the Trainer's optimizer steps: with
``gradient_accumulation_steps=N``, one step covers N micro-batches. Samples and tokens come from
each batch's ``input_ids`` (pass ``tokens_per_batch=`` for another count). Under ``torchrun``
(or ``accelerate launch``, which starts the same workers) every process writes its own rank file.
When training ends the instrumentation is taken off again, so evaluation afterwards adds nothing;
evaluation during training (``eval_strategy``) runs the model under it, and its forward calls
count as ``forward``.

Keyword arguments are ``instrument``'s: ``depth``, ``tokens_per_batch``, ``backward``, ``count``,
``dataloader`` (``False`` leaves the loader alone). Importing this module imports nothing of
transformers; ``Callback()`` imports it (for its ``TrainerCallback``), as the Trainer it is passed
to has. Without the preload the callback does nothing and says so once (a
``RuntimeWarning``).
"""
from __future__ import annotations

from typing import Any, Dict

from traintime._callback import Instrumenting, callback_class

__all__ = ["Callback"]

_classes: Dict[type, type] = {}


def _init(self: Any, *, dataloader: bool = True, **options: Any) -> None:
    Instrumenting.__init__(self, **options)
    self._dataloader = dataloader


def _on_train_begin(self: Any, args: Any, state: Any, control: Any, model: Any = None, optimizer: Any = None,
                    train_dataloader: Any = None, **kwargs: Any) -> None:
    self._start(model, optimizer, train_dataloader if self._dataloader else None)


def _on_train_end(self: Any, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
    self._stop()


def Callback(**options: Any) -> Any:  # noqa: N802 - a class to its users
    """A ``transformers.TrainerCallback`` that instruments the Trainer's model, optimizer and
    training DataLoader (see the module's documentation)."""
    from transformers import TrainerCallback
    cls = callback_class(TrainerCallback, _classes, {
        "__init__": _init, "on_train_begin": _on_train_begin, "on_train_end": _on_train_end,
        "__module__": __name__, "__doc__": __doc__})
    return cls(**options)
