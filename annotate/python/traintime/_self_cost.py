"""What traintime's own Python hooks cost (the rank file's ``self_cost.callbacks``).

The hooks are timed the way the library times its hot paths (docs/schema.md "self_cost"):
every call is counted, and one in ``EVERY`` (from the ``PHASE``-th call on) is timed between two
``time.perf_counter_ns()`` readings, less the readings' own cost, measured once at import. The
library gets the figures so far through its annotation table (``report_cost``) before each step
ends and at exit, and makes the row's estimate from them: calls x the mean timed call.

A hook whose work is all traintime's runs it through ``call()``; one around the application's own
work counts with ``due()`` (one ``next()`` on an ``itertools.count``, atomic under the GIL) and,
when it returns True, times its own parts and hands the time to ``add()``.
"""
from __future__ import annotations

import atexit
import itertools
import threading
import time
from typing import Any, Callable, Optional

import traintime

EVERY = 64
PHASE = 16
_now = time.perf_counter_ns


def _pair_cost_ns() -> int:
    """The cost of two back-to-back readings: the median of 63 pairs."""
    pairs = []
    for _ in range(63):
        a = _now()
        pairs.append(_now() - a)
    pairs.sort()
    return pairs[len(pairs) // 2]


class HookCost:
    """One row: `what` of `module`, counted and sampled."""

    def __init__(self, module: str, what: str) -> None:
        self._module = module.encode("utf-8")
        self._what = what.encode("utf-8")
        self._count = itertools.count(1)
        self._reports = 0  # numbers report() took from the count (not calls)
        self._lock = threading.Lock()
        self.pair_ns = _pair_cost_ns()
        self.samples = 0
        self.sum_ns = 0
        self.sum_squares = 0.0

    def due(self) -> bool:
        """Counts one call; True when it is one to time."""
        return next(self._count) % EVERY == PHASE

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """fn(*args), counted, and timed when due (a hook whose work is all traintime's)."""
        if not self.due():
            return fn(*args)
        t0 = _now()
        try:
            return fn(*args)
        finally:
            self.add(_now() - t0)

    def add(self, ns: int, pairs: int = 1) -> None:
        """One timed call: `ns` between its readings, made of `pairs` pairs of them."""
        own = max(0, ns - pairs * self.pair_ns)
        with self._lock:
            self.samples += 1
            self.sum_ns += own
            self.sum_squares += float(own) * own

    def report(self) -> None:
        """Hands the figures so far to the library (no-op without one that takes them)."""
        report = traintime._report_cost
        if report is None:
            return
        with self._lock:
            calls = next(self._count) - 1 - self._reports
            self._reports += 1
            report(self._module, self._what, calls, EVERY, self.samples, self.sum_ns, self.sum_squares)


_hooks: Optional[HookCost] = None
_hooks_lock = threading.Lock()


def torch_hooks() -> HookCost:
    """The row of traintime.torch's hooks (made once; reported again at exit)."""
    global _hooks
    with _hooks_lock:
        if _hooks is None:
            _hooks = HookCost("torch", "traintime.torch hooks")
            atexit.register(_hooks.report)
        return _hooks
