/* SPDX-License-Identifier: MIT */
/*
 * Streaming reader for Chrome trace JSON (chrome://tracing, Perfetto, torch.profiler
 * export_chrome_trace): the object form {"traceEvents": [...], ...} and the bare
 * array form [...], plain or gzip (detected by magic, read through zlib). Parsed
 * with yajl as a stream: memory holds one event's fields, never the JSON text or a
 * DOM. Each trace event is handed to a callback as it is parsed, in file order;
 * ordering and nesting are the importer's business, not the reader's.
 */
#ifndef RP_ENGINE_TRACE_CHROME_H
#define RP_ENGINE_TRACE_CHROME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "segment.h" /* RP_WHY_MAX */

#define RP_CHROME_STR_MAX 512 /* longer name/cat/pid/tid strings are cut (counted) */

/* One trace event. Pointers are valid only during the callback. */
struct rp_chrome_ev {
	char ph;		/* 'X', 'B', 'E', 'i', 'I', 'C', 's', 't', 'f', 'M', ... */
	const char *name;	/* "" if absent */
	const char *cat;	/* "" if absent */
	const char *pid;	/* as text: a number in decimal, a string as is; "" */
	const char *tid;	/* likewise */
	int64_t ts_ns;		/* "ts" (µs, integer or float) x 1000, rounded */
	int64_t dur_ns;		/* "dur" likewise; valid if has_dur */
	bool has_ts;
	bool has_dur;
	bool has_correlation;	/* args.correlation (torch: launch <-> kernel) */
	uint64_t correlation;
	bool has_id;		/* "id" (flow and async events), number or string */
	const char *id;		/* as text */
	bool has_value;		/* 'C' events: the first numeric member of "args" */
	double value;
	const char *value_name;	/* that member's key */
};

/* Return 0 to go on, non-zero to stop the read (rp_chrome_read returns it). */
typedef int (*rp_chrome_fn)(void *ctx, const struct rp_chrome_ev *ev);
/* Progress: bytes of the (compressed) input consumed so far, of total (0 if unknown). */
typedef void (*rp_chrome_progress_fn)(void *ctx, uint64_t bytes, uint64_t total);

struct rp_chrome_stats {
	uint64_t events;	/* events handed to the callback */
	uint64_t skipped;	/* elements of traceEvents that are not objects */
	uint64_t cut;		/* strings cut to RP_CHROME_STR_MAX */
	uint64_t bytes;		/* input bytes consumed (compressed size for .gz) */
};

/**
 * rp_chrome_read() - stream the trace in file @path (gzip or plain) to @fn.
 * @progress: may be NULL; called about every MiB.
 * @st:       counters; may be NULL.
 * @why:      on failure, one line: "<path>: byte N: <what>".
 * @return 0; the callback's non-zero value; -errno for I/O errors; -EINVAL for input
 *	   that is not a Chrome trace (malformed JSON, not an array or an object with
 *	   a "traceEvents" array, a "ts" that is not a number, truncated gzip, ...).
 */
int rp_chrome_read(const char *path, rp_chrome_fn fn, rp_chrome_progress_fn progress,
		   void *ctx, struct rp_chrome_stats *st, char why[RP_WHY_MAX]);

/* Tests and fuzzers: true leaves every event to jfast (jfast.h) token by token, the
 * path the whole-event reading is compared with. */
extern bool rp_chrome_events_off;

/** rp_chrome_parse() - the same over a buffer (plain JSON or gzip bytes). */
int rp_chrome_parse(const void *buf, size_t len, rp_chrome_fn fn, void *ctx,
		    struct rp_chrome_stats *st, char why[RP_WHY_MAX]);

#endif
