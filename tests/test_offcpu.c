// SPDX-License-Identifier: MIT
/*
 * Off-CPU time (engine/ingest/offcpu.h). The attribution against a brute force:
 * random span records of one thread and random off-CPU intervals between them, fed
 * as the live path feeds them (switch records into a ring's watcher, due intervals
 * popped before each record), against the stacks replayed by hand: each interval's
 * length to the innermost open span's name and CCT node (self), once to every name
 * open (cum, as its outermost, primitive call), to the source's idle time when
 * nothing is open. Then live, where the kernel allows perf_event_open: a thread that
 * sleeps inside a child span and one that spins, both through the real producer and
 * a draining engine; the sleeping child's off-CPU time is at least 90% of the sleep
 * the thread measured itself, its parent's self off-CPU time nearly none, and the
 * spinner's well under its wall time (a loaded machine preempts it too).
 */
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "offcpu.h"
#include "sources.h"
#include "support.h"

static uint64_t rnd_state = 0x9e3779b97f4a7c15u;

static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

static const struct rp_report_fn *fn(const struct rp_report *r, const char *name)
{
	for (uint32_t i = 0; i < r->n_fns; i++)
		if (strcmp(r->fns[i].name, name) == 0)
			return &r->fns[i];
	return NULL;
}

#define NAMES 4
#define RECS  4000
#define MAXD  6

struct rec {
	uint64_t ts;
	uint8_t kind;
	uint32_t name;
};

/* The CCT path of a stack, as a key: depth and names. */
struct path {
	uint32_t d, n[MAXD];
};

static void test_offcpu_attribution_matches_brute_force(void **state)
{
	static struct rec recs[RECS];
	static struct path paths[4096];
	static uint64_t path_self[4096];
	uint64_t self[NAMES] = { 0 }, cum[NAMES] = { 0 }, idle = 0, total = 0;
	uint32_t stack[MAXD], depth = 0, n = 0, n_paths = 0, ids[NAMES], hint = 0;
	struct rp_engine *e;
	struct rp_report_offcpu rep = { 0 };
	struct rp_offcpu o = { .rep = &rep, .on = true };
	struct rp_offcpu_ring w;
	struct rp_report r;
	uint64_t t = 1000;
	int src;

	(void)state;
	assert_int_equal(rp_engine_open(NULL, &e), 0);
	src = rp_engine_add_source(e, "synthetic", 1, 0);
	assert_true(src >= 0);
	for (int i = 0; i < NAMES; i++) {
		char nm[8];

		snprintf(nm, sizeof(nm), "f%d", i);
		ids[i] = rp_engine_name(e, (uint32_t)src, nm, "", "", 0);
	}
	rp_offcpu_ring_init(&w);
	/* Records: a random walk of the stack (names repeat: recursion), ending empty.
	 * Between two records, 0 to 3 intervals (some while nothing is open). */
	while (n < RECS - MAXD) {
		bool push = depth == 0 || (depth < MAXD && rnd() % 2);
		uint32_t k = (uint32_t)(rnd() % 3);

		t += 1 + rnd() % 1000;
		for (uint32_t i = 0; i < k; i++) {
			uint64_t out = t + 1 + rnd() % 50, in = out + rnd() % 500;

			/* brute force: the stack between the previous record and the next */
			if (depth == 0) {
				idle += in - out;
			} else {
				uint32_t p;

				self[stack[depth - 1]] += in - out;
				for (uint32_t j = 0; j < depth; j++) {
					bool outer = true;

					for (uint32_t q = 0; q < j; q++)
						outer &= stack[q] != stack[j];
					if (outer)
						cum[stack[j]] += in - out;
				}
				for (p = 0; p < n_paths; p++)
					if (paths[p].d == depth &&
					    memcmp(paths[p].n, stack, depth * sizeof(*stack)) == 0)
						break;
				if (p == n_paths) {
					assert_true(n_paths < 4096);
					paths[n_paths].d = depth;
					memcpy(paths[n_paths++].n, stack, depth * sizeof(*stack));
				}
				path_self[p] += in - out;
			}
			total += in - out;
			rp_offcpu_switch(&o, &w, true, out);
			rp_offcpu_switch(&o, &w, false, in);
			t = in;
		}
		t += 1 + rnd() % 1000;
		if (push) {
			stack[depth] = (uint32_t)(rnd() % NAMES);
			recs[n++] = (struct rec){ t, RP_EV_BEGIN, stack[depth++] };
		} else {
			recs[n++] = (struct rec){ t, RP_EV_END, stack[--depth] };
		}
		/* the live path: due intervals first, then the record */
		{
			struct rp_event ev = { .ts = t,
					       .kind = recs[n - 1].kind,
					       .name = ids[recs[n - 1].name] };
			uint64_t ns;

			if (rp_offcpu_ring_due(&w, t))
				while (rp_offcpu_ring_pop(&o, &w, t, &ns))
					rp_engine_offcpu(e, (uint32_t)src, 7, ns, &hint);
			rp_engine_event_at(e, (uint32_t)src, 7, &ev, &hint);
		}
	}
	while (depth > 0) {
		struct rp_event ev = { .ts = t += 10,
				       .kind = RP_EV_END,
				       .name = ids[stack[--depth]] };

		rp_engine_event_at(e, (uint32_t)src, 7, &ev, &hint);
	}
	e->offcpu.state = RP_OFFCPU_ON;
	assert_int_equal(rp_engine_report(e, &r), 0);
	assert_int_equal(rep.late + rep.unpaired + rep.lost + rep.overflow, 0);
	assert_int_equal(e->offcpu.total_ns, total);
	assert_int_equal(r.offcpu.total_ns, total);
	assert_int_equal(r.sources[0].offcpu_idle_ns, idle);
	for (int i = 0; i < NAMES; i++) {
		char nm[8];
		const struct rp_report_fn *f;

		snprintf(nm, sizeof(nm), "f%d", i);
		f = fn(&r, nm);
		assert_non_null(f);
		assert_int_equal(f->offcpu_ns, self[i]);
		assert_int_equal(f->offcpu_cum_ns, cum[i]);
	}
	/* each CCT node: the path root -> node, matched to the brute force's */
	for (uint32_t i = 1; i < r.n_nodes; i++) {
		struct path pth = { 0 };
		uint32_t p, k = i;

		while (k != 0) {
			memmove(pth.n + 1, pth.n, pth.d * sizeof(*pth.n));
			pth.n[0] = (uint32_t)(r.fns[r.nodes[k].fn].name[1] - '0');
			pth.d++;
			k = r.nodes[k].parent;
		}
		for (p = 0; p < n_paths; p++)
			if (paths[p].d == pth.d && memcmp(paths[p].n, pth.n, pth.d * 4) == 0)
				break;
		assert_int_equal(r.nodes[i].offcpu_ns, p < n_paths ? path_self[p] : 0);
	}
	print_message("offcpu brute force: %u records, %" PRIu64 " intervals, %" PRIu64
		      " ns (idle %" PRIu64 "), %u CCT paths\n",
		      n, e->offcpu.intervals, total, idle, n_paths);
	rp_report_free(&r);
	rp_offcpu_ring_close(&o, &w);
	rp_engine_close(e);
}

/* The queue grows to its cap, then leaves intervals out, counted with their time. A
 * switch-in without its switch-out is not used. */
static void test_offcpu_queue_overflow_counted(void **state)
{
	struct rp_report_offcpu rep = { 0 };
	struct rp_offcpu o = { .rep = &rep, .on = true };
	struct rp_offcpu_ring w;
	uint64_t kept = 0, out = 0, got = 0, ns, n = RP_OFFCPU_PENDING_MAX + 1000, popped = 0;

	(void)state;
	rp_offcpu_ring_init(&w);
	for (uint64_t i = 0; i < n; i++) {
		rp_offcpu_switch(&o, &w, true, 100 * i + 10);
		rp_offcpu_switch(&o, &w, false, 100 * i + 10 + i % 90);
		*(i < RP_OFFCPU_PENDING_MAX ? &kept : &out) += i % 90;
	}
	rp_offcpu_switch(&o, &w, false, 100 * n + 50); /* a switch-in without its out */
	assert_int_equal(rep.unpaired, 1);
	assert_int_equal(rep.overflow, 1000);
	assert_int_equal(rep.overflow_ns, out);
	assert_int_equal(w.cap, RP_OFFCPU_PENDING_MAX);
	assert_false(rp_offcpu_ring_pop(&o, &w, 10, &ns)); /* in = 10: due after it */
	while (rp_offcpu_ring_pop(&o, &w, UINT64_MAX, &ns)) {
		got += ns;
		popped++;
	}
	assert_int_equal(popped, RP_OFFCPU_PENDING_MAX);
	assert_int_equal(got, kept);
	rp_offcpu_ring_close(&o, &w);
}

/* ---- live: a sleeping thread and a spinning one ---- */

#define SLEEPS	 20
#define SLEEP_NS 10000000ull

static atomic_int go; /* 1: the engine watches the threads' rings */
static atomic_int done_threads;

struct worker {
	pthread_t th;
	bool sleeper;
	uint64_t slept_ns; /* the sleeper's own clock: sum of its nanosleeps */
	uint64_t wall_ns;  /* the child span's wall time, by its own clock */
	uint64_t cpu_ns;   /* ... and the thread's CPU time in it */
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* |a - b| within 2% of @of plus 1 ms: the kernel's view of the span against ours. */
static bool near(uint64_t a, uint64_t b, uint64_t of)
{
	uint64_t d = a > b ? a - b : b - a;

	return d <= of / 50 + 1000000u;
}

/* Wall minus CPU time. The two clocks tick apart: a thread that never left the CPU
 * may read a few us more CPU than wall time (CI saw 200.002 ms of CPU in 199.998 ms),
 * which is 0 off-CPU, not an unsigned wrap. */
static uint64_t off_of(const struct worker *wk)
{
	return wk->wall_ns > wk->cpu_ns ? wk->wall_ns - wk->cpu_ns : 0;
}

static void *work(void *arg)
{
	struct worker *wk = arg;
	uint32_t parent = rp_intern(wk->sleeper ? "parent" : "spin_parent", NULL, NULL, 0);
	uint32_t child = rp_intern(wk->sleeper ? "sleeper" : "spinner", NULL, NULL, 0);
	uint64_t t0, c0;

	rp_instant(parent); /* claims the ring: the engine sees its owner */
	while (atomic_load(&go) == 0)
		usleep(1000);
	/* No span open: the source's idle time. After go, not only before it: go is set
	 * once the engine watches this thread, and a thread asleep since before that
	 * (its switch-out unseen) may wake to go and never be seen idle. */
	usleep(1000);
	rp_begin(parent);
	t0 = now_ns();
	c0 = cpu_ns();
	rp_begin(child);
	if (wk->sleeper) {
		for (int i = 0; i < SLEEPS; i++) {
			struct timespec d = { 0, (long)SLEEP_NS };
			uint64_t a = now_ns();

			nanosleep(&d, NULL);
			wk->slept_ns += now_ns() - a;
		}
	} else {
		volatile uint64_t x = 0;

		while (now_ns() - t0 < SLEEPS * SLEEP_NS)
			x++;
	}
	rp_end(child);
	wk->wall_ns = now_ns() - t0;
	wk->cpu_ns = cpu_ns() - c0;
	rp_end(parent);
	atomic_fetch_add(&done_threads, 1);
	return NULL;
}

/* A producer whose calibration is off (here its reference pair 300 us apart: its
 * records' times 300 us early against CLOCK_MONOTONIC, as a TSC rate measured over a few
 * ms drifts to after a while): each 1 ms nap ends with the nap's END, then a 500 us
 * spin. The switch times are moved onto the records' clock (offcpu.h), so every nap
 * goes to `napper`, none to `spin_after` (which, 300 us late, would take them all). */
#define NAPS 30

static void *napper(void *arg)
{
	uint64_t *slept = arg;
	uint32_t nap = rp_intern("napper", NULL, NULL, 0);
	uint32_t spin = rp_intern("spin_after", NULL, NULL, 0);

	rp_instant(nap); /* claims the ring */
	while (atomic_load(&go) == 0)
		usleep(1000);
	for (int i = 0; i < NAPS; i++) {
		struct timespec d = { 0, 1000000 };
		uint64_t a;
		volatile uint64_t x = 0;

		rp_begin(nap);
		a = now_ns();
		nanosleep(&d, NULL);
		*slept += now_ns() - a;
		rp_end(nap);
		rp_begin(spin);
		for (a = now_ns(); now_ns() - a < 500000;)
			x++;
		rp_end(spin);
	}
	atomic_fetch_add(&done_threads, 1);
	return NULL;
}

static void test_offcpu_calibration_offset_live(void **state)
{
	const struct rp_report_fn *nap, *spin;
	struct rp_wire_header *h;
	struct rp_engine *e;
	struct rp_sources ss;
	struct rp_report r;
	uint64_t slept = 0;
	pthread_t th;
	char path[128];
	int fd, err;

	(void)state;
	rp_intern("napper", NULL, NULL, 0); /* the segment exists */
	snprintf(path, sizeof(path), "/dev/shm%s", rp_segment_path());
	fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	h = mmap(NULL, sizeof(*h), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	assert_true(h != MAP_FAILED);
	if (h->clock.source != RP_CLOCK_TSC) {
		print_message("skip: the producer's clock is not the TSC (nothing to calibrate)\n");
		munmap(h, sizeof(*h));
		skip();
	}
	h->clock.ref_ns -= 300000; /* its records' times 300 us early */
	munmap(h, sizeof(*h));
	assert_int_equal(rp_engine_open(NULL, &e), 0);
	assert_int_equal(rp_sources_init(&ss, e, getenv("RINGPROF_SESSION")), 0);
	err = rp_sources_offcpu(&ss, RP_OFFCPU_MODE_ON, 16);
	if (err != 0) {
		print_message("skip: perf_event_open refused (%s)\n", strerror(-err));
		rp_sources_free(&ss);
		rp_engine_close(e);
		skip();
	}
	assert_int_equal(rp_sources_scan(&ss), 1);
	atomic_store(&go, 0);
	atomic_store(&done_threads, 0);
	assert_int_equal(pthread_create(&th, NULL, napper, &slept), 0);
	while (e->offcpu.threads < 1) {
		rp_sources_drain(&ss, UINT64_MAX);
		usleep(1000);
	}
	atomic_store(&go, 1);
	while (atomic_load(&done_threads) < 1) {
		rp_sources_drain(&ss, UINT64_MAX);
		usleep(2000);
	}
	pthread_join(th, NULL);
	rp_sources_drain(&ss, UINT64_MAX);
	rp_sources_update(&ss);
	assert_int_equal(rp_engine_report(e, &r), 0);
	nap = fn(&r, "napper");
	spin = fn(&r, "spin_after");
	assert_non_null(nap);
	assert_non_null(spin);
	print_message("napper: slept %.3f ms, off-cpu %.3f ms; spin_after: wall %.3f ms, "
		      "off-cpu %.3f ms\n", slept / 1e6, nap->offcpu_ns / 1e6, spin->total_ns / 1e6,
		      spin->offcpu_ns / 1e6);
	assert_true(nap->offcpu_ns * 10 >= slept * 9);
	assert_true(nap->offcpu_ns <= nap->total_ns);
	assert_true(spin->offcpu_ns <= spin->total_ns);
	rp_report_free(&r);
	rp_sources_free(&ss);
	rp_engine_close(e);
	/* the next test's producer clock as it was */
	fd = open(path, O_RDWR);
	h = mmap(NULL, sizeof(*h), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	assert_true(h != MAP_FAILED);
	h->clock.ref_ns += 300000;
	munmap(h, sizeof(*h));
	atomic_store(&go, 0);
	atomic_store(&done_threads, 0);
}

static void test_offcpu_sleep_and_spin_live(void **state)
{
	struct worker wk[2] = { { .sleeper = true }, { .sleeper = false } };
	const struct rp_report_fn *sl, *par, *sp;
	struct rp_engine *e;
	struct rp_sources ss;
	struct rp_report r;
	int err;

	(void)state;
	assert_int_equal(rp_engine_open(NULL, &e), 0);
	assert_int_equal(rp_sources_init(&ss, e, getenv("RINGPROF_SESSION")), 0);
	err = rp_sources_offcpu(&ss, RP_OFFCPU_MODE_ON, 16);
	if (err != 0) {
		print_message("skip: perf_event_open refused (%s)\n", strerror(-err));
		rp_sources_free(&ss);
		rp_engine_close(e);
		exit(77);
	}
	rp_intern("parent", NULL, NULL, 0); /* the segment exists before the scan */
	assert_int_equal(rp_sources_scan(&ss), 1);
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&wk[i].th, NULL, work, &wk[i]), 0);
	/* Until both threads hold their rings, and the engine has read their owners
	 * (each first record's copy opens its perf fd). */
	while (e->offcpu.threads < 2) {
		rp_sources_drain(&ss, UINT64_MAX);
		usleep(1000);
	}
	atomic_store(&go, 1);
	while (atomic_load(&done_threads) < 2) {
		rp_sources_drain(&ss, UINT64_MAX);
		usleep(5000);
	}
	for (int i = 0; i < 2; i++)
		pthread_join(wk[i].th, NULL);
	rp_sources_drain(&ss, UINT64_MAX);
	rp_sources_update(&ss);
	assert_int_equal(rp_engine_report(e, &r), 0);
	sl = fn(&r, "sleeper");
	par = fn(&r, "parent");
	sp = fn(&r, "spinner");
	assert_non_null(sl);
	assert_non_null(par);
	assert_non_null(sp);
	print_message("sleeper: wall %.3f ms, slept %.3f ms (own clock), off-cpu %.3f ms (%.1f%% "
		      "of the sleep); parent: self off-cpu %.3f ms, cum %.3f ms\n",
		      sl->total_ns / 1e6, wk[0].slept_ns / 1e6, sl->offcpu_ns / 1e6,
		      100.0 * (double)sl->offcpu_ns / (double)wk[0].slept_ns, par->offcpu_ns / 1e6,
		      par->offcpu_cum_ns / 1e6);
	print_message("spinner: wall %.3f ms, its own CPU time %.3f ms, off-cpu %.3f ms (%.1f%%); "
		      "%" PRIu64 " intervals, lost %" PRIu64 ", unpaired %" PRIu64 ", late %" PRIu64
		      "\n",
		      sp->total_ns / 1e6, wk[1].cpu_ns / 1e6, sp->offcpu_ns / 1e6,
		      100.0 * (double)sp->offcpu_ns / (double)sp->total_ns, r.offcpu.intervals,
		      r.offcpu.lost, r.offcpu.unpaired, r.offcpu.late);
	assert_int_equal(r.offcpu.state, RP_OFFCPU_ON);
	assert_int_equal(r.offcpu.watched, 2);
	assert_int_equal(r.offcpu.lost + r.offcpu.unpaired, 0);
	assert_true(r.sources[0].offcpu_idle_ns > 0); /* the wait for go */
	/* the sleep goes to the child, within its wall time */
	assert_true(sl->offcpu_ns * 10 >= wk[0].slept_ns * 9);
	assert_true(sl->offcpu_ns <= sl->total_ns);
	assert_true(sl->offcpu_cum_ns == sl->offcpu_ns);
	/* not to the parent's self time: only what preempted it around the child */
	assert_true(par->offcpu_ns * 10 < wk[0].slept_ns);
	assert_int_equal(par->offcpu_cum_ns, par->offcpu_ns + sl->offcpu_ns);
	/* Off-CPU is wall minus CPU time, for both (the thread's own clocks). A spinning
	 * thread is off-CPU only when preempted: on an idle machine near 0; on a busy
	 * one, what the kernel took, which may pass half of it (2 cores, other builds
	 * running): then the comparison with its own CPU time is what holds. */
	assert_true(near(sl->offcpu_ns, off_of(&wk[0]), wk[0].wall_ns));
	assert_true(near(sp->offcpu_ns, off_of(&wk[1]), wk[1].wall_ns));
	if (wk[1].cpu_ns * 4 >= wk[1].wall_ns * 3) /* it ran 75% of the time or more */
		assert_true(sp->offcpu_ns * 2 < sp->total_ns);
	rp_report_free(&r);
	rp_sources_free(&ss);
	rp_engine_close(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_offcpu_attribution_matches_brute_force),
		cmocka_unit_test(test_offcpu_queue_overflow_counted),
		cmocka_unit_test(test_offcpu_calibration_offset_live),
		cmocka_unit_test(test_offcpu_sleep_and_spin_live),
	};
	int rc;

	unsetenv("RINGPROF_NO_ENGINE");
	setenv("RINGPROF_RINGS", "8", 1);
	{
		char s[48];
		const char *base = getenv("RINGPROF_SESSION");

		snprintf(s, sizeof(s), "%.24s_%d", base ? base : "t_offcpu", (int)getpid());
		setenv("RINGPROF_SESSION", s, 1);
	}
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	if (rp_segment_path() != NULL)
		shm_unlink(rp_segment_path());
	return rc;
}
