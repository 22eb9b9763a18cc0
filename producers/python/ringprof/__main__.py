# SPDX-License-Identifier: MIT
"""python -m ringprof [--session S] [--calls|--no-calls] [--include/--exclude GLOB]
(script.py | -m module) [args ...]: the program run unmodified, as `python -m cProfile`
runs it (sys.argv, sys.path[0] and __main__ as the program would have them), with every
Python call recorded (unless --no-calls). The options were put in the environment when
the package was imported (ringprof._cli), so child processes record the same way.
"""
import builtins
import os
import runpy
import sys
import types

from ringprof import _cli, trace_calls


def main():
    opts = _cli.parse(sys.argv[1:])
    _cli.export(opts)  # already done by the package's import; again for a direct call
    sys.argv[:] = [opts.target] + opts.args
    incl = _cli.split(os.environ.get("RINGPROF_PYTHON_INCLUDE"))
    excl = _cli.split(os.environ.get("RINGPROF_PYTHON_EXCLUDE"))
    if opts.module:
        code = "run_module(modname, run_name='__main__', alter_sys=True)"
        glob = {"run_module": runpy.run_module, "modname": opts.target}
    else:
        sys.path[0] = os.path.dirname(os.path.abspath(opts.target))
        with open(opts.target, "rb") as f:
            code = compile(f.read(), opts.target, "exec")
        # A real __main__ module, as `python script.py` has: pickle (multiprocessing's
        # spawn, its workers) finds the program's functions in sys.modules["__main__"].
        main_mod = types.ModuleType("__main__")
        main_mod.__dict__.update(__file__=opts.target, __package__=None, __cached__=None,
                                 __builtins__=builtins)
        sys.modules["__main__"] = main_mod
        glob = main_mod.__dict__
    if opts.calls:
        trace_calls(True, include=incl, exclude=excl)
    try:
        exec(code, glob)
    finally:
        if opts.calls:
            trace_calls(False)


if __name__ == "__main__":
    main()
