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
- Inside a ringprof.request() (the context's), an example is no request of its own:
  its calls are child spans of the request's track, under the request's innermost
  open span (and nested in one another as their STARTs and ENDs nest), so the request
  counts once in requests in flight and its figures hold the agent's calls.
- Bounded state: an example keeps the UUIDs of its open calls only (an END forgets
  its UUID); at most MAX_EXAMPLES examples are kept (least recently used first out,
  counted by evicted(); an evicted example's later steps start a new one). forget()
  still drops one at once.

Times: event_timestamp is wall-clock seconds (time.time()); it is converted from
its shortest decimal text to exact nanoseconds (as analyze reads the file), then
to the producer clock through the wall/monotonic offset. set_time_base() moves a
recorded trace's times (a replay) to another wall time.
"""
import collections
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
_ASYNC_BEGIN, _ASYNC_END, _CHILD_BEGIN, _CHILD_END = 5, 6, 8, 9

MAX_EXAMPLES = 1024  # examples kept (request= keys); past it the least recently used goes
_examples = collections.OrderedDict()  # request key -> _Example, least recently used first
_current = contextvars.ContextVar("ringprof.nat.example", default=None)
_names = {}
_shift_ns = None  # toolkit wall ns -> CLOCK_MONOTONIC ns: add this
_bad = 0
_evicted = 0


class _Example:
    __slots__ = ("track", "spans", "next", "parent", "stack")

    def __init__(self):
        at = _ringprof._request_span()  # (track, open span, id) in a request, else None
        self.parent = None if at is None else at[1]  # None: a request of its own
        self.track = _ringprof._next_track() if at is None else at[0]
        self.spans = {}  # UUID of an open call -> (span id, name id of its START)
        self.next = 0  # the last span id handed out (own track)
        self.stack = []  # open span ids, innermost last (nested examples)

    def new_span(self):
        if self.parent is None:
            self.next += 1
            return self.next
        return _ringprof._request_span()[2] if _ringprof._in_request() else None


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


def evicted():
    """Examples record() dropped at MAX_EXAMPLES (the least recently used)."""
    return _evicted


def _keyed(request):
    """The example of key `request`, made if new (the oldest evicted past the cap)."""
    global _evicted
    ex = _examples.get(request)
    if ex is not None:
        _examples.move_to_end(request)
        return ex
    while len(_examples) >= max(MAX_EXAMPLES, 1):
        _examples.popitem(last=False)
        _evicted += 1
    ex = _examples[request] = _Example()
    return ex


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
        ex = _keyed(request)
    else:
        ex = _current.get()
        if ex is None and _ringprof._in_request():  # this request's own example
            ex = _Example()
            _current.set(ex)
        elif ex is None:
            ex = _keyed(None)
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
        nid = _name_id(name, cat)
        span = ex.new_span()
        if span is None:  # a nested example's request is no longer in this context
            _bad += 1
            return
        if ex.parent is None:
            _ringprof._emit(_ASYNC_BEGIN, nid, ex.track, span, ns)
        else:
            up = ex.stack[-1] if ex.stack else ex.parent
            _ringprof._emit(_CHILD_BEGIN, nid, ex.track, up << 32 | span, ns)
            ex.stack.append(span)
        ex.spans[uuid] = (span, nid)
        return
    span, nid = ex.spans.pop(uuid, (None, 0))
    if ex.parent is None:  # an unknown UUID: an END the engine counts as unmatched
        _ringprof._emit(_ASYNC_END, nid, ex.track, span or ex.next + 1, ns)
        return
    if span is None:
        _bad += 1
        return
    if span in ex.stack:
        ex.stack.remove(span)
    _ringprof._emit(_CHILD_END, nid, ex.track, span, ns)


def forget(request):
    """Drop record()'s state of a finished example (its open UUIDs and track)."""
    _examples.pop(request, None)
