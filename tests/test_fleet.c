// SPDX-License-Identifier: MIT
/*
 * Snapshots of several hosts merged (docs/fleet.md). Two engines fed different
 * generated loads on different clocks are reported, written as snapshots, read back
 * and merged with rp_report_merge, as `ringprof merge` does. Each window's per-name
 * quantiles of the merged report must equal those of one sketch built here from both
 * hosts' spans of that window (DDSketch merges are bucket-exact), and lie within the
 * sketch's 1% of the exact order statistic of those durations (brute force here).
 * Live sources carry this host's name, boot id and clock anchor (read here too), and
 * rp_report_align() moves a second host's times by the offset its anchors give,
 * computed here by hand.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"
#include "merge.h"
#include "sketch.h"
#include "snapshot.h"

#define NNAMES	 6
#define MAXSPANS 20000
#define US	 1000ull

struct span {
	uint32_t name, track;
	uint64_t start, end;
};

/* One host's spans: roots back to back on each track, and their events in order. */
struct host {
	struct span sp[MAXSPANS];
	uint32_t n;
	uint64_t rng;
};

static struct host hosts[2];

static uint64_t rnd(struct host *h, uint64_t m)
{
	h->rng ^= h->rng << 13;
	h->rng ^= h->rng >> 7;
	h->rng ^= h->rng << 17;
	return h->rng % m;
}

/* @tracks tracks from @base for @len ns; durations up to @maxdur us (a tail of 10x). */
static void generate(struct host *h, uint64_t seed, uint32_t tracks, uint64_t base, uint64_t len,
		     uint64_t maxdur)
{
	h->n = 0;
	h->rng = seed;
	for (uint32_t tr = 0; tr < tracks; tr++)
		for (uint64_t t = base + rnd(h, 1000) * US; t < base + len && h->n < MAXSPANS;) {
			uint64_t dur = (5 + rnd(h, rnd(h, 10) == 0 ? 10 * maxdur : maxdur)) * US;

			h->sp[h->n++] = (struct span){ (uint32_t)rnd(h, NNAMES), tr, t, t + dur };
			t += dur + rnd(h, 300) * US;
		}
}

struct ev {
	uint64_t ts;
	uint32_t span;
	bool begin;
};

static int cmp_ev(const void *x, const void *y)
{
	const struct ev *a = x, *b = y;

	if (a->ts != b->ts)
		return a->ts < b->ts ? -1 : 1;
	if (a->begin != b->begin)
		return a->begin ? 1 : -1; /* ENDs first: a track's next root may begin then */
	return (a->span > b->span) - (a->span < b->span);
}

static const char *name_of(uint32_t n)
{
	static const char *const names[NNAMES] = { "prefill", "decode_step", "tokenize",
						   "sample",  "kv_evict",    "detok" };
	return names[n];
}

/* What the snapshot of @r weighs without its window sketches (as a 1.3 one). */
static size_t bytes_without_window_sketches(const struct rp_report *r)
{
	static struct rp_report_sketch keep[8][NNAMES];
	struct rp_membuf m = { 0 };
	struct rp_report_window *w = r->windows;
	size_t n;

	for (uint32_t i = 0; i < r->n_windows && i < 8; i++)
		for (uint32_t j = 0; j < w[i].n_fns && j < NNAMES; j++) {
			keep[i][j] = w[i].fns[j].dur;
			w[i].fns[j].dur = (struct rp_report_sketch){ 0 };
		}
	assert_int_equal(rp_snapshot_encode(r, rp_membuf_sink, &m), 0);
	n = m.len;
	rp_membuf_free(&m);
	for (uint32_t i = 0; i < r->n_windows && i < 8; i++)
		for (uint32_t j = 0; j < w[i].n_fns && j < NNAMES; j++) {
			w[i].fns[j].dur = keep[i][j];
		}
	return n;
}

static uint32_t window_rows(const struct rp_report *r)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < r->n_windows; i++)
		n += r->windows[i].n_fns;
	return n;
}

/* @h's spans through an engine, then through a snapshot's bytes, into @out. */
static void host_report(const struct host *h, struct rp_report *out)
{
	static struct ev evs[2 * MAXSPANS];
	char why[RP_WHY_MAX];
	struct rp_engine_cfg c;
	struct rp_membuf m = { 0 };
	struct rp_engine *e;
	struct rp_report r;
	uint32_t src, ids[NNAMES], n = 0;

	rp_engine_cfg_default(&c);
	c.subwindows = 5;
	c.n_windows = 2;
	c.window_ns[0] = 100000 * US; /* 100 ms */
	c.window_ns[1] = 400000 * US;
	assert_int_equal(rp_engine_open(&c, &e), 0);
	src = (uint32_t)rp_engine_add_source(e, "gen", 1, 0);
	for (uint32_t i = 0; i < NNAMES; i++)
		ids[i] = rp_engine_name(e, src, name_of(i), "", "", 0);
	for (uint32_t i = 0; i < h->n; i++) {
		evs[n++] = (struct ev){ h->sp[i].start, i, true };
		evs[n++] = (struct ev){ h->sp[i].end, i, false };
	}
	qsort(evs, n, sizeof(*evs), cmp_ev);
	for (uint32_t i = 0; i < n; i++) {
		const struct span *s = &h->sp[evs[i].span];
		struct rp_event ev = { .ts = evs[i].ts,
				       .name = ids[s->name],
				       .kind = evs[i].begin ? RP_EV_BEGIN : RP_EV_END };

		rp_engine_event(e, src, s->track + 1, &ev);
	}
	assert_int_equal(rp_engine_report(e, &r), 0);
	rp_engine_close(e);
	assert_int_equal(rp_snapshot_encode(&r, rp_membuf_sink, &m), 0);
	rp_report_free(&r);
	assert_int_equal(rp_snapshot_decode(m.data, m.len, out, why), 0);
	print_message("  snapshot %zu bytes, of which window sketches %zu (%u rows)\n", m.len,
		      m.len - bytes_without_window_sketches(out), window_rows(out));
	rp_membuf_free(&m);
}

static const struct rp_report_window *window_named(const struct rp_report *r, const char *name)
{
	for (uint32_t i = 0; i < r->n_windows; i++)
		if (strcmp(r->windows[i].name, name) == 0)
			return &r->windows[i];
	fail_msg("no window %s", name);
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

static uint64_t round_u64(double v)
{
	return v > 0 ? (uint64_t)(v + 0.5) : 0;
}

/* @got against the pooled sketch exactly and the exact order statistic within 1%. */
static void check_q(const char *what, uint64_t got, const struct rp_sketch *k, const uint64_t *v,
		    uint32_t n, double q)
{
	uint64_t x = v[(uint64_t)(q * (double)(n - 1))];
	uint64_t want = round_u64(rp_sketch_quantile(k, q));

	if (got != want)
		fail_msg("%s q%.2f: merged %llu, one sketch of both hosts %llu", what, q,
			 (unsigned long long)got, (unsigned long long)want);
	if (fabs((double)got - (double)x) > 0.01 * (double)x + 1.0)
		fail_msg("%s q%.2f: %llu, exact %llu", what, q, (unsigned long long)got,
			 (unsigned long long)x);
}

/* Each name of window @wname of @m against both hosts' spans in their own window. */
static void check_window(const struct rp_report *m, const struct rp_report *in[2],
			 const char *wname, uint32_t *names_in_both)
{
	static uint64_t d[2 * MAXSPANS];
	const struct rp_report_window *w = window_named(m, wname);

	for (uint32_t nm = 0; nm < NNAMES; nm++) {
		const struct rp_report_wfn *f = NULL;
		uint64_t calls = 0, cum = 0;
		struct rp_sketch k;
		uint32_t n = 0, hosts_with = 0;
		char what[64];

		assert_int_equal(rp_sketch_init(&k, RP_SKETCH_ALPHA), 0);
		for (int hi = 0; hi < 2; hi++) {
			const struct rp_report_window *hw = window_named(in[hi], wname);
			uint32_t before = n;

			for (uint32_t i = 0; i < hosts[hi].n; i++) {
				const struct span *s = &hosts[hi].sp[i];

				if (s->name != nm || s->end < hw->t_from || s->end > hw->t_to)
					continue;
				d[n++] = s->end - s->start;
				calls++;
				cum += s->end - s->start;
				rp_sketch_add(&k, (double)(s->end - s->start));
			}
			hosts_with += n > before;
		}
		*names_in_both += hosts_with == 2;
		for (uint32_t j = 0; j < w->n_fns; j++)
			if (strcmp(m->fns[w->fns[j].fn].name, name_of(nm)) == 0)
				f = &w->fns[j];
		if (calls == 0) {
			assert_null(f);
			rp_sketch_fini(&k);
			continue;
		}
		assert_non_null(f);
		assert_int_equal(f->calls, calls);
		assert_int_equal(f->cum_ns, cum);
		assert_true(f->dur.alpha > 0 && f->dur.count == calls);
		qsort(d, n, sizeof(*d), cmp_u64);
		snprintf(what, sizeof(what), "%s %s", wname, name_of(nm));
		check_q(what, f->p50_ns, &k, d, n, 0.50);
		check_q(what, f->p90_ns, &k, d, n, 0.90);
		check_q(what, f->p95_ns, &k, d, n, 0.95);
		check_q(what, f->p99_ns, &k, d, n, 0.99);
		rp_sketch_fini(&k);
	}
}

/* Two hosts, different loads and clocks: the merged windows are those of one host
 * that saw both hosts' spans. */
static void test_fleet_windows_merge(void **state)
{
	const struct rp_report *in[2];
	struct rp_report a, b, m = { 0 };
	char why[256];
	uint32_t both = 0;

	(void)state;
	generate(&hosts[0], 88172645463325252ull, 4, 1000000 * US, 900000 * US, 3000);
	generate(&hosts[1], 0x9e3779b97f4a7c15ull, 2, 7000000 * US, 700000 * US, 20000);
	host_report(&hosts[0], &a);
	host_report(&hosts[1], &b);
	in[0] = &a, in[1] = &b;
	assert_int_equal(rp_report_merge(&m, &a, why, sizeof(why)), 0);
	assert_int_equal(rp_report_merge(&m, &b, why, sizeof(why)), 0);
	check_window(&m, in, "100ms", &both);
	check_window(&m, in, "400ms", &both);
	assert_true(both >= 2 * NNAMES - 2); /* the sketches did merge, not one side's */
	print_message("  %u window rows with spans of both hosts\n", both);
	rp_report_free(&a);
	rp_report_free(&b);
	rp_report_free(&m);
}

static uint64_t now_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A live source's row says which host and boot it ran on and where its clock sits. */
static void test_fleet_live_source_identity(void **state)
{
	char host[256] = "", boot[64] = "";
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
	uint64_t r0, m0, r1, m1;
	struct rp_report a;

	(void)state;
	assert_int_equal(gethostname(host, sizeof(host) - 1), 0);
	if (f == NULL || fgets(boot, sizeof(boot), f) == NULL)
		skip(); /* no /proc: the engine reports "" and nothing checks it */
	fclose(f);
	boot[strcspn(boot, "\n")] = '\0';
	generate(&hosts[0], 7, 1, 1000000 * US, 50000 * US, 300);
	r0 = now_ns(CLOCK_REALTIME), m0 = now_ns(CLOCK_MONOTONIC);
	host_report(&hosts[0], &a);
	m1 = now_ns(CLOCK_MONOTONIC), r1 = now_ns(CLOCK_REALTIME);
	assert_true(a.n_sources >= 1);
	assert_string_equal(a.sources[0].host, host);
	assert_string_equal(a.sources[0].boot_id, boot);
	assert_in_range(a.sources[0].anchor_realtime_ns, r0, r1);
	assert_in_range(a.sources[0].anchor_monotonic_ns, m0, m1);
	/* the pair is one instant: its realtime - monotonic is the clocks' own, within
	 * what a pair read here around it can tell (and an NTP step, not expected) */
	assert_true(llabs((long long)(a.sources[0].anchor_realtime_ns - r0) -
			  (long long)(a.sources[0].anchor_monotonic_ns - m0)) < 2000000);
	assert_int_equal(a.sources[0].clock_shift_ns, 0);
	rp_report_free(&a);
}

static void set_host(struct rp_report *r, const char *host, const char *boot, uint64_t rt,
		     uint64_t mono)
{
	for (uint32_t i = 0; i < r->n_sources; i++) {
		struct rp_report_source *s = &r->sources[i];

		free(s->host), free(s->boot_id);
		s->host = strdup(host);
		s->boot_id = strdup(boot);
		assert_true(s->host && s->boot_id);
		s->anchor_realtime_ns = rt;
		s->anchor_monotonic_ns = mono;
	}
}

/* Host B's times move onto host A's clock by the offset of their anchors (by hand
 * here), every event time with them; the merged sources say so; same boot: no shift. */
static void test_fleet_clocks_aligned(void **state)
{
	const uint64_t real_a = 1700000000000000000ull, mono_a = 1000000000000ull;
	const uint64_t real_b = real_a + 2000000000ull, mono_b = 50000000000ull;
	/* wall = real_b + (t - mono_b) on B; on A's clock: mono_a + (wall - real_a) */
	const int64_t want = (int64_t)(mono_a - mono_b) + (int64_t)(real_b - real_a);
	struct rp_report a, b, m = { 0 };
	uint64_t b_first, b_last, b_from, b_slow;
	struct rp_align al;
	char why[256];

	(void)state;
	generate(&hosts[0], 11, 2, 1000000 * US, 300000 * US, 1000);
	generate(&hosts[1], 12, 2, 7000000 * US, 300000 * US, 1000);
	host_report(&hosts[0], &a);
	host_report(&hosts[1], &b);
	set_host(&a, "host-a", "aaaaaaaa-1111", real_a, mono_a);
	set_host(&b, "host-b", "bbbbbbbb-2222", real_b, mono_b);
	b_first = b.t_first, b_last = b.t_last, b_from = b.windows[0].t_from;
	assert_true(b.bottlenecks.n_slowest > 0);
	b_slow = b.bottlenecks.slowest[0].start_ns;

	rp_report_align(&m, &a, &al); /* the first input sets the clock */
	assert_false(al.shifted);
	assert_int_equal(rp_report_merge(&m, &a, why, sizeof(why)), 0);
	rp_report_align(&m, &b, &al);
	print_message("  %s\n", al.note);
	assert_true(al.shifted);
	assert_int_equal(al.shift_ns, want);
	assert_int_equal(al.clamped, 0);
	assert_int_equal(b.t_first, b_first + (uint64_t)want);
	assert_int_equal(b.t_last, b_last + (uint64_t)want);
	assert_int_equal(b.windows[0].t_from, b_from + (uint64_t)want);
	assert_int_equal(b.bottlenecks.slowest[0].start_ns, b_slow + (uint64_t)want);
	assert_non_null(strstr(al.note, "host-b"));
	assert_int_equal(rp_report_merge(&m, &b, why, sizeof(why)), 0);
	assert_int_equal(m.n_sources, a.n_sources + b.n_sources);
	assert_string_equal(m.sources[0].host, "host-a");
	assert_int_equal(m.sources[0].clock_shift_ns, 0);
	assert_string_equal(m.sources[a.n_sources].host, "host-b");
	assert_int_equal(m.sources[a.n_sources].clock_shift_ns, want);
	assert_int_equal(m.t_last, b.t_last > a.t_last ? b.t_last : a.t_last);

	/* A third input from host B again (a later snapshot: a later anchor of the same
	 * clocks) moves by the same shift onto host A's clock. */
	{
		struct rp_report c;

		host_report(&hosts[1], &c);
		set_host(&c, "host-b", "bbbbbbbb-2222", real_b + 5, mono_b + 5);
		rp_report_align(&m, &c, &al);
		assert_int_equal(al.shift_ns, want);
		rp_report_free(&c);
	}
	/* Same boot on both sides: one clock, nothing moves. */
	{
		struct rp_report c;

		host_report(&hosts[1], &c);
		set_host(&c, "host-a", "aaaaaaaa-1111", real_a + 7, mono_a + 7);
		b_first = c.t_first;
		rp_report_align(&m, &c, &al);
		assert_false(al.shifted);
		assert_int_equal(c.t_first, b_first);
		rp_report_free(&c);
	}
	rp_report_free(&a);
	rp_report_free(&b);
	rp_report_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fleet_windows_merge),
		cmocka_unit_test(test_fleet_live_source_identity),
		cmocka_unit_test(test_fleet_clocks_aligned),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
