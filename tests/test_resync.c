// SPDX-License-Identifier: MIT
/*
 * A lost event costs only the spans it belonged to. A random call tree (recursive
 * names included) goes through the real producer library into the live engine, with
 * records dropped at random at 1%, 10% and 70%: the producer's own drop path runs
 * (the ring is made to look full for exactly the chosen records), so its depth
 * counting and its after-drop mark are what is tested.
 *
 * The reference is computed here from the tree and the drop set alone. A span is
 * untouched when none of the records from its BEGIN to its END was dropped; every
 * untouched span must come out exactly (calls, total, self, cum, min, max per name;
 * calls and total per calling-context path, where an ancestor open across a drop,
 * or whose BEGIN was lost, reads "[lost]"); no other span may reach the statistics;
 * the touched ones the engine could see are counted under drop_lost, and those
 * whose BEGIN arrived in their name's row (drop_lost per function); the depth
 * cap is never hit; and when the tree is over no span is left open in the
 * concurrency sweep.
 */
#include <pthread.h>
#include <string.h>

#include "sources.h"
#include "support.h"

#define N_NAMES	  6
#define MAX_EV	  120000
#define MAX_DEPTH 7
#define STEP	  10 /* ns between records */

struct span {
	uint32_t bi, ei;	/* record indices of its BEGIN and END */
	uint32_t name;		/* index into names[]; N_NAMES: the sentinel */
	uint32_t parent;	/* span index; UINT32_MAX for a root */
	uint32_t depth;
};

static struct {
	uint8_t kind[MAX_EV];
	uint32_t span[MAX_EV];	/* the span a record opens or closes */
	bool dropped[MAX_EV];
	uint32_t pd[MAX_EV + 1]; /* drops before record i */
	uint32_t n;
	struct span s[MAX_EV / 2];
	uint32_t ns;
} g;

static const char *const names[N_NAMES + 1] = { "parse", "read", "call",
						 "write", "alloc", "free", "sentinel" };
static uint32_t ids[N_NAMES + 1];
static uint64_t rng = 88172645463325252ull;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void record(uint8_t kind, uint32_t span)
{
	assert_true(g.n < MAX_EV);
	g.kind[g.n] = kind;
	g.span[g.n] = span;
	g.n++;
}

/* One subtree: a span of a random name with 0-3 children. */
static void gen(uint32_t parent, uint32_t depth, uint32_t name)
{
	uint32_t me = g.ns++, kids = depth + 1 < MAX_DEPTH ? (uint32_t)(next_rand() % 4) : 0;

	g.s[me] = (struct span){ .bi = g.n, .name = name, .parent = parent, .depth = depth };
	record(RP_EV_BEGIN, me);
	for (uint32_t k = 0; k < kids && g.n + 2 * MAX_DEPTH < MAX_EV - 16; k++)
		gen(me, depth + 1, (uint32_t)(next_rand() % N_NAMES));
	g.s[me].ei = g.n;
	record(RP_EV_END, me);
}

static void build_tree(void)
{
	g.n = g.ns = 0;
	while (g.n < MAX_EV - 1000)
		gen(UINT32_MAX, 0, (uint32_t)(next_rand() % N_NAMES));
	gen(UINT32_MAX, 0, N_NAMES); /* never dropped: the stack is re-aligned at its BEGIN */
}

static void pick_drops(unsigned percent)
{
	uint32_t sentinel = g.s[g.ns - 1].bi;

	g.pd[0] = 0;
	for (uint32_t i = 0; i < g.n; i++) {
		g.dropped[i] = i < sentinel && next_rand() % 100 < percent;
		g.pd[i + 1] = g.pd[i] + g.dropped[i];
	}
}

static bool touched(const struct span *s)
{
	return g.pd[s->ei + 1] != g.pd[s->bi];
}

/* The engine sees an ancestor by name if nothing was lost from its BEGIN to the
 * span's BEGIN; else it reads "[lost]". */
static const char *seen_name(const struct span *a, const struct span *s)
{
	return g.pd[s->bi] == g.pd[a->bi] ? names[a->name] : "[lost]";
}

/* --- the engine side --- */

static struct rp_engine *eng;
static struct rp_sources ss;

/* Emits record i, or has the producer drop it: the ring looks full for this one
 * record (the consumer index pulled back), so rp_ring_refresh() refuses it. */
static void emit(uint32_t i, uint64_t base)
{
	struct rp_thread *t = &rp_thread_state;
	struct rp_wire_ring *r = t->ring;
	uint32_t head = 0;
	uint64_t ts = base + (uint64_t)i * STEP;
	uint32_t id = ids[g.s[g.span[i]].name];

	if (g.dropped[i]) {
		head = __atomic_load_n(&r->ring.c_head, __ATOMIC_RELAXED);
		__atomic_store_n(&r->ring.c_head, t->tail - t->mask, __ATOMIC_RELAXED);
		t->head = t->tail - t->mask;
		rp_fast_off(t); /* the fast path's limits count on the old head */
	}
	rp_emit_at(ts, g.kind[i], 0, id, 0, 0);
	if (g.dropped[i]) {
		__atomic_store_n(&r->ring.c_head, head, __ATOMIC_RELAXED);
		t->head = head;
	}
}

/* Expected figures per name. */
struct want_fn {
	uint64_t calls, total, self, cum, min, max;
};

static void expect_fns(struct want_fn *w)
{
	memset(w, 0, sizeof(*w) * (N_NAMES + 1));
	for (uint32_t i = 0; i < g.ns; i++) {
		const struct span *s = &g.s[i];
		uint64_t dur = (uint64_t)(s->ei - s->bi) * STEP, kids = 0;
		bool primitive = true;

		if (touched(s))
			continue;
		for (uint32_t c = i + 1; c < g.ns && g.s[c].bi < s->ei; c++)
			if (g.s[c].parent == i)
				kids += (uint64_t)(g.s[c].ei - g.s[c].bi) * STEP;
		for (uint32_t a = s->parent; a != UINT32_MAX; a = g.s[a].parent)
			if (strcmp(seen_name(&g.s[a], s), names[s->name]) == 0)
				primitive = false;
		struct want_fn *f = &w[s->name];
		f->min = f->calls == 0 || dur < f->min ? dur : f->min;
		f->max = dur > f->max ? dur : f->max;
		f->calls++;
		f->total += dur;
		f->self += dur - kids;
		f->cum += primitive ? dur : 0;
	}
}

/*
 * What drop_lost may count: at least every touched span whose BEGIN arrived (its
 * frame is lost at the first resync), at most every touched span with some record
 * from BEGIN to END that arrived (one whose END and its successor's BEGIN were both
 * lost at the same depth shares its frame with that successor: one count for two).
 */
static void expect_lost(uint64_t *lo, uint64_t *hi)
{
	*lo = *hi = 0;
	for (uint32_t i = 0; i < g.ns; i++) {
		const struct span *s = &g.s[i];
		uint32_t len = s->ei - s->bi + 1;

		*lo += touched(s) && !g.dropped[s->bi];
		*hi += touched(s) && g.pd[s->ei + 1] - g.pd[s->bi] < len;
	}
}

/* drop_lost per name: every touched span whose BEGIN arrived is cut under its own
 * name (its frame was open, named, at the first resync after the drop); the rest
 * of drop_lost (placeholders of lost BEGINs) has no name. */
static void expect_lost_by_name(uint64_t *w)
{
	memset(w, 0, sizeof(*w) * (N_NAMES + 1));
	for (uint32_t i = 0; i < g.ns; i++)
		w[g.s[i].name] += touched(&g.s[i]) && !g.dropped[g.s[i].bi];
}

/* "a/b/c" of an untouched span, as the engine's calling-context tree sees it. */
static void ref_path(const struct span *s, char *out, size_t cap)
{
	const char *parts[MAX_DEPTH + 1];
	uint32_t n = 0;
	size_t len = 0;

	for (uint32_t a = s->parent; a != UINT32_MAX; a = g.s[a].parent)
		parts[n++] = seen_name(&g.s[a], s);
	out[0] = '\0';
	while (n-- > 0)
		len += (size_t)snprintf(out + len, cap - len, "%s/", parts[n]);
	snprintf(out + len, cap - len, "%s", names[s->name]);
}

static void node_path(const struct rp_report *r, uint32_t i, char *out, size_t cap)
{
	const char *parts[64];
	uint32_t n = 0;
	size_t len = 0;

	for (; i != 0 && n < 64; i = r->nodes[i].parent)
		parts[n++] = r->fns[r->nodes[i].fn].name;
	out[0] = '\0';
	while (n-- > 0)
		len += (size_t)snprintf(out + len, cap - len, n ? "%s/" : "%s", parts[n]);
}

/* Untouched spans by path, sorted: the reference tree. */
struct ref_node {
	char path[96];
	uint64_t calls, total;
};

static int cmp_ref(const void *a, const void *b)
{
	return strcmp(((const struct ref_node *)a)->path, ((const struct ref_node *)b)->path);
}

/* Every CCT node with calls: exactly the untouched spans of that path. */
static void check_cct(const struct rp_report *r)
{
	static struct ref_node ref[MAX_EV / 2];
	uint32_t n = 0, m = 0, with_calls = 0;
	struct ref_node key;

	for (uint32_t k = 0; k < g.ns; k++) {
		if (touched(&g.s[k]))
			continue;
		ref_path(&g.s[k], ref[n].path, sizeof(ref[n].path));
		ref[n].calls = 1;
		ref[n++].total = (uint64_t)(g.s[k].ei - g.s[k].bi) * STEP;
	}
	qsort(ref, n, sizeof(*ref), cmp_ref);
	for (uint32_t i = 0; i < n; i++) { /* one row per path */
		if (m > 0 && strcmp(ref[m - 1].path, ref[i].path) == 0) {
			ref[m - 1].calls++;
			ref[m - 1].total += ref[i].total;
		} else {
			ref[m++] = ref[i];
		}
	}
	for (uint32_t i = 1; i < r->n_nodes; i++) {
		const struct ref_node *f;

		if (r->nodes[i].calls == 0)
			continue;
		with_calls++;
		node_path(r, i, key.path, sizeof(key.path));
		f = bsearch(&key, ref, m, sizeof(*ref), cmp_ref);
		if (f == NULL || f->calls != r->nodes[i].calls || f->total != r->nodes[i].total_ns)
			fail_msg("path %s: %llu calls %llu ns, want %llu calls %llu ns", key.path,
				 (unsigned long long)r->nodes[i].calls,
				 (unsigned long long)r->nodes[i].total_ns,
				 (unsigned long long)(f ? f->calls : 0),
				 (unsigned long long)(f ? f->total : 0));
	}
	assert_int_equal(with_calls, m); /* no untouched path missing */
}

static const struct rp_report_fn *fn_of(const struct rp_report *r, const char *name)
{
	for (uint32_t i = 0; i < r->n_fns; i++)
		if (strcmp(r->fns[i].name, name) == 0)
			return &r->fns[i];
	return NULL;
}

static void run_case(unsigned percent)
{
	static uint64_t base = 1000000;
	struct want_fn want[N_NAMES + 1];
	uint64_t want_lost[N_NAMES + 1];
	struct rp_report r;
	uint64_t drops0 = rp_dropped(), lo, hi;

	build_tree();
	pick_drops(percent);
	assert_int_equal(rp_engine_open(NULL, &eng), 0);
	assert_int_equal(rp_sources_init(&ss, eng, getenv("RINGPROF_SESSION")), 0);
	assert_int_equal(rp_sources_scan(&ss), 1);
	rp_sources_drain(&ss, UINT64_MAX); /* what earlier cases left */
	base += 1000000000ull;
	for (uint32_t i = 0; i < g.n; i++) {
		emit(i, base);
		if (i % 512 == 511)
			rp_sources_drain(&ss, UINT64_MAX);
	}
	rp_sources_drain(&ss, UINT64_MAX);
	rp_sources_update(&ss);
	assert_int_equal(rp_engine_report(eng, &r), 0);

	assert_int_equal(rp_dropped() - drops0, g.pd[g.n]);
	assert_int_equal(r.anomalies[RP_ANOM_DEPTH_CAP], 0);
	assert_int_equal(r.anomalies[RP_ANOM_END_MISMATCH], 0);
	assert_int_equal(r.anomalies[RP_ANOM_END_UNMATCHED], 0);
	assert_int_equal(r.truncated, 0);
	expect_lost(&lo, &hi);
	assert_in_range(r.anomalies[RP_ANOM_DROP_LOST], lo, hi);
	assert_true(percent == 0 || lo > 0);
	expect_fns(want);
	expect_lost_by_name(want_lost);
	for (uint32_t k = 0; k <= N_NAMES; k++) {
		const struct rp_report_fn *f = fn_of(&r, names[k]);

		if (want_lost[k] > 0) /* the row says what the drops cut of it */
			assert_true(f != NULL && f->drop_lost == want_lost[k]);
		else
			assert_true(f == NULL || f->drop_lost == 0);
		if (want[k].calls == 0) {
			assert_true(f == NULL || f->calls == 0);
			continue;
		}
		assert_non_null(f);
		assert_int_equal(f->calls, want[k].calls);
		assert_int_equal(f->total_ns, want[k].total);
		assert_int_equal(f->self_ns, want[k].self);
		assert_int_equal(f->cum_ns, want[k].cum);
		assert_int_equal(f->min_ns, want[k].min);
		assert_int_equal(f->max_ns, want[k].max);
	}
	check_cct(&r);
	assert_int_equal(r.conc[0].now, 0); /* no lost span left in the sweep */
	assert_true(r.conc[0].max <= MAX_DEPTH + 1);
	if (percent > 0)
		assert_non_null(fn_of(&r, "[lost]"));
	rp_report_free(&r);
	rp_sources_free(&ss);
	rp_engine_close(eng);
}

static void test_resync_no_drops(void **state)
{
	(void)state;
	run_case(0);
}

static void test_resync_drops_1(void **state)
{
	(void)state;
	run_case(1);
}

static void test_resync_drops_10(void **state)
{
	(void)state;
	run_case(10);
}

static void test_resync_drops_70(void **state)
{
	(void)state;
	run_case(70);
}

static int setup(void **state)
{
	(void)state;
	for (int k = 0; k <= N_NAMES; k++)
		ids[k] = rp_intern(names[k], "T", NULL, 0);
	rp_instant(ids[0]); /* claims this thread's ring before any drop is staged */
	return ids[0] == 0 ? -1 : 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_resync_no_drops),
		cmocka_unit_test(test_resync_drops_1),
		cmocka_unit_test(test_resync_drops_10),
		cmocka_unit_test(test_resync_drops_70),
	};

	setenv("RINGPROF_CLOCK", "monotonic", 1);
	setenv("RINGPROF_RING_EVENTS", "1024", 1);
	return cmocka_run_group_tests(tests, setup, NULL);
}
