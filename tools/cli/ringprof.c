// SPDX-License-Identifier: MIT
/*
 * ringprof: the command-line tool. `run` is the engine (tools/cli/run.c); `snapshot` asks
 * a running engine for one; `report` renders a snapshot and `analyze` a trace file,
 * in the same formats; `segments` and `probe` show what the engine would see.
 * Errors are one line on stderr and a non-zero exit status.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

#include "cli.h"
#include "import_chrome.h"
#include "fetch.h"
#include "merge.h"
#include "import_nat.h"
#include "probe.h"
#include "render.h"
#include "render_export.h"
#include "segment.h"
#include "snapshot.h"

static const char usage[] =
	"usage: ringprof run [--session S] [--snapshot-dir D] [...]   the engine (--help)\n"
	"       ringprof top [--session S] [--dir D] [--once]   live view of a running engine\n"
	"       ringprof snapshot [--session S] [--timeout-ms N] [-o PATH | --keep]\n"
	"       ringprof snapshot --url http://HOST:PORT/snapshot [--http-token-file F] [-o PATH]\n"
	"       ringprof report SNAPSHOT [--format F] [-o FILE] [--limit N] [export options]\n"
	"       ringprof analyze TRACE [--format F] [-o FILE] [--limit N] [caps] [export options]\n"
	"               [--input chrome|nat] [--max-aiq-nodes N] [--max-nat-events N]\n"
	"       ringprof merge SNAPSHOT|URL... -o OUT [--http-token-file F]\n"
	"       ringprof segments [--session S] [--rings]\n"
	"       ringprof probe\n"
	"\n"
	"  run        the engine in the foreground: drains the session's producers; SIGUSR1\n"
	"             writes a snapshot, SIGINT/SIGTERM a final one\n"
	"  snapshot   ask the running engine of a session for a snapshot; prints its path\n"
	"             (-o PATH: keep it there; --keep: keep it beside the engine's under a\n"
	"             timestamped name; the engine's own file is replaced at each one);\n"
	"             --url: from GET /snapshot (docs/fleet.md) to PATH or stdout\n"
	"  report     render a snapshot file\n"
	"  analyze    the engine over a Chrome trace file (.json or .json.gz; torch,\n"
	"             Perfetto, chrome://tracing) or an agent-toolkit trace (nat:\n"
	"             all_requests_profiler_traces.json; detected by content) and render\n"
	"             the result; aiq and aiq-text: the toolkit's own analysis of it\n"
	"  merge      merge snapshots (processes, hosts, runs) into one, written\n"
	"             atomically to OUT (rules: docs/snapshot.md)\n"
	"  segments   list the producer segments of a session (default: $RINGPROF_SESSION\n"
	"             or \"default\"), validating every header as the engine does\n"
	"  --rings    also list every claimed ring: owner, state, backlog, high-water\n"
	"             mark (the highest backlog the engine saw), dropped\n"
	"  probe      what this kernel offers the engine: io_uring, futex waits, TSC\n"
	"\n"
	"  --format F           text, json, pstats, folded (collapsed stacks), prom\n"
	"                       (Prometheus text; --window W), chrome (Chrome trace of the\n"
	"                       flight recorder), gantt (SVG), msgpack (a snapshot, as\n"
	"                       `ringprof report` reads) or pprof (gzipped profile.proto\n"
	"                       for go tool pprof, Pyroscope, Parca; needs -o or a pipe)\n"
	"  --from NS --to NS    chrome/gantt: spans overlapping [from, to] (report clock, ns)\n"
	"  --steps A:B          chrome/gantt: the time range of recorded steps A..B (0-based)\n"
	"  --gantt-rows N       gantt: tracks drawn (default 200)\n"
	"  --recorder-spans N   run/analyze: spans the flight recorder keeps (default 65536)\n"
	"  --recorder-samples N run/analyze: counter samples it keeps (default 16384)\n"
	"  --step-category C    analyze: spans of category C are steps (default \"step\")\n"
	"  --step-name PREFIX   analyze: spans whose name starts with PREFIX are steps\n"
	"  --nesting torch      analyze: self times as torch's key_averages() (a child that\n"
	"                       ends after its parent is un-nested, self may go below the\n"
	"                       children's sum); default ringprof: clamped to the parent\n"
	"  --progress, --no-progress  analyze: force the progress line on stderr (default:\n"
	"                       on when stderr is a terminal and stdout is one or -o is set)\n"
	"\n"
	"caps (run, analyze):\n" RP_CLI_CAP_USAGE;

static void print_rings(struct rp_segment *s)
{
	static const char *states[] = { "free", "active", "retired" };

	for (uint32_t i = 0; i < s->v.ring_count; i++) {
		const struct rp_wire_ring *r =
			(const struct rp_wire_ring *)((char *)s->base + s->v.ring_desc_offset) + i;
		uint32_t st = __atomic_load_n(&r->state, __ATOMIC_RELAXED);

		if (st == RP_RING_FREE && r->gen == 0)
			continue;
		printf("    ring %-4u %-8s gen %-6u tid %-8d backlog %-8u hwm %-8u dropped %llu\n",
		       i, st <= RP_RING_RETIRED ? states[st] : "invalid", r->gen, r->tid,
		       rp_segment_ring_pending(s, i), r->hwm, (unsigned long long)r->dropped);
	}
}

static void print_segment(const char *name, bool rings)
{
	char why[RP_WHY_MAX];
	struct rp_segment *s;
	const struct rp_wire_header *h;
	uint64_t dropped = 0;
	int err;

	err = rp_segment_open(name, &s, why);
	if (err) {
		printf("%-40s  refused: %s\n", name, why);
		return;
	}
	h = s->base;
	for (uint32_t i = 0; i < s->v.ring_count; i++)
		dropped += ((const struct rp_wire_ring *)((char *)s->base +
							  s->v.ring_desc_offset))[i].dropped;
	printf("%-40s  pid %-7d %-6s rings %u x %u  names %u/%u  dropped %llu  noring %llu"
	       "  clock %s %.3f MHz\n",
	       name, s->v.pid, h->state == RP_SEG_EXITED ? "exited" : "live", s->v.ring_count,
	       s->v.ring_capacity, h->names_used, s->v.name_capacity,
	       (unsigned long long)dropped, (unsigned long long)h->noring_dropped,
	       s->v.clock.source == RP_CLOCK_TSC ? "tsc" : "monotonic",
	       (double)s->v.clock.ticks_per_sec / 1e6);
	if (rings)
		print_rings(s);
	rp_segment_close(s);
}

static int cmd_segments(int argc, char **argv)
{
	static const struct option opts[] = { { "session", required_argument, NULL, 's' },
					      { "rings", no_argument, NULL, 'r' },
					      { "help", no_argument, NULL, 'h' },
					      { NULL, 0, NULL, 0 } };
	const char *session = getenv("RINGPROF_SESSION");
	char prefix[64];
	bool rings = false;
	int c, n = 0;
	DIR *d;

	while ((c = getopt_long(argc, argv, "s:rh", opts, NULL)) != -1) {
		switch (c) {
		case 's': session = optarg; break;
		case 'r': rings = true; break;
		case 'h': fputs(usage, stdout); return 0;
		default: fputs(usage, stderr); return 2;
		}
	}
	if (session == NULL || *session == '\0')
		session = "default";
	snprintf(prefix, sizeof(prefix), RP_WIRE_NAME_PREFIX "%s.", session);
	d = opendir("/dev/shm");
	if (d == NULL) {
		fprintf(stderr, "ringprof: /dev/shm: %s\n", strerror(errno));
		return 1;
	}
	for (struct dirent *e; (e = readdir(d)) != NULL;) {
		char name[300];

		if (strncmp(e->d_name, prefix, strlen(prefix)) != 0 ||
		    strcmp(e->d_name + strlen(prefix), "engine") == 0)
			continue;
		snprintf(name, sizeof(name), "/%s", e->d_name);
		print_segment(name, rings);
		n++;
	}
	closedir(d);
	if (n == 0)
		printf("no segments in session \"%s\"\n", session);
	return 0;
}

static int cmd_probe(void)
{
	struct rp_probe p;

	rp_probe_run(&p);
	printf("io_uring:             %s\n",
	       p.io_uring_err == 0 ? "available" : strerror(-p.io_uring_err));
	printf("io_uring FUTEX_WAIT:  %s\n", p.uring_futex_wait ? "yes" : "no");
	printf("io_uring FUTEX_WAITV: %s\n", p.uring_futex_waitv ? "yes" : "no");
	printf("futex_waitv(2):       %s\n", p.futex_waitv ? "yes" : "no");
	printf("invariant TSC:        %s\n", p.tsc_invariant ? "yes" : "no");
	printf("doorbell wait:        %s\n", rp_probe_doorbell(&p));
	return 0;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* SIGUSR1 to the session's engine, and only to it: the pid is pinned with a pidfd,
 * then checked again to be the marker lock's holder (so a pid reused meanwhile is
 * not signalled). @return 0 or -errno (see rp_cli_read_marker()). */
static int signal_engine(const char *session, int32_t *pid, char *path, size_t n,
			 struct stat *before)
{
	int32_t again;
	int pfd, err;

	if ((err = rp_cli_read_marker(session, pid, path, n)) != 0)
		return err;
	pfd = (int)syscall(SYS_pidfd_open, *pid, 0);
	if (pfd < 0)
		return -ESRCH;
	err = rp_cli_read_marker(session, &again, path, n);
	if (err == 0 && again != *pid)
		err = -ESTALE;
	if (err == 0) {
		stat(path, before);
		if (syscall(SYS_pidfd_send_signal, pfd, SIGUSR1, NULL, 0) < 0)
			err = -errno;
	}
	close(pfd);
	return err;
}

/* Signals the engine and waits for the snapshot file to be replaced (a rename makes
 * a new inode). */
/* Copies @from to @to (write to a temporary, then rename: whole or absent). */
static int copy_file(const char *from, const char *to)
{
	char tmp[PATH_MAX + 128], buf[65536];
	ssize_t n = 0;
	int in, out, err = 0;

	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", to, (int)getpid());
	in = open(from, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return -errno;
	out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (out < 0) {
		err = -errno;
		close(in);
		return err;
	}
	while (err == 0 && (n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n)
			err = -EIO;
	if (n < 0 || fsync(out) < 0)
		err = -errno;
	close(in);
	if (close(out) < 0 && err == 0)
		err = -errno;
	if (err == 0 && rename(tmp, to) < 0)
		err = -errno;
	if (err)
		unlink(tmp);
	return err;
}

/*
 * Keeps the snapshot just written at @path: at @out, or (keep) beside it under a
 * timestamped name. The engine replaces @path by rename, never in place, so a hard
 * link keeps this one whole; across file systems it is copied.
 */
static int keep_snapshot(const char *path, const char *out, char *kept, size_t cap)
{
	struct timespec now;
	struct tm tm;
	char stamp[32];
	const char *dot = strrchr(path, '.');

	if (out != NULL) {
		snprintf(kept, cap, "%s", out);
	} else {
		clock_gettime(CLOCK_REALTIME, &now);
		localtime_r(&now.tv_sec, &tm);
		strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
		snprintf(kept, cap, "%.*s-%s.%03ld%s", (int)(dot ? dot - path : (long)strlen(path)),
			 path, stamp, now.tv_nsec / 1000000, dot ? dot : "");
	}
	unlink(kept); /* -o over an older file */
	if (link(path, kept) == 0)
		return 0;
	return copy_file(path, kept);
}

/* @len bytes to @path whole or not at all (a temporary file renamed), or to stdout
 * when @path is NULL. */
static int write_bytes(const char *path, const char *data, size_t len)
{
	char tmp[PATH_MAX];
	FILE *f;
	int err = 0;

	if (path == NULL)
		return fwrite(data, 1, len, stdout) == len && fflush(stdout) == 0 ? 0 : -EIO;
	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	f = fopen(tmp, "wbe");
	if (f == NULL)
		return -errno;
	if (fwrite(data, 1, len, f) != len || fflush(f) != 0 || fsync(fileno(f)) != 0)
		err = -errno ? -errno : -EIO;
	if (fclose(f) != 0 && !err)
		err = -errno;
	if (!err && rename(tmp, path) != 0)
		err = -errno;
	if (err)
		unlink(tmp);
	return err;
}

/* --url: GET /snapshot, checked by decoding it, the bytes kept as they came. */
static int snapshot_url(const char *url, const char *token_file, const char *out)
{
	char why[RP_WHY_MAX], token[260];
	struct rp_membuf m;
	struct rp_report r = { 0 };
	int err;

	if (out == NULL && isatty(STDOUT_FILENO))
		return rp_cli_error(2, "snapshot --url: MessagePack not written to a terminal "
				    "(use -o PATH, or a pipe)");
	if (token_file && rp_fetch_token(token_file, token, sizeof(token), why) != 0)
		return rp_cli_error(2, "%s", why);
	if (rp_fetch_snapshot(url, token_file ? token : NULL, &m, why) != 0)
		return rp_cli_error(1, "snapshot: %s", why);
	err = rp_snapshot_decode(m.data, m.len, &r, why);
	rp_report_free(&r);
	if (err != 0) {
		rp_membuf_free(&m);
		return rp_cli_error(1, "snapshot: %s: not a snapshot: %s", url, why);
	}
	err = write_bytes(out, m.data, m.len);
	rp_membuf_free(&m);
	if (err != 0)
		return rp_cli_error(1, "%s: %s", out ? out : "stdout", strerror(-err));
	if (out != NULL)
		printf("%s\n", out);
	return 0;
}

static int cmd_snapshot(int argc, char **argv)
{
	static const struct option opts[] = { { "session", 1, NULL, 's' },
					      { "timeout-ms", 1, NULL, 't' },
					      { "output", 1, NULL, 'o' },
					      { "keep", 0, NULL, 'k' },
					      { "url", 1, NULL, 'u' },
					      { "http-token-file", 1, NULL, 'T' },
					      { "help", 0, NULL, 'h' },
					      { NULL, 0, NULL, 0 } };
	const char *session = NULL, *out = NULL, *url = NULL, *token_file = NULL;
	char kept[PATH_MAX + 64];
	bool keep = false;
	char path[PATH_MAX], why[PATH_MAX + 128];
	unsigned failed0 = 0, failed = 0;
	uint64_t timeout = 5000, t0;
	struct stat before = { 0 }, now;
	int32_t pid;
	int c, err;

	while ((c = getopt_long(argc, argv, "o:", opts, NULL)) != -1) {
		switch (c) {
		case 's': session = optarg; break;
		case 't': timeout = strtoull(optarg, NULL, 10); break;
		case 'o': out = optarg; break;
		case 'k': keep = true; break;
		case 'u': url = optarg; break;
		case 'T': token_file = optarg; break;
		case 'h': fputs(usage, stdout); return 0;
		default: return rp_cli_error(2, "snapshot: bad option (try --help)");
		}
	}
	if (url != NULL)
		return snapshot_url(url, token_file, out);
	if ((session = rp_cli_session(session)) == NULL)
		return 2;
	rp_cli_marker_failure(session, &failed0, why, sizeof(why));
	if ((err = signal_engine(session, &pid, path, sizeof(path), &before)) != 0)
		return rp_cli_error(1, "session \"%s\": %s", session,
				    rp_cli_marker_strerror(err));
	for (t0 = mono_ms(); mono_ms() - t0 < timeout;) {
		struct timespec ms = { 0, 5000000 };

		/* A write of ours failed: the engine said why (run.c, note_failure()). */
		if (rp_cli_marker_failure(session, &failed, why, sizeof(why)) == 0 &&
		    failed != failed0)
			return rp_cli_error(1, "engine pid %d could not write its snapshot: %s",
					    pid, why);
		if (stat(path, &now) == 0 && (now.st_ino != before.st_ino ||
					      now.st_mtim.tv_nsec != before.st_mtim.tv_nsec ||
					      now.st_mtim.tv_sec != before.st_mtim.tv_sec)) {
			err = out || keep ? keep_snapshot(path, out, kept, sizeof(kept)) : 0;
			if (err)
				return rp_cli_error(1, "%s: %s", out ? out : kept, strerror(-err));
			printf("%s\n", out || keep ? kept : path);
			return 0;
		}
		nanosleep(&ms, NULL);
	}
	if (why[0] != '\0') /* an older failure: the engine may still be failing */
		return rp_cli_error(1, "engine pid %d wrote no snapshot to %s within %llu ms "
				    "(its last failed write: %s)", pid, path,
				    (unsigned long long)timeout, why);
	return rp_cli_error(1, "engine pid %d wrote no snapshot to %s within %llu ms", pid,
			    path, (unsigned long long)timeout);
}

/* export: analyze's progress line (stderr): bytes read of total, trace events parsed
 * and their rate, redrawn in place at most 10 times a second. */
struct progress {
	uint64_t t0, last;
	const struct rp_engine *e;
};

static void show_progress(void *ctx, uint64_t bytes, uint64_t total)
{
	struct progress *p = ctx;
	uint64_t now = mono_ms(), ev = p->e ? p->e->progress_events : 0;
	double secs = (double)(now - p->t0 + 1) / 1000.0;

	if (now - p->last < 100)
		return;
	p->last = now;
	fprintf(stderr, "\ranalyze: %.1f of %.1f MiB (%.0f%%), %.2f M events, %.2f M events/s   ",
		(double)bytes / 1048576.0, (double)total / 1048576.0,
		total ? 100.0 * (double)bytes / (double)total : 0.0, (double)ev / 1e6,
		(double)ev / 1e6 / secs);
}

static struct rp_nat_caps nat_caps; /* --max-nat-events; defaults */

static void nat_warn(const char *path, const struct rp_nat_stats *st)
{
	if (st->bad || st->cut)
		fprintf(stderr, "ringprof: %s: %llu steps skipped (not valid toolkit steps, or past "
			"a cap: %llu), %llu names or UUIDs cut to %d bytes\n", path,
			(unsigned long long)st->bad, (unsigned long long)st->capped,
			(unsigned long long)st->cut, RP_NAT_STR_MAX - 1);
}

/* Chrome or agent-toolkit trace: as --input says, else by content. */
/* The input file opens and is not a directory: said as such, with the path, before
 * any guess at its format ("is not an agent-toolkit trace" for a missing file). */
static int check_input(const char *path)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return rp_cli_error(1, "%s: %s", path, strerror(errno));
	if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		close(fd);
		return rp_cli_error(1, "%s: is a directory, not a file", path);
	}
	close(fd);
	return 0;
}

static bool is_nat(const char *path, const char *input)
{
	return input ? strcmp(input, "nat") == 0 : rp_nat_detect(path) == 1;
}

/* The toolkit's own analysis of an agent-toolkit trace (--format aiq, aiq-text). */
static int load_aiq(const char *path, uint32_t max_nodes, struct rp_aiq *a, bool progress)
{
	struct progress p = { mono_ms(), mono_ms(), NULL };
	struct rp_nat_stats st;
	char why[RP_WHY_MAX] = "";
	bool tty = progress;
	int err;

	if (rp_aiq_init(a, max_nodes) != 0)
		return rp_cli_error(1, "out of memory");
	err = rp_import_nat(NULL, a, &nat_caps, path, tty ? show_progress : NULL, &p, &st, why);
	if (tty)
		fputs("\r\033[K", stderr);
	if (err == 0 && (err = rp_aiq_finish(a)) != 0)
		snprintf(why, sizeof(why), "%s: out of memory", path);
	if (err == 0)
		nat_warn(path, &st);
	if (err == 0 && a->c.nodes_dropped)
		fprintf(stderr, "ringprof: %s: %llu calls past --max-aiq-nodes %u not analysed\n",
			path, (unsigned long long)a->c.nodes_dropped, a->max_nodes);
	return err ? rp_cli_error(1, "%s", why[0] ? why : strerror(-err)) : 0;
}

static int load_trace(const char *path, const struct rp_engine_cfg *cfg, struct rp_report *r,
		      bool progress, const char *input)
{
	struct progress p = { mono_ms(), 0, NULL };
	char why[RP_WHY_MAX] = "";
	struct rp_engine *e;
	struct rp_nat_stats st = { 0 };
	int err;

	if (rp_engine_open(cfg, &e) != 0)
		return rp_cli_error(1, "out of memory");
	p.e = e;
	if (is_nat(path, input))
		err = rp_import_nat(e, NULL, &nat_caps, path, progress ? show_progress : NULL, &p,
				    &st, why);
	else
		err = rp_import_chrome(e, path, progress ? show_progress : NULL, &p, why);
	if (progress)
		fputs("\r\033[K", stderr);
	if (err == 0)
		err = rp_engine_report(e, r);
	rp_engine_close(e);
	if (err)
		return rp_cli_error(1, "%s", why[0] ? why : strerror(-err));
	return 0;
}

static const char *prom_window; /* --window: the window of --format prom's summary */

/* Whether -o FILE is written through a temporary renamed over it: not for a device or
 * a pipe (-o /dev/null, a fifo), which renaming would replace. */
static bool regular_or_absent(const char *path)
{
	struct stat st;

	return stat(path, &st) != 0 || S_ISREG(st.st_mode);
}

/* A temporary file beside -o's: created, never an existing file or a planted link
 * followed (O_EXCL | O_NOFOLLOW). */
static FILE *create_tmp(const char *tmp)
{
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
	FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;

	if (fd >= 0 && f == NULL) {
		close(fd);
		unlink(tmp);
	}
	return f;
}

/*
 * The text report indents each call two spaces a level, as the toolkit does: a
 * chain of depth D costs D^2 bytes of spaces (a 2.8 MB trace of depth 10,000 wrote
 * 100 MB; depth 1e6 would never end). That format has no other way to show depth,
 * so a tree whose indentation would be over AIQ_TEXT_INDENT_MAX and dwarf the rest
 * of the report is refused before anything is written; --format aiq (JSON) is
 * linear in the trace.
 */
#define AIQ_TEXT_INDENT_MAX (64ull << 20)

static int aiq_text_fits(const struct rp_aiq *a)
{
	uint64_t indent, rest = (uint64_t)a->n_nodes * 120;
	uint32_t depth;

	if (rp_render_aiq_text_indent(a, &indent, &depth) != 0)
		return rp_cli_error(1, "out of memory");
	if (indent > AIQ_TEXT_INDENT_MAX && indent > 8 * rest)
		return rp_cli_error(1, "--format aiq-text: the call tree is %u levels deep; its "
				    "indentation alone would be %llu MB (it grows with the square "
				    "of the depth): use --format aiq (JSON) for this trace",
				    depth, (unsigned long long)(indent >> 20));
	return 0;
}

/* The toolkit's result can be hundreds of MB: rendered straight to the file (tmp +
 * rename, so still whole or not at all) or to stdout, never to memory. */
static int emit_aiq(const struct rp_aiq *a, const char *format, const char *out)
{
	char tmp[PATH_MAX];
	FILE *f = stdout;
	int err;

	if (strcmp(format, "aiq-text") == 0 && (err = aiq_text_fits(a)) != 0)
		return err;

	bool direct = out == NULL || strcmp(out, "-") == 0 || !regular_or_absent(out);

	if (out != NULL && strcmp(out, "-") == 0)
		out = NULL;
	if (out != NULL) {
		snprintf(tmp, sizeof(tmp), "%s.tmp.%d", out, (int)getpid());
		if ((f = direct ? fopen(out, "wb") : create_tmp(tmp)) == NULL)
			return rp_cli_error(1, "%s: %s", direct ? out : tmp, strerror(errno));
	}
	err = strcmp(format, "aiq") == 0 ? rp_render_aiq_json(a, f) : rp_render_aiq_text(a, f);
	if (fflush(f) != 0 && err == 0)
		err = -errno;
	if (out != NULL) {
		if (fclose(f) != 0 && err == 0)
			err = -errno;
		if (!direct && err == 0 && rename(tmp, out) != 0)
			err = -errno;
		if (!direct && err)
			unlink(tmp);
	}
	return err ? rp_cli_error(1, "%s: %s", out ? out : "stdout", strerror(-err)) : 0;
}

/* --format msgpack: the snapshot encoder's sink, into the memory stream. */
static int stream_sink(void *ctx, const void *buf, size_t len)
{
	return fwrite(buf, 1, len, ctx) == len ? 0 : -EIO;
}

/* Renders to memory first: a file is written whole (tmp + rename) or not at all. */
static int emit(const struct rp_report *r, const char *format, const char *out, unsigned limit,
		const struct rp_export_opts *xo)
{
	char *buf = NULL, tmp[PATH_MAX];
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	int err;

	if (m == NULL)
		return rp_cli_error(1, "out of memory");
	if (strcmp(format, "text") == 0)
		err = rp_render_text(r, m, limit);
	else if (strcmp(format, "json") == 0)
		err = rp_render_json(r, m);
	else if (strcmp(format, "folded") == 0)
		err = rp_render_folded(r, m);
	else if (strcmp(format, "prom") == 0)
		err = rp_render_prom(r, m, prom_window);
	else if (strcmp(format, "chrome") == 0 || strcmp(format, "gantt") == 0) { /* export */
		char warn[300];

		err = format[0] == 'c' ? rp_render_chrome(r, m, xo) : rp_render_gantt(r, m, xo);
		if (err == 0 && rp_render_chrome_warning(r, warn, sizeof(warn)))
			fprintf(stderr, "ringprof: warning: %s\n", warn);
	}
	else if (strcmp(format, "pprof") == 0) /* gzipped profile.proto (docs/outputs.md) */
		err = rp_render_pprof(r, m);
	else if (strcmp(format, "msgpack") == 0) /* a snapshot (docs/snapshot.md) */
		err = rp_snapshot_encode(r, stream_sink, m);
	else
		err = rp_render_pstats(r, m);
	fclose(m);
	if (err) {
		free(buf);
		return rp_cli_error(1, "%s: %s", format, strerror(-err));
	}
	if (out == NULL || strcmp(out, "-") == 0) {
		err = fwrite(buf, 1, len, stdout) == len ? 0 : -EIO;
		out = NULL;
	} else if (!regular_or_absent(out)) {
		/* A device or a pipe (-o /dev/null, a fifo): write to it; renaming a
		 * file over it would replace the device. */
		FILE *f = fopen(out, "wb");

		err = f && fwrite(buf, 1, len, f) == len ? 0 : -(errno ? errno : EIO);
		if (f && fclose(f) != 0 && err == 0)
			err = -errno;
	} else {
		FILE *f;
		snprintf(tmp, sizeof(tmp), "%s.tmp.%d", out, (int)getpid());
		f = create_tmp(tmp);
		err = f && fwrite(buf, 1, len, f) == len ? 0 : -errno;
		if (f && fclose(f) != 0 && err == 0)
			err = -errno;
		if (err == 0 && rename(tmp, out) != 0)
			err = -errno;
		if (err && f != NULL) /* only a file we created */
			unlink(tmp);
	}
	free(buf);
	return err ? rp_cli_error(1, "%s: %s", out ? out : "stdout", strerror(-err)) : 0;
}

/* export: the options of chrome/gantt, the recorder and steps, progress. */
struct xopts {
	struct rp_export_opts o;
	bool steps;
	uint64_t step_a, step_b;
	int progress;		/* -1 auto, 0 off, 1 on */
};

static bool parse_u64(const char *s, uint64_t *v)
{
	char *end;

	errno = 0;
	*v = strtoull(s, &end, 10);
	return errno == 0 && end != s && *end == '\0' && *s != '-';
}

/* One export option (@c its getopt value); 0, or the CLI's exit status. */
static int export_option(int c, const char *arg, struct xopts *x, struct rp_engine_cfg *cfg)
{
	uint64_t v;
	char *colon;

	switch (c) {
	case 'F': case 'T': case 'R':
		if (!parse_u64(arg, &v) || (c == 'R' && (v > UINT32_MAX)))
			return rp_cli_error(2, "%s: not a number of the right size", arg);
		if (c == 'F') x->o.from = v;
		if (c == 'T') x->o.to = v;
		if (c == 'R') x->o.max_rows = (uint32_t)v;
		return 0;
	case 'S':
		colon = strchr(arg, ':');
		if (colon == NULL)
			return rp_cli_error(2, "--steps %s: use A:B", arg);
		*colon = '\0';
		if (!parse_u64(arg, &x->step_a) || !parse_u64(colon + 1, &x->step_b) ||
		    x->step_a > x->step_b)
			return rp_cli_error(2, "--steps %s:%s: use A:B with A <= B", arg, colon + 1);
		x->steps = true;
		return 0;
	case 'C': cfg->step_category = arg; return 0;
	case 'P': cfg->step_name = arg; return 0;
	case 'p': x->progress = 1; return 0;
	case 'q': x->progress = 0; return 0;
	}
	return rp_cli_error(2, "bad option (try --help)");
}

/* --steps A:B: narrows the filter to the steps' time range. 0 or an exit status. */
static int apply_steps(const struct rp_report *r, struct xopts *x)
{
	uint64_t from = 0, to = 0;

	if (!x->steps)
		return 0;
	if (rp_export_steps_range(r, x->step_a, x->step_b, &from, &to) != 0)
		return rp_cli_error(1, "--steps %llu:%llu: no such steps in the flight recorder "
				    "(%u phases of steps)", (unsigned long long)x->step_a,
				    (unsigned long long)x->step_b, r->n_steps);
	if (from > x->o.from)
		x->o.from = from;
	if (to < x->o.to)
		x->o.to = to;
	return 0;
}

static const char *const formats[] = { "text",	 "json",  "pstats", "folded", "prom",
				       "chrome", "gantt", "msgpack", "pprof" };

static bool known_format(const char *f)
{
	for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++)
		if (strcmp(f, formats[i]) == 0)
			return true;
	return false;
}

static int cmd_render(int argc, char **argv, bool analyze)
{
	static const struct option opts[] = {
		{ "format", 1, NULL, 'f' },	   { "output", 1, NULL, 'o' },
		{ "limit", 1, NULL, 'l' },	   { "help", 0, NULL, 'h' },
		RP_CLI_CAP_OPTIONS,		   { "window", 1, NULL, 'w' },
		/* export */
		{ "from", 1, NULL, 'F' },	   { "to", 1, NULL, 'T' },
		{ "steps", 1, NULL, 'S' },	   { "gantt-rows", 1, NULL, 'R' },
		{ "step-category", 1, NULL, 'C' }, { "step-name", 1, NULL, 'P' },
		{ "progress", 0, NULL, 'p' },	   { "no-progress", 0, NULL, 'q' },
		{ "input", 1, NULL, 'i' },	   { "nesting", 1, NULL, 'N' },
		{ "max-aiq-nodes", 1, NULL, 'n' },	{ "max-nat-events", 1, NULL, 'e' },
		{ NULL, 0, NULL, 0 }
	};
	const char *input = NULL;
	uint32_t aiq_nodes = 0;
	struct rp_aiq aiq;
	const char *format = "text", *out = NULL;
	struct rp_engine_cfg cfg;
	struct rp_report r;
	struct xopts x = { .o = { .from = 0, .to = UINT64_MAX }, .progress = -1 };
	char why[RP_WHY_MAX] = "";
	unsigned limit = 40;
	int c, idx, err = 0;

	rp_engine_cfg_default(&cfg);
	while ((c = getopt_long(argc, argv, "f:o:l:", opts, &idx)) != -1) {
		switch (c) {
		case 'f': format = optarg; break;
		case 'o': out = optarg; break;
		case 'l': limit = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'w': prom_window = optarg; break;
		case 'h': fputs(usage, stdout); return 0;
		case 'i': input = optarg; break;
		case 'N':
			if (!analyze || (strcmp(optarg, "torch") && strcmp(optarg, "ringprof")))
				return rp_cli_error(2, "--nesting %s: torch or ringprof, with analyze",
						    optarg);
			cfg.torch_nesting = !strcmp(optarg, "torch");
			break;
		case 'n': aiq_nodes = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'e': nat_caps.max_events = strtoull(optarg, NULL, 10); break;
		case 'c':
			if (!analyze || !rp_cli_cap_option(&cfg, opts[idx].name, optarg, &err) ||
			    err)
				return rp_cli_error(2, "--%s %s: not valid here", opts[idx].name,
						    optarg);
			break;
		case 'C': case 'P': case 'p': case 'q':
			if (!analyze)
				return rp_cli_error(2, "--%s: only with analyze", opts[idx].name);
			/* fall through */
		case 'F': case 'T': case 'S': case 'R':
			if ((err = export_option(c, optarg, &x, &cfg)) != 0)
				return err;
			break;
		default: return rp_cli_error(2, "bad option (try --help)");
		}
	}
	if (analyze && rp_cli_check_caps(&cfg) != 0)
		return 2;
	if (optind + 1 != argc)
		return rp_cli_error(2, "%s: need exactly one %s file (try --help)",
				    analyze ? "analyze" : "report", analyze ? "trace" : "snapshot");
	if (input && strcmp(input, "chrome") && strcmp(input, "nat"))
		return rp_cli_error(2, "--input %s: use chrome or nat", input);
	if ((err = check_input(argv[optind])) != 0)
		return err;
	if (x.progress < 0) /* progress on stderr; quiet when stdout is a pipe or file */
		x.progress = isatty(STDERR_FILENO) && (out != NULL || isatty(STDOUT_FILENO));
	if (analyze && (!strcmp(format, "aiq") || !strcmp(format, "aiq-text"))) {
		if (!is_nat(argv[optind], input))
			return rp_cli_error(2, "--format %s: %s is not an agent-toolkit trace "
					    "(--input nat to insist)", format, argv[optind]);
		err = load_aiq(argv[optind], aiq_nodes, &aiq, x.progress == 1);
		if (err == 0)
			err = emit_aiq(&aiq, format, out);
		rp_aiq_free(&aiq);
		return err;
	}
	if (!known_format(format))
		return rp_cli_error(2, "--format %s: use text, json, pstats, folded, prom, chrome, "
				    "gantt, msgpack or pprof%s", format,
				    analyze ? " (aiq, aiq-text: agent-toolkit traces)" : "");
	/* gzip data on a terminal is noise that may leave it in a strange state (gzip(1)
	 * refuses likewise); -o says where it goes */
	if (strcmp(format, "pprof") == 0 && out == NULL && isatty(STDOUT_FILENO))
		return rp_cli_error(2, "--format pprof: binary output not written to a terminal "
				    "(use -o FILE.pb.gz, or a pipe)");
	if (analyze) {
		if (load_trace(argv[optind], &cfg, &r, x.progress == 1, input) != 0)
			return 1;
	} else if (rp_snapshot_read_file(argv[optind], &r, why) != 0) {
		rp_report_free(&r);
		return rp_cli_error(1, "%s", why);
	}
	err = apply_steps(&r, &x);
	if (err == 0)
		err = emit(&r, format, out, limit, &x.o);
	rp_report_free(&r);
	return err;
}

/* A snapshot file, or a URL fetched (GET /snapshot) and decoded. */
static int read_input(const char *arg, const char *token, struct rp_report *r,
		      char why[RP_WHY_MAX])
{
	struct rp_membuf m;
	int err;

	memset(r, 0, sizeof(*r));
	if (!rp_fetch_is_url(arg))
		return rp_snapshot_read_file(arg, r, why);
	if ((err = rp_fetch_snapshot(arg, token, &m, why)) != 0)
		return err;
	err = rp_snapshot_decode(m.data, m.len, r, why);
	rp_membuf_free(&m);
	return err;
}

/* ringprof merge A B ... -o OUT: every input read (errors name the file), merged in
 * order (engine/formats/merge.c), written whole or not at all. */
static int cmd_merge(int argc, char **argv)
{
	static const struct option opts[] = { { "output", 1, NULL, 'o' },
					      { "http-token-file", 1, NULL, 'T' },
					      { "help", 0, NULL, 'h' },
					      { NULL, 0, NULL, 0 } };
	struct rp_report out = { 0 }, in;
	char why[RP_WHY_MAX], token[260];
	const char *path = NULL, *token_file = NULL;
	int c, err = 0;

	while ((c = getopt_long(argc, argv, "o:", opts, NULL)) != -1) {
		switch (c) {
		case 'o': path = optarg; break;
		case 'T': token_file = optarg; break;
		case 'h': fputs(usage, stdout); return 0;
		default: return rp_cli_error(2, "bad option (try --help)");
		}
	}
	if (path == NULL || optind >= argc)
		return rp_cli_error(2, "merge: need one or more snapshots and -o OUT (try --help)");
	if (token_file && rp_fetch_token(token_file, token, sizeof(token), why) != 0)
		return rp_cli_error(2, "%s", why);
	for (int i = optind; i < argc && !err; i++) {
		struct rp_align al;

		err = read_input(argv[i], token_file ? token : NULL, &in, why);
		if (!err) {
			/* hosts' monotonic clocks onto the first input's, on wall time */
			rp_report_align(&out, &in, &al);
			if (al.note[0])
				fprintf(stderr, "ringprof merge: %s: %s\n", argv[i], al.note);
			err = rp_report_merge(&out, &in, why, sizeof(why));
		}
		if (err)
			rp_cli_error(1, "merge: %s: %s", argv[i], why);
		rp_report_free(&in);
	}
	if (!err && rp_snapshot_write_file(path, &out, why) != 0)
		err = rp_cli_error(1, "%s", why);
	rp_report_free(&out);
	return err ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		fputs(usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (strcmp(argv[1], "segments") == 0)
		return cmd_segments(argc - 1, argv + 1);
	if (strcmp(argv[1], "probe") == 0)
		return cmd_probe();
	if (strcmp(argv[1], "run") == 0)
		return rp_cmd_run(argc - 1, argv + 1);
	if (strcmp(argv[1], "top") == 0)
		return rp_cmd_top(argc - 1, argv + 1);
	if (strcmp(argv[1], "snapshot") == 0)
		return cmd_snapshot(argc - 1, argv + 1);
	if (strcmp(argv[1], "merge") == 0)
		return cmd_merge(argc - 1, argv + 1);
	if (strcmp(argv[1], "report") == 0 || strcmp(argv[1], "analyze") == 0)
		return cmd_render(argc - 1, argv + 1, strcmp(argv[1], "analyze") == 0);
	fprintf(stderr, "ringprof: unknown command \"%s\" (try --help)\n", argv[1]);
	return 2;
}
