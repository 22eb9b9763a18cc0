// SPDX-License-Identifier: MIT
/*
 * test_torch: `--nesting torch` against torch itself. The oracle is PyTorch's own
 * key_averages() (Debian's python3-torch, for /usr/bin/python3; the test is skipped,
 * exit 77, where it is missing): a small model (two linear layers, cross entropy,
 * SGD) trains for 5 steps under torch.autograd.profiler.profile(), each step inside
 * record_function("train_step"); the profile is exported with export_chrome_trace()
 * and key_averages() gives, per op, the call count and self CPU time (integer µs).
 * The trace goes through the Chrome importer with torch nesting, and every op of
 * key_averages() must have exactly torch's call count and self time (ns = µs x 1000)
 * in the report. The default nesting must differ on at least one op when torch
 * un-nested a child (the difference docs/outputs.md explains), and the steps must be
 * found by name (--step-name train_step).
 */
#include <inttypes.h>
#include <string.h>

#include "import_chrome.h"
#include "support.h"

static const char gen_py[] =
	"import sys, torch\n"
	"torch.manual_seed(0)\n"
	"torch.set_num_threads(1)\n"
	"m = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),\n"
	"                        torch.nn.Linear(128, 10))\n"
	"opt = torch.optim.SGD(m.parameters(), lr=0.01)\n"
	"x = torch.randn(32, 64)\n"
	"y = torch.randint(0, 10, (32,))\n"
	"with torch.autograd.profiler.profile() as prof:\n"
	"    for i in range(5):\n"
	"        with torch.autograd.profiler.record_function('train_step'):\n"
	"            opt.zero_grad()\n"
	"            torch.nn.functional.cross_entropy(m(x), y).backward()\n"
	"            opt.step()\n"
	"prof.export_chrome_trace(sys.argv[1])\n"
	"for e in prof.key_averages():\n"
	"    print('%d\\t%d\\t%s' % (e.count, e.self_cpu_time_total, e.key))\n";

static char dir[40];

struct op {
	char name[256];
	uint64_t calls;
	int64_t self_us;
};

static const struct rp_report_fn *fn_named(const struct rp_report *r, const char *name)
{
	for (uint32_t i = 0; i < r->n_fns; i++)
		if (strcmp(r->fns[i].name, name) == 0)
			return &r->fns[i];
	return NULL;
}

static void analyze(const char *path, bool torch, struct rp_report *r)
{
	struct rp_engine_cfg cfg;
	struct rp_engine *e;
	char why[RP_WHY_MAX] = "";

	rp_engine_cfg_default(&cfg);
	cfg.torch_nesting = torch;
	cfg.step_name = "train_step";
	assert_int_equal(rp_engine_open(&cfg, &e), 0);
	if (rp_import_chrome(e, path, NULL, NULL, why) != 0)
		fail_msg("%s", why);
	assert_int_equal(rp_engine_report(e, r), 0);
	rp_engine_close(e);
}

static void test_torch_key_averages(void **state)
{
	char *out = NULL, *line, *save = NULL, trace[80], script[80];
	struct op ops[400];
	unsigned n = 0, differ = 0;
	struct rp_report r, d;
	FILE *f;

	(void)state;
	snprintf(script, sizeof(script), "%s/gen.py", dir);
	snprintf(trace, sizeof(trace), "%s/trace.json", dir);
	f = fopen(script, "w");
	assert_non_null(f);
	fputs(gen_py, f);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(rp_test_sh(&out, NULL, "/usr/bin/python3 %s %s", script, trace), 0);
	for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		long long calls, self;
		int at = 0;

		assert_true(n < sizeof(ops) / sizeof(ops[0]));
		assert_int_equal(sscanf(line, "%lld\t%lld\t%n", &calls, &self, &at), 2);
		snprintf(ops[n].name, sizeof(ops[n].name), "%s", line + at);
		ops[n].calls = (uint64_t)calls;
		ops[n++].self_us = self;
	}
	free(out);
	assert_true(n > 20); /* the model's ops, forward and backward */
	analyze(trace, true, &r);
	analyze(trace, false, &d);
	for (unsigned i = 0; i < n; i++) {
		const struct rp_report_fn *t = fn_named(&r, ops[i].name),
					  *g = fn_named(&d, ops[i].name);

		if (t == NULL)
			fail_msg("%s: not in the report", ops[i].name);
		if (t->calls != ops[i].calls || (int64_t)t->self_ns != ops[i].self_us * 1000)
			fail_msg("%s: torch %" PRIu64 " calls, self %" PRId64
				 " us; ringprof --nesting "
				 "torch %" PRIu64 " calls, self %" PRIu64 " ns",
				 ops[i].name, ops[i].calls, ops[i].self_us, t->calls, t->self_ns);
		assert_non_null(g);
		assert_int_equal(g->calls, t->calls);
		differ += g->self_ns != t->self_ns;
	}
	/* Un-nested children are why the modes differ; when torch un-nested none (the
	 * clamped count is 0), they agree on every op. */
	if (d.anomalies[RP_ANOM_CLAMPED] > 0)
		assert_true(differ > 0);
	else
		assert_int_equal(differ, 0);
	/* The training steps, found by name in the torch trace: one phase, named after
	 * them (the trace has no categories), 5 steps. */
	assert_int_equal(r.n_steps, 1);
	assert_string_equal(r.steps[0].name, "train_step");
	assert_int_equal(r.steps[0].count, 5);
	rp_report_free(&r);
	rp_report_free(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_torch_key_averages),
	};
	char cmd[100];
	int rc;

	if (rp_test_sh(NULL, NULL, "/usr/bin/python3 -c 'import torch' 2>/dev/null") != 0) {
		fprintf(stderr, "torch not importable by /usr/bin/python3 (Debian: python3-torch): "
				"skipped\n");
		return 77;
	}
	snprintf(dir, sizeof(dir), "/tmp/rp_test_torch.XXXXXX");
	if (mkdtemp(dir) == NULL)
		return 1;
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		return 1;
	return rc;
}
