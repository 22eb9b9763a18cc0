// SPDX-License-Identifier: MIT
/*
 * ringprof-demo: a simulated LLM inference server, instrumented with the producer API.
 * It is the demo load and the load of the end-to-end tests, so it is shaped to be checked:
 * it counts every recording call it makes and prints the total as `emitted: N`, and the
 * engine must account for each one as received or dropped.
 *
 * The main thread is the dispatcher: requests arrive as a Poisson process (exponential gaps
 * from a seeded PRNG) and go into a bounded queue (a mutex and condition variables: this is
 * the application, not the profiler). Worker threads take them off and serve them. A
 * request is an async track whose id is the request number; its spans have ids 1, 2, ...
 * in the order they open:
 *
 *	request (REQUEST)			opened by the dispatcher, closed by a worker
 *	  queue (QUEUE)				the time spent in the queue
 *	  prefill (LLM)
 *	  decode_step (LLM) x 8..64
 *	  <tool> (TOOL) x 1..3, sometimes	search, calculator, ... or tool_<k>
 *	    llm_call (LLM), sometimes		with decode_step x 4..24 inside
 *
 * The worker also records synchronous spans on its own stack (handle_request around the
 * whole service, tokenize and detokenize inside it), a queue_depth counter at every push and
 * pop, and a request_done instant. Requests still queued at the stop are cancelled: their
 * queue and request spans are closed and a request_cancelled instant is recorded, so every
 * begin has its end.
 *
 * The shape of request n (decode steps, tools) depends only on the seed and n; durations
 * come from a second stream, lognormal, scaled by --time-scale and skipped by --no-sleep.
 * Counts are per thread and added to a shared total once per request, for --events.
 *
 * Three options, off by default, add what a production host does to a profiler, for the soak
 * (tests/soak/soak.sh) and for the do-no-harm tests: --signal-us arms a per-thread timer whose
 * SIGALRM handler records a span and an instant on the interrupted thread (wherever it is,
 * recording calls included); --longjmp makes some requests malformed: their parser opens
 * nested spans and longjmps out of them to the worker's error handler, so those spans never
 * end; --churn keeps short-lived threads coming and going beside the workers. Every recording
 * call they make is counted in `emitted` too, the handler's in a counter of its own.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "rp_version_gen.h" /* RP_VERSION_STRING: the project() version */
#include <ringprof/ringprof.h>

/* glibc 2.36 has the field but not the name the man page gives it. */
#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

#define QUEUE_CAP	1024u		/* requests waiting for a worker */
#define SPIN_NS		50000.0		/* shorter waits spin, longer ones sleep */
#define POLL_NS		50000000u	/* the dispatcher checks for a stop this often */
#define CAP_MEDIANS	50.0		/* no duration exceeds this many medians */
#define MAX_THREADS	1024u
#define MAX_DISTINCT	(1u << 24)
#define NAME_UNSET	UINT32_MAX	/* tool_<k> not interned yet (0 is an answer) */

/* The shape of a request. */
#define DECODE_MIN	8u
#define DECODE_MAX	64u
#define P_TOOLS		0.3		/* a request calls tools ... */
#define TOOLS_MAX	3u		/* ... 1 to this many times */
#define P_LLM_CALL	0.6		/* a tool call is followed by an llm_call */
#define LLM_DECODE_MIN	4u
#define LLM_DECODE_MAX	24u
#define ROOT_SPAN	1u		/* span ids within a request's track */
#define QUEUE_SPAN	2u

/* The options that stress the producer. */
#define SIGNAL_US_MIN	10u		/* --signal-us: shorter leaves no time to work */
#define SIGNAL_US_MAX	10000000u
#define HANDLER_CALLS	3u		/* recording calls per handler run */
#define PARSE_LEVELS_MAX 8u		/* parse_field/parse_value levels under parse_request */
#define CHURN_STEPS	9u		/* task_step spans per short thread: 20 records */

static const char usage[] =
	"usage: ringprof-demo [options]\n"
	"A simulated LLM inference server recording into ringprof, into the session that\n"
	"RINGPROF_SESSION names (default \"default\"): give `ringprof run --session` the\n"
	"same name. The RINGPROF_* variables: docs/environment.md.\n"
	"\n"
	"  --duration S        run for S seconds (default 5; 0: until --events or a signal)\n"
	"  --rate R            requests per second, Poisson arrivals (default 100)\n"
	"  --threads N         worker threads (default 4, at most 1024)\n"
	"  --events N          stop after N events, give or take the requests in flight\n"
	"                      (default 0: no limit)\n"
	"  --distinct-names N  tools named tool_0 .. tool_<N-1>, interned lazily (default 0:\n"
	"                      search, calculator, retrieval, code_exec)\n"
	"  --seed S            PRNG seed (default 1)\n"
	"  --time-scale F      multiply every simulated duration by F (default 1)\n"
	"  --no-sleep          never wait: no simulated durations, arrivals as fast as the\n"
	"                      queue takes them (--rate is ignored); for event-rate tests\n"
	"  --signal-us N       every N us (>= 10), a SIGALRM on each worker and on the\n"
	"                      dispatcher, whose handler records a signal_handler span and\n"
	"                      a signal_tick instant (default 0: none)\n"
	"  --longjmp P         a request is malformed with probability P (from --seed): its\n"
	"                      parser opens 2..9 nested spans and longjmps out of them, to\n"
	"                      inside handle_request or to the worker loop, where a\n"
	"                      reject_request span follows; the request is rejected\n"
	"                      (default 0)\n"
	"  --churn N           beside the workers, keep N short-lived threads coming and\n"
	"                      going, 20 records each (default 0)\n"
	"  --quiet             nothing on stderr but errors\n"
	"  --help              this text; --version: the version\n"
	"\n"
	"Prints `emitted: N recording calls (recorded or dropped)` on stdout at exit: every\n"
	"recording call made, to compare with what the engine received and dropped.\n";

/* A lognormal duration: median * e^(sigma * Z), Z standard normal. */
struct dist {
	double median_ns;
	double sigma;
};

static const struct dist tokenize_t = { 30e3, 0.4 };
static const struct dist prefill_t = { 2e6, 0.5 };
static const struct dist decode_t = { 200e3, 0.25 };
static const struct dist detokenize_t = { 15e3, 0.4 };
static const struct dist tool_t = { 5e6, 1.0 }; /* the tool_<k> tools */
static const struct dist task_step_t = { 500e3, 0.5 }; /* --churn: a short thread's step */

static const struct tool {
	const char *name;
	struct dist t;
} tools[] = {
	{ "search", { 5e6, 1.0 } },
	{ "calculator", { 0.5e6, 0.6 } },
	{ "retrieval", { 8e6, 0.9 } },
	{ "code_exec", { 12e6, 1.2 } },
};
#define NTOOLS (sizeof(tools) / sizeof(tools[0]))

struct config {
	double duration;	/* seconds; 0: no time limit */
	double rate;		/* requests/s */
	double scale;		/* --time-scale */
	uint64_t events;	/* 0: no limit */
	uint64_t seed;
	uint32_t threads;
	uint32_t distinct;	/* 0: the fixed tool set */
	uint32_t signal_us;	/* --signal-us; 0: no timer */
	uint32_t churn;		/* --churn: short threads alive at once */
	double longjmp_p;	/* --longjmp */
	bool no_sleep;
	bool quiet;
};

struct names {
	uint32_t request, queue, prefill, decode, llm_call;
	uint32_t handle, tokenize, detokenize;
	uint32_t queue_depth, done, cancelled;
	uint32_t tools[NTOOLS];
	/* Interned only when their option is on. */
	uint32_t sig_handler, sig_tick;		/* --signal-us */
	uint32_t parse, parse_field, parse_value, reject, rejected; /* --longjmp */
	uint32_t task, task_step;		/* --churn */
};

struct demo;

/*
 * One thread's counts: written by that thread only, read after it joined. The same struct
 * serves a short thread of --churn (emitted, d, thread, rng), written by it and read by the
 * spawner after it joined it.
 */
struct worker {
	_Alignas(64) uint64_t emitted;	/* recording calls made */
	uint64_t flushed;		/* part of `emitted` already added to demo.total */
	uint64_t served;
	uint64_t cancelled;
	uint64_t tool_calls;
	uint64_t rejected;		/* --longjmp */
	uint64_t threads;		/* --churn: short threads started (the spawner) */
	/* Written by this thread's SIGALRM handler only, which cannot nest (SIGALRM is blocked
	 * while it runs); read by the thread after it blocked SIGALRM for good, or after join. */
	uint64_t sig_emitted;		/* recording calls the handler made */
	uint64_t signals;		/* handler runs */
	uint64_t rng;			/* a short thread's duration stream */
	struct demo *d;
	pthread_t thread;
	timer_t timer;			/* --signal-us, when armed */
	bool armed;
	bool running;			/* a short thread: started, not joined yet */
	jmp_buf on_error;		/* --longjmp: the worker's error handler */
};

struct demo {
	struct config cfg;
	struct names id;
	uint32_t *tool_ids;		/* --distinct-names: id of tool_<k>, or NAME_UNSET */
	struct worker *workers;		/* cfg.threads workers, dispatcher, spawner */
	struct worker *kids;		/* --churn: cfg.churn short threads */
	uint64_t start_ns;
	uint64_t end_ns;		/* 0: no time limit */
	uint64_t total;			/* atomic: the flushed counts of every thread */
	int stop;			/* atomic; set once, under `lock` */
	pthread_mutex_t lock;		/* the queue and the stop flag's wake-ups */
	pthread_cond_t not_empty;
	pthread_cond_t not_full;
	pthread_cond_t stopping;
	uint32_t qhead;
	uint32_t qlen;
	uint64_t queue[QUEUE_CAP];	/* request ids */
};

/* A request being served: its id and two PRNG streams (shape, durations). */
struct req {
	uint64_t id;
	uint64_t span;			/* last span id used */
	uint64_t shape;
	uint64_t time;
};

/* Set by SIGINT/SIGTERM on whichever thread takes them: an atomic, not sig_atomic_t, since
 * another thread reads it (lock-free atomics are async-signal-safe). */
static int got_signal;

/* --signal-us: the worker whose counts this thread's handler bumps; set before its timer is
 * armed, by the thread itself. */
static _Thread_local struct worker *alarm_worker;

/* --- time and randomness --- */

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static struct timespec ns_to_ts(uint64_t ns)
{
	return (struct timespec){ (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };
}

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* Waits ns nanoseconds: clock_nanosleep above SPIN_NS, a spin below. */
static void pause_ns(double ns)
{
	uint64_t until;

	if (!(ns >= 1.0))
		return;
	until = mono_ns() + (uint64_t)ns;
	if (ns > SPIN_NS) {
		struct timespec ts = ns_to_ts(until);

		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
		return;
	}
	while (mono_ns() < until)
		cpu_relax();
}

/* splitmix64: small, fast, and every seed is a good one. */
static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static double rng_unit(uint64_t *s)
{
	return (double)(rng_next(s) >> 11) * 0x1p-53;
}

/* Uniform in [lo, hi]. */
static uint32_t rng_range(uint64_t *s, uint32_t lo, uint32_t hi)
{
	return lo + (uint32_t)(rng_next(s) % ((uint64_t)hi - lo + 1));
}

/* Box-Muller; 1 - u keeps the log away from 0. */
static double rng_normal(uint64_t *s)
{
	double u = 1.0 - rng_unit(s), v = rng_unit(s);

	return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

static double rng_exp(uint64_t *s, double mean)
{
	return -log(1.0 - rng_unit(s)) * mean;
}

/* The seed of stream `which` of request `id`: independent of who serves it. */
static uint64_t stream(uint64_t seed, uint64_t id, uint64_t which)
{
	uint64_t s = seed ^ (id * UINT64_C(0xd1b54a32d192ed03)) ^ (which << 56);

	return rng_next(&s);
}

/* --- recording, counted: every call counts, whether the event is kept or dropped --- */

static void ev_begin(struct worker *w, uint32_t name)
{
	rp_begin(name);
	w->emitted++;
}

static void ev_end(struct worker *w, uint32_t name)
{
	rp_end(name);
	w->emitted++;
}

static void ev_async_begin(struct worker *w, uint32_t name, uint64_t track, uint64_t span)
{
	rp_async_begin(name, track, span);
	w->emitted++;
}

static void ev_async_end(struct worker *w, uint32_t name, uint64_t track, uint64_t span)
{
	rp_async_end(name, track, span);
	w->emitted++;
}

static void ev_counter(struct worker *w, uint32_t name, int64_t value)
{
	rp_counter(name, value);
	w->emitted++;
}

static void ev_instant(struct worker *w, uint32_t name)
{
	rp_instant(name);
	w->emitted++;
}

/* --- stopping --- */

static bool stopped(struct demo *d)
{
	return __atomic_load_n(&d->stop, __ATOMIC_ACQUIRE) != 0;
}

/* Sets the flag under the lock, so no waiter misses the broadcast. */
static void request_stop(struct demo *d)
{
	pthread_mutex_lock(&d->lock);
	__atomic_store_n(&d->stop, 1, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&d->not_empty);
	pthread_cond_broadcast(&d->not_full);
	pthread_cond_broadcast(&d->stopping);
	pthread_mutex_unlock(&d->lock);
}

/* Adds this thread's new counts to the total; asks for the stop at --events. */
static void flush(struct worker *w)
{
	struct demo *d = w->d;
	uint64_t total;

	total = __atomic_add_fetch(&d->total, w->emitted - w->flushed, __ATOMIC_RELAXED);
	w->flushed = w->emitted;
	if (d->cfg.events != 0 && total >= d->cfg.events && !stopped(d))
		request_stop(d);
}

static bool stop_wanted(struct demo *d, uint64_t now)
{
	uint64_t total = __atomic_load_n(&d->total, __ATOMIC_RELAXED);

	return __atomic_load_n(&got_signal, __ATOMIC_RELAXED) || stopped(d) ||
	       (d->end_ns != 0 && now >= d->end_ns) ||
	       (d->cfg.events != 0 && total >= d->cfg.events);
}

static void on_signal(int sig)
{
	(void)sig;
	__atomic_store_n(&got_signal, 1, __ATOMIC_RELAXED);
}

/* --- --signal-us: a handler that records, on whichever instruction it interrupts --- */

static void on_alarm(int sig)
{
	struct worker *w = alarm_worker;
	int saved = errno; /* the doorbell's syscall may set it */
	const struct names *n;

	(void)sig;
	if (w == NULL)
		return;
	n = &w->d->id;
	rp_begin(n->sig_handler);
	rp_instant(n->sig_tick);
	rp_end(n->sig_handler);
	/* Not w->emitted: the handler may have interrupted the thread's own increment of it.
	 * Relaxed: the thread reads these after it blocked SIGALRM, or after its join. */
	__atomic_store_n(&w->sig_emitted, w->sig_emitted + HANDLER_CALLS, __ATOMIC_RELAXED);
	__atomic_store_n(&w->signals, w->signals + 1, __ATOMIC_RELAXED);
	errno = saved;
}

/*
 * Arms this thread's timer: SIGALRM to this very thread every --signal-us. Called after the
 * thread's first recording call, so that its ring is attached outside a handler. A timer that
 * cannot be made is said on stderr; the run goes on without it.
 */
static void arm_alarm(struct worker *w)
{
	uint32_t us = w->d->cfg.signal_us;
	struct sigevent sev;
	struct itimerspec its;

	if (us == 0 || w->armed)
		return;
	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = SIGEV_THREAD_ID;
	sev.sigev_signo = SIGALRM;
	sev.sigev_notify_thread_id = gettid();
	alarm_worker = w;
	if (timer_create(CLOCK_MONOTONIC, &sev, &w->timer) != 0) {
		fprintf(stderr, "ringprof-demo: no --signal-us timer: %s\n", strerror(errno));
		return;
	}
	its.it_interval = its.it_value = ns_to_ts((uint64_t)us * 1000u);
	timer_settime(w->timer, 0, &its, NULL);
	w->armed = true;
}

/* Stops this thread's handler for good: blocked first, so that a signal the timer already
 * queued stays pending instead of running after the counts were read. */
static void disarm_alarm(struct worker *w)
{
	sigset_t set;

	if (!w->armed)
		return;
	sigemptyset(&set);
	sigaddset(&set, SIGALRM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	timer_delete(w->timer);
	w->armed = false;
}

/* --- the queue --- */

/* Dispatcher: request `id` arrives. False when stopped instead. */
static bool queue_push(struct worker *w, uint64_t id)
{
	struct demo *d = w->d;
	bool ok;

	pthread_mutex_lock(&d->lock);
	while (d->qlen == QUEUE_CAP && !stopped(d))
		pthread_cond_wait(&d->not_full, &d->lock);
	ok = !stopped(d);
	if (ok) {
		/* Under the lock: a worker cannot end these spans before they begin. */
		ev_async_begin(w, d->id.request, id, ROOT_SPAN);
		ev_async_begin(w, d->id.queue, id, QUEUE_SPAN);
		d->queue[(d->qhead + d->qlen) % QUEUE_CAP] = id;
		d->qlen++;
		ev_counter(w, d->id.queue_depth, d->qlen);
		pthread_cond_signal(&d->not_empty);
	}
	pthread_mutex_unlock(&d->lock);
	return ok;
}

/* Worker: the next request, and whether to cancel it; false when stopped and empty. */
static bool queue_pop(struct worker *w, uint64_t *id, bool *cancel)
{
	struct demo *d = w->d;

	pthread_mutex_lock(&d->lock);
	while (d->qlen == 0 && !stopped(d))
		pthread_cond_wait(&d->not_empty, &d->lock);
	if (d->qlen == 0) {
		pthread_mutex_unlock(&d->lock);
		return false;
	}
	*id = d->queue[d->qhead];
	d->qhead = (d->qhead + 1) % QUEUE_CAP;
	d->qlen--;
	ev_counter(w, d->id.queue_depth, d->qlen);
	*cancel = stopped(d);
	pthread_cond_signal(&d->not_full);
	pthread_mutex_unlock(&d->lock);
	return true;
}

/* --- serving a request --- */

/* Spends a duration drawn from t (scaled) with the stream `rng`, unless --no-sleep. */
static void pause_dist(const struct config *c, uint64_t *rng, const struct dist *t)
{
	double ns;

	if (c->no_sleep)
		return;
	ns = t->median_ns * exp(t->sigma * rng_normal(rng));
	if (ns > t->median_ns * CAP_MEDIANS)
		ns = t->median_ns * CAP_MEDIANS;
	pause_ns(ns * c->scale);
}

static void simulate(struct worker *w, struct req *r, const struct dist *t)
{
	pause_dist(&w->d->cfg, &r->time, t);
}

/* A span on the request's track. */
static void async_span(struct worker *w, struct req *r, uint32_t name, const struct dist *t)
{
	uint64_t span = ++r->span;

	ev_async_begin(w, name, r->id, span);
	simulate(w, r, t);
	ev_async_end(w, name, r->id, span);
}

/* A span on this thread's stack; RP_SCOPE records its end when we return. */
static void sync_span(struct worker *w, struct req *r, uint32_t name, const struct dist *t)
{
	RP_SCOPE(name);

	w->emitted += 2; /* the begin above and the end at the scope's exit */
	simulate(w, r, t);
}

static void decode(struct worker *w, struct req *r, uint32_t steps)
{
	for (uint32_t i = 0; i < steps; i++)
		async_span(w, r, w->d->id.decode, &decode_t);
}

static void llm_call(struct worker *w, struct req *r)
{
	uint32_t name = w->d->id.llm_call;
	uint64_t span = ++r->span;

	ev_async_begin(w, name, r->id, span);
	decode(w, r, rng_range(&r->shape, LLM_DECODE_MIN, LLM_DECODE_MAX));
	ev_async_end(w, name, r->id, span);
}

/* The id of tool_<k>, interned on first use; 0 (the table is full) is kept too. */
static uint32_t distinct_tool(struct demo *d, uint32_t k)
{
	uint32_t id = __atomic_load_n(&d->tool_ids[k], __ATOMIC_RELAXED);
	char name[32];

	if (id != NAME_UNSET)
		return id;
	/* Two threads may race here: the same key interns to the same id. */
	snprintf(name, sizeof(name), "tool_%" PRIu32, k);
	id = rp_intern(name, "TOOL", __FILE__, __LINE__);
	__atomic_store_n(&d->tool_ids[k], id, __ATOMIC_RELAXED);
	return id;
}

static void tool_call(struct worker *w, struct req *r)
{
	struct demo *d = w->d;
	uint32_t k;

	if (d->cfg.distinct != 0) {
		k = rng_range(&r->shape, 0, d->cfg.distinct - 1);
		async_span(w, r, distinct_tool(d, k), &tool_t);
	} else {
		k = rng_range(&r->shape, 0, NTOOLS - 1);
		async_span(w, r, d->id.tools[k], &tools[k].t);
	}
	w->tool_calls++;
	if (rng_unit(&r->shape) < P_LLM_CALL)
		llm_call(w, r);
}

static void serve(struct worker *w, uint64_t id)
{
	const struct names *n = &w->d->id;
	uint64_t seed = w->d->cfg.seed;
	struct req r = { .id = id, .span = QUEUE_SPAN, .shape = stream(seed, id, 1),
			 .time = stream(seed, id, 2) };

	ev_async_end(w, n->queue, id, QUEUE_SPAN);
	ev_begin(w, n->handle);
	sync_span(w, &r, n->tokenize, &tokenize_t);
	async_span(w, &r, n->prefill, &prefill_t);
	decode(w, &r, rng_range(&r.shape, DECODE_MIN, DECODE_MAX));
	if (rng_unit(&r.shape) < P_TOOLS) {
		for (uint32_t i = rng_range(&r.shape, 1, TOOLS_MAX); i > 0; i--)
			tool_call(w, &r);
	}
	sync_span(w, &r, n->detokenize, &detokenize_t);
	ev_async_end(w, n->request, id, ROOT_SPAN);
	ev_instant(w, n->done);
	ev_end(w, n->handle);
	w->served++;
}

/* A request still queued at the stop: close what the dispatcher opened. */
static void cancel(struct worker *w, uint64_t id)
{
	const struct names *n = &w->d->id;

	ev_async_end(w, n->queue, id, QUEUE_SPAN);
	ev_instant(w, n->cancelled);
	ev_async_end(w, n->request, id, ROOT_SPAN);
	w->cancelled++;
}

/* --- --longjmp: a malformed request, and a parser that jumps out of its open spans --- */

/* How many levels under parse_request the parser of request `id` opens before it finds the
 * error, 0: the request is well formed; and *in_handle, where it is parsed. From the seed
 * and id only, like the request's shape. */
static uint32_t malformed(const struct demo *d, uint64_t id, bool *in_handle)
{
	uint64_t s;

	if (!(d->cfg.longjmp_p > 0))
		return 0;
	s = stream(d->cfg.seed, id, 4);
	if (!(rng_unit(&s) < d->cfg.longjmp_p))
		return 0;
	*in_handle = rng_next(&s) & 1;
	return rng_range(&s, 1, PARSE_LEVELS_MAX);
}

/*
 * A recursive-descent parser, fields holding values holding fields: `level` more levels to
 * open, and the innermost finds the error. The scopes' cleanups never run: longjmp skips
 * them, so each records its BEGIN only. No level returns. Not inlined: each level has a
 * frame of its own, deeper than its caller's.
 */
static void parse_value(struct worker *w, uint32_t level);

static __attribute__((noinline)) void parse_field(struct worker *w, uint32_t level)
{
	RP_SCOPE(w->d->id.parse_field);

	w->emitted++; /* the BEGIN; there is no END */
	if (level > 1)
		parse_value(w, level - 1);
	longjmp(w->on_error, 1);
}

static __attribute__((noinline)) void parse_value(struct worker *w, uint32_t level)
{
	RP_SCOPE(w->d->id.parse_value);

	w->emitted++;
	if (level > 1)
		parse_field(w, level - 1);
	longjmp(w->on_error, 1);
}

static __attribute__((noinline)) void parse_request(struct worker *w, uint32_t levels)
{
	RP_SCOPE(w->d->id.parse);

	w->emitted++;
	parse_field(w, levels);
}

/* The request's spans, closed with an error. */
static void rejected(struct worker *w, uint64_t id)
{
	const struct names *n = &w->d->id;

	ev_async_end(w, n->request, id, ROOT_SPAN);
	ev_instant(w, n->rejected);
	w->rejected++;
}

/*
 * A malformed request; the parser jumps back to the error handler here, past 1 + levels
 * open spans, and the request is answered with an error. Two places, as servers have them:
 *  - in_handle: inside handle_request, an END below the levels cut (the producer and the
 *    engine re-align by its name);
 *  - else in the worker loop itself, with no span open, then a reject_request scope in this
 *    frame, shallower than every level cut (a scope re-aligns by its frame).
 */
static void reject(struct worker *w, uint64_t id, uint32_t levels, bool in_handle)
{
	const struct names *n = &w->d->id;

	ev_async_end(w, n->queue, id, QUEUE_SPAN);
	if (in_handle) {
		ev_begin(w, n->handle);
		if (setjmp(w->on_error) == 0)
			parse_request(w, levels);
		rejected(w, id);
		ev_end(w, n->handle);
		return;
	}
	if (setjmp(w->on_error) == 0)
		parse_request(w, levels);
	{
		RP_SCOPE(n->reject);

		w->emitted += 2; /* the begin above and the end at the scope's exit */
		rejected(w, id);
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint32_t levels;
	uint64_t id;
	bool cancelled, in_handle;

	prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL); /* sleeps of 50 us and up, on time */
	while (queue_pop(w, &id, &cancelled)) {
		if (cancelled)
			cancel(w, id);
		else if ((levels = malformed(w->d, id, &in_handle)) != 0)
			reject(w, id, levels, in_handle);
		else
			serve(w, id);
		flush(w);
		arm_alarm(w);
	}
	disarm_alarm(w);
	return NULL;
}

/* --- --churn: short-lived threads --- */

/* A short thread: a task of CHURN_STEPS steps, 20 records, then it exits. */
static void *short_main(void *arg)
{
	struct worker *k = arg;
	const struct names *n = &k->d->id;

	ev_begin(k, n->task);
	for (uint32_t i = 0; i < CHURN_STEPS; i++) {
		ev_begin(k, n->task_step);
		pause_dist(&k->d->cfg, &k->rng, &task_step_t);
		ev_end(k, n->task_step);
	}
	ev_end(k, n->task);
	return NULL;
}

/* Joins short thread k and adds its counts to the spawner's. */
static void reap_kid(struct worker *w, struct worker *k)
{
	pthread_join(k->thread, NULL);
	k->running = false;
	w->emitted += k->emitted;
	flush(w);
}

/*
 * The spawner: keeps cfg.churn short threads alive until the stop, replacing the oldest as
 * soon as it exits (a blocking join: the spawner waits while they run). A thread that cannot
 * start is said once on stderr; its slot is tried again on the next round.
 */
static void *spawner_main(void *arg)
{
	struct worker *w = arg;
	struct demo *d = w->d;
	uint32_t n = d->cfg.churn;
	bool said = false;

	for (uint32_t i = 0; !stop_wanted(d, mono_ns()); i = (i + 1) % n) {
		struct worker *k = &d->kids[i];
		int err;

		if (k->running)
			reap_kid(w, k);
		k->emitted = 0;
		k->rng = stream(d->cfg.seed, ++w->threads, 5);
		err = pthread_create(&k->thread, NULL, short_main, k);
		if (err == 0) {
			k->running = true;
			continue;
		}
		w->threads--;
		if (!said)
			fprintf(stderr, "ringprof-demo: cannot start a short thread: %s\n",
				strerror(err));
		said = true;
		pause_ns(1e6);
	}
	for (uint32_t i = 0; i < n; i++) {
		if (d->kids[i].running)
			reap_kid(w, &d->kids[i]);
	}
	return NULL;
}

/* --- the dispatcher --- */

/* Waits until `at` (or up to SPIN_NS before it); false when it is time to stop. */
static bool wait_arrival(struct demo *d, uint64_t at)
{
	for (;;) {
		uint64_t now = mono_ns(), until = now + POLL_NS;
		struct timespec ts;

		if (stop_wanted(d, now))
			return false;
		if ((double)at <= (double)now + SPIN_NS)
			return true;
		if (at < until)
			until = at;
		if (d->end_ns != 0 && d->end_ns < until)
			until = d->end_ns;
		ts = ns_to_ts(until);
		pthread_mutex_lock(&d->lock);
		if (!stopped(d))
			pthread_cond_timedwait(&d->stopping, &d->lock, &ts);
		pthread_mutex_unlock(&d->lock);
	}
}

static void dispatch(struct demo *d, struct worker *w)
{
	uint64_t rng = stream(d->cfg.seed, 0, 3);
	double mean_gap = 1e9 / d->cfg.rate, next = (double)d->start_ns;
	uint64_t id = 0;

	for (;;) {
		if (d->cfg.no_sleep) {
			if (stop_wanted(d, mono_ns()))
				break;
		} else {
			next += rng_exp(&rng, mean_gap);
			if (!wait_arrival(d, (uint64_t)next))
				break;
		}
		if (!queue_push(w, ++id))
			break;
		flush(w);
		arm_alarm(w);
	}
	disarm_alarm(w);
	request_stop(d);
}

/* --- options --- */

static bool parse_double(const char *s, double lo, double hi, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || end == s || *end != '\0' || !isfinite(v) || v < lo || v > hi)
		return false;
	*out = v;
	return true;
}

static bool parse_u64(const char *s, uint64_t hi, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (*s < '0' || *s > '9') /* strtoull takes "-1" and leading blanks */
		return false;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0' || v > hi)
		return false;
	*out = v;
	return true;
}

static int bad_value(const char *opt, const char *val, const char *want)
{
	fprintf(stderr, "ringprof-demo: --%s %s: want %s\n", opt, val, want);
	return 2;
}

/* One option's value into cfg; 0 or 2 (bad value). */
static int set_option(struct config *cfg, const char *opt, const char *v)
{
	uint64_t u;

	if (strcmp(opt, "duration") == 0 && !parse_double(v, 0, 1e7, &cfg->duration))
		return bad_value(opt, v, "seconds in [0, 1e7] (0: no time limit)");
	if (strcmp(opt, "rate") == 0 && (!parse_double(v, 0, 1e9, &cfg->rate) || cfg->rate <= 0))
		return bad_value(opt, v, "requests per second in (0, 1e9]");
	if (strcmp(opt, "threads") == 0) {
		if (!parse_u64(v, MAX_THREADS, &u) || u == 0)
			return bad_value(opt, v, "a thread count in [1, 1024]");
		cfg->threads = (uint32_t)u;
	}
	if (strcmp(opt, "events") == 0 && !parse_u64(v, UINT64_MAX, &cfg->events))
		return bad_value(opt, v, "an event count (0: no limit)");
	if (strcmp(opt, "distinct-names") == 0) {
		if (!parse_u64(v, MAX_DISTINCT, &u))
			return bad_value(opt, v, "a name count in [0, 16777216]");
		cfg->distinct = (uint32_t)u;
	}
	if (strcmp(opt, "seed") == 0 && !parse_u64(v, UINT64_MAX, &cfg->seed))
		return bad_value(opt, v, "an unsigned 64-bit integer");
	if (strcmp(opt, "time-scale") == 0 && !parse_double(v, 0, 1e3, &cfg->scale))
		return bad_value(opt, v, "a factor in [0, 1000]");
	if (strcmp(opt, "signal-us") == 0) {
		if (!parse_u64(v, SIGNAL_US_MAX, &u) || (u != 0 && u < SIGNAL_US_MIN))
			return bad_value(opt, v, "microseconds in [10, 10000000] (0: none)");
		cfg->signal_us = (uint32_t)u;
	}
	if (strcmp(opt, "longjmp") == 0 && !parse_double(v, 0, 1, &cfg->longjmp_p))
		return bad_value(opt, v, "a probability in [0, 1]");
	if (strcmp(opt, "churn") == 0) {
		if (!parse_u64(v, MAX_THREADS, &u))
			return bad_value(opt, v, "a thread count in [0, 1024]");
		cfg->churn = (uint32_t)u;
	}
	return 0;
}

/* getopt_long said '?'; `before` is optind before that call. A long option moved optind
 * past itself; a short one may sit inside a cluster (-qx), where only optopt names it. */
static void bad_option(char **argv, int before)
{
	if (optind > before && strncmp(argv[optind - 1], "--", 2) == 0)
		fprintf(stderr, "ringprof-demo: bad option %s (see --help)\n", argv[optind - 1]);
	else
		fprintf(stderr, "ringprof-demo: unknown option -%c (see --help)\n", optopt);
}

/* 0: run; -1: --help was printed; 2: bad usage, said on stderr. */
static int parse_args(int argc, char **argv, struct config *cfg)
{
	static const struct option opts[] = {
		{ "duration", required_argument, NULL, 'v' },
		{ "rate", required_argument, NULL, 'v' },
		{ "threads", required_argument, NULL, 'v' },
		{ "events", required_argument, NULL, 'v' },
		{ "distinct-names", required_argument, NULL, 'v' },
		{ "seed", required_argument, NULL, 'v' },
		{ "time-scale", required_argument, NULL, 'v' },
		{ "signal-us", required_argument, NULL, 'v' },
		{ "longjmp", required_argument, NULL, 'v' },
		{ "churn", required_argument, NULL, 'v' },
		{ "no-sleep", no_argument, NULL, 'n' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	int c, idx, err, before = optind;

	*cfg = (struct config){ .duration = 5, .rate = 100, .scale = 1, .seed = 1, .threads = 4 };
	opterr = 0;
	for (; (c = getopt_long(argc, argv, ":hq", opts, &idx)) != -1; before = optind) {
		switch (c) {
		case 'v':
			if ((err = set_option(cfg, opts[idx].name, optarg)) != 0)
				return err;
			break;
		case 'n': cfg->no_sleep = true; break;
		case 'q': cfg->quiet = true; break;
		case 'h': fputs(usage, stdout); return -1;
		case 'V': printf("ringprof-demo %s\n", RP_VERSION_STRING); return -1;
		case ':':
			fprintf(stderr, "ringprof-demo: %s needs a value (see --help)\n",
				argv[optind - 1]);
			return 2;
		default:
			bad_option(argv, before);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "ringprof-demo: unexpected argument \"%s\" (see --help)\n",
			argv[optind]);
		return 2;
	}
	return 0;
}

/* --- setup, run, report --- */

static void intern_names(struct demo *d)
{
	struct names *n = &d->id;

	n->request = rp_intern("request", "REQUEST", __FILE__, __LINE__);
	n->queue = rp_intern("queue", "QUEUE", __FILE__, __LINE__);
	n->prefill = rp_intern("prefill", "LLM", __FILE__, __LINE__);
	n->decode = rp_intern("decode_step", "LLM", __FILE__, __LINE__);
	n->llm_call = rp_intern("llm_call", "LLM", __FILE__, __LINE__);
	n->handle = rp_intern("handle_request", "FUNCTION", __FILE__, __LINE__);
	n->tokenize = rp_intern("tokenize", "FUNCTION", __FILE__, __LINE__);
	n->detokenize = rp_intern("detokenize", "FUNCTION", __FILE__, __LINE__);
	n->queue_depth = rp_intern("queue_depth", "QUEUE", __FILE__, __LINE__);
	n->done = rp_intern("request_done", "REQUEST", __FILE__, __LINE__);
	n->cancelled = rp_intern("request_cancelled", "REQUEST", __FILE__, __LINE__);
	for (size_t i = 0; i < NTOOLS; i++)
		n->tools[i] = rp_intern(tools[i].name, "TOOL", __FILE__, __LINE__);
	if (d->cfg.signal_us != 0) {
		n->sig_handler = rp_intern("signal_handler", "SIGNAL", __FILE__, __LINE__);
		n->sig_tick = rp_intern("signal_tick", "SIGNAL", __FILE__, __LINE__);
	}
	if (d->cfg.longjmp_p > 0) {
		n->parse = rp_intern("parse_request", "FUNCTION", __FILE__, __LINE__);
		n->parse_field = rp_intern("parse_field", "FUNCTION", __FILE__, __LINE__);
		n->parse_value = rp_intern("parse_value", "FUNCTION", __FILE__, __LINE__);
		n->reject = rp_intern("reject_request", "FUNCTION", __FILE__, __LINE__);
		n->rejected = rp_intern("request_rejected", "REQUEST", __FILE__, __LINE__);
	}
	if (d->cfg.churn != 0) {
		n->task = rp_intern("short_task", "FUNCTION", __FILE__, __LINE__);
		n->task_step = rp_intern("task_step", "FUNCTION", __FILE__, __LINE__);
	}
}

static int init_sync(struct demo *d)
{
	pthread_condattr_t ca;

	if (pthread_condattr_init(&ca) != 0)
		return -ENOMEM;
	/* Deadlines of the timed waits are CLOCK_MONOTONIC, like everything else here. */
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->not_empty, &ca);
	pthread_cond_init(&d->not_full, &ca);
	pthread_cond_init(&d->stopping, &ca);
	pthread_condattr_destroy(&ca);
	return 0;
}

/* n zeroed workers of d; NULL without memory. */
static struct worker *new_workers(struct demo *d, uint32_t n)
{
	size_t size = n * sizeof(struct worker);
	struct worker *w = aligned_alloc(_Alignof(struct worker), size);

	if (w == NULL)
		return NULL;
	memset(w, 0, size);
	for (uint32_t i = 0; i < n; i++)
		w[i].d = d;
	return w;
}

/* Allocations and synchronisation; -errno. */
static int setup(struct demo *d)
{
	d->workers = new_workers(d, d->cfg.threads + 2);
	if (d->workers == NULL)
		return -ENOMEM;
	if (d->cfg.churn != 0 && (d->kids = new_workers(d, d->cfg.churn)) == NULL)
		return -ENOMEM;
	if (d->cfg.distinct != 0) {
		d->tool_ids = malloc(d->cfg.distinct * sizeof(*d->tool_ids));
		if (d->tool_ids == NULL)
			return -ENOMEM;
		memset(d->tool_ids, 0xff, d->cfg.distinct * sizeof(*d->tool_ids)); /* NAME_UNSET */
	}
	return init_sync(d);
}

/* rp_init() and where the events go. */
static void start_recording(const struct demo *d)
{
	int err = rp_init();

	if (d->cfg.quiet)
		return;
	if (err == 0)
		fprintf(stderr, "ringprof-demo: recording into %s (/dev/shm%s)\n",
			rp_segment_path(), rp_segment_path());
	else if (err == 1)
		fprintf(stderr, "ringprof-demo: RINGPROF=0, recording is off\n");
	else
		fprintf(stderr, "ringprof-demo: no segment (%s), recording is off\n",
			strerror(-err));
}

static void install_signals(const struct config *cfg)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (cfg->signal_us != 0) {
		/* SA_RESTART: the application's own calls go on; clock_nanosleep does not
		 * restart, and pause_ns loops on EINTR. */
		sa.sa_handler = on_alarm;
		sa.sa_flags = SA_RESTART;
		sigaction(SIGALRM, &sa, NULL);
	}
}

/* Starts the workers, dispatches, joins; -errno if a thread could not start. */
static int run(struct demo *d)
{
	uint32_t started;
	int err = 0;

	d->start_ns = mono_ns();
	if (d->cfg.duration > 0)
		d->end_ns = d->start_ns + (uint64_t)(d->cfg.duration * 1e9);
	for (started = 0; started < d->cfg.threads; started++) {
		struct worker *w = &d->workers[started];

		err = pthread_create(&w->thread, NULL, worker_main, w);
		if (err != 0) {
			fprintf(stderr, "ringprof-demo: cannot start worker %u: %s\n", started,
				strerror(err));
			break;
		}
	}
	if (err == 0 && d->cfg.churn != 0) {
		struct worker *s = &d->workers[d->cfg.threads + 1];

		err = pthread_create(&s->thread, NULL, spawner_main, s);
		if (err != 0)
			fprintf(stderr, "ringprof-demo: cannot start the spawner: %s\n",
				strerror(err));
		else
			s->running = true;
	}
	if (err == 0)
		dispatch(d, &d->workers[d->cfg.threads]);
	request_stop(d);
	for (uint32_t i = 0; i < started; i++)
		pthread_join(d->workers[i].thread, NULL);
	if (d->workers[d->cfg.threads + 1].running)
		pthread_join(d->workers[d->cfg.threads + 1].thread, NULL);
	return -err;
}

/* What the producer itself counted as dropped: ring full, no ring, and records a signal
 * handler made inside a recording call (wire 1.2; 0 from a library that does not count them). */
static void producer_drops(uint64_t *full, uint64_t *noring, uint64_t *reentrant)
{
	const struct rp_wire_header *h = rp_segment_header();
	const struct rp_wire_ring *r;

	*full = *noring = *reentrant = 0;
	if (h == NULL)
		return;
	r = (const struct rp_wire_ring *)((const char *)h + h->ring_desc_offset);
	for (uint32_t i = 0; i < h->ring_count; i++) {
		*full += __atomic_load_n(&r[i].dropped, __ATOMIC_RELAXED);
		*reentrant += __atomic_load_n(&r[i].reentrant, __ATOMIC_RELAXED);
	}
	*noring = __atomic_load_n(&h->noring_dropped, __ATOMIC_RELAXED);
}

/* The lines of the options that stress the producer, each only when its option is on. */
static void stress_summary(const struct demo *d, uint64_t reentrant)
{
	uint64_t signals = 0, calls = 0, rejected = 0;

	for (uint32_t i = 0; i <= d->cfg.threads; i++) {
		signals += d->workers[i].signals;
		calls += d->workers[i].sig_emitted;
		rejected += d->workers[i].rejected;
	}
	if (d->cfg.signal_us != 0)
		fprintf(stderr,
			"ringprof-demo: %" PRIu64 " signals handled (%" PRIu64
			" recording calls); producer refused %" PRIu64 " (reentrant)\n",
			signals, calls, reentrant);
	if (d->cfg.longjmp_p > 0)
		fprintf(stderr, "ringprof-demo: %" PRIu64 " requests rejected by a longjmp\n",
			rejected);
	if (d->cfg.churn != 0)
		fprintf(stderr, "ringprof-demo: %" PRIu64 " short threads\n",
			d->workers[d->cfg.threads + 1].threads);
}

static void summary(const struct demo *d, uint64_t emitted, double secs)
{
	uint64_t served = 0, cancelled = 0, calls = 0, full, noring, reentrant;

	for (uint32_t i = 0; i <= d->cfg.threads; i++) {
		served += d->workers[i].served;
		cancelled += d->workers[i].cancelled;
		calls += d->workers[i].tool_calls;
	}
	producer_drops(&full, &noring, &reentrant);
	fprintf(stderr,
		"ringprof-demo: %" PRIu64 " requests served, %" PRIu64 " cancelled, %" PRIu64
		" tool calls in %.3f s\n",
		served, cancelled, calls, secs);
	fprintf(stderr,
		"ringprof-demo: %" PRIu64 " events (%.0f/s); producer dropped %" PRIu64
		" (ring full) + %" PRIu64 " (no ring)\n",
		emitted, secs > 0 ? (double)emitted / secs : 0.0, full, noring);
	stress_summary(d, reentrant);
}

int main(int argc, char **argv)
{
	static struct demo d;
	uint64_t emitted = 0;
	int err;

	err = parse_args(argc, argv, &d.cfg);
	if (err != 0)
		return err < 0 ? 0 : 2;
	if ((err = setup(&d)) != 0) {
		fprintf(stderr, "ringprof-demo: %s\n", strerror(-err));
		return 1;
	}
	prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
	install_signals(&d.cfg);
	start_recording(&d);
	intern_names(&d);
	err = run(&d);
	/* Every thread joined, the dispatcher's handler blocked: the counts are final. */
	for (uint32_t i = 0; i <= d.cfg.threads + 1; i++)
		emitted += d.workers[i].emitted + d.workers[i].sig_emitted;
	if (!d.cfg.quiet)
		summary(&d, emitted, (double)(mono_ns() - d.start_ns) / 1e9);
	/* "emitted: N" first: scripts and tests read it so */
	printf("emitted: %" PRIu64 " recording calls (recorded or dropped)\n", emitted);
	free(d.tool_ids);
	free(d.kids);
	free(d.workers);
	return err ? 1 : 0;
}
