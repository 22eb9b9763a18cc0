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
