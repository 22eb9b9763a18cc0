/* SPDX-License-Identifier: MIT */
/*
 * Device idle time: what torch.profiler's BasicEvaluation (torch/profiler/_utils.py)
 * computes, from launches on CPU threads and the device work they caused, linked by
 * a correlation id.
 *
 * Fed, during the stream, with every completed span of the engine:
 *   - device work: a span of category "kernel", "gpu_memcpy" or "gpu_memset", or a
 *     span carrying an RP_LINK_DEVICE link. It is a queue *kernel* unless its name,
 *     lower-cased, contains "mem", "cpy", "alloc" or "free" (torch's is_cuda_kernel).
 *   - every other span of a thread track is a CPU span; one whose name starts with
 *     cudaLaunchKernel, cudaLaunchKernelExC, __cudaLaunchKernel,
 *     cudaLaunchCooperativeKernel or cudaLaunchCooperativeKernelMultiDevice is also
 *     a queue *launch* (torch's is_cuda_launch_kernel; cudaMemcpyAsync is not one).
 *   - torch's event tree (BasicEvaluation's metrics and events) holds both: CPU
 *     spans nested by time on their thread, and device work as the child of the
 *     runtime call on the launch side of its link (torch's TransferEvents makes a
 *     GPU event the child of its flow start). So a launch's self time is its
 *     duration minus its kernel's, and may be negative, as in torch; device work
 *     takes its launch's source location. Async spans other than device work are not
 *     in the tree.
 * A launch and a kernel are linked when both carry an RP_LINK_* link with the same
 * (source, correlation id).
 *
 * rp_device_analyse() then mirrors BasicEvaluation over what was kept:
 *   queue depth  compute_queue_depth: launches and kernels sorted by start; each launch
 *		  maps to the first kernel, at or after the last mapped one, with its
 *		  correlation id. Walking launches, kernels and CPU spans by start
 *		  (launches before kernels before CPU spans at equal starts), depth =
 *		  max(0, index of the last mapped kernel - kernels started so far + 1).
 *		  Launches and kernels each give a point (start, end, depth).
 *   idle	  compute_idle_time: [first span start, first point start],
 *		  [last point end, end of the span that starts last (of several, the
 *		  shortest)], and [end of a depth-0 point,
 *		  start of the next point with depth > 0]. Intervals of no length
 *		  (including "negative" ones) hold no time.
 *   per span	  idle_ns = overlap with the idle intervals; fraction = idle_ns / dur.
 *   ranking	  rank_events: the points reversed; from each depth-0 point, the next
 *		  run to a depth-0 point whose peak is >= 4 makes a falling phase
 *		  [peak start, depth-0 point start]; spans overlapping a phase are
 *		  scored z(idle fraction) + 0.6 z(self), sample standard deviations;
 *		  highest first.
 *   source	  source_code_location: the span's name, else its nearest ancestor's,
 *		  that matches "\.py\(.*\)" ("model.py(42): forward").
 *
 * Bounded: max_spans spans and max_events queue events are kept (later ones are
 * counted as dropped); links waiting for their span's end are bounded per track and
 * by a table for span-id links.
 */
#ifndef RP_ENGINE_DEVICE_H
#define RP_ENGINE_DEVICE_H

#include <stdbool.h>
#include <stdint.h>

#include "names.h"
#include "report.h"
#include "stacks.h"

struct rp_device_cfg {
	uint32_t max_spans;	   /* spans kept for the analysis */
	uint32_t max_events;	   /* launches + kernels kept */
	uint32_t links_per_track;  /* links waiting on one thread track's open spans */
	uint32_t max_span_links;   /* links to async spans by span id (power of two) */
	uint32_t max_points;	   /* queue-depth change points in the report */
	uint32_t max_idle;	   /* idle intervals in the report */
	uint32_t max_phases;	   /* falling phases in the report */
	uint32_t max_ranked;	   /* ranked spans in the report */
	bool always;		   /* keep spans from the start; else (live) only from the
				      first link or device-category span: an engine with
				      no device work keeps nothing (rp_device_arm) */
};

/* Defaults: 256 Ki spans, 256 Ki events, 8 links per track, 4096 span links, 4096
 * points, 1024 idle intervals, 256 phases, 10 ranked spans. */
void rp_device_cfg_default(struct rp_device_cfg *cfg);

struct rp_device;

int rp_device_open(const struct rp_device_cfg *cfg, uint32_t max_tracks, uint32_t max_names,
		   struct rp_device **out);
void rp_device_close(struct rp_device *d);

/* Keep spans from now on (the first link does it; importers call it before feeding a
 * trace that has device work, so that every span of it is analysed, as torch does). */
void rp_device_arm(struct rp_device *d);

/* Whether spans of category @cat are device work (kernel, gpu_memcpy, gpu_memset). */
bool rp_device_is_device_category(const char *cat);

/* Worst-case bytes rp_device_open() and rp_device_report() allocate with @cfg (NULL:
 * defaults): the kept records, the links, the report's scratch and its output. */
size_t rp_device_memory_bound(const struct rp_device_cfg *cfg, uint32_t max_tracks,
			      uint32_t max_names);

/**
 * rp_device_link() - an RP_EV_LINK: on thread track slot @tr, for the open frame
 * @f at @depth (0-based); or, when @span is non-zero, for the async span @span of
 * source @src. @side: RP_LINK_LAUNCH or RP_LINK_DEVICE.
 */
void rp_device_link(struct rp_device *d, uint32_t src, uint32_t tr, uint32_t depth,
		    const struct rp_frame *f, uint64_t span, uint8_t side,
		    uint64_t correlation);

/* The first member of struct rp_device: what the inline checks below read. */
struct rp_device_head {
	uint64_t plinks_live; /* links to open frames in use: 0 spares every END the search */
	uint8_t *cls;	      /* per name id, for ids below n_cls: its class (device.c),
				 | RP_DEVICE_CLS_QUIET (spans.c) */
	uint32_t n_cls;	      /* names classified: the table's names only grow, so new
				 ones are classified as they appear */
	bool armed;	      /* keeping spans (cfg.always, or device work seen) */
};

#define RP_DEVICE_CLS_DEVCAT 0x10 /* a name of a device-work category (device.c) */
/* A bit of cls[] the span sinks keep (spans.c) while the analysis is not armed, on a
 * name that is neither device work nor a step: its spans skip both hooks. Arming
 * clears it from every name (device.c, arm()), so it is also the hooks' armed test. */
#define RP_DEVICE_CLS_QUIET 0x80

void rp_device_span_slow(struct rp_device *d, const struct rp_names *names,
			 const struct rp_track *k, uint32_t tr, const struct rp_span_info *sp);

/**
 * rp_device_span() - a span completed normally (closed by its own END).
 * @k, @tr:	its track and the track's slot; k->f[sp->depth] is this span, the frames
 *		below it its ancestors (source lookup). On an async track sp->span is its
 *		span id (non-zero).
 * @sp:		the span as the stack machine closed it (its self_ns: its duration
 *		minus its children's)
 * Inline: until the first device work, a span of a name already classified and not
 * of a device category is left out (every span of a run without a GPU).
 */
static inline void rp_device_span(struct rp_device *d, const struct rp_names *names,
				  const struct rp_track *k, uint32_t tr,
				  const struct rp_span_info *sp)
{
	struct rp_device_head *h = (struct rp_device_head *)(void *)d;
	uint32_t name = sp->name; /* k->f[sp->depth]'s */

	if (!h->armed && name < h->n_cls && !(h->cls[name] & RP_DEVICE_CLS_DEVCAT))
		return;
	rp_device_span_slow(d, names, k, tr, sp);
}

void rp_device_track_end_slow(struct rp_device *d, uint32_t tr, uint32_t depth);

/** rp_device_track_end() - track slot @tr now has @depth frames: later links are stale.
 * Inline: once per END, and nothing to do without a live link (every END of a run
 * without device work). */
static inline void rp_device_track_end(struct rp_device *d, uint32_t tr, uint32_t depth)
{
	if (((const struct rp_device_head *)(const void *)d)->plinks_live != 0)
		rp_device_track_end_slow(d, tr, depth);
}

/** rp_device_report() - analyse what was kept into @out. 0 or -ENOMEM. */
int rp_device_report(const struct rp_device *d, const struct rp_names *names,
		     struct rp_report_device *out);

/* The classification, exposed for tests: torch's launch names and kernel names. */
bool rp_device_is_launch_name(const char *name);
bool rp_device_is_kernel_name(const char *name);
bool rp_device_is_source_name(const char *name);

#endif
