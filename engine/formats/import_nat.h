/* SPDX-License-Identifier: MIT */
/*
 * Agent-toolkit trace import: the toolkit's all_requests_profiler_traces.json (a JSON
 * array of {"request_number", "intermediate_steps": [{"function_ancestry": {...},
 * "payload": {"event_type", "event_timestamp", "name", "UUID", ...}}]}), plain or
 * gzip, streamed through yajl's callback parser: memory holds one request's steps
 * (40 bytes each) and never the JSON text or a tree.
 *
 * Steps: LLM, TOOL, FUNCTION and SPAN STARTs and ENDs (SPAN reported as FUNCTION);
 * the name is payload.name for LLM/TOOL, function_ancestry.function_name for
 * FUNCTION/SPAN ("" or null: unknown_llm/unknown_tool/unknown_function). Other known
 * event types are ignored; an unknown event type, or a START/END without a numeric
 * event_timestamp or a string UUID, is skipped and counted as bad_event. Each
 * request's steps are put in timestamp order (stable), as the toolkit does, then
 * handed to
 *  - the toolkit analysis (engine/formats/aiq.h), if given: the toolkit's own rules;
 *  - the engine, if given: each request is an async track (its index in the file),
 *    each call a span whose id is its UUID, so the engine's stack machine applies
 *    its own rules and counts what is irregular: an END below the top closes the
 *    calls above it (end_mismatch, truncated); an END with no START is
 *    end_unmatched; a START never ended is closed at the trace's last time
 *    (open_at_end); a START whose UUID is already open or used in its request is
 *    counted as bad_event and still analysed (an END closes the innermost call of
 *    its UUID). Times enter the engine as exact nanoseconds of the decimal text;
 *    every request's events are merged into one time-ordered stream (24 bytes per
 *    event) before the engine sees them.
 */
#ifndef RP_ENGINE_IMPORT_NAT_H
#define RP_ENGINE_IMPORT_NAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "aiq.h"
#include "engine.h"
#include "trace_chrome.h" /* rp_chrome_progress_fn, RP_WHY_MAX */

#define RP_NAT_STR_MAX 512 /* longer names and UUIDs are cut (counted) */

/* Caps (0: the default). Steps past one are skipped, counted in capped and as bad_event. */
struct rp_nat_caps {
	uint64_t max_events;	    /* call steps waiting for the engine's feed (1 << 25) */
	uint32_t max_request_steps; /* call steps of one request (1 << 24) */
};

struct rp_nat_stats {
	uint64_t requests;
	uint64_t steps; /* intermediate steps read */
	uint64_t calls; /* STARTs and ENDs of LLM, TOOL, FUNCTION, SPAN */
	uint64_t bad;	/* steps skipped (see above) */
	uint64_t cut;	/* strings cut to RP_NAT_STR_MAX */
	uint64_t capped; /* steps past a cap (struct rp_nat_caps) */
	uint64_t bytes; /* input bytes read (compressed size for .gz) */
};

/**
 * rp_import_nat() - read the toolkit trace at @path.
 * @e:    the engine, fed as a new source (NULL: not fed).
 * @aiq:  the toolkit analysis, fed request by request (NULL: not fed); the caller
 *	  calls rp_aiq_finish() afterwards.
 * @caps: NULL for the defaults.
 * @progress: may be NULL; called about every MiB.
 * @st:   may be NULL.
 * @why:  on failure one line: "<path>: byte N: <what>".
 * @return 0, -errno for I/O errors, -EINVAL for input that is not a toolkit trace
 *	   (malformed JSON, top level not an array, ...), -ENOMEM.
 */
int rp_import_nat(struct rp_engine *e, struct rp_aiq *aiq, const struct rp_nat_caps *caps,
		  const char *path,
		  rp_chrome_progress_fn progress, void *ctx, struct rp_nat_stats *st,
		  char why[RP_WHY_MAX]);

/** rp_import_nat_buf() - the same over a buffer of plain JSON; @label names it. */
int rp_import_nat_buf(struct rp_engine *e, struct rp_aiq *aiq, const struct rp_nat_caps *caps,
		      const void *buf, size_t len,
		      const char *label, struct rp_nat_stats *st, char why[RP_WHY_MAX]);

/*
 * A plain file of at least rp_nat_split_min bytes read for the toolkit analysis
 * alone is read by two threads, each from one half (import_nat.c says how the
 * result stays the one reader's). Tests set the size down to 0 to split every file
 * (or up to SIZE_MAX to split none); rp_nat_split_used counts the reads whose
 * second half was taken.
 */
extern size_t rp_nat_split_min;
extern unsigned rp_nat_split_used;
/* Tests: where the second reader starts instead of the guess (0: the guess). */
extern uint64_t rp_nat_split_at;

/*
 * Tests and fuzzers: true reads every step through the fast path's callbacks
 * (jfast.h) rather than the step lane (import_nat.c), the reference the lane is
 * compared with; rp_nat_lane_steps counts the steps the lane read.
 */
extern bool rp_nat_lane_off;
extern uint64_t rp_nat_lane_steps;

/**
 * rp_nat_detect() - does the file at @path (plain or gzip) look like a toolkit trace
 * (an "intermediate_steps" key in its first 64 KiB)? 1 yes, 0 no, -errno.
 */
int rp_nat_detect(const char *path);

/* Tests: a step's event_timestamp @s[0..@n) (a JSON number, NUL-terminated) in
 * nanoseconds, exactly (half up), as the reader computes it; false if negative or
 * too big. */
bool rp_nat_ns_of(const char *s, size_t n, uint64_t *out);

#endif
