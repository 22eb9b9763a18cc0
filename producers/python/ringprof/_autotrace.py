# SPDX-License-Identifier: MIT
"""RINGPROF_PYTHON=trace: every Python call of this process recorded from here on.

Imported by ringprof-trace.pth (installed with the package) when Python starts, or by a
sitecustomize that imports it; the filters come from RINGPROF_PYTHON_INCLUDE/EXCLUDE.
"""
import os

import ringprof
from ringprof._cli import split

if os.environ.get("RINGPROF_PYTHON") == "trace":
    ringprof.trace_calls(True, include=split(os.environ.get("RINGPROF_PYTHON_INCLUDE")),
                         exclude=split(os.environ.get("RINGPROF_PYTHON_EXCLUDE")))
