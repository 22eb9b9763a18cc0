// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for agent-toolkit traces (`ringprof analyze --format aiq` and the
 * engine's own formats): the input through the streaming reader into both the engine
 * and the toolkit analysis, with small caps so that every cap is hit. Any input must
 * give results or a clean error; the results must be consistent.
 */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_cfg.h"
#include "aiq.h"
#include "import_nat.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rp_nat_caps caps = { .max_events = 256, .max_request_steps = 64 };
	struct rp_engine_cfg cfg;
	char why[RP_WHY_MAX] = "";
	struct rp_engine *e;
	struct rp_report r;
	struct rp_aiq a;

	fuzz_small_cfg(&cfg);
	if (rp_engine_open(&cfg, &e) != 0 || rp_aiq_init(&a, 64) != 0)
		abort(); /* a valid configuration: the target must run */
	if (rp_import_nat_buf(e, &a, &caps, data, size, "fuzz", NULL, why) == 0) {
		if (rp_aiq_finish(&a) == 0 && rp_engine_report(e, &r) == 0) {
			for (uint32_t i = 0; i < r.n_fns; i++)
				if (r.fns[i].primitive_calls > r.fns[i].calls)
					abort();
			rp_report_free(&r);
		}
	}
	rp_aiq_free(&a);
	rp_engine_close(e);
	return 0;
}
