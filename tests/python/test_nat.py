# SPDX-License-Identifier: MIT
"""ringprof.nat.record(): the steps of an agent-toolkit trace replayed live give the
report `ringprof analyze FILE` gives for the file (functions, concurrency)."""
import json
import os
import subprocess

from rpharness import RINGPROF, Run

DATA = os.environ.get("RP_TESTDATA", os.path.join(os.path.dirname(__file__), "..", "data"))


def test_record_matches_analyze():
    path = os.path.abspath(os.path.join(DATA, "nat", "small.json"))
    want = json.loads(subprocess.run([RINGPROF, "analyze", path, "--format", "json"],
                                     capture_output=True, text=True, check=True).stdout)
    r = Run("nat", """
        import json, time, ringprof
        steps = []
        for req in json.load(open(%r)):
            mine = [s for s in req["intermediate_steps"]]
            # the toolkit's order within a request: by timestamp, stably
            mine.sort(key=lambda s: s["payload"]["event_timestamp"])
            steps += [(s["payload"]["event_timestamp"], req["request_number"], i, s)
                      for i, s in enumerate(mine)]
        steps.sort(key=lambda t: t[:3])   # requests overlap: one time-ordered stream
        last = max(ringprof.nat._ns(t[0]) for t in steps)
        ringprof.nat.set_time_base(last, time.time_ns() - 2 * 10**9)
        for ts, req, _i, s in steps:
            ringprof.nat.record(s, request=req)
        print(json.dumps({"bad": ringprof.nat.bad_steps()}))
    """ % path, env={"RINGPROF_CLOCK": "monotonic"})
    try:
        got = r.report
        assert r.result() == {"bad": 0}
        assert got["events"] == want["events"] and got["dropped"] == 0
        assert got["anomalies"] == want["anomalies"]
        key = lambda f: (f["name"], f["category"])  # noqa: E731
        assert sorted(got["functions"], key=key) == sorted(want["functions"], key=key)
        for k in ("overall", "roots"):
            assert got["concurrency"][k] == want["concurrency"][k], k
        assert got["concurrency"]["by_category"] == want["concurrency"]["by_category"]
    finally:
        r.cleanup()


NESTED = """
import asyncio, json, time, ringprof
from ringprof import nat
def S(etype, uuid, ts, name="f"):
    return {"function_ancestry": {"function_name": name},
            "payload": {"event_type": etype, "UUID": uuid, "event_timestamp": ts, "name": name}}
async def main():
    t = time.time()
    async with ringprof.request():            # the server's request: the agent nests in it
        with ringprof.span("handler"):
            nat.record(S("WORKFLOW_START", "w", t))
            nat.record(S("FUNCTION_START", "a", t + 0.001, "agent"))
            nat.record(S("LLM_START", "b", t + 0.002, "llm"))
            await asyncio.sleep(0.01)
            nat.record(S("LLM_END", "b", t + 0.003, "llm"))
            nat.record(S("FUNCTION_END", "a", t + 0.004, "agent"))
            nat.record(S("WORKFLOW_END", "w", t + 0.005))
    # bounded: 20 examples by key, 8 kept, each END forgets its UUID
    nat.MAX_EXAMPLES = 8
    for i in range(20):
        nat.record(S("TOOL_START", "u%d" % i, t, "tool"), request=i)
        nat.record(S("TOOL_END", "u%d" % i, t + 0.001, "tool"), request=i)
    print(json.dumps({"evicted": nat.evicted(), "kept": len(nat._examples),
                      "uuids": sum(len(e.spans) for e in nat._examples.values()),
                      "bad": nat.bad_steps()}))
asyncio.run(main())
"""


def test_record_nests_in_request_and_bounds_state():
    """Inside ringprof.request() the agent's calls nest under the request (it counts
    once in flight); examples past MAX_EXAMPLES are evicted and counted, and an END
    forgets its UUID."""
    r = Run("natreq", NESTED)
    try:
        assert r.result() == {"evicted": 12, "kept": 8, "uuids": 0, "bad": 0}
        rep = r.report
        f = {x["name"]: x for x in rep["functions"]}
        assert f["request"]["calls"] == 1 and f["agent"]["calls"] == 1 and f["llm"]["calls"] == 1
        edges = {(e["caller"], e["callee"]) for e in rep["edges"]}
        assert ("handler", "agent") in edges and ("agent", "llm") in edges
        # one request in flight at most, not two (the agent's example is no request)
        assert rep["concurrency"]["requests"]["max"] == 1
        assert {k: v for k, v in rep["anomalies"].items() if v} == {}
    finally:
        r.cleanup()
