# SPDX-License-Identifier: MIT
"""Test harness for the Python producer: a live engine around a producer script,
and an independent reader of the producer's kept segment (the raw events), from
which the tests compute their reference call statistics by brute force."""
import json
import mmap
import os
import signal
import struct
import subprocess
import sys
import tempfile
import textwrap
import time

BIN = os.environ.get("RP_BIN_DIR", "")
RINGPROF = os.path.join(BIN, "ringprof")
PYTHONPATH = os.environ.get("RP_PYTHONPATH", "")
TAG = os.environ.get("RP_TEST_TAG", "x")


class Run:
    """An engine on a private session, a producer script run to its end, the
    engine's final snapshot as JSON (report), and the producers' segments."""

    def __init__(self, name, script, env=None, engine_args=(), keep=False, argv=None):
        """argv: run `python3 ARGV...` as given (no segment dump) instead of script."""
        self.session = "py_%s_%s_%d" % (name, TAG, os.getpid())
        self.dir = tempfile.mkdtemp(prefix="rp_py_")
        penv = dict(os.environ, RINGPROF_SESSION=self.session, PYTHONPATH=PYTHONPATH,
                    RINGPROF_EXIT_WAIT_MS="10000", RINGPROF_KEEP="1" if keep else "0")
        penv.update(env or {})
        eng = subprocess.Popen([RINGPROF, "run", "--session", self.session, "--snapshot-dir",
                                self.dir, "--quiet", "--no-socket", *engine_args],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        # The engine announces itself; a producer that exits before that would not
        # wait for it to drain.
        marker = "/dev/shm/ringprof.%s.engine" % self.session
        for _ in range(1000):
            if os.path.exists(marker) or eng.poll() is not None:
                break
            time.sleep(0.01)
        # Each producer process dumps its own segment's records at exit, before
        # the library's exit path (Python's atexit runs before C's).
        head = textwrap.dedent("""
            import atexit as _rp_atexit, sys as _rp_sys
            _rp_sys.path.insert(0, %r)
            def _rp_dump():
                import ringprof, rpharness
                if ringprof.segment_path():
                    rpharness.dump_segment(ringprof.segment_path()[1:], %r)
            _rp_atexit.register(_rp_dump)
        """) % (os.path.dirname(os.path.abspath(__file__)), self.dir)
        try:
            cmd = [sys.executable] + (list(argv) if argv is not None
                                      else ["-c", head + textwrap.dedent(script)])
            p = subprocess.run(cmd, env=penv, capture_output=True, text=True, timeout=240)
        finally:
            eng.send_signal(signal.SIGINT)
            _, err = eng.communicate(timeout=60)
        assert p.returncode == 0, p.stderr
        self.out = p.stdout
        self.stderr = p.stderr
        snap = os.path.join(self.dir, "ringprof-%s.msgpack" % self.session)
        assert os.path.exists(snap), err.decode()
        self.snapshot = snap
        r = subprocess.run([RINGPROF, "report", snap, "--format", "json"], capture_output=True,
                           text=True, check=True)
        self.report = json.loads(r.stdout)
        self.segments = sorted(os.path.join(self.dir, f) for f in os.listdir(self.dir)
                               if f.startswith("raw."))

    def result(self):
        """The last line the script printed, as JSON."""
        return json.loads(self.out.strip().splitlines()[-1])

    def functions(self):
        return {f["name"]: f for f in self.report["functions"]}

    def pstats(self):
        """The report as pstats.Stats(...).stats, through `ringprof report --format pstats`."""
        import pstats
        path = os.path.join(self.dir, "report.prof")
        subprocess.run([RINGPROF, "report", self.snapshot, "--format", "pstats", "-o", path],
                       check=True)
        return pstats.Stats(path).stats

    def cleanup(self):
        for f in os.listdir(self.dir):
            os.unlink(os.path.join(self.dir, f))
        os.rmdir(self.dir)


# ---- the wire format, read independently (include/ringprof/wire.h) ----

HDR = struct.Struct("<QHHIQIIIIQQQQQIIiIQ")


def dump_segment(name, outdir):
    names, events, pid = _read_shm(name)
    with open(os.path.join(outdir, "raw.%d.json" % os.getpid()), "w") as f:
        json.dump({"names": names, "events": events, "pid": pid}, f)


def read_segment(path):
    """A dump of dump_segment(): (names, events, pid)."""
    with open(path) as f:
        d = json.load(f)
    return {int(k): v for k, v in d["names"].items()}, d["events"], d["pid"]


def _read_shm(name):
    """(names, events, pid): names[id] = (name, category, file, line); events =
    [(ring, ns, name, kind, flags, track, arg)] in ring order, ns through the
    header's clock (wire.h's formula, with Python's exact integers)."""
    with open("/dev/shm/" + name, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    (magic, vmaj, vmin, hsize, segsize, evsize, nrings, cap, dsize, desc_off, data_off,
     ntab_off, arena_off, arena_size, ncap, nsize, pid, _r0, _rt) = HDR.unpack_from(m, 0)
    assert magic == 0x31464F5250474E52 and evsize == 32
    src, shift, mult, ref_ticks, ref_ns = struct.unpack_from("<IIQQQ", m, 104)
    names_used = struct.unpack_from("<I", m, 196)[0]

    def s(off, n):
        return m[arena_off + off:arena_off + off + n].decode()

    names = {}
    for i in range(1, names_used):
        e = struct.unpack_from("<10I", m, ntab_off + i * nsize)
        names[i] = (s(e[2], e[3]), s(e[4], e[5]), s(e[6], e[7]) if e[7] else "", e[8])
    events = []
    for r in range(nrings):
        d = desc_off + r * dsize
        state = struct.unpack_from("<I", m, d)[0]
        if state == 0:
            continue
        p_tail = struct.unpack_from("<I", m, d + 128)[0]
        assert p_tail < cap, "ring wrapped: the test needs more ring events"
        assert struct.unpack_from("<Q", m, d + 16)[0] == 0, "the ring dropped records"
        for k in range(p_tail):
            ts, nm, kind, flags, _res, track, arg = struct.unpack_from(
                "<QIBBHQQ", m, data_off + (r * cap + k) * 32)
            d_ticks = ts - ref_ticks
            if d_ticks >= 1 << 63:
                d_ticks -= 1 << 64
            ns = (ref_ns + ((d_ticks * mult) >> shift)) % (1 << 64)
            events.append((r, ns, nm, kind, flags, track, arg))
    m.close()
    return names, events, pid


def union(iv):
    """Total length of the union of intervals (brute force over sorted starts)."""
    tot, cur_s, cur_e = 0, None, None
    for s, e in sorted(iv):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                tot += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        tot += cur_e - cur_s
    return tot


def reference(names, events):
    """Per function name: calls, self_ns, cum_ns (primitive calls only), from the
    raw events: thread stacks by name (BEGIN/END), trees by span id (CHILD_*)."""
    spans = []  # (name, start, end, parent span key or None, key)
    stacks = {}
    seq = iter(range(1 << 62))
    open_tree = {}
    for (ring, ns, nm, kind, flags, track, arg) in events:
        if kind == 1:
            stacks.setdefault(ring, []).append([nm, ns, ("t", ring, next(seq))])
        elif kind == 2:
            st = stacks[ring]
            assert st and st[-1][0] == nm, "test input must nest"
            n, start, key = st.pop()
            parent = st[-1][2] if st else None
            spans.append((n, start, ns, parent, key))
        elif kind == 8:
            parent, sid = arg >> 32, arg & 0xFFFFFFFF
            pk = (track, parent) if parent else None
            open_tree[(track, sid)] = (nm, ns, pk)
        elif kind == 9:
            n, start, pk = open_tree.pop((track, arg))
            spans.append((n, start, ns, pk, (track, arg)))
    assert not open_tree and all(not s for s in stacks.values())
    by_key = {s[4]: s for s in spans}
    kids = {}
    for s in spans:
        kids.setdefault(s[3], []).append(s)
    out = {}
    for (n, start, end, pk, key) in spans:
        name = names[n][0]
        child = union([(c[1], c[2]) for c in kids.get(key, [])])
        anc, prim = pk, True
        while anc is not None:
            if by_key[anc][0] == n:
                prim = False
            anc = by_key[anc][3]
        f = out.setdefault(name, {"calls": 0, "self_ns": 0, "cum_ns": 0})
        f["calls"] += 1
        f["self_ns"] += (end - start) - min(child, end - start)
        f["cum_ns"] += (end - start) if prim else 0
    return out
