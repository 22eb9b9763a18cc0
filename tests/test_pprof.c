// SPDX-License-Identifier: MIT
/*
 * The pprof export (tools/render/render_pprof.c) read back by code that shares none
 * of it: zlib's inflate and a protobuf field walker written here from the encoding
 * rules, which accepts packed and unpacked repeated fields alike.
 * - The writer (protobuf.c) against byte strings from the protobuf encoding
 *   documentation's examples, and round trips of boundary varints.
 * - A random workload (recursion, thread and async tracks, three categories) fed to
 *   an engine: per function, pprof's flat (samples it is the leaf of), cum (samples
 *   whose stack holds it, once per sample) and flat calls, computed here from the
 *   decoded samples as pprof computes them, equal the report's self_ns, cum_ns and
 *   calls; names, files, lines, labels, sample types, times.
 * - Odd reports: ill-formed UTF-8 repaired, a node naming no function ("?"), a
 *   negative self time, several sources (no source label), a bad parent (-EINVAL,
 *   nothing written), an empty report.
 * - The CLI refuses to write the binary to a terminal (script(1) gives it one).
 * `test_pprof go`: the real `go tool pprof -top` over the CLI's export of two traces
 * (the torch sample and one written here with recursion and categories): its flat and
 * cum columns (-unit=ns) equal self_ns and cum_ns of the CLI's JSON report, per
 * function. Skipped (77) without go (Debian: golang-go).
 */
#include "support.h"

#include <inttypes.h>
#include <string.h>
#include <yajl/yajl_tree.h>
#include <zlib.h>

#include "engine.h"
#include "protobuf.h"
#include "render.h"

/* ---- an independent reader --------------------------------------------------------- */

struct rd {
	const uint8_t *p, *end;
};

static bool rd_varint(struct rd *r, uint64_t *v)
{
	*v = 0;
	for (unsigned shift = 0; shift < 64 && r->p < r->end; shift += 7) {
		uint8_t b = *r->p++;

		*v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return true;
	}
	return false;
}

/* The next field: its number, wire type, and its varint or its payload. */
static bool rd_field(struct rd *r, uint32_t *field, unsigned *wire, uint64_t *v, struct rd *sub)
{
	uint64_t k, n;

	if (r->p >= r->end || !rd_varint(r, &k))
		return false;
	*field = (uint32_t)(k >> 3);
	*wire = k & 7;
	switch (*wire) {
	case 0: return rd_varint(r, v);
	case 2:
		if (!rd_varint(r, &n) || n > (uint64_t)(r->end - r->p))
			return false;
		sub->p = r->p;
		sub->end = r->p + n;
		r->p += n;
		return true;
	default: return false; /* the writer never uses fixed32/64 or groups */
	}
}

/* A repeated varint field, packed (wire 2) or not: appended to @a. */
static void rd_repeated(unsigned wire, uint64_t v, struct rd *sub, uint64_t *a, size_t *n,
			size_t cap)
{
	if (wire == 0) {
		assert_true(*n < cap);
		a[(*n)++] = v;
		return;
	}
	while (sub->p < sub->end) {
		assert_true(*n < cap);
		assert_true(rd_varint(sub, &a[(*n)++]));
	}
}

#define MAXD 64 /* deepest stack of the workloads */
#define MAXL 4

struct dsample {
	uint64_t loc[MAXD], val[4], key[MAXL], str[MAXL], num[MAXL];
	size_t nloc, nval, nlab;
};

struct dfn {
	uint64_t id, name, system_name, filename, start_line;
};

struct dloc {
	uint64_t id, mapping, fn, line;
	size_t nlines;
};

struct dprof {
	char **str;
	size_t nstr;
	uint64_t st_type[4], st_unit[4];
	size_t nst;
	uint64_t dflt, pt_type, pt_unit, period, time, duration;
	struct dsample *s;
	size_t ns;
	struct dfn *fn;
	size_t nfn;
	struct dloc *loc;
	size_t nloc;
	uint64_t comment[64];
	size_t ncomment;
	uint64_t mappings;
};

#define GROW(a, n) ((a) = realloc((a), sizeof(*(a)) * ((n) + 1)), assert_non_null(a), &(a)[(n)++])

static void rd_value_type(struct rd m, uint64_t *type, uint64_t *unit)
{
	struct rd sub;
	uint32_t f;
	unsigned w;
	uint64_t v;

	while (rd_field(&m, &f, &w, &v, &sub)) {
		if (f == 1)
			*type = v;
		if (f == 2)
			*unit = v;
	}
	assert_true(m.p == m.end);
}

static void rd_sample(struct rd m, struct dsample *s)
{
	struct rd sub, l;
	uint32_t f, lf;
	unsigned w, lw;
	uint64_t v, lv;

	memset(s, 0, sizeof(*s));
	while (rd_field(&m, &f, &w, &v, &sub)) {
		if (f == 1)
			rd_repeated(w, v, &sub, s->loc, &s->nloc, MAXD);
		else if (f == 2)
			rd_repeated(w, v, &sub, s->val, &s->nval, 4);
		else if (f == 3) {
			assert_true(s->nlab < MAXL);
			s->str[s->nlab] = 0;
			s->num[s->nlab] = UINT64_MAX;
			while (rd_field(&sub, &lf, &lw, &lv, &l)) {
				if (lf == 1)
					s->key[s->nlab] = lv;
				if (lf == 2)
					s->str[s->nlab] = lv;
				if (lf == 3)
					s->num[s->nlab] = lv;
			}
			s->nlab++;
		}
	}
	assert_true(m.p == m.end);
}

static void rd_function(struct rd m, struct dfn *fn)
{
	struct rd sub;
	uint32_t f;
	unsigned w;
	uint64_t v;

	memset(fn, 0, sizeof(*fn));
	while (rd_field(&m, &f, &w, &v, &sub)) {
		uint64_t *at[] = { NULL,	  &fn->id,	  &fn->name, &fn->system_name,
				   &fn->filename, &fn->start_line };
		if (f >= 1 && f <= 5)
			*at[f] = v;
	}
	assert_true(m.p == m.end);
}

static void rd_location(struct rd m, struct dloc *lc)
{
	struct rd sub, ls;
	uint32_t f, lf;
	unsigned w, lw;
	uint64_t v, lv;

	memset(lc, 0, sizeof(*lc));
	while (rd_field(&m, &f, &w, &v, &sub)) {
		if (f == 1)
			lc->id = v;
		if (f == 2)
			lc->mapping = v;
		if (f == 4) {
			lc->nlines++;
			while (rd_field(&sub, &lf, &lw, &lv, &ls)) {
				if (lf == 1)
					lc->fn = lv;
				if (lf == 2)
					lc->line = lv;
			}
		}
	}
	assert_true(m.p == m.end);
}

/* gzip data -> the Profile message's fields. */
static void decode(const uint8_t *gz, size_t n, struct dprof *d)
{
	z_stream z = { 0 };
	size_t cap = 1 << 16, len = 0;
	uint8_t *raw = malloc(cap);
	struct rd r, sub;
	uint32_t f;
	unsigned w;
	uint64_t v;
	int zr;

	memset(d, 0, sizeof(*d));
	assert_non_null(raw);
	assert_int_equal(inflateInit2(&z, 16 + MAX_WBITS), Z_OK); /* gzip only */
	z.next_in = (Bytef *)gz;
	z.avail_in = (uInt)n;
	do {
		if (len == cap)
			assert_non_null(raw = realloc(raw, cap *= 2));
		z.next_out = raw + len;
		z.avail_out = (uInt)(cap - len);
		zr = inflate(&z, Z_NO_FLUSH);
		assert_true(zr == Z_OK || zr == Z_STREAM_END);
		len = cap - z.avail_out;
	} while (zr != Z_STREAM_END);
	assert_int_equal(z.avail_in, 0); /* one gzip member, nothing after it */
	inflateEnd(&z);

	r = (struct rd){ raw, raw + len };
	while (rd_field(&r, &f, &w, &v, &sub)) {
		switch (f) {
		case 1:
			assert_true(d->nst < 4);
			rd_value_type(sub, &d->st_type[d->nst], &d->st_unit[d->nst]);
			d->nst++;
			break;
		case 2: rd_sample(sub, GROW(d->s, d->ns)); break;
		case 3: d->mappings++; break;
		case 4: rd_location(sub, GROW(d->loc, d->nloc)); break;
		case 5: rd_function(sub, GROW(d->fn, d->nfn)); break;
		case 6: {
			char **s = GROW(d->str, d->nstr);

			assert_int_equal(w, 2);
			*s = strndup((const char *)sub.p, (size_t)(sub.end - sub.p));
			break;
		}
		case 9: d->time = v; break;
		case 10: d->duration = v; break;
		case 11: rd_value_type(sub, &d->pt_type, &d->pt_unit); break;
		case 12: d->period = v; break;
		case 13: rd_repeated(w, v, &sub, d->comment, &d->ncomment, 64); break;
		case 14: d->dflt = v; break;
		default: fail_msg("unexpected Profile field %u", f);
		}
	}
	assert_true(r.p == r.end);
	free(raw);
}

static void dprof_free(struct dprof *d)
{
	for (size_t i = 0; i < d->nstr; i++)
		free(d->str[i]);
	free(d->str);
	free(d->s);
	free(d->fn);
	free(d->loc);
}

static const char *S(const struct dprof *d, uint64_t i)
{
	assert_true(i < d->nstr);
	return d->str[i];
}

static const struct dfn *fn_by_id(const struct dprof *d, uint64_t id)
{
	for (size_t i = 0; i < d->nfn; i++)
		if (d->fn[i].id == id)
			return &d->fn[i];
	fail_msg("no function %" PRIu64, id);
	return NULL;
}

/* The function of location @id (each has one line: no inlining here). */
static uint64_t fn_of_loc(const struct dprof *d, uint64_t id)
{
	for (size_t i = 0; i < d->nloc; i++)
		if (d->loc[i].id == id) {
			assert_int_equal(d->loc[i].nlines, 1);
			return d->loc[i].fn;
		}
	fail_msg("no location %" PRIu64, id);
	return 0;
}

/* pprof's per-function view: flat/cum of value @vi for function id @fid. */
static void pprof_flat_cum(const struct dprof *d, uint64_t fid, size_t vi, int64_t *flat,
			   int64_t *cum)
{
	*flat = *cum = 0;
	for (size_t i = 0; i < d->ns; i++) {
		const struct dsample *s = &d->s[i];
		bool in = false;

		assert_true(s->nloc > 0 && vi < s->nval);
		if (fn_of_loc(d, s->loc[0]) == fid)
			*flat += (int64_t)s->val[vi];
		for (size_t k = 0; k < s->nloc; k++)
			in |= fn_of_loc(d, s->loc[k]) == fid;
		if (in) /* once per sample, however often it recurs */
			*cum += (int64_t)s->val[vi];
	}
}

/* The label @key of sample @s ("" / UINT64_MAX if absent). */
static const char *label_str(const struct dprof *d, const struct dsample *s, const char *key)
{
	for (size_t i = 0; i < s->nlab; i++)
		if (strcmp(S(d, s->key[i]), key) == 0)
			return S(d, s->str[i]);
	return NULL;
}

static uint64_t label_num(const struct dprof *d, const struct dsample *s, const char *key)
{
	for (size_t i = 0; i < s->nlab; i++)
		if (strcmp(S(d, s->key[i]), key) == 0)
			return s->num[i];
	return UINT64_MAX;
}

/* The report rendered, decoded. */
static void render_decode(const struct rp_report *r, struct dprof *d)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	assert_int_equal(rp_render_pprof(r, f), 0);
	fclose(f);
	assert_true(len > 20 && (uint8_t)buf[0] == 0x1f && (uint8_t)buf[1] == 0x8b);
	decode((const uint8_t *)buf, len, d);
	free(buf);
}

/* ---- the writer --------------------------------------------------------------------- */

static void test_pprof_writer_matches_spec(void **state)
{
	static const uint64_t packed[] = { 3, 270, 86942 };
	/* the encoding documentation's examples: 150 in field 1, "testing" in field 2,
	 * [3, 270, 86942] packed in field 4 */
	static const uint8_t want[] = {
		0x08, 0x96, 0x01, 0x12, 0x07, 't',  'e',  's',	't',  'i',
		'n',  'g',  0x22, 0x06, 0x03, 0x8e, 0x02, 0x9e, 0xa7, 0x05
	};
	static const uint64_t edge[] = { 0,
					 1,
					 127,
					 128,
					 16383,
					 16384,
					 (1ull << 35) - 1,
					 1ull << 63,
					 UINT64_MAX,
					 (uint64_t)-1ll,
					 (uint64_t)INT64_MIN };
	struct rp_pb b, m;
	struct rd r, sub, in;
	uint32_t f;
	unsigned w;
	uint64_t v, got[32];
	size_t n = 0;

	(void)state;
	rp_pb_init(&b);
	rp_pb_uint(&b, 1, 150);
	rp_pb_string(&b, 2, "testing");
	rp_pb_packed(&b, 4, packed, 3);
	rp_pb_packed(&b, 5, packed, 0); /* nothing at all */
	assert_int_equal(rp_pb_error(&b), 0);
	assert_int_equal(b.len, sizeof(want));
	assert_memory_equal(b.buf, want, sizeof(want));

	/* boundary values, one by one and packed, inside a nested message, field 536870911
	 * (the largest) */
	rp_pb_reset(&b);
	rp_pb_init(&m);
	for (size_t i = 0; i < sizeof(edge) / sizeof(edge[0]); i++)
		rp_pb_uint(&m, 536870911u, edge[i]);
	rp_pb_packed(&m, 7, edge, sizeof(edge) / sizeof(edge[0]));
	rp_pb_message(&b, 3, &m);
	r = (struct rd){ b.buf, b.buf + b.len };
	assert_true(rd_field(&r, &f, &w, &v, &sub));
	assert_int_equal(f, 3);
	assert_int_equal(w, 2);
	assert_true(r.p == r.end);
	while (rd_field(&sub, &f, &w, &v, &in)) {
		if (f == 536870911u) {
			assert_int_equal(w, 0);
			got[n++] = v;
		} else {
			assert_int_equal(f, 7);
			rd_repeated(w, v, &in, got, &n, 32);
		}
	}
	assert_true(sub.p == sub.end);
	assert_int_equal(n, 2 * sizeof(edge) / sizeof(edge[0]));
	for (size_t i = 0; i < n; i++)
		assert_int_equal(got[i], edge[i % (sizeof(edge) / sizeof(edge[0]))]);
	/* -1 as int64: ten bytes, as protobuf writes negative int64s */
	rp_pb_reset(&b);
	rp_pb_varint(&b, (uint64_t)-1ll);
	assert_int_equal(b.len, 10);
	assert_int_equal(b.buf[9], 0x01);
	rp_pb_free(&m);
	rp_pb_free(&b);
}

/* ---- a random workload through the engine ------------------------------------------- */

#define NAMES	 7
#define MAXSPANS 6000

struct span {
	uint64_t start, end;
	uint32_t name;
	int parent;
	uint64_t track;
	bool async;
};

static struct span spans[MAXSPANS];
static int nspans;
static uint32_t rng = 11;

static const char *const names[NAMES] = { "prefill",   "decode_step", "attn",  "mlp",
					  "tool_call", "retry",	      "sample" };
static const char *const cats[NAMES] = { "LLM", "LLM", "LLM", "LLM", "TOOL", "TOOL", "" };

static uint32_t rnd(uint32_t n)
{
	rng = rng * 1664525u + 1013904223u;
	return (rng >> 8) % n;
}

/* Children fill [start, end) in order with gaps; names repeat (recursion). */
static void grow(int parent, uint64_t start, uint64_t end, int depth, uint64_t track, bool async)
{
	uint64_t t = start;

	while (depth < 7 && nspans < MAXSPANS - 1 && t < end && rnd(4) != 0) {
		uint64_t len = rnd((uint32_t)(end - t) + 1);
		int i = nspans++;

		spans[i] = (struct span){ t, t + len, rnd(NAMES), parent, track, async };
		grow(i, t, t + len, depth + 1, track, async);
		t += len + rnd(3);
	}
}

struct gev {
	uint64_t ts, order;
	int span;
	bool begin;
};

static struct gev evs[2 * MAXSPANS];
static int nevs;

static void dfs_events(int i, uint64_t *order)
{
	evs[nevs++] = (struct gev){ spans[i].start, (*order)++, i, true };
	for (int c = i + 1; c < nspans; c++)
		if (spans[c].parent == i)
			dfs_events(c, order);
	evs[nevs++] = (struct gev){ spans[i].end, (*order)++, i, false };
}

static int cmp_gev(const void *a, const void *b)
{
	const struct gev *x = a, *y = b;

	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	return x->order < y->order ? -1 : 1; /* tracks in DFS order: ENDs before BEGINs */
}

/* Tracks 1..@tracks, the last @async of them async; spans sorted into events. */
static void make_workload(int tracks, int async)
{
	uint64_t order = 0;

	nspans = nevs = 0;
	for (int tr = 1; tr <= tracks; tr++) {
		int first = nspans;

		grow(-1, 1000u * (unsigned)tr, 1000u * (unsigned)tr + 40000, 0, (uint64_t)tr,
		     tr > tracks - async);
		for (int i = first; i < nspans; i++)
			if (spans[i].parent == -1)
				dfs_events(i, &order);
	}
	qsort(evs, (size_t)nevs, sizeof(evs[0]), cmp_gev);
}

static void engine_report(struct rp_report *r)
{
	struct rp_engine *e;
	uint32_t ids[NAMES];
	int src;

	assert_int_equal(rp_engine_open(NULL, &e), 0);
	src = rp_engine_add_source(e, "svc", 4242, 0);
	assert_true(src >= 0);
	for (int i = 0; i < NAMES; i++)
		ids[i] = rp_engine_name(e, (uint32_t)src, names[i], cats[i],
					i == 6 ? "" : "serve.py",
					i == 6 ? 0 : 10u * (unsigned)i + 1);
	for (int k = 0; k < nevs; k++) {
		const struct span *s = &spans[evs[k].span];
		struct rp_event ev = { .ts = evs[k].ts,
				       .name = ids[s->name],
				       .track = s->track,
				       .arg = (uint64_t)evs[k].span + 1 };

		if (s->async)
			ev.kind = evs[k].begin ? RP_EV_ASYNC_BEGIN : RP_EV_ASYNC_END;
		else
			ev.kind = evs[k].begin ? RP_EV_BEGIN : RP_EV_END;
		rp_engine_event(e, (uint32_t)src, ev.track, &ev);
	}
	assert_int_equal(rp_engine_report(e, r), 0);
	rp_engine_close(e);
}

static void test_pprof_flat_cum_match_engine(void **state)
{
	struct rp_report r;
	struct dprof d;
	uint64_t recursive = 0;

	(void)state;
	make_workload(8, 3);
	assert_true(nspans > 1000);
	engine_report(&r);
	assert_int_equal(r.n_fns, NAMES);
	for (uint32_t i = 0; i < r.n_edges; i++) /* the workload has recursion */
		recursive += r.edges[i].caller == r.edges[i].callee;
	assert_true(recursive > 0);
	render_decode(&r, &d);

	assert_true(d.nstr > 0 && d.str[0][0] == '\0');
	assert_int_equal(d.nst, 2);
	assert_string_equal(S(&d, d.st_type[0]), "calls");
	assert_string_equal(S(&d, d.st_unit[0]), "count");
	assert_string_equal(S(&d, d.st_type[1]), "wall");
	assert_string_equal(S(&d, d.st_unit[1]), "nanoseconds");
	assert_string_equal(S(&d, d.dflt), "wall");
	assert_string_equal(S(&d, d.pt_type), "wall");
	assert_string_equal(S(&d, d.pt_unit), "nanoseconds");
	assert_int_equal(d.period, 1);
	assert_int_equal(d.duration, r.t_last - r.t_first);
	assert_int_equal(d.time, r.created_realtime_ns - (r.t_last - r.t_first));
	assert_int_equal(d.nfn, r.n_fns);
	assert_int_equal(d.nloc, r.n_fns);
	assert_true(d.ncomment >= 2); /* totals, the source */

	for (uint32_t i = 0; i < r.n_fns; i++) {
		const struct rp_report_fn *f = &r.fns[i];
		const struct dfn *g = NULL;
		char display[64];
		int64_t flat, cum, flat_calls, cum_calls;

		snprintf(display, sizeof(display), f->category[0] ? "%s [%s]" : "%s", f->name,
			 f->category);
		for (size_t k = 0; k < d.nfn; k++)
			if (!strcmp(S(&d, d.fn[k].name), display)) {
				assert_null(g); /* display names are unique here */
				g = &d.fn[k];
			}
		assert_non_null(g);
		assert_string_equal(S(&d, g->system_name), f->name);
		assert_string_equal(S(&d, g->filename), f->file);
		assert_int_equal(g->start_line, f->line);
		pprof_flat_cum(&d, g->id, 1, &flat, &cum);
		pprof_flat_cum(&d, g->id, 0, &flat_calls, &cum_calls);
		assert_int_equal(flat, f->self_ns);
		assert_int_equal(cum, f->cum_ns);
		assert_int_equal(flat_calls, f->calls);
		assert_true(cum_calls >= flat_calls);
	}
	/* the line of each location is its function's; the labels */
	for (size_t k = 0; k < d.nloc; k++)
		assert_int_equal(d.loc[k].line, fn_by_id(&d, d.loc[k].fn)->start_line);
	for (size_t i = 0; i < d.ns; i++) {
		const struct dfn *leaf = fn_by_id(&d, fn_of_loc(&d, d.s[i].loc[0]));
		const char *cat = label_str(&d, &d.s[i], "category");
		const char *name = S(&d, leaf->name), *open = strchr(name, '[');

		if (open == NULL) {
			assert_null(cat);
		} else {
			assert_non_null(cat);
			assert_memory_equal(cat, open + 1, strlen(cat));
			assert_int_equal(open[1 + strlen(cat)], ']');
		}
		assert_non_null(label_str(&d, &d.s[i], "source"));
		assert_string_equal(label_str(&d, &d.s[i], "source"), "svc");
		assert_int_equal(label_num(&d, &d.s[i], "pid"), 4242);
	}
	dprof_free(&d);
	rp_report_free(&r);
}

/* ---- odd reports -------------------------------------------------------------------- */

#define FFFD "\xef\xbf\xbd"

static void test_pprof_odd_reports(void **state)
{
	struct rp_report_fn fns[] = {
		{ .name = "bad\xff"
			  "name",
		  .category = "C\xc3",
		  .file = "x\xfe.py",
		  .line = 3,
		  .calls = 2,
		  .self_ns = (uint64_t)-5ll,
		  .cum_ns = 10 },
		{ .name = "ok",
		  .category = "",
		  .file = "",
		  .calls = 1,
		  .self_ns = 15,
		  .cum_ns = 15 },
	};
	struct rp_report_node nodes[] = {
		{ RP_NONE, RP_NONE, 0, 0, 0 },
		{ 0, 1, 1, 15, 20 },		/* ok */
		{ 1, 0, 2, (uint64_t)-5ll, 5 }, /* ok;bad: torch nesting, self < 0 */
		{ 1, 77, 3, 10, 10 },		/* ok;? */
		{ 0, 1, 0, 0, 0 },		/* nothing: no sample */
	};
	struct rp_report_source srcs[] = { { .name = "a", .pid = 1 }, { .name = "b", .pid = 2 } };
	struct rp_report r = { .version_major = 1,
			       .clock = "trace",
			       .fns = fns,
			       .n_fns = 2,
			       .nodes = nodes,
			       .n_nodes = 5,
			       .sources = srcs,
			       .n_sources = 2 };
	char *buf = NULL;
	size_t len = 0;
	struct dprof d;
	FILE *f;
	int64_t flat, cum;

	(void)state;
	render_decode(&r, &d);
	assert_int_equal(d.ns, 3);
	assert_int_equal(d.nfn, 3);
	assert_string_equal(S(&d, fn_by_id(&d, 1)->name), "bad" FFFD "name [C" FFFD "]");
	assert_string_equal(S(&d, fn_by_id(&d, 1)->system_name), "bad" FFFD "name");
	assert_string_equal(S(&d, fn_by_id(&d, 1)->filename), "x" FFFD ".py");
	assert_string_equal(S(&d, fn_by_id(&d, 3)->name), "?");
	assert_int_equal(d.time, 0); /* no creation time */
	assert_int_equal(d.duration, 0);
	pprof_flat_cum(&d, 1, 1, &flat, &cum);
	assert_int_equal(flat, -5);
	assert_int_equal(cum, -5);
	pprof_flat_cum(&d, 2, 1, &flat, &cum);
	assert_int_equal(flat, 15);
	assert_int_equal(cum, 20);
	pprof_flat_cum(&d, 3, 0, &flat, &cum);
	assert_int_equal(flat, 3);
	for (size_t i = 0; i < d.ns; i++) { /* two sources: the CCT does not tell them apart */
		assert_null(label_str(&d, &d.s[i], "source"));
		assert_int_equal(label_num(&d, &d.s[i], "pid"), UINT64_MAX);
	}
	assert_string_equal(label_str(&d, &d.s[1], "category"), "C" FFFD);
	dprof_free(&d);

	r.n_nodes = r.n_fns = r.n_sources = 0; /* empty: a valid profile, no samples */
	render_decode(&r, &d);
	assert_int_equal(d.ns + d.nfn + d.nloc, 0);
	assert_int_equal(d.nst, 2);
	dprof_free(&d);

	r.n_nodes = 5;
	r.n_fns = 2;
	nodes[2].parent = 3; /* a parent after its child: refused, nothing written */
	f = open_memstream(&buf, &len);
	assert_int_equal(rp_render_pprof(&r, f), -EINVAL);
	fclose(f);
	assert_int_equal(len, 0);
	free(buf);
}

/* ---- through the CLI ---------------------------------------------------------------- */

static const char *bindir(void)
{
	const char *b = getenv("RP_BIN_DIR");

	if (b == NULL)
		fail_msg("RP_BIN_DIR not set (run through ctest)");
	return b;
}

/* The random workload's thread tracks as a Chrome trace ("X" events, category). */
static void write_trace(const char *path)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs("[", f);
	for (int i = 0; i < nspans; i++)
		fprintf(f,
			"%s{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%" PRIu64
			",\"dur\":%" PRIu64 ",\"pid\":1,\"tid\":%" PRIu64 "}\n",
			i ? "," : "", names[spans[i].name], cats[spans[i].name], spans[i].start,
			spans[i].end - spans[i].start, spans[i].track);
	fputs("]\n", f);
	assert_int_equal(fclose(f), 0);
}

static void test_pprof_cli_refuses_terminal(void **state)
{
	char trace[64], *out;

	(void)state;
	if (access("/usr/bin/script", X_OK) != 0)
		skip(); /* util-linux's script(1) gives the CLI a terminal */
	rp_test_temp_path(trace, ".json");
	make_workload(2, 0);
	write_trace(trace);
	/* stdout a terminal: one line, exit 2, no gzip bytes on it */
	assert_int_equal(rp_test_sh(&out, NULL,
				    "/usr/bin/script -qec '%s/ringprof analyze %s "
				    "--format pprof' /dev/null",
				    bindir(), trace),
			 2);
	assert_non_null(strstr(out, "--format pprof: binary output not written to a terminal"));
	assert_null(strchr(out, '\x1f'));
	free(out);
	/* a pipe is fine */
	assert_int_equal(rp_test_sh(&out, NULL,
				    "%s/ringprof analyze %s --format pprof | "
				    "gzip -t && echo ok",
				    bindir(), trace),
			 0);
	assert_string_equal(out, "ok\n");
	free(out);
	unlink(trace);
}

/* ---- go tool pprof -------------------------------------------------------------------- */

/* Self and cum of the JSON report summed by pprof's display name. */
struct want {
	char name[256];
	int64_t self, cum;
	bool seen;
};

static size_t json_wants(const char *json, struct want *w, size_t cap)
{
	const char *fpath[] = { "functions", NULL }, *k[] = { "name", NULL },
		   *c[] = { "category", NULL }, *s[] = { "self_ns", NULL },
		   *u[] = { "cum_ns", NULL };
	char err[256];
	yajl_val root = yajl_tree_parse(json, err, sizeof(err)), fns;
	size_t n = 0;

	assert_non_null(root);
	fns = yajl_tree_get(root, fpath, yajl_t_array);
	assert_non_null(fns);
	for (size_t i = 0; i < YAJL_GET_ARRAY(fns)->len; i++) {
		yajl_val f = YAJL_GET_ARRAY(fns)->values[i];
		const char *name = YAJL_GET_STRING(yajl_tree_get(f, k, yajl_t_string));
		const char *cat = YAJL_GET_STRING(yajl_tree_get(f, c, yajl_t_string));
		char display[256];
		size_t j;

		snprintf(display, sizeof(display), cat[0] ? "%s [%s]" : "%s", name, cat);
		for (j = 0; j < n && strcmp(w[j].name, display); j++)
			;
		if (j == n) {
			assert_true(n < cap);
			memset(&w[n], 0, sizeof(w[n]));
			snprintf(w[n++].name, sizeof(w[0].name), "%s", display);
		}
		w[j].self += YAJL_GET_INTEGER(yajl_tree_get(f, s, yajl_t_number));
		w[j].cum += YAJL_GET_INTEGER(yajl_tree_get(f, u, yajl_t_number));
	}
	yajl_tree_free(root);
	return n;
}

/* `go tool pprof -top` of @trace's export against its JSON report; rows compared. */
static size_t go_top_matches_json(const char *trace)
{
	char prof[64], *json, *top, *line, *save;
	struct want w[512];
	size_t n, rows = 0;
	bool table = false;

	rp_test_temp_path(prof, ".pb.gz");
	assert_int_equal(rp_test_sh(NULL, NULL, "%s/ringprof analyze %s --format pprof -o %s",
				    bindir(), trace, prof),
			 0);
	assert_int_equal(
		rp_test_sh(&json, NULL, "%s/ringprof analyze %s --format json", bindir(), trace),
		0);
	n = json_wants(json, w, 512);
	assert_int_equal(rp_test_sh(&top, NULL,
				    "PPROF_TMPDIR=/tmp go tool pprof -top "
				    "-nodecount=1000 -nodefraction=0 -unit=ns %s",
				    prof),
			 0);
	print_message("go tool pprof -top of %s:\n%.1500s\n", trace, top);
	for (line = strtok_r(top, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		long long flat, cum;
		int at = 0;
		size_t j;

		if (!table) {
			table = strstr(line, "flat  flat%") != NULL;
			continue;
		}
		/* flat flat% sum% cum cum% name (the name may hold spaces) */
		assert_int_equal(sscanf(line, " %lldns %*s %*s %lldns %*s %n", &flat, &cum, &at),
				 2);
		assert_true(at > 0);
		for (j = 0; j < n && strcmp(w[j].name, line + at); j++)
			;
		if (j == n)
			fail_msg("pprof row %s: not in the JSON report", line + at);
		assert_false(w[j].seen);
		w[j].seen = true;
		assert_int_equal(flat, w[j].self);
		assert_int_equal(cum, w[j].cum);
		rows++;
	}
	for (size_t j = 0; j < n; j++) /* every function with time has a row */
		if (!w[j].seen && (w[j].self || w[j].cum))
			fail_msg("%s: in the JSON report, not in pprof's top", w[j].name);
	free(json);
	free(top);
	unlink(prof);
	return rows;
}

static void test_pprof_go_tool_top(void **state)
{
	const char *data = getenv("RP_TESTDATA");
	char trace[600];

	(void)state;
	assert_non_null(data);
	snprintf(trace, sizeof(trace), "%s/torch/cpu_legacy_trace.json", data);
	assert_true(go_top_matches_json(trace) > 50);
	rp_test_temp_path(trace, ".json");
	make_workload(4, 0); /* recursion and categories ("mlp [LLM]") */
	write_trace(trace);
	assert_int_equal(go_top_matches_json(trace), NAMES);
	unlink(trace);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pprof_writer_matches_spec),
		cmocka_unit_test(test_pprof_flat_cum_match_engine),
		cmocka_unit_test(test_pprof_odd_reports),
		cmocka_unit_test(test_pprof_cli_refuses_terminal),
	};
	const struct CMUnitTest go[] = {
		cmocka_unit_test(test_pprof_go_tool_top),
	};

	if (argc > 1 && strcmp(argv[1], "go") == 0) {
		if (rp_test_sh(NULL, NULL, "go version >/dev/null 2>&1") != 0) {
			fprintf(stderr, "go not found (Debian: apt-get install golang-go, or "
					"bash .ci/deps --heavy): skipped\n");
			return 77;
		}
		return cmocka_run_group_tests(go, NULL, NULL);
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
