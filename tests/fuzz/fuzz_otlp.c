// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the OTLP decoders and the reorder buffer (engine/ingest/otlp.c):
 * the first byte picks protobuf ('p', or any other) or JSON ('j'); the rest is one
 * request body, decoded into a receiver with small caps that feeds an engine with
 * small caps, the horizon advanced half way through and at the end, as a live engine
 * would. Any input must decode or fail with a reason, and every span taken must be
 * fed, late, or counted.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_cfg.h"
#include "otlp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int add_half(void *ctx, const struct rp_otlp_span *sp)
{
	struct rp_otlp *o = ctx;
	int err = rp_otlp_add(o, sp);

	/* a horizon passing mid-request: later spans may be late */
	rp_otlp_advance(o, sp->start / 2 + sp->end / 2);
	return err;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rp_otlp_decode_opts dopt = { .category_attr = "cat", .max_spans = 64 };
	struct rp_otlp_cfg ocfg = { .max_pending = 32, .max_traces = 4, .max_sources = 2 };
	struct rp_otlp_decode_stats ds;
	struct rp_otlp_stats os;
	struct rp_engine_cfg cfg;
	char why[RP_WHY_MAX] = "";
	struct rp_engine *e;
	struct rp_report r;
	struct rp_otlp *o;
	int err;

	if (size == 0)
		return 0;
	fuzz_small_cfg(&cfg);
	if (rp_engine_open(&cfg, &e) != 0 || rp_otlp_open(e, &ocfg, &o) != 0)
		abort(); /* a valid configuration: the target must run */
	if (data[0] == 'j')
		err = rp_otlp_decode_json(data + 1, size - 1, &dopt, add_half, o, &ds, why);
	else
		err = rp_otlp_decode_pb(data + 1, size - 1, &dopt, add_half, o, &ds, why);
	if (err != 0 && (err != -EINVAL || why[0] == '\0'))
		abort(); /* malformed input always says why */
	rp_otlp_finish(o);
	rp_otlp_stats(o, &os);
	if (os.pending != 0 || os.traces != 0 || os.released != os.spans)
		abort(); /* finish feeds everything held and ends every trace */
	if (rp_engine_report(e, &r) == 0) {
		for (uint32_t i = 0; i < r.n_fns; i++)
			if (r.fns[i].primitive_calls > r.fns[i].calls)
				abort();
		rp_report_free(&r);
	}
	rp_otlp_close(o);
	rp_engine_close(e);
	return 0;
}
