#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The Python producer's costs, printed (never pass/fail):

  span_ns        one `with span:` enter + exit in a tight loop (recording)
  floor_ns       the same loop over ringprof.nullcontext, a C context manager that
                 does nothing: the floor any C context manager pays
  ratio_vs_floor span_ns / floor_ns
  disabled_ns    the span loop with RINGPROF=0
  span_after_request_ns, span_in_request_ns
                 the span loop once the process has opened a request: outside one
                 (the context variable is looked up), then inside one (a request
                 span: a node object, a context variable set, CHILD_BEGIN/END)
  trace_overhead, cprofile_overhead
                 a deterministic workload (recursion, method calls, comprehensions)
                 under ringprof.profile() and under cProfile, each as a slowdown
                 factor against the plain run; trace_vs_cprofile is their ratio
                 (trace_profile_hook_overhead: ringprof.profile(hook="profile"))
  trace_cost_vs_cprofile
                 the overhead as the design target defines it: the time tracing
                 adds, (trace_overhead - 1), against the time cProfile adds,
                 (cprofile_overhead - 1); beside trace_vs_cprofile, the ratio of
                 the slowdowns, which a large plain run makes look closer to 1

Each figure is the minimum over repeats, measured in a fresh child process whose
ring holds every event it records (no consumer; `dropped` says if one was lost).
With --callgrind (valgrind installed) the same figures are also given as instruction
counts (callgrind, the difference between runs of N and 0 iterations), which a loaded
machine does not move: span_instr, floor_instr, ratio_vs_floor_instr,
trace_overhead_instr, cprofile_overhead_instr, trace_vs_cprofile_instr,
trace_cost_vs_cprofile_instr.

  /usr/bin/python3 bench/bench_python.py --build-dir B [--json] [--callgrind]
"""
import argparse
import cProfile
import json
import os
import subprocess
import sys
import time

N_SPAN = 200000
REPEATS = 5


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


class Vec:
    def __init__(self, x, y):
        self.x, self.y = x, y

    def add(self, o):
        return Vec(self.x + o.x, self.y + o.y)


def cost_ratio(traced, cprofiled, plain):
    """(traced/plain - 1) / (cprofiled/plain - 1): what tracing adds against what
    cProfile adds; None when cProfile added nothing measurable."""
    if cprofiled <= plain:
        return None
    return round((traced - plain) / (cprofiled - plain), 3)


def workload():
    total = fib(17)
    acc = Vec(0, 0)
    for i in range(3000):
        acc = acc.add(Vec(i, -i))
    evens = [i for i in range(4000) if i % 2 == 0]
    table = {i: [j * i for j in range(4)] for i in evens}
    total += sum(sum(v) for v in table.values()) + acc.x
    return total


def loop_ns(cm, n):
    t = time.perf_counter_ns()
    for _ in range(n):
        with cm:
            pass
    return (time.perf_counter_ns() - t) / n


def timed(fn):
    t = time.perf_counter_ns()
    fn()
    return time.perf_counter_ns() - t


def count(what, n):
    """The loop callgrind counts: n iterations of one thing (n = 0: the baseline)."""
    import ringprof
    if what in ("span", "floor"):
        cm = ringprof.span("bench") if what == "span" else ringprof.nullcontext()
        for _ in range(n + 1):
            with cm:
                pass
        return
    workload()
    p = cProfile.Profile() if what == "cprofile" else None
    if what == "trace":
        ringprof.trace_calls(True)
    elif p:
        p.enable()
    for _ in range(n):
        workload()
    if what == "trace":
        ringprof.trace_calls(False)
    elif p:
        p.disable()


def child(mode):
    import ringprof
    if mode.startswith("count:"):
        _, what, n = mode.split(":")
        return count(what, int(n))
    out = {}
    if mode == "span":
        s, floor = ringprof.span("bench"), ringprof.nullcontext()
        spans, floors = [], []
        for _ in range(REPEATS):
            floors.append(loop_ns(floor, N_SPAN))
            spans.append(loop_ns(s, N_SPAN))
        out = {"span_ns": min(spans), "floor_ns": min(floors)}
    elif mode == "span_req":
        s = ringprof.span("bench")
        with ringprof.request():  # from now on spans look up the context variable
            pass
        late = [loop_ns(s, N_SPAN // 2) for _ in range(REPEATS)]
        with ringprof.request():
            inreq = [loop_ns(s, N_SPAN // 10) for _ in range(REPEATS)]
        out = {"span_after_request_ns": min(late), "span_in_request_ns": min(inreq)}
    elif mode == "disabled":
        assert not ringprof.enabled()
        out = {"disabled_ns": min(loop_ns(ringprof.span("bench"), N_SPAN)
                                  for _ in range(REPEATS))}
    elif mode == "trace":
        plain, traced, prof, phook = [], [], [], []
        workload()
        for _ in range(REPEATS):
            plain.append(timed(workload))
            with ringprof.profile():
                traced.append(timed(workload))
            with ringprof.profile(hook="profile"):
                phook.append(timed(workload))
            p = cProfile.Profile()
            p.enable()
            prof.append(timed(workload))
            p.disable()
        out = {"plain_ns": min(plain), "trace_ns": min(traced), "cprofile_ns": min(prof),
               "profile_hook_ns": min(phook)}
    out["dropped"] = ringprof.dropped()
    print(json.dumps(out))


def run_child(build, mode, env):
    e = dict(os.environ, PYTHONPATH=os.path.join(build, "producers", "python"),
             RINGPROF_SESSION="bench_python_%d" % os.getpid(), RINGPROF_RINGS="4",
             RINGPROF_RING_EVENTS=str(1 << 21), RINGPROF_EXIT_WAIT_MS="0",
             RINGPROF_NO_ENGINE="discard", **env)
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", mode],
                       env=e, capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def instructions(build, what, n):
    """Instructions of n iterations of `what`, net of the same run with 0."""
    def run(k):
        e = dict(os.environ, PYTHONPATH=os.path.join(build, "producers", "python"),
                 RINGPROF_SESSION="bench_python_cg_%d" % os.getpid(), RINGPROF_RINGS="2",
                 RINGPROF_RING_EVENTS=str(1 << 20), RINGPROF_EXIT_WAIT_MS="0",
                 RINGPROF_NO_ENGINE="discard")
        r = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                            sys.executable, os.path.abspath(__file__), "--child",
                            "count:%s:%d" % (what, k)], env=e, capture_output=True,
                           text=True, check=True)
        for line in r.stderr.splitlines():
            if "Collected" in line:
                return int(line.split()[-1])
        raise RuntimeError(r.stderr)
    return (run(n) - run(0)) / n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--child")
    ap.add_argument("--callgrind", action="store_true")
    a = ap.parse_args()
    if a.child:
        return child(a.child)
    span = run_child(a.build_dir, "span", {})
    off = run_child(a.build_dir, "disabled", {"RINGPROF": "0"})
    req = run_child(a.build_dir, "span_req", {})
    tr = run_child(a.build_dir, "trace", {})
    res = {
        "span_ns": round(span["span_ns"], 1),
        "floor_ns": round(span["floor_ns"], 1),
        "ratio_vs_floor": round(span["span_ns"] / span["floor_ns"], 3),
        "disabled_ns": round(off["disabled_ns"], 1),
        # the span loop once the process has opened a request (outside one, then inside)
        "span_after_request_ns": round(req["span_after_request_ns"], 1),
        "span_in_request_ns": round(req["span_in_request_ns"], 1),
        "trace_overhead": round(tr["trace_ns"] / tr["plain_ns"], 3),
        "cprofile_overhead": round(tr["cprofile_ns"] / tr["plain_ns"], 3),
        # trace_calls(hook="profile"): the same records through PyEval_SetProfile
        "trace_profile_hook_overhead": round(tr["profile_hook_ns"] / tr["plain_ns"], 3),
        "dropped": span["dropped"] + req["dropped"] + tr["dropped"],
        "python": sys.version.split()[0],
    }
    res["trace_vs_cprofile"] = round(res["trace_overhead"] / res["cprofile_overhead"], 3)
    res["trace_cost_vs_cprofile"] = cost_ratio(tr["trace_ns"], tr["cprofile_ns"],
                                               tr["plain_ns"])
    if a.callgrind:
        sp, fl = (instructions(a.build_dir, w, 20000) for w in ("span", "floor"))
        pl, trc, cp = (instructions(a.build_dir, w, 3) for w in ("plain", "trace", "cprofile"))
        res.update(span_instr=round(sp, 1), floor_instr=round(fl, 1),
                   ratio_vs_floor_instr=round(sp / fl, 3),
                   trace_overhead_instr=round(trc / pl, 3),
                   cprofile_overhead_instr=round(cp / pl, 3),
                   trace_vs_cprofile_instr=round(trc / cp, 3),
                   trace_cost_vs_cprofile_instr=cost_ratio(trc, cp, pl))
    if a.json:
        print(json.dumps(res))
    else:
        for k, v in res.items():
            print("%-18s %s" % (k, v))


if __name__ == "__main__":
    main()
