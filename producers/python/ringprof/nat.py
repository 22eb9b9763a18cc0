# SPDX-License-Identifier: MIT
"""ringprof.nat: the agent toolkit's IntermediateStep records, live.

record(step) turns one step (the toolkit's object, or a dict in the layout of
all_requests_profiler_traces.json: {"function_ancestry": {...}, "payload": {...}})
into ringprof events stamped with the step's own event_timestamp, with the rules
`ringprof analyze` applies to a trace file (engine/formats/import_nat.h):

- LLM, TOOL, FUNCTION and SPAN STARTs/ENDs are calls (SPAN counted as FUNCTION);
  the name is payload.name for LLM/TOOL and function_ancestry.function_name for
  FUNCTION/SPAN, "" or None giving unknown_llm/unknown_tool/unknown_function; the
  category is LLM, TOOL or FUNCTION. Other event types record nothing.
- One request per example: an async track, each call a span whose id is its UUID's
  number in the request, so the engine's stack rules (and anomaly counts) apply.
  The example is `request=` when given (the trace's request_number, say), else the
  one opened by the last WORKFLOW_START in this context (closed by WORKFLOW_END),
  else one default example.

Times: event_timestamp is wall-clock seconds (time.time()); it is converted from
its shortest decimal text to exact nanoseconds (as analyze reads the file), then
to the producer clock through the wall/monotonic offset. set_time_base() moves a
recorded trace's times (a replay) to another wall time.
"""
import contextvars
import decimal
import time

from . import _ringprof

_KINDS = {  # event type -> (is START, category)
    "LLM_START": (True, "LLM"), "LLM_END": (False, "LLM"),
    "TOOL_START": (True, "TOOL"), "TOOL_END": (False, "TOOL"),
    "FUNCTION_START": (True, "FUNCTION"), "FUNCTION_END": (False, "FUNCTION"),
    "SPAN_START": (True, "FUNCTION"), "SPAN_END": (False, "FUNCTION"),
}
_UNKNOWN = {"LLM": "unknown_llm", "TOOL": "unknown_tool", "FUNCTION": "unknown_function"}
_ASYNC_BEGIN, _ASYNC_END = 5, 6

_examples = {}  # request key -> _Example
_current = contextvars.ContextVar("ringprof.nat.example", default=None)
_names = {}
_shift_ns = None  # toolkit wall ns -> CLOCK_MONOTONIC ns: add this
_bad = 0


class _Example:
    __slots__ = ("track", "spans", "names")

    def __init__(self):
        self.track = _ringprof._next_track()
        self.spans = {}  # UUID -> span id (1, 2, ...)
        self.names = {}  # span id -> name id of its START


def _get(obj, key):
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(key)
    return getattr(obj, key, None)


def _ns(ts):
    """Exact nanoseconds of the timestamp's decimal text, half up."""
    if isinstance(ts, float):
        ts = repr(ts)
    d = decimal.Decimal(ts) * 1000000000
    return int(d.to_integral_value(rounding=decimal.ROUND_HALF_UP))


def set_time_base(toolkit_ns, wall_ns=None):
    """The step time toolkit_ns (ns since the epoch) happened at wall time wall_ns
    (default: now): shifts every later record()."""
    global _shift_ns
    if wall_ns is None:
        wall_ns = time.time_ns()
    _shift_ns = (wall_ns - toolkit_ns) - (time.time_ns() - time.monotonic_ns())


def _name_id(name, cat):
    key = (name, cat)
    nid = _names.get(key)
    if nid is None:
        nid = _names[key] = _ringprof._intern(name, cat, "", 0)
    return nid


def bad_steps():
    """Steps record() skipped: an unknown event type, no timestamp or no UUID."""
    return _bad


def record(step, request=None):
    """Emit the ringprof events of one IntermediateStep (see the module's doc)."""
    global _shift_ns, _bad
    if not _ringprof.enabled():
        return
    payload = _get(step, "payload")
    etype = _get(payload, "event_type")
    etype = getattr(etype, "value", etype)
    if etype == "WORKFLOW_START" and request is None:
        _current.set(_Example())
        return
    if etype == "WORKFLOW_END" and request is None:
        _current.set(None)
        return
    kind = _KINDS.get(etype)
    if kind is None:
        if not isinstance(etype, str) or not etype.endswith(("_START", "_END", "_TOKEN",
                                                             "_CHUNK")):
            _bad += 1
        return
    start, cat = kind
    ts, uuid = _get(payload, "event_timestamp"), _get(payload, "UUID")
    if ts is None or isinstance(ts, bool) or not isinstance(uuid, str):
        _bad += 1
        return
    if request is not None:
        ex = _examples.get(request)
        if ex is None:
            ex = _examples[request] = _Example()
    else:
        ex = _current.get()
        if ex is None:
            ex = _examples.get(None)
            if ex is None:
                ex = _examples[None] = _Example()
    span = ex.spans.get(uuid)
    if span is None:
        span = ex.spans[uuid] = len(ex.spans) + 1
    if _shift_ns is None:
        _shift_ns = time.monotonic_ns() - time.time_ns()
    ns = _ns(ts) + _shift_ns
    if start:
        if cat == "FUNCTION":
            name = _get(_get(step, "function_ancestry"), "function_name")
        else:
            name = _get(payload, "name")
        if not isinstance(name, str) or name == "":
            name = _UNKNOWN[cat]
        nid = ex.names[span] = _name_id(name, cat)
        _ringprof._emit(_ASYNC_BEGIN, nid, ex.track, span, ns)
    else:
        _ringprof._emit(_ASYNC_END, ex.names.get(span, 0), ex.track, span, ns)


def forget(request):
    """Drop record()'s state of a finished example (its UUIDs and track)."""
    _examples.pop(request, None)
