// SPDX-License-Identifier: MIT
/*
 * The agent toolkit's analysis (engine/formats/aiq.c through engine/formats/import_nat.c and
 * tools/render/render_aiq.c) against
 *  - the toolkit's own result and report for tests/data/nat/small.json,
 *    field by field (times within 1 us, concurrency exact, the same top 5) and line
 *    for line, through the library and through the ringprof binary;
 *  - a brute-force reference written here from the toolkit's definitions (the
 *    Python, transcribed naively: linear searches for its dicts, insertion sorts for
 *    its stable sorts, recursion for its tree walks, O(n^2)), on traces made by a
 *    fixed-seed generator: requests of nested calls overlapping in time, shared and
 *    zero-length times, ignored event types, shuffled file order, and malformed
 *    variants (ENDs below the top, STARTs never ended, ENDs never started,
 *    duplicate UUIDs within and across requests, duplicate top-level UUIDs, steps
 *    pydantic would refuse). Doubles are compared for equality: same arithmetic;
 *  - and ringprof's own figures for the same traces (per-name calls, self and cum
 *    time against the toolkit's per-call figures; anomalies counted).
 */
#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

#include <yajl/yajl_tree.h>
#include <zlib.h>

#include "aiq.h"
#include "import_nat.h"
#include "render.h"
#include "support.h"

/* ---------------------------------------------------------------- helpers */

#define slurp rp_test_slurp

static const char *testdata(const char *name, char *path, size_t size)
{
	const char *dir = getenv("RP_TESTDATA");

	if (dir == NULL)
		return NULL;
	snprintf(path, size, "%s/nat/%s", dir, name);
	return path;
}

static yajl_val parse_json(const char *text)
{
	char err[256];
	yajl_val v = yajl_tree_parse(text, err, sizeof(err));

	if (v == NULL)
		fail_msg("json: %s", err);
	return v;
}

static char *render(const struct rp_aiq *a, bool text)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);

	assert_non_null(m);
	assert_int_equal(text ? rp_render_aiq_text(a, m) : rp_render_aiq_json(a, m), 0);
	fclose(m);
	return buf;
}

static void analyze_buf(struct rp_aiq *a, const char *buf, size_t len)
{
	char why[RP_WHY_MAX];
	int err;

	assert_int_equal(rp_aiq_init(a, 0), 0);
	err = rp_import_nat_buf(NULL, a, NULL, buf, len, "buf", NULL, why);
	if (err)
		fail_msg("import: %s", why);
	assert_int_equal(rp_aiq_finish(a), 0);
}

/* ---------------------------------------------------------------- field by field */

static yajl_val get(yajl_val o, const char *key)
{
	const char *path[] = { key, NULL };

	return yajl_tree_get(o, path, yajl_t_any);
}

static double num(yajl_val v)
{
	assert_true(v != NULL && YAJL_IS_NUMBER(v));
	return YAJL_GET_DOUBLE(v);
}

static void same_metrics(yajl_val got, yajl_val want)
{
	static const char *const strs[] = { "uuid", "operation_type", "operation_name" };
	static const char *const times[] = { "start_time", "end_time", "duration", "self_time",
					     "subtree_time", "bottleneck_score" };

	assert_true(YAJL_IS_OBJECT(got) && YAJL_IS_OBJECT(want));
	assert_int_equal(YAJL_GET_OBJECT(got)->len, YAJL_GET_OBJECT(want)->len);
	for (int i = 0; i < 3; i++)
		assert_string_equal(YAJL_GET_STRING(get(got, strs[i])),
				    YAJL_GET_STRING(get(want, strs[i])));
	for (int i = 0; i < 6; i++)
		if (fabs(num(get(got, times[i])) - num(get(want, times[i]))) > 1e-6)
			fail_msg("%s %s: %.9f, toolkit %.9f", YAJL_GET_STRING(get(want, "uuid")),
				 times[i], num(get(got, times[i])), num(get(want, times[i])));
	assert_true(num(get(got, "concurrency_midpoint")) ==
		    num(get(want, "concurrency_midpoint")));
}

/* Our aiq JSON against the toolkit's: every field the toolkit writes. */
static void same_result(const char *ours, const char *toolkit)
{
	yajl_val g = parse_json(ours), w = parse_json(toolkit);
	yajl_val gc = get(g, "concurrency"), wc = get(w, "concurrency");
	yajl_val gs = get(gc, "timeline_segments"), ws = get(wc, "timeline_segments");
	yajl_val gm = get(g, "node_metrics"), wm = get(w, "node_metrics");
	yajl_val gt = get(g, "top_bottlenecks"), wt = get(w, "top_bottlenecks");
	static const char *const p[] = { "p50", "p90", "p95", "p99" };

	for (int i = 0; i < 4; i++)
		assert_true(num(get(gc, p[i])) == num(get(wc, p[i])));
	assert_int_equal(YAJL_GET_ARRAY(gs)->len, YAJL_GET_ARRAY(ws)->len);
	for (size_t i = 0; i < YAJL_GET_ARRAY(ws)->len; i++) {
		yajl_val *a = YAJL_GET_ARRAY(YAJL_GET_ARRAY(gs)->values[i])->values;
		yajl_val *b = YAJL_GET_ARRAY(YAJL_GET_ARRAY(ws)->values[i])->values;
		assert_true(fabs(num(a[0]) - num(b[0])) <= 1e-6);
		assert_true(fabs(num(a[1]) - num(b[1])) <= 1e-6);
		assert_true(num(a[2]) == num(b[2]));
	}
	assert_int_equal(YAJL_GET_OBJECT(gm)->len, YAJL_GET_OBJECT(wm)->len);
	for (size_t i = 0; i < YAJL_GET_OBJECT(wm)->len; i++) {
		assert_string_equal(YAJL_GET_OBJECT(gm)->keys[i], YAJL_GET_OBJECT(wm)->keys[i]);
		same_metrics(YAJL_GET_OBJECT(gm)->values[i], YAJL_GET_OBJECT(wm)->values[i]);
	}
	assert_int_equal(YAJL_GET_ARRAY(gt)->len, YAJL_GET_ARRAY(wt)->len);
	for (size_t i = 0; i < YAJL_GET_ARRAY(wt)->len; i++)
		same_metrics(YAJL_GET_ARRAY(gt)->values[i], YAJL_GET_ARRAY(wt)->values[i]);
	yajl_tree_free(g);
	yajl_tree_free(w);
}

static void same_lines(const char *ours, const char *toolkit)
{
	size_t line = 1;

	while (*ours || *toolkit) {
		size_t a = strcspn(ours, "\n"), b = strcspn(toolkit, "\n");
		if (a != b || memcmp(ours, toolkit, a) != 0)
			fail_msg("line %zu: \"%.*s\", toolkit \"%.*s\"", line, (int)a, ours, (int)b,
				 toolkit);
		ours += a + (ours[a] == '\n');
		toolkit += b + (toolkit[b] == '\n');
		line++;
	}
}

/* The next number token outside strings, as text; NULL at the end. */
static const char *next_number(const char *p, char *tok, size_t size)
{
	bool in_str = false;

	for (; *p; p++) {
		if (in_str) {
			if (*p == '\\' && p[1])
				p++;
			else if (*p == '"')
				in_str = false;
		} else if (*p == '"') {
			in_str = true;
		} else if ((*p >= '0' && *p <= '9') || *p == '-') {
			size_t n = strspn(p, "0123456789.-+eE");
			snprintf(tok, size, "%.*s", (int)n, p);
			return p + n;
		}
	}
	return NULL;
}

/* Every number written as the toolkit (Python's repr) wrote it, in the same order. */
static void same_number_text(const char *ours, const char *toolkit)
{
	char a[64], b[64];
	size_t n = 0;

	while ((toolkit = next_number(toolkit, b, sizeof(b))) != NULL) {
		ours = next_number(ours, a, sizeof(a));
		assert_non_null(ours);
		if (strcmp(a, b) != 0)
			fail_msg("number %zu: %s, toolkit %s", n, a, b);
		n++;
	}
	assert_true(n > 1000);
}

static void test_aiq_small_json_matches_toolkit(void **state)
{
	char p1[4096], p2[4096], p3[4096], *in, *exp, *rep, *ours;
	size_t n1, n2, n3;
	struct rp_aiq a;

	(void)state;
	if (!testdata("small.json", p1, sizeof(p1)))
		skip();
	in = slurp(p1, &n1);
	exp = slurp(testdata("small.expected.json", p2, sizeof(p2)), &n2);
	rep = slurp(testdata("small.expected_report.txt", p3, sizeof(p3)), &n3);
	analyze_buf(&a, in, n1);
	assert_int_equal(a.n_order, 106);
	ours = render(&a, false);
	same_result(ours, exp);
	same_number_text(ours, exp);
	free(ours);
	ours = render(&a, true);
	same_lines(ours, rep);
	assert_string_equal(ours, rep); /* the final newline too */
	free(ours);
	rp_aiq_free(&a);
	free(in);
	free(exp);
	free(rep);
}

/* ---------------------------------------------------------------- generator */

struct gstep {
	char type[24];
	char ts[40];	/* as written; "" = left out */
	char uuid[24];
	char name[24];	/* payload.name; "\1" = null */
	char fname[24]; /* function_ancestry.function_name */
};

struct gen {
	struct gstep *s;
	size_t n, cap;
	uint64_t rng;
	bool malformed;
	unsigned uuid_seq;
};

static uint32_t rnd(struct gen *g, uint32_t n)
{
	g->rng = g->rng * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(g->rng >> 33) % n;
}

static struct gstep *gadd(struct gen *g, const char *type, double t, const char *uuid)
{
	struct gstep *s;

	if (g->n == g->cap) {
		g->cap = g->cap ? g->cap * 2 : 256;
		g->s = realloc(g->s, g->cap * sizeof(*g->s));
		assert_non_null(g->s);
	}
	s = &g->s[g->n++];
	memset(s, 0, sizeof(*s));
	snprintf(s->type, sizeof(s->type), "%s", type);
	snprintf(s->ts, sizeof(s->ts), "%.3f", t); /* a coarse grid: shared times */
	snprintf(s->uuid, sizeof(s->uuid), "%s", uuid);
	snprintf(s->fname, sizeof(s->fname), "wf");
	return s;
}

/* One call [t0, t1] and its children; @req_uuids: UUIDs of this request so far. */
static void gen_call(struct gen *g, int depth, double t0, double t1, const char *prev_uuid,
		     char *uuid_out)
{
	static const char *const kinds[] = { "LLM", "TOOL", "FUNCTION", "SPAN" };
	static const char *const names[] = { "llama", "search", "agent", "", "calc" };
	const char *k = kinds[rnd(g, 4)];
	char st[24], en[24], uuid[24];
	struct gstep *s;
	double end = t1;
	int nchild = depth < 4 ? (int)rnd(g, 4) : 0;

	snprintf(uuid, sizeof(uuid), "u%u", g->uuid_seq++);
	if (g->malformed && prev_uuid && rnd(g, 12) == 0)
		snprintf(uuid, sizeof(uuid), "%s", prev_uuid); /* a duplicate UUID */
	snprintf(st, sizeof(st), "%s_START", k);
	snprintf(en, sizeof(en), "%s_END", k);
	if (uuid_out != NULL)
		strcpy(uuid_out, uuid);
	s = gadd(g, st, t0, uuid);
	snprintf(s->name, sizeof(s->name), "%s", rnd(g, 8) == 0 ? "\1" : names[rnd(g, 5)]);
	snprintf(s->fname, sizeof(s->fname), "f_%s", names[rnd(g, 5)]);
	if (rnd(g, 6) == 0)
		gadd(g, "LLM_NEW_TOKEN", t0 + (t1 - t0) / 3, uuid);
	for (int c = 0, cursor = 0; c < nchild; c++) {
		/* well formed: siblings one after another; malformed: anywhere */
		double lo = g->malformed ? t0 : t0 + (t1 - t0) * cursor / 1000.0;
		double a = lo + (t1 - lo) * rnd(g, 1000) / 1000.0;
		double b = a + (t1 - a) * rnd(g, 1001) / 1000.0;
		if (g->malformed && rnd(g, 10) == 0)
			b = t1 + 0.01 * rnd(g, 5); /* overhangs: its parent's END is not at top */
		gen_call(g, depth + 1, a, b, uuid, NULL);
		cursor = t1 > t0 ? (int)((b - t0) / (t1 - t0) * 1000.0) + 1 : 1000;
	}
	if (g->malformed && rnd(g, 15) == 0)
		return; /* never ended */
	gadd(g, en, end, uuid);
	if (g->malformed && rnd(g, 15) == 0)
		gadd(g, en, end + 0.001 * rnd(g, 3), "nobody"); /* never started */
	if (g->malformed && rnd(g, 25) == 0)
		gadd(g, "BOGUS_START", t0, uuid); /* pydantic would refuse it */
	if (g->malformed && rnd(g, 25) == 0)
		gadd(g, st, t0, uuid)->ts[0] = '\0'; /* no timestamp */
}

/* A whole trace as JSON text; @steps_out: the steps per request for the reference. */
static char *gen_trace(uint64_t seed, int requests, bool malformed, struct gen *out, size_t **ends)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	struct gen g = { .rng = seed, .malformed = malformed };

	*ends = calloc((size_t)requests + 1, sizeof(**ends));
	assert_non_null(m);
	fputs("[", m);
	for (int r = 0; r < requests; r++) {
		size_t first = g.n;
		char last_root[24] = "u0";
		double t = 1750000000.0 + 0.01 * rnd(&g, 500);
		gadd(&g, "WORKFLOW_START", t, "w");
		for (int c = 1 + (int)rnd(&g, 3); c > 0; c--) {
			double a = t + 0.001 * rnd(&g, 50), b = a + 0.001 * rnd(&g, 400);
			/* duplicates of the previous root, or of the first call of all */
			gen_call(&g, 0, a, b, malformed ? last_root : NULL, last_root);
			t = b;
		}
		gadd(&g, "WORKFLOW_END", t, "w");
		for (size_t i = g.n - 1; malformed && i > first; i--) { /* file order shuffled */
			size_t j = first + rnd(&g, (uint32_t)(i - first + 1));
			struct gstep tmp = g.s[i];
			g.s[i] = g.s[j];
			g.s[j] = tmp;
		}
		(*ends)[r] = g.n;
		fprintf(m, "%s{\"request_number\": %d, \"intermediate_steps\": [", r ? ", " : "", r);
		for (size_t i = first; i < g.n; i++) {
			const struct gstep *s = &g.s[i];
			fprintf(m, "%s{\"parent_id\": \"root\", \"function_ancestry\": {\"function_id\": "
				   "\"f\", \"function_name\": \"%s\", \"parent_id\": \"root\"}, "
				   "\"payload\": {\"event_type\": \"%s\", ",
				i > first ? ", " : "", s->fname, s->type);
			if (s->ts[0])
				fprintf(m, "\"event_timestamp\": %s, ", s->ts);
			if (s->name[0] == '\1')
				fputs("\"name\": null, ", m);
			else
				fprintf(m, "\"name\": \"%s\", ", s->name);
			fprintf(m, "\"data\": {\"input\": [1, {\"UUID\": \"x\"}]}, \"UUID\": \"%s\"}}",
				s->uuid);
		}
		fputs("]}", m);
	}
	fputs("]", m);
	fclose(m);
	*out = g;
	return buf;
}

/* The same through the binary, from the file and from a gzip copy of it. */
static char *run(const char *cmd)
{
	char *buf = NULL;
	size_t len = 0, n;
	char chunk[65536];
	FILE *p = popen(cmd, "r"), *m = open_memstream(&buf, &len);

	assert_non_null(p);
	while ((n = fread(chunk, 1, sizeof(chunk), p)) > 0)
		fwrite(chunk, 1, n, m);
	assert_int_equal(pclose(p), 0);
	fclose(m);
	return buf;
}

static void test_aiq_cli_matches_toolkit(void **state)
{
	const char *bin = getenv("RP_BIN_DIR");
	char p1[4096], p2[4096], p3[4096], cmd[9000], gzp[64], *in, *exp, *rep, *out;
	size_t n1, n2, n3;
	gzFile gz;

	(void)state;
	if (bin == NULL || !testdata("small.json", p1, sizeof(p1)))
		skip();
	in = slurp(p1, &n1);
	exp = slurp(testdata("small.expected.json", p2, sizeof(p2)), &n2);
	rep = slurp(testdata("small.expected_report.txt", p3, sizeof(p3)), &n3);
	snprintf(gzp, sizeof(gzp), "/tmp/test_aiq.%d.json.gz", (int)getpid());
	gz = gzopen(gzp, "wb");
	assert_non_null(gz);
	assert_int_equal(gzwrite(gz, in, (unsigned)n1), (int)n1);
	gzclose(gz);
	for (int f = 0; f < 2; f++) {
		const char *path = f ? gzp : p1;
		snprintf(cmd, sizeof(cmd), "%s/ringprof analyze %s --format aiq", bin, path);
		out = run(cmd);
		same_result(out, exp);
		free(out);
		snprintf(cmd, sizeof(cmd), "%s/ringprof analyze %s --format aiq-text", bin, path);
		out = run(cmd);
		same_lines(out, rep);
		free(out);
	}
	unlink(gzp);
	/* a generated trace with large requests, through the file reader */
	{
		struct gen g;
		size_t *ends;
		char *text = gen_trace(99, 40, true, &g, &ends), *lib;
		struct rp_aiq a;
		FILE *f;

		snprintf(gzp, sizeof(gzp), "/tmp/test_aiq.%d.json", (int)getpid());
		f = fopen(gzp, "w");
		assert_non_null(f);
		fputs(text, f);
		fclose(f);
		analyze_buf(&a, text, strlen(text));
		lib = render(&a, false);
		snprintf(cmd, sizeof(cmd), "%s/ringprof analyze %s --format aiq", bin, gzp);
		out = run(cmd);
		assert_string_equal(out, lib);
		free(out);
		free(lib);
		rp_aiq_free(&a);
		unlink(gzp);
		free(text);
		free(g.s);
		free(ends);
	}
	free(in);
	free(exp);
	free(rep);
}

/* ---------------------------------------------------------------- the reference */

struct rnode {
	char uuid[24], name[24];
	const char *type;
	double start, end, dur;
	int parent;	/* -1: top level */
	bool live;	/* reachable from a root */
};

struct ref {
	struct rnode *n;
	int nn;
	int *roots, nroots;
	int *all, nall;		/* all_nodes */
	double (*segs)[3];
	int nseg;
	double p[4];
	int *mkeys, nm;		/* node_metrics values, in dict order */
	int top[5], ntop;
	double *self, *sub, *mid;
};

static const char *op_type(const char *et)
{
	if (strncmp(et, "LLM_", 4) == 0)
		return "LLM";
	if (strncmp(et, "TOOL_", 5) == 0)
		return "TOOL";
	if (strncmp(et, "FUNCTION_", 9) == 0 || strncmp(et, "SPAN_", 5) == 0)
		return "FUNCTION";
	return NULL;
}

static bool ends_with(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);

	return a >= b && strcmp(s + a - b, suf) == 0;
}

/* build_call_tree_for_example, transcribed. */
static void ref_request(struct ref *R, const struct gstep *st, size_t n)
{
	const struct gstep **ord = malloc((n + 1) * sizeof(*ord));
	int *stack = malloc((n + 1) * sizeof(int)), sp = 0;
	int *top = malloc((n + 1) * sizeof(int)), ntop = 0;   /* top_level_dict values */
	char (*pk)[24] = malloc((n + 1) * 24);		      /* partial_map keys */
	int *pv = malloc((n + 1) * sizeof(int)), np = 0;
	size_t k = 0;

	for (size_t i = 0; i < n; i++) { /* what pydantic accepts, then a stable sort */
		if (!op_type(st[i].type) && strncmp(st[i].type, "WORKFLOW", 8) != 0)
			continue;
		if (!st[i].ts[0])
			continue;
		size_t j = k++;
		while (j > 0 && strtod(ord[j - 1]->ts, NULL) > strtod(st[i].ts, NULL)) {
			ord[j] = ord[j - 1];
			j--;
		}
		ord[j] = &st[i];
	}
	for (size_t i = 0; i < k; i++) {
		const struct gstep *s = ord[i];
		const char *ty = op_type(s->type);
		double ts = strtod(s->ts, NULL);
		int x;

		if (ty == NULL)
			continue;
		if (ends_with(s->type, "_START")) {
			struct rnode *nd = &R->n[R->nn];
			const char *nm = strcmp(ty, "FUNCTION") == 0 ? s->fname
					 : s->name[0] == '\1'	     ? ""
								     : s->name;
			if (!nm[0])
				nm = strcmp(ty, "LLM") == 0 ? "unknown_llm"
				     : strcmp(ty, "TOOL") == 0 ? "unknown_tool"
							       : "unknown_function";
			*nd = (struct rnode){ .type = ty, .start = ts, .end = ts, .dur = 0.0,
					      .parent = sp ? stack[sp - 1] : -1 };
			strcpy(nd->uuid, s->uuid);
			strcpy(nd->name, nm);
			if (sp == 0) {
				for (x = 0; x < ntop && strcmp(R->n[top[x]].uuid, s->uuid); x++)
					;
				top[x] = R->nn;
				ntop += x == ntop;
			}
			stack[sp++] = R->nn;
			for (x = 0; x < np && strcmp(pk[x], s->uuid); x++)
				;
			strcpy(pk[x], s->uuid);
			pv[x] = R->nn;
			np += x == np;
			R->nn++;
		} else if (ends_with(s->type, "_END")) {
			for (x = 0; x < np && strcmp(pk[x], s->uuid); x++)
				;
			if (x == np)
				continue;
			struct rnode *nd = &R->n[pv[x]];
			if (sp && strcmp(R->n[stack[sp - 1]].uuid, s->uuid) == 0)
				sp--;
			nd->end = ts;
			nd->dur = ts - nd->start > 0.0 ? ts - nd->start : 0.0;
			memmove(&pk[x], &pk[x + 1], (size_t)(np - x - 1) * 24);
			memmove(&pv[x], &pv[x + 1], (size_t)(np - x - 1) * sizeof(int));
			np--;
		}
	}
	for (int i = 0; i < ntop; i++)
		R->roots[R->nroots++] = top[i];
	free(ord);
	free(stack);
	free(top);
	free(pk);
	free(pv);
}

static void ref_dfs(struct ref *R, int v)
{
	R->all[R->nall++] = v;
	R->n[v].live = true;
	for (int c = 0; c < R->nn; c++)
		if (R->n[c].parent == v)
			ref_dfs(R, c);
}

static double ref_self(const struct ref *R, int v)
{
	double iv[4096][2], cs, ce, covered = 0.0;
	int k = 0;

	for (int c = 0; c < R->nn; c++)
		if (R->n[c].parent == v) {
			int j = k++;
			while (j > 0 && iv[j - 1][0] > R->n[c].start) {
				iv[j][0] = iv[j - 1][0];
				iv[j][1] = iv[j - 1][1];
				j--;
			}
			iv[j][0] = R->n[c].start;
			iv[j][1] = R->n[c].end;
		}
	if (k == 0)
		return R->n[v].dur;
	double merged[4096][2];
	int nm = 0;
	cs = iv[0][0];
	ce = iv[0][1];
	for (int i = 1; i < k; i++) {
		if (iv[i][0] <= ce) {
			ce = ce >= iv[i][1] ? ce : iv[i][1];
		} else {
			merged[nm][0] = cs;
			merged[nm++][1] = ce;
			cs = iv[i][0];
			ce = iv[i][1];
		}
	}
	merged[nm][0] = cs;
	merged[nm++][1] = ce;
	for (int i = 0; i < nm; i++) {
		double s = merged[i][0] >= R->n[v].start ? merged[i][0] : R->n[v].start;
		double e = merged[i][1] <= R->n[v].end ? merged[i][1] : R->n[v].end;
		if (e > s)
			covered += e - s;
	}
	return R->n[v].dur - covered > 0.0 ? R->n[v].dur - covered : 0.0;
}

static double ref_sub(const struct ref *R, int v)
{
	double total = ref_self(R, v);

	for (int c = 0; c < R->nn; c++)
		if (R->n[c].parent == v)
			total += ref_sub(R, c);
	return total;
}

/* compute_time_based_concurrency and concurrency_at_percentile, transcribed. */
static void ref_concurrency(struct ref *R)
{
	int ne = 0, lv[8192], nl = 0, cur = 0;
	double (*ev)[2] = malloc(((size_t)R->nall * 2 + 1) * sizeof(*ev)), ld[8192], total = 0;

	for (int i = 0; i < R->nall; i++) {
		const struct rnode *x = &R->n[R->all[i]];
		if (x->start > x->end)
			continue;
		double add[2][2] = { { x->start, 1 }, { x->end, -1 } };
		for (int h = 0; h < 2; h++) { /* stable insertion by time */
			int j = ne++;
			while (j > 0 && ev[j - 1][0] > add[h][0]) {
				ev[j][0] = ev[j - 1][0];
				ev[j][1] = ev[j - 1][1];
				j--;
			}
			ev[j][0] = add[h][0];
			ev[j][1] = add[h][1];
		}
	}
	R->segs = malloc(((size_t)ne + 1) * sizeof(*R->segs));
	double prev = ne ? ev[0][0] : 0;
	for (int i = 0; i < ne; i++) {
		if (ev[i][0] > prev) {
			R->segs[R->nseg][0] = prev;
			R->segs[R->nseg][1] = ev[i][0];
			R->segs[R->nseg++][2] = cur;
		}
		cur += (int)ev[i][1];
		prev = ev[i][0];
	}
	for (int i = 0; i < R->nseg; i++) {
		double len = R->segs[i][1] - R->segs[i][0];
		int c = (int)R->segs[i][2], x;
		if (len <= 0)
			continue;
		total += len;
		for (x = 0; x < nl && lv[x] != c; x++)
			;
		if (x == nl) {
			lv[nl] = c;
			ld[nl++] = 0;
		}
		ld[x] = ld[x] + len;
	}
	for (int i = 1; i < nl; i++) /* sorted by level */
		for (int j = i; j > 0 && lv[j - 1] > lv[j]; j--) {
			int t = lv[j];
			double d = ld[j];
			lv[j] = lv[j - 1];
			ld[j] = ld[j - 1];
			lv[j - 1] = t;
			ld[j - 1] = d;
		}
	const double pct[4] = { 50, 90, 95, 99 };
	for (int q = 0; q < 4 && total > 0; q++) {
		double threshold = total * (pct[q] / 100.0), accum = 0.0;
		int last = 0, i;
		for (i = 0; i < nl; i++) {
			accum += ld[i];
			if (accum >= threshold)
				break;
			last = lv[i];
		}
		R->p[q] = i < nl ? lv[i] : last;
	}
	free(ev);
}

static void ref_analyze(struct ref *R, const struct gen *g, const size_t *ends, int requests)
{
	size_t first = 0;

	memset(R, 0, sizeof(*R));
	R->n = calloc(g->n + 1, sizeof(*R->n));
	R->roots = malloc((g->n + 1) * sizeof(int));
	R->all = malloc((g->n + 1) * sizeof(int));
	R->mkeys = malloc((g->n + 1) * sizeof(int));
	for (int r = 0; r < requests; r++) {
		ref_request(R, g->s + first, ends[r] - first);
		first = ends[r];
	}
	for (int i = 0; i < R->nroots; i++)
		ref_dfs(R, R->roots[i]);
	ref_concurrency(R);
	R->self = malloc(((size_t)R->nn + 1) * sizeof(double));
	R->sub = malloc(((size_t)R->nn + 1) * sizeof(double));
	R->mid = malloc(((size_t)R->nn + 1) * sizeof(double));
	for (int i = 0; i < R->nall; i++) {
		int v = R->all[i], x;
		const struct rnode *nd = &R->n[v];
		double m = nd->start >= nd->end ? nd->start : 0.5 * (nd->start + nd->end);
		R->self[v] = ref_self(R, v);
		R->sub[v] = ref_sub(R, v);
		R->mid[v] = 0.0;
		for (int s = 0; s < R->nseg; s++)
			if (R->segs[s][0] <= m && m < R->segs[s][1])
				R->mid[v] = R->segs[s][2];
		for (x = 0; x < R->nm && strcmp(R->n[R->mkeys[x]].uuid, nd->uuid); x++)
			;
		R->mkeys[x] = v;
		R->nm += x == R->nm;
	}
	for (int i = 0; i < R->nm; i++) { /* sorted(reverse=True)[:5], stable */
		int v = R->mkeys[i], j = R->ntop < 5 ? R->ntop++ : 5;
		while (j > 0 && R->sub[R->top[j - 1]] < R->sub[v]) {
			if (j < 5)
				R->top[j] = R->top[j - 1];
			j--;
		}
		if (j < 5)
			R->top[j] = v;
	}
}

static void ref_free(struct ref *R)
{
	free(R->n);
	free(R->roots);
	free(R->all);
	free(R->mkeys);
	free(R->segs);
	free(R->self);
	free(R->sub);
	free(R->mid);
}

/* The report as the toolkit prints it, from the reference. */
static char *ref_report(const struct ref *R)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);

	if (R->nroots == 0) {
		fputs("No calls found.\n", m);
		fclose(m);
		return buf;
	}
	fprintf(m, "=== Multi-Example Nested Call Profiling Report ===\n"
		   "Total calls (across all examples): %d\n\n"
		   "-- Concurrency Distribution (all examples) --\n"
		   "p50=%.1f, p90=%.1f, p95=%.1f, p99=%.1f\n\n"
		   "-- Top 5 Calls by Bottleneck Score (subtree_time) --\n",
		R->nall, R->p[0], R->p[1], R->p[2], R->p[3]);
	for (int i = 0; i < R->ntop; i++) {
		const struct rnode *n = &R->n[R->top[i]];
		fprintf(m, "%d) UUID=%s, %s '%s', dur=%.2f, self_time=%.2f, subtree_time=%.2f, "
			   "concurrency=%.1f, score=%.2f\n", i + 1, n->uuid, n->type, n->name,
			n->dur, R->self[R->top[i]], R->sub[R->top[i]], R->mid[R->top[i]],
			R->sub[R->top[i]]);
	}
	fputs("\n-- Full Tree(s) (All Examples) --\n", m);
	for (int i = 0; i < R->nall; i++) {
		const struct rnode *n = &R->n[R->all[i]];
		for (int p = n->parent; p >= 0; p = R->n[p].parent)
			fputs("  ", m);
		fprintf(m, "- %s '%s' (uuid=%s, start=%.2f, end=%.2f, dur=%.2f)\n", n->type,
			n->name, n->uuid, n->start, n->end, n->dur);
	}
	fclose(m);
	return buf;
}

static void compare_ref(const struct ref *R, const struct rp_aiq *a)
{
	assert_int_equal(a->n_order, R->nall);
	for (int i = 0; i < R->nall; i++) {
		const struct rnode *w = &R->n[R->all[i]];
		const struct rp_aiq_node *g = &a->nodes[a->order[i]];
		int v = R->all[i];
		assert_string_equal(rp_strtab_str(&a->uuids, g->uuid), w->uuid);
		assert_string_equal(rp_strtab_str(&a->names, g->name), w->name);
		assert_string_equal(rp_aiq_type_names[g->type], w->type);
		assert_true(g->start == w->start && g->end == w->end);
		assert_true(rp_aiq_duration(g) == w->dur);
		assert_true(g->self == R->self[v]);
		if (g->subtree != R->sub[v])
			fail_msg("%s: subtree %.17g, reference %.17g", w->uuid, g->subtree,
				 R->sub[v]);
		assert_true((double)g->mid == R->mid[v]);
	}
	assert_int_equal(a->n_seg, R->nseg);
	for (int s = 0; s < R->nseg; s++)
		assert_true(a->seg_t[s] == R->segs[s][0] && a->seg_t[s + 1] == R->segs[s][1] &&
			    a->seg_level[s] == R->segs[s][2]);
	assert_true(a->p50 == R->p[0] && a->p90 == R->p[1] && a->p95 == R->p[2] &&
		    a->p99 == R->p[3]);
	assert_int_equal(a->n_metrics, R->nm);
	for (int i = 0; i < R->nm; i++)
		assert_true(a->nodes[a->metrics[i]].subtree == R->sub[R->mkeys[i]] &&
			    !strcmp(rp_strtab_str(&a->uuids, a->nodes[a->metrics[i]].uuid),
				    R->n[R->mkeys[i]].uuid));
	assert_int_equal(a->n_top, R->ntop);
	for (int i = 0; i < R->ntop; i++)
		assert_string_equal(rp_strtab_str(&a->uuids, a->nodes[a->top[i]].uuid),
				    R->n[R->top[i]].uuid);
}

static void check_generated(uint64_t seed, int requests, bool malformed, struct rp_aiq_counts *sum)
{
	struct gen g;
	size_t *ends;
	char *text = gen_trace(seed, requests, malformed, &g, &ends), *ours, *want;
	struct rp_aiq a;
	struct ref R;

	analyze_buf(&a, text, strlen(text));
	ref_analyze(&R, &g, ends, requests);
	compare_ref(&R, &a);
	ours = render(&a, true);
	want = ref_report(&R);
	same_lines(ours, want);
	free(ours);
	free(want);
	ours = render(&a, false); /* the JSON reads back as the same doubles */
	yajl_val v = parse_json(ours), nm = get(v, "node_metrics");
	assert_int_equal(YAJL_GET_OBJECT(nm)->len, a.n_metrics);
	for (uint32_t i = 0; i < a.n_metrics; i++) {
		const struct rp_aiq_node *n = &a.nodes[a.metrics[i]];
		yajl_val o = YAJL_GET_OBJECT(nm)->values[i];
		assert_true(num(get(o, "start_time")) == n->start);
		assert_true(num(get(o, "self_time")) == n->self);
		assert_true(num(get(o, "subtree_time")) == n->subtree);
	}
	yajl_tree_free(v);
	free(ours);
	sum->calls += a.c.calls;
	sum->end_not_top += a.c.end_not_top;
	sum->end_unmatched += a.c.end_unmatched;
	sum->open_at_end += a.c.open_at_end;
	sum->duplicate_uuids += a.c.duplicate_uuids;
	sum->replaced_roots += a.c.replaced_roots;
	ref_free(&R);
	rp_aiq_free(&a);
	free(text);
	free(g.s);
	free(ends);
}

static void test_aiq_generated_match_reference(void **state)
{
	struct rp_aiq_counts sum = { 0 };

	(void)state;
	for (uint64_t seed = 1; seed <= 60; seed++)
		check_generated(seed, 1 + (int)(seed % 9), false, &sum);
	assert_true(sum.calls > 500);
	assert_int_equal(sum.end_not_top + sum.end_unmatched + sum.open_at_end, 0);
}

static void test_aiq_malformed_match_reference(void **state)
{
	struct rp_aiq_counts sum = { 0 };

	(void)state;
	for (uint64_t seed = 100; seed <= 220; seed++)
		check_generated(seed, 1 + (int)(seed % 7), true, &sum);
	/* every kind of malformation was exercised */
	assert_true(sum.end_not_top > 0 && sum.end_unmatched > 0 && sum.open_at_end > 0 &&
		    sum.duplicate_uuids > 0 && sum.replaced_roots > 0);
}

/* ---------------------------------------------------------------- hand cases */

#define STEP(type, ts, uuid, name)                                                           \
	"{\"function_ancestry\": {\"function_name\": \"" name "\"}, \"payload\": "            \
	"{\"event_type\": \"" type "\", \"event_timestamp\": " ts ", \"name\": \"" name "\", " \
	"\"UUID\": \"" uuid "\"}}"

/* An END below the top: the toolkit leaves the call on its stack, ringprof closes. */
static const char malformed[] =
	"[{\"request_number\": 0, \"intermediate_steps\": ["
	STEP("FUNCTION_START", "10.0", "a", "agent") ","
	STEP("LLM_START", "11.0", "b", "llm") ","
	STEP("FUNCTION_END", "12.0", "a", "agent") ","  /* a below the top */
	STEP("LLM_END", "13.0", "b", "llm") ","
	STEP("TOOL_START", "14.0", "c", "tool") ","	/* nests under a (still on the stack) */
	STEP("TOOL_END", "15.0", "c", "tool") ","
	STEP("TOOL_END", "15.5", "zz", "tool") ","	/* never started */
	STEP("LLM_START", "16.0", "d", "llm") ","	/* never ended */
	STEP("BOGUS_END", "16.5", "d", "llm") ","	/* refused */
	STEP("TOOL_START", "17.0", "c", "tool") ","	/* duplicate UUID, under d */
	STEP("TOOL_END", "18.0", "c", "tool") "]}]";

static void test_aiq_malformed_by_hand(void **state)
{
	struct rp_aiq a;
	char *text;

	(void)state;
	analyze_buf(&a, malformed, sizeof(malformed) - 1);
	assert_int_equal(a.n_roots, 1);
	assert_int_equal(a.n_order, 5); /* a, b, c, d, c' */
	assert_int_equal(a.nodes[a.order[2]].uuid, a.nodes[a.order[4]].uuid);
	assert_true(a.nodes[a.order[0]].end == 12.0);
	assert_true(a.nodes[a.order[3]].end == 16.0); /* d: end = start */
	assert_int_equal(a.n_metrics, 4);		/* c counted once, as its last call */
	assert_true(a.nodes[a.metrics[2]].start == 17.0);
	assert_int_equal(a.c.end_not_top, 1);
	assert_int_equal(a.c.end_unmatched, 1);
	assert_int_equal(a.c.open_at_end, 1);
	assert_int_equal(a.c.duplicate_uuids, 1);
	/* a: [10, 12], children b [11, 13], c [14, 15], d [16, 16]: self = 2 - 1 */
	assert_true(a.nodes[a.order[0]].self == 1.0);
	assert_true(a.nodes[a.order[0]].subtree == 1.0 + 2.0 + 1.0 + 0.0 + 1.0);
	text = render(&a, true);
	assert_non_null(strstr(text, "\n  - TOOL 'tool' (uuid=c, start=14.00, end=15.00, dur=1.00)\n"
				     "  - LLM 'llm' (uuid=d, start=16.00, end=16.00, dur=0.00)\n"
				     "    - TOOL 'tool' (uuid=c, start=17.00, end=18.00"));
	free(text);
	rp_aiq_free(&a);
}

static const struct rp_report_fn *find_fn(const struct rp_report *r, const char *name,
					  const char *cat)
{
	for (uint32_t i = 0; i < r->n_fns; i++)
		if (!strcmp(r->fns[i].name, name) && !strcmp(r->fns[i].category, cat))
			return &r->fns[i];
	return NULL;
}

static void engine_of(const char *buf, size_t len, struct rp_report *r, struct rp_nat_stats *st)
{
	struct rp_engine *e;
	char why[RP_WHY_MAX];

	assert_int_equal(rp_engine_open(NULL, &e), 0);
	if (rp_import_nat_buf(e, NULL, NULL, buf, len, "buf", st, why) != 0)
		fail_msg("import: %s", why);
	assert_int_equal(rp_engine_report(e, r), 0);
	rp_engine_close(e);
}

/* ringprof's own figures on the malformed case: each anomaly counted. */
static void test_aiq_engine_counts_anomalies(void **state)
{
	struct rp_nat_stats st;
	struct rp_report r;
	const struct rp_report_fn *f;

	(void)state;
	engine_of(malformed, sizeof(malformed) - 1, &r, &st);
	assert_int_equal(st.steps, 11);
	assert_int_equal(st.calls, 10);
	assert_int_equal(r.anomalies[RP_ANOM_END_MISMATCH], 1); /* a's END closes b */
	assert_int_equal(r.truncated, 1);
	assert_int_equal(r.anomalies[RP_ANOM_END_UNMATCHED], 2); /* b's, after it was closed; zz */
	assert_int_equal(r.anomalies[RP_ANOM_OPEN_AT_END], 1);	 /* d, at 18.0 */
	assert_int_equal(r.anomalies[RP_ANOM_BAD_EVENT], 2);	 /* BOGUS, duplicate c */
	f = find_fn(&r, "agent", "FUNCTION");
	assert_non_null(f);
	assert_int_equal(f->calls, 1);
	assert_int_equal(f->cum_ns, 2000000000u);
	assert_int_equal(f->self_ns, 1000000000u); /* b truncated at 12.0 */
	f = find_fn(&r, "llm", "LLM");
	assert_int_equal(f->calls, 2);		       /* b [11, 12], d [16, 18] */
	assert_int_equal(f->cum_ns, 3000000000u);
	assert_int_equal(f->self_ns, 2000000000u);     /* d minus c' */
	f = find_fn(&r, "tool", "TOOL");
	assert_int_equal(f->calls, 2);
	assert_int_equal(f->cum_ns, 2000000000u);
	rp_report_free(&r);
}

/* ringprof's own formats on small.json: per name, the toolkit's calls and times. */
static void test_aiq_engine_small_json_consistent(void **state)
{
	char p1[4096], *in;
	size_t n1;
	struct rp_nat_stats st;
	struct rp_report r;
	struct rp_aiq a;

	(void)state;
	if (!testdata("small.json", p1, sizeof(p1)))
		skip();
	in = slurp(p1, &n1);
	engine_of(in, n1, &r, &st);
	analyze_buf(&a, in, n1);
	assert_int_equal(r.events, 212);
	for (int k = 0; k < RP_ANOM_KIND_COUNT; k++)
		assert_int_equal(r.anomalies[k], 0);
	assert_int_equal(r.truncated, 0);
	assert_int_equal(st.requests, 10);
	assert_int_equal(st.steps, 306);
	uint64_t total_calls = 0;
	for (uint32_t i = 0; i < r.n_fns; i++) {
		const struct rp_report_fn *f = &r.fns[i];
		double self = 0, dur = 0;
		uint64_t calls = 0;
		for (uint32_t k = 0; k < a.n_order; k++) {
			const struct rp_aiq_node *n = &a.nodes[a.order[k]];
			if (strcmp(rp_strtab_str(&a.names, n->name), f->name) ||
			    strcmp(rp_aiq_type_names[n->type], f->category))
				continue;
			calls++;
			self += n->self;
			dur += rp_aiq_duration(n);
		}
		assert_int_equal(f->calls, calls);
		/* ns from the decimal text against doubles of ~240 ns resolution */
		assert_true(fabs((double)f->self_ns / 1e9 - self) <= 1e-6 * (double)calls);
		assert_true(fabs((double)f->cum_ns / 1e9 - dur) <= 1e-6 * (double)calls);
		total_calls += f->calls;
	}
	assert_int_equal(total_calls, 106);
	assert_int_equal(r.conc[0].p50, 6);
	assert_int_equal(r.conc[0].p99, 15);
	rp_report_free(&r);
	rp_aiq_free(&a);
	free(in);
}

static void test_aiq_bad_input(void **state)
{
	static const char *const bad[] = { "{\"traceEvents\": []}", "[{\"intermediate_steps\": [}]",
					   "", "[1, 2" };
	struct rp_aiq a;
	char why[RP_WHY_MAX];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(rp_aiq_init(&a, 0), 0);
		assert_int_equal(rp_import_nat_buf(NULL, &a, NULL, bad[i], strlen(bad[i]), "b", NULL, why),
				 -EINVAL);
		assert_non_null(strstr(why, "b: byte "));
		rp_aiq_free(&a);
	}
	/* no calls at all: the toolkit's "No calls found." */
	static const char empty[] = "[{\"intermediate_steps\": []}, 7]";
	analyze_buf(&a, empty, strlen(empty));
	char *t = render(&a, true);
	assert_string_equal(t, "No calls found.\n");
	free(t);
	rp_aiq_free(&a);
}

/* The node cap: calls past it are counted, never kept. */
static void test_aiq_node_cap(void **state)
{
	struct rp_aiq a;
	char why[RP_WHY_MAX];

	(void)state;
	assert_int_equal(rp_aiq_init(&a, 3), 0);
	assert_int_equal(rp_import_nat_buf(NULL, &a, NULL, malformed, sizeof(malformed) - 1, "m", NULL,
					   why), 0);
	assert_int_equal(rp_aiq_finish(&a), 0);
	assert_int_equal(a.n_nodes, 3);
	assert_int_equal(a.c.nodes_dropped, 2);
	rp_aiq_free(&a);

	/* the importer's caps: steps of a request, events waiting for the engine */
	struct rp_nat_caps caps = { .max_events = 4, .max_request_steps = 8 };
	struct rp_nat_stats st;
	struct rp_engine *e;
	struct rp_report r;

	assert_int_equal(rp_engine_open(NULL, &e), 0);
	assert_int_equal(rp_import_nat_buf(e, NULL, &caps, malformed, sizeof(malformed) - 1, "m",
					   &st, why), 0);
	assert_int_equal(st.capped, 2 + 4); /* 10 call steps: 8 kept, then 4 fed */
	assert_int_equal(rp_engine_report(e, &r), 0);
	assert_int_equal(r.events, 4);
	assert_int_equal(r.anomalies[RP_ANOM_BAD_EVENT], 1 + 6);
	rp_report_free(&r);
	rp_engine_close(e);
}

/* Huge strings (an LLM's output) are skipped past, across chunk boundaries, escapes
 * and UTF-8 included; long names are cut and counted. */
static void test_aiq_huge_strings(void **state)
{
	char path[64], why[RP_WHY_MAX], *plain, *big, *ours, *want;
	struct rp_nat_stats st;
	struct rp_aiq a, b;
	FILE *f;

	(void)state;
	plain = malloc(sizeof(malformed) + 1);
	memcpy(plain, malformed, sizeof(malformed));
	big = malloc(1 << 20);
	assert_non_null(big);
	static const char unit[] = "ab\\\\\\\"\\u00e9\xc3\xa9"; /* JSON: ab \\ \" \u00e9 é */
	for (size_t i = 0; i + sizeof(unit) - 1 <= 300000; i += sizeof(unit) - 1)
		memcpy(big + i, unit, sizeof(unit) - 1);
	big[300000 - 300000 % (sizeof(unit) - 1)] = '\0';
	snprintf(path, sizeof(path), "/tmp/test_aiq_big.%d.json", (int)getpid());
	f = fopen(path, "w");
	assert_non_null(f);
	/* the hand case, each step with a 300 KB "data" and a 5000-byte tag */
	for (const char *p = malformed; *p; p++) {
		if (strncmp(p, "\"payload\": {", 12) == 0) {
			fprintf(f, "\"payload\": {\"data\": {\"input\": \"%s\"}, \"tags\": [\"", big);
			for (int i = 0; i < 5000; i++)
				fputc('t', f);
			fputs("\"], ", f);
			p += 11;
			continue;
		}
		fputc(*p, f);
	}
	fclose(f);
	assert_int_equal(rp_aiq_init(&a, 0), 0);
	if (rp_import_nat(NULL, &a, NULL, path, NULL, NULL, &st, why) != 0)
		fail_msg("%s", why);
	assert_int_equal(rp_aiq_finish(&a), 0);
	assert_int_equal(st.steps, 11);
	assert_true(st.bytes > 11 * 300000);
	analyze_buf(&b, plain, strlen(plain));
	ours = render(&a, false);
	want = render(&b, false);
	assert_string_equal(ours, want);
	free(ours);
	free(want);
	rp_aiq_free(&a);
	rp_aiq_free(&b);
	/* a name longer than RP_NAT_STR_MAX: cut (at a character), counted */
	f = fopen(path, "w");
	fputs("[{\"intermediate_steps\": [{\"payload\": {\"event_type\": \"LLM_START\", "
	      "\"event_timestamp\": 1, \"UUID\": \"x\", \"name\": \"", f);
	for (int i = 0; i < 3000; i++)
		fputs("\xc3\xa9", f);
	fputs("\"}}]}]", f);
	fclose(f);
	assert_int_equal(rp_aiq_init(&a, 0), 0);
	assert_int_equal(rp_import_nat(NULL, &a, NULL, path, NULL, NULL, &st, why), 0);
	assert_int_equal(rp_aiq_finish(&a), 0);
	assert_int_equal(st.cut, 1);
	assert_int_equal(strlen(rp_strtab_str(&a.names, 0)), RP_NAT_STR_MAX - 2);
	rp_aiq_free(&a);
	unlink(path);
	free(big);
	free(plain);
}

/* A byte as a JSON string holds it. */
static void put_json_byte(FILE *f, unsigned char b)
{
	if (b < 0x20)
		fprintf(f, "\\u%04x", b);
	else if (b == '"' || b == '\\')
		fprintf(f, "\\%c", b);
	else
		fputc(b, f);
}

/* UUIDs and names of every length to 19 bytes with one byte to escape (controls, '"',
 * '\\') or none (DEL, a letter) at each position: the JSON report, read back by
 * yajl, holds them byte for byte as keys and as values. */
static void test_aiq_strings_escaped(void **state)
{
	static const unsigned char odd[] = { 1, 8, 9, 10, 13, 31, '"', '\\', 0x7f, 'x' };
	char *buf = NULL, *json, s[20];
	size_t len = 0, n = 0;
	FILE *f = open_memstream(&buf, &len);
	yajl_val v, metrics;
	struct rp_aiq a;

	(void)state;
	assert_non_null(f);
	fputs("[{\"intermediate_steps\": [", f);
	for (size_t l = 1; l < sizeof(s); l++)
		for (size_t at = 0; at < l; at++)
			for (size_t c = 0; c < sizeof(odd); c++)
				for (int end = 0; end < 2; end++) {
					fprintf(f, "%s{\"payload\": {\"event_type\": \"LLM_%s\", "
						   "\"event_timestamp\": %zu, \"name\": \"",
						n ? ", " : "", end ? "END" : "START", n);
					n++;
					for (size_t k = 0; k < l; k++)
						put_json_byte(f, k == at ? odd[c] : 'a');
					fputs("\", \"UUID\": \"", f);
					for (size_t k = 0; k < l; k++)
						put_json_byte(f, k == at ? odd[c] : 'a');
					fputs("\"}}", f);
				}
	fputs("]}]", f);
	fclose(f);
	analyze_buf(&a, buf, len);
	json = render(&a, false);
	v = parse_json(json);
	metrics = get(v, "node_metrics");
	assert_true(metrics != NULL && YAJL_IS_OBJECT(metrics));
	assert_int_equal(metrics->u.object.len, n / 2);
	n = 0;
	for (size_t l = 1; l < sizeof(s); l++)
		for (size_t at = 0; at < l; at++)
			for (size_t c = 0; c < sizeof(odd); c++, n++) {
				memset(s, 'a', l);
				s[at] = (char)odd[c];
				s[l] = '\0';
				assert_string_equal(metrics->u.object.keys[n], s);
				yajl_val m = metrics->u.object.values[n];
				assert_string_equal(YAJL_GET_STRING(get(m, "uuid")), s);
				assert_string_equal(YAJL_GET_STRING(get(m, "operation_name")), s);
			}
	yajl_tree_free(v);
	free(json);
	rp_aiq_free(&a);
	free(buf);
}

/* Far deeper than Python's recursion limit: the toolkit would fail, we do not recurse. */
static void test_aiq_deep_tree(void **state)
{
	enum { N = 20000 };
	char *buf = NULL, *t;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	struct rp_aiq a;

	(void)state;
	fputs("[{\"intermediate_steps\": [", m);
	for (int i = 0; i < N; i++)
		fprintf(m, "%s{\"payload\": {\"event_type\": \"TOOL_START\", \"event_timestamp\": "
			   "%d, \"UUID\": \"d%d\", \"name\": \"t\"}}", i ? ", " : "", i, i);
	for (int i = N - 1; i >= 0; i--)
		fprintf(m, ", {\"payload\": {\"event_type\": \"TOOL_END\", \"event_timestamp\": "
			   "%d, \"UUID\": \"d%d\", \"name\": \"t\"}}", 2 * N - i, i);
	fputs("]}]", m);
	fclose(m);
	analyze_buf(&a, buf, len);
	assert_int_equal(a.n_order, N);
	assert_int_equal(a.c.end_not_top, 0);
	assert_true(a.nodes[a.order[0]].self == 2.0);
	assert_true(a.nodes[a.order[0]].subtree == 2.0 * N);
	assert_int_equal(a.top[0], a.order[0]);
	assert_true(a.p50 == (double)N / 2); /* every level 1..N held 2 s */
	t = render(&a, false);
	free(t);
	rp_aiq_free(&a);
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_aiq_small_json_matches_toolkit),
		cmocka_unit_test(test_aiq_cli_matches_toolkit),
		cmocka_unit_test(test_aiq_generated_match_reference),
		cmocka_unit_test(test_aiq_malformed_match_reference),
		cmocka_unit_test(test_aiq_malformed_by_hand),
		cmocka_unit_test(test_aiq_engine_counts_anomalies),
		cmocka_unit_test(test_aiq_engine_small_json_consistent),
		cmocka_unit_test(test_aiq_bad_input),
		cmocka_unit_test(test_aiq_node_cap),
		cmocka_unit_test(test_aiq_huge_strings),
		cmocka_unit_test(test_aiq_deep_tree),
		cmocka_unit_test(test_aiq_strings_escaped),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
