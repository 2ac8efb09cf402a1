"""Hugging Face Trainer in one line: ``Trainer(..., callbacks=[traintime.hf.Callback()])``.

When training begins, the callback calls ``traintime.torch.instrument`` on the model, the
optimizer and the training DataLoader the Trainer built, so every run shows ``forward``,
``backward`` (with ``backward/recompute`` under gradient checkpointing), ``optimizer`` and the
``dataloader`` region (io), and a step ends at each of the Trainer's optimizer steps: with
``gradient_accumulation_steps=N``, one step covers N micro-batches. Samples and tokens come from
each batch's ``input_ids`` (pass ``tokens_per_batch=`` for another count). It works the same under
``torchrun`` and ``accelerate launch``: every process writes its own rank file. When training
ends the instrumentation is taken off again, so evaluation afterwards adds nothing.

Keyword arguments are ``instrument``'s: ``depth``, ``tokens_per_batch``, ``backward``, ``count``,
``dataloader`` (``False`` leaves the loader alone). Importing this module imports nothing of
transformers; ``Callback()`` uses the ``transformers`` the Trainer comes from. Without the preload
the callback does nothing.
"""
from __future__ import annotations

from typing import Any, Dict

import traintime
from traintime.torch import instrument

__all__ = ["Callback"]

_classes: Dict[type, type] = {}


def _callback_class(base: type) -> type:
    cls = _classes.get(base)
    if cls is not None:
        return cls

    def __init__(self: Any, *, dataloader: bool = True, **options: Any) -> None:
        base.__init__(self)
        self._options = options
        self._dataloader = dataloader
        self.handle: Any = None

    def on_train_begin(self: Any, args: Any, state: Any, control: Any, model: Any = None, optimizer: Any = None,
                       train_dataloader: Any = None, **kwargs: Any) -> None:
        if model is None or not traintime.enabled():
            return
        loader = train_dataloader if self._dataloader else None
        self.handle = instrument(model, optimizer, dataloader=loader, **self._options)

    def on_train_end(self: Any, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.handle is not None:
            self.handle.remove()
            self.handle = None

    cls = type("Callback", (base,), {"__init__": __init__, "on_train_begin": on_train_begin,
                                     "on_train_end": on_train_end, "__module__": __name__,
                                     "__doc__": __doc__})
    _classes[base] = cls
    return cls


def Callback(**options: Any) -> Any:  # noqa: N802 - a class to its users
    """A ``transformers.TrainerCallback`` that instruments the Trainer's model, optimizer and
    training DataLoader (see the module's documentation)."""
    from transformers import TrainerCallback
    return _callback_class(TrainerCallback)(**options)
