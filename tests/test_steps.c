// SPDX-License-Identifier: MIT
/*
 * Step statistics (engine/analyses/steps.c) through the engine: which spans are steps, how
 * they group into phases, per phase count/min/max/mean exactly and p50/p95/p99
 * within 1% of the exact order statistic of the generated durations (brute force:
 * sort and pick rank 1 + floor(q (n - 1))).
 */
#include "support.h"

#include <string.h>

#include "engine.h"
#include "steps.h"

static uint64_t rng = 0x9e3779b97f4a7c15u;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void test_steps_phase_rules(void **state)
{
	char buf[64];

	(void)state;
	rp_steps_phase_of("train/step", "step", buf, sizeof(buf));
	assert_string_equal(buf, "train");
	rp_steps_phase_of("decode:42", "step", buf, sizeof(buf));
	assert_string_equal(buf, "decode");
	rp_steps_phase_of("prefill/x:y", "", buf, sizeof(buf));
	assert_string_equal(buf, "prefill");
	rp_steps_phase_of("ProfilerStep#3", "user_annotation", buf, sizeof(buf));
	assert_string_equal(buf, "user_annotation");
	rp_steps_phase_of("/leading", "cat", buf, sizeof(buf));
	assert_string_equal(buf, "cat");
	/* no separator, no category (torch's record_function spans): the name itself,
	 * not an empty phase shown as "(none)" */
	rp_steps_phase_of("plain", "", buf, sizeof(buf));
	assert_string_equal(buf, "plain");
	rp_steps_phase_of("train_step", NULL, buf, sizeof(buf));
	assert_string_equal(buf, "train_step");
	rp_steps_phase_of("abcdef/x", "", buf, 4); /* cut to fit */
	assert_string_equal(buf, "abc");
}

struct ref {
	const char *phase;
	uint64_t *d;
	uint64_t n;
};

/* Spans on one thread, one after another; every step's duration kept in @refs. */
static void span(struct rp_engine *e, uint32_t name, uint64_t *t, uint64_t dur)
{
	struct rp_event b = { .ts = *t, .name = name, .kind = RP_EV_BEGIN };
	struct rp_event en = { .ts = *t + dur, .name = name, .kind = RP_EV_END };

	rp_engine_event(e, 0, 1, &b);
	rp_engine_event(e, 0, 1, &en);
	*t += dur + 1;
}

static const struct rp_report_step_phase *find_phase(const struct rp_report *r, const char *p)
{
	for (uint32_t i = 0; i < r->n_steps; i++)
		if (strcmp(r->steps[i].name, p) == 0)
			return &r->steps[i];
	return NULL;
}

static void check_phase(const struct rp_report *r, struct ref *f)
{
	const struct rp_report_step_phase *p = find_phase(r, f->phase);
	static const double qs[] = { 0.50, 0.95, 0.99 };
	uint64_t sum = 0;

	assert_non_null(p);
	qsort(f->d, f->n, sizeof(*f->d), cmp_u64);
	for (uint64_t i = 0; i < f->n; i++)
		sum += f->d[i];
	assert_int_equal(p->count, f->n);
	assert_int_equal(p->total_ns, sum);
	assert_int_equal(p->min_ns, f->d[0]);
	assert_int_equal(p->max_ns, f->d[f->n - 1]);
	for (int k = 0; k < 3; k++) {
		uint64_t exact = f->d[rp_sketch_rank(f->n, qs[k]) - 1];
		uint64_t got = k == 0 ? p->p50_ns : k == 1 ? p->p95_ns : p->p99_ns;
		double err = got > exact ? (double)(got - exact) : (double)(exact - got);

		if (err > 0.01 * (double)exact + 0.5)
			fail_msg("phase %s q%.2f: %llu vs exact %llu", f->phase, qs[k],
				 (unsigned long long)got, (unsigned long long)exact);
	}
}

/* Default rules: category "step"; phases by name prefix, else category. */
static void test_steps_default_category(void **state)
{
	enum { N = 5000 };
	static uint64_t dtrain[N], deval[N], dcat[N];
	struct ref refs[] = { { "train", dtrain, 0 }, { "eval", deval, 0 }, { "step", dcat, 0 } };
	struct rp_engine *e;
	struct rp_report r;
	uint32_t train, eval, plain, other, stepcat;
	uint64_t t = 1;

	(void)state;
	assert_int_equal(rp_engine_open(NULL, &e), 0);
	assert_int_equal(rp_engine_add_source(e, "gen", 0, RP_SRC_FILE), 0);
	train = rp_engine_name(e, 0, "train/step", "step", "", 0);
	eval = rp_engine_name(e, 0, "eval:step", "step", "", 0);
	plain = rp_engine_name(e, 0, "iteration", "step", "", 0);    /* phase "step" */
	other = rp_engine_name(e, 0, "train/forward", "cpu", "", 0); /* not a step */
	stepcat = rp_engine_name(e, 0, "stepper", "cpu", "", 0);     /* not a step either */
	for (int i = 0; i < 3 * N; i++) {
		int which = (int)(next() % 3);
		/* log-uniform-ish durations across 1 us .. 100 ms */
		uint64_t d = 1000 + next() % (1u << (10 + next() % 17));
		struct ref *f = &refs[which];

		if (f->n == N)
			continue;
		f->d[f->n++] = d;
		span(e, which == 0 ? train : which == 1 ? eval : plain, &t, d);
		span(e, next() % 2 ? other : stepcat, &t, 1 + next() % 1000);
	}
	assert_int_equal(rp_engine_report(e, &r), 0);
	assert_int_equal(r.n_steps, 3);
	assert_int_equal(r.steps_folded, 0);
	for (int k = 0; k < 3; k++)
		check_phase(&r, &refs[k]);
	/* Step ordinals: every recorded step numbered in completion order. */
	uint64_t ord = 0;
	for (uint32_t i = 0; i < r.recorder.n_spans; i++) {
		const struct rp_report_rspan *s = &r.recorder.spans[i];
		bool is_step = strcmp(r.fns[s->fn].category, "step") == 0;

		assert_int_equal(s->step != 0, is_step);
		if (is_step)
			assert_int_equal(s->step, ++ord);
	}
	assert_int_equal(ord, refs[0].n + refs[1].n + refs[2].n);
	rp_report_free(&r);
	rp_engine_close(e);
}

/* --step-name PREFIX and --step-category "": only the name rule. */
static void test_steps_name_rule(void **state)
{
	static uint64_t dp[300], dd[300];
	struct ref refs[] = { { "prefill", dp, 0 }, { "decode", dd, 0 } };
	struct rp_engine_cfg cfg;
	struct rp_engine *e;
	struct rp_report r;
	uint32_t pre, dec, cat, no;
	uint64_t t = 1;

	(void)state;
	rp_engine_cfg_default(&cfg);
	cfg.step_category = "";
	cfg.step_name = "llm.";
	assert_int_equal(rp_engine_open(&cfg, &e), 0);
	assert_int_equal(rp_engine_add_source(e, "gen", 0, RP_SRC_FILE), 0);
	/* "llm.prefill/..." -> prefix before '/' is "llm.prefill": name the phase so */
	pre = rp_engine_name(e, 0, "llm.prefill:batch", "serve", "", 0);
	dec = rp_engine_name(e, 0, "llm.decode:token", "serve", "", 0);
	cat = rp_engine_name(e, 0, "x", "step", "", 0);	  /* category rule is off */
	no = rp_engine_name(e, 0, "llm", "serve", "", 0); /* shorter than the prefix */
	refs[0].phase = "llm.prefill";
	refs[1].phase = "llm.decode";
	for (int i = 0; i < 300; i++) {
		dp[refs[0].n++] = 5000 + next() % 100000;
		span(e, pre, &t, dp[refs[0].n - 1]);
		dd[refs[1].n++] = 100 + next() % 5000;
		span(e, dec, &t, dd[refs[1].n - 1]);
		span(e, cat, &t, 10);
		span(e, no, &t, 10);
	}
	assert_int_equal(rp_engine_report(e, &r), 0);
	assert_int_equal(r.n_steps, 2);
	check_phase(&r, &refs[0]);
	check_phase(&r, &refs[1]);
	rp_report_free(&r);
	rp_engine_close(e);
}

/* Past RP_STEPS_MAX_PHASES phases: "[other]", counted. */
static void test_steps_phase_cap(void **state)
{
	struct rp_engine *e;
	struct rp_report r;
	uint64_t t = 1, extra = 10;
	char name[32];

	(void)state;
	assert_int_equal(rp_engine_open(NULL, &e), 0);
	assert_int_equal(rp_engine_add_source(e, "gen", 0, RP_SRC_FILE), 0);
	for (uint32_t i = 0; i < RP_STEPS_MAX_PHASES + extra; i++) {
		snprintf(name, sizeof(name), "p%u/step", i);
		span(e, rp_engine_name(e, 0, name, "step", "", 0), &t, 100 + i);
		span(e, rp_engine_name(e, 0, name, "step", "", 0), &t, 100 + i);
	}
	assert_int_equal(rp_engine_report(e, &r), 0);
	assert_int_equal(r.n_steps, RP_STEPS_MAX_PHASES + 1);
	assert_int_equal(r.steps_folded, 2 * extra);
	assert_non_null(find_phase(&r, RP_STEPS_OTHER));
	assert_int_equal(find_phase(&r, RP_STEPS_OTHER)->count, 2 * extra);
	assert_int_equal(find_phase(&r, RP_STEPS_OTHER)->min_ns, 100 + RP_STEPS_MAX_PHASES);
	rp_report_free(&r);
	rp_engine_close(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_steps_phase_rules),
		cmocka_unit_test(test_steps_default_category),
		cmocka_unit_test(test_steps_name_rule),
		cmocka_unit_test(test_steps_phase_cap),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
