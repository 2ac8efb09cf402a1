"""What the framework callbacks (traintime.hf, traintime.lightning) share: instrument when
training starts, take it off when training ends. Imports no framework."""
from __future__ import annotations

from typing import Any, Dict

import traintime
from traintime.torch import instrument


class Instrumenting:
    """Mixed in before a framework's callback class; ``options`` are ``instrument``'s."""

    def __init__(self, **options: Any) -> None:
        super().__init__()
        self._options = options
        self.handle: Any = None

    def _start(self, model: Any, optimizer: Any, dataloader: Any = None, forward_method: Any = None) -> None:
        if not traintime.enabled():
            traintime._warn_inactive(type(self).__module__ + ".Callback")
            return
        if model is None:
            return
        self.handle = instrument(model, optimizer, dataloader=dataloader, _forward_method=forward_method,
                                 **self._options)

    def _stop(self) -> None:
        if self.handle is not None:
            self.handle.remove()
            self.handle = None


def callback_class(base: type, cache: Dict[type, type], namespace: Dict[str, Any]) -> type:
    """``Callback(Instrumenting, base)`` with `namespace`'s methods, made once per base class."""
    cls = cache.get(base)
    if cls is None:
        cls = cache[base] = type("Callback", (Instrumenting, base), namespace)
    return cls
