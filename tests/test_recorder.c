// SPDX-License-Identifier: MIT
/*
 * The flight recorder (engine/analyses/recorder.c): the ring keeps exactly the last N spans
 * and samples in order, counts every overwrite, and the engine's report carries
 * them with their tracks, names and labels. References are computed here by brute
 * force from the spans fed in.
 */
#include "support.h"

#include <errno.h>
#include <string.h>

#include "engine.h"
#include "recorder.h"
#include "snapshot.h"

/* One thread track, spans i = 0..n-1: [1000 i + 1, 1000 i + 1 + (i % 7) + 1]. */
static void feed_spans(struct rp_engine *e, uint32_t src, uint32_t name, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		struct rp_event b = { .ts = 1000 * i + 1, .name = name, .kind = RP_EV_BEGIN };
		struct rp_event en = { .ts = 1000 * i + 1 + (i % 7) + 1,
				       .name = name,
				       .kind = RP_EV_END };

		rp_engine_event(e, src, 42, &b);
		rp_engine_event(e, src, 42, &en);
	}
}

static void check_wrap(uint32_t cap, uint64_t n)
{
	struct rp_engine_cfg cfg;
	struct rp_engine *e;
	struct rp_report r;
	uint64_t kept = n < cap ? n : cap, first = n - kept;
	uint32_t src, name;

	rp_engine_cfg_default(&cfg);
	cfg.recorder_spans = cap;
	assert_int_equal(rp_engine_open(&cfg, &e), 0);
	src = (uint32_t)rp_engine_add_source(e, "t", 0, RP_SRC_FILE);
	name = rp_engine_name(e, src, "work", "cpu", "", 0);
	feed_spans(e, src, name, n);
	assert_int_equal(rp_engine_report(e, &r), 0);
	assert_int_equal(r.recorder.max_spans, cap);
	assert_int_equal(r.recorder.spans_seen, n);
	assert_int_equal(r.recorder.wrapped, n - kept);
	assert_int_equal(r.recorder.n_spans, kept);
	assert_int_equal(r.recorder.n_tracks, kept ? 1 : 0);
	for (uint64_t k = 0; k < kept; k++) { /* the last `kept`, oldest first */
		const struct rp_report_rspan *s = &r.recorder.spans[k];
		uint64_t i = first + k;

		assert_int_equal(s->start_ns, 1000 * i + 1);
		assert_int_equal(s->dur_ns, (i % 7) + 1);
		assert_string_equal(r.fns[s->fn].name, "work");
		assert_int_equal(s->depth, 0);
		assert_int_equal(s->track, 0);
	}
	if (kept) {
		assert_int_equal(r.recorder.tracks[0].id, 42);
		assert_int_equal(r.recorder.tracks[0].kind, RP_TRACK_THREAD);
		assert_int_equal(r.recorder.tracks[0].source, 0);
	}
	rp_report_free(&r);
	rp_engine_close(e);
}

static void test_recorder_wrap_counted(void **state)
{
	(void)state;
	check_wrap(100, 0);
	check_wrap(100, 99);
	check_wrap(100, 100);
	check_wrap(100, 101);
	check_wrap(100, 100 + 37);
	check_wrap(64, 64 * 5 + 3);
	check_wrap(64, 64 * 3); /* laps counted as the ring wraps: whole laps too */
	check_wrap(1, 10);
}

/* Nesting: children complete first; depth and order as completed. */
static void test_recorder_nesting_and_async(void **state)
{
	struct rp_engine *e;
	struct rp_report r;
	uint32_t src, a, b, req;

	(void)state;
	assert_int_equal(rp_engine_open(NULL, &e), 0);
	src = (uint32_t)rp_engine_add_source(e, "live", 1234, 0);
	a = rp_engine_name(e, src, "outer", "cpu", "", 0);
	b = rp_engine_name(e, src, "inner", "io", "", 0);
	req = rp_engine_name(e, src, "request", "req", "", 0);
	const struct rp_event evs[] = {
		{ .ts = 10, .name = a, .kind = RP_EV_BEGIN },
		{ .ts = 12, .name = b, .kind = RP_EV_BEGIN },
		{ .ts = 15, .name = req, .kind = RP_EV_ASYNC_BEGIN, .track = 9, .arg = 1 },
		{ .ts = 17, .name = b, .kind = RP_EV_END },
		{ .ts = 20, .name = a, .kind = RP_EV_END },
		{ .ts = 25, .name = req, .kind = RP_EV_ASYNC_END, .track = 9, .arg = 1 },
		{ .ts = 26, .name = a, .kind = RP_EV_COUNTER, .arg = (uint64_t)-5 },
	};
	for (size_t i = 0; i < sizeof(evs) / sizeof(evs[0]); i++)
		rp_engine_event(e, src, 7, &evs[i]);
	assert_int_equal(rp_engine_report(e, &r), 0);
	assert_int_equal(r.recorder.n_spans, 3);
	assert_string_equal(r.fns[r.recorder.spans[0].fn].name, "inner");
	assert_int_equal(r.recorder.spans[0].depth, 1);
	assert_int_equal(r.recorder.spans[0].start_ns, 12);
	assert_int_equal(r.recorder.spans[0].dur_ns, 5);
	assert_string_equal(r.fns[r.recorder.spans[1].fn].name, "outer");
	assert_int_equal(r.recorder.spans[1].depth, 0);
	assert_int_equal(r.recorder.spans[1].dur_ns, 10);
	assert_string_equal(r.fns[r.recorder.spans[2].fn].name, "request");
	assert_int_equal(r.recorder.n_tracks, 2);
	assert_int_equal(r.recorder.tracks[r.recorder.spans[2].track].kind, RP_TRACK_ASYNC);
	assert_int_equal(r.recorder.tracks[r.recorder.spans[2].track].id, 9);
	assert_int_equal(r.recorder.tracks[r.recorder.spans[0].track].id, 7);
	assert_int_equal(r.recorder.n_samples, 1);
	assert_int_equal(r.recorder.samples[0].value, -5);
	assert_int_equal(r.recorder.samples[0].ts_ns, 26);
	assert_string_equal(r.recorder.names[r.recorder.samples[0].name], "outer");
	assert_int_equal(r.recorder.samples[0].track, r.recorder.spans[0].track);
	rp_report_free(&r);
	rp_engine_close(e);
}

/* Samples: the last M, in order, overwrites counted. */
static void test_recorder_samples_wrap(void **state)
{
	struct rp_recorder rec;
	struct rp_names names;
	struct rp_report_recorder out;
	uint32_t map[4] = { 0, 0, 0, 0 }, src_map[1] = { 0 };
	bool full;

	(void)state;
	assert_int_equal(rp_names_init(&names, 16), 0);
	rp_names_get(&names, "queue", "", "", 0, &full);
	assert_int_equal(rp_recorder_init(&rec, 4, 5, 8), 0);
	for (int64_t i = 0; i < 13; i++)
		rp_recorder_sample(&rec, &(struct rp_rec_sample){ .ts = (uint64_t)i * 3,
								  .value = i - 6,
								  .track = 1,
								  .name = 1,
								  .src = 0 });
	assert_int_equal(rp_recorder_report(&rec, &names, map, src_map, 1, &out), 0);
	assert_int_equal(out.samples_seen, 13);
	assert_int_equal(out.samples_wrapped, 8);
	assert_int_equal(out.n_samples, 5);
	for (uint32_t k = 0; k < 5; k++) {
		assert_int_equal(out.samples[k].ts_ns, (8 + k) * 3);
		assert_int_equal(out.samples[k].value, (int64_t)(8 + k) - 6);
	}
	assert_int_equal(out.n_names, 1);
	assert_string_equal(out.names[0], "queue");
	rp_report_recorder_free(&out);
	rp_recorder_fini(&rec);
	rp_names_free(&names);
}

/* Labels: kept, replaced, capped and counted. */
static void test_recorder_labels(void **state)
{
	struct rp_recorder rec;
	struct rp_names names;
	struct rp_report_recorder out;
	uint32_t map[2] = { 0, 0 }, src_map[1] = { 0 };

	(void)state;
	assert_int_equal(rp_names_init(&names, 4), 0);
	assert_int_equal(rp_recorder_init(&rec, 8, 0, 2), 0);
	assert_int_equal(rp_recorder_label(&rec, 0, 1, "100", "7"), 0);
	assert_int_equal(rp_recorder_label(&rec, 0, 1, "100", "8"), 0); /* replaces */
	assert_int_equal(rp_recorder_label(&rec, 0, 2, "200", "9"), 0);
	assert_int_equal(rp_recorder_label(&rec, 0, 3, "300", "1"), -ENOSPC);
	assert_int_equal(rec.labels_dropped, 1);
	for (uint64_t t = 1; t <= 3; t++)
		rp_recorder_span(
			&rec, &(struct rp_rec_span){
				      .start = t, .dur = 1, .track = t, .kind = RP_TRACK_THREAD });
	assert_int_equal(rp_recorder_report(&rec, &names, map, src_map, 1, &out), 0);
	assert_int_equal(out.n_tracks, 3);
	assert_string_equal(out.tracks[0].pid, "100");
	assert_string_equal(out.tracks[0].tid, "8");
	assert_string_equal(out.tracks[1].tid, "9");
	assert_string_equal(out.tracks[2].pid, ""); /* past the cap: unlabeled */
	assert_int_equal(out.labels_dropped, 1);
	rp_report_recorder_free(&out);
	rp_recorder_fini(&rec);
	rp_names_free(&names);
}

/* A recorder of size 0 keeps nothing and counts everything as wrapped. */
static void test_recorder_zero(void **state)
{
	(void)state;
	check_wrap(0, 5);
}

/* What the incremental test fed: a span's name, track, start and duration. */
struct fed {
	uint32_t name;
	uint8_t kind;
	uint64_t track, start, dur;
};

/*
 * A live engine snapshotted again and again (issue 25): each report encoded through one
 * struct rp_snap_cache is byte for byte the encoding from scratch, while the ring wraps
 * (5000 spans: not a whole number of chunks), names start being called late (the
 * function numbers move), async tracks come and go (their numbers are kept, then
 * trimmed) and a report has no change at all. The spans read back are the last 5000
 * fed (brute force), each on its own track; chunks are reused.
 */
static void test_recorder_incremental_encoding_is_byte_identical(void **state)
{
	enum { CAP = 5000, ROUNDS = 40, NAMES = 8 };
	static struct fed fed[ROUNDS * 1200];
	struct rp_snap_cache *c = rp_snap_cache_new();
	struct rp_snap_cache_stats st;
	struct rp_engine_cfg cfg;
	struct rp_engine *e;
	uint32_t src, names[NAMES];
	uint64_t ts = 1, n_fed = 0, trimmed = 0, prev_tracks = 0;
	char why[RP_WHY_MAX];

	(void)state;
	assert_non_null(c);
	rp_engine_cfg_default(&cfg);
	cfg.recorder_spans = CAP;
	assert_int_equal(rp_engine_open(&cfg, &e), 0);
	src = (uint32_t)rp_engine_add_source(e, "live", 1234, 0);
	for (int k = 0; k < NAMES; k++) {
		char nm[16];

		snprintf(nm, sizeof(nm), "n%d", k);
		names[k] = rp_engine_name(e, src, nm, "cpu", "", 0);
	}
	for (uint32_t round = 0; round < ROUNDS; round++) {
		/* round 7 adds nothing; others up to 1199 spans */
		uint32_t add = round == 7 ? 0 : (round * 337u) % 1200;
		struct rp_membuf a = { 0 }, b = { 0 };
		struct rp_report r, back;

		for (uint32_t i = 0; i < add; i++, n_fed++) {
			/* name k is called from round k on: late ones move the numbers */
			uint32_t nm = names[(n_fed % NAMES) <= round ? n_fed % NAMES : 0];
			bool async = n_fed % 3 != 0;
			uint64_t tr = async ? 1000 + n_fed / 7 : 42, d = n_fed % 5 + 1;
			struct rp_event be = { .ts = ts, .name = nm, .kind = RP_EV_BEGIN };
			struct rp_event en = { .ts = ts + d, .name = nm, .kind = RP_EV_END };

			if (async) {
				be = (struct rp_event){ .ts = ts, .name = nm, .track = tr, .arg = 1,
							.kind = RP_EV_ASYNC_BEGIN };
				en = (struct rp_event){ .ts = ts + d, .name = nm, .track = tr,
							.arg = 1, .kind = RP_EV_ASYNC_END };
			}
			rp_engine_event(e, src, 42, &be);
			rp_engine_event(e, src, 42, &en);
			fed[n_fed] = (struct fed){ nm, async ? 2 : 1, tr, ts, d };
			ts += d + 1;
		}
		assert_int_equal(rp_engine_report(e, &r), 0);
		assert_int_equal(rp_snapshot_encode(&r, rp_membuf_sink, &a), 0);
		assert_int_equal(rp_snapshot_encode_cached(&r, c, rp_membuf_sink, &b), 0);
		assert_int_equal(a.len, b.len);
		assert_memory_equal(a.data, b.data, a.len);
		/* brute force: the last CAP spans fed, in order, on their tracks */
		assert_int_equal(rp_snapshot_decode(b.data, b.len, &back, why), 0);
		assert_int_equal(back.recorder.n_spans, n_fed < CAP ? n_fed : CAP);
		for (uint32_t k = 0; k < back.recorder.n_spans; k++) {
			const struct rp_report_rspan *sp = &back.recorder.spans[k];
			const struct fed *f = &fed[n_fed - back.recorder.n_spans + k];
			const struct rp_report_rtrack *t = &back.recorder.tracks[sp->track];
			char nm[16];

			snprintf(nm, sizeof(nm), "n%u", (unsigned)(f->name - names[0]));
			assert_string_equal(back.fns[sp->fn].name, nm);
			assert_int_equal(t->kind, f->kind);
			assert_int_equal(t->id, f->track);
			assert_int_equal(sp->start_ns, f->start);
			assert_int_equal(sp->dur_ns, f->dur);
		}
		/* unused tracks stay listed, within the bound */
		assert_true(back.recorder.n_tracks <=
			    2 * (uint64_t)back.recorder.n_spans + RP_REC_TRACKS_SLACK);
		trimmed += back.recorder.n_tracks < prev_tracks;
		prev_tracks = back.recorder.n_tracks;
		rp_report_free(&back);
		rp_report_free(&r);
		rp_membuf_free(&a);
		rp_membuf_free(&b);
	}
	rp_snap_cache_stats(c, &st);
	assert_true(st.hits > 0 && st.misses > 0 && st.loose > 0);
	assert_true(trimmed > 0);
	rp_snap_cache_free(c);
	rp_engine_close(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_recorder_wrap_counted),
		cmocka_unit_test(test_recorder_nesting_and_async),
		cmocka_unit_test(test_recorder_samples_wrap),
		cmocka_unit_test(test_recorder_labels),
		cmocka_unit_test(test_recorder_zero),
		cmocka_unit_test(test_recorder_incremental_encoding_is_byte_identical),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
