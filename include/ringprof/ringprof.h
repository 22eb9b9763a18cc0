/* SPDX-License-Identifier: MIT */
/*
 * ringprof producer API.
 *
 * Instrumented code interns a name once (rp_intern) and then records spans with
 * rp_begin/rp_end, async spans with rp_async_begin/rp_async_end, and points with
 * rp_instant/rp_counter/rp_link. Each thread writes into its own single-producer
 * ring in the process's shared-memory segment (see wire.h); one consumer process,
 * the ringprof engine, drains every ring.
 *
 * The recording calls are the fast path and live here as static inline: a
 * thread-local load, one test of the room left before the next look at the consumer
 * index (which also sends the rare cases out of line: rp_emit_full), a clock read,
 * one 32-byte record store and a release store of the producer index. They never
 * block, allocate, take a lock, make a syscall or touch errno. A full ring drops the
 * record and counts it. With RINGPROF=0 every call returns after a few loads and
 * stores. Every call is safe in a signal handler (rp_enter) and keeps a private
 * shadow of the open spans that heals the nesting after a longjmp (rp_span_push).
 *
 * The slow paths (creating the segment on the first event or at rp_init, claiming
 * a ring for a new thread, a full ring, interning, waking a sleeping consumer) are
 * out of line in producers/ringprof.c.
 */
#ifndef RINGPROF_RINGPROF_H
#define RINGPROF_RINGPROF_H

#include <stdbool.h>
#include <stdint.h>

#include <ringprof/wire.h>

/* rdtsc through the compiler builtin: no intrinsics header for the user. Defining
 * RP_NO_RDTSC compiles the other targets' path (the out-of-line clock) on x86 too. */
#if (defined(__x86_64__) || defined(__i386__)) && !defined(RP_NO_RDTSC)
#define RP_HAVE_RDTSC 1
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The inline functions below are C (compound literals, designated initializers that
 * leave fields zero), which g++ and clang++ take as an extension: keep their
 * warnings about it out of the user's C++ build. Popped at the end of this file. */
#ifdef __cplusplus
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wpedantic"
#pragma GCC diagnostic ignored "-Wpragmas"
#pragma GCC diagnostic ignored "-Wc++20-extensions"
#endif

#ifndef RP_API
#define RP_API __attribute__((visibility("default")))
#endif

/* The fast path: inlined whatever the compiler's size heuristics say, so that the
 * constant arguments of each call site fold (and a scope's cleanup is no call).
 * Never instrumented: code built with -finstrument-functions (ringprof-auto) gets
 * hook calls for the functions inlined into it too, and a hook called from inside a
 * recording call is refused (counted as reentrant). */
#define RP_NO_INSTR	__attribute__((no_instrument_function))
#define RP_INLINE	static inline __attribute__((always_inline)) RP_NO_INSTR

#define RP_LIKELY(x)	__builtin_expect(!!(x), 1)
#define RP_UNLIKELY(x)	__builtin_expect(!!(x), 0)

/*
 * Per-thread producer state. Private to the library and this header's inline
 * functions; the layout is not part of the ABI with the consumer. Every value the
 * fast path uses to address memory (slots, mask, tail) is private to this thread,
 * never re-read from shared memory, so a consumer cannot steer a producer's stores.
 */
struct rp_thread {
	struct rp_event *slots;		/* ring records; NULL until this thread attached */
	struct rp_wire_ring *ring;	/* descriptor of the claimed ring */
	struct rp_wire_header *hdr;
	uint32_t tail;			/* next slot to write (= ring p_tail) */
	uint32_t head;			/* c_head as last read: a lower bound */
	uint32_t mask;			/* ring_capacity - 1 */
	uint8_t off;			/* disabled (RINGPROF=0): record nothing */
	uint8_t tsc;			/* the clock is rdtsc */
	uint16_t noring_retry;		/* events to drop before trying a claim again */
	uint8_t exited;			/* ring retired at thread exit: count, drop */
	uint8_t lost;			/* RP_SPAN_AFTER_DROP once a record was lost,
					   until the next span record carries it */
	uint16_t depth;			/* open spans: rp_begin minus rp_end, counted
					   whether recorded or not; modulo 2^16 */
	/* Since wire 1.2 (docs/producer.md, "Signals" and "Self-healing nesting"). */
	uint16_t scap;			/* shadow levels this thread may use; 0: none */
	uint8_t nofine;			/* fine names are plain spans here for good
					   (rp_begin_fine: threshold 0, no memory) */
	uint8_t imp;			/* nonzero: calls made now are import-time
					   (Python): their summaries say so */
	struct rp_shadow *shadow;	/* its ring's slice of private memory */
	uintptr_t ftop;			/* the innermost known frame among the open
					   spans; UINTPTR_MAX: none */
	uintptr_t busy;			/* inside a recording call (its stack pointer;
					   0: not): a signal handler that records now
					   is counted (reentrant), not run */
	/* Summaries of short calls (docs/summaries.md); NULL: off for this thread. */
	struct rp_sum *sum;		/* its ring's slice of private memory */
	uint16_t spend;			/* levels below are written; from here up to
					   min(depth, scap) their BEGINs are pending */
	/* Last, in what was padding: the members above keep their offsets. */
	uint32_t lim;			/* the fast path writes while tail - head < lim
					   (<= mask); 0: every call takes rp_emit_slow()
					   (rp_emit_full) */
	uint32_t lim_span;		/* lim for BEGIN and END records: 0 also while
					   a drop mark is due (t->lost) */
	/* The fast path's own copy of lim, as indices (after the members above: code
	 * built with an older header keeps its fast path on lim and lim_span, which
	 * the library still sets). It writes while (int32_t)(tail - stop) < 0, never
	 * past the end of the ring's current lap, so that its slot is base + tail
	 * records; stop = tail (or any index behind it): every call takes
	 * rp_emit_slow(), which sets them again. */
	uint32_t stop;
	uint32_t stop_span;		/* stop for BEGIN and END records (lim_span) */
	uintptr_t base;			/* slots - the lap's first index, in bytes */
	/* x86, a thread whose clock is not the TSC (the inline path only reads the
	 * TSC): stop and stop_span stay at tail, these are their values, for the
	 * same records stamped out of line. At tail for every other thread. */
	uint32_t mstop;
	uint32_t mstop_span;
};

/*
 * The shadow of one open span level: its name and the thread's ftop before it
 * opened. Private memory of the library (never shared, never TLS), one slice of
 * RP_SHADOW levels per ring; deeper levels are counted in depth, not shadowed.
 */
struct rp_shadow {
	uint32_t name;			/* RP_SHADOW_UNKNOWN: opened before the thread had
					   its slice (a ring claimed late) */
	uint32_t obj;			/* identity of the opener in its frame (a scope's
					   address, a ringprof-auto hook's return
					   address: low bits | 1); 0: none */
	uintptr_t below;
};

#define RP_SHADOW		128u
#define RP_SHADOW_UNKNOWN	UINT32_MAX

/*
 * Summaries (docs/summaries.md). A level's summary state, beside its shadow: when it
 * opened, its completed children's time, and its node in the thread's summary table
 * (where its call folds if short; its children's nodes hang from it).
 */
struct rp_sum_level {
	uint64_t start;			/* ticks */
	uint64_t child;			/* ticks of completed children, summarized or not */
	uint32_t node;			/* RP_SUM_NONE: not looked up yet */
	uint32_t noself;		/* its start is not its BEGIN's (a level
					   opened before the thread had its ring) */
};

/* A node: the calls of one name in one calling context since the last flush. */
struct rp_sum_node {
	uint64_t count, total, self, min, max;	/* ticks */
	uint32_t name;
	uint32_t parent;		/* node index; RP_SUM_NONE: a root anchor */
	uint32_t kid, sib;		/* first child, next sibling; RP_SUM_NONE */
	uint32_t imp;			/* made at import time (rp_thread.imp) */
	uint16_t level;			/* root anchor: the open level it stands for */
	uint8_t dead;			/* written or discarded: not in the table */
	uint8_t mark;			/* in the subtree being flushed */
};

#define RP_SUM_NONE		UINT32_MAX
#define RP_SUM_NODES		1024u	/* nodes per thread (docs/summaries.md) */

/*
 * A node's durations (docs/summaries.md), for the percentiles of folded calls: up to
 * RP_SUM_HIST buckets of a log-linear scale in ticks, exact below 2^(RP_SUM_HIST_BITS
 * + 1) and 2^RP_SUM_HIST_BITS buckets per binade above (rp_sum_bucket()). A call that
 * finds no bucket free halves the node's resolution (`shift` once more, merging
 * neighbours): never a count lost, the resolution is what gives.
 */
#define RP_SUM_HIST		8u
#define RP_SUM_HIST_BITS	6u
struct rp_sum_hist {
	uint32_t cnt[RP_SUM_HIST];
	uint16_t idx[RP_SUM_HIST];	/* rp_sum_bucket() >> shift */
	uint8_t n, shift;
	uint8_t pad[6];
};

/* A thread's summary state; private memory, one per ring (producers/summary.c). */
struct rp_sum {
	uint64_t thr;			/* the threshold, ticks: shorter calls fold */
	uint64_t next_flush;		/* ticks: a fold at or after it flushes all */
	struct rp_sum_level lv[RP_SHADOW];
	uint64_t period;		/* ticks between periodic flushes */
	uint64_t thr_max;		/* the cap of the threshold's doubling, ticks */
	uint64_t thr_ns;		/* thr in ns, as published */
	uint32_t used;			/* nodes allocated (bump; dead ones inside) */
	uint32_t top;			/* root anchor of the track's root; RP_SUM_NONE */
	struct rp_sum_node node[RP_SUM_NODES];
	struct rp_sum_hist hist[RP_SUM_NODES];	/* node i's: hist[i] (last, so that
						   the members above keep their place) */
};

/* A producer wakes a sleeping consumer when its ring is this fraction full (1/8):
 * early enough that the rest of the ring covers the consumer's wake-up latency
 * (docs/live.md, the sizing rule). */
#define RP_DOORBELL_FRACTION 8u

RP_API extern __thread struct rp_thread rp_thread_state
	__attribute__((tls_model("initial-exec")));

/* RINGPROF_SUMMARY_NS when the environment has none: 0 (summaries off) unless a
 * front end set it before the library starts (ringprof-auto: docs/summaries.md). */
RP_API extern uint64_t rp_summary_default_ns;

/* The threshold of fine names (rp_begin_fine) when RINGPROF_SUMMARY_NS is unset and
 * no front end set a default: ringprof-auto's, 10 us (docs/summaries.md). */
#define RP_FINE_DEFAULT_NS	10000u

/* Out-of-line slow paths used by the inline functions below. */
RP_API void rp_emit_slow(struct rp_thread *t, bool now, uint64_t ts, uint8_t kind,
			 uint8_t flags, uint32_t name, uint64_t track, uint64_t arg, int heal,
			 uintptr_t frame, uintptr_t probe, uint32_t obj);
RP_API bool rp_thread_attach(struct rp_thread *t);
RP_API bool rp_ring_refresh(struct rp_thread *t);
RP_API void rp_doorbell_check(struct rp_thread *t);
RP_API bool rp_reentrant(struct rp_thread *t, uintptr_t sp);
RP_API void rp_heal_frame(struct rp_thread *t, uintptr_t probe, uint32_t obj);
RP_API uint16_t rp_heal_name(struct rp_thread *t, uint32_t name);
RP_API void rp_sum_record(struct rp_thread *t, struct rp_event *e, bool now, uint64_t ts,
			  uint8_t kind, uint8_t flags, uint32_t name, uint64_t track,
			  uint64_t arg, int heal, uintptr_t frame, uintptr_t probe, uint32_t obj);
RP_API uint32_t rp_sum_resolve(struct rp_thread *t, uint16_t d);
RP_API void rp_sum_begin_slow(struct rp_thread *t, uint32_t name, uintptr_t frame,
			      uint32_t obj);
RP_API void rp_sum_end_slow(struct rp_thread *t, uint32_t name, uintptr_t probe, uint64_t now);
RP_API void rp_sum_flush_all(struct rp_thread *t, uint64_t now);
RP_API void rp_sum_hist_full(struct rp_sum_hist *h, uint64_t ticks);
RP_API bool rp_sum_fine_attach(struct rp_thread *t);

/**
 * rp_init() - create this process's segment now rather than on the first event.
 *
 * Reads the environment (RINGPROF, RINGPROF_SESSION, RINGPROF_RINGS,
 * RINGPROF_RING_EVENTS, RINGPROF_NAMES, RINGPROF_NAME_BYTES, RINGPROF_CLOCK,
 * RINGPROF_CALIBRATE_US, RINGPROF_EXIT_WAIT_MS, RINGPROF_KEEP, RINGPROF_KEEP_MAX,
 * RINGPROF_NO_ENGINE;
 * see docs/environment.md and docs/operations.md).
 * Idempotent and thread-safe. On failure the library turns itself off (every call
 * becomes a no-op) and says why once on stderr; the host program goes on.
 *
 * @return 0 when recording, 1 when off (RINGPROF=0, or an earlier failure to create
 *	   the segment), -errno on the failure to create the segment itself.
 */
RP_API int rp_init(void);

/**
 * rp_shutdown() - the exit path; registered with atexit() by rp_init().
 *
 * Marks the segment exited, wakes a sleeping consumer, waits (at most
 * RINGPROF_EXIT_WAIT_MS) for a running engine to drain every ring, then unlinks the
 * segment's name if nothing in it is still needed: no record unread, and no engine
 * still to write a snapshot of what it read (docs/operations.md, the exit path);
 * else the engine removes it. RINGPROF_KEEP=1 keeps it; RINGPROF_NO_ENGINE=discard
 * unlinks it when no engine runs, unread records and all. Kept with no engine
 * running, it holds only the pages of unread records, and at most RINGPROF_KEEP_MAX
 * segments of the session stay (the oldest beyond are removed). The mapping stays, so
 * threads that still record during exit write harmlessly. Idempotent.
 */
RP_API void rp_shutdown(void);

/**
 * rp_intern() - the id of a name, interning it on first use.
 * @name:     span name; NULL or "" is treated as "?"
 * @category: operation type (LLM, TOOL, FUNCTION, ...); NULL means ""
 * @file:     source file, or NULL
 * @line:     source line, or 0
 *
 * The same (name, category, file, line) always gives the same id within a process
 * and its fork children. Thread-safe; takes a lock, so call it once and keep the id.
 *
 * @return an id >= 1, or RP_NAME_OVERFLOW (0) when the table is full or the library
 *	   is off. To tell them apart: rp_segment_path() is NULL when off; when it is
 *	   not, the table was full (counted in the segment's names_dropped). Events
 *	   named 0 are still recorded, as "[overflow]".
 */
RP_API uint32_t rp_intern(const char *name, const char *category, const char *file,
			  uint32_t line);

/**
 * rp_segment_path() - where this process's segment lives.
 * @return "/ringprof.<session>.<pid>.<n>" (for shm_open), or NULL before rp_init()
 *	   or when off. Owned by the library.
 */
RP_API const char *rp_segment_path(void);

/**
 * rp_segment_header() - this process's segment, as mapped here: for an in-process
 * consumer (tests, benchmarks) that reads the rings at the producer's own addresses.
 * @return NULL before rp_init() or when off. The mapping lives until exit.
 */
RP_API struct rp_wire_header *rp_segment_header(void);

/**
 * rp_dropped() - events this process could not record so far: full rings, threads
 * that found no free ring or recorded after their ring was retired at thread exit,
 * and records of signal handlers that interrupted a recording call (reentrant).
 * Events + rp_dropped() = recording calls made (while the library is on).
 */
RP_API uint64_t rp_dropped(void);

/**
 * rp_clock() - the producer's clock description (source, mult/shift, reference).
 * @return NULL before rp_init() or when off. Owned by the library.
 */
RP_API const struct rp_wire_clock *rp_clock(void);

/* The clock events are stamped with (enum rp_clock_source); 0 before rp_init(). */
RP_API extern uint32_t rp_clock_source;

/* CLOCK_MONOTONIC in ns; out of line so this header needs no POSIX feature macros. */
RP_API uint64_t rp_clock_monotonic(void);

/* The TSC read out of line: for code built without the inline rdtsc (RP_NO_RDTSC)
 * while the library's clock is the TSC; on other targets the library never is. */
RP_API uint64_t rp_clock_tsc(void);

RP_INLINE uint64_t rp_clock_read(bool tsc)
{
#ifdef RP_HAVE_RDTSC
	if (RP_LIKELY(tsc))
		return __builtin_ia32_rdtsc();
#else
	if (RP_UNLIKELY(tsc))
		return rp_clock_tsc();
#endif
	return rp_clock_monotonic();
}

/** rp_now() - the current time in the ticks events carry (initialises if needed). */
static inline RP_NO_INSTR uint64_t rp_now(void)
{
	if (RP_UNLIKELY(rp_clock_source == 0))
		rp_init();
	return rp_clock_read(rp_clock_source == RP_CLOCK_TSC);
}

/**
 * rp_ticks_to_ns() - convert ticks of @c to CLOCK_MONOTONIC nanoseconds.
 */
static inline RP_NO_INSTR uint64_t rp_ticks_to_ns(const struct rp_wire_clock *c, uint64_t ticks)
{
	/* The signed 128-bit (ticks - ref_ticks) * mult >> shift, floored, computed
	 * unsigned: one 64x64 multiply, and a shift the compiler knows is below 64 (the
	 * wire says shift <= 63; readers check it) needs no wide-shift fix-up. Ticks
	 * before the reference (rare) floor the negative quotient: minus the ceiling
	 * of the magnitude's (below 2^127: no overflow). */
	uint64_t d = ticks - c->ref_ticks;
	unsigned int s = c->shift & 63u;

	if (RP_LIKELY((int64_t)d >= 0))
		return c->ref_ns + (uint64_t)((__extension__(unsigned __int128)d * c->mult) >> s);
	d = -d;
	return c->ref_ns - (uint64_t)(((__extension__(unsigned __int128)d * c->mult) +
				       ((UINT64_C(1) << s) - 1u)) >> s);
}

/**
 * rp_ticks_len_ns() - a length of @ticks of @c in nanoseconds (a self time, a
 * summary's total: wire.h).
 */
static inline RP_NO_INSTR uint64_t rp_ticks_len_ns(const struct rp_wire_clock *c, uint64_t ticks)
{
	return (uint64_t)(((__extension__(unsigned __int128)ticks) * c->mult) >> (c->shift & 63u));
}

/*
 * The slot for the next record, or NULL when the event is not recorded (off, no
 * ring, ring full: each counted where it must be).
 */
RP_INLINE struct rp_event *rp_slot(struct rp_thread *t)
{
	if (RP_UNLIKELY(t->slots == NULL)) {
		if (t->off || !rp_thread_attach(t))
			return NULL;
	}
	/* tail - head is the fill as far as we know; head only grows, so this may
	 * call a ring full that is not, never the other way round: then re-read the
	 * consumer index (rp_ring_refresh is false, and counts a drop, if truly full). */
	if (RP_UNLIKELY(t->tail - t->head >= t->mask) && !rp_ring_refresh(t))
		return NULL;
	return &t->slots[t->tail & t->mask];
}

/* Every recording call takes rp_emit_slow() until it sets the limits again (ring_limit
 * in producers/ringprof.c): the library's way to send the fast path out of line, and
 * a test's that moves head or tail behind its back. */
RP_INLINE void rp_fast_off(struct rp_thread *t)
{
	t->lim = t->lim_span = 0;
	t->stop = t->stop_span = t->mstop = t->mstop_span = t->tail;
}

RP_INLINE void rp_commit(struct rp_thread *t)
{
	uint32_t tail = t->tail + 1;

	/* The private index first: a call abandoned between the two (a signal handler
	 * that left it by siglongjmp: rp_reentrant) leaves its record written, and
	 * the next commit publishes it. */
	t->tail = tail;
	/* A record written out of the fast path keeps the fast path out (stop = tail)
	 * until ring_limit() sets stop again: the summaries' records (producers/
	 * summary.c) move tail with no ring_limit() after them. */
	rp_fast_off(t);
	/* Release: the record's stores before the index that publishes it; pairs with
	 * the consumer's acquire load of p_tail. A plain mov on x86. */
	__atomic_store_n(&t->ring->ring.p_tail, tail, __ATOMIC_RELEASE);
	/* A plain load, no fence: a doorbell missed by this race costs the consumer
	 * at most one of its timed waits, never an event. */
	if (RP_UNLIKELY(__atomic_load_n(&t->hdr->consumer_sleeping, __ATOMIC_RELAXED)) &&
	    tail - t->head >= (t->mask + 1) / RP_DOORBELL_FRACTION)
		rp_doorbell_check(t);
}

/*
 * The depth a BEGIN or END record carries, and the thread's depth after it: BEGIN
 * carries the depth of the frame it opens, END that of the frame it closes. Counted
 * whether or not the record is written (a reader re-aligns its stack with it after a
 * drop), modulo 2^16: more ENDs than BEGINs read as depths above RP_DEPTH_MAX, which
 * a reader does not trust, and the count comes back by itself.
 *
 * The shadow (levels below t->scap) heals the count after an unbalanced exit
 * (longjmp): an END whose name is not the top one pops down to that name's level
 * (rp_heal_name), as the engine's stack does, and the END carries the healed depth;
 * an END whose name is not open at all leaves the depth alone. @frame, when not 0,
 * is the opening function's frame (its CFA): the innermost known one is t->ftop.
 */
RP_INLINE uint16_t rp_span_push(struct rp_thread *t, uint32_t name, uintptr_t frame,
				uint32_t obj)
{
	uint16_t d = t->depth;

	if (RP_LIKELY(d < t->scap)) {
		struct rp_shadow *sh = &t->shadow[d];
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
		/* name and obj in one store (the compiler makes two of the struct's) */
		uint64_t key = name | (uint64_t)obj << 32;

		__builtin_memcpy(sh, &key, sizeof(key));
#else
		sh->name = name;
		sh->obj = obj;
#endif
		sh->below = t->ftop;
		/* min(): a frame rp_heal_frame() did not trust (not on this thread's
		 * stack) never makes ftop shallower. */
		if (frame != 0 && frame < t->ftop)
			t->ftop = frame;
	}
	t->depth = (uint16_t)(d + 1);
	return d;
}

RP_INLINE uint16_t rp_span_pop(struct rp_thread *t, uint32_t name)
{
	uint16_t n = t->depth, d = (uint16_t)(n - 1);

	if (RP_LIKELY(d < t->scap)) {
		/* Level d addressed as n levels less one: n is zero-extended as loaded,
		 * d would be extended again (gcc: an instruction an END). */
		uintptr_t lv = (uintptr_t)t->shadow + (uintptr_t)n * sizeof(struct rp_shadow) -
			       sizeof(struct rp_shadow);

		if (RP_UNLIKELY(*(const uint32_t *)(lv + __builtin_offsetof(struct rp_shadow,
									  name)) != name))
			return rp_heal_name(t, name);
		t->ftop = *(const uintptr_t *)(lv + __builtin_offsetof(struct rp_shadow, below));
	}
	t->depth = d;
	return d;
}

/* The stack pointer here, in the caller's frame once inlined (not a frame pointer:
 * nothing forces one on the caller). */
RP_INLINE uintptr_t rp_stack_pointer(void)
{
	uintptr_t sp;

#if defined(__x86_64__)
	__asm__("movq %%rsp, %0" : "=r"(sp));
#elif defined(__aarch64__)
	__asm__("mov %0, sp" : "=r"(sp));
#else
	sp = (uintptr_t)__builtin_frame_address(0);
#endif
	return sp;
}

/*
 * Async-signal safety. A recording call sets t->busy (to its stack pointer) for its
 * whole run (slow paths included) and clears it after its last store; a signal
 * handler that records on this thread meanwhile finds it set and only counts its
 * record (the ring's `reentrant`), so the ring, the indices, the depth and the
 * shadow are never seen half-updated nor changed under the interrupted call. Same
 * thread only: compiler barriers suffice, no instruction. A handler runs below the
 * interrupted call's stack pointer; a call that finds busy set at or below its own
 * (on the thread's stack) follows a handler that left the holder by siglongjmp, and
 * takes over (rp_reentrant).
 */
RP_INLINE bool rp_enter(struct rp_thread *t)
{
#if defined(__x86_64__) && defined(__GCC_ASM_FLAG_OUTPUTS__)
	/* The same loads and stores in fewer instructions: the test is a compare
	 * with memory, the set a store of %rsp itself (an atomic load or store is
	 * one instruction too, but the compiler folds neither into another). Each
	 * is one instruction, so a handler sees busy before or after, never torn. */
	bool held;

	__asm__ __volatile__("cmpq $0, %1" : "=@ccne"(held) : "m"(t->busy));
	if (RP_UNLIKELY(held) && !rp_reentrant(t, rp_stack_pointer()))
		return false;
	__asm__ __volatile__("movq %%rsp, %0" : "=m"(t->busy));
#else
	uintptr_t sp = rp_stack_pointer();

	if (RP_UNLIKELY(__atomic_load_n(&t->busy, __ATOMIC_RELAXED) != 0) &&
	    !rp_reentrant(t, sp))
		return false;
	__atomic_store_n(&t->busy, sp, __ATOMIC_RELAXED);
#endif
	/* busy is set before any store of this call to the thread state or the ring:
	 * a handler that runs after it sees it; one that runs before finds it clear
	 * and the state whole. */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	return true;
}

RP_INLINE void rp_leave(struct rp_thread *t)
{
	/* Every store of this call (record, indices, depth, shadow) before busy is
	 * cleared: a handler that finds it clear finds them done. */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	__atomic_store_n(&t->busy, 0, __ATOMIC_RELAXED);
}

/* Fills the record; span records get their depth and, the first after a drop, the
 * mark. @kind is a constant at every inlined call site, so the test folds away. */
RP_INLINE void rp_record(struct rp_thread *t, struct rp_event *e, uint64_t ts, uint8_t kind,
			 uint8_t flags, uint32_t name, uint64_t track, uint64_t arg,
			 uint16_t depth)
{
	if (kind == RP_EV_BEGIN || kind == RP_EV_END) {
		flags = (uint8_t)((flags & ~(RP_SPAN_DEPTH | RP_SPAN_AFTER_DROP)) | RP_SPAN_DEPTH |
				  t->lost);
		t->lost = 0;
	}
	*e = (struct rp_event){ .ts = ts, .name = name, .kind = kind, .flags = flags,
				.depth = depth, .track = track, .arg = arg };
	rp_commit(t);
}

/* How a span record heals by frame (docs/producer.md): not at all (rp_begin, rp_end:
 * frame unknown), or as a scope or a ringprof-auto hook: levels strictly deeper than
 * @probe are popped, and at a BEGIN the level opened by the very same opener (@obj)
 * at @probe's frame: that activation is gone. */
enum { RP_HEAL_NONE, RP_HEAL_FRAME };

/* A BEGIN from frame @probe finds a level to pop: one of a deeper frame, or the top
 * one at this frame made by this very opener @obj (ringprof.h, rp_begin_frame). The
 * second test runs only for a scope inside another scope of its function. */
RP_INLINE bool rp_left_frame(const struct rp_thread *t, uintptr_t probe, uint32_t obj)
{
	uint16_t d = (uint16_t)(t->depth - 1);

	if (RP_LIKELY(t->ftop > probe))
		return false;
	return t->ftop < probe || (d < t->scap && t->shadow[d].obj == obj);
}

/* The shadow's push or pop of a span record, after healing by frame: the depth the
 * record carries (rp_span_push). Shared by the fast path and rp_emit_slow(). */
RP_INLINE uint16_t rp_span_step(struct rp_thread *t, uint8_t kind, uint32_t name, int heal,
				uintptr_t frame, uintptr_t probe, uint32_t obj)
{
	if (heal != RP_HEAL_NONE &&
	    RP_UNLIKELY(kind == RP_EV_BEGIN ? rp_left_frame(t, probe, obj) : t->ftop < probe))
		rp_heal_frame(t, probe, kind == RP_EV_BEGIN ? obj : 0);
	return kind == RP_EV_BEGIN ? rp_span_push(t, name, frame, obj) : rp_span_pop(t, name);
}

/*
 * The one recording path. @now: stamp with the clock (else @ts). @frame: the frame
 * a BEGIN opens in (stored); @probe: frames strictly below it are left (levels
 * opened there are popped first). Constants at every inlined call site: the tests
 * on @kind, @now and @heal fold away (always inlined: the compiler would otherwise
 * keep one generic out-of-line copy for a scope's cleanup).
 *
 * One test sends every case but the common one out of line: t->stop is tail while the
 * thread has no ring or has summaries on, t->stop_span (span records') also while it
 * owes a drop mark, so that the fast path needs no test of its own for them (other
 * records do not carry the mark); otherwise it is the index (head as last read +
 * lim) up to which the ring may fill before rp_emit_slow() looks again (the ring
 * full, the doorbell's point), at most mask past head, so that a slot written here
 * is never one the consumer still reads, and never past the lap's end.
 */
RP_INLINE void
rp_emit_full(bool now, uint64_t ts, uint8_t kind, uint8_t flags, uint32_t name, uint64_t track,
	     uint64_t arg, int heal, uintptr_t frame, uintptr_t probe, uint32_t obj)
{
	struct rp_thread *t = &rp_thread_state;
	bool span = kind == RP_EV_BEGIN || kind == RP_EV_END;
#if defined(RP_HAVE_RDTSC)
	bool mono = false;	/* stamped with the library's clock */
#endif
	struct rp_event *e;
	uint32_t tail, next;

	if (!rp_enter(t))
		return;
	tail = t->tail;
	if (RP_UNLIKELY((int32_t)(tail - (span ? t->stop_span : t->stop)) >= 0)) {
		if (t->off) { /* RINGPROF=0: nothing more to do */
			rp_leave(t);
			return;
		}
#if defined(RP_HAVE_RDTSC)
		/* The stamp below is the TSC's. A thread with another clock has its stop
		 * kept at tail and its limits in mstop (ring_limit; every other thread
		 * has mstop at tail): its records are written below, stamped out of
		 * line. */
		if ((int32_t)(tail - (span ? t->mstop_span : t->mstop)) < 0) {
			mono = true;
			goto record;
		}
#endif
		rp_emit_slow(t, now, ts, kind, flags, name, track, arg, heal, frame, probe,
			     obj);
		rp_leave(t);
		return;
	}
#if defined(RP_HAVE_RDTSC)
record:
#endif
	/* Where tail is in the lap ring_limit() saw (stop is not past its end). The next
	 * index is taken first: the slot's shift then consumes tail's register (gcc
	 * copied it to keep tail for the end). */
	next = tail + 1;
	e = (struct rp_event *)(t->base + (uintptr_t)tail * sizeof(struct rp_event));
#if defined(RP_HAVE_RDTSC)
	/* Not its halves stored apart (one instruction fewer): bench_producer
	 * measured that 1% slower than this join (docs/performance.md). */
	e->ts = !now ? ts : RP_UNLIKELY(mono) ? rp_clock_monotonic() : __builtin_ia32_rdtsc();
#else
	e->ts = now ? rp_clock_read(t->tsc) : ts;
#endif
	if (span) {
		e->depth = rp_span_step(t, kind, name, heal, frame, probe, obj);
		/* No drop mark due here (t->stop_span would be tail). */
		flags = (uint8_t)((flags & ~RP_SPAN_AFTER_DROP) | RP_SPAN_DEPTH);
	} else {
		e->depth = 0;
	}
	e->name = name;
	e->kind = kind;
	e->flags = flags;
	e->track = track;
	e->arg = arg;
	/* As rp_commit(), with the index still in a register, and no doorbell test:
	 * rp_emit_slow() makes it at the doorbell's point (t->lim). */
	t->tail = next;
	__atomic_store_n(&t->ring->ring.p_tail, next, __ATOMIC_RELEASE);
	rp_leave(t);
}

/*
 * Summarized spans (docs/summaries.md): the entry points of ringprof-auto's hooks,
 * with the healing of rp_begin_frame()/rp_end_frame(). A BEGIN writes nothing: it
 * pushes a level. An END of a level still pending whose call lasted less than the
 * threshold folds the call into the level's node; anything else (a long call, a
 * level written already, a node to make, healing, a periodic flush) takes the slow
 * path in producers/summary.c, which writes the pending BEGINs first. With
 * summaries off for the thread (t->sum NULL) both are rp_emit_full().
 */
RP_INLINE void rp_sum_begin(uint32_t name, uintptr_t frame, uint32_t obj)
{
	struct rp_thread *t = &rp_thread_state;
	struct rp_sum *s = t->sum;
	uint16_t d;

	if (RP_UNLIKELY(s == NULL)) {
		rp_emit_full(true, 0, RP_EV_BEGIN, 0, name, 0, 0, RP_HEAL_FRAME, frame, frame,
			     obj);
		return;
	}
	if (!rp_enter(t))
		return;
	d = t->depth;
	if (RP_LIKELY(d < t->scap && !rp_left_frame(t, frame, obj))) {
		rp_span_push(t, name, frame, obj);
		s->lv[d] = (struct rp_sum_level){ .start = rp_clock_read(t->tsc),
						  .node = RP_SUM_NONE };
		if (d == t->spend) /* the oldest pending BEGIN: merges wait for it */
			__atomic_store_n(&t->ring->pending_ticks, s->lv[d].start,
					 __ATOMIC_RELAXED);
	} else {
		rp_sum_begin_slow(t, name, frame, obj);
	}
	rp_leave(t);
}

/* The bucket of a call of @ticks at full resolution: the ticks themselves below
 * 2^(RP_SUM_HIST_BITS + 1), then 2^RP_SUM_HIST_BITS buckets per binade (the binade's
 * rank and the RP_SUM_HIST_BITS bits after the leading one). */
RP_INLINE uint32_t rp_sum_bucket(uint64_t ticks)
{
	uint32_t e;

	if (ticks < (UINT64_C(2) << RP_SUM_HIST_BITS))
		return (uint32_t)ticks;
	e = 63u - (uint32_t)__builtin_clzll(ticks); /* > RP_SUM_HIST_BITS */
	return (e - RP_SUM_HIST_BITS + 1u) << RP_SUM_HIST_BITS |
	       ((uint32_t)(ticks >> (e - RP_SUM_HIST_BITS)) & ((1u << RP_SUM_HIST_BITS) - 1u));
}

/* One call of @ticks into a node's histogram; a new bucket with none free takes
 * the slow path (coarser). */
RP_INLINE void rp_sum_hist_add(struct rp_sum_hist *h, uint64_t ticks)
{
	uint32_t b = rp_sum_bucket(ticks) >> h->shift;

	for (uint32_t i = 0; i < h->n; i++)
		if (h->idx[i] == b) {
			h->cnt[i]++;
			return;
		}
	if (RP_LIKELY(h->n < RP_SUM_HIST)) {
		h->idx[h->n] = (uint16_t)b;
		h->cnt[h->n++] = 1;
		return;
	}
	rp_sum_hist_full(h, ticks);
}

RP_INLINE void rp_sum_end(uint32_t name, uintptr_t probe)
{
	struct rp_thread *t = &rp_thread_state;
	struct rp_sum *s = t->sum;
	uint64_t now, dur;
	uint16_t d;

	if (RP_UNLIKELY(s == NULL)) {
		/* by name only: see rp_sum_end_slow() */
		rp_emit_full(true, 0, RP_EV_END, 0, name, 0, 0, RP_HEAL_NONE, 0, probe, 0);
		return;
	}
	if (!rp_enter(t))
		return;
	now = rp_clock_read(t->tsc);
	d = (uint16_t)(t->depth - 1);
	/* An END of the top level's name closes it, whatever its frame says: gcc calls
	 * the exit hook by a tail jump, from the function's caller's frame. */
	if (RP_LIKELY(d < t->scap && d >= t->spend && t->shadow[d].name == name)) {
		struct rp_sum_level *lv = &s->lv[d];
		uint32_t n = lv->node;

		dur = now - lv->start;
		if (RP_LIKELY(dur < s->thr) && now < s->next_flush &&
		    (n != RP_SUM_NONE || (n = rp_sum_resolve(t, d)) != RP_SUM_NONE)) {
			struct rp_sum_node *x = &s->node[n];

			x->count++;
			x->total += dur;
			x->self += dur - lv->child;
			if (dur < x->min)
				x->min = dur;
			if (dur > x->max)
				x->max = dur;
			rp_sum_hist_add(&s->hist[n], dur);
			if (d > 0)
				s->lv[d - 1].child += dur;
			if (d == t->spend) /* no BEGIN pending any more */
				__atomic_store_n(&t->ring->pending_ticks, 0, __ATOMIC_RELAXED);
			t->ftop = t->shadow[d].below;
			t->depth = d;
			rp_leave(t);
			return;
		}
	}
	rp_sum_end_slow(t, name, probe, now);
	rp_leave(t);
}

/*
 * Fine-grained names (docs/summaries.md, "The C API"): a span opened with
 * rp_begin_fine() that lasts less than the fine threshold (RINGPROF_SUMMARY_NS; unset,
 * RP_FINE_DEFAULT_NS) folds into its thread's summaries, as ringprof-auto's calls do;
 * a longer one is an ordinary span. The thread's first fine BEGIN turns summaries on
 * for it (rp_sum_fine_attach); from then on its other records take the summaries'
 * path too. A thread that never begins a fine name keeps the plain path as it is.
 * With the threshold 0 (or no memory for summaries) they are rp_begin()/rp_end().
 */
RP_INLINE bool rp_fine_on(struct rp_thread *t)
{
	return RP_LIKELY(t->sum != NULL) || (!t->nofine && rp_sum_fine_attach(t));
}

/** rp_begin_fine() - open span @name, fine-grained: folded if it ends soon enough. */
RP_INLINE void rp_begin_fine(uint32_t name)
{
	if (rp_fine_on(&rp_thread_state))
		rp_sum_begin(name, 0, 0);
	else
		rp_emit_full(true, 0, RP_EV_BEGIN, 0, name, 0, 0, RP_HEAL_NONE, 0, 0, 0);
}

/** rp_end_fine() - close the innermost open span @name (rp_end() closes it too). */
RP_INLINE void rp_end_fine(uint32_t name)
{
	rp_sum_end(name, 0); /* summaries off: rp_end() */
}

/**
 * rp_begin_fine_frame() - rp_begin_fine() of a scope: rp_begin_frame()'s healing by
 * frame (@frame, the function's CFA; @local, the scope object's address).
 */
RP_INLINE void rp_begin_fine_frame(uint32_t name, uintptr_t frame, uintptr_t local)
{
	if (rp_fine_on(&rp_thread_state))
		rp_sum_begin(name, frame, (uint32_t)local | 1u);
	else
		rp_emit_full(true, 0, RP_EV_BEGIN, 0, name, 0, 0, RP_HEAL_FRAME, frame, frame,
			     (uint32_t)local | 1u);
}

/** rp_end_fine_frame() - the END of rp_begin_fine_frame()'s scope (heals by name, as
 * ringprof-auto's exit hooks do: summary.c). */
RP_INLINE void rp_end_fine_frame(uint32_t name, uintptr_t local)
{
	if (rp_thread_state.sum != NULL)
		rp_sum_end(name, local + 1);
	else /* rp_end_frame() */
		rp_emit_full(true, 0, RP_EV_END, 0, name, 0, 0, RP_HEAL_FRAME, 0, local + 1, 0);
}

/**
 * rp_emit_at() - record one event with an explicit timestamp (in rp_now() ticks).
 * For replaying or bridging events whose time was taken elsewhere.
 */
RP_INLINE void rp_emit_at(uint64_t ts, uint8_t kind, uint8_t flags, uint32_t name,
			  uint64_t track, uint64_t arg)
{
	rp_emit_full(false, ts, kind, flags, name, track, arg, RP_HEAL_NONE, 0, 0, 0);
}

/** rp_emit() - record one event stamped now. */
RP_INLINE void rp_emit(uint8_t kind, uint8_t flags, uint32_t name, uint64_t track,
		       uint64_t arg)
{
	rp_emit_full(true, 0, kind, flags, name, track, arg, RP_HEAL_NONE, 0, 0, 0);
}

/**
 * rp_begin_frame() - rp_begin() of a span that ends in the function that opens it
 * (a scope), with that function's frame: @frame, its CFA (__builtin_dwarf_cfa()),
 * and @local, the address of the scope object in that frame. Levels opened in
 * frames strictly deeper are popped first: their functions were left without their
 * END (longjmp); so is a level of this same object in this frame (an earlier call
 * of this function, left the same way). Frames off this thread's stack never heal.
 */
RP_INLINE void rp_begin_frame(uint32_t name, uintptr_t frame, uintptr_t local)
{
	rp_emit_full(true, 0, RP_EV_BEGIN, 0, name, 0, 0, RP_HEAL_FRAME, frame, frame,
		     (uint32_t)local | 1u);
}

/**
 * rp_end_frame() - rp_end() from inside the function that opened the span: @local,
 * the address of any object of that function's frame (the scope itself). Levels
 * opened in deeper frames (at or below @local) are popped first.
 */
RP_INLINE void rp_end_frame(uint32_t name, uintptr_t local)
{
	rp_emit_full(true, 0, RP_EV_END, 0, name, 0, 0, RP_HEAL_FRAME, 0, local + 1, 0);
}

/** rp_begin() - open span @name on this thread's stack. */
RP_INLINE void rp_begin(uint32_t name)
{
	rp_emit(RP_EV_BEGIN, 0, name, 0, 0);
}

/** rp_end() - close the innermost open span @name on this thread. */
RP_INLINE void rp_end(uint32_t name)
{
	rp_emit(RP_EV_END, 0, name, 0, 0);
}

/**
 * rp_end_error() - rp_end() of a span that failed: counted in its name's calls and
 * errors (the error rate is errors / calls). Spans it truncates are not errors.
 */
RP_INLINE void rp_end_error(uint32_t name)
{
	rp_emit(RP_EV_END, RP_SPAN_ERROR, name, 0, 0);
}

/** rp_instant() - a point event. */
RP_INLINE void rp_instant(uint32_t name)
{
	rp_emit(RP_EV_INSTANT, 0, name, 0, 0);
}

/**
 * rp_async_mark() - milestone @name (the first token, the end of the queue wait) of the
 * request open on track @track: the time from the request's start to now is recorded
 * under @name, with percentiles and windows as a span's duration (RP_INSTANT_MARK). A
 * request marks each name once; a mark on no open request, or a second one, is counted
 * (mark_unmatched, mark_repeat) and left out. Use a name of its own (not a span's).
 */
RP_INLINE void rp_async_mark(uint32_t name, uint64_t track)
{
	rp_emit(RP_EV_INSTANT, RP_INSTANT_MARK, name, track, 0);
}

/** rp_counter() - a counter sample (queue length, tokens, bytes, ...). */
RP_INLINE void rp_counter(uint32_t name, int64_t value)
{
	rp_emit(RP_EV_COUNTER, 0, name, 0, (uint64_t)value);
}

/**
 * rp_async_begin() - open span @span on track @track (a request, an agent example):
 * work that is not nested per thread and may end on another thread.
 */
RP_INLINE void rp_async_begin(uint32_t name, uint64_t track, uint64_t span)
{
	rp_emit(RP_EV_ASYNC_BEGIN, 0, name, track, span);
}

/** rp_async_end() - close span @span on track @track. */
RP_INLINE void rp_async_end(uint32_t name, uint64_t track, uint64_t span)
{
	rp_emit(RP_EV_ASYNC_END, 0, name, track, span);
}

/** rp_async_end_error() - rp_async_end() of a span that failed (rp_end_error()). */
RP_INLINE void rp_async_end_error(uint32_t name, uint64_t track, uint64_t span)
{
	rp_emit(RP_EV_ASYNC_END, RP_SPAN_ERROR, name, track, span);
}

/**
 * rp_child_begin() - open span @span (unique in @track, > 0) on track @track as a
 * child of its open span @parent (0: at the track's top level). Children open at
 * the same time are siblings, not nested (a request's concurrent tasks).
 */
RP_INLINE void rp_child_begin(uint32_t name, uint64_t track, uint32_t parent, uint32_t span)
{
	rp_emit(RP_EV_CHILD_BEGIN, 0, name, track, RP_CHILD_ARG(parent, span));
}

/**
 * rp_task_begin() - rp_child_begin() of the first span of a track that is not a
 * request: spans a task (a coroutine) runs outside any request, kept on a track of
 * their own so that they nest right across awaits (RP_CHILD_TASK).
 */
RP_INLINE void rp_task_begin(uint32_t name, uint64_t track, uint32_t span)
{
	rp_emit(RP_EV_CHILD_BEGIN, RP_CHILD_TASK, name, track, RP_CHILD_ARG(0, span));
}

/** rp_child_end() - close span @span of track @track. */
RP_INLINE void rp_child_end(uint32_t name, uint64_t track, uint32_t span)
{
	rp_emit(RP_EV_CHILD_END, 0, name, track, span);
}

/** rp_child_end_error() - rp_child_end() of a span that failed (rp_end_error()). */
RP_INLINE void rp_child_end_error(uint32_t name, uint64_t track, uint32_t span)
{
	rp_emit(RP_EV_CHILD_END, RP_SPAN_ERROR, name, track, span);
}

/**
 * rp_link() - tie a CPU-side launch and the device-side work it caused: both sides
 * record the same @correlation id, with @side RP_LINK_LAUNCH or RP_LINK_DEVICE.
 * @span: the span the link belongs to, or 0 for this thread's innermost open span.
 */
RP_INLINE void rp_link(uint32_t name, uint8_t side, uint64_t span, uint64_t correlation)
{
	rp_emit(RP_EV_LINK, side, name, span, correlation);
}

/**
 * rp_charge() - charge the innermost open span @name on track @track (0: this
 * thread's stack), a batch's forward, to the request on async track @request, one of
 * the requests it served (wire 1.3). When the span ends its duration is split between
 * the distinct requests charged to it, dur / N each (the remainder to the first), into
 * each request's `charged_ns` and its name's: an attribution view, the span's own time
 * is unchanged. Counted and left out: no such request or span open (charge_orphan),
 * past 64 requests on a span (charge_cap); a request that ended first: charge_late.
 */
RP_INLINE void rp_charge(uint32_t name, uint64_t track, uint64_t request)
{
	rp_emit(RP_EV_LINK, RP_LINK_CHARGE, name, track, request);
}

/** rp_charge_innermost() - rp_charge() of the innermost open span on @track (0: this
 * thread's stack), whatever its name (a caller that does not know it). */
RP_INLINE void rp_charge_innermost(uint64_t track, uint64_t request)
{
	rp_emit(RP_EV_LINK, RP_LINK_CHARGE | RP_LINK_ANY, RP_NAME_OVERFLOW, track, request);
}

/* Scope: RP_SCOPE(id) records rp_begin(id) now and rp_end(id) when the enclosing
 * block is left, however it is left (cleanup attribute). Both carry the function's
 * frame (its CFA, and the scope's own address): after a longjmp out of scopes the
 * next scope of a shallower function heals the thread's nesting. */
struct rp_scope {
	uint32_t name;
};

RP_INLINE struct rp_scope rp_scope_enter_frame(uint32_t name, uintptr_t frame,
					      const struct rp_scope *s)
{
	rp_begin_frame(name, frame, (uintptr_t)s);
	return (struct rp_scope){ name };
}

RP_INLINE struct rp_scope rp_scope_enter(uint32_t name)
{
	rp_begin(name);
	return (struct rp_scope){ name };
}

RP_INLINE void rp_scope_leave(struct rp_scope *s)
{
	rp_end_frame(s->name, (uintptr_t)s);
}

RP_INLINE struct rp_scope rp_fine_scope_enter_frame(uint32_t name, uintptr_t frame,
						   const struct rp_scope *s)
{
	rp_begin_fine_frame(name, frame, (uintptr_t)s);
	return (struct rp_scope){ name };
}

RP_INLINE void rp_fine_scope_leave(struct rp_scope *s)
{
	rp_end_fine_frame(s->name, (uintptr_t)s);
}

#define RP_CONCAT_(a, b) a##b
#define RP_CONCAT(a, b) RP_CONCAT_(a, b)

#define RP_SCOPE(id)                                                                   \
	struct rp_scope RP_CONCAT(rp_scope_, __LINE__)                                 \
		__attribute__((cleanup(rp_scope_leave), unused)) =                     \
			rp_scope_enter_frame(id, (uintptr_t)__builtin_dwarf_cfa(),       \
					     &RP_CONCAT(rp_scope_, __LINE__))

/* RP_SCOPE_FINE(id): RP_SCOPE() of a fine-grained name (rp_begin_fine()). */
#define RP_SCOPE_FINE(id)                                                              \
	struct rp_scope RP_CONCAT(rp_scope_, __LINE__)                                 \
		__attribute__((cleanup(rp_fine_scope_leave), unused)) =                \
			rp_fine_scope_enter_frame(id, (uintptr_t)__builtin_dwarf_cfa(),  \
						  &RP_CONCAT(rp_scope_, __LINE__))

/*
 * RP_SCOPE_NAMED("decode", "LLM"): intern (name, category, __FILE__, __LINE__) on
 * the first pass through this line, cache the id, and open a scope. Races between
 * threads on the first pass intern the same key and so store the same id. The cache
 * starts at UINT32_MAX, so an id of 0 (table full) is cached too, not retried.
 */
#define RP_SCOPE_NAMED(name, category)                                                 \
	static uint32_t RP_CONCAT(rp_id_, __LINE__) = UINT32_MAX;                      \
	RP_SCOPE(rp_scope_id(&RP_CONCAT(rp_id_, __LINE__), name, category, __FILE__,   \
			     __LINE__))

/* RP_SCOPE_FINE_NAMED("hash", "FUNCTION"): RP_SCOPE_NAMED() of a fine name. */
#define RP_SCOPE_FINE_NAMED(name, category)                                            \
	static uint32_t RP_CONCAT(rp_id_, __LINE__) = UINT32_MAX;                      \
	RP_SCOPE_FINE(rp_scope_id(&RP_CONCAT(rp_id_, __LINE__), name, category,        \
				  __FILE__, __LINE__))

static inline RP_NO_INSTR uint32_t rp_scope_id(uint32_t *cache, const char *name, const char *category,
				   const char *file, uint32_t line)
{
	uint32_t id = __atomic_load_n(cache, __ATOMIC_RELAXED);

	if (RP_UNLIKELY(id == UINT32_MAX)) {
		id = rp_intern(name, category, file, line);
		__atomic_store_n(cache, id, __ATOMIC_RELAXED);
	}
	return id;
}

#ifdef __cplusplus
#pragma GCC diagnostic pop
}
#endif

#endif /* RINGPROF_RINGPROF_H */
