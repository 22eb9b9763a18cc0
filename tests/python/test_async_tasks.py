# SPDX-License-Identifier: MIT
"""Spans held across `await` outside any request: each coroutine's span gets a track of
its own (docs/python.md), so two tasks interleaving on the loop thread are measured
exactly: calls, primitive calls and cumulative time against the brute-force reference
from the raw records, and against the script's own clock."""
from test_spans import check_against_raw, no_anomalies, run_script  # noqa: F401

TASKS = """
import asyncio, json, time, ringprof
hold = ringprof.span("hold")
inner = ringprof.span("inner")
stamps = []

@ringprof.span("decorated")
async def decorated():
    await asyncio.sleep(0.002)

async def worker(k):
    for i in range(20):
        t0 = time.perf_counter_ns()
        with hold:                       # held across awaits, outside any request
            await asyncio.sleep(0.01)
            with inner:
                await asyncio.sleep(0)
            await decorated()
        stamps.append(time.perf_counter_ns() - t0)

async def main():
    await asyncio.gather(worker(0), worker(1))
    with hold:                           # a plain `with` outside a coroutine's await
        pass

asyncio.run(main())
print(json.dumps({"own_ns": sum(stamps)}))
"""


def test_spans_across_awaits_outside_a_request(run_script):
    r = run_script("tasks", TASKS)
    f = check_against_raw(r)
    rep = r.report
    assert no_anomalies(rep) == {}
    hold = f["hold"]
    # 40 held across awaits (two tasks) + 1 in main(): all primitive, none recursive.
    assert hold["calls"] == 41 and hold["primitive_calls"] == 41
    assert f["inner"]["calls"] == 40 and f["inner"]["primitive_calls"] == 40
    assert f["decorated"]["calls"] == 40
    own = r.result()["own_ns"]
    assert hold["cum_ns"] >= 40 * 10_000_000
    # The script's own stamps enclose each span (a few us of loop work outside it,
    # more when the machine preempts the process between a stamp and the span).
    assert own * 0.9 <= hold["cum_ns"] <= own, (hold["cum_ns"], own)
    edges = {(e["caller"], e["callee"]) for e in rep["edges"]}
    assert ("hold", "inner") in edges and ("hold", "decorated") in edges
    assert ("hold", "hold") not in edges
