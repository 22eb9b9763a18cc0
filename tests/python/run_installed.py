# SPDX-License-Identifier: MIT
"""ctest test_python_installed: `pip install` of the repository into a fresh venv, offline
(--no-index, no build isolation: Debian's setuptools), then the Python suite against the
installed package (RP_PYTHONPATH empty, so nothing comes from a build tree). With
`python -m build` (Debian: python3-build) the copy is first made into an sdist and a
wheel, and the sdist is what gets installed (so the sdist is checked complete).

The sources are copied first (what MANIFEST.in ships), so the build's files (build-py/,
*.egg-info) land in a temporary directory, not in the source tree. Exit 77 (ctest's skip)
with a message when venv or pip is missing (Debian: python3-venv, python3-pip).
"""
import os
import shutil
import subprocess
import sys
import tempfile

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TESTS = os.path.join(SRC, "tests", "python")


def skip(why):
    print("SKIP: " + why)
    sys.exit(77)


def copy_sources(dst):
    for f in ("setup.py", "pyproject.toml", "MANIFEST.in", "README.md"):
        shutil.copy(os.path.join(SRC, f), dst)
    os.makedirs(os.path.join(dst, "docs"))
    shutil.copy(os.path.join(SRC, "docs", "python.md"), os.path.join(dst, "docs"))
    shutil.copytree(os.path.join(SRC, "include"), os.path.join(dst, "include"))
    ign = shutil.ignore_patterns("__pycache__", "*.egg-info", "auto", "CMakeLists.txt")
    shutil.copytree(os.path.join(SRC, "producers"), os.path.join(dst, "producers"), ignore=ign)


def main():
    try:
        import venv  # noqa: F401
        import ensurepip  # noqa: F401  (Debian ships it with python3-venv only)
    except ImportError:
        skip("python3-venv is not installed")
    if subprocess.run([sys.executable, "-m", "pip", "--version"],
                      capture_output=True).returncode != 0:
        skip("pip is not installed (Debian: python3-pip)")
    with tempfile.TemporaryDirectory(prefix="rp_pip_") as tmp:
        src, env_dir = os.path.join(tmp, "src"), os.path.join(tmp, "venv")
        os.makedirs(src)
        copy_sources(src)
        # --without-pip: the system's pip (seen through --system-site-packages) installs
        # into the venv; ensurepip would only copy another pip.
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip",
                        env_dir], check=True)
        py = os.path.join(env_dir, "bin", "python")
        env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
                   PYTHONPATH="")
        what = src
        if subprocess.run([sys.executable, "-c", "import build"],
                          capture_output=True).returncode == 0:
            dist = os.path.join(tmp, "dist")
            subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", dist,
                            src], check=True, env=env, cwd=tmp, stdout=subprocess.DEVNULL)
            built = sorted(os.listdir(dist))
            print("built:", " ".join(built))
            assert any(f.endswith(".whl") for f in built), built
            what = os.path.join(dist, next(f for f in built if f.endswith(".tar.gz")))
        else:
            print("python -m build not available (python3-build): installing the tree")
        subprocess.run([py, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-index",
                        "--no-deps", what], check=True, env=env, cwd=tmp)
        where = subprocess.run([py, "-c", "import ringprof, ringprof._ringprof as m; "
                                "print(m.__file__)"], check=True, env=env, cwd=tmp,
                               capture_output=True, text=True).stdout.strip()
        assert where.startswith(env_dir), where
        print("installed:", where)
        env.update(RP_PYTHONPATH="", RP_INSTALLED="1")
        r = subprocess.run([py, "-m", "pytest", "-q", "-p", "no:cacheprovider", TESTS],
                           env=env, cwd=tmp)
        sys.exit(r.returncode)


if __name__ == "__main__":
    main()
