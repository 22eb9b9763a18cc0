// SPDX-License-Identifier: MIT
/*
 * Live sources end to end: producers (this process, and forked children) write
 * through the real producer library; the engine finds their segments, merges and
 * analyses them. With RINGPROF_CLOCK=monotonic and explicit timestamps (rp_emit_at)
 * every expected figure is exact. Covers: exact statistics, a ring reused by a new
 * thread (a new track), late records, a producer killed mid-span (truncated, segment
 * removed, engine goes on), a stale segment of a producer that died before the engine
 * started, and events + dropped == emitted under drops.
 */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "snapshot.h"
#include "sources.h"
#include "support.h"

static struct rp_engine *eng;
static struct rp_sources ss;

static void open_engine(void)
{
	assert_int_equal(rp_engine_open(NULL, &eng), 0);
	assert_int_equal(rp_sources_init(&ss, eng, getenv("RINGPROF_SESSION")), 0);
}

static void close_engine(void)
{
	rp_sources_free(&ss);
	rp_engine_close(eng);
}

static const struct rp_report_fn *fn(const struct rp_report *r, const char *name)
{
	for (uint32_t i = 0; i < r->n_fns; i++)
		if (strcmp(r->fns[i].name, name) == 0)
			return &r->fns[i];
	fail_msg("no function %s", name);
	return NULL;
}

static void report(struct rp_report *r)
{
	rp_sources_update(&ss);
	assert_int_equal(rp_engine_report(eng, r), 0);
}

/* @body(@arg) on a thread of its own, to its end: its ring is retired, as a producer
 * thread's that exited. */
static void on_thread(void *(*body)(void *), void *arg)
{
	pthread_t th;

	assert_int_equal(pthread_create(&th, NULL, body, arg), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
}

/* a[100,200) { b[110,130) b[140,150) }, c instant, on this thread. */
static void emit_pattern(uint64_t base)
{
	uint32_t a = rp_intern("a", "FUNCTION", "x.c", 1), b = rp_intern("b", "LLM", NULL, 0);

	rp_emit_at(base + 100, RP_EV_BEGIN, 0, a, 0, 0);
	rp_emit_at(base + 110, RP_EV_BEGIN, 0, b, 0, 0);
	rp_emit_at(base + 130, RP_EV_END, 0, b, 0, 0);
	rp_emit_at(base + 140, RP_EV_BEGIN, 0, b, 0, 0);
	rp_emit_at(base + 150, RP_EV_END, 0, b, 0, 0);
	rp_emit_at(base + 200, RP_EV_END, 0, a, 0, 0);
}

static void test_sources_exact_statistics(void **state)
{
	struct rp_report r;

	(void)state;
	open_engine();
	emit_pattern(1000);
	assert_int_equal(rp_sources_scan(&ss), 1);
	assert_int_equal(rp_sources_drain(&ss, UINT64_MAX), 6);
	report(&r);
	assert_int_equal(r.events, 6);
	assert_int_equal(r.dropped + r.late + r.truncated, 0);
	assert_int_equal(fn(&r, "a")->cum_ns, 100);
	assert_int_equal(fn(&r, "a")->self_ns, 70);
	assert_int_equal(fn(&r, "b")->calls, 2);
	assert_int_equal(fn(&r, "b")->cum_ns, 30);
	assert_string_equal(fn(&r, "a")->file, "x.c");
	assert_string_equal(fn(&r, "b")->category, "LLM");
	assert_int_equal(r.n_edges, 1);
	assert_int_equal(r.edges[0].calls, 2);
	assert_int_equal(r.sources[0].pid, getpid());
	/* The thread's track carries the OS ids from the ring descriptor (exports name
	 * threads by them). */
	{
		char pid[16], tid[16];
		bool found = false;

		snprintf(pid, sizeof(pid), "%d", (int)getpid());
		snprintf(tid, sizeof(tid), "%d", rp_test_gettid());
		for (uint32_t i = 0; i < r.recorder.n_tracks; i++)
			found |= r.recorder.tracks[i].kind == 1 &&
				 !strcmp(r.recorder.tracks[i].tid, tid) &&
				 !strcmp(r.recorder.tracks[i].pid, pid);
		assert_true(found);
	}
	rp_report_free(&r);
	close_engine();
}

static void *thread_pattern(void *arg)
{
	emit_pattern((uint64_t)(uintptr_t)arg);
	return NULL;
}

/* The same ring, two owners one after the other: two tracks, nothing mixed. */
static void test_sources_ring_reuse_is_a_new_track(void **state)
{
	struct rp_report r;

	(void)state;
	open_engine();
	rp_sources_scan(&ss);
	for (int k = 0; k < 2; k++) {
		on_thread(thread_pattern, (void *)(uintptr_t)(10000 + 1000 * k));
		assert_int_equal(rp_sources_drain(&ss, UINT64_MAX), 6); /* drained: reusable */
	}
	report(&r);
	assert_int_equal(fn(&r, "a")->calls, 2);
	assert_int_equal(fn(&r, "a")->self_ns, 140);
	assert_int_equal(r.truncated, 0);
	assert_int_equal(eng->tracks.live, 0); /* both thread tracks closed */
	rp_report_free(&r);
	close_engine();
}

static void *thread_pattern_now(void *arg)
{
	(void)arg;
	emit_pattern(rp_now());
	return NULL;
}

/* Issue 20, part 4: with no ring free or drained, a new thread takes a retired ring
 * over undrained, after an owner mark that tells the engine whose records are whose:
 * 3 threads a ring, read in one drain, every span exact, every track closed. */
static void test_sources_takeover_keeps_every_thread(void **state)
{
	struct rp_wire_header *h;
	struct rp_report r;
	const unsigned n = 24;
	uint64_t noring0, claims0;

	(void)state;
	rp_init();
	h = rp_segment_header();
	open_engine();
	rp_sources_scan(&ss);
	rp_sources_drain(&ss, UINT64_MAX);
	noring0 = h->noring_dropped;
	claims0 = h->rings_claimed;
	for (unsigned i = 0; i < n; i++)
		on_thread(thread_pattern_now, NULL); /* no drain in between */
	assert_int_equal(h->noring_dropped, noring0);
	assert_int_equal(h->rings_claimed - claims0, n);
	rp_sources_drain(&ss, UINT64_MAX);
	report(&r);
	assert_int_equal(fn(&r, "a")->calls, n);
	assert_int_equal(fn(&r, "a")->self_ns, 70 * n);
	assert_int_equal(fn(&r, "b")->calls, 2 * n);
	assert_int_equal(fn(&r, "b")->cum_ns, 30 * n);
	assert_int_equal(r.truncated, 0);
	for (unsigned k = 0; k < RP_ANOM_KIND_COUNT; k++)
		if (r.anomalies[k] != 0 && k != RP_ANOM_RESTART_GAP) /* earlier tests' engines */
			fail_msg("%s: %llu", rp_anomaly_names[k], (unsigned long long)r.anomalies[k]);
	assert_int_equal(eng->tracks.live, 0); /* every owner's track closed */
	rp_report_free(&r);
	close_engine();
}

/*
 * Wire 1.4: a claim says where its records start (claim_tail), so a generation the
 * engine does not follow yet needs no search of the backlog for an owner mark when
 * the head is at or past that point; only a take-over the head is still before is
 * searched. Exact figures either way, and the searches counted: 0 for drained
 * claims read by a following engine and by a fresh one, 1 for the one ring taken
 * over undrained.
 */
/* Rings of our segment no thread owns now (free, or retired). */
static unsigned rings_not_active(void)
{
	const struct rp_wire_header *h = rp_segment_header();
	const struct rp_wire_ring *d =
		(const struct rp_wire_ring *)(const void *)((const char *)h + h->ring_desc_offset);
	unsigned n = 0;

	for (uint32_t i = 0; i < h->ring_count; i++)
		n += __atomic_load_n(&d[i].state, __ATOMIC_ACQUIRE) != RP_RING_ACTIVE;
	return n;
}

static void test_sources_claim_tail_spares_the_search(void **state)
{
	struct rp_report r;
	uint64_t s0;
	unsigned idle;

	(void)state;
	rp_init();
	open_engine();
	rp_sources_scan(&ss);
	rp_sources_drain(&ss, UINT64_MAX); /* every ring drained: claims take them so */
	s0 = ss.mark_scans;
	on_thread(thread_pattern_now, NULL);
	on_thread(thread_pattern_now, NULL);
	rp_sources_drain(&ss, UINT64_MAX);
	assert_int_equal(ss.mark_scans, s0);
	report(&r);
	assert_int_equal(fn(&r, "a")->calls, 2);
	assert_int_equal(fn(&r, "a")->self_ns, 140);
	assert_int_equal(fn(&r, "b")->calls, 4);
	assert_int_equal(r.truncated, 0);
	rp_report_free(&r);
	/* one owner more than the rings no thread holds, no drain in between: the
	 * last one takes a ring over */
	idle = rings_not_active();
	assert_true(idle >= 1);
	for (unsigned i = 0; i < idle + 1; i++)
		on_thread(thread_pattern_now, NULL);
	rp_sources_drain(&ss, UINT64_MAX);
	assert_int_equal(ss.mark_scans, s0 + 1);
	report(&r);
	assert_int_equal(fn(&r, "a")->calls, 2 + idle + 1);
	assert_int_equal(fn(&r, "a")->self_ns, 70 * (2 + idle + 1));
	assert_int_equal(fn(&r, "b")->cum_ns, 30 * (2 + idle + 1));
	assert_int_equal(r.truncated, 0);
	assert_int_equal(eng->tracks.live, 0);
	rp_report_free(&r);
	close_engine();
	/* a fresh engine: every generation new to it, none searched (heads at or past
	 * their claims), the new owner's spans exact */
	on_thread(thread_pattern_now, NULL);
	open_engine();
	rp_sources_scan(&ss);
	rp_sources_drain(&ss, UINT64_MAX);
	assert_int_equal(ss.mark_scans, 0);
	report(&r);
	assert_int_equal(fn(&r, "a")->calls, 1);
	assert_int_equal(fn(&r, "a")->self_ns, 70);
	assert_int_equal(eng->tracks.live, 0);
	rp_report_free(&r);
	close_engine();
}

static void *lose_after_span(void *arg)
{
	uint32_t a = rp_intern("a", "FUNCTION", "x.c", 1), tick = rp_intern("tick", NULL, NULL, 0);

	(void)arg;
	for (int i = 0; i < 5; i++)
		rp_instant(tick);
	rp_begin(a);
	for (int i = 0; i < 20; i++) /* 9 fit in a 16-slot ring, 11 are lost */
		rp_instant(tick);
	return NULL; /* exits with `a` open and records lost after it */
}

static void *one_b(void *arg)
{
	uint32_t b = rp_intern("b", "LLM", NULL, 0);
	uint64_t t = rp_now();

	(void)arg;
	rp_emit_at(t + 10, RP_EV_BEGIN, 0, b, 0, 0);
	rp_emit_at(t + 40, RP_EV_END, 0, b, 0, 0);
	return NULL;
}

/* The child of test_sources_takeover_carries_prev_lost, a fresh process (a fork
 * child would keep this one's geometry): one 16-slot ring; the first thread fills it
 * and loses records after its last span record; a reader here frees 5 slots; the
 * second thread takes the ring over undrained. The segment stays (RINGPROF_KEEP). */
static int prev_lost_child(void)
{
	struct rp_event ev[5];
	struct rp_segment *s;
	char why[RP_WHY_MAX];
	pthread_t th;
	bool ok;

	if (rp_init() != 0)
		return 1;
	pthread_create(&th, NULL, lose_after_span, NULL);
	pthread_join(th, NULL);
	if (rp_segment_attach(rp_segment_header(), rp_segment_header()->segment_size, &s, why) !=
		    0 ||
	    rp_segment_drain(s, 0, ev, 5, NULL) != 5)
		return 2;
	rp_test_ring(s, 0)->snap_head = rp_test_ring(s, 0)->ring.c_head; /* read: no gap */
	pthread_create(&th, NULL, one_b, NULL);
	pthread_join(th, NULL);
	ok = rp_dropped() == 11 && rp_test_ring(s, 0)->gen == 2;
	rp_segment_close(s);
	return ok ? 0 : 3;
}

/* The owner mark carries the old owner's loss (RP_THREAD_PREV_LOST): a span it left
 * open is lost (drop_lost), not truncated, and the new owner's spans are exact; the
 * engine reads the ring after the child is gone. */
static void test_sources_takeover_carries_prev_lost(void **state)
{
	struct rp_report r;
	int status;
	pid_t pid = fork();

	(void)state;
	if (pid == 0) {
		setenv("RINGPROF_RINGS", "1", 1);
		setenv("RINGPROF_RING_EVENTS", "16", 1);
		setenv("RINGPROF_KEEP", "1", 1);
		execl("/proc/self/exe", "test_sources", "--prev-lost-child", (char *)NULL);
		_exit(127);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	open_engine();
	rp_sources_scan(&ss);
	rp_sources_drain(&ss, UINT64_MAX);
	report(&r);
	for (uint32_t i = 0; i < r.n_sources; i++)
		if (r.sources[i].pid == pid) {
			assert_int_equal(r.sources[i].events, 10 + 2); /* a, 9 ticks; b's two */
			assert_int_equal(r.sources[i].dropped, 11);
			assert_int_equal(r.sources[i].anomalies[RP_ANOM_DROP_LOST], 1);
			assert_int_equal(r.sources[i].truncated, 0);
		}
	assert_int_equal(fn(&r, "b")->calls, 1);
	assert_int_equal(fn(&r, "b")->cum_ns, 30);
	rp_report_free(&r);
	close_engine();
}

/* Instants at base, base + 1, ... on this thread's ring. */
struct run_arg {
	uint64_t base, n;
};

static void *thread_run(void *arg)
{
	const struct run_arg *a = arg;
	uint32_t id = rp_intern("tick", NULL, NULL, 0);

	for (uint64_t k = 0; k < a->n; k++)
		rp_emit_at(a->base + k, RP_EV_INSTANT, 0, id, 0, 0);
	return NULL;
}

/*
 * A final drain (watermark UINT64_MAX) merges everything buffered, even when one
 * ring's run is merged past the slice in one go: 12000 records of one thread lead
 * the other thread's single later record. (It once stopped there, and a final
 * snapshot lost whatever was still buffered.)
 */
static void test_sources_final_drain_takes_all(void **state)
{
	struct run_arg a = { 1, 12000 }, b = { 20000, 1 };
	struct rp_report r;

	(void)state;
	open_engine();
	rp_sources_scan(&ss);
	on_thread(thread_run, &a);
	on_thread(thread_run, &b);
	assert_int_equal(rp_sources_drain(&ss, UINT64_MAX), 12001);
	report(&r);
	assert_int_equal(r.events, 12001);
	rp_report_free(&r);
	close_engine();
}

/*
 * rp_sources_touch() (bench_engine's warm drains) reads one record per page of each
 * ring's undrained records and takes none of them: 1000 and 1 records (and an owner
 * mark each) on two rings, one read per 128 records of each; all of them drained after.
 */
static void test_sources_touch_reads_and_leaves_the_records(void **state)
{
	struct run_arg a = { 1, 1000 }, b = { 5000, 1 };

	(void)state;
	open_engine();
	rp_sources_scan(&ss);
	on_thread(thread_run, &a);
	on_thread(thread_run, &b);
	/* 1000 or 1001 records: 8 reads; 1 or 2: 1 */
	assert_int_equal(rp_sources_touch(&ss), 9);
	assert_int_equal(rp_sources_drain(&ss, UINT64_MAX), 1001);
	assert_int_equal(rp_sources_touch(&ss), 0);
	close_engine();
}

/* Instants at base, base + step, ... on a thread's ring. */
struct spaced_arg {
	uint64_t base, step, n;
};

static void *thread_spaced(void *arg)
{
	const struct spaced_arg *a = arg;
	uint32_t id = rp_intern("tick", NULL, NULL, 0);

	for (uint64_t k = 0; k < a->n; k++)
		rp_emit_at(a->base + k * a->step, RP_EV_INSTANT, 0, id, 0, 0);
	return NULL;
}

/*
 * A fresh engine and three rings to merge, 106000 records written: a dense retired
 * ring (60000 records, 1 ns apart), a sparse one (6000, 10 ns apart) and this
 * thread's live ring (40000, 3 ns apart from 2).
 */
static void open_spaced_three(void)
{
	struct spaced_arg dense = { 1, 1, 60000 }, sparse = { 10, 10, 6000 }, own = { 2, 3, 40000 };

	open_engine();
	rp_sources_scan(&ss);
	on_thread(thread_spaced, &dense);
	on_thread(thread_spaced, &sparse);
	thread_spaced(&own);
}

/* The final drain took @left more records; the report holds @events, none late. */
static void assert_all_merged(uint64_t left, uint64_t events)
{
	struct rp_report r;

	assert_int_equal(rp_sources_drain(&ss, UINT64_MAX), left);
	report(&r);
	assert_int_equal(r.events, events);
	assert_int_equal(r.late, 0);
	rp_report_free(&r);
	close_engine();
}

/*
 * Records already due are merged in place in the rings, the rest taken into the
 * buffers; a live ring a quarter full is emptied into its buffer. The merge must be
 * exact across both: a dense retired ring (60000 records, 1 ns apart), a sparse one
 * (6000, 10 ns apart) and this thread's live ring (40000, 3 ns apart: at risk).
 * Every drain takes exactly the records up to its mark, none late, and leaves the
 * rings empty (what is not due waits in the buffers: the engine may sleep).
 */
static void test_sources_in_place_merge_exactly(void **state)
{
	(void)state;
	open_spaced_three();
	/* up to 30000: 30000 dense, 3000 sparse, 10000 of ours (2, 5, ..., 29999) */
	assert_int_equal(rp_sources_drain(&ss, 30000), 43000);
	assert_false(rp_sources_sleep_prepare(&ss)); /* nothing left in the rings */
	assert_all_merged(63000, 106000);
}

/* Spans on this thread, record r of them at spans_ts(base, r): span k begins at
 * base + 3k and lasts 1 + (k & 1) ns, so that a record out of place shows. */
static uint64_t spans_ts(uint64_t base, uint32_t r)
{
	uint32_t k = r / 2;

	return base + 3 * (uint64_t)k + (r & 1 ? 1 + (k & 1) : 0);
}

static void emit_spans(uint64_t base, uint32_t from, uint32_t to)
{
	uint32_t id = rp_intern("grown", NULL, NULL, 0);

	for (uint32_t r = from; r < to; r++)
		rp_emit_at(spans_ts(base, r), r & 1 ? RP_EV_END : RP_EV_BEGIN, 0, id, 0, 0);
}

/*
 * A buffer that grows while its backlog wraps round its end (grow()): the records
 * keep their order, whichever end moves. Each drain merges up to a record of the
 * spans (spans_ts), the rest waits in the buffer (1024 records, then 2048):
 *   front: 500 buffered, 400 merged and 700 more (head 400, 800: 176 wrapped),
 *          50 merged and 500 more: the 176 move after the old end;
 *   back:  500 buffered, 400 merged and 900 more (head 400, 1000: 376 wrapped),
 *          300 then 50 merged and 500 more: the 274 before the end move to the new
 *          end.
 * Every drain merges exactly its records; the spans' calls and times are exact.
 */
static void test_sources_buffer_grows_round_its_wrap(void **state)
{
	static const struct {
		uint64_t base;
		uint32_t emit[4], upto[4]; /* before each drain: emit[] more; merge upto[] */
	} c[2] = {
		{ 1000, { 1500, 2200, 2700, 2700 }, { 1000, 1400, 1450, 2700 } },
		{ 100000, { 1500, 2400, 2400, 2900 }, { 1000, 1400, 1700, 1750 } },
	};

	(void)state;
	for (int i = 0; i < 2; i++) {
		struct rp_report r;
		uint32_t emitted = 0, merged = 0;
		uint64_t cum = 0;

		open_engine();
		rp_sources_scan(&ss);
		for (int d = 0; d < 4; d++) {
			emit_spans(c[i].base, emitted, c[i].emit[d]);
			emitted = c[i].emit[d];
			assert_int_equal(rp_sources_drain(&ss, spans_ts(c[i].base, c[i].upto[d] - 1)),
					 c[i].upto[d] - merged);
			merged = c[i].upto[d];
		}
		assert_int_equal(rp_sources_drain(&ss, UINT64_MAX), emitted - merged);
		report(&r);
		for (uint32_t k = 0; k < emitted / 2; k++)
			cum += 1 + (k & 1);
		assert_int_equal(r.events, emitted);
		assert_int_equal(r.late + r.truncated, 0);
		assert_int_equal(fn(&r, "grown")->calls, emitted / 2);
		assert_int_equal(fn(&r, "grown")->cum_ns, cum);
		rp_report_free(&r);
		close_engine();
	}
}

static unsigned interrupts;

static bool interrupt_now(void *ctx)
{
	(void)ctx;
	interrupts++;
	return true;
}

/*
 * A snapshot waits while a drain copies a ring at risk out of its ring (40000 records
 * of this thread's live ring, a quarter full): the copy asks ss.interrupt before its
 * buffer grows, once, and stops; the records stay in the ring, counted unmerged, and
 * the next drain takes them all, in order.
 */
static void test_sources_copy_held_for_a_snapshot(void **state)
{
	struct spaced_arg own = { 2, 3, 40000 };

	(void)state;
	open_engine();
	rp_sources_scan(&ss);
	thread_spaced(&own);
	interrupts = 0;
	ss.interrupt = interrupt_now;
	assert_int_equal(rp_sources_drain(&ss, 1), 0);
	ss.interrupt = NULL;
	assert_int_equal(interrupts, 1);
	assert_int_equal(rp_sources_unmerged(&ss), 40000);
	assert_true(rp_sources_sleep_prepare(&ss)); /* left in the ring */
	assert_all_merged(40000, 40000);
}

/* What a report holds plus what rp_sources_unmerged() counts is what was written. */
static uint64_t merged_plus_unmerged(void)
{
	struct rp_report r;
	uint64_t n;

	report(&r);
	n = r.events + rp_sources_unmerged(&ss);
	rp_report_free(&r);
	return n;
}

/*
 * A snapshot taken with a backlog (issue 25): the drain before it merges at most the
 * slices it is given (or stops when ss.interrupt says so), and the records not merged
 * are counted exactly, in the rings and in the buffers: 106000 written, the events
 * merged plus the unmerged count are 106000 at every step; the count goes through a
 * snapshot unchanged, and is 0 once everything is merged.
 */
static void test_sources_unmerged_counts_the_backlog(void **state)
{
	struct rp_report r, back;
	struct rp_membuf m = { 0 };
	char why[RP_WHY_MAX];
	uint64_t got, total = 0;

	(void)state;
	open_spaced_three();
	assert_int_equal(rp_sources_unmerged(&ss), 106000); /* all in the rings */
	/* one slice: RP_SOURCES_SLICE records, or a little more (a run merged whole) */
	got = rp_sources_drain_some(&ss, 30000, 1);
	total += got;
	assert_true(got >= RP_SOURCES_SLICE && got < 43000);
	assert_int_equal(merged_plus_unmerged(), 106000);
	/* an interrupt stops it at the first slice boundary, asked once */
	ss.interrupt = interrupt_now;
	got = rp_sources_drain(&ss, 30000);
	total += got;
	ss.interrupt = NULL;
	assert_int_equal(interrupts, 1);
	assert_true(got >= RP_SOURCES_SLICE && total < 43000);
	assert_int_equal(merged_plus_unmerged(), 106000);
	/* the count in a snapshot reads back */
	report(&r);
	r.unmerged_records = rp_sources_unmerged(&ss);
	assert_int_equal(r.unmerged_records, 106000 - total);
	assert_int_equal(rp_snapshot_encode(&r, rp_membuf_sink, &m), 0);
	assert_int_equal(rp_snapshot_decode(m.data, m.len, &back, why), 0);
	assert_int_equal(back.unmerged_records, 106000 - total);
	assert_int_equal(back.events, total);
	rp_report_free(&back);
	rp_report_free(&r);
	rp_membuf_free(&m);
	/* the rest: what was due, then everything */
	total += rp_sources_drain(&ss, 30000);
	assert_int_equal(total, 43000);
	assert_int_equal(rp_sources_unmerged(&ss), 63000);
	assert_int_equal(rp_sources_drain(&ss, UINT64_MAX), 63000);
	assert_int_equal(rp_sources_unmerged(&ss), 0);
	assert_int_equal(merged_plus_unmerged(), 106000);
	close_engine();
}

/* Spans back to back on a thread, at random: a BEGIN, its END d in [0, 3] ns later,
 * the next BEGIN g in [0, 3] ns after; the same seed gives the same times. */
struct random_arg {
	const char *name;
	uint32_t seed, spans;
	uint64_t total_ns, *ts; /* out: the sum of durations, every record's time */
};

static uint32_t next_rand(uint32_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 17;
	*x ^= *x << 5;
	return *x;
}

static void *thread_random(void *arg)
{
	struct random_arg *a = arg;
	uint32_t id = rp_intern(a->name, NULL, NULL, 0), x = a->seed;
	uint64_t t = 1000;

	a->total_ns = 0;
	for (uint32_t k = 0; k < a->spans; k++) {
		uint64_t d = next_rand(&x) % 4;

		a->ts[2 * k] = t;
		a->ts[2 * k + 1] = t + d;
		rp_emit_at(t, RP_EV_BEGIN, 0, id, 0, 0);
		rp_emit_at(t + d, RP_EV_END, 0, id, 0, 0);
		a->total_ns += d;
		t += d + next_rand(&x) % 4;
	}
	return NULL;
}

/*
 * Two rings whose records interleave at random, with equal times across them: the
 * two-ring merge (merge_two in sources.c) picks the older by index. Every drain
 * takes exactly the records up to its mark (counted here from the times each thread
 * wrote), none comes late, and each name's time is the sum of its spans. Each ring
 * holds more than a slice (RP_SOURCES_SLICE), so a merge also stops at its limit.
 */
static void test_sources_two_rings_interleaved_at_random(void **state)
{
	enum { SPANS = 12000 };
	static uint64_t ts[2][2 * SPANS];
	struct random_arg a[2] = { { "x0", 12345, SPANS, 0, ts[0] },
				   { "x1", 777, SPANS, 0, ts[1] } };
	uint64_t marks[] = { 5000, 5001, 17000, 30000, UINT64_MAX }, done = 0;
	struct rp_report r;

	(void)state;
	open_engine();
	rp_sources_scan(&ss);
	for (int i = 0; i < 2; i++) {
		on_thread(thread_random, &a[i]);
	}
	for (size_t m = 0; m < sizeof(marks) / sizeof(marks[0]); m++) {
		uint64_t due = 0;

		for (int i = 0; i < 2; i++)
			for (uint32_t k = 0; k < 2 * SPANS; k++)
				due += ts[i][k] <= marks[m];
		assert_int_equal(rp_sources_drain(&ss, marks[m]), due - done);
		done = due;
	}
	assert_int_equal(done, 4 * SPANS);
	report(&r);
	assert_int_equal(r.events, 4 * SPANS);
	assert_int_equal(r.late, 0);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(fn(&r, a[i].name)->calls, SPANS);
		assert_int_equal(fn(&r, a[i].name)->self_ns, a[i].total_ns);
	}
	rp_report_free(&r);
	close_engine();
}

/* Records past the watermark wait; a record older than what was processed is late. */
static void test_sources_watermark_and_late(void **state)
{
	struct rp_report r;
	uint32_t i = rp_intern("tick", "", NULL, 0);

	(void)state;
	open_engine();
	rp_sources_scan(&ss);
	rp_emit_at(50000, RP_EV_INSTANT, 0, i, 0, 0);
	rp_emit_at(90000, RP_EV_INSTANT, 0, i, 0, 0);
	assert_int_equal(rp_sources_drain(&ss, 60000), 1); /* 90000 waits */
	assert_int_equal(rp_sources_drain(&ss, 100000), 1);
	on_thread(thread_pattern, (void *)(uintptr_t)20000);
	assert_int_equal(rp_sources_drain(&ss, UINT64_MAX), 6);
	report(&r);
	assert_int_equal(r.late, 6);
	assert_int_equal(fn(&r, "a")->self_ns, 70); /* its own track is intact */
	rp_report_free(&r);
	close_engine();
}

static pid_t child_with_open_spans(int fd, const char *keep)
{
	pid_t pid = fork();

	if (pid != 0)
		return pid;
	if (keep)
		setenv("RINGPROF_KEEP", keep, 1);
	uint32_t a = rp_intern("outer", "", NULL, 0), b = rp_intern("inner", "", NULL, 0);
	rp_emit_at(1000, RP_EV_BEGIN, 0, a, 0, 0);
	rp_emit_at(1100, RP_EV_BEGIN, 0, b, 0, 0);
	rp_emit_at(1150, RP_EV_INSTANT, 0, b, 0, 0);
	if (write(fd, "x", 1) != 1)
		_exit(1);
	pause();
	_exit(0);
}

static bool exists(const char *name)
{
	int fd = shm_open(name, O_RDONLY, 0);

	if (fd >= 0)
		close(fd);
	return fd >= 0;
}

/* SIGKILL mid-span: the open spans count as truncated at the last record's time,
 * the segment goes, and the engine takes the next producer as before. */
static void test_sources_producer_killed_mid_span(void **state)
{
	int p[2], status;
	char c, name[96];
	struct rp_report r;
	pid_t pid;

	(void)state;
	open_engine();
	assert_int_equal(pipe(p), 0);
	pid = child_with_open_spans(p[1], NULL);
	assert_int_equal(read(p[0], &c, 1), 1);
	assert_true(rp_sources_scan(&ss) >= 1);
	assert_int_equal(rp_sources_drain(&ss, UINT64_MAX), 3);
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	snprintf(name, sizeof(name), RP_WIRE_NAME_FMT ".0", getenv("RINGPROF_SESSION"), pid);
	rp_sources_drain(&ss, UINT64_MAX);
	report(&r);
	assert_int_equal(r.truncated, 2);
	assert_int_equal(fn(&r, "outer")->cum_ns, 150);
	assert_int_equal(fn(&r, "inner")->cum_ns, 50);
	for (uint32_t i = 0; i < r.n_sources; i++)
		if (r.sources[i].pid == pid)
			assert_true(r.sources[i].flags & RP_SRC_DEAD);
	assert_false(exists(name));
	rp_report_free(&r);
	/* The engine goes on with the next producer. */
	emit_pattern(5000);
	rp_sources_scan(&ss);
	assert_true(rp_sources_drain(&ss, UINT64_MAX) >= 6);
	close(p[0]);
	close(p[1]);
	close_engine();
}

static void step(int rd, int wr, char c)
{
	char got;

	if (write(wr, &c, 1) != 1 || read(rd, &got, 1) != 1)
		_exit(1);
}

/* The exit path marked the segment EXITED, then the process went on recording (other
 * threads, later atexit handlers): what it wrote until it was gone still counts. */
static void test_sources_records_after_exit_mark_kept(void **state)
{
	int up[2], down[2], status;
	char c;
	struct rp_report r;
	pid_t pid;

	(void)state;
	open_engine();
	assert_int_equal(pipe(up), 0);
	assert_int_equal(pipe(down), 0);
	pid = fork();
	if (pid == 0) {
		uint32_t late = rp_intern("late", "", NULL, 0);

		emit_pattern(0);
		step(down[0], up[1], 'a'); /* recorded: wait for the drain */
		rp_shutdown();		   /* drained: marks EXITED and unlinks */
		step(down[0], up[1], 'b'); /* wait for a drain of the marked segment */
		rp_emit_at(1000, RP_EV_BEGIN, 0, late, 0, 0);
		rp_emit_at(1500, RP_EV_END, 0, late, 0, 0);
		if (write(up[1], "c", 1) != 1)
			_exit(1);
		_exit(0);
	}
	assert_int_equal(read(up[0], &c, 1), 1);
	assert_true(rp_sources_scan(&ss) >= 1);
	assert_int_equal(rp_sources_drain(&ss, UINT64_MAX), 6);
	assert_int_equal(write(down[1], "x", 1), 1);
	assert_int_equal(read(up[0], &c, 1), 1);
	assert_int_equal(rp_sources_drain(&ss, UINT64_MAX), 0); /* marked, drained, alive */
	assert_int_equal(write(down[1], "x", 1), 1);
	assert_int_equal(read(up[0], &c, 1), 1);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_int_equal(rp_sources_drain(&ss, UINT64_MAX), 2);
	report(&r);
	assert_int_equal(fn(&r, "late")->calls, 1);
	assert_int_equal(fn(&r, "late")->cum_ns, 500);
	for (uint32_t i = 0; i < r.n_sources; i++)
		if (r.sources[i].pid == pid) {
			assert_int_equal(r.sources[i].events, 8);
			assert_int_equal(r.sources[i].flags & (RP_SRC_EXITED | RP_SRC_DEAD),
					 RP_SRC_EXITED);
		}
	rp_report_free(&r);
	for (int i = 0; i < 2; i++) {
		close(up[i]);
		close(down[i]);
	}
	close_engine();
}

/* A producer died before any engine ran: its segment is drained and removed. */
static void test_sources_stale_segment_swept(void **state)
{
	int p[2], status;
	char c, name[96];
	struct rp_report r;
	pid_t pid;

	(void)state;
	assert_int_equal(pipe(p), 0);
	pid = child_with_open_spans(p[1], "1");
	assert_int_equal(read(p[0], &c, 1), 1);
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	snprintf(name, sizeof(name), RP_WIRE_NAME_FMT ".0", getenv("RINGPROF_SESSION"), pid);
	assert_true(exists(name));
	open_engine();
	rp_sources_scan(&ss);
	rp_sources_drain(&ss, UINT64_MAX);
	report(&r);
	assert_int_equal(r.truncated, 2);
	assert_false(exists(name));
	rp_report_free(&r);
	close(p[0]);
	close(p[1]);
	close_engine();
}

/* A child floods small rings while the engine drains: events + dropped == emitted. */
static void test_sources_accounting_under_drops(void **state)
{
	const unsigned n = 2000000;
	struct rp_report r;
	struct timespec ms = { 0, 200000 };
	int status = 0;
	pid_t pid;

	(void)state;
	open_engine();
	pid = fork();
	if (pid == 0) {
		setenv("RINGPROF_RING_EVENTS", "1024", 1);
		uint32_t a = rp_intern("flood", "", NULL, 0);
		for (unsigned i = 0; i < n / 2; i++) {
			rp_begin(a);
			rp_end(a);
		}
		exit(0);
	}
	while (waitpid(pid, &status, WNOHANG) == 0) {
		rp_sources_scan(&ss);
		rp_sources_drain(&ss, UINT64_MAX);
		nanosleep(&ms, NULL);
	}
	rp_sources_scan(&ss);
	rp_sources_drain(&ss, UINT64_MAX);
	report(&r);
	uint64_t events = 0, dropped = 0;
	for (uint32_t i = 0; i < r.n_sources; i++)
		if (r.sources[i].pid == pid) {
			events += r.sources[i].events;
			dropped += r.sources[i].dropped;
		}
	print_message("    %u emitted: %llu received, %llu dropped\n", n,
		      (unsigned long long)events, (unsigned long long)dropped);
	assert_int_equal(events + dropped, n);
	rp_report_free(&r);
	close_engine();
}

static char log_lines[2048];

static void log_capture(void *ctx, const char *line)
{
	(void)ctx;
	strncat(log_lines, line, sizeof(log_lines) - strlen(log_lines) - 2);
	strcat(log_lines, "\n");
}

/* A segment that is not ours, or not a segment: refused, shown as a source row, and
 * logged with its name (issue 10, repro 9: "refused bad magic ..." named none). */
static void test_sources_refused_segments_are_shown(void **state)
{
	char bad[96], foreign[96];
	uint64_t junk[512] = { UINT64_C(0x1122334455667788) };
	struct rp_report r;
	int fd, refused = 0, expect = 1;

	(void)state;
	snprintf(bad, sizeof(bad), RP_WIRE_NAME_FMT ".0", getenv("RINGPROF_SESSION"), 999991);
	fd = shm_open(bad, O_RDWR | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, junk, sizeof(junk)), sizeof(junk));
	close(fd);
	emit_pattern(70000); /* our own, valid segment */
	snprintf(foreign, sizeof(foreign), RP_WIRE_NAME_FMT ".0", getenv("RINGPROF_SESSION"),
		 999992);
	fd = shm_open(foreign, O_RDWR | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, rp_segment_header(), 4096), 4096);
	if (fchown(fd, 65534, 65534) == 0)
		expect = 2; /* root: another uid's segment; else only the malformed one */
	close(fd);
	if (expect == 1)
		shm_unlink(foreign);
	open_engine();
	log_lines[0] = '\0';
	ss.log = log_capture;
	assert_int_equal(rp_sources_scan(&ss), 1);
	assert_int_equal(rp_sources_scan(&ss), 0); /* refused once, not retried */
	{
		char want[160];

		snprintf(want, sizeof(want), "refused %s: bad magic", bad);
		if (strstr(log_lines, want) == NULL)
			fail_msg("no \"%s\" in:\n%s", want, log_lines);
	}
	report(&r);
	for (uint32_t i = 0; i < r.n_sources; i++)
		refused += (r.sources[i].flags & RP_SRC_REFUSED) != 0;
	assert_int_equal(refused, expect);
	assert_int_equal(ss.refused, (uint64_t)expect);
	rp_report_free(&r);
	close_engine();
	shm_unlink(bad);
	shm_unlink(foreign);
}

/*
 * The restart gap from the words a previous engine left, checked (issue 20: 207 M
 * from a 64-slot ring): a snap_head ahead of c_head, or a c_head that is no consumer
 * index, counts no gap; a true gap counts in full, even past the ring's capacity.
 */
static void test_sources_restart_gap_bounded(void **state)
{
	int p[2], fd, status;
	char c, name[96];
	struct rp_report r;
	struct stat st;
	pid_t pid;

	(void)state;
	assert_int_equal(pipe(p), 0);
	pid = child_with_open_spans(p[1], NULL); /* its records on its ring 0 */
	assert_int_equal(read(p[0], &c, 1), 1);
	snprintf(name, sizeof(name), RP_WIRE_NAME_FMT ".0", getenv("RINGPROF_SESSION"), pid);
	fd = shm_open(name, O_RDWR, 0);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	struct rp_wire_header *h = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE,
					MAP_SHARED, fd, 0);
	assert_true(h != MAP_FAILED);
	close(fd);
	assert_true(h->ring_count >= 4);
	uint32_t cap = h->ring_capacity, far = 3 * cap + 5;
	struct rp_wire_ring *w = (struct rp_wire_ring *)((char *)h + h->ring_desc_offset);

	uint32_t tail = w[0].ring.p_tail;

	assert_true(tail >= 3 && tail < cap);
	/* ring 0: a previous engine read all its records, its last snapshot held all
	 * but 2: gap 2 */
	w[0].ring.c_head = tail;
	w[0].snap_head = tail - 2;
	/* ring 1: snap_head 5 ahead of c_head (stale or hostile): a resync, no gap */
	w[1].snap_head = 5;
	/* ring 2: c_head 1000 past p_tail 0, no consumer's: the drain resyncs it */
	w[2].ring.c_head = 1000;
	/* ring 3: 3 ring-fulls and 5 read since the last snapshot: all count */
	w[3].snap_head = 0u - far;
	uint64_t want_gap = 2 + far, want_resyncs = 2;

	open_engine();
	assert_true(rp_sources_scan(&ss) >= 1);
	rp_sources_drain(&ss, UINT64_MAX);
	report(&r);
	bool found = false;
	for (uint32_t i = 0; i < r.n_sources; i++)
		if (r.sources[i].pid == pid) {
			const uint64_t *an = r.sources[i].anomalies;

			print_message("    restart_gap %llu, resyncs %llu\n",
				      (unsigned long long)an[RP_ANOM_RESTART_GAP],
				      (unsigned long long)r.sources[i].resyncs);
			assert_int_equal(r.sources[i].anomalies[RP_ANOM_RESTART_GAP], want_gap);
			assert_int_equal(r.sources[i].resyncs, want_resyncs);
			assert_int_equal(r.sources[i].events, 0); /* all read before us */
			found = true;
		}
	assert_true(found);
	assert_true(ss.restart_gap >= want_gap); /* and earlier tests' engines' on ours */
	rp_report_free(&r);
	munmap(h, (size_t)st.st_size);
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	rp_sources_drain(&ss, UINT64_MAX);
	close_engine();
	shm_unlink(name);
	close(p[0]);
	close(p[1]);
}

static pid_t dead_pid(void)
{
	pid_t pid = fork();

	if (pid == 0)
		_exit(0);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	return pid;
}

/* @name made a malformed segment (junk where the header should be). */
static void junk_segment(const char *name)
{
	uint64_t junk[512] = { UINT64_C(0x1122334455667788) };
	int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, junk, sizeof(junk)), sizeof(junk));
	close(fd);
}

/* Issue 20: refused segments are removed once their producer is gone (they used to
 * stay for ever, eating /dev/shm), never while it lives; counted, and said. */
static void test_sources_refused_segments_removed_when_dead(void **state)
{
	char dead[96], live[96], foreign[96];
	const char *sess = getenv("RINGPROF_SESSION");
	pid_t gone = dead_pid(), alive = fork();
	uint64_t removed = 1;
	int fd;

	(void)state;
	if (alive == 0) {
		pause();
		_exit(0);
	}
	snprintf(dead, sizeof(dead), RP_WIRE_NAME_FMT ".0", sess, (int)gone);
	snprintf(live, sizeof(live), RP_WIRE_NAME_FMT ".0", sess, (int)alive);
	snprintf(foreign, sizeof(foreign), RP_WIRE_NAME_FMT ".1", sess, (int)gone);
	junk_segment(dead);
	junk_segment(live);
	rp_init();
	fd = shm_open(foreign, O_RDWR | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, rp_segment_header(), 4096), 4096);
	if (fchown(fd, 65534, 65534) == 0)
		removed = 2; /* root: another uid's, stale: removed too */
	close(fd);
	open_engine();
	log_lines[0] = '\0';
	ss.log = log_capture;
	rp_sources_scan(&ss);
	assert_int_equal(ss.refused_removed, removed);
	assert_false(exists(dead));
	assert_true(exists(live)); /* its producer lives: never removed */
	assert_int_equal(exists(foreign), removed == 1);
	kill(alive, SIGKILL);
	assert_int_equal(waitpid(alive, NULL, 0), alive);
	rp_sources_scan(&ss); /* looked at again: now gone */
	assert_false(exists(live));
	assert_int_equal(ss.refused_removed, removed + 1);
	{
		char want[160];

		snprintf(want, sizeof(want), "%s: refused, and its producer is gone: removed", live);
		if (strstr(log_lines, want) == NULL)
			fail_msg("no \"%s\" in:\n%s", want, log_lines);
	}
	close_engine();
	shm_unlink(foreign);
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "--prev-lost-child") == 0)
		return prev_lost_child();
	/* The default exit path is under test here, not the suite's cleanup mode. */
	unsetenv("RINGPROF_NO_ENGINE");
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sources_exact_statistics),
		cmocka_unit_test(test_sources_ring_reuse_is_a_new_track),
		cmocka_unit_test(test_sources_takeover_keeps_every_thread),
		cmocka_unit_test(test_sources_takeover_carries_prev_lost),
		cmocka_unit_test(test_sources_claim_tail_spares_the_search),
		cmocka_unit_test(test_sources_watermark_and_late),
		cmocka_unit_test(test_sources_final_drain_takes_all),
		cmocka_unit_test(test_sources_touch_reads_and_leaves_the_records),
		cmocka_unit_test(test_sources_in_place_merge_exactly),
		cmocka_unit_test(test_sources_unmerged_counts_the_backlog),
		cmocka_unit_test(test_sources_buffer_grows_round_its_wrap),
		cmocka_unit_test(test_sources_copy_held_for_a_snapshot),
		cmocka_unit_test(test_sources_two_rings_interleaved_at_random),
		cmocka_unit_test(test_sources_producer_killed_mid_span),
		cmocka_unit_test(test_sources_stale_segment_swept),
		cmocka_unit_test(test_sources_records_after_exit_mark_kept),
		cmocka_unit_test(test_sources_accounting_under_drops),
		cmocka_unit_test(test_sources_refused_segments_are_shown),
		cmocka_unit_test(test_sources_restart_gap_bounded),
		cmocka_unit_test(test_sources_refused_segments_removed_when_dead),
	};

	setenv("RINGPROF_CLOCK", "monotonic", 1);
	setenv("RINGPROF_RINGS", "8", 1);
	{
		/* Per process: a concurrent run of this test elsewhere on the machine
		 * must not see our segments, nor we its. */
		char s[32];
		const char *base = getenv("RINGPROF_SESSION");
		snprintf(s, sizeof(s), "%.18s_%d", base ? base : "t_sources", (int)getpid());
		setenv("RINGPROF_SESSION", s, 1);
	}
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	const char *own = rp_segment_path();

	if (own != NULL) /* our own segment: its records are read by nobody after us */
		shm_unlink(own);
	return rc;
}
