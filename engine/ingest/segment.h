/* SPDX-License-Identifier: MIT */
/*
 * A producer's segment as the consumer sees it: validated before use, drained ring
 * by ring, names copied out with bounds checks.
 *
 * The segment is written by another process, so nothing read from it is trusted:
 * the header is copied out and validated once (rp_segment_validate), and from then
 * on only the validated copy addresses memory. Ring indices are the consumer's own;
 * a producer index that claims more records than the ring holds is a corruption,
 * counted, and the ring is resynchronised rather than read out of bounds.
 */
#ifndef RP_ENGINE_SEGMENT_H
#define RP_ENGINE_SEGMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ringprof/wire.h>

#define RP_WHY_MAX 160

/* The validated layout of a segment: the only geometry the consumer uses. */
struct rp_segment_view {
	uint32_t ring_count;
	uint32_t ring_capacity;
	uint32_t name_capacity;
	int32_t pid;
	uint32_t version_minor;	/* 2 and above: owner marks (RP_EV_THREAD) in rings */
	uint64_t segment_size;
	uint64_t ring_desc_offset;
	uint64_t ring_data_offset;
	uint64_t name_table_offset;
	uint64_t name_arena_offset;
	uint64_t name_arena_size;
	uint64_t created_realtime_ns;
	struct rp_wire_clock clock;
	char session[RP_WIRE_SESSION_MAX];
};

/**
 * rp_segment_validate() - check every header field of a mapped segment.
 * @base: the mapping (at least @size bytes readable)
 * @size: the mapping's size, which the header's segment_size must equal
 * @out:  the validated layout, filled only on success
 * @why:  on failure, one line naming the field and its value (RP_WHY_MAX bytes)
 *
 * The header is copied before it is checked, so a concurrent writer cannot change a
 * field between its check and its use.
 *
 * @return 0; -EAGAIN when the magic is not yet written (a producer still creating
 *	   it: try later); -EPROTONOSUPPORT for another ABI major version; -EINVAL for
 *	   any other malformed field.
 */
int rp_segment_validate(const void *base, size_t size, struct rp_segment_view *out,
			char why[RP_WHY_MAX]);

/* The consumer's private state of one ring. */
struct rp_ring_cursor {
	uint32_t head;		/* next record to read; mirrored to c_head */
	uint32_t gen;		/* owner generation of the last drain */
	uint64_t received;	/* records drained since open */
	uint64_t resyncs;	/* implausible producer indices seen */
	uint32_t hwm;		/* highest backlog seen (mirrored to the descriptor) */
	uint32_t marks;		/* 1.2: owner marks consumed, every consumer's (mirrored
				   to marks_read); read at open */
	uint32_t snap_marks;	/* 1.2: the descriptor's snap_marks, read at open */
};

struct rp_segment {
	void *base;
	size_t size;
	struct rp_segment_view v;
	struct rp_ring_cursor *rings;
	char name[96];
};

/* What a drain saw of the ring's owner, read after its producer index. */
struct rp_ring_info {
	uint32_t state;		/* enum rp_ring_state, or UINT32_MAX if invalid */
	uint32_t gen;
	int32_t tid;
	uint64_t dropped;
	uint32_t lost_at_retire;	/* retired owner lost records after its last one */
};

/**
 * rp_segment_open() - open, check ownership of, map and validate a segment.
 * @name: the shm_open() name, "/ringprof.<session>.<pid>.<n>"
 * @out:  the segment, to be closed with rp_segment_close()
 * @why:  on failure, one line saying why
 *
 * Refuses segments owned by another uid (-EACCES) and any malformed header.
 * @return 0 or -errno (see rp_segment_validate for the validation errors); -EAGAIN
 *	   for a segment still being created (too small, or no magic yet): retry.
 */
int rp_segment_open(const char *name, struct rp_segment **out, char why[RP_WHY_MAX]);

/**
 * rp_segment_attach() - the same over memory the caller mapped (tests, fuzzing).
 * The caller keeps ownership of @base; rp_segment_close() does not unmap it.
 */
int rp_segment_attach(void *base, size_t size, struct rp_segment **out, char why[RP_WHY_MAX]);

/**
 * rp_segment_truncated() - the file of an opened segment shrank under its mapping
 * and a read hit the missing part (a SIGBUS, caught: the rest of the mapping now
 * reads as zeros). The segment's unread records are gone; finish it.
 */
bool rp_segment_truncated(const struct rp_segment *s);

/** rp_segment_close() - unmap (if opened) and free; NULL is fine. */
void rp_segment_close(struct rp_segment *s);

/**
 * rp_segment_drain() - copy out up to @max records of ring @ring and release them
 * to the producer.
 * @info: the ring's owner as of this drain; may be NULL
 * @return the number of records copied into @out.
 */
unsigned rp_segment_drain(struct rp_segment *s, uint32_t ring, struct rp_event *out,
			  unsigned max, struct rp_ring_info *info);

/**
 * rp_segment_avail() - records of @ring published and not yet consumed, after an
 * acquire of the producer index (so they can be read in place with
 * rp_segment_peek). An implausible producer index is counted (resyncs) and skipped.
 * @info: the ring's owner, read after the index; may be NULL.
 */
uint32_t rp_segment_avail(struct rp_segment *s, uint32_t ring, struct rp_ring_info *info);

/** rp_segment_peek() - record @k (< rp_segment_avail) past the cursor, in place. The
 * caller copies it before use: it is shared memory. */
static inline const struct rp_event *rp_segment_peek(const struct rp_segment *s, uint32_t ring,
						     uint32_t k)
{
	const struct rp_event *slots =
		(const struct rp_event *)((const char *)s->base + s->v.ring_data_offset) +
		(uint64_t)ring * s->v.ring_capacity;

	return &slots[(s->rings[ring].head + k) & (s->v.ring_capacity - 1)];
}

/**
 * rp_segment_find_mark() - the index of the first owner mark (RP_EV_THREAD) among the
 * @n records at @e (in place or copied), or @n if none.
 */
uint32_t rp_segment_find_mark(const struct rp_event *e, uint32_t n);

/** rp_segment_consume() - release @n records (<= avail) of @ring to the producer. */
void rp_segment_consume(struct rp_segment *s, uint32_t ring, uint32_t n);

/** rp_segment_consume_marks() - the same, from a caller that has read the records
 * and counted the owner marks (RP_EV_THREAD) among them: @marks, exactly. */
void rp_segment_consume_marks(struct rp_segment *s, uint32_t ring, uint32_t n, uint32_t marks);

/** rp_segment_ring_pending() - records published and not yet drained in @ring. */
uint32_t rp_segment_ring_pending(const struct rp_segment *s, uint32_t ring);

/* A name, copied out of the segment. */
struct rp_name {
	char name[256];
	char category[64];
	char file[256];
	uint32_t line;
};

/**
 * rp_segment_name() - look up name @id (strings longer than the buffers are cut).
 * @return 0; -ENOENT if @id is not (yet) published; -EINVAL if the entry points
 *	   outside the arena.
 */
int rp_segment_name(const struct rp_segment *s, uint32_t id, struct rp_name *out);

/**
 * rp_segment_sleep() - the consumer side of the doorbell, for one segment: announce
 * sleep, re-check the rings, then wait on the futex word for at most @timeout_ns.
 * @return 1 if woken by a producer, 0 on timeout or when records were pending.
 */
int rp_segment_sleep(struct rp_segment *s, uint64_t timeout_ns);

#endif
