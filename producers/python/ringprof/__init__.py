# SPDX-License-Identifier: MIT
"""ringprof: live profiles of Python programs, through ringprof's shared-memory rings.

The recording paths (span enter/exit, the profile hook, counters) are C, in
ringprof._ringprof; this file only adds what is not a hot path: the decorators of
generator and async functions, and profile(). See docs/python.md.
"""
import functools
import inspect

from . import _cli

_cli.early()  # `python -m ringprof --session S ...`: before the extension reads it

import threading
import time

from ._ringprof import (charge, dropped, enabled, instant, link, mark, nullcontext,
                        segment_path, span, trace_calls)
from . import _ringprof

__all__ = ["span", "request", "counter", "instant", "link", "charge", "mark", "dropped", "enabled",
           "trace_calls", "profile", "nullcontext", "segment_path", "nat"]


def request(name="request", category=None, **attrs):
    """A request (docs/python.md). Attributes (model="m", endpoint="/generate") go into
    its name, `request{endpoint=/generate,model=m}` (keys sorted), so every figure,
    the slowest list and top tell requests of different attributes apart. Each distinct
    set of values is a name of its own: keep them to a few values (the name table is
    bounded, RINGPROF_NAMES; past it names are "[overflow]", counted)."""
    if attrs:
        name = "%s{%s}" % (name, ",".join("%s=%s" % (k, attrs[k]) for k in sorted(attrs)))
    if category is None:
        return _ringprof.request(name)
    return _ringprof.request(name, category)


RATE_NS = 1_000_000_000
_rates = {}
_rates_lock = threading.Lock()


def counter(name, value, rate=False):
    """counter(name, value): a sample of a counter series (queue length, batch size).

    rate=True: value is an increment (tokens just produced). The series `name` then gets
    the running total, and `name/s` the rate over each interval of at least 1 s (its
    increments over its length, measured here with time.monotonic_ns; sampled at the
    first increment after the interval's end, so an idle stretch lowers it as it
    lowers the throughput). A last interval shorter than 1 s is never sampled."""
    if not rate:
        return _ringprof.counter(name, value)
    now = time.monotonic_ns()
    with _rates_lock:
        st = _rates.get(name)
        if st is None:
            # total, interval start, total at its start (this increment is before it), name
            st = _rates[name] = [0, now, value, name + "/s"]
        st[0] += value
        total = st[0]
        sample = None
        if now - st[1] >= RATE_NS:
            sample = (st[0] - st[2]) * 1_000_000_000 // (now - st[1])
            st[1], st[2] = now, st[0]
    _ringprof.counter(name, total)
    if sample is not None:
        _ringprof.counter(st[3], sample)


def _decorate(sp, fn):
    """span(fn): the span covers each call; for a generator or a coroutine, its
    whole run (from its first step to its end, suspensions included)."""
    if inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def coro(*args, **kwargs):
            with sp:
                return await fn(*args, **kwargs)
        return coro
    if inspect.isasyncgenfunction(fn):
        @functools.wraps(fn)
        async def agen(*args, **kwargs):
            with sp:
                async for item in fn(*args, **kwargs):
                    yield item
        return agen
    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def gen(*args, **kwargs):
            with sp:
                return (yield from fn(*args, **kwargs))
        return gen
    return functools.update_wrapper(_ringprof._wrap(sp, fn), fn)


_ringprof._set_decorator(_decorate)


class profile:
    """with ringprof.profile(): every Python call (and C call with builtins=True) on
    this thread, and on threads started inside the block, cProfile-style. hook:
    "auto" (the frame-evaluation hook on CPython 3.11 unless builtins, else the
    profile hook), "profile" or "eval"."""

    def __init__(self, builtins=False, hook="auto"):
        self.builtins, self.hook = builtins, hook

    def __enter__(self):
        trace_calls(True, builtins=self.builtins, hook=self.hook)
        return self

    def __exit__(self, *exc):
        trace_calls(False)
        return False


def _patch_run_in_executor():
    """loop.run_in_executor(executor, fn) runs fn in another thread without the caller's
    context (Python's rule: contextvars are not copied), so spans in fn lose their
    request. Warn once (RuntimeWarning, to stderr by default) when it is called inside a
    request with fn a Python function (not a Context.run, as asyncio.to_thread passes,
    nor a C function such as getaddrinfo, which records no span); the fix is
    loop.run_in_executor(None, contextvars.copy_context().run, fn, *args). asyncio's own
    loops (BaseEventLoop); other loops (uvloop) are left alone."""
    import asyncio.base_events
    import contextvars
    import warnings

    base = asyncio.base_events.BaseEventLoop
    orig = base.run_in_executor
    if getattr(orig, "_ringprof", False):
        return
    warned = []

    def escapes(func):
        while isinstance(func, functools.partial):
            if isinstance(getattr(func.func, "__self__", None), contextvars.Context):
                return False
            func = func.func
        if isinstance(getattr(func, "__self__", None), contextvars.Context):
            return False
        return hasattr(func, "__code__") or hasattr(getattr(func, "__func__", None), "__code__")

    @functools.wraps(orig)
    def run_in_executor(self, executor, func, *args):
        if not warned and _ringprof._in_request() and escapes(func):
            warned.append(True)
            warnings.warn("ringprof: loop.run_in_executor() runs %r outside the request's "
                          "context, so its spans lose their request; pass "
                          "contextvars.copy_context().run, %s (docs/python.md)"
                          % (func, getattr(func, "__name__", "fn")), RuntimeWarning,
                          stacklevel=2)
        return orig(self, executor, func, *args)

    run_in_executor._ringprof = True
    base.run_in_executor = run_in_executor


if enabled():
    _patch_run_in_executor()

from . import nat  # noqa: E402  (needs the names above)
