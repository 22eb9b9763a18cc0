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
#include "otlp.h"
#include "fetch.h"
#include "merge.h"
#include "import_nat.h"
#include "probe.h"
#include "render.h"
#include "render_export.h"
#include "segment.h"
#include "snapshot.h"
#include "version.h"

/* The global usage: one line a command; each command's own --help has the rest. */
static const char usage[] =
	"usage: ringprof COMMAND [options]   (ringprof help COMMAND: its options)\n"
	"  run        the engine in the foreground: drains a session's producers\n"
	"  top        live view of a running engine\n"
	"  snapshot   ask the running engine of a session for a snapshot; prints its path\n"
	"  report     render a snapshot file (text, json, pstats, folded, prom, ...)\n"
	"  analyze    the engine over a Chrome or agent-toolkit trace file, rendered\n"
	"  merge      merge snapshots (processes, hosts, runs) into one\n"
	"  segments   list the producer segments of a session\n"
	"  probe      what this kernel offers the engine: io_uring, futex waits, TSC\n"
	"  help CMD   a command's options (as ringprof CMD --help)\n"
	"  --version  the version\n";

static const char help_snapshot[] =
	"usage: ringprof snapshot [--session S] [--timeout-ms N] [--now] [-o PATH | --keep]\n"
	"       ringprof snapshot --url http://HOST:PORT/snapshot [--http-token-file F] [-o PATH]\n"
	"Asks the running engine of a session for a snapshot (SIGUSR1) and prints its path;\n"
	"with --url, fetches one from an engine's GET /snapshot (docs/fleet.md) to PATH or\n"
	"stdout.\n"
	"  --session S     the session (default $RINGPROF_SESSION or \"default\")\n"
	"  --timeout-ms N  wait at most N ms for the snapshot (0 to 3600000, default 5000)\n"
	"  --now           the engine's first snapshot, even if it left a backlog unmerged\n"
	"                  (by default, while records wait, ask again until none do or\n"
	"                  the timeout; then say how many the last one left)\n"
	"  -o, --output PATH  keep it at PATH\n"
	"  --keep          keep it beside the engine's under a timestamped name (the\n"
	"                  engine's own file is replaced at each one)\n"
	"  --url URL       fetch from an engine's /snapshot (plain http)\n"
	"  --http-token-file F  send the bearer token in F's first line\n";

/* What report and analyze share: the formats and the export options. */
#define RENDER_OPTIONS                                                                      \
	"  --format F           text, json, pstats, folded (collapsed stacks), prom\n"         \
	"                       (Prometheus text; --window W), chrome (Chrome trace of the\n" \
	"                       flight recorder), gantt (SVG), msgpack (a snapshot, as\n"     \
	"                       `ringprof report` reads) or pprof (gzipped profile.proto\n"   \
	"                       for go tool pprof, Pyroscope, Parca; needs -o or a pipe)\n"   \
	"  -o, --output FILE    write there (whole or not at all), not to stdout\n"           \
	"  --limit N            text: rows per table (0 to 4294967295, default 40)\n"         \
	"  --from NS --to NS    chrome/gantt: spans overlapping [from, to] (report clock, ns)\n"\
	"  --steps A:B          chrome/gantt: the time range of recorded steps A..B (0-based)\n"\
	"  --gantt-rows N       gantt: tracks drawn (0 to 4294967295, default 200)\n"

static const char help_report[] =
	"usage: ringprof report SNAPSHOT [--format F] [-o FILE] [--limit N] [export options]\n"
	"Renders a snapshot file (docs/snapshot.md).\n"
	RENDER_OPTIONS;

static const char help_analyze[] =
	"usage: ringprof analyze TRACE [--format F] [-o FILE] [--limit N] [caps] [export options]\n"
	"               [--input chrome|nat|otlp] [--max-aiq-nodes N] [--max-nat-events N]\n"
	"The engine over a Chrome trace file (.json or .json.gz; torch, Perfetto,\n"
	"chrome://tracing), an agent-toolkit trace (nat: all_requests_profiler_traces.json)\n"
	"or OTLP JSON (otlp: the Collector's file exporter, one request a line), detected by\n"
	"content, rendered as report does; --format aiq and aiq-text: the toolkit's own\n"
	"analysis of it.\n"
	RENDER_OPTIONS
	"  --input chrome|nat|otlp  the trace's kind, not detected\n"
	"  --max-aiq-nodes N    aiq: calls analysed (0 to 4294967295; 0: the default)\n"
	"  --max-nat-events N   nat: events read (0: the default)\n"
	"  --step-category C    spans of category C are steps (default \"step\")\n"
	"  --step-name PREFIX   spans whose name starts with PREFIX are steps\n"
	"  --nesting torch      self times as torch's key_averages() (a child that ends\n"
	"                       after its parent is un-nested, self may go below the\n"
	"                       children's sum); default ringprof: clamped to the parent\n"
	"  --progress, --no-progress  force the progress line on stderr (default: on\n"
	"                       when stderr is a terminal and stdout is one or -o is set)\n"
	"caps:\n" RP_CLI_CAP_USAGE;

static const char help_merge[] =
	"usage: ringprof merge SNAPSHOT|URL... -o OUT [--http-token-file F]\n"
	"Merges snapshots (processes, hosts, runs; files or http:// URLs of engines'\n"
	"/snapshot) into one, written atomically to OUT (rules: docs/snapshot.md); hosts'\n"
	"clocks are aligned on their wall-clock anchors.\n"
	"  -o, --output OUT  the merged snapshot\n"
	"  --http-token-file F  the bearer token for URLs, in F's first line\n";

static const char help_segments[] =
	"usage: ringprof segments [--session S] [--rings]\n"
	"Lists the producer segments of a session, validating every header as the engine\n"
	"does.\n"
	"  --session S  the session (default $RINGPROF_SESSION or \"default\")\n"
	"  --rings      also list every claimed ring: owner, state, backlog, high-water mark\n"
	"               (the highest backlog the engine saw), dropped\n";

static const char help_probe[] =
	"usage: ringprof probe\n"
	"What this kernel offers the engine: io_uring, futex waits, TSC.\n";

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
		case 'h': fputs(help_segments, stdout); return 0;
		default: return rp_cli_bad_option("segments", argv);
		}
	}
	if (optind != argc)
		return rp_cli_error(2, "segments: %s: unexpected argument (try `ringprof help "
				    "segments`)", argv[optind]);
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

static int cmd_probe(int argc, char **argv)
{
	struct rp_probe p;

	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		fputs(help_probe, stdout);
		return 0;
	}
	if (argc > 1)
		return rp_cli_error(2, "probe: %s: takes no arguments (try `ringprof help probe`)",
				    argv[1]);
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

/* The records the snapshot at @path left unmerged (1.5, header.unmerged_records): the
 * engine's backlog when it took it. 0 when it does not read: `report` says why. */
static uint64_t snapshot_unmerged(const char *path)
{
	char why[RP_WHY_MAX];
	struct rp_report r;
	uint64_t n;

	if (rp_snapshot_read_file(path, &r, why) != 0)
		return 0;
	n = r.unmerged_records;
	rp_report_free(&r);
	return n;
}

/*
 * A live snapshot answers at once and leaves the engine's backlog for the next one
 * (header.unmerged_records). A user who asks after the program ended wants all of it:
 * while a snapshot left records, ask again (they are being merged meanwhile) until
 * one holds them all or @timeout ms from @t0 pass. @return the records the last one
 * left (said on stderr when not 0).
 */
static uint64_t snapshot_settle(const char *session, int32_t *pid, char *path, size_t n,
				uint64_t t0, uint64_t timeout)
{
	uint64_t left = snapshot_unmerged(path);

	while (left > 0 && mono_ms() - t0 < timeout) {
		struct timespec ms = { 0, 5000000 };
		struct stat before = { 0 }, now;

		if (signal_engine(session, pid, path, n, &before) != 0)
			break; /* gone: what we have is its last word */
		while (mono_ms() - t0 < timeout &&
		       (stat(path, &now) != 0 || (now.st_ino == before.st_ino &&
						  now.st_mtim.tv_nsec == before.st_mtim.tv_nsec &&
						  now.st_mtim.tv_sec == before.st_mtim.tv_sec)))
			nanosleep(&ms, NULL);
		left = snapshot_unmerged(path);
	}
	if (left > 0)
		fprintf(stderr, "ringprof: snapshot: %llu records not merged yet (the engine's "
			"backlog; its next snapshot holds them)\n", (unsigned long long)left);
	return left;
}

static int cmd_snapshot(int argc, char **argv)
{
	static const struct option opts[] = { { "session", 1, NULL, 's' },
					      { "timeout-ms", 1, NULL, 't' },
					      { "output", 1, NULL, 'o' },
					      { "keep", 0, NULL, 'k' },
					      { "url", 1, NULL, 'u' },
					      { "http-token-file", 1, NULL, 'T' },
					      { "now", 0, NULL, 'n' },
					      { "help", 0, NULL, 'h' },
					      { NULL, 0, NULL, 0 } };
	const char *session = NULL, *out = NULL, *url = NULL, *token_file = NULL;
	char kept[PATH_MAX + 64];
	bool keep = false, at_once = false;
	char path[PATH_MAX], why[PATH_MAX + 128];
	unsigned failed0 = 0, failed = 0;
	uint64_t timeout = 5000, t0;
	struct stat before = { 0 }, now;
	int32_t pid;
	int c, err;

	while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
		switch (c) {
		case 's': session = optarg; break;
		case 't':
			if (rp_cli_number("--timeout-ms", optarg, 0, 3600000, &timeout))
				return 2;
			break;
		case 'o': out = optarg; break;
		case 'k': keep = true; break;
		case 'u': url = optarg; break;
		case 'T': token_file = optarg; break;
		case 'n': at_once = true; break;
		case 'h': fputs(help_snapshot, stdout); return 0;
		default: return rp_cli_bad_option("snapshot", argv);
		}
	}
	if (optind != argc)
		return rp_cli_error(2, "snapshot: %s: unexpected argument (try `ringprof help "
				    "snapshot`)", argv[optind]);
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
			if (!at_once)
				snapshot_settle(session, &pid, path, sizeof(path), t0, timeout);
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
	if (input ? strcmp(input, "otlp") == 0 : rp_otlp_detect(path) == 1) {
		struct rp_otlp_stats os;

		err = rp_otlp_import_file(e, path, NULL, &os, why);
		if (err == 0 && (os.bad || os.cut || os.traces_capped || os.sources_capped))
			fprintf(stderr, "ringprof: %s: %llu spans with an end before their start, "
				"%llu names cut, %llu past the open-trace cap, %llu without a "
				"source row\n", path, (unsigned long long)os.bad,
				(unsigned long long)os.cut, (unsigned long long)os.traces_capped,
				(unsigned long long)os.sources_capped);
	} else if (is_nat(path, input))
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
static int open_tmp(const char *tmp)
{
	return open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
}

static FILE *create_tmp(const char *tmp)
{
	int fd = open_tmp(tmp);
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

/* --format msgpack: the snapshot encoder's sink, into emit()'s stream. */
static int stream_sink(void *ctx, const void *buf, size_t len)
{
	return fwrite(buf, 1, len, ctx) == len ? 0 : -EIO;
}

/*
 * emit()'s stream: the report goes to its file descriptor as it is rendered, with no
 * copy of it in memory (an open_memstream zeroed and copied its buffer at each growth,
 * ~0.25 instructions per byte of an analyzed Chrome trace). The first write error is
 * kept with its errno, for the message. Without a descriptor (fd < 0: the destination
 * could not be opened) the bytes are dropped, so that a render error is still reported
 * before the open error, and the warnings printed, as when the report was rendered
 * before its destination was opened.
 */
struct sink {
	int fd;
	int err;		/* the first failed write's errno; 0 */
};

static ssize_t sink_write(void *ctx, const char *buf, size_t len)
{
	struct sink *s = ctx;

	for (size_t done = 0; s->fd >= 0 && s->err == 0 && done < len;) {
		ssize_t n = write(s->fd, buf + done, len - done);

		if (n > 0)
			done += (size_t)n;
		else if (n == 0 || errno != EINTR)
			s->err = n == 0 ? EIO : errno;
	}
	return s->err ? 0 : (ssize_t)len; /* fopencookie: 0 is an error */
}

static int render(const struct rp_report *r, const char *format, FILE *m, unsigned limit,
		  const struct rp_export_opts *xo)
{
	int err;

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
	return err;
}

/*
 * Renders straight to the output: a regular -o file through a temporary file renamed
 * over it once complete (whole or not at all; removed on any error), stdout or a
 * device or pipe (-o /dev/null, a fifo) as it renders (what a failed render wrote
 * there stays, as with --format aiq). The messages are those of rendering to memory
 * first: a render error, else the open, write, close or rename error.
 */
static int emit(const struct rp_report *r, const char *format, const char *out, unsigned limit,
		const struct rp_export_opts *xo)
{
	bool direct = out == NULL || strcmp(out, "-") == 0 || !regular_or_absent(out);
	struct sink s = { STDOUT_FILENO, 0 };
	char tmp[PATH_MAX];
	int err, open_err = 0;
	bool made = false;	/* the temporary file */
	FILE *m;

	if (out != NULL && strcmp(out, "-") == 0)
		out = NULL;
	if (out == NULL) {
		fflush(stdout); /* anything stdio holds goes first */
	} else {
		snprintf(tmp, sizeof(tmp), "%s.tmp.%d", out, (int)getpid());
		if (direct) /* as fopen(out, "wb") */
			s.fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
		else
			made = (s.fd = open_tmp(tmp)) >= 0;
		open_err = s.fd < 0 ? errno : 0;
	}
	m = fopencookie(&s, "w", (cookie_io_functions_t){ .write = sink_write });
	if (m == NULL) {
		err = rp_cli_error(1, "out of memory");
		goto done;
	}
	setvbuf(m, NULL, _IOFBF, 64 << 10);
	err = render(r, format, m, limit, xo);
	if (fclose(m) != 0 && err == 0 && s.err == 0)
		err = -EIO;
	if (err && s.err == 0) {
		err = rp_cli_error(1, "%s: %s", format, strerror(-err));
	} else if (out == NULL) { /* stdout: the message it always had */
		err = s.err ? rp_cli_error(1, "stdout: %s", strerror(EIO)) : 0;
	} else {
		err = -(open_err ? open_err : s.err);
		if (s.fd >= 0 && close(s.fd) != 0 && err == 0)
			err = -errno;
		s.fd = -1;
		if (err == 0 && !direct && rename(tmp, out) != 0)
			err = -errno;
		err = err ? rp_cli_error(1, "%s: %s", out, strerror(-err)) : 0;
	}
done:
	if (out != NULL && s.fd >= 0)
		close(s.fd);
	if (err && made) /* only a file we created */
		unlink(tmp);
	return err;
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
	return errno == 0 && *s >= '0' && *s <= '9' && *end == '\0';
}

/* One export option (@c its getopt value); 0, or the CLI's exit status. */
static int export_option(int c, const char *arg, struct xopts *x, struct rp_engine_cfg *cfg)
{
	uint64_t v;
	char *colon;

	switch (c) {
	case 'F': case 'T': case 'R':
		if (rp_cli_number(c == 'F' ? "--from" : c == 'T' ? "--to" : "--gantt-rows", arg, 0,
				  c == 'R' ? UINT32_MAX : UINT64_MAX, &v))
			return 2;
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
	return 2;
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
	const char *cmd = analyze ? "analyze" : "report";
	unsigned limit = 40;
	uint64_t v;
	int c, idx, err = 0;

	rp_engine_cfg_default(&cfg);
	while ((c = getopt_long(argc, argv, "f:o:l:h", opts, &idx)) != -1) {
		switch (c) {
		case 'f': format = optarg; break;
		case 'o': out = optarg; break;
		case 'l':
			if (rp_cli_number("--limit", optarg, 0, UINT32_MAX, &v))
				return 2;
			limit = (unsigned)v;
			break;
		case 'w': prom_window = optarg; break;
		case 'h': fputs(analyze ? help_analyze : help_report, stdout); return 0;
		case 'i': input = optarg; break;
		case 'N':
			if (!analyze || (strcmp(optarg, "torch") && strcmp(optarg, "ringprof")))
				return rp_cli_error(2, "--nesting %s: torch or ringprof, with analyze",
						    optarg);
			cfg.torch_nesting = !strcmp(optarg, "torch");
			break;
		case 'n':
			if (rp_cli_number("--max-aiq-nodes", optarg, 0, UINT32_MAX, &v))
				return 2;
			aiq_nodes = (uint32_t)v;
			break;
		case 'e':
			if (rp_cli_number("--max-nat-events", optarg, 0, UINT64_MAX,
					  &nat_caps.max_events))
				return 2;
			break;
		case 'c':
			if (!analyze)
				return rp_cli_error(2, "--%s: only with analyze (a snapshot's caps "
						    "were the engine's)", opts[idx].name);
			if (!rp_cli_cap_option(&cfg, opts[idx].name, optarg, &err) || err)
				return 2; /* said */
			break;
		case 'C': case 'P': case 'p': case 'q':
			if (!analyze)
				return rp_cli_error(2, "--%s: only with analyze", opts[idx].name);
			/* fall through */
		case 'F': case 'T': case 'S': case 'R':
			if ((err = export_option(c, optarg, &x, &cfg)) != 0)
				return err;
			break;
		default: return rp_cli_bad_option(cmd, argv);
		}
	}
	if (analyze && rp_cli_check_caps(&cfg) != 0)
		return 2;
	if (optind + 1 != argc)
		return rp_cli_error(2, "%s: need exactly one %s file (try `ringprof help %s`)",
				    cmd, analyze ? "trace" : "snapshot", cmd);
	if (input && strcmp(input, "chrome") && strcmp(input, "nat") && strcmp(input, "otlp"))
		return rp_cli_error(2, "--input %s: use chrome, nat or otlp", input);
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

static int cmd_report(int argc, char **argv)
{
	return cmd_render(argc, argv, false);
}

static int cmd_analyze(int argc, char **argv)
{
	return cmd_render(argc, argv, true);
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

	while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
		switch (c) {
		case 'o': path = optarg; break;
		case 'T': token_file = optarg; break;
		case 'h': fputs(help_merge, stdout); return 0;
		default: return rp_cli_bad_option("merge", argv);
		}
	}
	if (path == NULL || optind >= argc)
		return rp_cli_error(2, "merge: need one or more snapshots and -o OUT (try `ringprof "
				    "help merge`)");
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

static const struct command {
	const char *name;
	int (*fn)(int argc, char **argv);
} commands[] = {
	{ "run", rp_cmd_run },		  { "top", rp_cmd_top },	{ "snapshot", cmd_snapshot },
	{ "report", cmd_report },	  { "analyze", cmd_analyze },	{ "merge", cmd_merge },
	{ "segments", cmd_segments },	  { "probe", cmd_probe },
};

static const struct command *find_command(const char *name)
{
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(name, commands[i].name) == 0)
			return &commands[i];
	return NULL;
}

/* ringprof help [CMD]: the global usage, or CMD's own (CMD --help). */
static int cmd_help(int argc, char **argv)
{
	char *help_argv[] = { argv[1], "--help", NULL };
	const struct command *c;

	if (argc < 2) {
		fputs(usage, stdout);
		return 0;
	}
	if ((c = find_command(argv[1])) == NULL)
		return rp_cli_error(2, "help: unknown command \"%s\" (try ringprof --help)",
				    argv[1]);
	return c->fn(2, help_argv);
}

int main(int argc, char **argv)
{
	const struct command *c;

	opterr = 0; /* bad options are said in one line by the command (rp_cli_bad_option) */
	if (argc < 2)
		return rp_cli_error(2, "need a command (try ringprof --help)");
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		fputs(usage, stdout);
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0 ||
	    strcmp(argv[1], "version") == 0) {
		printf("ringprof %s\n", rp_version());
		return 0;
	}
	if (strcmp(argv[1], "help") == 0)
		return cmd_help(argc - 1, argv + 1);
	if ((c = find_command(argv[1])) != NULL)
		return c->fn(argc - 1, argv + 1);
	return rp_cli_error(2, "unknown command \"%s\" (try ringprof --help)", argv[1]);
}
