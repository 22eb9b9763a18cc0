// SPDX-License-Identifier: MIT
/*
 * bench_engine: events per second through the consumer on one core.
 *
 * Producer threads of this process fill their rings with a realistic mix (nested
 * thread spans, async request spans, counters) before anything is timed; then one
 * thread consumes everything, timed, in three ways:
 *   raw     rp_segment_drain of every ring into a buffer (copy + release only);
 *   merge   the sources' heap merge by timestamp, records handed to the analysis
 *           with every analysis switched off (names resolved, nothing else);
 *   full    the merge feeding every analysis: tracks, stacks, function statistics,
 *           caller edges, the calling-context tree, concurrency sweeps (overall,
 *           roots, per category), per-name and per-category sketches, midpoint
 *           concurrency, counters, rolling windows and bottleneck lists;
 *           also without the windows, and with windows fine enough to rotate.
 * Each figure is the median of --runs runs, each on freshly filled rings. The raw
 * drain is the baseline measured in the same run; ratios are against it. RSS at
 * the end is reported. With --json, one JSON object. With --cpu, every figure is
 * per second of the consumer thread's CPU time (the producers have exited by then),
 * which a loaded machine does not inflate as it does wall time.
 */
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ringprof/ringprof.h>

#include "sources.h"

#define MAX_RUNS 21

struct opts {
	uint64_t events;	/* per producer thread */
	unsigned threads, runs;
	bool json;
};

static clockid_t clock_id = CLOCK_MONOTONIC; /* --cpu: CLOCK_THREAD_CPUTIME_ID */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(clock_id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint32_t ids[8];
static uint64_t per_thread;

/* A request: an async root with nested thread spans and a counter, 16 events. */
static void *fill(void *arg)
{
	uint64_t track = (uint64_t)(uintptr_t)arg << 40;

	for (uint64_t n = 0; n + 16 <= per_thread; n += 16, track++) {
		rp_async_begin(ids[0], track, 1);
		rp_begin(ids[1]);
		rp_begin(ids[2]);
		rp_end(ids[2]);
		for (int k = 0; k < 4; k++) {
			rp_begin(ids[3]);
			rp_end(ids[3]);
		}
		rp_counter(ids[4], (int64_t)n);
		rp_begin(ids[5]);
		rp_begin(ids[5]); /* recursion */
		rp_end(ids[5]);
		rp_end(ids[5]);
		rp_end(ids[1]);
		rp_async_end(ids[0], track, 1);
	}
	return NULL;
}

/* Producer threads exit after filling; their rings stay until drained. */
static void fill_rings(const struct opts *o)
{
	pthread_t th[64];

	per_thread = o->events;
	for (unsigned i = 0; i < o->threads; i++)
		pthread_create(&th[i], NULL, fill, (void *)(uintptr_t)(i + 1));
	for (unsigned i = 0; i < o->threads; i++)
		pthread_join(th[i], NULL);
}

static uint64_t raw_drain(struct rp_segment *s)
{
	static struct rp_event buf[8192];
	uint64_t n = 0;
	unsigned got;

	for (uint32_t r = 0; r < s->v.ring_count; r++)
		while ((got = rp_segment_drain(s, r, buf, 8192, NULL)) > 0)
			n += got;
	return n;
}

static double run_raw(const struct opts *o, bool warm)
{
	char why[RP_WHY_MAX];
	struct rp_segment *s;
	uint64_t t0, n;

	fill_rings(o);
	if (rp_segment_open(rp_segment_path(), &s, why) != 0) {
		fprintf(stderr, "bench_engine: %s\n", why);
		exit(1);
	}
	if (warm) /* as rp_sources_touch(): one read of each page of the records */
		for (uint32_t r = 0; r < s->v.ring_count; r++) {
			uint32_t p = rp_segment_ring_pending(s, r);

			for (uint32_t k = 0; k < p; k += 4096 / sizeof(struct rp_event))
				(void)*(const volatile uint8_t *)rp_segment_peek(s, r, k);
			if (p != 0)
				(void)*(const volatile uint8_t *)rp_segment_peek(s, r, p - 1);
		}
	t0 = now_ns();
	n = raw_drain(s);
	t0 = now_ns() - t0;
	rp_segment_close(s);
	return (double)n / ((double)t0 / 1e9);
}

enum mode { MERGE, FULL, NO_WINDOWS, FINE_WINDOWS, FULL_COLD, N_MODES };

static size_t engine_bytes;

/* Bytes malloc holds (in use + mmapped). */
static size_t heap_bytes(void)
{
	struct mallinfo2 m = mallinfo2();

	return m.uordblks + m.hblkhd;
}

/* Merge with the analysis on (full) or off: max_depth 1 and no tracks leaves only
 * the merge, the name mapping and the event dispatch. NO_WINDOWS: every analysis
 * but the rolling windows (and with them the per-window bottleneck lists);
 * FINE_WINDOWS: windows of 10 ms, 100 ms, 1 s, so that sub-windows (1 ms) rotate
 * hundreds of times per run (the default 10 s windows hardly rotate in a run).
 * Every mode but FULL_COLD drains rings whose pages the engine has read once
 * (rp_sources_touch), as an engine attached for longer than one lap of its rings
 * has: a fresh mapping's first read of each page fills a page-table entry, which
 * costs more than draining the page on a guest with shadow page tables (raw drain
 * 22 M events/s cold, 620 M warm, on one such machine). FULL_COLD is FULL on a
 * fresh mapping: the engine catching up with a backlog it has just attached. */
static double run_engine(const struct opts *o, enum mode mode, uint64_t *processed)
{
	struct rp_engine_cfg cfg;
	struct rp_engine *e;
	struct rp_sources ss;
	uint64_t t0, n;
	size_t heap0;

	heap0 = heap_bytes();
	rp_engine_cfg_default(&cfg);
	if (mode == MERGE)
		cfg.max_tracks = 1;
	if (mode == NO_WINDOWS)
		cfg.n_windows = 0;
	if (mode == FINE_WINDOWS) {
		cfg.window_ns[0] = 10000000;
		cfg.window_ns[1] = 100000000;
		cfg.window_ns[2] = 1000000000;
	}
	fill_rings(o);
	if (rp_engine_open(&cfg, &e) != 0 || rp_sources_init(&ss, e, getenv("RINGPROF_SESSION")) ||
	    rp_sources_scan(&ss) < 1) {
		fprintf(stderr, "bench_engine: cannot attach to our own segment\n");
		exit(1);
	}
	if (mode != FULL_COLD)
		rp_sources_touch(&ss);
	t0 = now_ns();
	n = rp_sources_drain(&ss, UINT64_MAX);
	t0 = now_ns() - t0;
	*processed = n;
	if (mode == FULL) /* what the engine (and the sources) hold after the run */
		engine_bytes = heap_bytes() - heap0;
	rp_sources_free(&ss);
	rp_engine_close(e);
	return (double)n / ((double)t0 / 1e9);
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, unsigned n)
{
	qsort(v, n, sizeof(*v), cmp);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static uint64_t rss_bytes(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	unsigned long pages = 0, rss = 0;

	if (f != NULL) {
		if (fscanf(f, "%lu %lu", &pages, &rss) != 2)
			rss = 0;
		fclose(f);
	}
	return (uint64_t)rss * (uint64_t)sysconf(_SC_PAGESIZE);
}

static int parse(int argc, char **argv, struct opts *o)
{
	static const struct option longs[] = {
		{ "events", 1, NULL, 'e' }, { "threads", 1, NULL, 't' },
		{ "runs", 1, NULL, 'r' },   { "json", 0, NULL, 'j' },
		{ "cpu", 0, NULL, 'c' },    { "help", 0, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	*o = (struct opts){ .events = 4000000, .threads = 2, .runs = 5 };
	while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
		switch (c) {
		case 'e': o->events = strtoull(optarg, NULL, 10); break;
		case 't': o->threads = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'r': o->runs = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'j': o->json = true; break;
		case 'c': clock_id = CLOCK_THREAD_CPUTIME_ID; break;
		case 'h':
			puts("usage: bench_engine [--events N per thread] [--threads T] [--runs R] "
			     "[--json] [--cpu]");
			exit(0);
		default: return -EINVAL;
		}
	}
	if (o->threads < 1 || o->threads > 64 || o->runs < 1 || o->runs > MAX_RUNS ||
	    o->events < 16)
		return -EINVAL;
	return 0;
}

static void setup_env(const struct opts *o)
{
	char cap[24], session[32];
	uint64_t n = 1024;

	while (n < o->events + 1)
		n *= 2;
	snprintf(cap, sizeof(cap), "%" PRIu64, n);
	setenv("RINGPROF_RING_EVENTS", cap, 0);
	snprintf(session, sizeof(session), "bench_engine_%d", (int)getpid());
	setenv("RINGPROF_SESSION", session, 1);
	setenv("RINGPROF_RINGS", "64", 0);
	if (rp_init() != 0) {
		fprintf(stderr, "bench_engine: the producer library is off\n");
		exit(1);
	}
	ids[0] = rp_intern("request", "REQUEST", NULL, 0);
	ids[1] = rp_intern("handle", "FUNCTION", "srv.c", 10);
	ids[2] = rp_intern("tokenize", "FUNCTION", "srv.c", 20);
	ids[3] = rp_intern("decode_step", "LLM", "srv.c", 30);
	ids[4] = rp_intern("queue_depth", "COUNTER", NULL, 0);
	ids[5] = rp_intern("walk", "FUNCTION", "tree.c", 5);
}

int main(int argc, char **argv)
{
	double raw[MAX_RUNS], raw_cold[MAX_RUNS], v[N_MODES][MAX_RUNS], r, rc, m, f, fc, nw, fw;
	uint64_t processed = 0;
	const char *env = getenv("BENCH_MODE");
	int only = env ? atoi(env) : -1;
	struct opts o;

	if (parse(argc, argv, &o) != 0) {
		fputs("bench_engine: bad arguments (try --help)\n", stderr);
		return 2;
	}
	/* Each run's engine on the heap the run before freed, as one long-lived engine
	 * reuses its memory: left to glibc's heuristics, the heap went back to the kernel
	 * at every engine close without windows (and not with them, a matter of layout),
	 * so that mode's drain alone paid the first touch of its recorder and sweep pages
	 * (page faults: a fifth of its time). Fixed thresholds (which also stop glibc
	 * moving them) keep every mode's blocks in the heap and the heap whole. */
	mallopt(M_MMAP_THRESHOLD, 32 << 20);
	mallopt(M_TRIM_THRESHOLD, 1 << 30);
	setup_env(&o);
	for (unsigned k = 0; k < o.runs; k++) {
		raw[k] = run_raw(&o, true);
		raw_cold[k] = only < 0 || only == FULL_COLD ? run_raw(&o, false) : 1.0;
		for (int mode = 0; mode < N_MODES; mode++) /* BENCH_MODE=n: only that one */
			v[mode][k] = only < 0 || only == mode
					     ? run_engine(&o, (enum mode)mode, &processed)
					     : 1.0;
	}
	r = median(raw, o.runs);
	rc = median(raw_cold, o.runs);
	m = median(v[MERGE], o.runs);
	f = median(v[FULL], o.runs);
	nw = median(v[NO_WINDOWS], o.runs);
	fw = median(v[FINE_WINDOWS], o.runs);
	fc = median(v[FULL_COLD], o.runs);
	if (o.json) {
		printf("{\"raw_events_per_s\": %.0f, \"merge_events_per_s\": %.0f, "
		       "\"full_events_per_s\": %.0f, \"full_ratio_vs_raw\": %.4f, "
		       "\"no_windows_events_per_s\": %.0f, \"fine_windows_events_per_s\": %.0f, "
		       "\"raw_cold_events_per_s\": %.0f, \"full_cold_events_per_s\": %.0f, "
		       "\"rss_bytes\": %" PRIu64 ", \"engine_heap_bytes\": %zu, "
		       "\"events_per_run\": %" PRIu64 ", "
		       "\"threads\": %u, \"runs\": %u, \"clock\": \"%s\"}\n",
		       r, m, f, f / r, nw, fw, rc, fc, rss_bytes(), engine_bytes, processed, o.threads,
		       o.runs, clock_id == CLOCK_MONOTONIC ? "wall" : "thread_cpu");
		return 0;
	}
	printf("bench_engine: %u producer threads x %" PRIu64 " events, %u runs, one consumer "
	       "(%s time)\n",
	       o.threads, o.events, o.runs, clock_id == CLOCK_MONOTONIC ? "wall" : "its CPU");
	printf("%-44s %14s %9s %12s\n", "figure", "M events/s", "vs raw", "ns/event");
	printf("%-44s %14.2f %9.2f %12.2f\n", "raw drain (copy + release)", r / 1e6, 1.0, 1e9 / r);
	printf("%-44s %14.2f %9.2f %12.2f\n", "merge by timestamp, analysis off", m / 1e6, m / r,
	       1e9 / m);
	printf("%-44s %14.2f %9.2f %12.2f\n", "merge + every analysis but windows", nw / 1e6,
	       nw / r, 1e9 / nw);
	printf("%-44s %14.2f %9.2f %12.2f\n", "merge + every analysis (windows 10s,1m,5m)",
	       f / 1e6, f / r, 1e9 / f);
	printf("%-44s %14.2f %9.2f %12.2f\n", "merge + every analysis (windows 10ms..1s)",
	       fw / 1e6, fw / r, 1e9 / fw);
	printf("%-44s %14.2f %9.2f %12.2f\n", "raw drain, rings not yet read (cold)", rc / 1e6,
	       rc / r, 1e9 / rc);
	printf("%-44s %14.2f %9.2f %12.2f\n", "every analysis (windows 10s,1m,5m), cold",
	       fc / 1e6, fc / r, 1e9 / fc);
	printf("cost of the windows + bottleneck lists: %.2f ns/event (default), %.2f (fine)\n",
	       1e9 / f - 1e9 / nw, 1e9 / fw - 1e9 / nw);
	printf("rss at the end: %.1f MiB; the engine's heap after a full run: %.1f MiB\n",
	       (double)rss_bytes() / 1048576.0, (double)engine_bytes / 1048576.0);
	return 0;
}
