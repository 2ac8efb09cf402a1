"""Annotations for the traintime profiler.

Pure ctypes, no compiled extension. When the process runs under
``LD_PRELOAD=libtraintime.so`` the calls reach the profiler through the ``tt_api_v1`` function
table it exports (see ``annotate/include/traintime/traintime.h``); otherwise every call is a
cheap no-op, so annotated code runs unchanged anywhere.

    import traintime

    with traintime.region("forward"):          # a region on this thread (they nest)
        ...

    @traintime.region("data_load")              # the same, as a decorator
    def next_batch(): ...

    traintime.step(samples=32, tokens=65536)    # the end of one training step
    traintime.set_flops(per_token=6 * n_params) # the model's FLOPs: TFLOP/s and MFU
    wandb.log(traintime.metrics())              # live metrics: {"traintime/step_ms": ..., ...}

Categories: an explicit ``category`` ("forward", "backward", "optimizer", "comm", "io",
"other", "recompute") wins; otherwise the profiler derives it from the name (``forward``/``fwd``,
``backward``/``bwd``, ``optimizer``/``optim``/``adam``/``sgd``, ``io``/``data``/``load``/...),
then from the enclosing region. A region named exactly ``step`` marks a step. ``recompute``
(forward work re-run during backward by activation checkpointing) is only ever given explicitly.
"""

from __future__ import annotations

import ctypes
import functools
import threading
import warnings
from typing import Any, Callable, Dict, Optional, TypeVar, Union

#: The project's version: CMake's ``project(traintime VERSION ...)``, as pyproject.toml says too
#: (tests/architecture/test_version.py keeps the three equal).
__version__ = "0.1.0"

__all__ = ["region", "step", "enabled", "range_start", "range_end", "set_flops", "metrics",
           "log_to_tensorboard", "CATEGORIES"]

_F = TypeVar("_F", bound=Callable[..., Any])

#: Category names in the order of the C enum tt_category (their index is the value).
CATEGORIES = ("forward", "backward", "optimizer", "comm", "io", "other", "recompute")
_CATEGORY_AUTO = -1


class _Collective(ctypes.Structure):
    """Mirror of ``tt_collective`` (append-only, like the table)."""

    _fields_ = [
        ("size", ctypes.c_uint32),
        ("group_size", ctypes.c_uint32),
        ("group_rank", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32),
        ("group", ctypes.c_char_p),
        ("backend", ctypes.c_char_p),
        ("op", ctypes.c_char_p),
        ("bytes", ctypes.c_uint64),
        ("seq", ctypes.c_uint64),
        ("start_ns", ctypes.c_uint64),
        ("end_ns", ctypes.c_uint64),
    ]


class _ApiV1(ctypes.Structure):
    """Mirror of ``tt_api_v1`` (append-only in C: members are only ever added at the end)."""

    _fields_ = [
        ("size", ctypes.c_uint32),
        ("version", ctypes.c_uint32),
        ("register_name", ctypes.CFUNCTYPE(ctypes.c_uint32, ctypes.c_char_p, ctypes.c_int)),
        ("push_id", ctypes.CFUNCTYPE(None, ctypes.c_uint32)),
        ("push", ctypes.CFUNCTYPE(None, ctypes.c_char_p)),
        ("push_category", ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p)),
        ("pop", ctypes.CFUNCTYPE(None)),
        ("range_start", ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_char_p)),
        ("range_end", ctypes.CFUNCTYPE(None, ctypes.c_uint64)),
        ("step", ctypes.CFUNCTYPE(None, ctypes.c_uint64, ctypes.c_uint64)),
        # Appended later (older libraries lack them: check ``size``).
        ("range_start_category", ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_int, ctypes.c_char_p)),
        ("set_flops", ctypes.CFUNCTYPE(None, ctypes.c_double, ctypes.c_double)),
        ("metrics", ctypes.CFUNCTYPE(ctypes.c_uint32, ctypes.c_void_p, ctypes.c_uint32)),
        ("step_memory", ctypes.CFUNCTYPE(None, ctypes.c_uint64, ctypes.c_uint64)),
        ("step_memory2", ctypes.CFUNCTYPE(None, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64,
                                          ctypes.c_uint64, ctypes.c_int)),
        ("collective", ctypes.CFUNCTYPE(None, ctypes.POINTER(_Collective))),
        ("report_cost", ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint64,
                                         ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64,
                                         ctypes.c_double)),
    ]


class _Metric(ctypes.Structure):
    """Mirror of ``tt_metric``."""

    _fields_ = [("name", ctypes.c_char_p), ("value", ctypes.c_double)]


# Why the API is off, when it is: the library is not in the process, TRAINTIME_DISABLE=1 turned
# it off (the user's choice: never warned about), or it is a library this package cannot use.
_NOT_PRELOADED = "not preloaded"
_DISABLED = "disabled"
_INCOMPATIBLE = "incompatible"


def _load_api():
    """The library's function table and, when there is none, why (one of the reasons above)."""
    try:
        getter = ctypes.CDLL(None).traintime_get_api_v1
    except (AttributeError, OSError):
        return None, _NOT_PRELOADED
    getter.restype = ctypes.POINTER(_ApiV1)
    getter.argtypes = []
    ptr = getter()
    if not ptr:
        return None, _DISABLED
    api = ptr.contents
    if api.version != 1 or api.size < _BASE_SIZE:
        return None, _INCOMPATIBLE
    return api, None


def _has(api: Any, member: str) -> bool:
    field = getattr(_ApiV1, member)
    return api is not None and api.size >= field.offset + field.size


# The members every library has; later ones are checked one by one.
_BASE_SIZE = _ApiV1.range_start_category.offset


_api, _off_reason = _load_api()
_warned_off = False
# Bound once: attribute access on a ctypes Structure builds a new function object each time.
_register = _api.register_name if _api else None
_push_id = _api.push_id if _api else None
_pop = _api.pop if _api else None
_range_start = _api.range_start if _api else None
_range_end = _api.range_end if _api else None
_step = _api.step if _api else None
_range_start_category = _api.range_start_category if _has(_api, "range_start_category") else None
_set_flops = _api.set_flops if _has(_api, "set_flops") else None
_metrics = _api.metrics if _has(_api, "metrics") else None
# An allocator's peaks of the step in progress (traintime.torch); None with older libraries.
_step_memory = _api.step_memory if _has(_api, "step_memory") else None
# The same with the step-end figures and the peaks' scope; None with older libraries.
_step_memory2 = _api.step_memory2 if _has(_api, "step_memory2") else None
# A collective timed on the CPU (gloo, MPI: traintime.torch); None with older libraries.
_collective = _api.collective if _has(_api, "collective") else None


def _record_collective(group: str, backend: str, group_size: int, group_rank: int, op: str, nbytes: int,
                       seq: int, start_ns: int, end_ns: int) -> None:
    """Hands one collective run on the CPU to the library (``tt_api_v1.collective``); times are
    ``time.monotonic_ns()``, the library's clock. Nothing without a library that takes them."""
    if _collective is None:
        return
    c = _Collective(ctypes.sizeof(_Collective), group_size, group_rank, 0, group.encode("ascii"),
                    backend.encode("ascii", "replace"), op.encode("ascii"), nbytes, seq, start_ns, end_ns)
    _collective(ctypes.byref(c))
# A caller's own cost (traintime.torch's hooks, timed in Python); None with older libraries.
_report_cost = _api.report_cost if _has(_api, "report_cost") else None
_METRICS_CAPACITY = 128

_ids = {}
_ids_lock = threading.Lock()


def enabled() -> bool:
    """True when the profiler is preloaded and active in this process."""
    return _api is not None


def _warn_inactive(what: str) -> None:
    """Warns once per process, through :mod:`warnings`, that `what` records nothing because the
    library is not preloaded (or is one this package cannot use); silent when the profiler is on
    or ``TRAINTIME_DISABLE=1`` turned it off."""
    global _warned_off
    if _api is not None or _off_reason == _DISABLED or _warned_off:
        return
    _warned_off = True
    if _off_reason == _INCOMPATIBLE:
        why = ("the preloaded libtraintime.so has an annotation table this package cannot use; use the "
               "Python package of the same build (annotate/python)")
    else:
        why = ("libtraintime.so is not preloaded; start the program with "
               "LD_PRELOAD=/path/to/build/lib/libtraintime.so (README: Quickstart)")
    warnings.warn("traintime: %s records nothing: %s" % (what, why), RuntimeWarning, stacklevel=3)


def _category_value(category: Union[str, int, None]) -> int:
    if category is None:
        return _CATEGORY_AUTO
    if isinstance(category, int) and 0 <= category < len(CATEGORIES):
        return category
    if isinstance(category, str) and category.lower() in CATEGORIES:
        return CATEGORIES.index(category.lower())
    raise ValueError(
        "traintime: unknown category %r; use one of %s" % (category, ", ".join(CATEGORIES))
    )


def _name_id(name: str, category: int) -> int:
    """Registers (name, category) once per process and returns its id (0 when disabled)."""
    key = (name, category)
    rid = _ids.get(key)
    if rid is None:
        with _ids_lock:
            rid = _ids.get(key)
            if rid is None:
                rid = int(_register(name.encode("utf-8"), category)) if _api else 0
                _ids[key] = rid
    return rid


class region:
    """A named region on the calling thread: ``with region("forward"):`` or ``@region(...)``.

    The name is registered once, when the region object is made; entering it costs one
    foreign call. Regions on one thread must nest (a ``with`` block guarantees it).
    """

    __slots__ = ("name", "category", "_id")

    def __init__(self, name: str, category: Union[str, int, None] = None) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError("traintime: a region name must be a non-empty string")
        self.name = name
        self.category = category
        self._id = _name_id(name, _category_value(category)) if _api else 0

    def __enter__(self) -> "region":
        if self._id:
            _push_id(self._id)
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        if self._id:
            _pop()
        return False

    def __call__(self, fn: _F) -> _F:
        rid = self._id

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if not rid:
                return fn(*args, **kwargs)
            _push_id(rid)
            try:
                return fn(*args, **kwargs)
            finally:
                _pop()

        return wrapper  # type: ignore[return-value]


def step(samples: int = 0, tokens: int = 0) -> None:
    """Marks the end of one training step that processed ``samples`` and ``tokens``."""
    if _api:
        _step(int(samples), int(tokens))


def range_start(name: str, category: Union[str, int, None] = None) -> int:
    """Starts a range that may end on another thread; returns its id (0 when disabled)."""
    if not _api:
        return 0
    if category is not None and _range_start_category:
        return int(_range_start_category(_category_value(category), name.encode("utf-8")))
    return int(_range_start(name.encode("utf-8")))


def range_end(range_id: int) -> None:
    """Ends a range returned by :func:`range_start`."""
    if _api:
        _range_end(int(range_id))


def set_flops(per_step: float = 0.0, per_token: float = 0.0) -> None:
    """The model's FLOPs, for achieved TFLOP/s and MFU (``traintime/tflops``, ``traintime/mfu``;
    with activation checkpointing also HFU, ``traintime/hfu``: docs/metrics.md).

    ``per_step``: FLOPs of one training step on this rank (all its micro-batches, forward and
    backward, without recompute: that is what HFU adds); or ``per_token``: FLOPs per token (6 x parameters is the usual estimate for a
    transformer's forward and backward), multiplied by each step's tokens. Call it once; a later
    call replaces both figures. ``TRAINTIME_FLOPS_PER_TOKEN`` sets the per-token figure without
    code.
    """
    if per_step < 0 or per_token < 0:
        raise ValueError("traintime: FLOPs must be >= 0")
    if _set_flops:
        _set_flops(float(per_step), float(per_token))


def metrics() -> Dict[str, float]:
    """The live metrics of the latest completed steps as a flat ``{"traintime/...": value}``.

    Cheap enough for every step: no GPU synchronisation, no file. CPU figures (``step_ms``,
    ``samples_per_s``, ...) belong to step ``traintime/step``; GPU figures (``gpu_compute_ms``,
    ``gpu_exposed_comm_ms``, ...) to ``traintime/gpu_step``, which trails it while CUPTI has not
    delivered the newer records; GPU health (``health_sm_clock_mhz``, ``health_throttled``, ...,
    from NVML) to ``traintime/health_step``. Names and units: docs/metrics.md. Empty when not
    profiled.
    """
    if not _metrics:
        return {}
    buf = (_Metric * _METRICS_CAPACITY)()
    n = min(int(_metrics(ctypes.addressof(buf), _METRICS_CAPACITY)), _METRICS_CAPACITY)
    return {buf[i].name.decode("ascii"): float(buf[i].value) for i in range(n)}


def log_to_tensorboard(writer: Any, step: Optional[int] = None,
                       values: Optional[Dict[str, float]] = None) -> Dict[str, float]:
    """Writes :func:`metrics` (or ``values``) to a TensorBoard ``SummaryWriter`` as scalars.

    ``step`` defaults to ``traintime/step``. Returns what it wrote.
    """
    values = metrics() if values is None else values
    if step is None:
        step = int(values.get("traintime/step", 0))
    for name, value in values.items():
        writer.add_scalar(name, value, step)
    return values
