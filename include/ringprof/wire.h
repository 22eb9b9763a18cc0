/* SPDX-License-Identifier: MIT */
/*
 * ringprof shared-memory ABI: the one header producer and consumer must agree on.
 *
 * A producer process owns one POSIX shared-memory segment, named
 * "/ringprof.<session>.<pid>.<n>" (RP_WIRE_NAME_FMT ".%d"; n is 0 unless an exec'd
 * image of the same pid left a segment behind), created with mode 0600. The
 * segment is a single mapping laid out as
 *
 *	offset 0			struct rp_wire_header
 *	ring_desc_offset		ring_count x struct rp_wire_ring (descriptors)
 *	ring_data_offset		ring_count x ring_capacity x struct rp_event
 *	name_table_offset		name_capacity x struct rp_wire_name
 *	name_arena_offset		name_arena_size bytes of string data
 *	segment_size			end
 *
 * Every region starts on a 64-byte boundary, in that order, without overlap. The
 * consumer must validate every field it uses before trusting it (the segment is
 * written by another process); engine/ingest/segment.c does that.
 *
 * Each ring is a single-producer/single-consumer Concurrency Kit ck_ring of fixed
 * 32-byte records (struct rp_event). The producer index (p_tail) and the consumer
 * index (c_head) are free-running 32-bit counters on separate cache lines, compared
 * only by unsigned difference. The ring keeps one slot free (ck_ring's convention),
 * so it holds at most ring_capacity - 1 records.
 *
 * Producer-written and consumer-written words sit on separate cache lines so that
 * neither side's stores invalidate the other's hot line.
 */
#ifndef RINGPROF_WIRE_H
#define RINGPROF_WIRE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* C11 and C++ spell these differently; the GNU forms work in every mode. */
#ifdef __cplusplus
#define RP_WIRE_ALIGN(n)	alignas(n)
#define RP_WIRE_ASSERT(c, m)	static_assert(c, m)
#else
#define RP_WIRE_ALIGN(n)	__attribute__((aligned(n)))
#define RP_WIRE_ASSERT(c, m)	__extension__ _Static_assert(c, m)
#endif

#define RP_WIRE_MAGIC		UINT64_C(0x31464f5250474e52) /* "RNGPROF1" little-endian */
#define RP_WIRE_VERSION_MAJOR	1	/* a change a reader cannot skip */
#define RP_WIRE_VERSION_MINOR	4	/* additions a reader may ignore (1: span depth,
				   child spans; 2: owner marks, the error bit,
				   reentrant and no-space counts; 3: charges of
				   batched work; 4: a ring's claim_tail;
				   docs/abi.md) */
#define RP_WIRE_CACHELINE	64

/* "/ringprof.<session>.<pid>" + ".<n>" for shm_open(); session is [A-Za-z0-9_-]{1,31}. */
#define RP_WIRE_NAME_PREFIX	"ringprof."
#define RP_WIRE_NAME_FMT	"/ringprof.%s.%d"
/* A running engine announces itself with "/ringprof.<session>.engine" (struct
 * rp_wire_engine); producers look for it at exit (the unlink rule, docs/wire.md). */
#define RP_WIRE_ENGINE_FMT	"/ringprof.%s.engine"
#define RP_WIRE_SESSION_MAX	32

/* A session name: 1 to RP_WIRE_SESSION_MAX - 1 of [A-Za-z0-9_-] (it is part of every
 * segment's name). Reads at most RP_WIRE_SESSION_MAX bytes of @s. */
static inline int rp_wire_session_valid(const char *s)
{
	int n = 0;

	for (; n < RP_WIRE_SESSION_MAX && s[n] != '\0'; n++) {
		char c = s[n];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '-'))
			return 0;
	}
	return n > 0 && n < RP_WIRE_SESSION_MAX;
}

/* Limits a consumer enforces when validating a header. */
#define RP_WIRE_MAX_RINGS	4096u
#define RP_WIRE_MIN_RING_CAP	4u
#define RP_WIRE_MAX_RING_CAP	(1u << 24)
#define RP_WIRE_MAX_NAMES	(1u << 22)
#define RP_WIRE_MAX_ARENA	(UINT64_C(1) << 30)
#define RP_WIRE_MAX_SEGMENT	(UINT64_C(1) << 40)

/* Name ids. Id 0 is "[overflow]": what rp_intern() returns when the name table or
 * its arena is full (counted in names_dropped). Real names start at 1. */
#define RP_NAME_OVERFLOW	0u

enum rp_event_kind {
	RP_EV_BEGIN = 1,	/* a span opens on this thread's stack */
	RP_EV_END = 2,		/* the innermost span named `name` closes */
	RP_EV_INSTANT = 3,	/* a point in time */
	RP_EV_COUNTER = 4,	/* arg = counter value (int64_t) */
	RP_EV_ASYNC_BEGIN = 5,	/* track = track id (request), arg = span id */
	RP_EV_ASYNC_END = 6,	/* track = track id, arg = span id */
	RP_EV_LINK = 7,		/* arg = correlation id, track = span id or 0 (innermost);
				   RP_LINK_CHARGE: see there */
	/* 1.1: spans of a tree-shaped track (a request whose tasks run at once):
	 * track = track id, arg = RP_CHILD_ARG(parent span id, span id); parent 0 is
	 * the track's top level. Open children of one parent are siblings. */
	RP_EV_CHILD_BEGIN = 8,
	RP_EV_CHILD_END = 9,	/* track = track id, arg = span id (low 32 bits) */
	/* 1.2: a ring's new owner starts here (a thread took over a ring its dead
	 * predecessor left undrained): arg = the new owner's tid, track = the claim's
	 * generation (rp_wire_ring.gen). Records before it are the previous owner's,
	 * records after it the new owner's, whatever `gen` the descriptor shows when
	 * the consumer reads it. flags: RP_THREAD_PREV_LOST. */
	RP_EV_THREAD = 10,
	/* 1.2: a producer's summary of short calls (docs/summaries.md): one calling
	 * context's calls folded where they happened. name = the callee; depth = the
	 * thread's open span its tree hangs from (its stack level), or RP_SUMMARY_TOP:
	 * the track's root; track = k, its level in that tree: 0 hangs from the span,
	 * k > 0 from the thread's last SUMMARY of level k - 1 (a tree is written
	 * depth first); arg = calls; flags = how many RP_EV_SUMMARY_DATA records
	 * follow it, at once (RP_SUMMARY_DATA_MASK). ts: the flush's time. */
	RP_EV_SUMMARY = 11,
	/* 1.2: a SUMMARY's figures; flags = enum rp_summary_data: which. Durations are
	 * in clock ticks (a reader converts them as lengths: (ticks * mult) >> shift). */
	RP_EV_SUMMARY_DATA = 12,
	RP_EV_KIND_MAX = 12,
};

/* RP_EV_SUMMARY (1.2): flags and depth. */
#define RP_SUMMARY_DATA_MASK	0x0fu	/* data records that follow */
/* (1.2, a later addition a reader may ignore) every call in it was made at import time
 * (a module body other than the program's own, and below: the Python producer): an
 * import runs once, so a reader need not keep room for these names (docs/analyses.md, windows). */
#define RP_SUMMARY_IMPORT	0x10u
#define RP_SUMMARY_TOP		0xffffu	/* depth: hangs from the track's root */

/* RP_EV_SUMMARY_DATA (1.2): flags, the figures the record holds (in track, arg). */
enum rp_summary_data {
	RP_SUMDATA_TIMES = 1,	/* track = total ticks, arg = self ticks */
	RP_SUMDATA_RANGE = 2,	/* track = shortest call, arg = longest, in ticks */
	/* A bucket of the calls' durations (one record each): track = the length it
	 * stands for, in ticks (within half its width of each call in it), arg = its
	 * calls. A summary's buckets together hold all its calls, or a reader uses none. */
	RP_SUMDATA_HIST = 3,
};

/* rp_event.flags for RP_EV_THREAD: the previous owner lost records after its last
 * span record (its open spans may have ended unseen: lost, not truncated). */
#define RP_THREAD_PREV_LOST	0x01u

/* rp_event.flags for RP_EV_END, RP_EV_ASYNC_END and RP_EV_CHILD_END (1.2): the span
 * ended in error (rp_end_error() and friends); counted per name as errors. */
#define RP_SPAN_ERROR		0x01u

/* rp_event.flags for RP_EV_END (1.2): arg is the span's self time in clock ticks,
 * which the producer measured (its children's summaries included): a reader uses it
 * rather than the duration minus the children it saw (docs/summaries.md). */
#define RP_SPAN_SELF		0x02u

/* rp_event.flags for RP_EV_LINK: which side of the link this record is. */
#define RP_LINK_LAUNCH	0x01u	/* CPU side: the launch (cudaLaunchKernel, ...) */
#define RP_LINK_DEVICE	0x02u	/* device side: the work it caused */
/* 1.3: charge the innermost open span `name` (with RP_LINK_ANY: of any name) on track
 * `track` (0: this thread's stack) to the request on async track `arg` (a batch's
 * forward and each request it served; docs/abi.md). A 1.2 reader counts it as a bad
 * event. */
#define RP_LINK_CHARGE	0x04u
#define RP_LINK_ANY	0x08u	/* with RP_LINK_CHARGE: whatever the span's name */

/* rp_event.flags for RP_EV_CHILD_BEGIN of a track's first span (1.2, a later addition a
 * reader may ignore): the track is a task's (a coroutine's own spans outside any
 * request), not a request: its root is not counted in requests in flight. */
#define RP_CHILD_TASK		0x04u

/* rp_event.flags for RP_EV_INSTANT (1.2, a later addition a reader may ignore): a
 * milestone of a request (the first token, the end of its queue wait): track = the
 * request's async track id; the time from the request's start (its track's root span)
 * to this record's ts is a "duration" of the milestone `name`. An older reader sees
 * an instant. */
#define RP_INSTANT_MARK		0x01u

/* arg of RP_EV_CHILD_BEGIN: span ids are 32-bit and unique within their track. */
#define RP_CHILD_ARG(parent, span)	((uint64_t)(uint32_t)(parent) << 32 | (uint32_t)(span))

/*
 * rp_event.flags for RP_EV_BEGIN/RP_EV_END (1.1): the record carries the thread's
 * stack depth, and marks the first span record after this thread lost records (a
 * full ring, no ring). With both a reader can re-align its stack at a drop instead
 * of letting one lost END corrupt the rest of the run (docs/live.md).
 */
#define RP_SPAN_DEPTH		0x40u	/* `depth` is valid */
#define RP_SPAN_AFTER_DROP	0x80u	/* records of this thread were lost just before */
#define RP_DEPTH_MAX		0x7fffu	/* above: more ENDs than BEGINs; not trusted */

/* One record; fixed 32 bytes, naturally aligned, two per cache line. */
struct rp_event {
	uint64_t ts;		/* clock ticks; see struct rp_wire_clock */
	uint32_t name;		/* id in this segment's name table */
	uint8_t kind;		/* enum rp_event_kind */
	uint8_t flags;		/* kind-specific, 0 otherwise */
	uint16_t depth;		/* BEGIN/END with RP_SPAN_DEPTH: the stack depth of the
				   span's frame (0: a root), modulo 2^16; 0 otherwise */
	uint64_t track;		/* async track id, link span id; 0 otherwise */
	uint64_t arg;		/* span id, correlation id or counter value */
};

enum rp_clock_source {
	RP_CLOCK_TSC = 1,	/* rdtsc; invariant TSC, shared by every core */
	RP_CLOCK_MONOTONIC = 2,	/* clock_gettime(CLOCK_MONOTONIC) in ns */
};

/*
 * How to turn ticks into CLOCK_MONOTONIC nanoseconds, comparable across threads and
 * processes of one host:
 *
 *	ns = ref_ns + (((int64_t)(ticks - ref_ticks) * mult) >> shift)	(128-bit product)
 *
 * (ref_ticks, ref_ns) were read back to back at segment creation; mult/shift come from
 * a calibration against CLOCK_MONOTONIC. For RP_CLOCK_MONOTONIC, mult = 1, shift = 0.
 */
struct rp_wire_clock {
	uint32_t source;	/* enum rp_clock_source */
	uint32_t shift;		/* <= 63 */
	uint64_t mult;		/* > 0 */
	uint64_t ref_ticks;
	uint64_t ref_ns;
	uint64_t ticks_per_sec;	/* the calibrated rate, for display */
	uint64_t calib_ns;	/* length of the calibration window */
};

enum rp_segment_state {
	RP_SEG_LIVE = 1,	/* the producer may write events */
	RP_SEG_EXITED = 2,	/* the producer ran its exit path; no more events */
};

struct rp_wire_header {
	/* Line 0-2: identity and layout, written once before the segment is visible
	 * under its name, immutable after. */
	uint64_t magic;
	uint16_t version_major;
	uint16_t version_minor;
	uint32_t header_size;		/* sizeof(struct rp_wire_header) */
	uint64_t segment_size;		/* bytes; equals the file size */
	uint32_t event_size;		/* sizeof(struct rp_event) */
	uint32_t ring_count;
	uint32_t ring_capacity;		/* slots per ring, a power of two */
	uint32_t ring_desc_size;	/* sizeof(struct rp_wire_ring) */
	uint64_t ring_desc_offset;
	uint64_t ring_data_offset;
	uint64_t name_table_offset;
	uint64_t name_arena_offset;
	uint64_t name_arena_size;
	uint32_t name_capacity;		/* entries, id 0 included */
	uint32_t name_entry_size;	/* sizeof(struct rp_wire_name) */
	int32_t pid;
	uint32_t reserved0;
	uint64_t created_realtime_ns;	/* CLOCK_REALTIME at creation */
	struct rp_wire_clock clock;
	char session[RP_WIRE_SESSION_MAX];

	/* Line 3: producer-written, slow paths only. */
	RP_WIRE_ALIGN(RP_WIRE_CACHELINE) uint32_t state;	/* enum rp_segment_state */
	uint32_t names_used;		/* published entries, id 0 included */
	uint64_t arena_used;		/* bytes of the arena in use */
	uint64_t names_dropped;		/* rp_intern() calls answered with id 0 */
	uint64_t noring_dropped;	/* events of threads that found no free ring */
	uint64_t rings_claimed;		/* ring claims since creation */
	uint64_t exit_ticks;		/* clock at the exit path, 0 before */
	uint64_t nospace_dropped;	/* 1.2: events of threads whose ring's pages could
					   not be reserved (a full /dev/shm); also in
					   noring_dropped */
	uint32_t rings_nospace;		/* 1.2: ring claims refused for that reason */
	uint32_t reserved2;

	/* Line 4: the doorbell. The consumer sets consumer_sleeping before it waits
	 * on the futex word `doorbell`; a producer that sees it set, with a ring at
	 * least 1/RP_DOORBELL_FRACTION full (ringprof.h), clears it, bumps `doorbell` and wakes the consumer. */
	RP_WIRE_ALIGN(RP_WIRE_CACHELINE) uint32_t doorbell;
	uint32_t consumer_sleeping;
	int32_t consumer_pid;		/* last consumer that attached, 0 if none */
	uint32_t reserved1;
	uint64_t doorbell_rings;	/* wake-ups producers sent */
};

/*
 * The single-producer/single-consumer ring indices: the layout of Concurrency Kit's
 * struct ck_ring (64-byte cache lines), spelled out so that including this header
 * needs no ck header. producers/ring_ck.h checks the two agree, field by field, and
 * is where the library hands this to ck_ring_init().
 */
struct rp_wire_spsc {
	uint32_t c_head;	/* consumer index (line 0) */
	uint8_t pad[RP_WIRE_CACHELINE - 4];
	uint32_t p_tail;	/* producer index (line 1) */
	uint32_t p_head;	/* unused by an SPSC ring */
	uint8_t pad_[RP_WIRE_CACHELINE - 8];
	uint32_t size;		/* capacity (line 2) */
	uint32_t mask;		/* capacity - 1 */
};

enum rp_ring_state {
	RP_RING_FREE = 0,	/* never claimed */
	RP_RING_ACTIVE = 1,	/* owned by thread `tid`, generation `gen` */
	RP_RING_RETIRED = 2,	/* its thread exited; reused once drained, or (1.2) taken
				   over undrained after an owner mark */
};

/*
 * A ring descriptor. Line 0 is written by the producer on claim, retire and drop
 * (and `hwm` by the consumer, only when it grows);
 * lines 1-3 are the ck_ring itself (c_head: consumer line; p_tail: producer line;
 * size/mask). A new owner claims a free ring, or a retired one when it is drained
 * (c_head == p_tail): every record in it then belongs to the generation `gen` read
 * after p_tail. 1.2: failing those, it takes a retired ring over undrained, writing
 * an owner mark (RP_EV_THREAD) that it publishes before it stores the new `gen`; a
 * record's generation is then the one the last mark before it names.
 */
struct rp_wire_ring {
	uint32_t state;		/* enum rp_ring_state */
	uint32_t gen;		/* bumped by every claim */
	int32_t tid;		/* owner thread (gettid), 0 when free */
	uint32_t hwm;		/* consumer-written (1.1): the highest backlog a drain
				   saw, a lower bound of the true high-water mark */
	uint64_t dropped;	/* records refused because the ring was full */
	uint64_t claimed_ticks;	/* clock at the claim */
	uint32_t lost_at_retire; /* 1.1: 1 if the owner lost records after its last
				    span record (written before state RETIRED) */
	uint32_t snap_head;	/* consumer-written (1.1): ring.c_head as of the records
				   the last snapshot it wrote holds (its successor counts
				   c_head - snap_head as the restart gap); producers
				   never touch it */
	uint64_t reentrant;	/* 1.2: records refused because a signal handler made
				   them while its thread was inside a recording call */
	/* 1.2, summaries (docs/summaries.md), producer-written: */
	uint64_t pending_ticks;	/* start of the oldest open span whose BEGIN is not
				   written yet (a reader's merge must not pass it);
				   0: none */
	uint32_t summary_ns;	/* the thread's current summary threshold; 0: off */
	uint32_t summary_raised; /* times the producer doubled it (a full ring) */
	struct rp_wire_spsc ring; /* ck_ring_init(&ring, ring_capacity) */
	/* 1.2, consumer-written, on the line of the ring's size and mask (read-only
	 * after init: nobody's hot line): */
	uint32_t marks_read;	/* owner marks (RP_EV_THREAD) consumers took out of
				   this ring so far, stored before each c_head store */
	uint32_t snap_marks;	/* marks_read as of snap_head: the restart gap
				   counts records, not marks */
	/* 1.4, producer-written at each claim before `gen` (release): the ring index
	 * of the claiming owner's first record (its owner mark after a take-over).
	 * A reader whose head is past it knows every record from there on is of the
	 * generation read before it (or a later one's), with no mark to look for. */
	uint32_t claim_tail;
	uint8_t pad1[4 * RP_WIRE_CACHELINE - RP_WIRE_CACHELINE - sizeof(struct rp_wire_spsc) -
		     12];
};

/*
 * A name: interned once, referenced by id in every event. `ready` is stored with
 * release order after the rest of the entry; a reader loads it with acquire order
 * and validates offsets and lengths against the arena before reading strings.
 * Strings in the arena are NUL-terminated; lengths exclude the NUL.
 */
struct rp_wire_name {
	uint32_t ready;		/* 1 once published */
	uint32_t hash;		/* of (name, category, file, line); for dedup */
	uint32_t name_off;
	uint32_t name_len;
	uint32_t cat_off;
	uint32_t cat_len;
	uint32_t file_off;	/* file_len == 0: no source location */
	uint32_t file_len;
	uint32_t line;
	uint32_t reserved;
};

/* "/ringprof.<session>.engine": a running engine's marker. */
struct rp_wire_engine {
	uint64_t magic;		/* RP_WIRE_ENGINE_MAGIC */
	int32_t pid;
	uint32_t reserved;
};
#define RP_WIRE_ENGINE_MAGIC	UINT64_C(0x454e49474e455052) /* "RPENGINE" */

/* The layout the consumer relies on. A change here is a major version bump. */
RP_WIRE_ASSERT(sizeof(struct rp_event) == 32, "event record is 32 bytes");
RP_WIRE_ASSERT(offsetof(struct rp_event, ts) == 0, "ts at 0");
RP_WIRE_ASSERT(offsetof(struct rp_event, name) == 8, "name at 8");
RP_WIRE_ASSERT(offsetof(struct rp_event, kind) == 12, "kind at 12");
RP_WIRE_ASSERT(offsetof(struct rp_event, flags) == 13, "flags at 13");
RP_WIRE_ASSERT(offsetof(struct rp_event, depth) == 14, "depth at 14");
RP_WIRE_ASSERT(offsetof(struct rp_event, track) == 16, "track at 16");
RP_WIRE_ASSERT(offsetof(struct rp_event, arg) == 24, "arg at 24");
RP_WIRE_ASSERT(sizeof(struct rp_wire_clock) == 48, "clock block is 48 bytes");
RP_WIRE_ASSERT(offsetof(struct rp_wire_header, clock) == 104, "clock at 104");
RP_WIRE_ASSERT(offsetof(struct rp_wire_header, session) == 152, "session at 152");
RP_WIRE_ASSERT(offsetof(struct rp_wire_header, state) == 192, "producer line at 192");
RP_WIRE_ASSERT(offsetof(struct rp_wire_header, doorbell) == 256, "doorbell line at 256");
RP_WIRE_ASSERT(sizeof(struct rp_wire_header) == 320, "header is 5 cache lines");
RP_WIRE_ASSERT(offsetof(struct rp_wire_header, nospace_dropped) == 240, "1.2 counters at 240");
RP_WIRE_ASSERT(offsetof(struct rp_wire_ring, reentrant) == 40, "reentrant at 40");
RP_WIRE_ASSERT(offsetof(struct rp_wire_ring, pending_ticks) == 48, "summary words at 48");
RP_WIRE_ASSERT(offsetof(struct rp_wire_ring, marks_read) == 200, "consumer marks at 200");
RP_WIRE_ASSERT(offsetof(struct rp_wire_ring, claim_tail) == 208, "claim_tail at 208");
RP_WIRE_ASSERT(sizeof(struct rp_wire_spsc) <= 3 * RP_WIRE_CACHELINE, "ring fits 3 lines");
RP_WIRE_ASSERT(offsetof(struct rp_wire_spsc, c_head) == 0, "ring c_head first");
RP_WIRE_ASSERT(offsetof(struct rp_wire_spsc, p_tail) == RP_WIRE_CACHELINE,
	       "ring p_tail on its own line");
RP_WIRE_ASSERT(offsetof(struct rp_wire_ring, ring) == RP_WIRE_CACHELINE,
	       "ring starts on line 1 of the descriptor");
RP_WIRE_ASSERT(sizeof(struct rp_wire_ring) == 4 * RP_WIRE_CACHELINE, "descriptor is 4 lines");
RP_WIRE_ASSERT(sizeof(struct rp_wire_name) == 40, "name entry is 40 bytes");
RP_WIRE_ASSERT(sizeof(struct rp_wire_engine) == 16, "engine marker is 16 bytes");

#ifdef __cplusplus
}
#endif

#endif /* RINGPROF_WIRE_H */
