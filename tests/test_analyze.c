// SPDX-License-Identifier: MIT
/*
 * `ringprof analyze` over Chrome traces, against a brute-force reference computed in
 * the test from the same spans. The reference does not use a stack: it sorts the
 * spans (start, longer first, file order) and gives each span as parent the latest
 * earlier span that contains it (positive length; it starts before that span's end,
 * or exactly at it if it has zero length), clamping the child's end to the parent's.
 * From the parent links: calls, primitive calls (no ancestor of the same name), self
 * (clamped duration minus the children's), cum (clamped durations of primitive
 * calls), per name.
 *
 * Traces: generated ones (recursion, X events shuffled in the file, B/E pairs,
 * children overhanging their parent by 1 us, zero lengths, several pids and tids),
 * written as JSON, also gzipped; and the torch sample in tests/data.
 */
#include <string.h>
#include <zlib.h>

#include "import_chrome.h"
#include "support.h"

struct rspan {
	int64_t s, e;		/* ns; e is clamped by the reference */
	int name;
	int track;
	int seq;		/* file order */
	int parent;
};

#define MAXN 20000
#define MAXNAMES 400

static struct rspan sp[MAXN];
static int n;
static uint64_t ref_clamped;	/* clamps the reference made */
static char names[MAXNAMES][256];
static int nnames;

static int name_id(const char *s)
{
	for (int i = 0; i < nnames; i++)
		if (strcmp(names[i], s) == 0)
			return i;
	assert_true(nnames < MAXNAMES);
	snprintf(names[nnames], sizeof(names[0]), "%s", s);
	return nnames++;
}

static int cmp_rspan(const void *a, const void *b)
{
	const struct rspan *x = a, *y = b;

	if (x->track != y->track)
		return x->track - y->track;
	if (x->s != y->s)
		return x->s < y->s ? -1 : 1;
	if (x->e - x->s != y->e - y->s)
		return x->e - x->s > y->e - y->s ? -1 : 1;
	return x->seq - y->seq;
}

/* Parent links by the containment rule, scanning back: no stack involved. */
static void reference_nesting(void)
{
	qsort(sp, (size_t)n, sizeof(sp[0]), cmp_rspan);
	ref_clamped = 0;
	for (int i = 0; i < n; i++) {
		sp[i].parent = -1;
		for (int j = i - 1; j >= 0 && sp[j].track == sp[i].track; j--) {
			if (sp[j].e == sp[j].s)
				continue;
			if (sp[i].s < sp[j].e || (sp[i].s == sp[j].e && sp[i].e == sp[i].s)) {
				sp[i].parent = j;
				if (sp[i].e > sp[j].e) {
					sp[i].e = sp[j].e;
					ref_clamped++;
				}
				break;
			}
		}
	}
}

struct ref {
	uint64_t calls, prim, self, cum;
};

static void reference_stats(struct ref *r)
{
	memset(r, 0, sizeof(*r) * MAXNAMES);
	for (int i = 0; i < n; i++) {
		uint64_t dur = (uint64_t)(sp[i].e - sp[i].s), kids = 0;
		bool prim = true;

		for (int p = sp[i].parent; p >= 0; p = sp[p].parent)
			prim = prim && sp[p].name != sp[i].name;
		for (int c = i + 1; c < n && sp[c].track == sp[i].track; c++)
			if (sp[c].parent == i)
				kids += (uint64_t)(sp[c].e - sp[c].s);
		r[sp[i].name].calls++;
		r[sp[i].name].prim += prim;
		r[sp[i].name].self += dur - kids;
		r[sp[i].name].cum += prim ? dur : 0;
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* Overall concurrency by brute force over elementary segments of the clamped spans:
 * time per level over [min start, max end], lower-step percentiles, max. */
static void reference_concurrency(uint32_t pct[4], uint32_t *max)
{
	static const unsigned ps[4] = { 50, 90, 95, 99 };
	uint64_t *t = malloc(sizeof(*t) * 2 * (size_t)n), *at = calloc((size_t)n + 1, 8);
	uint64_t total = 0, cum;
	int nt = 0;

	for (int i = 0; i < n; i++) {
		t[nt++] = (uint64_t)sp[i].s;
		t[nt++] = (uint64_t)sp[i].e;
	}
	qsort(t, (size_t)nt, sizeof(*t), cmp_u64);
	*max = 0;
	for (int k = 0; k + 1 < nt; k++) {
		uint64_t a = t[k], b = t[k + 1];
		uint32_t level = 0;
		if (a == b)
			continue;
		for (int i = 0; i < n; i++)
			level += (uint64_t)sp[i].s <= a && b <= (uint64_t)sp[i].e;
		at[level] += b - a;
		total += b - a;
		*max = level > *max ? level : *max;
	}
	for (int q = 0; q < 4; q++) {
		cum = 0;
		for (uint32_t c = 0; c <= (uint32_t)n; c++) {
			cum += at[c];
			if (at[c] && cum * 100 >= ps[q] * total) {
				pct[q] = c;
				break;
			}
		}
	}
	free(t);
	free(at);
}

/* Each name's p50/p99 within 1% of the exact order statistic of its durations. */
static void check_quantiles(const struct rp_report *rep)
{
	static uint64_t d[MAXN];

	for (uint32_t i = 0; i < rep->n_fns; i++) {
		const struct rp_report_fn *f = &rep->fns[i];
		int k = name_id(f->name), m = 0;
		for (int j = 0; j < n; j++)
			if (sp[j].name == k)
				d[m++] = (uint64_t)(sp[j].e - sp[j].s);
		qsort(d, (size_t)m, sizeof(d[0]), cmp_u64);
		double x50 = (double)d[(int)(0.5 * (m - 1))], x99 = (double)d[(int)(0.99 * (m - 1))];
		assert_true((double)f->p50_ns >= x50 * 0.99 - 0.5 && (double)f->p50_ns <= x50 * 1.01 + 0.5);
		assert_true((double)f->p99_ns >= x99 * 0.99 - 0.5 && (double)f->p99_ns <= x99 * 1.01 + 0.5);
	}
}

static void check_concurrency(const struct rp_report *rep)
{
	uint32_t pct[4], max;

	reference_concurrency(pct, &max);
	assert_true(rep->n_conc >= 2);
	assert_string_equal(rep->conc[0].name, "overall");
	assert_int_equal(rep->conc[0].p50, pct[0]);
	assert_int_equal(rep->conc[0].p90, pct[1]);
	assert_int_equal(rep->conc[0].p95, pct[2]);
	assert_int_equal(rep->conc[0].p99, pct[3]);
	assert_int_equal(rep->conc[0].max, max);
}

static void analyze(const char *path, struct rp_report *rep)
{
	char why[RP_WHY_MAX] = "";
	struct rp_engine *e;

	assert_int_equal(rp_engine_open(NULL, &e), 0);
	if (rp_import_chrome(e, path, NULL, NULL, why) != 0)
		fail_msg("import %s: %s", path, why);
	assert_int_equal(rp_engine_report(e, rep), 0);
	rp_engine_close(e);
}

static void compare(const struct rp_report *rep)
{
	static struct ref want[MAXNAMES];
	uint64_t calls = 0;

	reference_stats(want);
	for (uint32_t i = 0; i < rep->n_fns; i++) {
		const struct rp_report_fn *f = &rep->fns[i];
		int k = name_id(f->name);
		if (f->calls != want[k].calls)
			print_message("%s: calls %llu want %llu; anomalies unmatched %llu open %llu\n",
				      f->name, (unsigned long long)f->calls,
				      (unsigned long long)want[k].calls,
				      (unsigned long long)rep->anomalies[RP_ANOM_END_UNMATCHED],
				      (unsigned long long)rep->anomalies[RP_ANOM_OPEN_AT_END]);
		assert_int_equal(f->calls, want[k].calls);
		assert_int_equal(f->primitive_calls, want[k].prim);
		assert_int_equal(f->self_ns, want[k].self);
		assert_int_equal(f->cum_ns, want[k].cum);
		calls += f->calls;
	}
	assert_int_equal(calls, (uint64_t)n);
}

/* --- generated traces --- */

static uint32_t rng = 99;

static uint32_t rnd(uint32_t m)
{
	rng = rng * 1103515245u + 12345u;
	return (rng >> 8) % m;
}

struct gspan {
	int64_t s, e;
	int name, track, depth;
	bool be;	/* written as B/E, not X */
	int seq;	/* the importer's order: an X's position, a B/E's E position */
};

static struct gspan g[MAXN];
static int ng, next_seq;

static void gen_tree(int64_t s, int64_t e, int track, int depth, bool be_ok)
{
	int64_t t = s;

	while (depth < 7 && ng < MAXN - 10 && t < e && rnd(3) != 0) {
		int64_t len = rnd(4) == 0 ? 0 : (int64_t)rnd((uint32_t)(e - t) + 1);
		int i = ng++;
		bool be = be_ok && rnd(3) == 0;
		int64_t end = t + len;

		if (len > 0 && end == e && rnd(4) == 0)
			end += 1000; /* torch's 1 us overhang */
		g[i] = (struct gspan){ t, end, (int)rnd(7), track, depth, be, 0 };
		gen_tree(t, t + len, track, depth + 1, be);
		t += len + (int64_t)rnd(3) * 1000;
	}
}

static const char *const pids[] = { "1", "\"GPU 0\"", "77" };
static const char *const tids[] = { "1", "2", "\"stream 7\"" };

static void put_x(FILE *f, struct gspan *s, bool *first)
{
	s->seq = next_seq++;
	fprintf(f, "%s{\"ph\":\"X\",\"name\":\"f%d\",\"cat\":\"c\",\"pid\":%s,\"tid\":%s,"
		   "\"ts\":%lld.%03lld,\"dur\":%lld.%03lld,\"args\":{\"x\":[1,{\"y\":2}]}}",
		*first ? "" : ",\n", s->name, pids[s->track / 3], tids[s->track % 3],
		(long long)(s->s / 1000), (long long)(s->s % 1000),
		(long long)((s->e - s->s) / 1000), (long long)((s->e - s->s) % 1000));
	*first = false;
}

static void put_be(FILE *f, struct gspan *s, char ph, bool *first)
{
	int64_t t = ph == 'B' ? s->s : s->e;

	if (ph == 'E')
		s->seq = next_seq++;
	fprintf(f, "%s{\"ph\":\"%c\",\"name\":\"f%d\",\"cat\":\"c\",\"pid\":%s,\"tid\":%s,\"ts\":%lld.%03lld}",
		*first ? "" : ",\n", ph, s->name, pids[s->track / 3], tids[s->track % 3],
		(long long)(t / 1000), (long long)(t % 1000));
	*first = false;
}

/* B/E spans of one track, nested: the generator makes them in pre-order and only
 * under B/E parents, so a B closes every open span at its depth or deeper first. */
static void put_be_track(FILE *f, int track, bool *first)
{
	int open[16], depth = 0;

	for (int i = 0; i < ng; i++) {
		if (g[i].track != track || !g[i].be)
			continue;
		while (depth && g[open[depth - 1]].depth >= g[i].depth)
			put_be(f, &g[open[--depth]], 'E', first);
		put_be(f, &g[i], 'B', first);
		open[depth++] = i;
	}
	while (depth)
		put_be(f, &g[open[--depth]], 'E', first);
}

static void write_trace(const char *path, bool object_form)
{
	FILE *f = fopen(path, "w");
	int order[MAXN];
	bool first = true;

	assert_non_null(f);
	next_seq = 0;
	fputs(object_form ? "{\"otherData\":{\"a\":[1,2,{}]},\"traceEvents\":[\n" : "[\n", f);
	for (int i = 0; i < ng; i++)
		order[i] = i;
	for (int i = ng - 1; i > 0; i--) { /* shuffle the X events */
		int j = (int)rnd((uint32_t)i + 1), t = order[i];
		order[i] = order[j];
		order[j] = t;
	}
	for (int k = 0; k < ng; k++)
		if (!g[order[k]].be)
			put_x(f, &g[order[k]], &first);
	for (int t = 0; t < 9; t++)
		put_be_track(f, t, &first);
	fputs(object_form ? "\n],\"displayTimeUnit\":\"ns\"}\n" : "\n]\n", f);
	fclose(f);
}

/* The reference's spans: what the generator made, with the file order as seq. */
static void load_generated(void)
{
	char nm[16];

	n = 0;
	nnames = 0;
	for (int i = 0; i < ng; i++) {
		snprintf(nm, sizeof(nm), "f%d", g[i].name);
		sp[n] = (struct rspan){ g[i].s, g[i].e, name_id(nm), g[i].track, g[i].seq, -1 };
		n++;
	}
}

static void test_analyze_generated_traces_match_reference(void **state)
{
	char path[] = "/tmp/rp_analyze_XXXXXX";
	struct rp_report rep;
	int fd;

	(void)state;
	for (int round = 0; round < 6; round++) {
		ng = 0;
		for (int t = 0; t < 9; t++)
			gen_tree(1000000 * t, 1000000 * t + 5000000, t, 0, round % 2 == 0);
		assert_true(ng > 100);
		fd = mkstemp(path);
		assert_true(fd >= 0);
		close(fd);
		write_trace(path, round % 3 == 0);
		load_generated();
		reference_nesting();
		analyze(path, &rep);
		if (getenv("RP_KEEP_TRACE"))
			print_message("round %d: %s, %d spans, %llu events\n", round, path, n,
				      (unsigned long long)rep.events);
		compare(&rep);
		check_quantiles(&rep);
		check_concurrency(&rep);
		assert_int_equal(rep.anomalies[RP_ANOM_END_UNMATCHED], 0);
		rp_report_free(&rep);
		if (!getenv("RP_KEEP_TRACE"))
			unlink(path);
		strcpy(path, "/tmp/rp_analyze_XXXXXX");
	}
}

static const char *testdata(void)
{
	const char *d = getenv("RP_TESTDATA");

	return d ? d : "tests/data";
}

static int64_t raw_end[MAXN];

/* The torch sample: X events scanned from the file's fixed layout, independently of
 * the importer's JSON reader. */
static void load_torch(const char *path)
{
	FILE *f = fopen(path, "r");
	char name[256];
	long long ts, dur;
	int c, seq = 0;

	assert_non_null(f);
	n = 0;
	nnames = 0;
	while ((c = fgetc(f)) != EOF) {
		if (c != '{' || fscanf(f, "\"name\": \"%255[^\"]\", \"ph\": \"X\", \"ts\": %lld, "
					  "\"dur\": %lld", name, &ts, &dur) != 3)
			continue;
		assert_true(n < MAXN);
		raw_end[seq] = (ts + dur) * 1000;
		sp[n] = (struct rspan){ ts * 1000, (ts + dur) * 1000, name_id(name), 0, seq++, -1 };
		n++;
	}
	fclose(f);
}

static void test_analyze_torch_sample_matches_reference(void **state)
{
	char path[512], gz[] = "/tmp/rp_torch_XXXXXX";
	struct rp_report rep;
	int fd;

	(void)state;
	snprintf(path, sizeof(path), "%s/torch/cpu_legacy_trace.json", testdata());
	load_torch(path);
	assert_int_equal(n, 12978);
	reference_nesting();
	/* The README's 44 children that end 1 us after their (unclamped) parent; more
	 * clamps follow from those, inside the clamped children. */
	{
		int over = 0;
		for (int i = 0; i < n; i++)
			over += sp[i].parent >= 0 && sp[i].e == sp[sp[i].parent].e &&
				raw_end[sp[i].seq] > raw_end[sp[sp[i].parent].seq];
		assert_int_equal(over, 44);
	}
	analyze(path, &rep);
	compare(&rep);
	assert_int_equal(rep.anomalies[RP_ANOM_CLAMPED], ref_clamped);
	assert_int_equal(rep.events, 2 * 12978);
	rp_report_free(&rep);
	/* The same file gzipped gives the same figures. */
	fd = mkstemp(gz);
	assert_true(fd >= 0);
	gzFile z = gzdopen(fd, "wb");
	FILE *in = fopen(path, "rb");
	char buf[65536];
	size_t got;
	while ((got = fread(buf, 1, sizeof(buf), in)) > 0)
		assert_int_equal(gzwrite(z, buf, (unsigned)got), (int)got);
	fclose(in);
	gzclose(z);
	analyze(gz, &rep);
	compare(&rep);
	rp_report_free(&rep);
	unlink(gz);
}

/* Unmatched E and never-closed B are counted; the open B ends at the last time. */
static void test_analyze_be_anomalies(void **state)
{
	static const char trace[] =
		"[{\"ph\":\"E\",\"pid\":1,\"tid\":1,\"ts\":1},"
		"{\"ph\":\"B\",\"name\":\"a\",\"pid\":1,\"tid\":1,\"ts\":2},"
		"{\"ph\":\"X\",\"name\":\"b\",\"pid\":1,\"tid\":1,\"ts\":3,\"dur\":5}]";
	char why[RP_WHY_MAX] = "";
	struct rp_engine *e;
	struct rp_report rep;

	(void)state;
	assert_int_equal(rp_engine_open(NULL, &e), 0);
	assert_int_equal(rp_import_chrome_buf(e, trace, sizeof(trace) - 1, "buf", why), 0);
	assert_int_equal(rp_engine_report(e, &rep), 0);
	assert_int_equal(rep.anomalies[RP_ANOM_END_UNMATCHED], 1);
	assert_int_equal(rep.anomalies[RP_ANOM_OPEN_AT_END], 1);
	for (uint32_t i = 0; i < rep.n_fns; i++)
		if (strcmp(rep.fns[i].name, "a") == 0)
			assert_int_equal(rep.fns[i].cum_ns, 6000); /* 2 us .. 8 us */
	rp_report_free(&rep);
	rp_engine_close(e);
}

/* Empty traces (found by fuzz_import: qsort of no array) give an empty report. */
static void test_analyze_empty_traces(void **state)
{
	static const char *const traces[] = { "[]", "{\"traceEvents\":[]}", "[{\"ph\":\"M\"}]" };
	char why[RP_WHY_MAX] = "";
	struct rp_engine *e;
	struct rp_report rep;

	(void)state;
	for (size_t i = 0; i < sizeof(traces) / sizeof(traces[0]); i++) {
		assert_int_equal(rp_engine_open(NULL, &e), 0);
		assert_int_equal(rp_import_chrome_buf(e, traces[i], strlen(traces[i]), "buf", why), 0);
		assert_int_equal(rp_engine_report(e, &rep), 0);
		assert_int_equal(rep.events, 0);
		assert_int_equal(rep.n_fns, 0);
		rp_report_free(&rep);
		rp_engine_close(e);
	}
}

/* issue 10, repro 7: JSON that is not a trace is an error naming the input, not an
 * empty report with nothing lost. */
static void test_analyze_not_a_trace(void **state)
{
	static const char *const inputs[] = { "[1,2,\"x\"]", "{\"traceEvents\":[{\"ph\":\"X\"}]}",
					      "[{\"a\":1}]" };
	char why[RP_WHY_MAX] = "";
	struct rp_engine *e;

	(void)state;
	for (size_t i = 0; i < sizeof(inputs) / sizeof(inputs[0]); i++) {
		assert_int_equal(rp_engine_open(NULL, &e), 0);
		assert_int_equal(rp_import_chrome_buf(e, inputs[i], strlen(inputs[i]), "in.json",
						      why),
				 -EINVAL);
		assert_true(strncmp(why, "in.json: not a trace", 20) == 0);
		rp_engine_close(e);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_analyze_generated_traces_match_reference),
		cmocka_unit_test(test_analyze_torch_sample_matches_reference),
		cmocka_unit_test(test_analyze_be_anomalies),
		cmocka_unit_test(test_analyze_not_a_trace),
		cmocka_unit_test(test_analyze_empty_traces),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
