// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for `ringprof analyze` minus the file: a Chrome trace from the
 * input through the reader, the nesting (sort, containment, clamping, B/E pairing)
 * and the engine to a report (torch nesting for odd input sizes). Small caps, so the track, name, depth and CCT caps
 * are hit too. Any input must give a report or a clean error, and a report must be
 * consistent: every edge and node index inside the report.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_cfg.h"
#include "import_chrome.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const struct rp_report *r, bool torch)
{
	for (uint32_t i = 0; i < r->n_edges; i++)
		if (r->edges[i].caller >= r->n_fns || r->edges[i].callee >= r->n_fns)
			abort();
	for (uint32_t i = 1; i < r->n_nodes; i++)
		if (r->nodes[i].parent >= i || r->nodes[i].fn >= r->n_fns)
			abort();
	for (uint32_t i = 0; i < r->n_fns; i++)
		if (r->fns[i].primitive_calls > r->fns[i].calls ||
		    (!torch && r->fns[i].self_ns > r->fns[i].total_ns) || /* torch: may be < 0 */
		    r->fns[i].cum_ns > r->fns[i].total_ns)
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rp_engine_cfg cfg;
	char why[RP_WHY_MAX] = "";
	struct rp_engine *e;
	struct rp_report r;

	fuzz_small_cfg(&cfg);
	cfg.torch_nesting = size & 1; /* both nestings: odd sizes run torch's */
	if (rp_engine_open(&cfg, &e) != 0)
		abort(); /* a valid configuration: the target must run */
	if (rp_import_chrome_buf(e, data, size, "fuzz", why) == 0 &&
	    rp_engine_report(e, &r) == 0) {
		check(&r, cfg.torch_nesting);
		rp_report_free(&r);
	}
	rp_engine_close(e);
	return 0;
}
