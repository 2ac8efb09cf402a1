"""One-line PyTorch instrumentation: ``traintime.torch.instrument(model, optimizer)``.

After the call, every training step shows up as

* ``forward``   - the model's forward pass (module pre/post hooks);
* ``backward``  - every autograd backward pass (``loss.backward()``), timed on the calling
  thread. The training thread stays inside ``backward`` while autograd's device threads run, so
  GPU work they launch is attributed to it (DESIGN §4 rule 2);
* ``optimizer`` - ``optimizer.step()``, followed by ``traintime.step()``, so a step ends when
  the optimizer steps. With gradient accumulation, one step covers all its micro-batches.

Samples per step are counted from the leading dimension of the model's first tensor argument
in every forward pass of the step; tokens are its element count when it is an integer tensor
(token ids), else 0. Pass ``count=False`` to report zero samples and tokens, or call
``traintime.step`` yourself with ``step=False``.

Everything is a no-op when libtraintime.so is not preloaded.
"""

import threading
import types

import traintime

__all__ = ["instrument"]

_patch_lock = threading.Lock()
_backward_patched = False


def _first_tensor(args, torch):
    for a in args:
        if isinstance(a, torch.Tensor):
            return a
    return None


def _patch_backward(torch):
    """Wraps torch.autograd.backward (what Tensor.backward calls) once per process."""
    global _backward_patched
    with _patch_lock:
        if _backward_patched:
            return
        _backward_patched = True
        original = torch.autograd.backward
        backward_region = traintime.region("backward")

        def backward(*args, **kwargs):
            with backward_region:
                return original(*args, **kwargs)

        backward.__wrapped__ = original
        backward.__doc__ = original.__doc__
        torch.autograd.backward = backward


def instrument(model, optimizer, count=True, step=True):
    """Adds forward/backward/optimizer regions and step marks to a PyTorch training loop.

    Returns a handle whose ``remove()`` takes the model hooks and the optimizer wrapper off
    again (the backward wrapper stays: it is shared by every instrumented model).
    """
    import torch

    if not traintime.enabled():
        return _Handle([], optimizer, None)

    forward_region = traintime.region("forward")
    optimizer_region = traintime.region("optimizer")
    counts = {"samples": 0, "tokens": 0}
    # Forward hooks may be nested (a model called inside itself); pop only what we pushed.
    depth = threading.local()

    def pre_hook(module, args):
        depth.n = getattr(depth, "n", 0) + 1
        forward_region.__enter__()
        if count:
            t = _first_tensor(args, torch)
            if t is not None and t.dim() > 0:
                counts["samples"] += int(t.shape[0])
                if not t.is_floating_point() and not t.is_complex():
                    counts["tokens"] += int(t.numel())

    def post_hook(module, args, output):
        if getattr(depth, "n", 0) > 0:
            depth.n -= 1
            forward_region.__exit__(None, None, None)

    hooks = [model.register_forward_pre_hook(pre_hook), model.register_forward_hook(post_hook)]
    _patch_backward(torch)

    original_step = optimizer.step

    # A bound method, like the original: LR schedulers wrap optimizer.step through __func__.
    def stepped(self, *args, **kwargs):
        with optimizer_region:
            result = original_step(*args, **kwargs)
        if step:
            traintime.step(counts["samples"], counts["tokens"])
        counts["samples"] = counts["tokens"] = 0
        return result

    # Keep the markers others set on the step function (LR schedulers check _with_counter to
    # warn about a scheduler stepping before the optimizer).
    stepped.__dict__.update(getattr(getattr(original_step, "__func__", original_step), "__dict__", {}))
    optimizer.step = types.MethodType(stepped, optimizer)
    return _Handle(hooks, optimizer, original_step)


class _Handle:
    def __init__(self, hooks, optimizer, original_step):
        self._hooks = hooks
        self._optimizer = optimizer
        self._original_step = original_step

    def remove(self):
        for h in self._hooks:
            h.remove()
        self._hooks = []
        if self._original_step is not None:
            self._optimizer.step = self._original_step
            self._original_step = None
