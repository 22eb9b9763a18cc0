/* SPDX-License-Identifier: MIT */
/*
 * Who made a report, and where its clock sits in wall time: the host name, the
 * kernel's boot id (CLOCK_MONOTONIC restarts at each boot, so two sources share a
 * monotonic clock exactly when they share a boot id) and an anchor, a
 * CLOCK_REALTIME / CLOCK_MONOTONIC pair read together. `ringprof merge` maps one
 * host's monotonic times onto another's through the anchors (merge.h,
 * rp_report_align()). Live sources share the engine's host (shared memory), so the
 * engine reads these itself at each report.
 */
#ifndef RP_ENGINE_HOSTID_H
#define RP_ENGINE_HOSTID_H

#include <stdint.h>

struct rp_host_id {
	char host[256];	  /* gethostname(); "" if it failed */
	char boot_id[40]; /* /proc/sys/kernel/random/boot_id without the newline; "" if unread */
	uint64_t realtime_ns, monotonic_ns; /* the anchor; 0, 0 if a clock failed */
};

/**
 * rp_clock_anchor() - a CLOCK_REALTIME reading and the CLOCK_MONOTONIC time of the same
 * instant: the midpoint of two monotonic reads around the realtime one, the tightest of
 * a few tries, so the pair is off by half a bracket (tens of ns). @return 0 or -errno.
 */
int rp_clock_anchor(uint64_t *realtime_ns, uint64_t *monotonic_ns);

/* Fills @h; what cannot be read stays "" or 0. */
void rp_host_id_read(struct rp_host_id *h);

#endif
