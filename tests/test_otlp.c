// SPDX-License-Identifier: MIT
/*
 * The OTLP receiver (engine/ingest/otlp.c, tools/server/otlp_http.c, docs/otlp.md).
 *
 * Every figure is checked against a brute-force oracle computed here from the span
 * list itself: per name the calls, the cumulative time (sum of durations) and the self
 * time (duration minus the union of the children's intervals); for the requests (root
 * spans) the time spent at each number in flight, whence the percentiles exactly as
 * sweep.h defines them.
 *
 *   test_otlp          decoders, the reorder buffer, the HTTP framing and answers
 *   test_otlp sdk      the official OpenTelemetry JS SDK (npm) against a live engine,
 *                      over protobuf (gzip) and JSON; exit 77 without node or npm
 */
#include "support.h"

#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <zlib.h>

#include "engine.h"
#include "otlp.h"
#include "snapshot.h"

/* --- the spans and the oracle --- */

#define MAX_SPANS 4096
static const char *const names[] = { "request", "llm", "tool", "db", "tokenize" };
enum { N_REQUEST, N_LLM, N_TOOL, N_DB, N_TOKENIZE, N_NAMES };

struct tspan {
	int name, parent, kind;
	uint64_t start, end;
	bool error;
};

static struct tspan sp[MAX_SPANS];
static int n_sp;
static uint64_t rng = 88172645463325252ull;

static uint64_t rnd(uint64_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return n ? rng % n : 0;
}

/* A time in [lo, hi]: on a µs boundary a third of the time (so that ends and starts
 * meet), at the ends a fifth of the time. */
static uint64_t pick(uint64_t lo, uint64_t hi)
{
	uint64_t r = rnd(10), t;

	if (r == 0)
		return lo;
	if (r == 1)
		return hi;
	t = lo + rnd(hi - lo + 1);
	if (r < 5)
		t -= t % 1000;
	return t < lo ? lo : t;
}

static int add(int name, int parent, int kind, uint64_t start, uint64_t end)
{
	assert_true(n_sp < MAX_SPANS);
	sp[n_sp] = (struct tspan){ name, parent, kind, start, end, rnd(13) == 0 };
	return n_sp++;
}

/* @n requests from @t0 over about 20 ms, each with 1 to 4 children (siblings overlap),
 * some with a grandchild. */
static void gen(int n, uint64_t t0)
{
	n_sp = 0;
	for (int r = 0; r < n; r++) {
		uint64_t rs = t0 + rnd(20000) * 1000 + rnd(1000), re = rs + 500000 + rnd(4000000);
		int root = add(N_REQUEST, -1, rnd(3) ? 2 : 0, rs, re);

		for (int k = 1 + (int)rnd(4); k > 0; k--) {
			uint64_t cs = pick(rs, re), ce = pick(cs, re);
			int c;

			if (ce == cs)
				ce = cs + 1 <= re ? cs + 1 : cs;
			c = add(N_LLM + (int)rnd(3), root, rnd(2) ? 3 : 1, cs, ce);
			if (ce - cs > 10 && rnd(2)) {
				uint64_t gs = cs + 1 + rnd(ce - cs - 2), ge = pick(gs, ce - 1);
				add(N_TOKENIZE, c, 1, gs, ge);
			}
		}
	}
}

struct expect {
	uint64_t calls[N_NAMES], self[N_NAMES], cum[N_NAMES];
	uint64_t lvl[MAX_SPANS + 1]; /* time with that many requests in flight */
};

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* The union of the children's intervals of span @p: sorted, merged. */
static uint64_t union_children(int p)
{
	static uint64_t iv[MAX_SPANS][2];
	uint64_t sum = 0, cs = 0, ce = 0;
	int n = 0;

	for (int i = 0; i < n_sp; i++)
		if (sp[i].parent == p) {
			iv[n][0] = sp[i].start;
			iv[n++][1] = sp[i].end;
		}
	qsort(iv, (size_t)n, sizeof(iv[0]), cmp_u64);
	for (int i = 0; i < n; i++) {
		if (i == 0 || iv[i][0] > ce) {
			sum += ce - cs;
			cs = iv[i][0];
			ce = iv[i][1];
		} else if (iv[i][1] > ce) {
			ce = iv[i][1];
		}
	}
	return sum + (ce - cs);
}

static void oracle(struct expect *x)
{
	static uint64_t ts[2 * MAX_SPANS];
	int n = 0;

	memset(x, 0, sizeof(*x));
	for (int i = 0; i < n_sp; i++) {
		uint64_t d = sp[i].end - sp[i].start;

		x->calls[sp[i].name]++;
		x->cum[sp[i].name] += d;
		x->self[sp[i].name] += d - union_children(i);
		if (sp[i].parent < 0) {
			ts[n++] = sp[i].start;
			ts[n++] = sp[i].end;
		}
	}
	qsort(ts, (size_t)n, sizeof(ts[0]), cmp_u64);
	/* between two consecutive times: the requests open over the whole piece */
	for (int k = 0; k + 1 < n; k++) {
		uint64_t a = ts[k], b = ts[k + 1];
		int level = 0;

		if (a == b)
			continue;
		for (int i = 0; i < n_sp; i++)
			level += sp[i].parent < 0 && sp[i].start <= a && sp[i].end >= b;
		x->lvl[level] += b - a;
	}
}

/* pXX as sweep.h defines it: the smallest level held for a positive time whose
 * cumulative time reaches XX% of the observed time. */
static uint32_t pct(const struct expect *x, unsigned p100)
{
	uint64_t total = 0, cum = 0; /* tens of ms x 10^4: far from 2^64 */

	for (int c = 0; c <= MAX_SPANS; c++)
		total += x->lvl[c];
	for (int c = 0; c <= MAX_SPANS; c++) {
		cum += x->lvl[c];
		if (x->lvl[c] > 0 && cum * 10000 >= total * p100)
			return (uint32_t)c;
	}
	return 0;
}

static const struct rp_report_fn *find_fn(const struct rp_report *r, const char *name)
{
	for (uint32_t i = 0; i < r->n_fns; i++)
		if (strcmp(r->fns[i].name, name) == 0)
			return &r->fns[i];
	return NULL;
}

/* A name's rows summed over their categories (a root's depends on its span kind). */
static struct rp_report_fn sum_fn(const struct rp_report *r, const char *name)
{
	struct rp_report_fn s = { 0 };

	for (uint32_t i = 0; i < r->n_fns; i++)
		if (strcmp(r->fns[i].name, name) == 0) {
			s.calls += r->fns[i].calls;
			s.cum_ns += r->fns[i].cum_ns;
			s.total_ns += r->fns[i].total_ns;
			s.self_ns += r->fns[i].self_ns;
		}
	return s;
}

static void check_report(const struct rp_report *r, const struct expect *x)
{
	const struct rp_report_conc *roots = NULL;
	uint32_t max = 0;

	for (int k = 0; k < N_NAMES; k++) {
		struct rp_report_fn f = sum_fn(r, names[k]);

		assert_int_equal(f.calls, x->calls[k]);
		assert_int_equal(f.cum_ns, x->cum[k]);
		assert_int_equal(f.total_ns, x->cum[k]);
		assert_int_equal(f.self_ns, x->self[k]);
	}
	for (uint32_t i = 0; i < r->n_conc; i++)
		if (strcmp(r->conc[i].name, "roots") == 0)
			roots = &r->conc[i];
	assert_non_null(roots);
	for (int c = 0; c <= MAX_SPANS; c++)
		if (x->lvl[c])
			max = (uint32_t)c;
	assert_int_equal(roots->p50, pct(x, 5000));
	assert_int_equal(roots->p90, pct(x, 9000));
	assert_int_equal(roots->p95, pct(x, 9500));
	assert_int_equal(roots->p99, pct(x, 9900));
	assert_int_equal(roots->max, max);
	assert_true(max >= 2); /* the generator makes requests overlap */
	for (uint32_t i = 0; i < r->n_sources; i++)
		for (int a = 0; a < RP_ANOM_KIND_COUNT; a++)
			if (r->sources[i].anomalies[a])
				fail_msg("anomaly %s: %" PRIu64, rp_anomaly_names[a],
					 r->sources[i].anomalies[a]);
}

/* --- an OTLP protobuf writer (the test's own, from the specification's numbers) --- */

struct pbw {
	uint8_t b[1 << 20];
	size_t n;
};

static void w_varint(struct pbw *w, uint64_t v)
{
	do {
		w->b[w->n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
}

static void w_bytes(struct pbw *w, uint32_t field, const void *p, size_t n)
{
	w_varint(w, (uint64_t)field << 3 | 2);
	w_varint(w, n);
	memcpy(w->b + w->n, p, n);
	w->n += n;
}

static void w_fixed64(struct pbw *w, uint32_t field, uint64_t v)
{
	w_varint(w, (uint64_t)field << 3 | 1);
	for (int i = 0; i < 8; i++)
		w->b[w->n++] = (uint8_t)(v >> (8 * i));
}

static void w_kv(struct pbw *w, uint32_t field, const char *k, const char *sval, int64_t ival)
{
	struct pbw *v = calloc(1, sizeof(*v)), *kv = calloc(1, sizeof(*kv));

	if (sval)
		w_bytes(v, 1, sval, strlen(sval));
	else {
		w_varint(v, 3 << 3);
		w_varint(v, (uint64_t)ival);
	}
	w_bytes(kv, 1, k, strlen(k));
	w_bytes(kv, 2, v->b, v->n);
	w_bytes(w, field, kv->b, kv->n);
	free(v);
	free(kv);
}

static void ids_of(int i, uint8_t trace[16], uint8_t id[8])
{
	int root = i;

	while (sp[root].parent >= 0)
		root = sp[root].parent;
	memset(trace, 0, 16);
	trace[0] = 0xab;
	trace[15] = (uint8_t)root;
	trace[14] = (uint8_t)(root >> 8);
	memset(id, 0, 8);
	id[0] = 0x11;
	id[7] = (uint8_t)(i + 1);
	id[6] = (uint8_t)((i + 1) >> 8);
}

/* A request holding spans @idx[0..n) of service @svc. */
static void pb_request(struct pbw *out, const int *idx, int n, const char *svc)
{
	struct pbw *spans = calloc(1, sizeof(*spans)), *res = calloc(1, sizeof(*res)),
		   *rs = calloc(1, sizeof(*rs));

	for (int k = 0; k < n; k++) {
		struct pbw *s = calloc(1, sizeof(*s)), *st = calloc(1, sizeof(*st));
		const struct tspan *t = &sp[idx[k]];
		uint8_t trace[16], id[8], pid[8], pt[16];

		ids_of(idx[k], trace, id);
		w_bytes(s, 1, trace, 16);
		w_bytes(s, 2, id, 8);
		if (t->parent >= 0) {
			ids_of(t->parent, pt, pid);
			w_bytes(s, 4, pid, 8);
		}
		w_bytes(s, 5, names[t->name], strlen(names[t->name]));
		w_varint(s, 6 << 3);
		w_varint(s, (uint64_t)t->kind);
		w_fixed64(s, 7, t->start);
		w_fixed64(s, 8, t->end);
		if (t->name == N_DB)
			w_kv(s, 9, "db.system", "postgresql", 0);
		if (t->error) {
			w_varint(st, 3 << 3);
			w_varint(st, 2);
			w_bytes(s, 15, st->b, st->n);
		}
		w_bytes(spans, 2, s->b, s->n);
		free(s);
		free(st);
	}
	w_kv(res, 1, "service.name", svc, 0);
	w_kv(res, 1, "process.pid", NULL, 4242);
	/* scope_spans before the resource: the decoder must not depend on the order */
	w_bytes(rs, 2, spans->b, spans->n);
	w_bytes(rs, 1, res->b, res->n);
	out->n = 0;
	w_bytes(out, 1, rs->b, rs->n);
	free(spans);
	free(res);
	free(rs);
}

/* --- decoders --- */

struct got {
	int n;
	struct rp_otlp_span s[8];
	char name[8][32], service[8][32], cat[8][32];
};

static int collect(void *ctx, const struct rp_otlp_span *s)
{
	struct got *g = ctx;

	if (g->n < 8) {
		g->s[g->n] = *s;
		snprintf(g->name[g->n], 32, "%.*s", (int)s->name.n, s->name.p);
		snprintf(g->service[g->n], 32, "%.*s", (int)s->service.n, s->service.p);
		snprintf(g->cat[g->n], 32, "%.*s", (int)s->category.n, s->category.p);
	}
	g->n++;
	return 0;
}

static void fixed_spans(void)
{
	n_sp = 0;
	add(N_REQUEST, -1, 2, 1000, 9000);
	add(N_DB, 0, 3, 2000, 3000);
	add(N_LLM, 0, 1, 3000, 8000);
	sp[0].error = true;
	sp[1].error = sp[2].error = false;
}

static void test_otlp_decode_pb_fields(void **state)
{
	static struct pbw w;
	struct rp_otlp_decode_stats st;
	struct got g = { 0 };
	char why[RP_WHY_MAX];
	int idx[] = { 0, 1, 2 };
	uint8_t trace[16], id[8];

	(void)state;
	fixed_spans();
	pb_request(&w, idx, 3, "svc-a");
	assert_int_equal(rp_otlp_decode_pb(w.b, w.n, NULL, collect, &g, &st, why), 0);
	assert_int_equal(g.n, 3);
	assert_int_equal(st.spans, 3);
	assert_int_equal(st.rejected, 0);
	assert_string_equal(g.name[0], "request");
	assert_string_equal(g.service[0], "svc-a");
	assert_int_equal(g.s[0].pid, 4242);
	assert_string_equal(g.cat[0], "server");
	assert_string_equal(g.cat[1], "db");
	assert_string_equal(g.cat[2], "span"); /* internal */
	assert_true(g.s[0].error);
	assert_false(g.s[1].error);
	assert_false(g.s[0].has_parent);
	assert_true(g.s[1].has_parent);
	assert_int_equal(g.s[1].start, 2000);
	assert_int_equal(g.s[1].end, 3000);
	assert_int_equal(g.s[1].kind, 3);
	ids_of(1, trace, id);
	assert_memory_equal(g.s[1].trace, trace, 16);
	assert_memory_equal(g.s[1].id, id, 8);
	ids_of(0, trace, id);
	assert_memory_equal(g.s[1].parent, id, 8);

	/* a category attribute by flag */
	struct rp_otlp_decode_opts o = { .category_attr = "db.system" };
	g.n = 0;
	assert_int_equal(rp_otlp_decode_pb(w.b, w.n, &o, collect, &g, &st, why), 0);
	assert_string_equal(g.cat[1], "postgresql");
	assert_string_equal(g.cat[0], "server");
	/* the per-request cap */
	o = (struct rp_otlp_decode_opts){ .max_spans = 2 };
	g.n = 0;
	assert_int_equal(rp_otlp_decode_pb(w.b, w.n, &o, collect, &g, &st, why), 0);
	assert_int_equal(st.spans, 2);
	assert_int_equal(st.rejected, 1);
}

static void test_otlp_decode_json_fields(void **state)
{
	static const char js[] =
		"{\"resourceSpans\":[{\"resource\":{\"attributes\":["
		"{\"key\":\"service.name\",\"value\":{\"stringValue\":\"vllm\"}},"
		"{\"key\":\"process.pid\",\"value\":{\"intValue\":\"77\"}}]},"
		"\"scopeSpans\":[{\"scope\":{\"name\":\"x\"},\"spans\":["
		"{\"traceId\":\"5B8EFFF798038103D269B633813FC60C\",\"spanId\":\"EEE19B7EC3C1B174\","
		"\"parentSpanId\":\"\",\"name\":\"llm_request\",\"kind\":\"SPAN_KIND_SERVER\","
		"\"startTimeUnixNano\":\"1544712660000000000\",\"endTimeUnixNano\":"
		"1544712661000000000,"
		"\"attributes\":[{\"key\":\"gen_ai.operation.name\",\"value\":{\"stringValue\":"
		"\"chat\"}}],"
		"\"status\":{\"code\":\"STATUS_CODE_ERROR\"}},"
		"{\"traceId\":\"5b8efff798038103d269b633813fc60c\",\"spanId\":\"0000000000000001\","
		"\"parentSpanId\":\"eee19b7ec3c1b174\",\"name\":\"q\",\"kind\":3,"
		"\"startTimeUnixNano\":\"1544712660000000001\",\"endTimeUnixNano\":"
		"\"1544712660000000002\","
		"\"attributes\":[{\"key\":\"http.request.method\",\"value\":{\"stringValue\":"
		"\"GET\"}}]},"
		"{\"traceId\":\"zz\",\"spanId\":\"0000000000000001\",\"name\":\"bad\"}"
		"]}]}]}";
	struct rp_otlp_decode_stats st;
	struct got g = { 0 };
	char why[RP_WHY_MAX];

	(void)state;
	assert_int_equal(rp_otlp_decode_json(js, strlen(js), NULL, collect, &g, &st, why), 0);
	assert_int_equal(st.spans, 2);
	assert_int_equal(st.rejected, 1);
	assert_string_equal(g.service[0], "vllm");
	assert_int_equal(g.s[0].pid, 77);
	assert_string_equal(g.name[0], "llm_request");
	assert_string_equal(g.cat[0], "llm");
	assert_string_equal(g.cat[1], "http");
	assert_int_equal(g.s[0].kind, 2);
	assert_true(g.s[0].error);
	assert_false(g.s[0].has_parent);
	assert_true(g.s[1].has_parent);
	assert_memory_equal(g.s[1].parent, g.s[0].id, 8);
	assert_int_equal(g.s[0].start, 1544712660000000000ull);
	assert_int_equal(g.s[0].end, 1544712661000000000ull);
	assert_int_equal(g.s[0].trace[0], 0x5b);
}

static void test_otlp_decode_malformed(void **state)
{
	static struct pbw w;
	static char deep[400];
	struct rp_otlp_decode_stats st;
	struct got g = { 0 };
	char why[RP_WHY_MAX];
	int idx[] = { 0, 1, 2 };
	static const uint8_t group[] = { 0x0b, 0x0c },
			     longvarint[] = { 0x0a, 0xff, 0xff, 0xff, 0xff, 0xff,
					      0xff, 0xff, 0xff, 0xff, 0xff, 0x01 };

	(void)state;
	fixed_spans();
	pb_request(&w, idx, 3, "svc");
	/* every cut of a valid request either decodes (a prefix that ends on a field) or
	 * fails with a reason; never more spans than were whole */
	for (size_t cut = 0; cut < w.n; cut++) {
		int err = rp_otlp_decode_pb(w.b, cut, NULL, collect, &g, &st, why);
		assert_true(err == 0 || (err == -EINVAL && why[0] != '\0'));
		assert_true(st.spans <= 3);
	}
	assert_int_equal(rp_otlp_decode_pb(group, sizeof(group), NULL, collect, &g, &st, why),
			 -EINVAL);
	assert_int_equal(
		rp_otlp_decode_pb(longvarint, sizeof(longvarint), NULL, collect, &g, &st, why),
		-EINVAL);
	assert_int_equal(
		rp_otlp_decode_json("{\"resourceSpans\":[", 18, NULL, collect, &g, &st, why),
		-EINVAL);
	assert_non_null(strstr(why, "malformed JSON"));
	assert_int_equal(rp_otlp_decode_json("[1]", 3, NULL, collect, &g, &st, why), -EINVAL);
	assert_int_equal(
		rp_otlp_decode_json("{\"resourceSpans\":{}}", 20, NULL, collect, &g, &st, why),
		-EINVAL);
	memset(deep, '[', sizeof(deep));
	assert_int_equal(rp_otlp_decode_json(deep, sizeof(deep), NULL, collect, &g, &st, why),
			 -EINVAL);
	assert_non_null(strstr(why, "deep"));
	/* end before start: rejected, not an error */
	sp[1].end = 1500;
	pb_request(&w, idx, 3, "svc");
	assert_int_equal(rp_otlp_decode_pb(w.b, w.n, NULL, collect, &g, &st, why), 0);
	assert_int_equal(st.spans, 2);
	assert_int_equal(st.rejected, 1);
}

/* --- the reorder buffer --- */

static struct rp_engine *engine_new(void)
{
	struct rp_engine *e;

	assert_int_equal(rp_engine_open(NULL, &e), 0);
	return e;
}

/* @order: the spans' indexes in the order they end, children before their parents at
 * equal ends (an SDK exports a span when it ends, in that order). */
static void end_order(int *order)
{
	for (int i = 0; i < n_sp; i++)
		order[i] = i;
	for (int i = 1; i < n_sp; i++)
		for (int j = i; j > 0 && (sp[order[j - 1]].end > sp[order[j]].end ||
					  (sp[order[j - 1]].end == sp[order[j]].end &&
					   order[j - 1] < order[j]));
		     j--) {
			int t = order[j];

			order[j] = order[j - 1];
			order[j - 1] = t;
		}
}

/* Spans handed over in the order they end, in batches, with the horizon advanced as a
 * live engine would: the engine's figures equal the oracle's. */
static void test_otlp_reorder_matches_oracle(void **state)
{
	static struct pbw w;
	const uint64_t t0 = 1700000000000000000ull, horizon = 30000000; /* 30 ms */
	struct rp_otlp_cfg cfg = { .horizon_ns = horizon };
	struct rp_otlp_decode_stats ds;
	struct rp_otlp_stats os;
	struct rp_engine *e = engine_new();
	static int order[MAX_SPANS];
	struct rp_report r;
	struct expect x;
	struct rp_otlp *o;
	char why[RP_WHY_MAX];

	(void)state;
	gen(200, t0);
	oracle(&x);
	/* the order spans end in (children before their parents at equal ends) */
	end_order(order);
	assert_int_equal(rp_otlp_open(e, &cfg, &o), 0);
	/* batches of 7, sent 10 ms (span clock) after the newest end they hold */
	for (int k = 0; k < n_sp; k += 7) {
		int n = n_sp - k < 7 ? n_sp - k : 7;
		uint64_t newest = 0;

		for (int i = 0; i < n; i++)
			if (sp[order[k + i]].end > newest)
				newest = sp[order[k + i]].end;
		rp_otlp_advance(o, newest + 10000000 - horizon);
		pb_request(&w, order + k, n, "svc");
		assert_int_equal(rp_otlp_decode_pb(w.b, w.n, NULL, rp_otlp_add, o, &ds, why), 0);
		assert_int_equal(ds.rejected, 0);
	}
	rp_otlp_finish(o);
	rp_otlp_stats(o, &os);
	assert_int_equal(os.late, 0);
	assert_int_equal(os.spans, (uint64_t)n_sp);
	assert_int_equal(os.released, (uint64_t)n_sp);
	assert_int_equal(os.pending, 0);
	assert_int_equal(os.traces, 0);
	assert_int_equal(rp_engine_report(e, &r), 0);
	check_report(&r, &x);
	assert_int_equal(r.n_sources, 1);
	assert_string_equal(r.sources[0].name, "otlp:svc");
	assert_int_equal(r.sources[0].pid, 4242);
	assert_int_equal(r.sources[0].late, 0);
	rp_report_free(&r);
	rp_otlp_close(o);
	rp_engine_close(e);
}

/* A span that starts before what was already fed: late, counted on its source, not
 * analysed; the caps are counted too. */
static void test_otlp_late_and_caps(void **state)
{
	static struct pbw w;
	struct rp_otlp_cfg cfg = { .horizon_ns = 1000, .max_pending = 2 };
	struct rp_otlp_decode_stats ds;
	struct rp_otlp_stats os;
	struct rp_engine *e = engine_new();
	struct rp_report r;
	struct rp_otlp *o;
	char why[RP_WHY_MAX];
	int a[] = { 0 }, b[] = { 1, 2 };

	(void)state;
	fixed_spans();
	assert_int_equal(rp_otlp_open(e, &cfg, &o), 0);
	pb_request(&w, a, 1, "svc");
	assert_int_equal(rp_otlp_decode_pb(w.b, w.n, NULL, rp_otlp_add, o, &ds, why), 0);
	rp_otlp_advance(o, 2500);    /* the root's BEGIN is fed */
	pb_request(&w, b, 2, "svc"); /* db starts at 2000: late; llm at 3000: in time */
	assert_int_equal(rp_otlp_decode_pb(w.b, w.n, NULL, rp_otlp_add, o, &ds, why), 0);
	rp_otlp_stats(o, &os);
	assert_int_equal(os.late, 1);
	assert_int_equal(os.spans, 2);
	/* the buffer holds 2 spans at most: a third is refused, counted */
	int c[] = { 2 };
	pb_request(&w, c, 1, "svc");
	assert_int_equal(rp_otlp_decode_pb(w.b, w.n, NULL, rp_otlp_add, o, &ds, why), 0);
	assert_int_equal(ds.rejected, 1);
	rp_otlp_stats(o, &os);
	assert_int_equal(os.pending_capped, 1);
	rp_otlp_finish(o);
	assert_int_equal(rp_engine_report(e, &r), 0);
	assert_int_equal(r.sources[0].late, 1);
	assert_int_equal(find_fn(&r, "request")->calls, 1);
	assert_int_equal(find_fn(&r, "llm")->calls, 1);
	assert_null(find_fn(&r, "db"));
	/* the request's self time: 8000 - llm's 5000 */
	assert_int_equal(find_fn(&r, "request")->self_ns, 3000);
	rp_report_free(&r);
	rp_otlp_close(o);
	rp_engine_close(e);
}

/* The Collector's file exporter: one JSON request per line; `ringprof analyze` reads
 * it (detected by content) with the same results as the live receiver. */
static void json_span(FILE *f, int i)
{
	uint8_t trace[16], id[8], pt[16], pid[8];

	ids_of(i, trace, id);
	fprintf(f, "{\"traceId\":\"");
	for (int k = 0; k < 16; k++)
		fprintf(f, "%02x", trace[k]);
	fprintf(f, "\",\"spanId\":\"");
	for (int k = 0; k < 8; k++)
		fprintf(f, "%02x", id[k]);
	fprintf(f, "\",\"parentSpanId\":\"");
	if (sp[i].parent >= 0) {
		ids_of(sp[i].parent, pt, pid);
		for (int k = 0; k < 8; k++)
			fprintf(f, "%02x", pid[k]);
	}
	fprintf(f,
		"\",\"name\":\"%s\",\"kind\":%d,\"startTimeUnixNano\":\"%" PRIu64
		"\",\"endTimeUnixNano\":\"%" PRIu64 "\"}",
		names[sp[i].name], sp[i].kind, sp[i].start, sp[i].end);
}

static void test_otlp_analyze_file_exporter(void **state)
{
	char path[64], cmd[700], out[64];
	struct rp_otlp_stats os;
	struct rp_engine *e = engine_new();
	const char *b = getenv("RP_BIN_DIR");
	struct rp_report r;
	struct expect x;
	char why[RP_WHY_MAX];
	FILE *f;

	(void)state;
	gen(100, 1700000000000000000ull);
	oracle(&x);
	rp_test_temp_path(path, ".json");
	f = fopen(path, "w");
	assert_non_null(f);
	/* newest spans first: a file need not be in any order */
	for (int k = n_sp - 1; k >= 0; k -= 9) {
		fprintf(f, "{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":"
			   "\"service.name\",\"value\":{\"stringValue\":\"file\"}}]},"
			   "\"scopeSpans\":[{\"spans\":[");
		for (int i = k; i > k - 9 && i >= 0; i--) {
			if (i != k)
				fputc(',', f);
			json_span(f, i);
		}
		fprintf(f, "]}]}]}\n");
	}
	fclose(f);
	assert_int_equal(rp_otlp_detect(path), 1);
	assert_int_equal(rp_otlp_import_file(e, path, NULL, &os, why), 0);
	assert_int_equal(os.bad, 0);
	assert_int_equal(os.released, (uint64_t)n_sp);
	assert_int_equal(rp_engine_report(e, &r), 0);
	check_report(&r, &x);
	assert_int_equal(r.sources[0].flags & RP_SRC_FILE, RP_SRC_FILE);
	rp_report_free(&r);
	rp_engine_close(e);
	/* the CLI finds the format by itself */
	if (b != NULL) {
		rp_test_temp_path(out, ".txt");
		snprintf(cmd, sizeof(cmd), "%s/ringprof analyze %s --format json -o %s", b, path,
			 out);
		assert_int_equal(system(cmd), 0);
		assert_true(access(out, F_OK) == 0);
		unlink(out);
	}
	/* a malformed line: the line's number in the reason */
	f = fopen(path, "a");
	fprintf(f, "{\"resourceSpans\":[}\n");
	fclose(f);
	e = engine_new();
	assert_int_equal(rp_otlp_import_file(e, path, NULL, &os, why), -EINVAL);
	snprintf(cmd, sizeof(cmd), "line %d:", (n_sp + 8) / 9 + 1);
	assert_non_null(strstr(why, cmd));
	rp_engine_close(e);
	unlink(path);
}

/* Status ERROR (code 2) ends a span in error (RP_SPAN_ERROR): counted per name, and the
 * roots are requests (concurrency.requests): two overlapping for 1 of their 5 ms. */
static void test_otlp_status_error_counted(void **state)
{
	static const char *const spans[] = {
		"{\"traceId\":\"0102030405060708090a0b0c0d0e0f10\",\"spanId\":\"0102030405060708\","
		"\"name\":\"req\",\"kind\":2,\"startTimeUnixNano\":\"1000000000\","
		"\"endTimeUnixNano\":\"1005000000\",\"status\":{\"code\":2}}",
		"{\"traceId\":\"0102030405060708090a0b0c0d0e0f10\",\"spanId\":\"1102030405060708\","
		"\"parentSpanId\":\"0102030405060708\",\"name\":\"db\",\"kind\":3,"
		"\"startTimeUnixNano\":\"1001000000\",\"endTimeUnixNano\":\"1002000000\","
		"\"status\":{\"code\":2,\"message\":\"timeout\"}}",
		"{\"traceId\":\"1102030405060708090a0b0c0d0e0f10\",\"spanId\":\"2102030405060708\","
		"\"name\":\"req\",\"kind\":2,\"startTimeUnixNano\":\"1003000000\","
		"\"endTimeUnixNano\":\"1004000000\",\"status\":{\"code\":1}}",
	};
	struct rp_engine *e = engine_new();
	struct rp_otlp_stats os;
	struct rp_report r;
	char path[64], why[RP_WHY_MAX];
	unsigned seen = 0;
	FILE *f;

	(void)state;
	rp_test_temp_path(path, ".json");
	f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":"
		   "\"service.name\",\"value\":{\"stringValue\":\"svc\"}}]},"
		   "\"scopeSpans\":[{\"spans\":[%s,%s,%s]}]}]}\n", spans[0], spans[1], spans[2]);
	fclose(f);
	assert_int_equal(rp_otlp_import_file(e, path, NULL, &os, why), 0);
	assert_int_equal(rp_engine_report(e, &r), 0);
	for (uint32_t i = 0; i < r.n_fns; i++) {
		if (strcmp(r.fns[i].name, "req") == 0) {
			assert_int_equal(r.fns[i].calls, 2);
			assert_int_equal(r.fns[i].errors, 1); /* code 1 (OK) is no error */
			seen++;
		} else if (strcmp(r.fns[i].name, "db") == 0) {
			assert_int_equal(r.fns[i].calls, 1);
			assert_int_equal(r.fns[i].errors, 1);
			seen++;
		}
	}
	assert_int_equal(seen, 2);
	assert_true(rp_report_has_requests(&r));
	assert_int_equal(r.requests.max, 2);
	assert_int_equal(r.requests.p50, 1); /* 1 for 4 of the 5 ms, 2 for 1 */
	assert_int_equal(r.requests.p90, 2);
	assert_int_equal(r.requests.mean_milli, 1200);
	rp_report_free(&r);
	rp_engine_close(e);
	unlink(path);
}

/* --- a live engine --- */

static char bin[512], dir[64], session[96];
static pid_t eng = -1;
static int port;

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int connect_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void engine_start(const char *horizon_ms, const char *max_body)
{
	char addr[64];
	int fd;

	snprintf(addr, sizeof(addr), "127.0.0.1:%d", port = rp_test_free_port());
	eng = fork();
	if (eng == 0) {
		execl(bin, "ringprof", "run", "--session", session, "--snapshot-dir", dir,
		      "--quiet", "--no-socket", "--otlp", addr, "--otlp-horizon-ms", horizon_ms,
		      "--otlp-max-body", max_body, (char *)NULL);
		_exit(127);
	}
	for (uint64_t end = now_ms() + 10000; (fd = connect_port()) < 0; usleep(20000))
		if (now_ms() > end)
			fail_msg("the engine does not listen on %d", port);
	close(fd);
}

/* SIGTERM: the engine feeds what it holds, writes its final snapshot, exits 0. */
static void engine_stop(struct rp_report *r)
{
	char path[256], why[RP_WHY_MAX];
	int st = 0;

	kill(eng, SIGTERM);
	waitpid(eng, &st, 0);
	eng = -1;
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	snprintf(path, sizeof(path), "%s/ringprof-%s.msgpack", dir, session);
	if (rp_snapshot_read_file(path, r, why) != 0)
		fail_msg("%s", why);
	unlink(path);
}

static int live_setup(void **state)
{
	const char *b = getenv("RP_BIN_DIR"), *s = getenv("RINGPROF_SESSION");

	(void)state;
	if (b == NULL) {
		fprintf(stderr, "RP_BIN_DIR is not set (run through ctest)\n");
		return -1;
	}
	snprintf(bin, sizeof(bin), "%s/ringprof", b);
	snprintf(session, sizeof(session), "%s", s ? s : "t_test_otlp");
	snprintf(dir, sizeof(dir), "/tmp/rp_test_otlp.XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int live_teardown(void **state)
{
	char cmd[128];

	(void)state;
	if (eng > 0) {
		kill(eng, SIGKILL);
		waitpid(eng, NULL, 0);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* One exchange on @fd: send @req, read one response; its status code, its body. */
static int exchange(int fd, const void *req, size_t n, char *body, size_t cap)
{
	char buf[8192];
	size_t got = 0;
	int code = 0;
	char *h, *cl;

	assert_int_equal(send(fd, req, n, MSG_NOSIGNAL), (ssize_t)n);
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t k;

		assert_int_equal(poll(&p, 1, 5000), 1);
		k = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);
		if (k <= 0)
			break;
		got += (size_t)k;
		buf[got] = '\0';
		if ((h = strstr(buf, "\r\n\r\n")) && (cl = strstr(buf, "Content-Length: ")) &&
		    got >= (size_t)(h + 4 - buf) + strtoul(cl + 16, NULL, 10))
			break;
	}
	buf[got] = '\0';
	assert_int_equal(sscanf(buf, "HTTP/1.1 %d", &code), 1);
	h = strstr(buf, "\r\n\r\n");
	snprintf(body, cap, "%s", h ? h + 4 : "");
	return code;
}

static void test_otlp_http_framing(void **state)
{
	static struct pbw w;
	static char req[1 << 21];
	char body[4096];
	int idx[] = { 0, 1, 2 }, fd, n;
	struct rp_report r;
	uint64_t base;
	struct timespec now;

	(void)state;
	engine_start("100", "65536");
	clock_gettime(CLOCK_REALTIME, &now);
	base = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec + 60000000000ull;
	fixed_spans();
	for (int i = 0; i < 3; i++)
		sp[i].start += base, sp[i].end += base;
	pb_request(&w, idx, 3, "framing");
	fd = connect_port();
	/* keep-alive: several requests on one connection */
	n = snprintf(req, sizeof(req),
		     "POST /v1/traces HTTP/1.1\r\nHost: x\r\n"
		     "Content-Type: application/x-protobuf\r\nContent-Length: %zu\r\n\r\n",
		     w.n);
	memcpy(req + n, w.b, w.n);
	assert_int_equal(exchange(fd, req, (size_t)n + w.n, body, sizeof(body)), 200);
	/* chunked, in two chunks and a trailer (another service: other tracks) */
	pb_request(&w, idx, 3, "framing2");
	n = snprintf(req, sizeof(req),
		     "POST /v1/traces HTTP/1.1\r\nHost: x\r\n"
		     "Content-Type: application/x-protobuf\r\nTransfer-Encoding: chunked\r\n\r\n"
		     "%zx\r\n",
		     (size_t)5);
	memcpy(req + n, w.b, 5);
	n += 5;
	n += sprintf(req + n, "\r\n%zx;ext=1\r\n", w.n - 5);
	memcpy(req + n, w.b + 5, w.n - 5);
	n += (int)(w.n - 5);
	n += sprintf(req + n, "\r\n0\r\n\r\n");
	assert_int_equal(exchange(fd, req, (size_t)n, body, sizeof(body)), 200);
	/* gzip, JSON: an empty request */
	{
		unsigned char gz[256];
		z_stream z = { 0 };
		const char *js = "{\"resourceSpans\":[]}";
		deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
		z.next_in = (unsigned char *)js;
		z.avail_in = (uInt)strlen(js);
		z.next_out = gz;
		z.avail_out = sizeof(gz);
		assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
		n = snprintf(req, sizeof(req),
			     "POST /v1/traces HTTP/1.1\r\nHost: x\r\n"
			     "Content-Type: application/json\r\nContent-Encoding: gzip\r\n"
			     "Content-Length: %lu\r\n\r\n",
			     z.total_out);
		memcpy(req + n, gz, z.total_out);
		assert_int_equal(exchange(fd, req, (size_t)n + z.total_out, body, sizeof(body)),
				 200);
		assert_string_equal(body, "{}");
		deflateEnd(&z);
	}
	/* malformed JSON: 400 with a google.rpc.Status, and the connection stays */
	n = snprintf(req, sizeof(req),
		     "POST /v1/traces HTTP/1.1\r\nHost: x\r\n"
		     "Content-Type: application/json\r\nContent-Length: 5\r\n\r\n{\"a\":");
	assert_int_equal(exchange(fd, req, (size_t)n, body, sizeof(body)), 400);
	assert_non_null(strstr(body, "\"code\":3"));
	/* a span rejected (end before start): 200 with partial_success */
	{
		static const char js[] =
			"{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"traceId\":"
			"\"0102030405060708090a0b0c0d0e0f10\",\"spanId\":\"0102030405060708\","
			"\"startTimeUnixNano\":\"9\",\"endTimeUnixNano\":\"8\"}]}]}]}";
		n = snprintf(req, sizeof(req),
			     "POST /v1/traces HTTP/1.1\r\nHost: x\r\n"
			     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
			     strlen(js), js);
	}
	assert_int_equal(exchange(fd, req, (size_t)n, body, sizeof(body)), 200);
	assert_non_null(strstr(body, "\"rejectedSpans\":\"1\""));
	/* 415 (and closed) */
	n = snprintf(req, sizeof(req),
		     "POST /v1/traces HTTP/1.1\r\nHost: x\r\n"
		     "Content-Type: text/plain\r\nContent-Length: 2\r\n\r\nhi");
	assert_int_equal(exchange(fd, req, (size_t)n, body, sizeof(body)), 415);
	close(fd);
	/* 413: a body above --otlp-max-body, by Content-Length and by chunks */
	fd = connect_port();
	n = snprintf(req, sizeof(req),
		     "POST /v1/traces HTTP/1.1\r\nHost: x\r\n"
		     "Content-Type: application/x-protobuf\r\nContent-Length: 65537\r\n\r\n");
	assert_int_equal(exchange(fd, req, (size_t)n, body, sizeof(body)), 413);
	close(fd);
	fd = connect_port();
	n = snprintf(req, sizeof(req),
		     "POST /v1/traces HTTP/1.1\r\nHost: x\r\n"
		     "Content-Type: application/x-protobuf\r\nTransfer-Encoding: chunked\r\n\r\n"
		     "10001\r\n");
	assert_int_equal(exchange(fd, req, (size_t)n, body, sizeof(body)), 413);
	close(fd);
	/* framings two readers could read two ways (the HTTP core, tools/server/http.c):
	 * refused with a google.rpc.Status, not guessed at */
	{
		static const char *const smuggle[] = {
			"Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n",
			"Content-Length: 2\r\nContent-Length: 3\r\n\r\n",
			"Content-Length: +2\r\n\r\n",
			"Transfer-Encoding: chunked\r\n\r\n0x2\r\n",
		};

		for (int i = 0; i < 4; i++) {
			fd = connect_port();
			n = snprintf(req, sizeof(req),
				     "POST /v1/traces HTTP/1.1\r\nHost: x\r\n"
				     "Content-Type: application/x-protobuf\r\n%s",
				     smuggle[i]);
			assert_int_equal(exchange(fd, req, (size_t)n, body, sizeof(body)), 400);
			assert_int_equal(body[0], 0x08); /* google.rpc.Status: code */
			close(fd);
		}
	}
	fd = connect_port();
	n = snprintf(req, sizeof(req),
		     "POST /v1/traces HTTP/1.1\r\nHost: x\r\n"
		     "Content-Type: application/x-protobuf\r\nTransfer-Encoding: gzip\r\n\r\n");
	assert_int_equal(exchange(fd, req, (size_t)n, body, sizeof(body)), 415);
	close(fd);
	/* 405, 404 */
	fd = connect_port();
	n = snprintf(req, sizeof(req), "GET /v1/traces HTTP/1.1\r\nHost: x\r\n\r\n");
	assert_int_equal(exchange(fd, req, (size_t)n, body, sizeof(body)), 405);
	close(fd);
	fd = connect_port();
	n = snprintf(req, sizeof(req), "POST /v1/logs HTTP/1.1\r\nHost: x\r\n\r\n");
	assert_int_equal(exchange(fd, req, (size_t)n, body, sizeof(body)), 404);
	close(fd);
	/* the spans were taken twice, from two services */
	engine_stop(&r);
	assert_int_equal(find_fn(&r, "request")->calls, 2);
	assert_int_equal(find_fn(&r, "db")->calls, 2);
	assert_int_equal(find_fn(&r, "request")->self_ns, 2 * 2000); /* 8000 - (2000..8000) */
	rp_report_free(&r);
}

/* --- the official SDK --- */

static char npm_dir[512];

/* The SDK packages in a cache outside the repository, installed once. */
static bool sdk_ready(void)
{
	const char *d = getenv("RP_OTEL_NPM_DIR"), *home = getenv("HOME");
	char path[700], cmd[1400];
	struct stat st;

	if (system("command -v node >/dev/null 2>&1") != 0) {
		fprintf(stderr, "test_otlp sdk: SKIP: no node\n");
		return false;
	}
	if (d)
		snprintf(npm_dir, sizeof(npm_dir), "%s", d);
	else
		snprintf(npm_dir, sizeof(npm_dir), "%s/.cache/ringprof/otel-npm",
			 home ? home : "/tmp");
	snprintf(path, sizeof(path), "%s/node_modules/@opentelemetry/exporter-trace-otlp-proto",
		 npm_dir);
	if (stat(path, &st) == 0)
		return true;
	snprintf(cmd, sizeof(cmd),
		 "mkdir -p '%s' && cd '%s' && { test -f package.json || "
		 "echo '{\"private\":true}' > package.json; } && timeout 300 npm install "
		 "--no-audit --no-fund --silent @opentelemetry/api @opentelemetry/sdk-trace-base "
		 "@opentelemetry/resources @opentelemetry/exporter-trace-otlp-proto "
		 "@opentelemetry/exporter-trace-otlp-http >/dev/null 2>&1",
		 npm_dir, npm_dir);
	if (system(cmd) != 0 || stat(path, &st) != 0) {
		fprintf(stderr,
			"test_otlp sdk: SKIP: npm cannot install the OpenTelemetry SDK "
			"into %s (no registry?)\n",
			npm_dir);
		return false;
	}
	return true;
}

static void sdk_send(const char *protocol, const char *compression, const char *service)
{
	char spec_path[128], cmd[1600];
	const char *src = getenv("RP_SRC_DIR");
	FILE *f;
	static int order[MAX_SPANS];

	snprintf(spec_path, sizeof(spec_path), "%s/spec.json", dir);
	f = fopen(spec_path, "w");
	assert_non_null(f);
	fprintf(f,
		"{\"url\":\"http://127.0.0.1:%d/v1/traces\",\"protocol\":\"%s\","
		"\"compression\":\"%s\",\"service\":\"%s\",\"batch\":13,\"spans\":[",
		port, protocol, compression, service);
	for (int i = 0; i < n_sp; i++)
		fprintf(f,
			"%s{\"name\":\"%s\",\"parent\":%d,\"kind\":%d,\"start\":\"%" PRIu64
			"\",\"end\":\"%" PRIu64 "\",\"error\":%s%s}",
			i ? "," : "", names[sp[i].name], sp[i].parent,
			sp[i].kind == 0 ? 0 : sp[i].kind - 1, /* the JS enum: INTERNAL = 0 */
			sp[i].start, sp[i].end, sp[i].error ? "true" : "false",
			sp[i].name == N_LLM ? ",\"attrs\":{\"gen_ai.operation.name\":\"chat\"}"
					    : "");
	/* end order: by end time, children first; the SDK exports in that order */
	end_order(order);
	fprintf(f, "],\"end_order\":[");
	for (int i = 0; i < n_sp; i++)
		fprintf(f, "%s%d", i ? "," : "", order[i]);
	fprintf(f, "]}\n");
	fclose(f);
	snprintf(cmd, sizeof(cmd), "NODE_PATH='%s/node_modules' node '%s/tests/otlp/send.js' '%s'",
		 npm_dir, src ? src : ".", spec_path);
	assert_int_equal(system(cmd), 0);
}

/* Times a minute ahead: no span is late whatever the SDK's batching delays, and the
 * final snapshot (SIGTERM) feeds everything. */
static uint64_t future_base(void)
{
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec + 60000000000ull;
}

static void sdk_run(const char *protocol, const char *compression)
{
	struct rp_report r;
	struct expect x;

	gen(150, future_base());
	/* the JS SDK's span kinds: SERVER roots only (UNSPECIFIED does not exist there) */
	for (int i = 0; i < n_sp; i++)
		if (sp[i].kind == 0)
			sp[i].kind = 2;
	oracle(&x);
	engine_start("200", "16777216");
	sdk_send(protocol, compression, "sdk");
	engine_stop(&r);
	check_report(&r, &x);
	assert_int_equal(r.n_sources, 1);
	assert_string_equal(r.sources[0].name, "otlp:sdk");
	assert_int_equal(r.sources[0].late, 0);
	for (uint32_t i = 0; i < r.n_fns; i++)
		if (strcmp(r.fns[i].name, "llm") == 0)
			assert_string_equal(r.fns[i].category, "llm");
		else if (strcmp(r.fns[i].name, "request") == 0)
			assert_string_equal(r.fns[i].category, "server");
	rp_report_free(&r);
}

static void test_otlp_sdk_protobuf_gzip(void **state)
{
	(void)state;
	sdk_run("proto", "gzip");
}

static void test_otlp_sdk_json(void **state)
{
	(void)state;
	sdk_run("json", "none");
}

int main(int argc, char **argv)
{
	const struct CMUnitTest unit[] = {
		cmocka_unit_test(test_otlp_decode_pb_fields),
		cmocka_unit_test(test_otlp_decode_json_fields),
		cmocka_unit_test(test_otlp_decode_malformed),
		cmocka_unit_test(test_otlp_reorder_matches_oracle),
		cmocka_unit_test(test_otlp_late_and_caps),
		cmocka_unit_test(test_otlp_analyze_file_exporter),
		cmocka_unit_test(test_otlp_status_error_counted),
		cmocka_unit_test_setup_teardown(test_otlp_http_framing, live_setup, live_teardown),
	};
	const struct CMUnitTest sdk[] = {
		cmocka_unit_test_setup_teardown(test_otlp_sdk_protobuf_gzip, live_setup,
						live_teardown),
		cmocka_unit_test_setup_teardown(test_otlp_sdk_json, live_setup, live_teardown),
	};

	if (argc > 1 && strcmp(argv[1], "sdk") == 0) {
		if (!sdk_ready())
			return 77;
		return cmocka_run_group_tests(sdk, NULL, NULL);
	}
	return cmocka_run_group_tests(unit, NULL, NULL);
}
