"""Collectives PyTorch runs on the CPU, timed for ``traintime.torch.instrument``.

The library interposes NCCL and sees its kernels; the gloo and MPI process groups run their
collectives inside libtorch on the CPU, where nothing of traintime looks. So, for those groups
only (NCCL's calls are counted by the library already, never twice):

* every ``torch.distributed`` collective (``all_reduce``, ``broadcast``, ``reduce``, ``all_gather``,
  ``all_gather_into_tensor``, ``reduce_scatter``, ``reduce_scatter_tensor``, ``all_to_all``,
  ``all_to_all_single``, ``gather``, ``scatter``; synchronous or ``async_op=True``) and
* DDP's gradient buckets, through a communication hook that does what DDP's default one does
  (``allreduce_hook``), or wraps the hook the user registers after ``instrument``,

become a ``comm`` region named after the op (its CPU time per step) and a record handed to the
library (``tt_api_v1.collective``): the process group's id (equal on every member), its sequence
number on that group, its bytes, and its CPU time. The collectives of one group run one after the
other, so each one's time starts when it is issued or when the one before it completes, whichever
is later, and ends at its completion: on a rank that waits for a slow peer that is the waiting,
and the report lines the same collective up across ranks to find the rank the others wait for,
as it does with NCCL's GPU times (docs/report.md, stragglers).
"""
from __future__ import annotations

import atexit
import functools
import hashlib
import inspect
import threading
import time
import types
import warnings
import weakref
from collections import deque
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple

import traintime

# The collectives of torch.distributed timed here: (op as the rank file names it, which
# argument's bytes are the nccl-tests "bytes" of the call, times the group's size when True).
_OPS: Dict[str, Tuple[str, Tuple[str, ...], bool]] = {
    "all_reduce": ("AllReduce", ("tensor",), False),
    "broadcast": ("Broadcast", ("tensor",), False),
    "reduce": ("Reduce", ("tensor",), False),
    "all_gather": ("AllGather", ("tensor",), True),
    "all_gather_into_tensor": ("AllGather", ("output_tensor",), False),
    "reduce_scatter": ("ReduceScatter", ("input_list",), False),
    "reduce_scatter_tensor": ("ReduceScatter", ("input",), False),
    "all_to_all": ("AlltoAll", ("input_tensor_list",), False),
    "all_to_all_single": ("AlltoAll", ("input",), False),
    "gather": ("Gather", ("tensor",), True),
    "scatter": ("Scatter", ("tensor",), True),
}

_lock = threading.Lock()
_patched = False
# Per (id of a process group, backend): its timed group, and the reference that tells whether the
# id still names that process group (_reference).
_groups: Dict[Tuple[int, str], Tuple["_Group", Callable[[], Any]]] = {}


class _Inside(threading.local):
    """Per thread: inside a collective already timed (a DDP bucket's hook issuing its own
    all_reduce, or torch.distributed calling itself): not timed a second time."""

    def __init__(self) -> None:
        self.depth = 0


_inside = _Inside()


class _Pending:
    __slots__ = ("op", "region", "nbytes", "seq", "issued", "start", "range_id")

    def __init__(self, op: str, region: str, nbytes: int, seq: int, issued: int) -> None:
        self.op, self.region, self.nbytes, self.seq, self.issued = op, region, nbytes, seq, issued
        self.start = 0
        self.range_id = 0


class _Group:
    """One process group whose collectives run on the CPU: its id, equal on every member (its
    backend and its members' global ranks), the sequence numbers it hands out in call order, and
    the collectives issued and not complete, oldest first."""

    def __init__(self, gid: str, backend: str, size: int, rank: int) -> None:
        self.id, self.backend, self.size, self.rank = gid, backend, size, rank
        self.seq = 0
        self.pending: Deque[_Pending] = deque()
        self.lock = threading.Lock()

    def _begin(self, p: _Pending, now: int) -> None:
        p.start = now
        p.range_id = traintime.range_start(p.region, category="comm")

    def issue(self, op: str, nbytes: int, region: Optional[str] = None) -> _Pending:
        """A collective issued now; `region` names its comm region (default: the op)."""
        now = time.monotonic_ns()
        with self.lock:
            self.seq += 1
            p = _Pending(op, region or op, nbytes, self.seq, now)
            if not self.pending:
                self._begin(p, now)
            self.pending.append(p)
        return p

    def complete(self, p: _Pending) -> None:
        """Never raises: it runs in the user's call, or in the callback of their collective's future
        (a DDP bucket's), where an exception would fail their training."""
        try:
            self._complete(p)
        except Exception:
            pass

    def _complete(self, p: _Pending) -> None:
        now = time.monotonic_ns()
        with self.lock:
            try:
                self.pending.remove(p)
            except ValueError:
                return  # completed twice (a failed call's clean-up): counted once
            if not p.start:  # finished before one issued earlier (async work out of order)
                self._begin(p, now)
            ended = p.range_id
            if self.pending and not self.pending[0].start:
                self._begin(self.pending[0], now)
        if ended:
            traintime.range_end(ended)
        traintime._record_collective(self.id, self.backend, self.size, self.rank, p.op, p.nbytes, p.seq, p.start, now)


def _nbytes(value: Any) -> int:
    if isinstance(value, (list, tuple)):
        return sum(_nbytes(v) for v in value)
    try:
        return int(value.numel()) * int(value.element_size())
    except Exception:
        return 0


def _first_tensor(values: Any) -> Any:
    for v in values:
        if isinstance(v, (list, tuple)):
            v = _first_tensor(v)
        if v is not None and hasattr(v, "device") and hasattr(v, "numel"):
            return v
    return None


def _backend(dist: Any, group: Any, tensor: Any) -> Optional[str]:
    """The backend that runs a collective of `group` on `tensor`, lower case; None for NCCL (the
    library interposes it) or when it cannot be told."""
    try:
        name = str(dist.get_backend(group)).lower()
    except Exception:
        return None
    if ":" in name:  # "cpu:gloo,cuda:nccl": the tensor's device picks
        device = getattr(getattr(tensor, "device", None), "type", "cpu")
        for part in name.split(","):
            dev, _, backend = part.partition(":")
            if dev.strip() == device:
                name = backend.strip()
                break
        else:
            return None
    return None if name in ("", "nccl", "undefined") else name


def _group_ranks(dist: Any, group: Any) -> List[int]:
    get = getattr(dist, "get_process_group_ranks", None)
    if get is not None:
        return list(get(group))
    ranks = getattr(dist.distributed_c10d, "_pg_group_ranks", {}).get(group)  # PyTorch 1.13
    return sorted(ranks) if ranks else list(range(dist.get_world_size(group)))


def _group_of(dist: Any, group: Any, tensor: Any) -> Optional[_Group]:
    """The timed group a collective of `group` (None: the default one) on `tensor` runs in; None
    when it runs on NCCL or cannot be identified."""
    if group is None:
        group = dist.group.WORLD
    backend = _backend(dist, group, tensor)
    if backend is None:
        return None
    key = (id(group), backend)
    entry = _groups.get(key)
    if entry is not None and entry[1]() is group:
        return entry[0]
    try:
        ranks = _group_ranks(dist, group)
        rank = int(dist.get_rank(group))
    except Exception:
        return None
    gid = hashlib.blake2b(("%s|%s" % (backend, ",".join(map(str, ranks)))).encode(), digest_size=8).hexdigest()
    with _lock:  # two threads' first collectives on a group share one sequence
        entry = _groups.get(key)
        if entry is None or entry[1]() is not group:
            entry = _groups[key] = (_Group(gid, backend, len(ranks), rank), _reference(group, key))
    return entry[0]


def _reference(group: Any, key: Tuple[int, str]) -> Callable[[], Any]:
    """What the cache keeps of a process group: a weak reference, so that the cache never keeps a
    group the program has let go of (it kept every one, strongly). The entry leaves with its group,
    so a later group at the same address is never taken for it; something that cannot be
    referenced weakly (a stand-in) is kept."""
    def gone(ref: Any) -> None:
        entry = _groups.get(key)
        if entry is not None and entry[1] is ref:
            _groups.pop(key, None)  # no lock: a weak reference's callback may run inside any call

    try:
        return weakref.ref(group, gone)
    except TypeError:
        return lambda: group


def _timed(fn: Callable[..., Any], op: str, args_of_bytes: Tuple[str, ...], times_size: bool,
           dist: Any, compiling: Callable[[], bool]) -> Callable[..., Any]:
    sig = inspect.signature(fn)

    @functools.wraps(fn)
    def collective(*args: Any, **kwargs: Any) -> Any:
        # Inside compiled code nothing is added (no graph break), as traintime.torch's hooks do.
        if _inside.depth or compiling():
            return fn(*args, **kwargs)
        try:
            bound = sig.bind(*args, **kwargs)
            bound.apply_defaults()
            a = bound.arguments
            g = _group_of(dist, a.get("group"), _first_tensor(a.values()))
            p = g.issue(op, sum(_nbytes(a.get(name)) for name in args_of_bytes) * (g.size if times_size else 1)) \
                if g is not None else None
        except Exception:
            g, p = None, None
        if g is None or p is None:
            return fn(*args, **kwargs)
        _inside.depth += 1
        try:
            work = fn(*args, **kwargs)
        except BaseException:
            g.complete(p)
            raise
        finally:
            _inside.depth -= 1
        if a.get("async_op") and work is not None:
            _on_completion(work, lambda: g.complete(p))
        else:
            g.complete(p)
        return work

    collective.__wrapped__ = fn  # type: ignore[attr-defined]
    return collective


class _FutureCallback:
    """A Python callback given to a torch future's ``then``, which the group's thread (gloo's)
    runs and then frees, taking the GIL for each. A thread that takes the GIL once the interpreter
    has begun to shut down is ended by Python, and PyTorch's callback guard (PythonFunctionGuard)
    turns that into std::terminate: the process aborts at exit ("terminate called without an
    active exception"). So the callbacks that have run and are not freed yet are known
    (``_in_flight``: a set, whose add and discard need no lock), and ``_drain_at_exit`` gives the
    group's thread the GIL until they are freed, before the shutdown begins."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn

    def __call__(self, fut: Any) -> Any:
        _in_flight.add(id(self))
        return self.fn(fut)

    def __del__(self) -> None:
        _in_flight.discard(id(self))
        _last_freed[0] = time.monotonic()


_in_flight: set = set()
_last_freed = [float("-inf")]  # when the last callback of ours was freed (time.monotonic)
_DRAIN_MAX_S = 0.5  # a callback that ran is freed microseconds later; a bound, never a wait on a hang
# After ours, the same completion frees PyTorch's own callbacks (DDP's allreduce_hook's lambda),
# on the same thread and each with the GIL: given the GIL, that thread needs only to be scheduled,
# which on a loaded machine can take tens of milliseconds (2 ms was seen too short in a full test
# run on two cores). Waited only when a callback of ours was freed that recently.
_SETTLE_S = 0.1


def _drain_at_exit() -> None:
    """Python's exit functions run before its shutdown: while a callback of ours has run and is
    not yet freed, sleep (the GIL released) so the group's thread finishes with it, and until
    _SETTLE_S after the last one was freed for PyTorch's own callbacks freed after ours. Nothing
    when none is in flight and none was freed lately."""
    deadline = time.monotonic() + _DRAIN_MAX_S
    while _in_flight and time.monotonic() < deadline:
        time.sleep(0.001)
    rest = _last_freed[0] + _SETTLE_S - time.monotonic()
    if rest > 0:
        time.sleep(rest)


atexit.register(_drain_at_exit)


def _on_completion(work: Any, done: Callable[[], None]) -> None:
    """Calls done() when an async collective's work completes (its future), or now if its
    completion cannot be observed."""
    def callback(fut: Any) -> None:
        done()

    try:
        work.get_future().then(_FutureCallback(callback))
    except Exception:
        done()


def patch_distributed(torch: Any) -> None:
    """Times torch.distributed's collectives on non-NCCL groups, once per process."""
    global _patched
    with _lock:
        if _patched:
            return
        _patched = True
    try:
        import torch.distributed as dist
        if not dist.is_available():
            return
        c10d = dist.distributed_c10d
    except Exception:
        return
    compiler = getattr(torch, "compiler", None)
    compiling = getattr(compiler, "is_compiling", None) or getattr(getattr(torch, "_dynamo", None), "is_compiling",
                                                                   None) or (lambda: False)
    for name, (op, args_of_bytes, times_size) in _OPS.items():
        fn = getattr(c10d, name, None)
        if fn is None:
            continue
        try:
            wrapped = _timed(fn, op, args_of_bytes, times_size, dist, compiling)
        except (TypeError, ValueError):  # no signature to read: left as it is
            continue
        setattr(c10d, name, wrapped)
        if getattr(dist, name, None) is fn:
            setattr(dist, name, wrapped)


# ---- DDP's gradient buckets -------------------------------------------------------------------

def _user_hook_registered(model: Any) -> bool:
    if getattr(model, "_comm_hooks", None):
        return True
    try:
        return bool(model._get_ddp_logging_data().get("comm_hook"))
    except Exception:
        return False


class DdpTiming:
    """Times a DDP model's buckets: a communication hook registered at the first forward, when
    the user has registered none. A hook the user registers after ``instrument`` is wrapped
    instead of registered beside ours (DDP takes one), so that registration never fails.

    The model is referenced weakly: DDP's reducer (C++) holds the registered hook, which the garbage
    collector cannot see, so a hook holding its model kept the model (and what it holds) alive for
    good after the program let go of it."""

    def __init__(self, model: Any, dist: Any, group: _Group, default_hooks: Any) -> None:
        self.model_ref = weakref.ref(model)
        self.group = group
        self.default_hooks = default_hooks
        self.user: Optional[Tuple[Callable[..., Any], Any]] = None  # (hook, state)
        self.registered = False
        self.active = True
        self.pre_handle: Any = None

    # No annotations: DDP checks a hook's (its `bucket` must be dist.GradBucket or none), and this
    # module's are strings.
    def dispatch(self, state, bucket):  # type: ignore[no-untyped-def]
        hook, hook_state = self.user or (self.default_hooks.allreduce_hook, state)
        if not self.active:
            return hook(hook_state, bucket)
        # The user's own hook may run any collective (a compressed allreduce, PowerSGD's two): its
        # op is not known, its region is the hook's.
        op, region = ("AllReduce", "AllReduce") if self.user is None else ("unknown", "ddp_comm_hook")
        try:
            p = self.group.issue(op, _nbytes(bucket.buffer()), region)
        except Exception:  # never the user's training: this bucket goes untimed
            return hook(hook_state, bucket)
        _inside.depth += 1
        try:
            fut = hook(hook_state, bucket)
        except BaseException:
            self.group.complete(p)
            raise
        finally:
            _inside.depth -= 1

        def done(f: Any) -> Any:
            try:
                return f.value()
            finally:
                self.group.complete(p)

        return fut.then(_FutureCallback(done))

    def first_forward(self, module: Any, args: Any) -> None:
        if self.pre_handle is not None:
            self.pre_handle.remove()
            self.pre_handle = None
        if self.registered or _user_hook_registered(module):
            return
        self.registered = True
        try:
            type(module).register_comm_hook(module, module.process_group, self.dispatch)
        except Exception as e:  # never the user's training: it runs untimed
            self.active = False
            warnings.warn("traintime: DDP refused traintime's communication hook (%s); the gradient buckets "
                          "stay untimed" % e, RuntimeWarning, stacklevel=2)

    def register_comm_hook(self, model: Any, state: Any, hook: Callable[..., Any]) -> None:
        """The user's own hook, registered after instrument: ours times it."""
        if self.user is not None:  # as DDP itself: one hook per model
            return type(model).register_comm_hook(model, state, hook)
        if hasattr(model, "_check_comm_hook"):
            model._check_comm_hook(hook)  # the errors DDP would raise for a malformed hook
        self.user = (hook, state)
        self._settle(model)

    def register_builtin_comm_hook(self, model: Any, comm_hook_type: Any) -> None:
        """DDP's C++ hooks (ALLREDUCE, FP16_COMPRESS) as their Python equivalents, timed."""
        name = str(getattr(comm_hook_type, "name", comm_hook_type)).rsplit(".", 1)[-1]
        python = {"ALLREDUCE": "allreduce_hook", "FP16_COMPRESS": "fp16_compress_hook"}.get(name)
        if self.user is not None:  # a second hook: DDP says what it says without traintime
            return type(model)._register_builtin_comm_hook(model, comm_hook_type)
        if python is not None:
            self.user = (getattr(self.default_hooks, python), model.process_group)
            self._settle(model)
            return None
        if self.registered:
            warnings.warn("traintime: DDP's built-in %s hook cannot stand beside traintime's timing hook, "
                          "registered at the first forward; it is left out (register it before "
                          "traintime.torch.instrument, and the buckets go untimed)" % name,
                          RuntimeWarning, stacklevel=3)
            return None
        self.active = False  # DDP runs it in C++: nothing of ours in the way
        if self.pre_handle is not None:
            self.pre_handle.remove()
            self.pre_handle = None
        return type(model)._register_builtin_comm_hook(model, comm_hook_type)

    def _settle(self, model: Any) -> None:
        # Registered now if the first forward has passed (DDP takes a hook until backward).
        if not self.registered:
            self.first_forward(model, ())

    def remove(self) -> None:
        self.active = False
        if self.pre_handle is not None:
            self.pre_handle.remove()
            self.pre_handle = None
        model = self.model_ref()
        for name in ("register_comm_hook", "_register_builtin_comm_hook"):
            if model is not None:
                model.__dict__.pop(name, None)


def time_ddp(model: Any, torch: Any) -> Optional[DdpTiming]:
    """Times `model`'s buckets when it is a DDP model on a non-NCCL group (see DdpTiming)."""
    try:
        import torch.distributed as dist
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        ddp_class = torch.nn.parallel.DistributedDataParallel
    except Exception:
        return None
    if not isinstance(model, ddp_class):
        return None
    param = next((p for p in model.parameters()), None)
    group = _group_of(dist, getattr(model, "process_group", None), param)
    if group is None:
        return None  # NCCL: its calls are the library's
    if _user_hook_registered(model):
        warnings.warn("traintime: this DDP model's communication hook was registered before "
                      "traintime.torch.instrument, which cannot wrap it now: its gradient buckets stay untimed "
                      "on %s but for the torch.distributed collectives the hook itself calls (register the "
                      "hook after instrument to have each bucket timed)" % group.backend,
                      RuntimeWarning, stacklevel=3)
        return None
    timing = DdpTiming(model, dist, group, default_hooks)
    model.register_comm_hook = types.MethodType(timing.register_comm_hook, model)
    model._register_builtin_comm_hook = types.MethodType(timing.register_builtin_comm_hook, model)
    timing.pre_handle = model.register_forward_pre_hook(timing.first_forward)
    return timing
