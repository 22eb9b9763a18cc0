// SPDX-License-Identifier: MIT
/*
 * The track index (engine/core/stacks.c): an open-addressing table of (src, kind,
 * id) -> slot, linear probing, backward-shift deletion. Its home function keeps ids
 * that differ only in their low 4 bits in one 64-byte line (a request after another
 * probes a line in the cache); these tests check that it does, and that it does not
 * cluster: 16384 live tracks (the default cap, half the index) of each id pattern a
 * producer makes (consecutive, pointers 8 to 4096 apart, a counter in the high bits,
 * random), coming and going as requests do, must probe about as little as a uniform
 * hash does. Probe lengths are read from the index itself (a key's distance from its
 * home); the hash used before (the product's middle bits) is run in a model table
 * beside it and printed for comparison. Lookups are checked against a brute-force
 * list of the live keys.
 */
#include "support.h"

#include "stacks.h"

#define MAX_TRACKS 16384u

struct key {
	uint64_t id;
	uint32_t src;
	uint8_t kind; /* 0: empty */
};

/* The hash before this one, for the comparison printed: the product's middle bits. */
static uint32_t old_home(uint32_t mask, const struct key *k)
{
	uint64_t h = (k->id ^ ((uint64_t)k->src << 40) ^ ((uint64_t)k->kind << 60)) *
		     UINT64_C(0x9e3779b97f4a7c15);

	return (uint32_t)(h >> 32) & mask;
}

/* A linear-probing table with backward-shift deletion, homed by old_home(). Given
 * up once an insertion probes past GIVE_UP slots (a cluster: its churn would take
 * minutes). */
#define GIVE_UP 4096u
struct model {
	struct key *k;
	uint32_t mask;
	bool gave_up;
};

static uint32_t model_insert(struct model *m, const struct key *k)
{
	uint32_t i = old_home(m->mask, k), n = 1;

	for (; m->k[i].kind != 0; i = (i + 1) & m->mask)
		n++;
	m->k[i] = *k;
	m->gave_up = n > GIVE_UP;
	return n;
}

static void model_remove(struct model *m, const struct key *k)
{
	uint32_t i = old_home(m->mask, k), j;

	/* field by field: memcmp() would compare the padding, which a copy need not keep */
	while (m->k[i].id != k->id || m->k[i].src != k->src || m->k[i].kind != k->kind)
		i = (i + 1) & m->mask;
	for (j = (i + 1) & m->mask; m->k[j].kind != 0; j = (j + 1) & m->mask) {
		uint32_t h = old_home(m->mask, &m->k[j]);

		if (((j - h) & m->mask) >= ((j - i) & m->mask)) {
			m->k[i] = m->k[j];
			i = j;
		}
	}
	m->k[i].kind = 0;
}

/* Mean and max of the probes a lookup of each key takes (1: at its home). */
struct probes {
	double mean, insert_mean;
	uint32_t max, insert_max;
};

static void model_probes(const struct model *m, struct probes *p)
{
	uint64_t sum = 0, n = 0;

	p->max = 0;
	for (uint32_t i = 0; i <= m->mask; i++) {
		uint32_t len;

		if (m->k[i].kind == 0)
			continue;
		len = ((i - old_home(m->mask, &m->k[i])) & m->mask) + 1;
		sum += len;
		n++;
		p->max = len > p->max ? len : p->max;
	}
	p->mean = (double)sum / (double)n;
}

static void index_probes(const struct rp_tracks *ts, struct probes *p)
{
	uint64_t sum = 0, n = 0;

	p->max = 0;
	for (uint32_t i = 0; i <= ts->mask; i++) {
		const struct rp_track *t;
		uint32_t len;

		if (ts->index[i] == UINT32_MAX)
			continue;
		t = &ts->t[ts->index[i]];
		len = ((i - rp_tracks_home(ts, t->src, t->kind, t->id)) & ts->mask) + 1;
		sum += len;
		n++;
		p->max = len > p->max ? len : p->max;
	}
	assert_int_equal(n, ts->live);
	p->mean = (double)sum / (double)n;
}

/* The probes the insertion of a new key takes: up to the first free slot. */
static uint32_t index_insert_probes(const struct rp_tracks *ts, const struct key *k)
{
	uint32_t i = rp_tracks_home(ts, k->src, k->kind, k->id), n = 1;

	for (; ts->index[i] != UINT32_MAX; i = (i + 1) & ts->mask)
		n++;
	return n;
}

enum pattern { SEQ, S8, S16, S64, S4096, S2_32, HI32, HI47, RANDOM, PATTERNS };
static const char *const pattern_name[PATTERNS] = {
	"consecutive", "stride 8", "stride 16", "stride 64", "stride 4096", "stride 2^32",
	"counter << 32 | 0x1234", "counter << 47", "random",
};

static uint64_t pattern_id(enum pattern p, uint64_t n, uint64_t *rng)
{
	const uint64_t ptr = UINT64_C(0x7f3a12345000); /* a heap address */

	switch (p) {
	case SEQ:
		return n + 1;
	case S8:
		return ptr + 8 * n;
	case S16:
		return ptr + 16 * n;
	case S64:
		return ptr + 64 * n;
	case S4096:
		return ptr + 4096 * n;
	case S2_32:
		return (n + 1) << 32;
	case HI32:
		return (n + 1) << 32 | 0x1234;
	case HI47:
		return (n + 1) << 47;
	default:
		return rp_test_rnd(rng, UINT64_MAX) + 1;
	}
}

/*
 * 3 x MAX_TRACKS async tracks of one pattern, each closed once MAX_TRACKS newer ones
 * are open (requests ending in their order), in the engine's index and the model's.
 * Linear probing with a uniform hash at load 1/2 takes 1.5 probes a lookup on average
 * (Knuth: (1 + 1 / (1 - a)) / 2) and 2.5 an insertion ((1 + 1 / (1 - a)^2) / 2); the
 * longest of 16384 is some 20 to 40. The bounds leave room above those (mean 2 and 4,
 * max 64: four lines) and none for a hash that clusters, which takes thousands (the
 * old one on "counter << 47").
 */
static void churn(enum pattern p, struct probes *now, struct probes *old)
{
	struct rp_tracks ts;
	struct rp_counts c = { 0 };
	struct model m;
	uint64_t *ids = calloc(3 * MAX_TRACKS, sizeof(*ids)), rng = 88172645463325252u;
	uint32_t *slot = calloc(3 * MAX_TRACKS, sizeof(*slot));
	uint64_t ins_now = 0, ins_old = 0, n_ins = 0;

	assert_non_null(ids);
	assert_non_null(slot);
	assert_int_equal(rp_tracks_init(&ts, MAX_TRACKS, 4, NULL), 0);
	m.mask = ts.mask;
	m.gave_up = false;
	m.k = calloc(ts.mask + 1, sizeof(*m.k));
	assert_non_null(m.k);
	now->insert_max = old->insert_max = 0;
	for (uint32_t n = 0; n < 3 * MAX_TRACKS; n++) {
		struct key k = { .id = pattern_id(p, n, &rng), .src = 0, .kind = RP_TRACK_ASYNC };
		uint32_t a, b;

		ids[n] = k.id;
		if (n >= MAX_TRACKS) {
			struct key gone = { .id = ids[n - MAX_TRACKS], .kind = RP_TRACK_ASYNC };

			rp_track_close(&ts, slot[n - MAX_TRACKS], 0, RP_ANOM_KIND_COUNT, &c);
			a = index_insert_probes(&ts, &k);
			b = 0;
			if (!m.gave_up) {
				model_remove(&m, &gone);
				b = model_insert(&m, &k);
			}
			ins_now += a;
			ins_old += b;
			n_ins++;
			now->insert_max = a > now->insert_max ? a : now->insert_max;
			old->insert_max = b > old->insert_max ? b : old->insert_max;
		} else if (!m.gave_up) {
			model_insert(&m, &k);
		}
		slot[n] = rp_tracks_get(&ts, 0, RP_TRACK_ASYNC, k.id, &c);
		assert_int_not_equal(slot[n], RP_NONE);
	}
	assert_int_equal(ts.live, MAX_TRACKS);
	for (uint32_t n = 2 * MAX_TRACKS; n < 3 * MAX_TRACKS; n++) /* every live one found */
		assert_int_equal(rp_tracks_find_slow(&ts, 0, RP_TRACK_ASYNC, ids[n]), slot[n]);
	index_probes(&ts, now);
	model_probes(&m, old);
	if (m.gave_up)
		old->insert_max = GIVE_UP + 1; /* at least */
	now->insert_mean = (double)ins_now / (double)n_ins;
	old->insert_mean = (double)ins_old / (double)n_ins;
	assert_int_equal(c.anomalies[RP_ANOM_TRACK_CAP], 0);
	rp_tracks_free(&ts);
	free(m.k);
	free(ids);
	free(slot);
}

static void test_tracks_index_does_not_cluster(void **state)
{
	(void)state;
	print_message("%-24s %26s   %26s\n", "ids (16384 live of 32768)",
		      "index: mean max ins. max", "before: mean max ins. max");
	for (int p = 0; p < PATTERNS; p++) {
		struct probes now, old;

		churn(p, &now, &old);
		print_message("%-24s %8.2f %5u %6.2f %5u   ", pattern_name[p], now.mean,
			      now.max, now.insert_mean, now.insert_max);
		if (old.insert_max > GIVE_UP) /* means of a part only */
			print_message("%26s\n", "clusters: > 4096 probes");
		else
			print_message("%8.2f %5u %6.2f %5u\n", old.mean, old.max,
				      old.insert_mean, old.insert_max);
		assert_true(now.mean <= 2.0);
		assert_true(now.insert_mean <= 4.0);
		assert_true(now.max <= 64);
		assert_true(now.insert_max <= 64);
	}
}

/* Ids 16 n .. 16 n + 15 have their homes on one line, one each, for any source and
 * kind; so do they where they are inserted in an empty index (64-byte aligned). */
static void test_tracks_neighbours_share_a_line(void **state)
{
	const uint64_t base[] = { 0, 16, 16 * 12345, UINT64_C(1) << 40,
				  UINT64_C(0x7f3a12345000), UINT64_MAX - 15 };
	struct rp_counts c = { 0 };
	struct rp_tracks ts;

	(void)state;
	assert_int_equal(rp_tracks_init(&ts, MAX_TRACKS, 4, NULL), 0);
	assert_int_equal((uintptr_t)ts.index % 64, 0);
	for (size_t b = 0; b < sizeof(base) / sizeof(base[0]); b++)
		for (uint32_t src = 0; src < 4; src++)
			for (uint8_t kind = RP_TRACK_THREAD; kind <= RP_TRACK_ASYNC; kind++) {
				uint32_t line = rp_tracks_home(&ts, src, kind, base[b]) / 16;
				uint32_t seen = 0, at[16];

				for (uint32_t i = 0; i < 16; i++) {
					uint32_t h = rp_tracks_home(&ts, src, kind, base[b] + i);

					assert_int_equal(h / 16, line);
					seen |= 1u << (h % 16);
					at[i] = rp_tracks_get(&ts, src, kind, base[b] + i, &c);
				}
				assert_int_equal(seen, 0xffff);
				for (uint32_t i = 0; i <= ts.mask; i++)
					if (ts.index[i] != UINT32_MAX)
						assert_int_equal(i / 16, line);
				for (uint32_t i = 0; i < 16; i++)
					rp_track_close(&ts, at[i], 0, RP_ANOM_KIND_COUNT, &c);
				assert_int_equal(ts.live, 0);
			}
	rp_tracks_free(&ts);
}

/*
 * Gets, finds and closes at random on a small index (64 tracks, 128 slots) over few
 * ids that share homes and lines (ids differing from bit 47 up, sources, kinds),
 * each answer checked against a list of the live keys searched one by one: a key is
 * found at the slot it was given until it is closed, a new one is made while under
 * the cap and counted at it.
 */
static void test_tracks_lookups_match_search(void **state)
{
	enum { CAP = 64, OPS = 200000 };
	struct key live[CAP];
	uint32_t at[CAP], n = 0;
	uint64_t rng = 0x9e3779b97f4a7c15u, caps = 0;
	struct rp_counts c = { 0 };
	struct rp_tracks ts;

	(void)state;
	assert_int_equal(rp_tracks_init(&ts, CAP, 4, NULL), 0);
	for (uint32_t op = 0; op < OPS; op++) {
		struct key k = { .id = rp_test_rnd(&rng, 40) | rp_test_rnd(&rng, 4) << 47,
				 .src = (uint32_t)rp_test_rnd(&rng, 3),
				 .kind = (uint8_t)(1 + rp_test_rnd(&rng, 2)) };
		uint32_t i = 0, tr, what = (uint32_t)rp_test_rnd(&rng, 3);

		while (i < n && !(live[i].id == k.id && live[i].src == k.src &&
				  live[i].kind == k.kind))
			i++;
		if (what == 0) { /* find */
			tr = rp_tracks_find_slow(&ts, k.src, k.kind, k.id);
			assert_int_equal(tr, i < n ? at[i] : RP_NONE);
		} else if (what == 1) { /* get */
			tr = rp_tracks_get_slow(&ts, k.src, k.kind, k.id, &c);
			if (i < n) {
				assert_int_equal(tr, at[i]);
			} else if (n == CAP) {
				assert_int_equal(tr, RP_NONE);
				caps++;
			} else {
				assert_int_not_equal(tr, RP_NONE);
				for (uint32_t j = 0; j < n; j++)
					assert_int_not_equal(tr, at[j]);
				live[n] = k;
				at[n++] = tr;
			}
		} else if (i < n) { /* close */
			rp_track_close(&ts, at[i], 0, RP_ANOM_KIND_COUNT, &c);
			live[i] = live[--n];
			at[i] = at[n];
		}
		assert_int_equal(ts.live, n);
		assert_int_equal(c.anomalies[RP_ANOM_TRACK_CAP], caps);
	}
	assert_true(caps > 0); /* the cap was reached */
	rp_tracks_free(&ts);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tracks_index_does_not_cluster),
		cmocka_unit_test(test_tracks_neighbours_share_a_line),
		cmocka_unit_test(test_tracks_lookups_match_search),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
