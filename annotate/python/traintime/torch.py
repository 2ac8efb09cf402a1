"""One-line PyTorch instrumentation: ``traintime.torch.instrument(model, optimizer)``.

After the call, every training step shows up as

* ``forward``   - the model's forward pass (module pre/post hooks);
* ``backward``  - every autograd backward pass (``loss.backward()``), timed on the calling
  thread. The training thread stays inside ``backward`` while autograd's device threads run, so
  GPU work they launch is attributed to it (DESIGN §4 rule 2);
* ``optimizer`` - ``optimizer.step()``, followed by ``traintime.step()``, so a step ends when
  the optimizer steps. With gradient accumulation, one step covers all its micro-batches. For
  ``optimizer.step(closure)`` the region opens when the closure (forward and backward) returns.
  Before each step ends, once CUDA is initialised, the caching allocator's figures on the
  current device (``torch.cuda.max_memory_allocated()``, ``max_memory_reserved()``,
  ``memory_allocated()`` and ``memory_reserved()``, host counters: no synchronisation) go to the
  rank file's ``steps.detail[].memory.torch``. The peaks are left alone (``"peaks": "run"``: from
  the process start or your own last ``reset_peak_memory_stats()``), so code that reads them sees
  what it would without traintime; ``reset_peak_memory=True`` resets them after every step
  (``"peaks": "step"``: each step's own peak, and your code then reads one step's);
* ``recompute`` - activation checkpointing's forward re-run during backward
  (``torch.utils.checkpoint.checkpoint``, reentrant and non-reentrant, and what builds on it:
  Hugging Face's gradient checkpointing, FSDP's ``checkpoint_wrapper``). It is a region of its
  own under ``backward`` (``backward/recompute``, per-module paths below it such as
  ``backward/recompute/0/attn``), never ``forward``, and it adds no samples or tokens. On a GPU
  autograd runs the recompute on its device threads, where the path is ``recompute``. Its
  category is ``recompute``, counted as compute time (docs/attribution.md).

Options (keyword names are the contract):

* ``depth=N`` adds a region per submodule down to N levels of the paths it produces, named after
  the module's attribute, so paths read ``forward/encoder/layers``. A container that is never
  called (``ModuleList``, ``ModuleDict``) spends no level, and its name stays in its children's
  paths: on GPT-2, ``depth=2`` reaches the blocks, ``forward/transformer/h/0``. The wrappers DDP
  (``module``), FSDP (``_fsdp_wrapped_module``), activation checkpointing
  (``_checkpoint_wrapped_module``) and ``torch.compile`` (``_orig_mod``) put around a module spend
  neither a level nor a name: the layer is the wrapper's (a checkpoint wrapper's re-run is
  ``backward/recompute/<its name>``). Forward regions are opened and closed by module hooks on
  the calling thread, so the GPU work each layer launches is attributed to it. Backward hooks run
  on autograd's threads, so per-module backward regions are cross-thread ranges
  (``traintime.range_start``), one top-level path per module such as ``backward/encoder/layers``,
  the same path as the module's forward region:
  they carry the CPU time and the count of each module's backward; GPU work launched by
  autograd's threads stays attributed to the training thread's open region (``backward``). They
  need ``register_full_backward_pre_hook`` (PyTorch 2.0 on); on PyTorch 1.13 only the forward
  per-module regions are added (``handle.backward_modules`` is then 0). Every region has an
  explicit category, so a module named ``data_embed`` is never taken for I/O.
* ``dataloader=loader``: the time the loop waits on the loader's iterator (every ``next()``)
  becomes a ``dataloader`` region in the ``io`` category.

Communication the library cannot see (gloo and MPI process groups run their collectives on the
CPU; NCCL's it interposes itself, and they are never counted twice) is timed here
(``traintime/_torch_comm.py``): every ``torch.distributed`` collective and, for a
``DistributedDataParallel`` model, its gradient buckets, through a communication hook that does
what DDP's default one does, registered at the first forward when the model has none. A hook the
user registers after ``instrument`` is wrapped (still run, and timed) instead of refused; one
registered before is left alone, and a warning says the buckets stay untimed. Each collective is a
``comm`` region named after its op and a record of its group, sequence number and CPU time, which
the report lines up across ranks to name the rank the others wait for.
* ``tokens_per_batch=``: tokens per forward call (an int), or a callable given the forward's
  arguments (``tokens_per_batch(*args, **kwargs)``; on PyTorch 1.13 ``*args`` only) that returns
  them. Without it, the tokens of a call are the element count of its first tensor argument when
  that is an integer tensor (token ids), else 0.
* ``backward=False`` leaves out the per-module backward regions (PyTorch's full backward hooks
  wrap a module's inputs and outputs; a model that later modifies such an output in place then
  raises, and modules without parameters, such as in-place activations, never get them).
* ``count=False`` reports zero samples and tokens; ``step=False`` leaves ``traintime.step`` to
  you.
* ``reset_peak_memory=True``: per-step allocator peaks, by resetting PyTorch's peak statistics
  after each step (see ``optimizer`` above); off by default, because it changes what
  ``torch.cuda.max_memory_allocated()`` returns to your own code.

Samples per step are the leading dimension of the model's first tensor argument, summed over the
step's forward calls; for a model called with keywords only (``model(**batch)``) that is
``input_ids``, else the first tensor keyword (PyTorch 2.0 on), and the default tokens count it too.

Frameworks that build the model and optimizer themselves: ``traintime.hf.Callback()`` (Hugging
Face Trainer) and ``traintime.lightning.Callback()`` (PyTorch Lightning) call ``instrument`` for
you; with Accelerate, instrument what ``accelerator.prepare`` returns
(``instrument(model, optimizer, dataloader=loader)``): under ``accelerator.accumulate()`` the
optimizer's calls that do not step (``gradient_state.sync_gradients`` false) are no step.

``torch.compile``: inside compiled code the hooks add no region (``torch.compiler.is_compiling()``),
so they never cause graph breaks. Instrument the compiled module (``instrument(torch.compile(model),
...)``): its own hooks run outside the compiled code, so ``forward``, samples and tokens stay,
while the per-module regions of compiled submodules are skipped and a compiled model gets no
per-module backward regions (full backward hooks do not work in compiled code). Compile first,
then instrument: a model compiled after instrumenting runs all its forward hooks inside compiled
code (no ``forward`` region, no samples or tokens), and with ``depth`` its full backward hooks
make PyTorch break the graph.

Calling ``instrument`` again on the same model or optimizer first removes the earlier
instrumentation, so nothing is counted twice. Everything is a no-op when libtraintime.so is not
preloaded (the model, optimizer and loader are left untouched), and ``instrument`` then says so
once, as a ``RuntimeWarning`` (not when ``TRAINTIME_DISABLE=1`` turned the profiler off).
"""
from __future__ import annotations

import functools
import inspect
import threading
import types
import warnings
from typing import Any, Callable, Dict, List, Optional, Union

import traintime
from traintime import _torch_comm
from traintime import _self_cost

__all__ = ["instrument", "Handle", "recompute_category"]

# Every hook below counts itself and times one call in _self_cost.EVERY (the rank file's
# self_cost row "traintime.torch hooks"); a hook around the application's own work (backward,
# the optimizer's step, the loader's next()) leaves that work out (two pairs of readings).
_now = _self_cost._now

_patch_lock = threading.Lock()
_backward_patched = False
_checkpoint_patched = False
_loader_classes: Dict[type, type] = {}

TokensPerBatch = Union[int, Callable[..., int], None]


def _never() -> bool:
    return False


def _compiling_check(torch: Any) -> Callable[[], bool]:
    """torch.compiler.is_compiling (2.1+), torch._dynamo.is_compiling (2.0), else never (1.13).
    Looked up once: the hooks call it directly, which torch.compile traces without a break."""
    compiler = getattr(torch, "compiler", None)
    if compiler is not None and hasattr(compiler, "is_compiling"):
        return compiler.is_compiling
    dynamo = getattr(torch, "_dynamo", None)
    if dynamo is not None and hasattr(dynamo, "is_compiling"):
        return dynamo.is_compiling
    return _never


_is_compiling: Callable[[], bool] = _never


def _first_tensor(args: Any, torch: Any) -> Any:
    for a in args:
        if isinstance(a, torch.Tensor):
            return a
    return None


def _never_in_backward() -> int:
    return -1


def _graph_task_check(torch: Any) -> Callable[[], int]:
    """torch._C._current_graph_task_id: -1 outside a backward pass (1.13 on)."""
    return getattr(getattr(torch, "_C", None), "_current_graph_task_id", _never_in_backward)


class _Recompute(threading.local):
    """Per thread: how many checkpointed functions are being re-run (recompute) right now."""

    def __init__(self) -> None:
        self.depth = 0


_recompute = _Recompute()


def recompute_category() -> str:
    """``recompute`` where the library has that category, else ``backward`` (recompute is
    backward-pass work)."""
    return "recompute" if "recompute" in traintime.CATEGORIES else "backward"


def _recomputing(fn: Callable[..., Any], region: Any, is_recompute: Callable[[], bool]) -> Callable[..., Any]:
    """`fn` inside `region` (and counted as recompute by the forward hooks) whenever
    `is_recompute()` holds when it is called."""

    def run(*args: Any, **kwargs: Any) -> Any:
        if not is_recompute():
            return fn(*args, **kwargs)
        _recompute.depth += 1
        try:
            with region:
                return fn(*args, **kwargs)
        finally:
            _recompute.depth -= 1

    run.__wrapped__ = fn  # type: ignore[attr-defined]
    return run


def _patch_checkpoint(torch: Any) -> None:
    """Marks activation checkpointing's re-run of forward as ``recompute``, once per process.

    Reentrant checkpointing (CheckpointFunction) calls its function twice: in forward under
    no_grad, and in backward under enable_grad (the recompute). Non-reentrant checkpointing calls
    its frame's recompute_fn only to recompute. Both are wrapped where they are stored, so every
    caller (torch.utils.checkpoint.checkpoint bound under any name, Hugging Face, FSDP's
    checkpoint_wrapper) is covered. A PyTorch without these internals keeps recompute in forward.
    """
    global _checkpoint_patched
    with _patch_lock:
        if _checkpoint_patched:
            return
        _checkpoint_patched = True
        try:
            import torch.utils.checkpoint as cp
        except Exception:
            return
        region = traintime.region("recompute", category=recompute_category())
        reentrant = getattr(cp, "CheckpointFunction", None)
        forward = getattr(reentrant, "forward", None)
        if forward is not None and _accepts(forward, "run_function"):
            grad_enabled = torch.is_grad_enabled

            def reentrant_forward(ctx: Any, run_function: Any, *args: Any) -> Any:
                return forward(ctx, _recomputing(run_function, region, grad_enabled), *args)

            reentrant_forward.__wrapped__ = forward  # type: ignore[attr-defined]
            reentrant.forward = staticmethod(reentrant_forward)
        frame = getattr(cp, "_CheckpointFrame", None)
        init = getattr(frame, "__init__", None)
        if init is not None and _accepts(init, "recompute_fn"):
            def frame_init(self: Any, recompute_fn: Any, *args: Any, **kwargs: Any) -> None:
                init(self, _recomputing(recompute_fn, region, _always), *args, **kwargs)

            frame_init.__wrapped__ = init  # type: ignore[attr-defined]
            frame.__init__ = frame_init


def _always() -> bool:
    return True


def _patch_backward(torch: Any) -> None:
    """Wraps torch.autograd.backward (what Tensor.backward calls) once per process. A backward
    called inside a backward pass (reentrant checkpointing's) adds no second region."""
    global _backward_patched
    with _patch_lock:
        if _backward_patched:
            return
        _backward_patched = True
        original = torch.autograd.backward
        backward_region = traintime.region("backward")
        graph_task = _graph_task_check(torch)

        cost = _self_cost.torch_hooks()

        def backward(*args: Any, **kwargs: Any) -> Any:
            if not cost.due():
                if graph_task() != -1:
                    return original(*args, **kwargs)
                with backward_region:
                    return original(*args, **kwargs)
            t0 = _now()
            if graph_task() != -1:
                cost.add(_now() - t0)
                return original(*args, **kwargs)
            backward_region.__enter__()
            t1 = _now()
            try:
                return original(*args, **kwargs)
            finally:
                t2 = _now()
                backward_region.__exit__(None, None, None)
                cost.add(t1 - t0 + _now() - t2, 2)

        backward.__wrapped__ = original  # type: ignore[attr-defined]
        backward.__doc__ = original.__doc__
        torch.autograd.backward = backward


def _accepts(fn: Callable[..., Any], name: str) -> bool:
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


# Attributes under which a wrapper keeps the module it wraps: the same layer, one level of
# attribute further down (FSDP1, activation checkpointing's checkpoint_wrapper, torch.compile).
# DDP's and DataParallel's `module` is one too.
_WRAPPED = ("_fsdp_wrapped_module", "_checkpoint_wrapped_module", "_orig_mod")


class _Layer:
    """A module `instrument(depth=N)` gives a region: its region's name (the path below its
    nearest enclosing region: "h/0" under "transformer", as a never-called container's name stays
    in its children's paths), its path below the model ("transformer/h/0": forward/<path> and
    backward/<path> are the same module) and whether it opens its region only when activation
    checkpointing re-runs it (a checkpoint wrapper's inner module)."""

    __slots__ = ("module", "region", "path", "recompute_only")

    def __init__(self, module: Any, region: str, path: str, recompute_only: bool) -> None:
        self.module, self.region, self.path, self.recompute_only = module, region, path, recompute_only


def _layers(root: Any, depth: int, torch: Any) -> List[_Layer]:
    """The layers of `root` down to `depth` levels of the paths they produce: a container that is
    never called (ModuleList, ModuleDict) spends no level and a wrapper (DDP's module, FSDP's and
    checkpoint_wrapper's inner module) neither, nor does it add its attribute's name."""
    containers = tuple(c for c in (getattr(torch.nn, "ModuleList", None), getattr(torch.nn, "ModuleDict", None)) if c)
    parallel = getattr(torch.nn, "parallel", None)
    ddp_like = tuple(c for c in (getattr(parallel, "DistributedDataParallel", None), getattr(torch.nn, "DataParallel", None))
                     if isinstance(c, type))
    out: List[_Layer] = []

    def walk(module: Any, path: List[str], level: int, since: List[str], own: Optional[str]) -> None:
        # path: names below the model; since: names below the nearest module with a region;
        # own: the region of `module` itself (None for the model, or beyond a region).
        for name, child in module.named_children():
            if name in _WRAPPED or (name == "module" and ddp_like and isinstance(module, ddp_like)):
                if name == "_checkpoint_wrapped_module" and own is not None:
                    out.append(_Layer(child, own, "/".join(path), True))
                walk(child, path, level, since, None)
                continue
            below = path + [name]
            if containers and isinstance(child, containers):
                walk(child, below, level, since + [name], None)
                continue
            if level + 1 > depth:
                continue
            region = "/".join(since + [name])
            out.append(_Layer(child, region, "/".join(below), False))
            walk(child, below, level + 1, [], region)

    walk(root, [], 0, [], None)
    return out


class _RegionStack(threading.local):
    """Per thread: the regions this instrumentation opened, innermost last."""

    def __init__(self) -> None:
        self.open: List[Any] = []


def _forward_hooks(module: Any, name: str, stack: _RegionStack, on_enter: Optional[Callable[..., None]],
                   with_kwargs: bool, always_call: bool, recompute_only: bool = False) -> List[Any]:
    """A pre/post hook pair around `module`'s forward that opens and closes a region `name`:
    category forward, or recompute while activation checkpointing re-runs it (then `on_enter`,
    which counts samples and tokens, is not called). `recompute_only`: only in the re-run (a
    checkpoint wrapper's inner module, whose forward region is the wrapper's)."""
    forward_region = traintime.region(name, category="forward")
    recompute_region = traintime.region(name, category=recompute_category())
    cost = _self_cost.torch_hooks()

    def enter(args: Any, kwargs: Any) -> None:
        if _is_compiling() or (recompute_only and not _recompute.depth):
            return
        if _recompute.depth:
            recompute_region.__enter__()
            stack.open.append(recompute_region)
            return
        forward_region.__enter__()
        stack.open.append(forward_region)
        if on_enter is not None:
            on_enter(args, kwargs)

    # While Dynamo traces, a hook does nothing of ours (enter() returns at once) and is neither
    # counted nor timed: the cost row's counter and clock must stay out of the traced graph.
    if with_kwargs:
        def pre_hook_kw(m: Any, args: Any, kwargs: Any) -> None:
            if not _is_compiling():
                cost.call(enter, args, kwargs)
        pre = module.register_forward_pre_hook(pre_hook_kw, with_kwargs=True)
    else:
        def pre_hook(m: Any, args: Any) -> None:
            if not _is_compiling():
                cost.call(enter, args, {})
        pre = module.register_forward_pre_hook(pre_hook)

    def leave() -> None:
        # Pops only what this pair pushed (a region skipped while compiling is not on the stack).
        if stack.open and (stack.open[-1] is forward_region or stack.open[-1] is recompute_region):
            stack.open.pop().__exit__(None, None, None)

    def post_hook(m: Any, args: Any, output: Any) -> None:
        if _is_compiling():
            leave()
        else:
            cost.call(leave)

    post = (module.register_forward_hook(post_hook, always_call=True) if always_call
            else module.register_forward_hook(post_hook))
    return [pre, post]


def _backward_range_hooks(module: Any, name: str) -> List[Any]:
    """Cross-thread ranges around `module`'s backward (PyTorch 2.0 on)."""
    open_ids: List[int] = []
    lock = threading.Lock()
    cost = _self_cost.torch_hooks()

    def start() -> None:
        if _is_compiling():
            return
        rid = traintime.range_start(name, category="backward")
        with lock:
            open_ids.append(rid)

    def end() -> None:
        if _is_compiling():
            return
        with lock:
            rid = open_ids.pop() if open_ids else 0
        if rid:
            traintime.range_end(rid)

    def pre_hook(m: Any, grad_output: Any) -> None:
        if not _is_compiling():
            cost.call(start)

    def post_hook(m: Any, grad_input: Any, grad_output: Any) -> None:
        if not _is_compiling():
            cost.call(end)

    # A module whose inputs need no gradient (an embedding of token ids) makes PyTorch warn that
    # the post hook fires at its outputs' gradients instead; these ranges expect exactly that.
    warnings.filterwarnings("ignore", category=UserWarning,
                            message="Full backward hook is firing when gradients are computed with respect to "
                                    "module outputs since no inputs require gradients")
    # A module whose output is not a tensor (a Hugging Face ModelOutput) never runs backward hooks,
    # and PyTorch warns at each forward: such a module gets no backward range, which is all it means.
    warnings.filterwarnings("ignore", category=UserWarning,
                            message="For backward hooks to be called, module output should be a Tensor")
    handles = [module.register_full_backward_pre_hook(pre_hook)]
    try:
        handles.append(module.register_full_backward_hook(post_hook))
    except Exception:
        handles[0].remove()
        raise
    return handles


def _set_class(obj: Any, cls: type) -> None:
    """obj.__class__ = cls, also for loaders whose class hides __class__ behind a read-only
    property (Accelerate's DataLoaderShard reports the DataLoader it wraps)."""
    object.__dict__["__class__"].__set__(obj, cls)


def _loader_subclass(cls: type, region: Any) -> type:
    """A subclass of the loader's class whose iterators time every next() as `region`."""
    sub = _loader_classes.get(cls)
    if sub is not None:
        return sub

    cost = _self_cost.torch_hooks()

    class _TimedIterator:
        def __init__(self, inner: Any) -> None:
            self._inner = inner

        def __iter__(self) -> "_TimedIterator":
            return self

        def __next__(self) -> Any:
            if not cost.due():
                with region:
                    return next(self._inner)
            t0 = _now()
            region.__enter__()
            t1 = _now()
            try:
                return next(self._inner)
            finally:
                t2 = _now()
                region.__exit__(None, None, None)
                cost.add(t1 - t0 + _now() - t2, 2)

        def __len__(self) -> int:
            return len(self._inner)

        def __getattr__(self, name: str) -> Any:
            return getattr(self._inner, name)

    def __iter__(self: Any) -> Any:
        return _TimedIterator(cls.__iter__(self))

    sub = type(cls.__name__, (cls,), {"__iter__": __iter__, "__module__": cls.__module__,
                                      "__qualname__": cls.__qualname__, "_traintime_original": cls})
    _loader_classes[cls] = sub
    return sub


def _memory_recorder(torch: Any, reset_peaks: bool) -> Callable[[], None]:
    """PyTorch's allocator view of the step that ends (steps.detail[].memory.torch) on the
    current device: the peaks of allocated and reserved memory and, where the library takes them,
    the amounts at the step's end. The peaks run from the start (or the user's own reset) unless
    ``reset_peaks``, which resets them after each step so that each is the step's own. Counters
    the caching allocator keeps on the host: no synchronisation. Nothing before CUDA is
    initialised (a CPU run) or with a library that lacks the entry; a library older than
    step_memory2 takes per-step peaks only, so the peaks are left alone there unless asked."""
    cuda = getattr(torch, "cuda", None)
    if cuda is None or not hasattr(cuda, "max_memory_reserved"):
        return _nothing
    record2 = traintime._step_memory2
    record = traintime._step_memory
    if record2 is None and (record is None or not reset_peaks):
        return _nothing

    def recorder() -> None:
        if not cuda.is_initialized():
            return
        device = cuda.current_device()
        allocated_peak = int(cuda.max_memory_allocated(device))
        reserved_peak = int(cuda.max_memory_reserved(device))
        if reset_peaks:
            cuda.reset_peak_memory_stats(device)
        if record2 is not None:
            record2(allocated_peak, reserved_peak, int(cuda.memory_allocated(device)),
                    int(cuda.memory_reserved(device)), 1 if reset_peaks else 0)
        else:
            record(allocated_peak, reserved_peak)
    return recorder


def _nothing() -> None:
    pass


def _batch_tensor(value: Any, torch: Any) -> Any:
    """The tensor a batch's samples are counted from: the batch itself, else the first tensor in
    it (a dict's ``input_ids`` first), looked for in tuples, lists and dicts."""
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, dict):
        items = ([value["input_ids"]] if "input_ids" in value else []) + list(value.values())
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        return None
    for item in items:
        t = _batch_tensor(item, torch)
        if t is not None:
            return t
    return None


class _MethodRegion:
    """`obj.<name>` (a bound method, e.g. a LightningModule's training_step) run inside `region`,
    with `on_enter` called with its arguments first; remove() puts the method back."""

    def __init__(self, obj: Any, name: str, region: Any, on_enter: Callable[..., None]) -> None:
        original = getattr(obj, name)

        @functools.wraps(original)
        def run(*args: Any, **kwargs: Any) -> Any:
            if _is_compiling():
                return original(*args, **kwargs)
            with region:
                on_enter(args, kwargs)
                return original(*args, **kwargs)

        object.__setattr__(obj, name, run)  # an instance attribute: nn.Module's __setattr__ is not needed
        self.obj, self.name = obj, name

    def remove(self) -> None:
        self.obj.__dict__.pop(self.name, None)


def instrument(model: Any, optimizer: Any = None, *, depth: int = 0, dataloader: Any = None,
               tokens_per_batch: TokensPerBatch = None, backward: bool = True, count: bool = True,
               step: bool = True, reset_peak_memory: bool = False, _forward_method: Optional[str] = None) -> "Handle":
    """Adds forward/backward/optimizer regions, step marks and, on request, per-module and
    data-loading regions to a PyTorch training loop (see the module's documentation).

    Returns a handle whose ``remove()`` takes it all off again (the backward wrapper stays: it
    is shared by every instrumented model). ``_forward_method`` (the Lightning callback's): the
    forward region is that method of the model (``training_step``), samples and tokens counted
    from its first argument, the batch, instead of the model's own forward.
    """
    global _is_compiling
    if depth < 0:
        raise ValueError("traintime: depth must be >= 0")
    if not traintime.enabled():
        traintime._warn_inactive("traintime.torch.instrument")
        return Handle([], None, None, None, None)
    import torch

    _is_compiling = _compiling_check(torch)

    for obj in (model, optimizer):
        previous = getattr(obj, "_traintime_handle", None)
        if previous is not None:
            previous.remove()

    with_kwargs = _accepts(model.register_forward_pre_hook, "with_kwargs")
    always_call = _accepts(model.register_forward_hook, "always_call")
    stack = _RegionStack()
    counts = {"samples": 0, "tokens": 0}

    def on_model_enter(args: Any, kwargs: Any) -> None:
        if not count:
            return
        if _forward_method:  # training_step(batch, batch_idx): the batch
            t = _batch_tensor(args[0] if args else kwargs.get("batch"), torch)
        else:
            t = _first_tensor(args, torch)
        if t is None and kwargs and not _forward_method:  # model(**batch), as Hugging Face's Trainer calls it
            t = kwargs.get("input_ids")
            if not isinstance(t, torch.Tensor):
                t = _first_tensor(kwargs.values(), torch)
        if t is not None and t.dim() > 0:
            counts["samples"] += int(t.shape[0])
        if tokens_per_batch is None:
            if t is not None and t.dim() > 0 and not t.is_floating_point() and not t.is_complex():
                counts["tokens"] += int(t.numel())
        elif callable(tokens_per_batch):
            counts["tokens"] += int(tokens_per_batch(*args, **kwargs))
        else:
            counts["tokens"] += int(tokens_per_batch)

    if _forward_method:
        hooks: List[Any] = [_MethodRegion(model, _forward_method, traintime.region("forward", category="forward"),
                                          on_model_enter)]
    else:
        hooks = _forward_hooks(model, "forward", stack, on_model_enter, with_kwargs, always_call)
    backward_modules = 0
    if depth > 0:
        # A torch.compile'd model (OptimizedModule): its layers are those of the original. Its
        # compiled code cannot run full backward hooks, so it gets no per-module backward ranges.
        inner = getattr(model, "_orig_mod", model)
        can_backward = backward and hasattr(model, "register_full_backward_pre_hook") and inner is model
        for layer in _layers(inner, depth, torch):
            hooks += _forward_hooks(layer.module, layer.region, stack, None, False, always_call, layer.recompute_only)
            # Full backward hooks wrap a module's inputs and outputs, which PyTorch refuses for
            # in-place activations: modules without parameters (ReLU, Dropout) get none.
            if not layer.recompute_only and can_backward and any(True for _ in layer.module.parameters()):
                try:
                    hooks += _backward_range_hooks(layer.module, "backward/" + layer.path)
                    backward_modules += 1
                except Exception:
                    pass  # a module whose backward cannot be hooked keeps its forward region only
    _patch_backward(torch)
    _patch_checkpoint(torch)
    # Collectives on gloo and MPI groups (NCCL's the library sees itself): comm regions and their
    # CPU times, and a DDP model's gradient buckets.
    _torch_comm.patch_distributed(torch)
    ddp_timing = _torch_comm.time_ddp(model, torch)

    original_step = None
    if optimizer is not None:
        original_step = optimizer.step
        record_memory = _memory_recorder(torch, reset_peak_memory)
        optimizer_region = traintime.region("optimizer", category="optimizer")

        cost = _self_cost.torch_hooks()

        # A bound method, like the original: LR schedulers wrap optimizer.step through __func__.
        def stepped(self: Any, *args: Any, **kwargs: Any) -> Any:
            if not cost.due():
                return step_body(self, original_step, args, kwargs)
            # The optimizer's own step (and the closure it runs) left out: timed apart.
            inner = [0]

            def timed_step(*a: Any, **k: Any) -> Any:
                s0 = _now()
                try:
                    return original_step(*a, **k)
                finally:
                    inner[0] += _now() - s0

            t0 = _now()
            try:
                return step_body(self, timed_step, args, kwargs)
            finally:
                cost.add(_now() - t0 - inner[0], 2)

        def step_body(self: Any, original_step: Any, args: Any, kwargs: Any) -> Any:
            # Accelerate's optimizer under accelerator.accumulate() is called every micro-batch
            # and steps only when gradients are synchronised: the other calls are no step.
            if not getattr(getattr(self, "gradient_state", None), "sync_gradients", True):
                return original_step(*args, **kwargs)
            closure = kwargs.get("closure", args[0] if args else None)
            if not callable(closure):
                with optimizer_region:
                    result = original_step(*args, **kwargs)
            else:
                # step(closure): the optimizer runs forward and backward first (Lightning's automatic
                # optimization does): the optimizer region opens when the closure returns.
                opened: List[bool] = []

                def closed(*cargs: Any, **ckwargs: Any) -> Any:
                    if opened:
                        return closure(*cargs, **ckwargs)
                    loss = closure(*cargs, **ckwargs)
                    optimizer_region.__enter__()
                    opened.append(True)
                    return loss

                if "closure" in kwargs:
                    kwargs["closure"] = closed
                else:
                    args = (closed,) + args[1:]
                try:
                    result = original_step(*args, **kwargs)
                finally:
                    if opened:
                        optimizer_region.__exit__(None, None, None)
            if step:
                record_memory()
                cost.report()  # the hooks' figures so far, before the step's mark
                traintime.step(counts["samples"], counts["tokens"])
            counts["samples"] = counts["tokens"] = 0
            return result

        # Keep the markers others set on the step function (LR schedulers check _with_counter to
        # warn about a scheduler stepping before the optimizer).
        stepped.__dict__.update(getattr(getattr(original_step, "__func__", original_step), "__dict__", {}))
        optimizer.step = types.MethodType(stepped, optimizer)

    loader_class = None
    if dataloader is not None:
        loader_class = type(dataloader)
        base = getattr(loader_class, "_traintime_original", loader_class)
        _set_class(dataloader, _loader_subclass(base, traintime.region("dataloader", category="io")))
        loader_class = base

    handle = Handle(hooks, optimizer, original_step, dataloader, loader_class)
    handle.backward_modules = backward_modules
    handle._ddp_timing = ddp_timing
    for obj in (model, optimizer):
        if obj is not None:
            try:
                obj._traintime_handle = handle
            except AttributeError:
                pass
    return handle


class Handle:
    """What instrument() changed; ``remove()`` undoes it."""

    def __init__(self, hooks: List[Any], optimizer: Any, original_step: Any, dataloader: Any,
                 loader_class: Optional[type]) -> None:
        self._hooks = hooks
        self._optimizer = optimizer
        self._original_step = original_step
        self._dataloader = dataloader
        self._loader_class = loader_class
        self._ddp_timing: Any = None
        #: Modules with per-module backward regions (0 on PyTorch 1.13 or without ``depth``).
        self.backward_modules = 0

    def remove(self) -> None:
        for h in self._hooks:
            h.remove()
        self._hooks = []
        if self._ddp_timing is not None:
            # DDP keeps a registered hook for good: it stops timing and runs the hook it wraps.
            self._ddp_timing.remove()
            self._ddp_timing = None
        if self._original_step is not None:
            self._optimizer.step = self._original_step
            self._original_step = None
        if self._dataloader is not None and self._loader_class is not None:
            _set_class(self._dataloader, self._loader_class)
            self._dataloader = None
