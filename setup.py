# SPDX-License-Identifier: MIT
"""The C extension of the `ringprof` package (metadata: pyproject.toml).

ringprof._ringprof is ringprof_py.c linked with the producer library's sources, compiled
here as the CMake build compiles them (C11, _GNU_SOURCE, the producer's headers; Concurrency
Kit's ck_ring.h from the system, Debian's libck-dev). The build also puts ringprof-trace.pth
beside the package: one line that, only when RINGPROF_PYTHON=trace is set, starts call
tracing in every interpreter of that site-packages (docs/python.md).
"""
import os

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
PRODUCER = ["ringprof.c", "clock.c", "layout.c", "shadow.c", "summary.c"]
PTH = "ringprof-trace.pth"


class build_py_pth(build_py):
    """build_py, plus the .pth file at the root of the build (site-packages)."""

    def run(self):
        super().run()
        src = os.path.join("producers", "python", PTH)
        self.copy_file(src, os.path.join(self.build_lib, PTH))

    def get_outputs(self, include_bytecode=True):
        return super().get_outputs(include_bytecode) + [os.path.join(self.build_lib, PTH)]


ext = Extension(
    "ringprof._ringprof",
    sources=["producers/python/ringprof_py.c"] + ["producers/" + f for f in PRODUCER],
    include_dirs=["include", "producers"],
    define_macros=[("_GNU_SOURCE", None)],
    extra_compile_args=["-std=c11", "-fvisibility=hidden", "-Wno-missing-field-initializers",
                        "-Wno-cast-function-type"],
    extra_link_args=["-pthread"],
    depends=["include/ringprof/ringprof.h", "include/ringprof/wire.h"] +
    ["producers/" + h for h in ("clock.h", "layout.h", "ring_ck.h", "shadow.h", "summary.h")],
)

# build-py/: not CMake's build/ (.gitignore has build*/)
setup(ext_modules=[ext], cmdclass={"build_py": build_py_pth},
      options={"build": {"build_base": "build-py"}})
