// SPDX-License-Identifier: MIT
/*
 * ringprof: the command-line tool. `run` is the engine (tools/run.c); `snapshot` asks
 * a running engine for one; `report` renders a snapshot and `analyze` a trace file,
 * in the same formats; `segments` and `probe` show what the engine would see.
 * Errors are one line on stderr and a non-zero exit status.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "import_chrome.h"
#include "probe.h"
#include "render.h"
#include "segment.h"
#include "snapshot.h"

static const char usage[] =
	"usage: ringprof run [--session S] [--snapshot-dir D] [...]   the engine (--help)\n"
	"       ringprof snapshot [--session S] [--timeout-ms N]\n"
	"       ringprof report SNAPSHOT [--format text|json|pstats] [-o FILE] [--limit N]\n"
	"       ringprof analyze TRACE [--format text|json|pstats] [-o FILE] [--limit N] [caps]\n"
	"       ringprof segments [--session S] [--rings]\n"
	"       ringprof probe\n"
	"\n"
	"  run        the engine in the foreground: drains the session's producers; SIGUSR1\n"
	"             writes a snapshot, SIGINT/SIGTERM a final one\n"
	"  snapshot   ask the running engine of a session for a snapshot; prints its path\n"
	"  report     render a snapshot file\n"
	"  analyze    the engine over a Chrome trace file (.json or .json.gz; torch,\n"
	"             Perfetto, chrome://tracing) and render the result\n"
	"  segments   list the producer segments of a session (default: $RINGPROF_SESSION\n"
	"             or \"default\"), validating every header as the engine does\n"
	"  --rings    also list every claimed ring: owner, state, backlog, dropped\n"
	"  probe      what this kernel offers the engine: io_uring, futex waits, TSC\n"
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
		printf("    ring %-4u %-8s gen %-6u tid %-8d backlog %-8u dropped %llu\n", i,
		       st <= RP_RING_RETIRED ? states[st] : "invalid", r->gen, r->tid,
		       rp_segment_ring_pending(s, i), (unsigned long long)r->dropped);
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

/* Signals the engine and waits for the snapshot file to be replaced (a rename makes
 * a new inode). */
static int cmd_snapshot(int argc, char **argv)
{
	static const struct option opts[] = { { "session", 1, NULL, 's' },
					      { "timeout-ms", 1, NULL, 't' },
					      { "help", 0, NULL, 'h' },
					      { NULL, 0, NULL, 0 } };
	const char *session = NULL;
	char path[PATH_MAX];
	uint64_t timeout = 5000, t0;
	struct stat before = { 0 }, now;
	int32_t pid;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 's': session = optarg; break;
		case 't': timeout = strtoull(optarg, NULL, 10); break;
		case 'h': fputs(usage, stdout); return 0;
		default: return rp_cli_error(2, "snapshot: bad option (try --help)");
		}
	}
	if ((session = rp_cli_session(session)) == NULL)
		return 2;
	if (rp_cli_read_marker(session, &pid, path, sizeof(path)) != 0)
		return rp_cli_error(1, "no engine runs for session \"%s\"", session);
	stat(path, &before);
	if (kill(pid, SIGUSR1) < 0)
		return rp_cli_error(1, "engine pid %d: %s", pid, strerror(errno));
	for (t0 = mono_ms(); mono_ms() - t0 < timeout;) {
		struct timespec ms = { 0, 5000000 };
		if (stat(path, &now) == 0 && (now.st_ino != before.st_ino ||
					      now.st_mtim.tv_nsec != before.st_mtim.tv_nsec ||
					      now.st_mtim.tv_sec != before.st_mtim.tv_sec)) {
			printf("%s\n", path);
			return 0;
		}
		nanosleep(&ms, NULL);
	}
	return rp_cli_error(1, "engine pid %d wrote no snapshot to %s within %llu ms", pid,
			    path, (unsigned long long)timeout);
}

struct progress {
	uint64_t t0, last;
};

/* On a terminal: bytes read and events/s, every ~MiB. */
static void show_progress(void *ctx, uint64_t bytes, uint64_t total)
{
	struct progress *p = ctx;
	uint64_t now = mono_ms();

	if (now - p->last < 200)
		return;
	p->last = now;
	fprintf(stderr, "\ranalyze: %.1f of %.1f MiB, %.1f MiB/s   ", (double)bytes / 1048576.0,
		(double)total / 1048576.0,
		(double)bytes / 1048576.0 / ((double)(now - p->t0 + 1) / 1000.0));
}

static int load_trace(const char *path, const struct rp_engine_cfg *cfg, struct rp_report *r)
{
	struct progress p = { mono_ms(), mono_ms() };
	char why[RP_WHY_MAX] = "";
	struct rp_engine *e;
	bool tty = isatty(STDERR_FILENO);
	int err;

	if (rp_engine_open(cfg, &e) != 0)
		return rp_cli_error(1, "out of memory");
	err = rp_import_chrome(e, path, tty ? show_progress : NULL, &p, why);
	if (tty)
		fputs("\r\033[K", stderr);
	if (err == 0)
		err = rp_engine_report(e, r);
	rp_engine_close(e);
	if (err)
		return rp_cli_error(1, "%s", why[0] ? why : strerror(-err));
	return 0;
}

/* Renders to memory first: a file is written whole (tmp + rename) or not at all. */
static int emit(const struct rp_report *r, const char *format, const char *out, unsigned limit)
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
	else
		err = rp_render_pstats(r, m);
	fclose(m);
	if (err) {
		free(buf);
		return rp_cli_error(1, "%s: %s", format, strerror(-err));
	}
	if (out == NULL) {
		err = fwrite(buf, 1, len, stdout) == len ? 0 : -EIO;
	} else {
		FILE *f;
		snprintf(tmp, sizeof(tmp), "%s.tmp.%d", out, (int)getpid());
		f = fopen(tmp, "wb");
		err = f && fwrite(buf, 1, len, f) == len ? 0 : -errno;
		if (f && fclose(f) != 0 && err == 0)
			err = -errno;
		if (err == 0 && rename(tmp, out) != 0)
			err = -errno;
		if (err)
			unlink(tmp);
	}
	free(buf);
	return err ? rp_cli_error(1, "%s: %s", out ? out : "stdout", strerror(-err)) : 0;
}

static int cmd_render(int argc, char **argv, bool analyze)
{
	static const struct option opts[] = {
		{ "format", 1, NULL, 'f' },	   { "output", 1, NULL, 'o' },
		{ "limit", 1, NULL, 'l' },	   { "help", 0, NULL, 'h' },
		{ "max-names", 1, NULL, 'c' },	   { "max-tracks", 1, NULL, 'c' },
		{ "max-depth", 1, NULL, 'c' },	   { "max-cct-nodes", 1, NULL, 'c' },
		{ "max-sources", 1, NULL, 'c' },
		{ "max-sketch-names", 1, NULL, 'c' },   { "max-window-names", 1, NULL, 'c' },
		{ "max-counters", 1, NULL, 'c' },	   { "topk", 1, NULL, 'c' },
		{ "max-window-level", 1, NULL, 'c' },   { "subwindows", 1, NULL, 'c' },
		{ "windows", 1, NULL, 'c' },		   { NULL, 0, NULL, 0 }
	};
	const char *format = "text", *out = NULL;
	struct rp_engine_cfg cfg;
	struct rp_report r;
	char why[RP_WHY_MAX] = "";
	unsigned limit = 40;
	int c, idx, err = 0;

	rp_engine_cfg_default(&cfg);
	while ((c = getopt_long(argc, argv, "f:o:l:", opts, &idx)) != -1) {
		switch (c) {
		case 'f': format = optarg; break;
		case 'o': out = optarg; break;
		case 'l': limit = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'h': fputs(usage, stdout); return 0;
		case 'c':
			if (!analyze || !rp_cli_cap_option(&cfg, opts[idx].name, optarg, &err) ||
			    err)
				return rp_cli_error(2, "--%s %s: not valid here", opts[idx].name,
						    optarg);
			break;
		default: return rp_cli_error(2, "bad option (try --help)");
		}
	}
	if (analyze && rp_cli_check_caps(&cfg) != 0)
		return 2;
	if (optind + 1 != argc)
		return rp_cli_error(2, "%s: need exactly one %s file (try --help)",
				    analyze ? "analyze" : "report", analyze ? "trace" : "snapshot");
	if (strcmp(format, "text") && strcmp(format, "json") && strcmp(format, "pstats"))
		return rp_cli_error(2, "--format %s: use text, json or pstats", format);
	if (analyze) {
		if (load_trace(argv[optind], &cfg, &r) != 0)
			return 1;
	} else if (rp_snapshot_read_file(argv[optind], &r, why) != 0) {
		rp_report_free(&r);
		return rp_cli_error(1, "%s", why);
	}
	err = emit(&r, format, out, limit);
	rp_report_free(&r);
	return err;
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
	if (strcmp(argv[1], "snapshot") == 0)
		return cmd_snapshot(argc - 1, argv + 1);
	if (strcmp(argv[1], "report") == 0 || strcmp(argv[1], "analyze") == 0)
		return cmd_render(argc - 1, argv + 1, strcmp(argv[1], "analyze") == 0);
	fprintf(stderr, "ringprof: unknown command \"%s\" (try --help)\n", argv[1]);
	return 2;
}
