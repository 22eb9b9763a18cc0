/* SPDX-License-Identifier: MIT */
/*
 * Charging batched work to the requests it served (RP_EV_LINK with RP_LINK_CHARGE,
 * wire 1.3): in a batching server one `forward` span, opened by the batch loop outside
 * any request, serves N requests. Each charge record names the span (its name, on its
 * track: the thread's stack for track 0; with RP_LINK_ANY the innermost open span
 * whatever its name) and one request (its async track). When the
 * span closes, its duration is split between the N distinct requests charged to it:
 * dur / N each in integer ns, the remainder to the first charged, so the shares sum to
 * the duration exactly. A share goes to the request's name (charged_ns, charged: the
 * shares it got) and to the request itself, which carries its sum into the slowest
 * list (rp_span_info.charged_ns when it closes). Charging is an attribution view: the
 * span's own self and cumulative time, and the request's, are unchanged.
 * Irregular charges are counted, never a wrong figure:
 *   no request open on the track named, or no open span of that name on the track
 *                                    -> RP_ANOM_CHARGE_ORPHAN, left out;
 *   the request ended before the span did -> RP_ANOM_CHARGE_LATE: its share is in its
 *                                    name's total, not in any request's;
 *   past RP_CHARGE_PER_SPAN requests on a span, or RP_CHARGE_SPANS spans charged and
 *   open at once                     -> RP_ANOM_CHARGE_CAP, left out.
 * A charged span a drop cuts (never closed) is forgotten with its charges; the drop is
 * counted (drop_lost).
 * Memory, made at the first charge: RP_CHARGE_SPANS open spans, a sum per track slot
 * and two counters per name (rp_charges_memory_bound()).
 */
#ifndef RP_ENGINE_CHARGE_H
#define RP_ENGINE_CHARGE_H

#include <stddef.h>
#include <stdint.h>

#include <ringprof/wire.h>

#include "stacks.h"

struct rp_report;

#define RP_CHARGE_PER_SPAN 64	/* distinct requests one span is charged to */
#define RP_CHARGE_SPANS 64	/* charged spans open at once */

/* A request charged: its async track and its root span's start (which request of
 * the track), and its name. */
struct rp_charge_req {
	uint64_t track, start;
	uint32_t name;
};

/* An open span charged to requests: (src, kind, track id, span id, start, name) is
 * the frame (what rp_spans_close() sees of it). n == 0: a free entry. */
struct rp_charge_span {
	uint64_t id, span, start;
	uint32_t src, name, n;
	uint8_t kind;
	struct rp_charge_req req[RP_CHARGE_PER_SPAN];
};

/* A track slot's request: what it was charged so far (valid while id, src and start
 * are its track's and its root's). */
struct rp_charge_sum {
	uint64_t id, start, ns;
	uint32_t src;
};

/* Per name: the shares its requests got. */
struct rp_charge_name {
	uint64_t ns, n;
};

struct rp_charges {
	uint32_t live;		/* entries of open[] in use: the close hook's test */
	uint32_t pending;	/* sum[] entries holding a share not taken yet */
	uint32_t max_tracks, max_names;
	struct rp_charge_span *open;	/* RP_CHARGE_SPANS; NULL until the first charge */
	struct rp_charge_sum *sum;	/* per track slot */
	struct rp_charge_name *name;	/* per name id */
	struct rp_tracks *ts;
	/* where a source's anomalies are counted (the engine's rows) */
	struct rp_counts *(*counts)(void *ctx, uint32_t src);
	void *ctx;
};

void rp_charges_init(struct rp_charges *c, struct rp_tracks *ts, uint32_t max_tracks,
		     uint32_t max_names, struct rp_counts *(*counts)(void *, uint32_t),
		     void *ctx);
void rp_charges_free(struct rp_charges *c);
size_t rp_charges_memory_bound(uint32_t max_tracks, uint32_t max_names);

/**
 * rp_charges_event() - a charge record @ev (RP_LINK_CHARGE) of source @src, from
 * thread @thread: remembered on its span, or counted in @cnt.
 */
void rp_charges_event(struct rp_charges *c, uint32_t src, uint64_t thread,
		      const struct rp_event *ev, struct rp_counts *cnt);

/**
 * rp_charges_close_slow() - a span closed (spans.h) while charges are kept: if it was
 * charged, its duration goes to its requests; if it is a request, *@charged_ns is what
 * it was charged (0: nothing).
 */
void rp_charges_close_slow(struct rp_charges *c, const struct rp_track *k,
			   const struct rp_span_info *sp, uint64_t *charged_ns);

/* Once per span closed: whether rp_charges_close_slow() has anything to do (a charged
 * span open, or a request's sum not taken yet). @c is not NULL: the span sinks' charges
 * are always the engine's (spans.h). */
static inline bool rp_charges_wanted(const struct rp_charges *c, const struct rp_span_info *sp)
{
	return c->live != 0 || (sp->request && c->pending != 0);
}

/** rp_charges_report() - the names' charged_ns and charged into @r (@map: id -> row). */
void rp_charges_report(const struct rp_charges *c, const uint32_t *map, uint32_t n_names,
		       struct rp_report *r);

#endif
