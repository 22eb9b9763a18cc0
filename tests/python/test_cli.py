# SPDX-License-Identifier: MIT
"""python -m ringprof and RINGPROF_PYTHON=trace: an unmodified program, run as `python -m
cProfile` runs it; the pstats report's keys and call counts (calls and primitive calls)
equal cProfile's own for the same program (the reference is `python -m cProfile -o`)."""
import json
import os
import pstats
import subprocess
import sys
import tempfile

from rpharness import TAG, Run

HERE = os.path.dirname(os.path.abspath(__file__))
PROG = os.path.join(HERE, "cli_workload.py")


def cprofile_keys(argv):
    """{key: (primitive calls, calls)} of the program's own functions, by cProfile."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cp.prof")
        subprocess.run([sys.executable, "-m", "cProfile", "-o", out, *argv], check=True,
                       capture_output=True, cwd=HERE)
        return own(pstats.Stats(out).stats)


def own(stats):
    return {k: v[:2] for k, v in stats.items() if os.path.abspath(k[0]) == PROG}


def test_cli_script_keys_and_calls_equal_cprofile():
    ref = cprofile_keys([PROG, "a", "b"])
    r = Run("cli", None, argv=["-m", "ringprof", PROG, "a", "b"])
    try:
        assert r.result() == {"argv": [PROG, "a", "b"], "name": "__main__"}
        assert r.report["dropped"] == 0
        ours = own(r.pstats())
        assert ours == ref
        # Two methods named encode (co_name) in two classes: two keys, as cProfile's.
        assert sorted(k[1] for k in ours if k[2] == "encode") == [16, 21]
        # The text/JSON reports keep the qualified names.
        names = {f["name"] for f in r.report["functions"] if f["file"] == PROG}
        assert {"Tokenizer.encode", "Detokenizer.encode", "outer.<locals>.inner"} <= names
        assert r.report["anomalies"]["end_mismatch"] == 0
    finally:
        r.cleanup()


def test_cli_module_keys_and_calls_equal_cprofile():
    ref = cprofile_keys(["-m", "cli_workload", "m"])
    r = Run("climod", None, argv=["-m", "ringprof", "-m", "cli_workload", "m"],
            env={"PYTHONPATH": os.pathsep.join(filter(None, [os.environ.get(
                "RP_PYTHONPATH"), HERE]))})
    try:
        assert r.result() == {"argv": [PROG, "m"], "name": "__main__"}
        assert own(r.pstats()) == ref
    finally:
        r.cleanup()


def test_cli_session_include_exclude():
    """--session reaches the extension before it makes the segment (the engine of that
    session drains it); --exclude drops a function, not its callees; --include keeps
    only what matches."""
    session = "py_cliex_%s_%d" % (TAG, os.getpid())  # the harness's engine's
    r = Run("cliex", None, argv=["-m", "ringprof", "--session", session, "--exclude", "outer",
                                 "--exclude", "*.encode", PROG],
            env={"RINGPROF_SESSION": "py_elsewhere", "RINGPROF_NO_ENGINE": "discard"})
    try:
        names = {f["name"]: f for f in r.report["functions"] if f["file"] == PROG}
        assert "outer" not in names and "Tokenizer.encode" not in names
        assert names["outer.<locals>.inner"]["calls"] == 5
        assert names["Tokenizer.encode.<locals>.<listcomp>"]["calls"] == 3
    finally:
        r.cleanup()
    r = Run("clinc", None, argv=["-m", "ringprof", "--include", "fib", PROG])
    try:
        assert {f["name"] for f in r.report["functions"]} == {"fib"}
        assert r.functions()["fib"]["calls"] == 465
    finally:
        r.cleanup()


def test_cli_no_calls_records_only_spans():
    with tempfile.TemporaryDirectory() as d:
        prog = os.path.join(d, "spans.py")
        with open(prog, "w") as f:
            f.write("import ringprof\ndef g():\n    pass\n"
                    "for _ in range(3):\n    with ringprof.span('mine'):\n        g()\n")
        r = Run("clinocalls", None, argv=["-m", "ringprof", "--no-calls", prog])
        try:
            assert {f["name"] for f in r.report["functions"]} == {"mine"}
            assert r.functions()["mine"]["calls"] == 3
        finally:
            r.cleanup()


def test_env_trace_through_sitecustomize():
    """RINGPROF_PYTHON=trace for a program started by someone else: here a sitecustomize
    imports ringprof._autotrace (what the installed ringprof-trace.pth does); children
    inherit the environment and trace too."""
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "sitecustomize.py"), "w") as f:
            f.write("import ringprof._autotrace\n")
        pp = os.pathsep.join(filter(None, [d, os.environ.get("RP_PYTHONPATH")]))
        r = Run("clienv", None, argv=[PROG, "e"],
                env={"PYTHONPATH": pp, "RINGPROF_PYTHON": "trace",
                     "RINGPROF_PYTHON_INCLUDE": "*cli_workload.py"})
        try:
            fns = {f["name"]: f for f in r.report["functions"]}
            assert all(f["file"] == PROG for f in fns.values())
            assert fns["fib"]["calls"] == 465 and fns["main.<locals>.<lambda>"]["calls"] == 20
            assert json.loads(r.out.strip().splitlines()[-1])["argv"] == [PROG, "e"]
        finally:
            r.cleanup()


def test_env_trace_through_pth():
    """The installed package's ringprof-trace.pth: RINGPROF_PYTHON=trace alone traces an
    unmodified program (and every Python process started with it)."""
    if os.environ.get("RP_INSTALLED") != "1":
        import pytest
        pytest.skip("the .pth is installed by pip (test_python_installed runs this)")
    r = Run("clipth", None, argv=[PROG, "p"],
            env={"RINGPROF_PYTHON": "trace", "RINGPROF_PYTHON_INCLUDE": "*cli_workload.py"})
    try:
        fns = {f["name"]: f for f in r.report["functions"]}
        assert fns["fib"]["calls"] == 465 and fns["Detokenizer.encode"]["calls"] == 3
        assert r.report["dropped"] == 0
    finally:
        r.cleanup()


def test_cli_import_time_calls_fold_exactly():
    """Calls made while an imported module runs its body are summarized at the source
    (docs/python.md): their counts stay exact (here against cProfile's), the ring gets
    far fewer records than two per call, and the same function called later by the
    program is an ordinary span again."""
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "heavy.py"), "w") as f:
            f.write("def small(x):\n    return x + 1\n"
                    "for i in range(5000):\n    small(i)\n")
        prog = os.path.join(d, "main.py")
        with open(prog, "w") as f:
            f.write("import heavy\nimport time\ndef later(x):\n    return heavy.small(x)\n"
                    "for i in range(50):\n    later(i)\n")
        with tempfile.TemporaryDirectory() as o:
            out = os.path.join(o, "cp.prof")
            subprocess.run([sys.executable, "-m", "cProfile", "-o", out, prog], check=True)
            ref = {k[2]: v[:2] for k, v in pstats.Stats(out).stats.items() if k[0].startswith(d)}
        r = Run("cliimp", None, argv=["-m", "ringprof", "--include", d + "/*", prog])
        try:
            ours = {k[2]: v[:2] for k, v in r.pstats().items()}
            assert ours == ref and ours["small"] == (5050, 5050) and ours["later"] == (50, 50)
            assert r.report["dropped"] == 0
            assert r.report["events"] < 4 * 50 + 200, r.report["events"]  # not 2 x 5050
            small = r.functions()["small"]
            # Some of its calls were summarized: their histograms reach its sketch
            # (docs/summaries.md), so it has percentiles of all its calls, within the
            # range of its calls' lengths. A function called only after the imports too.
            assert small["p50_ns"] is not None and small["p50_ns"] > 0
            assert small["min_ns"] <= small["p50_ns"] <= small["p99_ns"]
            assert small["p99_ns"] <= small["max_ns"] * 1.01
            assert r.functions()["later"]["p50_ns"] > 0
        finally:
            r.cleanup()


def test_cli_torch_asyncio_program():
    """An unmodified asyncio program that imports torch, under python -m ringprof: its own
    functions' calls exact (against cProfile's), their percentiles present all-time and in
    the 1m window at the engine's default caps although torch's import ran traced and
    filled the windows' name slots just before."""
    import pytest
    try:
        import torch  # noqa: F401
    except ImportError:
        pytest.skip("torch is not installed (Debian: python3-torch)")
    prog = os.path.join(HERE, "torch_workload.py")

    def mine(stats):
        return {k: v[:2] for k, v in stats.items() if os.path.abspath(k[0]) == prog}
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cp.prof")
        subprocess.run([sys.executable, "-m", "cProfile", "-o", out, prog], check=True,
                       capture_output=True)
        ref = mine(pstats.Stats(out).stats)
    r = Run("clitorch", None, argv=["-m", "ringprof", prog])
    try:
        assert r.result() == {"requests": 100}
        assert r.report["dropped"] == 0
        assert mine(r.pstats()) == ref
        assert ref[(prog, 21, "tokenize")] == (100, 100)
        fns = {f["name"]: f for f in r.report["functions"] if f["file"] == prog}
        win = next(w for w in r.report["windows"] if w["name"] == "1m")
        wfns = {f["name"]: f for f in win["functions"]}
        for name in ("tokenize", "Tiny.forward", "handle"):
            assert fns[name]["p50_ns"], name
            assert wfns[name]["calls"] == fns[name]["calls"], name
            assert wfns[name]["p50_ns"], name
        # The import's names were in the way: its summaries (RP_SUMMARY_IMPORT) gave
        # their slots up, and every eviction is counted.
        assert r.report["anomalies"]["window_evicted"] > 0
    finally:
        r.cleanup()


def test_cli_spawned_children():
    """The program runs in a real __main__ module (multiprocessing's spawn pickles its
    functions by that name), and its spawned children inherit RINGPROF_PYTHON=trace:
    with the installed .pth they record their calls too."""
    with tempfile.TemporaryDirectory() as d:
        prog = os.path.join(d, "mp.py")
        with open(prog, "w") as f:
            f.write("import multiprocessing as mp\n"
                    "def work(x):\n    return x * 2\n"
                    "if __name__ == '__main__':\n"
                    "    with mp.get_context('spawn').Pool(2) as pool:\n"
                    "        print(sum(pool.map(work, range(10))))\n")
        r = Run("climp", None, argv=["-m", "ringprof", "--include", prog, prog])
        try:
            assert r.out.strip().splitlines()[-1] == "90"
            if os.environ.get("RP_INSTALLED") == "1":
                assert r.functions()["work"]["calls"] == 10
                assert len(r.report["sources"]) >= 3  # the program and its two workers
            assert r.report["dropped"] == 0
        finally:
            r.cleanup()
