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

from ._ringprof import (counter, dropped, enabled, instant, nullcontext, request,
                        segment_path, span, trace_calls)
from . import _ringprof

__all__ = ["span", "request", "counter", "instant", "dropped", "enabled", "trace_calls",
           "profile", "nullcontext", "segment_path", "nat"]


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


from . import nat  # noqa: E402  (needs the names above)
