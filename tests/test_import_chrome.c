// SPDX-License-Identifier: MIT
/*
 * The Chrome importer's ordering: spans sorted per track (a counting sort by track,
 * then the few out of order merged back) and the generated events merged from
 * their per-track runs and given to the engine in stretches (rp_engine_run()),
 * against the plain path (rp_import_chrome_plain: one sort of all spans, one sort of
 * all events, the engine one event at a time). The oracle is that plain path,
 * which shares none of that code: every byte of the JSON report and of the flight
 * recorder's Chrome export must be the same, on random traces made to hit every
 * ordering case (many tracks interleaved, X events shuffled, B/E pairs, equal
 * starts and lengths, zero lengths, overhanging children, flows with and without a
 * span's correlation, counters between a track's events, stretches longer than a
 * buffer, pids and tids sharing their first bytes), with ringprof's and torch's
 * nesting. And the importer's name and track hints against the table itself:
 * names that differ only in their middle bytes or their length.
 */
#include <stdarg.h>
#include <string.h>

#include "import_chrome.h"
#include "render.h"
#include "render_export.h"
#include "support.h"

struct text {
	char *p;
	size_t n, cap;
};

static void put(struct text *t, const char *fmt, ...)
{
	va_list ap;
	int k;

	for (;;) {
		va_start(ap, fmt);
		k = vsnprintf(t->p + t->n, t->cap - t->n, fmt, ap);
		va_end(ap);
		assert_true(k >= 0);
		if ((size_t)k < t->cap - t->n)
			break;
		t->cap = 2 * t->cap + (size_t)k + 1;
		t->p = realloc(t->p, t->cap);
		assert_non_null(t->p);
	}
	t->n += (size_t)k;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(uint32_t n)
{
	return (uint32_t)rp_test_rnd(&rng, n);
}

static const char *const names[] = {
	"aten::add_", "aten::addmm", "aten::add", "aten::matmul", "cudaLaunchKernel",
	"void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>",
	"void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>",
	"void at::native::vectorized_elementwise_kernel<2, at::native::FillFunctor<float>>",
	"f", "g", "ProfilerStep#1", "ProfilerStep#12", "x\"y",
};

static const char *const cats[] = { "cpu_op", "kernel", "cuda_runtime", "gpu_memcpy", "" };

/* One random trace of about @n events over @ntracks (pid, tid) pairs. */
static char *make_trace(unsigned n, unsigned ntracks, size_t *len)
{
	struct text t = { NULL, 0, 0 };
	int64_t *now = calloc(ntracks, sizeof(*now));
	unsigned corr = 1;

	assert_non_null(now);
	put(&t, "{\"traceEvents\":[\n");
	for (unsigned i = 0; i < n; i++) {
		unsigned tr = rnd(ntracks) % (1 + rnd(ntracks)); /* some tracks busier */
		unsigned pid = 1000 + tr % 3, tid = 100 + tr / 3;
		const char *name = names[rnd(sizeof(names) / sizeof(names[0]))];
		const char *cat = cats[rnd(sizeof(cats) / sizeof(cats[0]))];
		int64_t ts = now[tr] + (rnd(4) == 0 ? 0 : rnd(5)), dur = rnd(6) == 0 ? 0 : rnd(40);
		unsigned kind = rnd(20);

		if (rnd(10) == 0) /* out of file order */
			ts = ts > 30 ? ts - rnd(30) : 0;
		now[tr] = ts;
		if (i)
			put(&t, ",\n");
		if (kind < 12) {
			const char *nm = name[0] == 'x' ? "x\\\"y" : name;

			put(&t, "{\"ph\":\"X\",\"name\":\"%s\",\"cat\":\"%s\",\"pid\":%u,"
				"\"tid\":%u,\"ts\":%lld.%03u,\"dur\":%lld", nm, cat, pid, tid,
			    (long long)ts, rnd(3) * 500, (long long)dur);
			if (rnd(3) == 0)
				put(&t, ",\"args\":{\"correlation\":%u}",
				    rnd(2) ? corr++ : rnd(corr));
			put(&t, "}");
		} else if (kind < 14) {
			put(&t, "{\"ph\":\"B\",\"name\":\"%s\",\"pid\":%u,\"tid\":%u,\"ts\":%lld}",
			    rnd(2) ? "f" : "g", pid, tid, (long long)ts);
		} else if (kind < 16) {
			put(&t, "{\"ph\":\"E\",\"pid\":%u,\"tid\":%u,\"ts\":%lld}", pid, tid,
			    (long long)ts + rnd(50));
		} else if (kind < 18) {
			put(&t, "{\"ph\":\"%s\",\"name\":\"ac2g\",\"cat\":\"ac2g\",\"id\":%u,"
				"\"pid\":%u,\"tid\":%u,\"ts\":%lld}", rnd(2) ? "s" : "f",
			    rnd(2) ? corr++ : rnd(corr), pid, tid, (long long)ts);
		} else {
			put(&t, "{\"ph\":\"C\",\"name\":\"mem\",\"pid\":%u,\"tid\":%u,\"ts\":%lld,"
				"\"args\":{\"bytes\":%u}}", pid, tid, (long long)ts, rnd(1000));
		}
	}
	put(&t, "\n]}\n");
	free(now);
	*len = t.n;
	return t.p;
}

/* The JSON report and the recorder's Chrome export of @trace, by one path. */
static char *analyze(const char *trace, size_t len, bool plain, bool torch)
{
	struct rp_engine_cfg cfg;
	struct rp_export_opts xo = { 0 };
	char why[RP_WHY_MAX] = "", *buf = NULL;
	size_t n = 0;
	struct rp_engine *e;
	struct rp_report rep;
	FILE *f = open_memstream(&buf, &n);

	assert_non_null(f);
	rp_engine_cfg_default(&cfg);
	cfg.torch_nesting = torch;
	assert_int_equal(rp_engine_open(&cfg, &e), 0);
	rp_import_chrome_plain = plain;
	if (rp_import_chrome_buf(e, trace, len, "t.json", why) != 0)
		fail_msg("import: %s", why);
	rp_import_chrome_plain = false;
	assert_int_equal(rp_engine_report(e, &rep), 0);
	assert_int_equal(rp_render_json(&rep, f), 0);
	assert_int_equal(rp_render_chrome(&rep, f, &xo), 0);
	assert_int_equal(fclose(f), 0);
	rp_report_free(&rep);
	rp_engine_close(e);
	return buf;
}

static void same_both_ways(unsigned events, unsigned tracks)
{
	size_t len;
	char *trace = make_trace(events, tracks, &len);

	for (int torch = 0; torch < 2; torch++) {
		char *a = analyze(trace, len, true, torch), *b = analyze(trace, len, false, torch);

		if (strcmp(a, b) != 0) {
			size_t i = 0;

			while (a[i] == b[i])
				i++;
			fail_msg("%u events, %u tracks, torch %d: differ at byte %zu:\n"
				 "%.200s\n--\n%.200s", events, tracks, torch, i,
				 a + (i > 80 ? i - 80 : 0), b + (i > 80 ? i - 80 : 0));
		}
		free(a);
		free(b);
	}
	free(trace);
}

static void test_import_chrome_merged_feed_matches_plain(void **state)
{
	static const unsigned sizes[][2] = {
		{ 1, 1 }, { 5, 1 }, { 40, 2 }, { 200, 3 }, { 500, 1 }, { 2000, 5 },
		{ 3000, 40 }, { 6000, 300 },
	};

	(void)state;
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		for (unsigned round = 0; round < 4; round++)
			same_both_ways(sizes[i][0], sizes[i][1]);
}

/* One track, its events far apart from any other's: stretches longer than a buffer. */
static void test_import_chrome_long_stretches(void **state)
{
	struct text t = { NULL, 0, 0 };

	(void)state;
	put(&t, "[");
	for (unsigned i = 0; i < 1000; i++) /* nested 3 deep, back to back */
		put(&t, "%s{\"ph\":\"X\",\"name\":\"%s\",\"pid\":1,\"tid\":1,\"ts\":%u,\"dur\":%u}",
		    i ? "," : "", i % 3 == 0 ? "a" : i % 3 == 1 ? "b" : "c", 10 * (i / 3) + i % 3,
		    9 - 2 * (i % 3));
	put(&t, ",{\"ph\":\"X\",\"name\":\"z\",\"pid\":2,\"tid\":2,\"ts\":5000,\"dur\":1}");
	put(&t, ",{\"ph\":\"C\",\"name\":\"m\",\"pid\":1,\"tid\":1,\"ts\":1234,"
		"\"args\":{\"v\":3}}]");
	for (int torch = 0; torch < 2; torch++) {
		char *a = analyze(t.p, t.n, true, torch), *b = analyze(t.p, t.n, false, torch);

		assert_string_equal(a, b);
		assert_non_null(strstr(a, "\"name\":\"a\",\"category\":\"\",\"file\":\"\","
					  "\"line\":0,\"calls\":334,"));
		free(a);
		free(b);
	}
	free(t.p);
}

/* Names that share their first and last eight bytes and their length, or differ only
 * in length: each its own function, whatever the hints remember. */
static void test_import_chrome_hints_tell_names_apart(void **state)
{
	static const char *const n[] = {
		"kernel<aaaaaaaaa, 1>", "kernel<aaaaaaaab, 1>", "kernel<aaaaaaaa, 1>", "k", "kk",
		"abcd", "abcde", "abc", "abcdefgh", "abcdefghi", "abcdefgh12345678",
		"abcdefgh02345678", "",
	};
	const size_t nn = sizeof(n) / sizeof(n[0]);
	struct text t = { NULL, 0, 0 };
	char why[RP_WHY_MAX] = "";
	struct rp_engine *e;
	struct rp_report rep;

	(void)state;
	put(&t, "[");
	for (unsigned i = 0; i < 20 * nn; i++) /* each name i % nn + 1 times in 20 rounds */
		for (unsigned k = 0; k <= i % nn; k++)
			put(&t, "%s{\"ph\":\"X\",\"name\":\"%s\",\"cat\":\"%s\",\"pid\":\"%s\","
				"\"tid\":%u,\"ts\":%u,\"dur\":1}", i + k ? "," : "", n[i % nn],
			    k % 2 ? "c" : "cc", k % 2 ? "p" : "pp", k % 3, 20 * i + k);
	put(&t, "]");
	assert_int_equal(rp_engine_open(NULL, &e), 0);
	if (rp_import_chrome_buf(e, t.p, t.n, "t.json", why) != 0)
		fail_msg("import: %s", why);
	assert_int_equal(rp_engine_report(e, &rep), 0);
	for (size_t i = 0; i < nn; i++) {
		uint64_t calls[2] = { 0, 0 }; /* category "cc", "c" */

		for (uint32_t j = 0; j < rep.n_fns; j++)
			if (strcmp(rep.fns[j].name, n[i]) == 0)
				calls[strcmp(rep.fns[j].category, "c") == 0] += rep.fns[j].calls;
		/* k = 0..i: "cc" for even k, "c" for odd, 20 rounds */
		assert_int_equal(calls[0], 20 * (i / 2 + 1));
		assert_int_equal(calls[1], 20 * ((i + 1) / 2));
	}
	rp_report_free(&rep);
	rp_engine_close(e);
	free(t.p);
}

/* Names alike but for their first, middle or last bytes, more than the hints hold:
 * every slot pair sees names its hint must not take for its own. */
static void test_import_chrome_hints_collide(void **state)
{
	static const char *const fmt[] = { "%03ukernel<aaaaaaaa>", "kernel<a%03uaaaaaaa>",
					   "kernel<aaaaaaaa%03u>" };
	struct text t = { NULL, 0, 0 };
	char why[RP_WHY_MAX] = "", name[64];
	struct rp_engine *e;
	struct rp_report rep;
	unsigned found = 0;

	(void)state;
	put(&t, "[");
	for (unsigned i = 0; i < 3 * 300 * 4; i++) { /* 300 names of each form, 4 rounds */
		snprintf(name, sizeof(name), fmt[i % 3], (i / 3) % 300);
		put(&t, "%s{\"ph\":\"X\",\"name\":\"%s\",\"pid\":1,\"tid\":1,\"ts\":%u,"
			"\"dur\":%u}", i ? "," : "", name, 400 * i, 1 + (i / 3) % 300);
	}
	put(&t, "]");
	assert_int_equal(rp_engine_open(NULL, &e), 0);
	if (rp_import_chrome_buf(e, t.p, t.n, "t.json", why) != 0)
		fail_msg("import: %s", why);
	assert_int_equal(rp_engine_report(e, &rep), 0);
	for (uint32_t j = 0; j < rep.n_fns; j++) {
		unsigned k;

		for (unsigned f = 0; f < 3; f++) {
			for (k = 0; k < 300; k++) {
				snprintf(name, sizeof(name), fmt[f], k);
				if (strcmp(rep.fns[j].name, name) == 0)
					break;
			}
			if (k < 300) { /* each call of it lasted 1 + k us */
				assert_int_equal(rep.fns[j].calls, 4);
				assert_int_equal(rep.fns[j].cum_ns, 4 * 1000 * (1 + k));
				found++;
			}
		}
	}
	assert_int_equal(found, 900);
	rp_report_free(&rep);
	rp_engine_close(e);
	free(t.p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_import_chrome_merged_feed_matches_plain),
		cmocka_unit_test(test_import_chrome_long_stretches),
		cmocka_unit_test(test_import_chrome_hints_tell_names_apart),
		cmocka_unit_test(test_import_chrome_hints_collide),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
