/* SPDX-License-Identifier: MIT */
/*
 * The engine configuration the trace fuzzers run: the defaults with every cap small, so
 * that each cap is hit, and windows of 10 ms so that they rotate within a small trace.
 */
#ifndef RP_FUZZ_CFG_H
#define RP_FUZZ_CFG_H

#include "engine.h"

static inline void fuzz_small_cfg(struct rp_engine_cfg *cfg)
{
	rp_engine_cfg_default(cfg);
	cfg->max_names = 16;
	cfg->max_tracks = 4;
	cfg->max_depth = 8;
	cfg->max_cct_nodes = 16;
	cfg->max_sources = 2;
	cfg->max_sketch_names = 8;
	cfg->max_window_names = 4;
	cfg->max_counters = 4;
	cfg->recorder_spans = 64;
	cfg->recorder_samples = 16;
	cfg->dev.max_spans = 64;
	cfg->dev.max_events = 32;
	cfg->window_ns[0] = 10000000;
	cfg->window_ns[1] = 100000000;
	cfg->window_ns[2] = 1000000000;
}

#endif
