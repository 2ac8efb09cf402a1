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

Categories: an explicit ``category`` ("forward", "backward", "optimizer", "comm", "io",
"other") wins; otherwise the profiler derives it from the name (``forward``/``fwd``,
``backward``/``bwd``, ``optimizer``/``optim``/``adam``/``sgd``, ``io``/``data``/``load``/...),
then from the enclosing region. A region named exactly ``step`` marks a step.
"""

import ctypes
import functools
import threading

__all__ = ["region", "step", "enabled", "range_start", "range_end", "CATEGORIES"]

#: Category names in the order of the C enum tt_category (their index is the value).
CATEGORIES = ("forward", "backward", "optimizer", "comm", "io", "other")
_CATEGORY_AUTO = -1


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
    ]


def _load_api():
    try:
        getter = ctypes.CDLL(None).traintime_get_api_v1
    except (AttributeError, OSError):
        return None  # libtraintime.so is not preloaded
    getter.restype = ctypes.POINTER(_ApiV1)
    getter.argtypes = []
    ptr = getter()
    if not ptr:
        return None  # TRAINTIME_DISABLE=1
    api = ptr.contents
    if api.version != 1 or api.size < ctypes.sizeof(_ApiV1):
        return None
    return api


_api = _load_api()
# Bound once: attribute access on a ctypes Structure builds a new function object each time.
_register = _api.register_name if _api else None
_push_id = _api.push_id if _api else None
_pop = _api.pop if _api else None
_range_start = _api.range_start if _api else None
_range_end = _api.range_end if _api else None
_step = _api.step if _api else None

_ids = {}
_ids_lock = threading.Lock()


def enabled():
    """True when the profiler is preloaded and active in this process."""
    return _api is not None


def _category_value(category):
    if category is None:
        return _CATEGORY_AUTO
    if isinstance(category, int) and 0 <= category < len(CATEGORIES):
        return category
    if isinstance(category, str) and category.lower() in CATEGORIES:
        return CATEGORIES.index(category.lower())
    raise ValueError(
        "traintime: unknown category %r; use one of %s" % (category, ", ".join(CATEGORIES))
    )


def _name_id(name, category):
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

    def __init__(self, name, category=None):
        if not isinstance(name, str) or not name:
            raise ValueError("traintime: a region name must be a non-empty string")
        self.name = name
        self.category = category
        self._id = _name_id(name, _category_value(category)) if _api else 0

    def __enter__(self):
        if self._id:
            _push_id(self._id)
        return self

    def __exit__(self, exc_type, exc, tb):
        if self._id:
            _pop()
        return False

    def __call__(self, fn):
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

        return wrapper


def step(samples=0, tokens=0):
    """Marks the end of one training step that processed ``samples`` and ``tokens``."""
    if _api:
        _step(int(samples), int(tokens))


def range_start(name):
    """Starts a range that may end on another thread; returns its id (0 when disabled)."""
    return int(_range_start(name.encode("utf-8"))) if _api else 0


def range_end(range_id):
    """Ends a range returned by :func:`range_start`."""
    if _api:
        _range_end(int(range_id))
