/* SPDX-License-Identifier: MIT */
/*
 * The producer's clock: invariant TSC when the CPU has one (cpuid 0x80000007
 * EDX bit 8), else CLOCK_MONOTONIC, and the tick->ns conversion recorded in the
 * segment header (struct rp_wire_clock).
 */
#ifndef RP_PRODUCER_CLOCK_H
#define RP_PRODUCER_CLOCK_H

#include <stdbool.h>
#include <stdint.h>

#include <ringprof/wire.h>

struct rp_clock_cfg {
	bool want_tsc;		/* false: RINGPROF_CLOCK=monotonic */
	uint32_t calib_us;	/* calibration window against CLOCK_MONOTONIC */
};

/* True when rdtsc is invariant (constant rate, runs in deep C-states). */
bool rp_clock_tsc_invariant(void);

/* Chooses the source and fills @out: reference pair and mult/shift. Spins for
 * cfg->calib_us when the source is the TSC. */
void rp_clock_calibrate(const struct rp_clock_cfg *cfg, struct rp_wire_clock *out);

#endif
