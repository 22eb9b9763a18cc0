# SPDX-License-Identifier: MIT
"""Inference-server figures from Python: counter(..., rate=True) (the total and the rate
per interval, against a computation here), request attributes (one name per set of
values: distinct rows in every figure), link() (rp_link's semantics: the device
analysis pairs each launch with its kernel), and request milestones (req.mark: TTFT and
queue wait exact against the producer's records, within bounds of the server's own
stamps; repeats and late marks counted)."""
from rpharness import read_segment
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


MARKS = """
import asyncio, json, random, time, ringprof
random.seed(7)
stamps = []   # the server's own: (track, start lo, start hi, first lo, first hi, queue lo, queue hi)

async def decode(n):
    for _ in range(n):
        await asyncio.sleep(0)

async def handle(i):
    await asyncio.sleep(random.random() * 0.05)       # arrivals
    lo = time.monotonic_ns()
    async with ringprof.request() as req:
        hi = time.monotonic_ns()
        await asyncio.sleep(random.random() * 0.01)   # queued
        q0 = time.monotonic_ns(); req.mark("queue_wait"); q1 = time.monotonic_ns()
        await decode(1 + i % 5)                       # prefill
        async def first():                            # in a task: the context's request
            await asyncio.sleep(random.random() * 0.005)
            a = time.monotonic_ns(); ringprof.mark("first_token"); b = time.monotonic_ns()
            return a, b
        f0, f1 = await asyncio.create_task(first())
        if i == 3:
            req.mark("first_token")                   # twice: counted, not recorded
        await decode(3)
        stamps.append((req.track, lo, hi, f0, f1, q0, q1))
    if i == 5:
        req.mark("queue_wait")                        # after the end: counted
    return req

async def main():
    await asyncio.gather(*(handle(i) for i in range(300)))

asyncio.run(main())
ringprof.mark("first_token")                          # no request: counted
print(json.dumps(stamps))
"""


def lower_q(v, q):
    """The lower-rank q-quantile of sorted v (engine/analyses/sketch.h's rank)."""
    return v[int(q * (len(v) - 1))]


def test_marks_ttft_against_server_stamps(run_script):
    r = run_script("marks", MARKS)
    rep, stamps = r.report, r.result()
    f = r.functions()
    ttft, queue = f["first_token"], f["queue_wait"]
    assert ttft["milestone"] and queue["milestone"] and not f["request"]["milestone"]
    assert ttft["category"] == "milestone"
    assert ttft["calls"] == queue["calls"] == len(stamps) == 300
    assert ttft["self_ns"] == ttft["cum_ns"] == ttft["primitive_calls"] == 0
    assert rep["anomalies"]["mark_repeat"] == 1 and rep["anomalies"]["mark_unmatched"] == 2
    assert f["request"]["calls"] == 300
    # Exact against the producer's own records: mark time minus its request's BEGIN.
    (seg,) = r.segments
    names, events, _ = read_segment(seg)
    begin, raw = {}, {"first_token": [], "queue_wait": []}
    seen = set()
    for (_ring, ns, nm, kind, flags, track, arg) in events:
        if kind == 8 and (arg >> 32) == 0:
            begin[track] = ns
        elif kind == 3 and flags == 1 and track in begin and (track, nm) not in seen:
            seen.add((track, nm))
            raw[names[nm][0]].append(ns - begin[track])
    for name, row in (("first_token", ttft), ("queue_wait", queue)):
        v = sorted(x for x in raw[name] if x >= 0)
        assert len(v) == row["calls"] and sum(v) // len(v) == row["mean_ns"]
        assert (v[0], v[-1]) == (row["min_ns"], row["max_ns"])
        for q in (50, 90, 99):
            x = lower_q(v, q / 100)
            assert abs(row["p%d_ns" % q] - x) <= 0.01 * x + 1, (name, q)
    # Against the server's own stamps (time.monotonic_ns, another clock than the
    # producer's): each true value lies in [mark lo - start hi, mark hi - start lo], so
    # each order statistic lies between those of the bounds; 1% for the sketch and
    # 1 ms for the two clocks.
    for name, row, a, b in (("first_token", ttft, 3, 4), ("queue_wait", queue, 5, 6)):
        lo = sorted(s[a] - s[2] for s in stamps)
        hi = sorted(s[b] - s[1] for s in stamps)
        for q in (50, 90, 99):
            got = row["p%d_ns" % q]
            assert lower_q(lo, q / 100) * 0.99 - 1e6 <= got <= lower_q(hi, q / 100) * 1.01 + 1e6
        print("%s p50/p90/p99 ms: ringprof %s, server %s" % (name, [
            round(row["p%d_ns" % q] / 1e6, 3) for q in (50, 90, 99)], [
            round((lower_q(lo, q / 100) + lower_q(hi, q / 100)) / 2e6, 3) for q in (50, 90, 99)]))
    # The 1m window holds them all (the run is shorter).
    w = [w for w in rep["windows"] if w["name"] == "1m"][0]
    wf = {x["name"]: x for x in w["functions"]}
    assert wf["first_token"]["calls"] == 300 and wf["first_token"]["self_ns"] == 0
    # Not spans in flight: requests in flight as without them (at most 300).
    assert rep["concurrency"]["requests"]["max"] <= 300


EXECUTOR = """
import asyncio, contextvars, ringprof, warnings
def work():
    with ringprof.span("work"):
        sum(range(1000))
async def main():
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, work)            # outside a request: no warning
    async with ringprof.request():
        await asyncio.to_thread(work)                 # copies the context itself
        await loop.run_in_executor(None, contextvars.copy_context().run, work)
        await loop.getaddrinfo("localhost", 80)       # a C function: no span in it
        print("before")
        await loop.run_in_executor(None, work)        # escapes: warned, once
        await loop.run_in_executor(None, work)
asyncio.run(main())
"""


def test_run_in_executor_warns_once(run_script):
    r = run_script("executor", EXECUTOR)
    lines = r.stderr.splitlines()
    warned = [ln for ln in lines if "run_in_executor() runs" in ln]
    assert len(warned) == 1, r.stderr
    assert "RuntimeWarning" in warned[0] and "copy_context().run" in warned[0]
    assert r.out.strip() == "before"
    # the escaped calls' spans are on their thread, not in the request: 3 + 2 calls
    f = r.functions()
    assert f["work"]["calls"] == 5
    edges = {(e["caller"], e["callee"]): e["calls"] for e in r.report["edges"]}
    assert edges[("request", "work")] == 2


BATCHING = """
import asyncio, json, random, time, ringprof
random.seed(5)
forward = ringprof.span("forward", "LLM")
sync_forward = ringprof.span("sync_forward", "LLM")
own = {}   # the server's own: request track -> sum of forward_dur // batch size (its clock)
queue = []

def run_sync(batch):
    # a forward on an executor thread's stack (outside any request): ringprof.charge()
    # charges that thread's innermost open span
    t0 = time.monotonic_ns()
    with sync_forward:
        for s in batch:
            ringprof.charge(s["req"])
        time.sleep(random.random() * 0.002)
    return time.monotonic_ns() - t0

async def loop(stop):
    k = 0
    while not (stop.is_set() and not queue):
        batch, queue[:] = queue[:8], queue[8:]
        if not batch:
            await asyncio.sleep(0.0005)
            continue
        k += 1
        if k % 3 == 0:
            d = await asyncio.get_running_loop().run_in_executor(None, run_sync, batch)
        else:
            t0 = time.monotonic_ns()
            with forward:   # in the loop's coroutine: a task's track of its own
                for s in batch:
                    forward.charge(s["req"])
                forward.charge(batch[0]["req"])   # twice: one share
                await asyncio.sleep(random.random() * 0.003)
            d = time.monotonic_ns() - t0
        for s in batch:
            own[s["req"].track] = own.get(s["req"].track, 0) + d // len(batch)
            s["left"] -= 1
            if s["left"] == 0:
                s["done"].set_result(None)
            else:
                queue.append(s)

async def handle(i):
    await asyncio.sleep(random.random() * 0.2)
    async with ringprof.request(model="ab"[i % 2]) as req:
        s = {"req": req, "left": 1 + i % 4, "done": asyncio.get_running_loop().create_future()}
        queue.append(s)
        await s["done"]
        await asyncio.sleep(0.001)   # after its last forward: none is late

async def main():
    stop = asyncio.Event()
    t = asyncio.create_task(loop(stop))
    await asyncio.gather(*(handle(i) for i in range(120)))
    stop.set()
    await t
    async with ringprof.request(model="late") as req:
        pass
    with forward:   # a request that ended: counted (charge_orphan)
        forward.charge(req)

asyncio.run(main())
print(json.dumps(own))
"""


def test_charge_batched_forward_to_requests(run_script):
    """A batching loop's forwards (on the loop task's own track, and on an executor
    thread's stack) charged to the requests they served: each request's charged_ns
    exact against dur // N over its forwards (the remainder to the first charged)
    computed from the producer's own records, and within the clocks' slack of the
    server's own stamps; per request name, the sums and shares."""
    r = run_script("charge", BATCHING, engine_args=("--topk", "200"))
    rep, own = r.report, {int(k): v for k, v in r.result().items()}
    check_against_raw(r)
    (seg,) = r.segments
    names, events, _ = read_segment(seg)
    byname = {v[0]: k for k, v in names.items()}
    fwd, sfwd = byname["forward"], byname["sync_forward"]
    # The producer's records: each forward's duration and the requests it was charged to
    # in order (a repeat ignored), by its task track or by its thread's open sync_forward.
    # A charge to a request not open then is an orphan: left out.
    spans, open_task, open_thread, open_req = [], {}, {}, set()
    # (each ring's records in its order; rings merged by time: one clock)
    for (ring, ns, nm, kind, flags, track, arg) in sorted(events, key=lambda e: e[1]):
        if kind == 8 and arg == 1 and not flags & 4:
            open_req.add(track)
        elif kind == 9 and arg == 1 and track in open_req:
            open_req.discard(track)
        if kind == 8 and nm == fwd and flags & 4:
            open_task[track] = [ns, []]
        elif kind == 9 and track in open_task:
            b, reqs = open_task.pop(track)
            spans.append((ns - b, reqs))
        elif kind == 1 and nm == sfwd:
            open_thread[ring] = [ns, []]
        elif kind == 2 and nm == sfwd:
            b, reqs = open_thread.pop(ring)
            spans.append((ns - b, reqs))
        elif kind == 7 and flags & 4:
            o = open_task.get(track) if track else open_thread.get(ring)
            if o is not None and arg not in o[1] and arg in open_req:
                o[1].append(arg)
    want, shares = {}, 0
    for dur, reqs in spans:
        for j, t in enumerate(reqs):
            want[t] = want.get(t, 0) + dur // len(reqs) + (dur % len(reqs) if j == 0 else 0)
            shares += 1
    assert len(want) == 120 and shares == sum(1 + i % 4 for i in range(120))
    an = rep["anomalies"]
    assert an["charge_orphan"] == 1 and an["charge_late"] == 0 and an["charge_cap"] == 0, an
    got = {s["track"]: s["charged_ns"] for s in rep["bottlenecks"]["slowest_spans"]
           if s["name"].startswith("request{model=") and s["name"] != "request{model=late}"}
    assert got == want
    f = r.functions()
    for m in "ab":
        row = f["request{model=%s}" % m]
        assert row["charged"] == sum(1 + i % 4 for i in range(120) if "ab"[i % 2] == m)
    assert f["request{model=a}"]["charged_ns"] + f["request{model=b}"]["charged_ns"] == \
        sum(want.values())
    assert f["forward"]["charged"] == 0 and f["forward"]["calls"] > 0
    # The server's own stamps (time.monotonic_ns around each forward, another clock than
    # the producer's): within 1% and 2 ms per forward of what ringprof charged.
    for t, ns in want.items():
        assert abs(own[t] - ns) <= 0.01 * ns + 2e6 * 4, (t, own[t], ns)
    print("charged_ns vs the server's stamps: max |diff| %.3f ms over %d requests" % (
        max(abs(own[t] - want[t]) for t in want) / 1e6, len(want)))
