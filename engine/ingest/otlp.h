/* SPDX-License-Identifier: MIT */
/*
 * OpenTelemetry traces (OTLP) into the engine (docs/otlp.md).
 *
 * Two parts:
 *  - the decoder: one ExportTraceServiceRequest, protobuf or JSON (as OTLP/HTTP
 *    sends it, and as the Collector's file exporter writes it, one per line), into
 *    a callback per span with the fields the mapping needs. Both read untrusted
 *    bytes and fail with -EINVAL and a reason on anything malformed;
 *  - the receiver: spans come after they end, in batches, out of order. It keeps
 *    them (bounded) until the reorder horizon has passed their start, then feeds
 *    their BEGIN and END records to the engine in time order, as CHILD_* records
 *    of one tree track per trace (docs/abi.md), so what the engine computes equals
 *    what the same spans give delivered in start order. A span that arrives after
 *    the horizon passed its start is counted as late (its source's `late`) and
 *    dropped.
 *
 * The protobuf reader is written here rather than generated (protobuf-c): it reads
 * twenty fields of seven messages, skips the rest by wire type, never allocates,
 * and the field numbers are the OTLP specification's (opentelemetry-proto,
 * trace/v1/trace.proto, common/v1/common.proto), listed in otlp.c.
 */
#ifndef RP_ENGINE_OTLP_H
#define RP_ENGINE_OTLP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "segment.h" /* RP_WHY_MAX */

#define RP_OTLP_STR_MAX 256 /* longer names, services and categories are cut (counted) */

/* Span kinds, as the specification numbers them. */
enum rp_otlp_kind {
	RP_OTLP_KIND_UNSPECIFIED = 0,
	RP_OTLP_KIND_INTERNAL = 1,
	RP_OTLP_KIND_SERVER = 2,
	RP_OTLP_KIND_CLIENT = 3,
	RP_OTLP_KIND_PRODUCER = 4,
	RP_OTLP_KIND_CONSUMER = 5,
};

/* A string inside the request (not NUL-terminated). */
struct rp_otlp_str {
	const char *p;
	size_t n;
};

/* One span, as decoded; strings point into the request or the decoder's memory and
 * live during the callback only. */
struct rp_otlp_span {
	uint8_t trace[16], id[8], parent[8];
	bool has_parent;
	struct rp_otlp_str name, service, category;
	int64_t pid;	     /* process.pid of the resource; 0: none */
	uint32_t kind;	     /* enum rp_otlp_kind */
	uint64_t start, end; /* unix ns */
	bool error;	     /* status.code == ERROR */
};

/* Returns 0 to go on, or a negative value to reject the span (counted by the caller). */
typedef int (*rp_otlp_span_fn)(void *ctx, const struct rp_otlp_span *sp);

/* The attribute that names the category, NULL for the documented table. */
struct rp_otlp_decode_opts {
	const char *category_attr;
	uint32_t max_spans; /* spans per request; past it rejected (0: 1 << 16) */
};

struct rp_otlp_decode_stats {
	uint64_t spans;	   /* handed to the callback */
	uint64_t rejected; /* not handed (bad ids, end before start, past max_spans) or
			      refused by the callback */
};

/**
 * rp_otlp_decode_pb() / rp_otlp_decode_json() - decode one request.
 * @why: on -EINVAL, the reason (first problem found).
 * @return 0 (spans may have been rejected: @st), or -EINVAL (malformed: spans before
 *	   the problem were handed over already), -ENOMEM.
 */
int rp_otlp_decode_pb(const void *buf, size_t len, const struct rp_otlp_decode_opts *o,
		      rp_otlp_span_fn fn, void *ctx, struct rp_otlp_decode_stats *st,
		      char why[RP_WHY_MAX]);
int rp_otlp_decode_json(const void *buf, size_t len, const struct rp_otlp_decode_opts *o,
			rp_otlp_span_fn fn, void *ctx, struct rp_otlp_decode_stats *st,
			char why[RP_WHY_MAX]);

struct rp_otlp_cfg {
	uint64_t horizon_ns;  /* the reorder horizon (0: 15 s) */
	int64_t clock_offset; /* engine time = unix ns - clock_offset */
	uint32_t max_pending; /* spans held for the horizon (0: 1 << 20) */
	uint32_t max_traces;  /* traces with a span released and not ended (0: 1 << 16) */
	uint32_t max_sources; /* service/process pairs (0: 256) */
};

struct rp_otlp_stats {
	uint64_t spans;		 /* accepted into the reorder buffer */
	uint64_t released;	 /* fed to the engine */
	uint64_t late;		 /* arrived after the horizon passed their start: dropped */
	uint64_t bad;		 /* end before start, or before the engine's clock began */
	uint64_t pending_capped; /* refused: max_pending spans held */
	uint64_t traces_capped;	 /* fed as roots of a track of their own: max_traces */
	uint64_t sources_capped; /* refused: max_sources, or the engine's sources full */
	uint64_t cut;		 /* strings cut to RP_OTLP_STR_MAX */
	uint32_t pending;	 /* held now */
	uint32_t traces;	 /* open now */
};

struct rp_otlp;

int rp_otlp_open(struct rp_engine *e, const struct rp_otlp_cfg *cfg, struct rp_otlp **out);
void rp_otlp_close(struct rp_otlp *o);

/** rp_otlp_add() - take one decoded span (an rp_otlp_span_fn: ctx is the receiver). */
int rp_otlp_add(void *o, const struct rp_otlp_span *sp);

/**
 * rp_otlp_advance() - feed the engine every record up to @upto (engine time; the
 * caller passes now - horizon, or UINT64_MAX to flush everything). Spans that arrive
 * later starting before @upto are late.
 */
void rp_otlp_advance(struct rp_otlp *o, uint64_t upto);

/** rp_otlp_finish() - flush, close every open track at the last time seen, finish the
 * sources (an offline file is over). */
void rp_otlp_finish(struct rp_otlp *o);

uint64_t rp_otlp_horizon_ns(const struct rp_otlp *o);
void rp_otlp_stats(const struct rp_otlp *o, struct rp_otlp_stats *out);

/**
 * rp_otlp_import_file() - `ringprof analyze` of a Collector file-exporter file (one
 * JSON ExportTraceServiceRequest per line; plain or gzip). @return 0, -EINVAL with
 * @why ("<path>: line N: <what>"), -errno.
 */
int rp_otlp_import_file(struct rp_engine *e, const char *path, const char *category_attr,
			struct rp_otlp_stats *st, char why[RP_WHY_MAX]);

/** rp_otlp_detect() - does the file look like OTLP JSON ("resourceSpans" in its first
 * 64 KiB)? 1 yes, 0 no, -errno. */
int rp_otlp_detect(const char *path);

#endif
