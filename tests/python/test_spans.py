# SPDX-License-Identifier: MIT
"""Spans, requests, threads, fork, exceptions, generators, RINGPROF=0: the engine's
report against a reference computed here from the raw events of the segment."""
import os

import pytest

from rpharness import Run, read_segment, reference


def check_against_raw(run, only=None):
    """Every function of the report equals the brute-force reference from the
    producer's own records (calls, self, cumulative), exactly."""
    assert run.segments, "the producer's segment was kept"
    funcs = run.functions()
    checked = 0
    for seg in run.segments:
        names, events, _pid = read_segment(seg)
        ref = reference(names, events)
        for name, want in ref.items():
            if only is not None and name not in only:
                continue
            got = funcs[name]
            assert (got["calls"], got["self_ns"], got["cum_ns"]) == \
                (want["calls"], want["self_ns"], want["cum_ns"]), name
            checked += 1
    assert checked > 0
    return funcs


def no_anomalies(report):
    return {k: v for k, v in report["anomalies"].items() if v}


@pytest.fixture
def run_script(request):
    runs = []

    def go(name, script, **kw):
        r = Run(name, script, **kw)
        runs.append(r)
        return r
    yield go
    for r in runs:
        r.cleanup()


def test_nesting_exceptions_decorators(run_script):
    r = run_script("nest", """
        import ringprof
        outer, inner = ringprof.span("outer", "FUNCTION"), ringprof.span("inner")
        @ringprof.span("fib")
        def fib(n):
            return n if n < 2 else fib(n - 1) + fib(n - 2)
        class Boom(Exception):
            pass
        for i in range(3):
            with outer:
                with inner:
                    sum(range(1000))
                fib(6)
                try:
                    with inner:
                        raise Boom()
                except Boom:
                    pass
        print(fib.__name__, fib(3))
    """)
    assert r.out.split() == ["fib", "2"]
    f = check_against_raw(r)
    assert f["outer"]["calls"] == 3 and f["inner"]["calls"] == 6
    assert f["fib"]["calls"] == 3 * 25 + 5
    assert f["fib"]["primitive_calls"] == 4  # only the outermost call of each run
    assert f["outer"]["category"] == "FUNCTION"
    assert no_anomalies(r.report) == {}
    assert r.report["truncated"] == 0


def test_generator_suspended_in_span(run_script):
    r = run_script("gen", """
        import ringprof
        g_span, body = ringprof.span("gen_body"), ringprof.span("consumer")
        @ringprof.span("decorated_gen")
        def numbers(n):
            for i in range(n):
                yield i
        def produce():
            with g_span:            # open while the generator is suspended
                yield 1
                yield 2
        with ringprof.span("main"):
            for x in produce():
                with body:
                    pass
            assert list(numbers(4)) == [0, 1, 2, 3]
            it = numbers(3)
            next(it)
            it.close()            # a generator closed early closes its span
    """)
    f = check_against_raw(r)
    assert f["gen_body"]["calls"] == 1 and f["consumer"]["calls"] == 2
    assert f["decorated_gen"]["calls"] == 2
    assert no_anomalies(r.report) == {}


ASYNC = """
    import asyncio, contextvars, json, ringprof
    handle, prefill, decode, tool = (ringprof.span(n) for n in
                                     ("handle", "prefill", "decode", "tool"))
    @ringprof.span("tool_call")
    async def call_tool(i):
        await asyncio.sleep(0.02 + 0.01 * i)
    def blocking():
        with ringprof.span("in_executor"):
            sum(range(20000))
    async def one(i):
        async with ringprof.request():
            async with handle:
                with prefill:
                    await asyncio.sleep(0.01)     # held across an await
                await asyncio.gather(*(call_tool(k) for k in range(3)))
                loop = asyncio.get_running_loop()
                await loop.run_in_executor(None, contextvars.copy_context().run, blocking)
                await asyncio.to_thread(blocking)
                async with decode:
                    await asyncio.sleep(0.01)
                try:
                    async with ringprof.span("failing"):
                        await asyncio.sleep(0)
                        raise ValueError(i)
                except ValueError:
                    pass
    async def main():
        await asyncio.gather(*(one(i) for i in range(4)))
    asyncio.run(main())
    print(json.dumps({"dropped": ringprof.dropped()}))
"""


def test_asyncio_requests_gather_siblings(run_script):
    r = run_script("async", ASYNC)
    f = check_against_raw(r)
    rep = r.report
    assert no_anomalies(rep) == {} and rep["truncated"] == 0
    assert f["request"]["calls"] == 4 and f["request"]["category"] == "REQUEST"
    assert f["tool_call"]["calls"] == 12 and f["in_executor"]["calls"] == 8
    assert f["failing"]["calls"] == 4
    # Requests are the roots: 4 in flight at once, and never more.
    assert rep["concurrency"]["roots"]["max"] == 4
    # Siblings under the span open when they were made; 3 tool calls at once per
    # request: the union of their time, not the sum, is handle's child time.
    edges = {(e["caller"], e["callee"]) for e in rep["edges"]}
    assert ("handle", "tool_call") in edges and ("handle", "in_executor") in edges
    assert ("request", "handle") in edges and ("tool_call", "tool_call") not in edges
    assert f["handle"]["self_ns"] >= 0
    assert f["handle"]["cum_ns"] >= f["tool_call"]["cum_ns"] / 3


def test_threads(run_script):
    r = run_script("threads", """
        import threading, ringprof
        work = ringprof.span("work")
        def worker(n):
            for _ in range(n):
                with work:
                    with ringprof.span("leaf"):
                        pass
        ts = [threading.Thread(target=worker, args=(100 + i,)) for i in range(4)]
        for t in ts: t.start()
        for t in ts: t.join()
    """)
    f = check_against_raw(r)
    assert f["work"]["calls"] == 100 + 101 + 102 + 103
    assert no_anomalies(r.report) == {}


def test_fork_child_has_its_own_segment(run_script):
    r = run_script("fork", """
        import os, sys, ringprof
        with ringprof.span("parent_before"):
            pass
        pid = os.fork()
        if pid == 0:
            for _ in range(7):
                with ringprof.span("in_child"):
                    pass
            sys.exit(0)
        os.waitpid(pid, 0)
        with ringprof.span("parent_after"):
            pass
    """)
    assert len(r.segments) == 2
    pids = {read_segment(s)[2] for s in r.segments}
    assert len(pids) == 2
    assert len(r.report["sources"]) == 2
    f = check_against_raw(r)
    assert f["in_child"]["calls"] == 7 and f["parent_after"]["calls"] == 1


def test_emitted_equals_received_plus_dropped(run_script):
    r = run_script("drops", """
        import json, ringprof
        s = ringprof.span("x")
        n = 0
        for _ in range(50000):
            with s:
                pass
            n += 2
        for i in range(1000):
            ringprof.counter("c", i); ringprof.instant("i")
            n += 2
        print(json.dumps({"emitted": n, "dropped": ringprof.dropped()}))
    """, env={"RINGPROF_RING_EVENTS": "256"}, keep=False)
    res = r.result()
    rep = r.report
    assert res["dropped"] > 0, "the small ring should have overflowed"
    assert rep["events"] + res["dropped"] == res["emitted"]
    assert rep["dropped"] == res["dropped"]


def test_disabled(run_script):
    r = run_script("off", """
        import json, os, ringprof
        s = ringprof.span("x")
        with s:
            with ringprof.request():
                ringprof.counter("c", 1); ringprof.instant("i")
        @s
        def f():
            return 5
        with ringprof.profile():
            f()
        print(json.dumps({"enabled": ringprof.enabled(), "seg": ringprof.segment_path(),
                          "dropped": ringprof.dropped(), "f": f(), "id": s.id}))
    """, env={"RINGPROF": "0"})
    assert r.result() == {"enabled": False, "seg": None, "dropped": 0, "f": 5, "id": 0}
    assert r.segments == [] and r.report["events"] == 0
