/* SPDX-License-Identifier: MIT */
/*
 * Merging reports: several snapshots (processes, hosts, runs) as one report, for
 * `ringprof merge`. What adds exactly adds; what cannot be combined honestly is
 * dropped rather than guessed. The rules, section by section, are in engine/formats/merge.c
 * and docs/snapshot.md ("Merging snapshots").
 */
#ifndef RP_ENGINE_MERGE_H
#define RP_ENGINE_MERGE_H

#include <stddef.h>

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

#endif
