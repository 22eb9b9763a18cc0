// SPDX-License-Identifier: MIT
/*
 * bench_live: what the live engine (`ringprof run`, at its defaults) sustains on this
 * machine, end to end: a real engine process, a real producer process, real rings.
 *
 * A trial starts an engine on a session of its own, forks a producer whose threads
 * emit nested spans at a paced rate (a request of 10 records: req { parse, call {
 * read }, write }) for a while, lets it exit, stops the engine (SIGTERM: final
 * snapshot) and reads the snapshot back. A trial is clean when the producer dropped
 * nothing and every call came out exactly (every name's calls = requests sent,
 * events = records sent, no anomaly). Figures:
 *   check        one thread at --check-rate (4 M events/s) for --check-s (3 s);
 *   max_zero_drop_events_per_s   for 1 and 2 producer threads: doubling from 1 M/s
 *                until a trial is not clean, then bisection (trials of --trial-s);
 *   engine CPU   user + system time of the engine per million events at a fixed
 *                moderate rate (1 M/s for 2 s), next to the same engine idle for
 *                the same time (the baseline of this run);
 *   drop check   the same program into 64-slot rings (drops forced): the producer
 *                notes which spans no drop fell in; exactly those must be counted,
 *                per name, with no depth cap hit.
 * Wall-clock figures from a shared machine are noisy: each is one trial, said so.
 * With --json, one JSON object.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <ringprof/ringprof.h>

#include "bench_support.h"
#include "snapshot.h"

#ifndef RINGPROF_BIN
#define RINGPROF_BIN "ringprof"
#endif

#define EV_PER_REQ 10
#define N_NAMES	   5

static const char *const names[N_NAMES] = { "req", "parse", "call", "read", "write" };

struct opts {
	const char *bin;
	double check_rate, check_s, trial_s;
	unsigned max_threads;
	bool json;
	const char *drop_ring;	/* ring slots for the drop check (default 64) */
};

struct trial {
	uint64_t rate;		/* events/s asked, all threads */
	unsigned threads;
	double seconds;
	uint64_t sent_req;	/* requests emitted */
	uint64_t dropped;	/* producer's count */
	uint64_t events;	/* engine's count */
	uint64_t late;		/* records older than the merge watermark */
	uint64_t untouched[N_NAMES]; /* drop check: spans no drop fell in */
	uint64_t calls[N_NAMES];     /* the engine's calls per name */
	uint64_t depth_cap, drop_lost, anomalies, truncated;
	bool exact;		/* calls and events as sent, no anomaly */
	double engine_cpu_s;
	double achieved;	/* events/s the producer really emitted */
};

/* --- the producer (a child process) --- */

static uint32_t ids[N_NAMES];
static uint64_t per_thread_rate; /* requests/s */
static uint64_t run_ns;

static void request(void)
{
	rp_begin(ids[0]);
	rp_begin(ids[1]);
	rp_end(ids[1]);
	rp_begin(ids[2]);
	rp_begin(ids[3]);
	rp_end(ids[3]);
	rp_end(ids[2]);
	rp_begin(ids[4]);
	rp_end(ids[4]);
	rp_end(ids[0]);
}

/* The thread's drops so far: its ring's count (it keeps one ring all along). */
static uint64_t my_drops(void)
{
	const struct rp_thread *t = &rp_thread_state;

	return t->ring ? __atomic_load_n(&t->ring->dropped, __ATOMIC_RELAXED) : 0;
}

static uint64_t untouched[N_NAMES]; /* drop check: spans no drop fell in, per name */

/*
 * The same request, noting for each span whether a record of this thread was lost
 * from its BEGIN to its END (the producer's own count, read after each record):
 * those spans, and only those, must come out of the engine.
 */
static void request_checked(uint64_t *mine)
{
	static const struct { uint8_t begin, name; } seq[EV_PER_REQ] = {
		{ 1, 0 }, { 1, 1 }, { 0, 1 }, { 1, 2 }, { 1, 3 },
		{ 0, 3 }, { 0, 2 }, { 1, 4 }, { 0, 4 }, { 0, 0 },
	};
	uint64_t at_begin[N_NAMES];

	for (int i = 0; i < EV_PER_REQ; i++) {
		uint64_t before = my_drops();

		if (seq[i].begin) {
			rp_begin(ids[seq[i].name]);
			at_begin[seq[i].name] = before;
		} else {
			rp_end(ids[seq[i].name]);
			mine[seq[i].name] += my_drops() == at_begin[seq[i].name];
		}
	}
}

static bool drop_check;

/* Paced: every wake-up emits what is due, then sleeps 50 us. */
static void *emit_thread(void *arg)
{
	uint64_t *sent = arg, start = now_ns(), n = 0, t, mine[N_NAMES] = { 0 };
	struct timespec nap = { 0, 50000 };

	while ((t = now_ns() - start) < run_ns) {
		uint64_t due = (uint64_t)((double)t * (double)per_thread_rate / 1e9);

		while (n < due) {
			if (drop_check)
				request_checked(mine);
			else
				request();
			n++;
		}
		nanosleep(&nap, NULL);
	}
	*sent = n;
	for (int k = 0; k < N_NAMES; k++) /* one thread in the drop check */
		untouched[k] = mine[k];
	return NULL;
}

static void producer(int fd, const char *session, unsigned threads, uint64_t rate, double s)
{
	pthread_t th[8];
	uint64_t sent[8] = { 0 }, out[3 + N_NAMES] = { 0 };
	uint64_t t0;

	setenv("RINGPROF_SESSION", session, 1);
	setenv("RINGPROF_EXIT_WAIT_MS", "10000", 1);
	if (rp_init() != 0)
		_exit(3);
	for (int k = 0; k < N_NAMES; k++)
		ids[k] = rp_intern(names[k], "bench", NULL, 0);
	per_thread_rate = rate / EV_PER_REQ / threads;
	run_ns = (uint64_t)(s * 1e9);
	t0 = now_ns();
	for (unsigned i = 0; i < threads; i++)
		pthread_create(&th[i], NULL, emit_thread, &sent[i]);
	for (unsigned i = 0; i < threads; i++) {
		pthread_join(th[i], NULL);
		out[0] += sent[i];
	}
	out[1] = rp_dropped();
	out[2] = now_ns() - t0;
	memcpy(&out[3], untouched, sizeof(untouched));
	if (write(fd, out, sizeof(out)) != (ssize_t)sizeof(out))
		_exit(4);
	close(fd);
	exit(0); /* the exit path waits for the engine to drain */
}

/* --- one trial --- */

static void check_report(const struct rp_report *r, struct trial *t)
{
	uint64_t anomalies = 0;

	t->events = r->events;
	t->depth_cap = r->anomalies[RP_ANOM_DEPTH_CAP];
	t->drop_lost = r->anomalies[RP_ANOM_DROP_LOST];
	for (int k = 0; k < RP_ANOM_KIND_COUNT; k++)
		anomalies += r->anomalies[k];
	/* Late records (a producer thread preempted between its clock read and its
	 * commit for longer than the merge delay) are still processed on their own
	 * track: reported, not a failure of exactness. */
	t->late = r->late;
	t->anomalies = anomalies;
	t->truncated = r->truncated;
	t->exact = r->events == t->sent_req * EV_PER_REQ && r->dropped == 0 && anomalies == 0 &&
		   r->truncated == 0;
	for (int k = 0; k < N_NAMES; k++) {
		bool found = false;

		for (uint32_t i = 0; i < r->n_fns; i++)
			if (strcmp(r->fns[i].name, names[k]) == 0) {
				found = true;
				t->calls[k] = r->fns[i].calls;
				t->exact &= r->fns[i].calls == t->sent_req;
			}
		t->exact &= found || t->sent_req == 0;
	}
}

static int run_trial(const struct opts *o, struct trial *t)
{
	static unsigned seq;
	char session[32], dir[64], snap[160], why[RP_WHY_MAX];
	pid_t eng, prod;
	struct rusage ru;
	uint64_t out[3 + N_NAMES];
	int pfd[2], st;
	struct rp_report r;

	snprintf(session, sizeof(session), "bl%d_%u", (int)getpid(), seq++);
	snprintf(dir, sizeof(dir), "/tmp/bench_live_%d", (int)getpid());
	snprintf(snap, sizeof(snap), "%s/ringprof-%s.msgpack", dir, session);
	fflush(stdout);
	eng = fork();
	if (eng == 0) {
		int null = open("/dev/null", O_WRONLY);

		dup2(null, 1);
		execl(o->bin, o->bin, "run", "--session", session, "--snapshot-dir", dir,
		      "--no-socket", getenv("BENCH_LIVE_VERBOSE") ? "--no-socket" : "--quiet",
		      (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 2000 && !engine_up(session); i++)
		usleep(1000);
	if (pipe(pfd) < 0)
		return -errno;
	fflush(stdout);
	prod = fork();
	if (prod == 0) {
		close(pfd[0]);
		producer(pfd[1], session, t->threads, t->rate, t->seconds);
	}
	close(pfd[1]);
	if (read(pfd[0], out, sizeof(out)) != (ssize_t)sizeof(out))
		memset(out, 0, sizeof(out));
	memcpy(t->untouched, &out[3], sizeof(t->untouched));
	close(pfd[0]);
	waitpid(prod, &st, 0);
	kill(eng, SIGTERM);
	if (wait4(eng, &st, 0, &ru) < 0)
		return -errno;
	t->sent_req = out[0];
	t->dropped = out[1];
	t->achieved = out[2] ? (double)out[0] * EV_PER_REQ * 1e9 / (double)out[2] : 0;
	t->engine_cpu_s = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
			  (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
	if (rp_snapshot_read_file(snap, &r, why) != 0) {
		fprintf(stderr, "bench_live: %s\n", why);
		t->exact = false;
		return -EIO;
	}
	check_report(&r, t);
	if (getenv("BENCH_LIVE_VERBOSE"))
		fprintf(stderr, "bench_live: late %" PRIu64 " resyncs %" PRIu64 " forced %" PRIu64
			" ring_hwm %" PRIu64 " buffer_hwm %" PRIu64 "\n",
			r.late, r.n_sources ? r.sources[0].resyncs : 0,
			r.n_sources ? r.sources[0].forced : 0, r.n_sources ? r.sources[0].ring_hwm : 0,
			r.n_sources ? r.sources[0].buffer_hwm : 0);
	rp_report_free(&r);
	unlink(snap);
	rmdir(dir);
	return 0;
}

static bool clean(const struct opts *o, unsigned threads, uint64_t rate)
{
	struct trial t = { .rate = rate, .threads = threads, .seconds = o->trial_s };

	run_trial(o, &t);
	if (!o->json)
		printf("  %u thread(s) %6.2f M events/s: dropped %-9" PRIu64 " late %-7" PRIu64
		       " %s (events %" PRIu64 " of %" PRIu64 ", anomalies %" PRIu64
		       ", truncated %" PRIu64 ")\n",
		       threads, (double)rate / 1e6, t.dropped, t.late,
		       t.exact ? "exact" : "NOT exact", t.events, t.sent_req * EV_PER_REQ,
		       t.anomalies, t.truncated);
	return t.dropped == 0 && t.exact;
}

/* Doubling from 1 M/s to the first unclean rate, then 4 bisection steps. */
static uint64_t max_zero_drop(const struct opts *o, unsigned threads)
{
	uint64_t lo = 0, hi = 1000000;

	while (hi <= 64000000 && clean(o, threads, hi)) {
		lo = hi;
		hi *= 2;
	}
	for (int i = 0; i < 4 && hi - lo > lo / 16; i++) {
		uint64_t mid = (lo + hi) / 2;

		if (clean(o, threads, mid))
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/*
 * The same program into rings of --drop-ring slots (64: drops forced), 1 thread at
 * 1 M events/s for 2 s: no depth cap, every name present, and exactly the spans no
 * drop fell in (as the producer saw them) counted per name.
 */
static bool run_drop_check(const struct opts *o, struct trial *t)
{
	const char *old = getenv("RINGPROF_RING_EVENTS");
	char *keep = old ? strdup(old) : NULL;
	bool ok;

	*t = (struct trial){ .rate = 1000000, .threads = 1, .seconds = 2 };
	setenv("RINGPROF_RING_EVENTS", o->drop_ring, 1);
	drop_check = true;
	run_trial(o, t);
	drop_check = false;
	if (keep) {
		setenv("RINGPROF_RING_EVENTS", keep, 1);
		free(keep);
	} else {
		unsetenv("RINGPROF_RING_EVENTS");
	}
	ok = t->depth_cap == 0 && t->sent_req > 0;
	for (int k = 0; k < N_NAMES; k++)
		ok &= t->calls[k] == t->untouched[k] && t->calls[k] > 0;
	if (!o->json) {
		printf("drop check: rings of %s, 1 M events/s for 2 s: dropped %" PRIu64
		       ", drop_lost %" PRIu64 ", depth_cap %" PRIu64 "\n",
		       o->drop_ring, t->dropped, t->drop_lost, t->depth_cap);
		for (int k = 0; k < N_NAMES; k++)
			printf("  %-6s calls %-9" PRIu64 " untouched by a drop %-9" PRIu64 " of %" PRIu64
			       " %s\n", names[k], t->calls[k], t->untouched[k], t->sent_req,
			       t->calls[k] == t->untouched[k] ? "exact" : "DIFFERENT");
	}
	return ok;
}

static void usage(void)
{
	fputs("usage: bench_live [--json] [--ringprof PATH] [--check-rate N] [--check-s S]\n"
	      "                  [--trial-s S] [--max-threads 1|2] [--drop-ring SLOTS]\n",
	      stderr);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "json", 0, NULL, 'j' },	 { "ringprof", 1, NULL, 'b' },
		{ "check-rate", 1, NULL, 'r' }, { "check-s", 1, NULL, 's' },
		{ "trial-s", 1, NULL, 't' },	 { "max-threads", 1, NULL, 'm' },
		{ "drop-ring", 1, NULL, 'd' },
		{ NULL, 0, NULL, 0 }
	};
	struct opts o = { .bin = RINGPROF_BIN, .check_rate = 4e6, .check_s = 3, .trial_s = 1,
			  .max_threads = 2, .drop_ring = "64" };
	struct trial drops;
	bool drops_ok;
	struct trial chk, cpu, idle;
	uint64_t best[3] = { 0, 0, 0 };
	int c;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'j': o.json = true; break;
		case 'b': o.bin = optarg; break;
		case 'r': o.check_rate = atof(optarg); break;
		case 's': o.check_s = atof(optarg); break;
		case 't': o.trial_s = atof(optarg); break;
		case 'm': o.max_threads = (unsigned)atoi(optarg) == 1 ? 1 : 2; break;
		case 'd': o.drop_ring = optarg; break;
		default: usage(); return 2;
		}
	}
	chk = (struct trial){ .rate = (uint64_t)o.check_rate, .threads = 1, .seconds = o.check_s };
	if (run_trial(&o, &chk) != 0)
		return 1;
	if (!o.json)
		printf("check: 1 thread, %.1f M events/s asked (%.2f M/s emitted) for %.1f s: "
		       "%" PRIu64 " events, dropped %" PRIu64 ", every call %s\n",
		       o.check_rate / 1e6, chk.achieved / 1e6, o.check_s, chk.events, chk.dropped,
		       chk.exact ? "exact" : "NOT exact");
	drops_ok = run_drop_check(&o, &drops);
	for (unsigned th = 1; th <= o.max_threads; th++) {
		if (!o.json)
			printf("max zero-drop rate, %u producer thread(s):\n", th);
		best[th] = max_zero_drop(&o, th);
	}
	cpu = (struct trial){ .rate = 1000000, .threads = 1, .seconds = 2 };
	idle = (struct trial){ .rate = 0, .threads = 1, .seconds = 2 };
	run_trial(&o, &cpu);
	run_trial(&o, &idle);
	double per_m = cpu.events ? cpu.engine_cpu_s * 1e3 / ((double)cpu.events / 1e6) : 0;
	if (o.json) {
		printf("{\"bench\":\"live\",\"loaded_machine_note\":\"one trial per figure\","
		       "\"check\":{\"threads\":1,\"rate\":%.0f,\"emitted_per_s\":%.0f,\"seconds\":%.1f,"
		       "\"events\":%" PRIu64 ",\"dropped\":%" PRIu64 ",\"exact\":%s},"
		       "\"max_zero_drop_events_per_s\":{\"1\":%" PRIu64 ",\"2\":%" PRIu64 "},"
		       "\"engine_cpu_ms_per_million_events\":%.2f,\"at_rate\":1000000,"
		       "\"engine_cpu_ms_busy\":%.1f,\"engine_cpu_ms_idle_baseline\":%.1f,"
		       "\"drop_check\":{\"ring_events\":%s,\"dropped\":%" PRIu64
		       ",\"drop_lost\":%" PRIu64 ",\"depth_cap\":%" PRIu64
		       ",\"untouched_exact\":%s}}\n",
		       o.check_rate, chk.achieved, o.check_s, chk.events, chk.dropped,
		       chk.exact ? "true" : "false", best[1], best[2], per_m,
		       cpu.engine_cpu_s * 1e3, idle.engine_cpu_s * 1e3, o.drop_ring, drops.dropped,
		       drops.drop_lost, drops.depth_cap, drops_ok ? "true" : "false");
	} else {
		printf("max_zero_drop_events_per_s: 1 thread %.2f M, 2 threads %.2f M\n",
		       (double)best[1] / 1e6, (double)best[2] / 1e6);
		printf("engine CPU at 1 M events/s for 2 s: %.1f ms (%.2f ms per million events);"
		       " idle engine for 2 s (baseline): %.1f ms\n",
		       cpu.engine_cpu_s * 1e3, per_m, idle.engine_cpu_s * 1e3);
	}
	return chk.exact && chk.dropped == 0 && drops_ok ? 0 : 1;
}
