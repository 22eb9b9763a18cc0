/* SPDX-License-Identifier: MIT */
/*
 * Merging reports: several snapshots (processes, hosts, runs) as one report, for
 * `ringprof merge`. What adds exactly adds; what cannot be combined honestly is
 * dropped rather than guessed. The rules, section by section, are in engine/formats/merge.c
 * and docs/snapshot.md ("Merging snapshots").
 */
#ifndef RP_ENGINE_MERGE_H
#define RP_ENGINE_MERGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "report.h"

/**
 * rp_report_merge() - add @src to @dst.
 * @dst: a report, or a zeroed one (version_major == 0): then @src is the first input
 *	and its header (clock, caps) is taken.
 * @src: unchanged; its strings and arrays are copied.
 * @why: a one-line reason on failure (@whylen bytes, at least 1).
 * @return 0; -EINVAL when the clocks differ (a "trace" and a "monotonic" report, whose
 *	   times share no base) or two sketches of one row have different alphas;
 *	   -ENOMEM. On failure @dst is partly merged: release it with rp_report_free().
 */
int rp_report_merge(struct rp_report *dst, const struct rp_report *src, char *why, size_t whylen);

/* What rp_report_align() did. */
struct rp_align {
	int64_t shift_ns;   /* added to @src's times; 0: none */
	uint64_t clamped;   /* times that fell before 0 on @dst's clock, set to 0 */
	bool shifted;	    /* false: same boot, no anchor on a side, or not monotonic */
	char note[256];	    /* one line saying what was done, and why not when not */
};

/**
 * rp_report_align() - put @src's event times on @dst's clock before rp_report_merge().
 * Live snapshots of different hosts (or boots) each count CLOCK_MONOTONIC from their
 * own boot; each source carries the wall time of its clock (anchor_realtime_ns,
 * anchor_monotonic_ns). With an anchored source on both sides and different boot ids,
 * @src's times (header, windows, slowest spans, flight recorder, device) move by
 * (dst's monotonic - realtime) - (src's), so equal wall times get equal times, and
 * each of @src's sources records the shift in clock_shift_ns. Accurate to the two
 * hosts' wall clocks' disagreement (NTP: milliseconds or better).
 * @dst: a merged report so far; a zeroed one (the first input) is left alone.
 */
void rp_report_align(const struct rp_report *dst, struct rp_report *src, struct rp_align *a);

#endif
