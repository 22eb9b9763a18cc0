# SPDX-License-Identifier: MIT
"""Inference-server figures from Python: counter(..., rate=True) (the total and the rate
per interval, against a computation here), request attributes (one name per set of
values: distinct rows in every figure), and link() (rp_link's semantics: the device
analysis pairs each launch with its kernel)."""
from test_spans import check_against_raw, run_script  # noqa: F401

SCRIPT = """
import itertools, json, time, ringprof
# A fake clock for the rate: each increment is 100 ms after the last (exact figures).
tick = itertools.count(0, 100_000_000)
real = time.monotonic_ns
time.monotonic_ns = lambda: next(tick)
for i in range(25):
    ringprof.counter("tokens", 10 + i % 3, rate=True)
time.monotonic_ns = real
launch = ringprof.span("cudaLaunchKernel")
kernel = ringprof.span("gemm", "kernel")
for i in range(3):
    with launch:
        ringprof.link("cudaLaunchKernel", i + 1)
    with kernel:
        ringprof.link("gemm", i + 1, side="device")
for m in ("a", "b", "a"):
    with ringprof.request(model=m, endpoint="/gen"):
        with ringprof.span("decode"):
            pass
with ringprof.request():
    pass
"""


def rate_reference(incs, step=100_000_000):
    """The rate samples counter(rate=True) must give for increments every `step` ns."""
    out, start, at, total = [], 0, incs[0], 0
    for k, v in enumerate(incs):
        now, total = k * step, total + v
        if now - start >= 1_000_000_000:
            out.append((total - at) * 1_000_000_000 // (now - start))
            start, at = now, total
    return out, total


def test_counter_rate_requests_attributes_link(run_script):
    r = run_script("inference", SCRIPT)
    rep = r.report
    check_against_raw(r)
    counters = {c["name"]: c for c in rep["counters"]}
    samples, total = rate_reference([10 + i % 3 for i in range(25)])
    assert counters["tokens"]["samples"] == 25 and counters["tokens"]["last"] == total
    rate = counters["tokens/s"]
    assert rate["samples"] == len(samples) == 2
    assert (rate["min"], rate["max"], rate["last"]) == (min(samples), max(samples), samples[-1])
    f = r.functions()
    assert f["request{endpoint=/gen,model=a}"]["calls"] == 2
    assert f["request{endpoint=/gen,model=b}"]["calls"] == 1
    assert f["request"]["calls"] == 1
    assert all(f[n]["category"] == "REQUEST" for n in f if n.startswith("request"))
    edges = {(e["caller"], e["callee"]) for e in rep["edges"]}
    assert ("request{endpoint=/gen,model=b}", "decode") in edges
    dev = rep["device"]
    assert (dev["launches"], dev["kernels"], dev["linked"]) == (3, 3, 3)
    assert dev["unmatched_launches"] == 0 and dev["links_orphan"] == 0
