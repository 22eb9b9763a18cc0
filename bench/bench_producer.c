// SPDX-License-Identifier: MIT
/*
 * bench_producer: the per-event cost of the producer fast path.
 *
 * What it measures: `rp_begin(id); rp_end(id);` in a tight loop (two events per
 * iteration), through the real static inline API of ringprof.h, on 1 and on 2
 * producer threads. Each figure is wall time around the loop (CLOCK_MONOTONIC; with
 * --cpu the thread's CPU time) divided by the events the thread recorded; each is the
 * median of --runs runs.
 *
 * The headline figures are the producer's own cost: the rings are large enough to
 * hold a whole run, and are drained between runs, outside the timed loop, so that
 * like the floor nobody else touches the memory while it is written. One more
 * figure, "with live consumer", runs 1 thread while a consumer thread drains every
 * ring concurrently the way the engine does (rp_segment_drain over all rings, a
 * short nanosleep when a pass found nothing): the difference is what moving the
 * records to another core costs the producer (cache lines taken away), which no
 * recorder with a live reader avoids.
 *
 * The baseline, measured in the same run with the same loop shape: per event, read
 * the clock the library stamps events with (rp_clock_read(), rdtsc when
 * rp_clock_source is RP_CLOCK_TSC) and store one 32-byte struct rp_event into a
 * thread-owned array exactly as large as a ring, at a masked index. That is the work
 * no event recorder can avoid: a timestamp and a record written to memory, with the
 * same footprint and store traffic as the ring. Everything the producer costs above
 * it is ringprof's own: the thread-local state, the fullness check, the publishing
 * index store and the doorbell check. ratio_vs_floor = median(producer) /
 * median(floor), both without a concurrent reader.
 *
 * --api fine runs the loop with rp_begin_fine/rp_end_fine (docs/summaries.md: each pair
 * folds into the thread's summaries, so few records reach the ring), --api mixed the
 * plain loop on threads whose summaries a fine name turned on: their plain spans take
 * the summaries' path. Instructions per pair: callgrind --toggle-collect=producer_loop
 * (fine_loop for --api fine).
 *
 * The disabled cost is the same begin+end loop in a process started with
 * RINGPROF=0: this binary re-executes itself (/proc/self/exe --disabled-child) and
 * reads the child's per-run figures, one line, from a pipe.
 *
 * Every loop has one compiler barrier per iteration (asm volatile with a memory
 * clobber: no instruction), so the compiler neither drops the floor's stores nor
 * hoists the disabled path's loads out of the loop; the loops are otherwise alike.
 * Nothing is pinned.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <ringprof/ringprof.h>

#include "segment.h"

#define DEFAULT_EVENTS		4000000ull	/* per thread and run */
#define DEFAULT_RUNS		5
#define MAX_RUNS		101
#define MAX_THREADS		2
#define SESSION			"bench_producer" /* RINGPROF_SESSION unless set */
#define DRAIN_SLEEP_NS		100000		/* the consumer's tick when idle */
#define DRAIN_BATCH		8192u		/* records per rp_segment_drain call */

#define barrier() __asm__ __volatile__("" ::: "memory")

/* --api: which calls the producer loop makes (docs/summaries.md, the C API). */
enum api { API_PLAIN, API_FINE, API_MIXED };
static const char *const api_name[] = { "plain", "fine", "mixed" };

struct opts {
	uint64_t events;	/* per thread and run; even */
	unsigned runs;
	bool json;
	bool disabled_child;
	enum api api;		/* plain: rp_begin+rp_end; fine: rp_begin_fine+rp_end_fine
				   (folded: few records); mixed: rp_begin+rp_end on a
				   thread whose summaries a fine name turned on */
};

enum job_kind { JOB_FLOOR, JOB_PRODUCER, JOB_PRODUCER_LIVE, JOB_QUIT };

struct job {
	enum job_kind kind;
	unsigned nthreads;
};

/* The figures, in the order they are run within each round. */
enum { FIG_FLOOR1, FIG_PROD1, FIG_FLOOR2, FIG_PROD2, FIG_LIVE1, NFIGS };

static const struct job figs[NFIGS] = {
	[FIG_FLOOR1] = { JOB_FLOOR, 1 },
	[FIG_PROD1] = { JOB_PRODUCER, 1 },
	[FIG_FLOOR2] = { JOB_FLOOR, 2 },
	[FIG_PROD2] = { JOB_PRODUCER, 2 },
	[FIG_LIVE1] = { JOB_PRODUCER_LIVE, 1 },
};

/* What main tells the workers; read by them after the start barrier. */
static struct {
	pthread_barrier_t start;	/* main + MAX_THREADS workers */
	pthread_barrier_t done;
	struct job job;
	uint64_t events;
	uint32_t id;			/* interned name of the span */
	uint32_t ring_events;
	bool tsc;
	enum api api;
} ctl;

struct worker {
	pthread_t thread;
	unsigned idx;
	struct rp_event *floor;		/* ring-sized, written by this thread only */
	double ns;			/* ns/event of the last job */
	uint64_t emitted;		/* producer events, warm-up included */
	uint64_t sink;			/* read back from the floor array */
};

struct consumer {
	pthread_t thread;
	struct rp_segment *seg;
	struct rp_event *buf;
	uint64_t received;
	int stop;
};

struct stats {
	double med, min, max;
};

/* --cpu: CLOCK_THREAD_CPUTIME_ID, the timing thread's own CPU time, which a loaded
 * machine does not inflate as it does wall time (every loop is timed on the thread
 * that runs it). */
static clockid_t clock_id = CLOCK_MONOTONIC;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(clock_id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* --- the measured loops: two events per iteration, one compiler barrier --- */

static __attribute__((noinline)) uint64_t floor_loop(struct rp_event *a, uint32_t mask,
						     uint64_t iters, uint32_t id, bool tsc)
{
	uint32_t i = 0;

	for (uint64_t n = 0; n < iters; n++) {
		a[i++ & mask] = (struct rp_event){ .ts = rp_clock_read(tsc), .name = id,
						   .kind = RP_EV_BEGIN };
		a[i++ & mask] = (struct rp_event){ .ts = rp_clock_read(tsc), .name = id,
						   .kind = RP_EV_END };
		barrier();
	}
	return a[(i - 1) & mask].ts;
}

static __attribute__((noinline)) void producer_loop(uint64_t iters, uint32_t id)
{
	for (uint64_t n = 0; n < iters; n++) {
		rp_begin(id);
		rp_end(id);
		barrier();
	}
}

static __attribute__((noinline)) void fine_loop(uint64_t iters, uint32_t id)
{
	for (uint64_t n = 0; n < iters; n++) {
		rp_begin_fine(id);
		rp_end_fine(id);
		barrier();
	}
}

/* One timed loop of @events events on this thread; ns per event. */
static double run_floor(struct worker *w, uint64_t events)
{
	uint64_t t0 = now_ns();

	w->sink += floor_loop(w->floor, ctl.ring_events - 1, events / 2, ctl.id, ctl.tsc);
	return (double)(now_ns() - t0) / (double)events;
}

static double run_producer(struct worker *w, uint64_t events, uint32_t id)
{
	uint64_t t0 = now_ns();

	if (ctl.api == API_FINE)
		fine_loop(events / 2, id);
	else
		producer_loop(events / 2, id);
	w->emitted += events;
	return (double)(now_ns() - t0) / (double)events;
}

/* --- the consumer: drains every ring like the engine's drain tick --- */

static uint64_t drain_pass(struct consumer *c)
{
	uint64_t got = 0;
	unsigned n;

	for (uint32_t i = 0; i < c->seg->v.ring_count; i++) {
		do {
			n = rp_segment_drain(c->seg, i, c->buf, DRAIN_BATCH, NULL);
			got += n;
		} while (n == DRAIN_BATCH);
	}
	return got;
}

static void *consumer_main(void *arg)
{
	struct consumer *c = arg;
	const struct timespec tick = { 0, DRAIN_SLEEP_NS };

	for (;;) {
		/* Acquire: the producers finished before stop was set, so a pass that
		 * starts after we saw it and finds nothing has seen everything. */
		int stop = __atomic_load_n(&c->stop, __ATOMIC_ACQUIRE);
		uint64_t got = drain_pass(c);

		c->received += got;
		if (got != 0)
			continue;
		if (stop)
			break;
		nanosleep(&tick, NULL);
	}
	return NULL;
}

static uint64_t ring_drops(const struct rp_segment *s)
{
	const struct rp_wire_ring *r =
		(const struct rp_wire_ring *)((const char *)s->base + s->v.ring_desc_offset);
	uint64_t sum = 0;

	for (uint32_t i = 0; i < s->v.ring_count; i++)
		sum += __atomic_load_n(&r[i].dropped, __ATOMIC_RELAXED);
	return sum;
}

static uint64_t noring_drops(const struct rp_segment *s)
{
	const struct rp_wire_header *h = s->base;

	return __atomic_load_n(&h->noring_dropped, __ATOMIC_RELAXED);
}

/* --- the workers: persistent, so rings stay claimed and arrays stay warm --- */

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	size_t bytes = (size_t)ctl.ring_events * sizeof(struct rp_event);

	/* First touch by this thread, as the ring's pages are faulted in at claim. */
	w->floor = aligned_alloc(64, bytes);
	if (w->floor == NULL) {
		fprintf(stderr, "bench_producer: out of memory\n");
		exit(1);
	}
	memset(w->floor, 0, bytes);
	if (ctl.api == API_MIXED) { /* this thread's summaries on, by a fine name */
		rp_begin_fine(ctl.id);
		rp_end_fine(ctl.id);
		rp_begin_fine(ctl.id); /* (the first one claimed the ring: a span) */
		rp_end_fine(ctl.id);
	}
	for (;;) {
		pthread_barrier_wait(&ctl.start);
		if (ctl.job.kind == JOB_QUIT)
			break;
		if (w->idx < ctl.job.nthreads && ctl.job.kind == JOB_FLOOR)
			w->ns = run_floor(w, ctl.events);
		else if (w->idx < ctl.job.nthreads)
			w->ns = run_producer(w, ctl.events, ctl.id);
		pthread_barrier_wait(&ctl.done);
	}
	free(w->floor);
	return NULL;
}

static struct consumer *consumer_of_live_jobs;

/* Runs @j on its threads at once; the mean of their ns/event. A live job has the
 * consumer thread draining meanwhile; every other job is drained after, untimed. */
static double run_job(struct worker *ws, const struct job *j)
{
	struct consumer *c = consumer_of_live_jobs;
	double sum = 0;

	if (j->kind == JOB_PRODUCER_LIVE) {
		__atomic_store_n(&c->stop, 0, __ATOMIC_RELAXED);
		if (pthread_create(&c->thread, NULL, consumer_main, c) != 0)
			exit(1);
	}
	ctl.job = *j;
	/* The barriers order ctl.job before the workers read it, and their results
	 * before we read them. */
	pthread_barrier_wait(&ctl.start);
	pthread_barrier_wait(&ctl.done);
	if (j->kind == JOB_PRODUCER_LIVE) {
		/* Release: the records were published (the barrier) before stop. */
		__atomic_store_n(&c->stop, 1, __ATOMIC_RELEASE);
		pthread_join(c->thread, NULL);
	}
	c->received += drain_pass(c);
	for (unsigned i = 0; i < j->nthreads; i++)
		sum += ws[i].ns;
	return sum / j->nthreads;
}

/* --- statistics and output --- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static struct stats summarize(const double *v, unsigned n)
{
	double s[MAX_RUNS];

	memcpy(s, v, n * sizeof(*s));
	qsort(s, n, sizeof(*s), cmp_double);
	return (struct stats){
		.med = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2,
		.min = s[0],
		.max = s[n - 1],
	};
}

struct result {
	struct stats fig[NFIGS];
	struct stats disabled;
	const char *clock;
	uint64_t ticks_per_sec;
	uint32_t ring_events;
	uint64_t emitted, received, dropped, noring;
	uint64_t dropped_fig[NFIGS];
};

static void print_row(const char *what, unsigned threads, const struct stats *s, double floor,
		      double drop)
{
	char pct[16] = "-";

	if (drop >= 0)
		snprintf(pct, sizeof(pct), "%.2f%%", drop * 100);
	printf("%-28s %7u %14.3f %9.3f %9.3f %9.2f %8s\n", what, threads, s->med, s->min, s->max,
	       s->med / floor, pct);
}

/* The share of a producer figure's measured events that the full ring refused. */
static double drop_share(const struct opts *o, const struct result *r, unsigned fig)
{
	return (double)r->dropped_fig[fig] / ((double)o->events * o->runs * figs[fig].nthreads);
}

static void print_table(const struct opts *o, const struct result *r)
{
	const struct stats *f = r->fig;
	double d1 = drop_share(o, r, FIG_PROD1), d2 = drop_share(o, r, FIG_PROD2);

	printf("bench_producer: rp_begin+rp_end (--api %s), %" PRIu64 " events/thread/run, "
	       "%u runs, ring %u events\n", api_name[o->api], o->events, o->runs,
	       r->ring_events);
	printf("%-28s %7s %14s %9s %9s %9s %8s\n", "figure", "threads", "ns/event(med)", "min",
	       "max", "vs floor", "dropped");
	print_row("floor (clock + 32B store)", 1, &f[FIG_FLOOR1], f[FIG_FLOOR1].med, -1);
	print_row("rp_begin+rp_end", 1, &f[FIG_PROD1], f[FIG_FLOOR1].med, d1);
	print_row("floor (clock + 32B store)", 2, &f[FIG_FLOOR2], f[FIG_FLOOR2].med, -1);
	print_row("rp_begin+rp_end", 2, &f[FIG_PROD2], f[FIG_FLOOR2].med, d2);
	print_row("rp_begin+rp_end, live reader", 1, &f[FIG_LIVE1], f[FIG_FLOOR1].med,
		  drop_share(o, r, FIG_LIVE1));
	print_row("disabled (RINGPROF=0)", 1, &r->disabled, f[FIG_FLOOR1].med, -1);
	printf("clock %s (%.3f GHz)  emitted %" PRIu64 "  received %" PRIu64 "  dropped %" PRIu64
	       " (1 thread %" PRIu64 ", 2 threads %" PRIu64 ")  noring %" PRIu64 "\n",
	       r->clock, (double)r->ticks_per_sec / 1e9, r->emitted, r->received, r->dropped,
	       r->dropped_fig[FIG_PROD1], r->dropped_fig[FIG_PROD2], r->noring);
	if (d1 > 0.01 || d2 > 0.01)
		printf("note: a dropped event costs no clock read, so a figure with drops is "
		       "partly the drop path, not the recording cost\n");
}

static void print_json(const struct opts *o, const struct result *r)
{
	const struct stats *f = r->fig;

	printf("{\"ns_per_event\": %.4f, \"floor_ns_per_event\": %.4f, "
	       "\"ratio_vs_floor\": %.4f, \"disabled_ns_per_event\": %.4f, ",
	       f[FIG_PROD1].med, f[FIG_FLOOR1].med, f[FIG_PROD1].med / f[FIG_FLOOR1].med,
	       r->disabled.med);
	printf("\"threads2_ns_per_event\": %.4f, \"threads2_floor_ns_per_event\": %.4f, "
	       "\"threads2_ratio_vs_floor\": %.4f, ",
	       f[FIG_PROD2].med, f[FIG_FLOOR2].med, f[FIG_PROD2].med / f[FIG_FLOOR2].med);
	printf("\"live_reader_ns_per_event\": %.4f, \"live_reader_ratio_vs_floor\": %.4f, "
	       "\"live_reader_dropped\": %" PRIu64 ", ",
	       f[FIG_LIVE1].med, f[FIG_LIVE1].med / f[FIG_FLOOR1].med, r->dropped_fig[FIG_LIVE1]);
	printf("\"ns_per_event_min\": %.4f, \"ns_per_event_max\": %.4f, "
	       "\"disabled_ratio_vs_floor\": %.4f, ",
	       f[FIG_PROD1].min, f[FIG_PROD1].max, r->disabled.med / f[FIG_FLOOR1].med);
	printf("\"api\": \"%s\", ", api_name[o->api]);
	printf("\"runs\": %u, \"events_per_run\": %" PRIu64 ", \"ring_events\": %u, "
	       "\"clock\": \"%s\", \"emitted\": %" PRIu64 ", \"received\": %" PRIu64 ", "
	       "\"dropped\": %" PRIu64 ", \"threads1_dropped\": %" PRIu64 ", "
	       "\"threads2_dropped\": %" PRIu64 ", \"noring_dropped\": %" PRIu64 ", "
	       "\"threads1_drop_share\": %.6f, \"threads2_drop_share\": %.6f}\n",
	       o->runs, o->events, r->ring_events, r->clock, r->emitted, r->received,
	       r->dropped, r->dropped_fig[FIG_PROD1], r->dropped_fig[FIG_PROD2], r->noring,
	       drop_share(o, r, FIG_PROD1), drop_share(o, r, FIG_PROD2));
}

/* --- the disabled figure: this binary again, with RINGPROF=0 --- */

/* In the child: the begin+end loop with the library off; one line of ns/event. */
static int disabled_child(const struct opts *o)
{
	struct worker w = { 0 };

	if (rp_init() != 1) {
		fprintf(stderr, "bench_producer: --disabled-child needs RINGPROF=0\n");
		return 1;
	}
	run_producer(&w, o->events, RP_NAME_OVERFLOW); /* warm-up: sets t->off */
	for (unsigned r = 0; r < o->runs; r++)
		printf("%s%.4f", r ? " " : "", run_producer(&w, o->events, RP_NAME_OVERFLOW));
	printf("\n");
	return 0;
}

/* This binary's path: readlink rather than exec of /proc/self/exe itself, so that
 * tools which virtualise the link (valgrind) start the child under them too. */
static void self_path(char *buf, size_t size)
{
	ssize_t n = readlink("/proc/self/exe", buf, size - 1);

	if (n <= 0 || (size_t)n >= size - 1)
		snprintf(buf, size, "/proc/self/exe");
	else
		buf[n] = '\0';
}

static void exec_child(const struct opts *o, int out)
{
	char events[24], runs[16], self[4096];

	self_path(self, sizeof(self));
	snprintf(events, sizeof(events), "%" PRIu64, o->events);
	snprintf(runs, sizeof(runs), "%u", o->runs);
	if (dup2(out, STDOUT_FILENO) < 0 || setenv("RINGPROF", "0", 1) != 0)
		_exit(127);
	execl(self, "bench_producer", "--disabled-child", "--events", events, "--runs", runs,
	      clock_id == CLOCK_MONOTONIC ? (char *)NULL : "--cpu", (char *)NULL);
	_exit(127);
}

static int parse_runs(char *line, double *v, unsigned runs)
{
	char *p = line, *end;

	for (unsigned r = 0; r < runs; r++, p = end) {
		v[r] = strtod(p, &end);
		if (end == p)
			return -EINVAL;
	}
	return 0;
}

/* Runs the child; its per-run figures into @v. Call before any thread exists. */
static int measure_disabled(const struct opts *o, double *v)
{
	char line[MAX_RUNS * 24] = "";
	int fd[2], status;
	FILE *in;
	pid_t pid;

	fflush(stdout);
	if (pipe(fd) < 0)
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		close(fd[0]);
		exec_child(o, fd[1]);
	}
	close(fd[1]);
	in = fdopen(fd[0], "r");
	if (in == NULL || fgets(line, sizeof(line), in) == NULL)
		line[0] = '\0';
	if (in != NULL)
		fclose(in);
	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return -ECHILD;
	return parse_runs(line, v, o->runs);
}

/* --- setup and the measurement rounds --- */

static int open_self(struct consumer *c, uint64_t events)
{
	char why[RP_WHY_MAX];
	int err;

	/* Defaults: rings that hold a whole run (drained between runs), and a
	 * session no running engine drains (a second consumer on an SPSC ring would
	 * corrupt it). */
	if (getenv("RINGPROF_RING_EVENTS") == NULL) { /* a ring that holds a whole run */
		char cap[24];
		uint64_t n = 1024;
		while (n < events + 1)
			n *= 2;
		snprintf(cap, sizeof(cap), "%" PRIu64, n);
		setenv("RINGPROF_RING_EVENTS", cap, 1);
	}
	setenv("RINGPROF_SESSION", SESSION, 0);
	if (rp_init() != 0 || rp_segment_path() == NULL) {
		fprintf(stderr, "bench_producer: the library is off (RINGPROF=0?)\n");
		return -ENODEV;
	}
	err = rp_segment_open(rp_segment_path(), &c->seg, why);
	if (err) {
		fprintf(stderr, "bench_producer: rp_segment_open: %s\n", why);
		return err;
	}
	c->buf = calloc(DRAIN_BATCH, sizeof(*c->buf));
	return c->buf != NULL ? 0 : -ENOMEM;
}

static int start_threads(struct consumer *c, struct worker *ws)
{
	ctl.ring_events = c->seg->v.ring_capacity;
	ctl.tsc = rp_clock_source == RP_CLOCK_TSC;
	ctl.id = rp_intern("bench_producer", "FUNCTION", __FILE__, __LINE__);
	pthread_barrier_init(&ctl.start, NULL, MAX_THREADS + 1);
	pthread_barrier_init(&ctl.done, NULL, MAX_THREADS + 1);
	consumer_of_live_jobs = c;
	for (unsigned i = 0; i < MAX_THREADS; i++) {
		ws[i].idx = i;
		if (pthread_create(&ws[i].thread, NULL, worker_main, &ws[i]) != 0)
			return -EAGAIN;
	}
	return 0;
}

static void stop_threads(struct consumer *c, struct worker *ws)
{
	const struct job quit = { JOB_QUIT, 0 };

	ctl.job = quit;
	pthread_barrier_wait(&ctl.start);
	for (unsigned i = 0; i < MAX_THREADS; i++)
		pthread_join(ws[i].thread, NULL);
	c->received += drain_pass(c);
}

/* One warm-up round (claims the rings, faults and caches the arrays), then @runs
 * rounds of every figure, interleaved so that drift affects each alike. */
static void measure(const struct opts *o, struct consumer *c, struct worker *ws,
		    double v[NFIGS][MAX_RUNS], struct result *r)
{
	ctl.events = o->events;
	for (unsigned f = 0; f < NFIGS; f++)
		run_job(ws, &figs[f]);
	for (unsigned k = 0; k < o->runs; k++) {
		for (unsigned f = 0; f < NFIGS; f++) {
			uint64_t d0 = ring_drops(c->seg);

			v[f][k] = run_job(ws, &figs[f]);
			r->dropped_fig[f] += ring_drops(c->seg) - d0;
		}
	}
}

static void collect(const struct opts *o, const struct consumer *c, const struct worker *ws,
		    double v[NFIGS][MAX_RUNS], struct result *r)
{
	const struct rp_wire_clock *clk = rp_clock();

	for (unsigned f = 0; f < NFIGS; f++)
		r->fig[f] = summarize(v[f], o->runs);
	r->clock = rp_clock_source == RP_CLOCK_TSC ? "tsc" : "monotonic";
	r->ticks_per_sec = clk != NULL ? clk->ticks_per_sec : 0;
	r->ring_events = c->seg->v.ring_capacity;
	r->received = c->received;
	r->dropped = ring_drops(c->seg);
	r->noring = noring_drops(c->seg);
	for (unsigned i = 0; i < MAX_THREADS; i++)
		r->emitted += ws[i].emitted;
}

static int run_bench(const struct opts *o)
{
	static double v[NFIGS][MAX_RUNS], dis[MAX_RUNS];
	struct consumer c = { 0 };
	struct worker ws[MAX_THREADS] = { 0 };
	struct result r = { 0 };
	int err;

	err = measure_disabled(o, dis);
	if (err) {
		fprintf(stderr, "bench_producer: the RINGPROF=0 child failed: %s\n",
			strerror(-err));
		return 1;
	}
	if (open_self(&c, o->events) != 0)
		return 1;
	if (o->events > c.seg->v.ring_capacity - 1) {
		fprintf(stderr, "bench_producer: --events %" PRIu64 " must be below the ring "
			"capacity %u (RINGPROF_RING_EVENTS): a run must fit a ring\n",
			o->events, c.seg->v.ring_capacity);
		return 2;
	}
	ctl.api = o->api;
	if (start_threads(&c, ws) != 0)
		return 1;
	measure(o, &c, ws, v, &r);
	stop_threads(&c, ws);
	collect(o, &c, ws, v, &r);
	r.disabled = summarize(dis, o->runs);
	if (o->json)
		print_json(o, &r);
	else
		print_table(o, &r);
	rp_segment_close(c.seg);
	free(c.buf);
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: bench_producer [--events N] [--runs R] [--json] [--api A] [--cpu]\n"
		   "  --events N  events per thread and run, even (default %llu)\n"
		   "  --runs R    runs per figure, 1..%d; medians are reported (default %d)\n"
		   "  --json      one JSON object on stdout instead of the table\n"
		   "  --api A     plain (rp_begin+rp_end), fine (rp_begin_fine+rp_end_fine)\n"
		   "              or mixed (plain, on threads with a fine name's summaries on)\n"
		   "  --cpu       time each loop in its thread's CPU time, not wall time\n",
		DEFAULT_EVENTS, MAX_RUNS, DEFAULT_RUNS);
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option longs[] = {
		{ "events", required_argument, NULL, 'e' },
		{ "runs", required_argument, NULL, 'r' },
		{ "json", no_argument, NULL, 'j' },
		{ "disabled-child", no_argument, NULL, 'D' },
		{ "api", required_argument, NULL, 'a' },
		{ "cpu", no_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int ch;

	*o = (struct opts){ .events = DEFAULT_EVENTS, .runs = DEFAULT_RUNS };
	while ((ch = getopt_long(argc, argv, "", longs, NULL)) != -1) {
		switch (ch) {
		case 'e': o->events = strtoull(optarg, NULL, 10); break;
		case 'r': o->runs = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'j': o->json = true; break;
		case 'D': o->disabled_child = true; break;
		case 'c': clock_id = CLOCK_THREAD_CPUTIME_ID; break;
		case 'a':
			o->api = strcmp(optarg, "fine") == 0	? API_FINE
				 : strcmp(optarg, "mixed") == 0 ? API_MIXED
								: API_PLAIN;
			if (o->api == API_PLAIN && strcmp(optarg, "plain") != 0)
				return -EINVAL;
			break;
		case 'h': usage(stdout); exit(0);
		default: return -EINVAL;
		}
	}
	if (optind != argc || o->events < 2 || o->events % 2 || o->runs < 1 ||
	    o->runs > MAX_RUNS)
		return -EINVAL;
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o;

	if (parse_opts(argc, argv, &o) != 0) {
		usage(stderr);
		return 2;
	}
	if (o.disabled_child)
		return disabled_child(&o);
	return run_bench(&o);
}
