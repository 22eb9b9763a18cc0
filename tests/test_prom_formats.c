// SPDX-License-Identifier: MIT
/*
 * test_prom_formats: the /metrics formats besides the text (render_prom_pb.c), series
 * control (rp_render_prom_select) and content negotiation (serve.c).
 *
 * - OpenMetrics: the same sample lines as the text, in the same order; counter
 *   families named without _total; "# EOF" last.
 * - Protobuf: decoded by a protobuf *reader* written here from the encoding rules and
 *   metrics.proto's field numbers (nothing shared with the writer): every family of the
 *   text is there with its type and every sample's value; the duration histogram's
 *   classic buckets equal the text's _bucket lines; its native buckets (schema, zero
 *   bucket, spans, deltas) hold exactly the name's count, and for q = 0.5, 0.9, 0.99 the
 *   native bucket holding rank q of the raw values brackets the exact order statistic
 *   (within the sketch's 1%); a name without a sketch has no native fields.
 * - Series control: a regex and a top N keep exactly the names a brute-force selection
 *   keeps, and ringprof_series_omitted equals the sample lines the unfiltered text has
 *   for the names left out.
 * - Negotiation, live (`ringprof run --prometheus`, curl; skipped without curl):
 *   Prometheus's Accept headers with and without native histograms, OpenMetrics only,
 *   none, and ?format=, each answered with its Content-Type; --metrics-top 1 leaves
 *   series out.
 */
#include "support.h"

#include <inttypes.h>
#include <math.h>
#include <regex.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "render.h"
#include "sketch.h"

#define N_VALS 20000

static double vals[N_VALS];

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* A report of three names: "decode" with a sketch of N_VALS log-uniform durations (and
 * 5 of 0 ns), "prefill" without a sketch, "idle" with no call. */
static void make_report(struct rp_report *r, struct rp_report_fn *fns, struct rp_sketch *k)
{
	uint32_t seed = 12345;
	double sum = 0;

	assert_int_equal(rp_sketch_init(k, 0.01), 0);
	for (int i = 0; i < N_VALS; i++) {
		seed = seed * 1103515245u + 12345u;
		/* 10 us .. 100 ms, log-uniform, whole ns */
		vals[i] = floor(1e4 * pow(1e4, (double)(seed >> 8) / (double)(1u << 24)));
		rp_sketch_add(k, vals[i]);
		sum += vals[i];
	}
	for (int i = 0; i < 5; i++)
		rp_sketch_add(k, 0);
	qsort(vals, N_VALS, sizeof(vals[0]), cmp_dbl);
	memset(r, 0, sizeof(*r));
	memset(fns, 0, 3 * sizeof(*fns));
	fns[0] = (struct rp_report_fn){ .name = "decode", .category = "LLM", .file = "",
					.calls = N_VALS + 5, .total_ns = (uint64_t)sum,
					.cum_ns = 300, .self_ns = 100, .errors = 17 };
	assert_int_equal(rp_report_sketch_from(&fns[0].dur, k), 0);
	fns[1] = (struct rp_report_fn){ .name = "prefill", .category = "LLM", .file = "",
					.calls = 3, .total_ns = 3000, .cum_ns = 900, .self_ns = 5 };
	fns[2] = (struct rp_report_fn){ .name = "idle", .category = "", .file = "",
					.cum_ns = 50 };
	r->fns = fns;
	r->n_fns = 3;
	r->events = 77;
}

static char *render(const struct rp_report *r, const struct rp_prom_select *sel, size_t *len)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *m = open_memstream(&buf, &n);

	assert_non_null(m);
	assert_int_equal(rp_render_prom_select(r, m, NULL, sel), 0);
	fclose(m);
	if (len)
		*len = n;
	return buf;
}

/* --- OpenMetrics --- */

static void test_prom_formats_openmetrics(void **state)
{
	struct rp_report r;
	struct rp_report_fn fns[3];
	struct rp_sketch k;
	size_t len, olen = 0;
	char *text = render((make_report(&r, fns, &k), &r), NULL, &len), *om = NULL;
	char *a, *b, *sa, *sb;
	FILE *m = open_memstream(&om, &olen);

	(void)state;
	assert_int_equal(rp_render_prom_openmetrics(text, len, m), 0);
	fclose(m);
	assert_true(olen > 6 && strcmp(om + olen - 6, "# EOF\n") == 0);
	assert_non_null(strstr(om, "\n# TYPE ringprof_events counter\n"));
	assert_non_null(strstr(om, "\n# HELP ringprof_events Records"));
	assert_null(strstr(om, "# TYPE ringprof_events_total"));
	assert_non_null(strstr(om, "\n# TYPE ringprof_span_duration_seconds histogram\n"));
	/* The samples, line for line. */
	a = strtok_r(text, "\n", &sa);
	b = strtok_r(om, "\n", &sb);
	for (;;) {
		while (a && a[0] == '#')
			a = strtok_r(NULL, "\n", &sa);
		while (b && b[0] == '#')
			b = strtok_r(NULL, "\n", &sb);
		if (a == NULL || b == NULL)
			break;
		assert_string_equal(a, b);
		a = strtok_r(NULL, "\n", &sa);
		b = strtok_r(NULL, "\n", &sb);
	}
	assert_null(a);
	assert_null(b);
	free(text);
	free(om);
	rp_report_sketch_free(&fns[0].dur);
	rp_sketch_fini(&k);
}

/* --- a protobuf reader --- */

struct rd {
	const uint8_t *p, *end;
};

static uint64_t rd_varint(struct rd *d)
{
	uint64_t v = 0;

	for (int s = 0; s < 64; s += 7) {
		assert_true(d->p < d->end);
		v |= (uint64_t)(*d->p & 0x7f) << s;
		if (!(*d->p++ & 0x80))
			return v;
	}
	fail_msg("varint too long");
	return 0;
}

/* The next field: its number and wire type; the payload is read by the caller. */
static bool rd_field(struct rd *d, uint32_t *field, unsigned *wire)
{
	uint64_t key;

	if (d->p >= d->end)
		return false;
	key = rd_varint(d);
	*field = (uint32_t)(key >> 3);
	*wire = key & 7;
	return true;
}

static struct rd rd_len(struct rd *d)
{
	uint64_t n = rd_varint(d);
	struct rd sub = { d->p, d->p + n };

	assert_true(n <= (uint64_t)(d->end - d->p));
	d->p += n;
	return sub;
}

static double rd_double(struct rd *d)
{
	uint64_t u = 0;
	double v;

	assert_true(d->end - d->p >= 8);
	for (int i = 0; i < 8; i++)
		u |= (uint64_t)d->p[i] << (8 * i);
	d->p += 8;
	memcpy(&v, &u, sizeof(v));
	return v;
}

static void rd_skip(struct rd *d, unsigned wire)
{
	if (wire == 0)
		rd_varint(d);
	else if (wire == 1)
		d->p += 8;
	else if (wire == 2)
		rd_len(d);
	else if (wire == 5)
		d->p += 4;
	else
		fail_msg("wire type %u", wire);
}

static int64_t unzigzag(uint64_t v)
{
	return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* One decoded Metric of a family (the fields this test reads). */
struct metric {
	char labels[256]; /* name=value|... */
	double value;	  /* counter, gauge, untyped */
	uint64_t count;
	double sum;
	unsigned n_buckets; /* classic */
	uint64_t cum[300];
	double upper[300];
	bool native;
	int schema;
	double zero_threshold;
	uint64_t zero_count;
	int32_t idx[2000]; /* native buckets, absolute */
	uint64_t cnt[2000];
	unsigned n_native;
};

static void rd_labels(struct rd d, struct metric *m)
{
	char name[64] = "", value[160] = "";
	uint32_t f;
	unsigned w;

	while (rd_field(&d, &f, &w)) {
		struct rd s = rd_len(&d);
		char *dst = f == 1 ? name : value;
		size_t cap = f == 1 ? sizeof(name) : sizeof(value);
		size_t n = (size_t)(s.end - s.p) < cap - 1 ? (size_t)(s.end - s.p) : cap - 1;

		memcpy(dst, s.p, n);
		dst[n] = '\0';
	}
	snprintf(m->labels + strlen(m->labels), sizeof(m->labels) - strlen(m->labels),
		 "%s%s=%s", m->labels[0] ? "|" : "", name, value);
}

static void rd_histogram(struct rd d, struct metric *m)
{
	int32_t offsets[64], pos = 0;
	uint32_t lengths[64], f, n_spans = 0;
	uint64_t deltas[2000];
	unsigned w, n_deltas = 0;

	while (rd_field(&d, &f, &w)) {
		if (f == 1) {
			m->count = rd_varint(&d);
		} else if (f == 2) {
			m->sum = rd_double(&d);
		} else if (f == 3) { /* Bucket */
			struct rd b = rd_len(&d);
			uint32_t bf;
			unsigned bw;

			while (rd_field(&b, &bf, &bw))
				if (bf == 1)
					m->cum[m->n_buckets] = rd_varint(&b);
				else if (bf == 2)
					m->upper[m->n_buckets] = rd_double(&b);
				else
					rd_skip(&b, bw);
			m->n_buckets++;
		} else if (f == 5) {
			m->schema = (int)unzigzag(rd_varint(&d));
			m->native = true;
		} else if (f == 6) {
			m->zero_threshold = rd_double(&d);
		} else if (f == 7) {
			m->zero_count = rd_varint(&d);
		} else if (f == 12) { /* BucketSpan */
			struct rd s = rd_len(&d);
			uint32_t sf;
			unsigned sw;

			offsets[n_spans] = 0;
			lengths[n_spans] = 0;
			while (rd_field(&s, &sf, &sw))
				if (sf == 1)
					offsets[n_spans] = (int32_t)unzigzag(rd_varint(&s));
				else
					lengths[n_spans] = (uint32_t)rd_varint(&s);
			n_spans++;
		} else if (f == 13 && w == 2) { /* packed sint64 */
			struct rd s = rd_len(&d);

			while (s.p < s.end)
				deltas[n_deltas++] = rd_varint(&s);
		} else if (f == 13) {
			deltas[n_deltas++] = rd_varint(&d);
		} else {
			rd_skip(&d, w);
		}
	}
	/* Spans and deltas to absolute (index, count), as the format documents them. */
	for (uint32_t s = 0, j = 0; s < n_spans; s++) {
		pos += offsets[s];
		for (uint32_t i = 0; i < lengths[s]; i++, j++, pos++) {
			assert_true(j < n_deltas);
			m->idx[m->n_native] = pos;
			m->cnt[m->n_native] =
				(uint64_t)((j ? (int64_t)m->cnt[m->n_native - 1] : 0) +
					   unzigzag(deltas[j]));
			m->n_native++;
		}
	}
	assert_int_equal(m->n_native, n_deltas);
}

static void rd_metric(struct rd d, struct metric *m)
{
	uint32_t f;
	unsigned w;

	memset(m, 0, sizeof(*m));
	while (rd_field(&d, &f, &w)) {
		if (f == 1) {
			rd_labels(rd_len(&d), m);
		} else if (f == 2 || f == 3 || f == 5) { /* gauge, counter, untyped: value = 1 */
			struct rd s = rd_len(&d);
			uint32_t sf;
			unsigned sw;

			while (rd_field(&s, &sf, &sw))
				if (sf == 1)
					m->value = rd_double(&s);
				else
					rd_skip(&s, sw);
		} else if (f == 7) {
			rd_histogram(rd_len(&d), m);
		} else {
			rd_skip(&d, w);
		}
	}
}

/* The metric of @m[0 .. n) with these labels. */
static const struct metric *with_labels(const struct metric *m, int n, const char *labels)
{
	for (int i = 0; i < n; i++)
		if (strcmp(m[i].labels, labels) == 0)
			return &m[i];
	fail_msg("no metric {%s}", labels);
	return NULL;
}

/* The family @name in delimited @buf: its type, and its metrics into @out. */
static int find_family(const char *buf, size_t len, const char *name, int *type,
		       struct metric *out, unsigned max)
{
	struct rd all = { (const uint8_t *)buf, (const uint8_t *)buf + len };
	int n = -1;

	while (all.p < all.end) {
		struct rd fam = rd_len(&all);
		char fname[160] = "";
		uint32_t f;
		unsigned w, nm = 0;
		struct rd metrics[8];
		int t = -1;

		while (rd_field(&fam, &f, &w)) {
			if (f == 1) {
				struct rd s = rd_len(&fam);

				memcpy(fname, s.p, (size_t)(s.end - s.p));
				fname[s.end - s.p] = '\0';
			} else if (f == 3) {
				t = (int)rd_varint(&fam);
			} else if (f == 4) {
				struct rd s = rd_len(&fam);

				if (nm < 8)
					metrics[nm++] = s;
			} else {
				rd_skip(&fam, w);
			}
		}
		if (strcmp(fname, name) == 0) {
			*type = t;
			for (unsigned i = 0; i < nm && i < max; i++)
				rd_metric(metrics[i], &out[i]);
			n = (int)nm;
		}
	}
	return n;
}

static void test_prom_formats_protobuf(void **state)
{
	static struct metric m[8];
	static const double qs[3] = { 0.5, 0.9, 0.99 };
	struct rp_report r;
	struct rp_report_fn fns[3];
	struct rp_sketch k;
	size_t len, plen = 0;
	char *text = render((make_report(&r, fns, &k), &r), NULL, &len), *pb = NULL;
	FILE *f = open_memstream(&pb, &plen);
	const struct metric *d;
	int type = -1, n;
	uint64_t total;
	double base;

	(void)state;
	assert_int_equal(rp_render_prom_protobuf(&r, text, len, f), 0);
	fclose(f);
	n = find_family(pb, plen, "ringprof_events_total", &type, m, 8);
	assert_int_equal(n, 1);
	assert_int_equal(type, 0); /* COUNTER */
	assert_true(m[0].value == 77);
	n = find_family(pb, plen, "ringprof_span_errors_total", &type, m, 8);
	assert_int_equal(n, 3);
	assert_true(with_labels(m, n, "name=decode|category=LLM")->value == 17);
	n = find_family(pb, plen, "ringprof_span_duration_instance_seconds", &type, m, 8);
	assert_int_equal(type, 2); /* SUMMARY */
	n = find_family(pb, plen, "ringprof_span_duration_seconds", &type, m, 8);
	assert_int_equal(type, 4); /* HISTOGRAM */
	assert_int_equal(n, 2);	   /* "idle" has no call */
	d = with_labels(m, n, "name=decode|category=LLM");
	assert_int_equal(d->count, N_VALS + 5);
	/* The classic buckets: those of the text, line for line (+Inf implied). */
	assert_int_equal(d->n_buckets, 217);
	for (unsigned b = 0; b < d->n_buckets; b++) {
		char line[200];

		snprintf(line, sizeof(line),
			 "ringprof_span_duration_seconds_bucket{name=\"decode\",category=\"LLM\","
			 "le=\"%.6g\"} %" PRIu64 "\n",
			 d->upper[b], d->cum[b]);
		assert_non_null(strstr(text, line));
	}
	/* Native: every call in a bucket; ranks bracket the exact order statistics. */
	assert_true(d->native);
	assert_int_equal(d->schema, 5);
	assert_int_equal(d->zero_count, 5);
	assert_true(d->zero_threshold > 0 && d->zero_threshold < 1e-30);
	total = d->zero_count;
	for (unsigned i = 0; i < d->n_native; i++) {
		assert_true(d->cnt[i] > 0);
		assert_true(i == 0 || d->idx[i] > d->idx[i - 1]);
		total += d->cnt[i];
	}
	assert_int_equal(total, N_VALS + 5);
	base = exp2(1.0 / 32);
	for (int q = 0; q < 3; q++) {
		uint64_t rank = (uint64_t)ceil(qs[q] * (N_VALS + 5)), seen = d->zero_count;
		double x = vals[rank - 5 - 1] * 1e-9; /* the exact order statistic, s */
		unsigned i = 0;

		while (seen + d->cnt[i] < rank)
			seen += d->cnt[i++];
		printf("q %.2f: exact %.9f s, native bucket (%.9f, %.9f]\n", qs[q], x,
		       pow(base, d->idx[i] - 1), pow(base, d->idx[i]));
		assert_true(x > pow(base, d->idx[i] - 1) / 1.0101);
		assert_true(x <= pow(base, d->idx[i]) * 1.0101);
	}
	/* "prefill" has no sketch: classic +Inf only, no native fields. */
	d = with_labels(m, n, "name=prefill|category=LLM");
	assert_false(d->native);
	assert_int_equal(d->n_buckets, 0);
	assert_int_equal(d->count, 3);
	free(text);
	free(pb);
	rp_report_sketch_free(&fns[0].dur);
	rp_sketch_fini(&k);
}

/* --- series control --- */

/* The sample lines of @text whose labels name @name. */
static uint64_t lines_of(const char *text, const char *name)
{
	char pat[80];
	uint64_t n = 0;

	snprintf(pat, sizeof(pat), "{name=\"%s\",", name);
	for (const char *p = text; (p = strstr(p, pat)) != NULL; p++)
		n++;
	return n;
}

static void test_prom_formats_series_control(void **state)
{
	static const char *const all[3] = { "decode", "prefill", "idle" };
	struct rp_report r;
	struct rp_report_fn fns[3];
	struct rp_sketch k;
	regex_t re;
	char *full, *text, want[80];

	(void)state;
	make_report(&r, fns, &k);
	full = render(&r, NULL, NULL);
	assert_non_null(strstr(full, "\nringprof_series_omitted 0\n"));
	assert_int_equal(regcomp(&re, "^(decode|idle)$", REG_EXTENDED | REG_NOSUB), 0);
	/* Cases: regex only; top 1 (by cum: prefill 900 > decode 300 > idle 50); both. */
	for (int c = 0; c < 3; c++) {
		struct rp_prom_select sel = { .names = c != 1 ? &re : NULL, .top = c ? 1 : 0 };
		bool keep[3] = { c != 1, c == 1, c == 0 }; /* brute force, by hand above */
		uint64_t omitted = 0;

		text = render(&r, &sel, NULL);
		for (int i = 0; i < 3; i++) {
			if (keep[i])
				assert_int_equal(lines_of(text, all[i]), lines_of(full, all[i]));
			else
				assert_int_equal(lines_of(text, all[i]), 0);
			if (!keep[i])
				omitted += lines_of(full, all[i]);
		}
		snprintf(want, sizeof(want), "\nringprof_series_omitted %" PRIu64 "\n", omitted);
		assert_non_null(strstr(text, want));
		free(text);
	}
	regfree(&re);
	free(full);
	rp_report_sketch_free(&fns[0].dur);
	rp_sketch_fini(&k);
}

/* --- negotiation, live --- */

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

static void test_prom_formats_negotiation(void **state)
{
	static const struct {
		const char *accept, *query, *type;
	} cases[] = {
		/* Prometheus 2.42 with --enable-feature=native-histograms */
		{ "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
		  "encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3,*/*;q=0.2",
		  "", "application/vnd.google.protobuf" },
		/* ... and without */
		{ "application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
		  "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
		  "", "application/openmetrics-text; version=1.0.0" },
		{ "text/plain;q=0.9, application/openmetrics-text;q=0.5", "", "text/plain" },
		{ "application/json", "", "text/plain" },
		{ NULL, "", "text/plain; version=0.0.4" },
		{ NULL, "?format=protobuf", "application/vnd.google.protobuf" },
		{ "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
		  "encoding=delimited", "?format=text", "text/plain" },
	};
	const char *bin = getenv("RP_BIN_DIR");
	char eng[600], sess[64], addr[40], dir[] = "/tmp/rp_test_prom_formats.XXXXXX";
	char *out = NULL;
	int port = rp_test_free_port();
	pid_t e;

	(void)state;
	if (bin == NULL || rp_test_sh(NULL, NULL, "command -v curl >/dev/null") != 0) {
		printf("RP_BIN_DIR unset or no curl: negotiation not checked\n");
		skip();
	}
	assert_non_null(mkdtemp(dir));
	snprintf(eng, sizeof(eng), "%s/ringprof", bin);
	snprintf(sess, sizeof(sess), "t_prom_formats_%d", (int)getpid());
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
	e = fork();
	if (e == 0) {
		execl(eng, eng, "run", "--session", sess, "--snapshot-dir", dir, "--quiet",
		      "--no-socket", "--prometheus", addr, "--metrics-names", "^none$", NULL);
		_exit(127);
	}
	/* listening once the marker names it and its listeners are open: /metrics answers */
	assert_int_equal(rp_test_engine_wait(sess, e, NULL), -1);
	for (int t = 0; t < 3000; t++, sleep_ms(20))
		if (rp_test_sh(NULL, NULL, "curl -sf -o /dev/null http://%s/metrics", addr) == 0)
			break;
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char hdr[400] = "";

		if (cases[i].accept)
			snprintf(hdr, sizeof(hdr), "-H 'Accept: %s'", cases[i].accept);
		free(out);
		out = NULL;
		assert_int_equal(rp_test_sh(&out, NULL,
					    "curl -sf -o /dev/null -w '%%{content_type}' %s "
					    "'http://%s/metrics%s'",
					    hdr, addr, cases[i].query),
				 0);
		if (strncmp(out, cases[i].type, strlen(cases[i].type)) != 0)
			fail_msg("case %u: Content-Type \"%s\", want \"%s...\"", i, out,
				 cases[i].type);
	}
	free(out);
	out = NULL;
	assert_int_equal(rp_test_sh(&out, NULL,
				    "curl -sf -H 'Accept: application/openmetrics-text' "
				    "http://%s/metrics | tail -n 1",
				    addr),
			 0);
	assert_string_equal(out, "# EOF\n");
	free(out);
	out = NULL;
	assert_int_equal(rp_test_sh(&out, NULL, "curl -sf http://%s/metrics", addr), 0);
	assert_non_null(strstr(out, "\nringprof_series_omitted "));
	assert_non_null(strstr(out, "\nringprof_build_info{version=\""));
	free(out);
	kill(e, SIGINT);
	waitpid(e, NULL, 0);
	assert_int_equal(rp_test_sh(NULL, NULL, "rm -rf %s", dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_prom_formats_openmetrics),
		cmocka_unit_test(test_prom_formats_protobuf),
		cmocka_unit_test(test_prom_formats_series_control),
		cmocka_unit_test(test_prom_formats_negotiation),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
