/* SPDX-License-Identifier: MIT */
/*
 * Chrome trace import: the engine over a trace file, through the same event path
 * as live data.
 *
 * Per (pid, tid) track, spans come from X events (in any file order) and from B/E
 * pairs (an E closes the most recent open B of its track, in file order). They
 * nest by containment: sorted by (start, longer first, file order), a span is the
 * child of the innermost open span that
 *   - has a positive duration (a zero-length span contains nothing), and
 *   - it starts before that span ends (a zero-length span may start exactly at
 *     its end).
 * A child that ends after its parent is clamped to the parent's end and counted
 * (RP_ANOM_CLAMPED): torch truncates start and duration separately, so children
 * overhang by 1 µs. Then every track's BEGIN/END sequence is merged into one
 * stream in time order (ENDs before BEGINs at the same time) and fed to the engine.
 * An E with no open B counts as RP_ANOM_END_UNMATCHED; a B never closed ends at
 * the trace's last timestamp and counts as RP_ANOM_OPEN_AT_END.
 *
 * C events become counter samples (RP_EV_COUNTER on their (pid, tid) track, fed in
 * time order with the rest): the name, the first numeric member of "args" rounded
 * to the engine's int64 (a non-finite or out-of-range value counts as
 * RP_ANOM_BAD_EVENT). The (pid, tid) text of each track is given to the flight
 * recorder as its label, so exports show the trace's own pids and tids.
 *
 * Correlation ids (device.h) go to the engine as RP_EV_LINK events: a span's
 * args.correlation right after its BEGIN (the device side for categories kernel,
 * gpu_memcpy, gpu_memset, else the launch side); a flow event's numeric id (s: launch
 * side, f: device side) after everything else at its time on its track, so it lands
 * on the innermost span open there. A flow event without a numeric id counts as
 * RP_ANOM_BAD_EVENT.
 *
 * Torch nesting (cfg.torch_nesting, `analyze --nesting torch`): the per-name self
 * times become what torch's key_averages() reports for the same trace. Torch nests
 * by its own rule (EventList._populate_cpu_children): a span is the child of the
 * innermost open span that it starts before the end of and does not end after;
 * otherwise that span is popped for good. So a child whose rounded end passes its
 * parent's by 1 µs is un-nested (a sibling of its parent, overlapping it), and its
 * grandparent's self time loses both durations, possibly going negative. The call
 * tree, edges, windows and exports keep the nesting above; only the per-name self
 * times (and what is built from them: tables, pstats, bottlenecks by self) follow
 * torch. A per-name total below zero is held as an int64 (report.h).
 *
 * Memory: 32 bytes per span, 24 per generated event and 32 per counter sample and 16 per correlation id
 * (and 8 per name id with torch nesting), never
 * the JSON text.
 */
#ifndef RP_ENGINE_IMPORT_CHROME_H
#define RP_ENGINE_IMPORT_CHROME_H

#include "engine.h"
#include "trace_chrome.h"

/**
 * rp_import_chrome() - read the Chrome trace at @path into @e as a new source.
 * @progress: may be NULL (see rp_chrome_read).
 * @return 0, or -errno with @why (the reader's error, or -ENOMEM / -ENOSPC).
 */
int rp_import_chrome(struct rp_engine *e, const char *path, rp_chrome_progress_fn progress,
		     void *ctx, char why[RP_WHY_MAX]);

/* Tests: true sorts all spans and generated events whole and feeds the engine one
 * event at a time, the plain path the per-track sorts and the merged, stretched feed
 * are compared with. */
extern bool rp_import_chrome_plain;

/** rp_import_chrome_buf() - the same over a buffer (tests, fuzzing); @label names it. */
int rp_import_chrome_buf(struct rp_engine *e, const void *buf, size_t len, const char *label,
			 char why[RP_WHY_MAX]);

#endif
