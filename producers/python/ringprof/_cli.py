# SPDX-License-Identifier: MIT
"""`python -m ringprof`'s command line, and RINGPROF_PYTHON=trace's environment.

Pure Python, imported by the package before its C extension: the extension makes the
process's segment when it loads (rp_init reads RINGPROF_SESSION then), so under
`python -m ringprof --session S ...` the options must be in the environment first. They
go there (RINGPROF_SESSION, RINGPROF_PYTHON=trace, RINGPROF_PYTHON_INCLUDE/EXCLUDE), which
is also how the program's child processes (uvicorn/gunicorn workers, multiprocessing)
inherit them.
"""
import argparse
import os
import sys

USAGE = ("python -m ringprof [--session S] [--calls|--no-calls] [--include GLOB] "
         "[--exclude GLOB] (script.py | -m module) [args ...]")


def parser():
    p = argparse.ArgumentParser(prog="python -m ringprof", usage=USAGE,
                                description="Run a Python program with ringprof recording "
                                "(every Python call with --calls, the default), as "
                                "`python -m cProfile` does; a `ringprof run` engine of the "
                                "same session reads it live.")
    p.add_argument("--session", help="the engine's session (else RINGPROF_SESSION)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--calls", dest="calls", action="store_true", default=True,
                   help="record every Python call, cProfile-style (default)")
    g.add_argument("--no-calls", dest="calls", action="store_false",
                   help="record only the program's own spans, requests and counters")
    p.add_argument("--include", action="append", default=[], metavar="GLOB",
                   help="record only functions whose file or qualified name matches "
                   "(fnmatch; repeatable)")
    p.add_argument("--exclude", action="append", default=[], metavar="GLOB",
                   help="do not record functions whose file or qualified name matches")
    p.add_argument("-m", dest="module", action="store_true",
                   help="run the first argument as a module, as python -m does")
    p.add_argument("target", help="script.py, or the module with -m")
    p.add_argument("args", nargs=argparse.REMAINDER, help="the program's arguments")
    return p


def split(value):
    """RINGPROF_PYTHON_INCLUDE/EXCLUDE: comma-separated patterns."""
    return [x for x in (value or "").split(",") if x]


def parse(argv):
    return parser().parse_args(argv)


def export(opts):
    """The options into the environment (this process's rp_init and every child)."""
    if opts.session:
        os.environ["RINGPROF_SESSION"] = opts.session
    if opts.calls:
        os.environ["RINGPROF_PYTHON"] = "trace"
    elif os.environ.get("RINGPROF_PYTHON") == "trace":
        del os.environ["RINGPROF_PYTHON"]
    if opts.include:
        os.environ["RINGPROF_PYTHON_INCLUDE"] = ",".join(opts.include)
    if opts.exclude:
        os.environ["RINGPROF_PYTHON_EXCLUDE"] = ",".join(opts.exclude)


def early():
    """When this interpreter runs `python -m ringprof ...`: sys.argv[0] is "-m" while
    the package is imported (Python's documented rule for -m), sys.orig_argv the full
    command line. Bad options are left for __main__ to report."""
    orig = getattr(sys, "orig_argv", None)
    if sys.argv[:1] != ["-m"] or not orig:
        return
    for i in range(len(orig) - 1):
        if orig[i] == "-m" and orig[i + 1] == "ringprof":
            try:
                export(parse(orig[i + 2:]))
            except SystemExit:
                pass
            return
