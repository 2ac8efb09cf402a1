"""PyTorch Lightning in one line: ``Trainer(..., callbacks=[traintime.lightning.Callback()])``.

When training starts, the callback calls ``traintime.torch.instrument`` on the LightningModule
and the first of ``trainer.optimizers``: ``forward`` is the module's ``training_step``, whatever
it calls (``self(x)``, or submodules directly, ``self.encoder(x)``, as Lightning's own examples
do; per-layer paths with ``depth=``), ``backward`` every backward pass (``backward/recompute``
under activation checkpointing), and ``optimizer`` the optimizer's own work: Lightning runs
forward and backward inside ``optimizer.step(closure)``, and the region opens when that closure
returns. A step ends at each optimizer step, so ``accumulate_grad_batches=N`` gives one step per N
batches; samples and tokens are counted from the batch (its first tensor; a dict's ``input_ids``).
With manual optimization (``automatic_optimization = False``) training_step runs backward and the
optimizer too, so there ``forward`` is the module's forward, as with ``instrument``. Under DDP (``torchrun`` or Lightning's own launcher) every process
writes its own rank file. When training ends the instrumentation is taken off again.

Keyword arguments are ``instrument``'s: ``depth``, ``tokens_per_batch``, ``backward``, ``count``.
Works with ``lightning`` (``lightning.pytorch``) and with ``pytorch_lightning``, whichever the
program imported; importing this module imports neither. Without the preload the callback does
nothing and says so once (a ``RuntimeWarning``).
"""
from __future__ import annotations

import sys
from typing import Any, Dict

from traintime._callback import callback_class

__all__ = ["Callback"]

_classes: Dict[type, type] = {}


def _on_train_start(self: Any, trainer: Any, pl_module: Any) -> None:
    optimizers = list(getattr(trainer, "optimizers", None) or [])
    # `forward` is training_step: Lightning's own examples call submodules there (self.encoder(x)),
    # never the module's forward. With manual optimization training_step also runs backward and
    # the optimizer, so there the module's forward is the region, as for any model.
    automatic = getattr(pl_module, "automatic_optimization", True)
    self._start(pl_module, optimizers[0] if optimizers else None,
                forward_method="training_step" if automatic else None)


def _on_train_end(self: Any, trainer: Any, pl_module: Any) -> None:
    self._stop()


def Callback(**options: Any) -> Any:  # noqa: N802 - a class to its users
    """A Lightning ``Callback`` that instruments the LightningModule and its optimizer (see the
    module's documentation). Subclasses ``pytorch_lightning.Callback`` when the program imported
    ``pytorch_lightning`` and not ``lightning``, else ``lightning.pytorch.Callback``."""
    if "pytorch_lightning" in sys.modules and "lightning.pytorch" not in sys.modules:
        from pytorch_lightning import Callback as Base
    else:
        from lightning.pytorch import Callback as Base
    cls = callback_class(Base, _classes, {"on_train_start": _on_train_start, "on_train_end": _on_train_end,
                                          "__module__": __name__, "__doc__": __doc__})
    return cls(**options)
