# SPDX-License-Identifier: MIT
"""Spans and requests that end in error: an exception leaving the block (or a decorated
function), or an explicit span.error() / request.error(). The engine's per-name errors
must equal both the script's own count and the flagged END records of the producer's
raw segment (RP_SPAN_ERROR, read independently), exactly."""
import json

from rpharness import Run, read_segment

END_KINDS = (2, 6, 9)  # END, ASYNC_END, CHILD_END (wire.h)
RP_SPAN_ERROR = 0x01

SCRIPT = """
    import json, ringprof
    work, step = ringprof.span("work", "CPU"), ringprof.span("step", "CPU")
    want = {"work": 0, "step": 0, "deco": 0, "req": 0, "task": 0}
    class Boom(Exception):
        pass
    @ringprof.span("deco")
    def deco(i):
        if i % 3 == 0:
            raise Boom()
    for i in range(60):
        try:
            with work:
                with step:
                    if i % 5 == 0:
                        step.error()           # explicit, no exception
                        want["step"] += 1
                if i % 4 == 0:
                    want["work"] += 1
                    raise Boom()
        except Boom:
            pass
        try:
            deco(i)
        except Boom:
            want["deco"] += 1
    task = ringprof.span("task", "REQ")
    for i in range(40):
        try:
            with ringprof.request("req") as r:
                with task:
                    if i % 3 == 0:
                        task.error()
                        want["task"] += 1
                if i % 7 == 0:
                    r.error()
                    want["req"] += 1
                elif i % 5 == 0:
                    want["req"] += 1
                    raise Boom()
        except Boom:
            pass
    print(json.dumps(want))
"""


def test_errors_counted_exactly():
    r = Run("errors", SCRIPT, keep=True)
    try:
        want = r.result()
        funcs = r.functions()
        raw = {}
        for seg in r.segments:
            names, events, _pid = read_segment(seg)
            for (_ring, _ns, nm, kind, flags, _track, _arg) in events:
                if kind in END_KINDS and flags & RP_SPAN_ERROR:
                    raw[names[nm][0]] = raw.get(names[nm][0], 0) + 1
        assert r.segments, "the producer's segment was kept"
        for name, n in want.items():
            assert n > 0, name
            assert funcs[name]["errors"] == n, (name, funcs[name]["errors"], n)
            assert raw.get(name, 0) == n, (name, raw.get(name), n)
        assert funcs["work"]["calls"] == 60 and funcs["req"]["calls"] == 40
        cats = r.report["categories"]
        assert cats["CPU"]["errors"] == want["work"] + want["step"]
    finally:
        r.cleanup()
