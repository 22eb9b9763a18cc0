// SPDX-License-Identifier: MIT
/*
 * Timeline exports (tools/render/render_chrome.c, render_gantt.c) end to end: a generated
 * Chrome trace (several pids and tids, nested spans with ns-precision times,
 * counters, steps) is analyzed by the engine, exported with --format chrome, and
 * the export parsed back with yajl: every span (name, cat, pid, tid, ts, dur) must
 * equal the generator's, exactly in ns; metadata names every process and thread;
 * counters come back as C events; --from/--to and step ranges keep exactly the
 * spans the brute-force filter keeps. The Gantt SVG has one bar per span and a
 * legend entry per category, and parses as XML (python3's xml.etree when present).
 */
#include "support.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <yajl/yajl_tree.h>

#include "engine.h"
#include "import_chrome.h"
#include "render.h"
#include "render_export.h"

static uint64_t rng;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

struct sp {
	char name[32], cat[16];
	uint32_t pid, tid;
	uint64_t ts, dur;
	int step; /* ordinal, or -1 */
};

struct ctr {
	char name[16];
	uint32_t pid, tid;
	uint64_t ts;
	int64_t value;
};

struct gen {
	struct sp *s;
	size_t n, cap;
	struct ctr *c;
	size_t nc;
	int steps;
};

static const char *const cats[] = { "cpu", "io", "net", "gpu" };

static void add(struct gen *g, const char *name, const char *cat, uint32_t pid, uint32_t tid,
		uint64_t ts, uint64_t dur, int step)
{
	struct sp *s;

	if (g->n == g->cap) {
		g->cap = g->cap ? 2 * g->cap : 256;
		g->s = realloc(g->s, g->cap * sizeof(*g->s));
		assert_non_null(g->s);
	}
	s = &g->s[g->n++];
	memset(s, 0, sizeof(*s));
	snprintf(s->name, sizeof(s->name), "%s", name);
	snprintf(s->cat, sizeof(s->cat), "%s", cat);
	s->pid = pid;
	s->tid = tid;
	s->ts = ts;
	s->dur = dur;
	s->step = step;
}

/* Children strictly inside (lo, hi), one after another with gaps: no ties. */
static void gen_children(struct gen *g, uint32_t pid, uint32_t tid, uint64_t lo, uint64_t hi,
			 int depth)
{
	uint64_t t = lo + 1 + next() % 50;

	while (depth < 4 && t + 20 < hi) {
		uint64_t room = hi - t - 1, dur = 10 + next() % (room > 40 ? room / 2 : 10);
		char name[32];

		if (dur >= room)
			break;
		snprintf(name, sizeof(name), "fn_%u_%d", (unsigned)(next() % 9), depth);
		add(g, name, cats[next() % 4], pid, tid, t, dur, -1);
		if (next() % 3)
			gen_children(g, pid, tid, t, t + dur, depth + 1);
		t += dur + 1 + next() % 300;
	}
}

/* Tracks (pid, tid); on (100, 1) the roots are steps "train/step" or "eval/step". */
static void generate(struct gen *g, uint64_t seed, int roots)
{
	static const uint32_t tracks[][2] = {
		{ 100, 1 }, { 100, 2 }, { 200, 7 }, { 300, 1 }, { 300, 3 }
	};

	memset(g, 0, sizeof(*g));
	rng = seed;
	g->c = calloc(4096, sizeof(*g->c));
	for (size_t k = 0; k < sizeof(tracks) / sizeof(tracks[0]); k++) {
		uint64_t t = 1000000 + next() % 1000;

		for (int i = 0; i < roots; i++) {
			uint64_t dur = 5000 + next() % 20000;
			bool step = k == 0;

			add(g, step ? (i % 3 ? "train/step" : "eval/step") : "root",
			    step ? "step" : "cpu", tracks[k][0], tracks[k][1], t, dur,
			    step ? g->steps++ : -1);
			gen_children(g, tracks[k][0], tracks[k][1], t, t + dur, 1);
			if (g->nc < 4096 && k != 1) { /* counters on some tracks */
				struct ctr *c = &g->c[g->nc++];
				snprintf(c->name, sizeof(c->name), "%s", k % 2 ? "queue" : "mem");
				c->pid = tracks[k][0];
				c->tid = tracks[k][1];
				c->ts = t + next() % dur;
				c->value = (int64_t)(next() % 100000) - 5000;
			}
			t += dur + 1 + next() % 2000;
		}
	}
}

static char *write_trace(const struct gen *g, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);

	assert_non_null(f);
	fputs("{\"traceEvents\":[", f);
	for (size_t i = 0; i < g->n; i++) {
		const struct sp *s = &g->s[i];
		fprintf(f,
			"%s{\"ph\":\"X\",\"name\":\"%s\",\"cat\":\"%s\",\"pid\":%u,\"tid\":%u,"
			"\"ts\":%llu.%03llu,\"dur\":%llu.%03llu}\n",
			i ? "," : "", s->name, s->cat, s->pid, s->tid,
			(unsigned long long)(s->ts / 1000), (unsigned long long)(s->ts % 1000),
			(unsigned long long)(s->dur / 1000), (unsigned long long)(s->dur % 1000));
	}
	for (size_t i = 0; i < g->nc; i++) {
		const struct ctr *c = &g->c[i];
		fprintf(f,
			",{\"ph\":\"C\",\"name\":\"%s\",\"pid\":%u,\"tid\":%u,"
			"\"ts\":%llu.%03llu,\"args\":{\"v\":%lld}}\n",
			c->name, c->pid, c->tid, (unsigned long long)(c->ts / 1000),
			(unsigned long long)(c->ts % 1000), (long long)c->value);
	}
	fputs("]}\n", f);
	fclose(f);
	return buf;
}

static void analyze(const struct gen *g, struct rp_report *r)
{
	struct rp_engine *e;
	char why[RP_WHY_MAX];
	size_t len;
	char *buf = write_trace(g, &len);

	assert_int_equal(rp_engine_open(NULL, &e), 0);
	if (rp_import_chrome_buf(e, buf, len, "gen.json", why) != 0)
		fail_msg("import: %s", why);
	assert_int_equal(rp_engine_report(e, r), 0);
	rp_engine_close(e);
	free(buf);
}

typedef int (*render_fn)(const struct rp_report *, FILE *, const struct rp_export_opts *);

static char *render(const struct rp_report *r, render_fn fn, uint64_t from, uint64_t to,
		    size_t *len)
{
	struct rp_export_opts o = { .from = from, .to = to };
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);

	assert_non_null(f);
	assert_int_equal(fn(r, f, &o), 0);
	fclose(f);
	return buf;
}

/* "12.345" (µs, exactly three decimals) -> ns. */
static uint64_t us3(const yajl_val v)
{
	const char *s;
	const char *dot;

	assert_true(YAJL_IS_NUMBER(v));
	s = v->u.number.r;
	dot = strchr(s, '.');
	assert_non_null(dot);
	assert_int_equal(strlen(dot + 1), 3);
	return strtoull(s, NULL, 10) * 1000 + strtoull(dot + 1, NULL, 10);
}

static yajl_val get(yajl_val o, const char *key)
{
	const char *path[] = { key, NULL };

	return yajl_tree_get(o, path, yajl_t_any);
}

static int cmp_sp(const void *a, const void *b)
{
	const struct sp *x = a, *y = b;
	int c;

	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	if (x->dur != y->dur)
		return x->dur < y->dur ? -1 : 1;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if ((c = strcmp(x->name, y->name)) != 0)
		return c;
	return strcmp(x->cat, y->cat);
}

struct parsed {
	struct sp *s;
	size_t n;
	struct ctr *c;
	size_t nc;
	size_t procs, threads;
	size_t n_async, open_async; /* async b/e pairs closed, b still open */
	char async_first[32];	    /* the first closed pair's name */
	uint64_t async_dur;	    /* and its duration */
	yajl_val root;
};

static void parse_chrome(const char *json, struct parsed *p)
{
	char err[256];
	yajl_val evs;

	memset(p, 0, sizeof(*p));
	p->root = yajl_tree_parse(json, err, sizeof(err));
	if (p->root == NULL)
		fail_msg("chrome export is not JSON: %s", err);
	assert_string_equal(YAJL_GET_STRING(get(p->root, "displayTimeUnit")), "ns");
	evs = get(p->root, "traceEvents");
	assert_true(YAJL_IS_ARRAY(evs));
	p->s = calloc(evs->u.array.len + 1, sizeof(*p->s));
	p->c = calloc(evs->u.array.len + 1, sizeof(*p->c));
	for (size_t i = 0; i < evs->u.array.len; i++) {
		yajl_val e = evs->u.array.values[i];
		const char *ph = YAJL_GET_STRING(get(e, "ph"));

		if (strcmp(ph, "M") == 0) {
			const char *n = YAJL_GET_STRING(get(e, "name"));
			p->procs += strcmp(n, "process_name") == 0;
			p->threads += strcmp(n, "thread_name") == 0;
		} else if (strcmp(ph, "X") == 0) {
			struct sp *s = &p->s[p->n++];
			yajl_val args = get(e, "args");
			snprintf(s->name, sizeof(s->name), "%s", YAJL_GET_STRING(get(e, "name")));
			snprintf(s->cat, sizeof(s->cat), "%s", YAJL_GET_STRING(get(e, "cat")));
			s->pid = (uint32_t)YAJL_GET_INTEGER(get(e, "pid"));
			s->tid = (uint32_t)YAJL_GET_INTEGER(get(e, "tid"));
			s->ts = us3(get(e, "ts"));
			s->dur = us3(get(e, "dur"));
			s->step = args ? (int)YAJL_GET_INTEGER(get(args, "step")) : -1;
		} else if (strcmp(ph, "C") == 0) {
			struct ctr *c = &p->c[p->nc++];
			snprintf(c->name, sizeof(c->name), "%s", YAJL_GET_STRING(get(e, "name")));
			c->pid = (uint32_t)YAJL_GET_INTEGER(get(e, "pid"));
			c->tid = (uint32_t)YAJL_GET_INTEGER(get(e, "tid"));
			c->ts = us3(get(e, "ts"));
			c->value = YAJL_GET_INTEGER(get(get(e, "args"), "value"));
		} else if (strcmp(ph, "b") == 0 || strcmp(ph, "e") == 0) {
			/* Async slices: every "e" closes the newest open "b" of its id (one id
			 * here), with the same name, not before it. */
			static uint64_t open_ts[64];
			static char open_name[64][32];
			const char *n = YAJL_GET_STRING(get(e, "name"));

			assert_string_equal(YAJL_GET_STRING(get(e, "cat")), "async");
			if (ph[0] == 'b') {
				assert_true(p->open_async < 64);
				open_ts[p->open_async] = us3(get(e, "ts"));
				snprintf(open_name[p->open_async++], 32, "%s", n);
			} else {
				assert_true(p->open_async > 0);
				p->open_async--;
				assert_string_equal(open_name[p->open_async], n);
				assert_true(us3(get(e, "ts")) >= open_ts[p->open_async]);
				if (p->n_async++ == 0) {
					snprintf(p->async_first, sizeof(p->async_first), "%s", n);
					p->async_dur = us3(get(e, "ts")) - open_ts[p->open_async];
				}
			}
		} else {
			fail_msg("unexpected event ph %s", ph);
		}
	}
}

static void parsed_free(struct parsed *p)
{
	free(p->s);
	free(p->c);
	yajl_tree_free(p->root);
}

/* The generator's spans overlapping [from, to], against the export's. */
static void check_spans(const struct gen *g, struct parsed *p, uint64_t from, uint64_t to)
{
	struct sp *want = calloc(g->n + 1, sizeof(*want));
	size_t n = 0;

	for (size_t i = 0; i < g->n; i++)
		if (g->s[i].ts + g->s[i].dur >= from && g->s[i].ts <= to)
			want[n++] = g->s[i];
	assert_int_equal(p->n, n);
	qsort(want, n, sizeof(*want), cmp_sp);
	qsort(p->s, p->n, sizeof(*p->s), cmp_sp);
	for (size_t i = 0; i < n; i++) {
		if (cmp_sp(&want[i], &p->s[i]) != 0)
			fail_msg("span %zu: want %s [%s] %u/%u %llu+%llu, got %s [%s] %u/%u "
				 "%llu+%llu",
				 i, want[i].name, want[i].cat, want[i].pid, want[i].tid,
				 (unsigned long long)want[i].ts, (unsigned long long)want[i].dur,
				 p->s[i].name, p->s[i].cat, p->s[i].pid, p->s[i].tid,
				 (unsigned long long)p->s[i].ts, (unsigned long long)p->s[i].dur);
		assert_int_equal(want[i].step, p->s[i].step);
	}
	free(want);
}

static int cmp_ctr(const void *a, const void *b)
{
	const struct ctr *x = a, *y = b;

	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	return strcmp(x->name, y->name);
}

static void check_counters(const struct gen *g, struct parsed *p, uint64_t from, uint64_t to)
{
	struct ctr *want = calloc(g->nc + 1, sizeof(*want));
	size_t n = 0;

	for (size_t i = 0; i < g->nc; i++)
		if (g->c[i].ts >= from && g->c[i].ts <= to)
			want[n++] = g->c[i];
	assert_int_equal(p->nc, n);
	qsort(want, n, sizeof(*want), cmp_ctr);
	qsort(p->c, p->nc, sizeof(*p->c), cmp_ctr);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(want[i].ts, p->c[i].ts);
		assert_string_equal(want[i].name, p->c[i].name);
		assert_int_equal(want[i].value, p->c[i].value);
		assert_int_equal(want[i].pid, p->c[i].pid);
		assert_int_equal(want[i].tid, p->c[i].tid);
	}
	free(want);
}

static void test_export_chrome_round_trip(void **state)
{
	struct gen g;
	struct rp_report r;
	struct parsed p;
	size_t len;
	char *out;

	(void)state;
	generate(&g, 0x1234567u, 40);
	analyze(&g, &r);
	assert_int_equal(r.recorder.n_spans, g.n);
	assert_int_equal(r.recorder.wrapped, 0);
	out = render(&r, rp_render_chrome, 0, UINT64_MAX, &len);
	parse_chrome(out, &p);
	check_spans(&g, &p, 0, UINT64_MAX);
	check_counters(&g, &p, 0, UINT64_MAX);
	assert_int_equal(p.procs, 3);	/* pids 100, 200, 300 */
	assert_int_equal(p.threads, 5); /* the five (pid, tid) tracks */
	assert_non_null(strstr(out, "\"name\":\"pid 100 (gen.json)\""));
	assert_non_null(strstr(out, "\"name\":\"tid 7\""));
	parsed_free(&p);
	free(out);
	rp_report_free(&r);
	free(g.s);
	free(g.c);
}

static void test_export_chrome_time_filter(void **state)
{
	struct gen g;
	struct rp_report r;

	(void)state;
	generate(&g, 0xfeedbeefu, 30);
	analyze(&g, &r);
	for (int k = 0; k < 8; k++) {
		struct parsed p;
		size_t len;
		uint64_t span = r.t_last - r.t_first;
		uint64_t from = r.t_first + next() % span, to = from + next() % (span / 3 + 1);
		char *out;

		if (k == 0) { /* exactly a span's end and another's start */
			from = g.s[3].ts + g.s[3].dur;
			to = g.s[g.n / 2].ts;
		}
		out = render(&r, rp_render_chrome, from, to, &len);
		parse_chrome(out, &p);
		check_spans(&g, &p, from, to);
		check_counters(&g, &p, from, to);
		parsed_free(&p);
		free(out);
	}
	rp_report_free(&r);
	free(g.s);
	free(g.c);
}

static void test_export_step_range(void **state)
{
	struct gen g;
	struct rp_report r;
	struct parsed p;
	uint64_t from = 0, to = 0, wf = UINT64_MAX, wt = 0;
	size_t len;
	char *out;

	(void)state;
	generate(&g, 0xabcdefu, 20);
	analyze(&g, &r);
	assert_int_equal(r.n_steps, 2); /* train, eval */
	for (size_t i = 0; i < g.n; i++)
		if (g.s[i].step >= 4 && g.s[i].step <= 9) {
			wf = g.s[i].ts < wf ? g.s[i].ts : wf;
			wt = g.s[i].ts + g.s[i].dur > wt ? g.s[i].ts + g.s[i].dur : wt;
		}
	assert_int_equal(rp_export_steps_range(&r, 4, 9, &from, &to), 0);
	assert_int_equal(from, wf);
	assert_int_equal(to, wt);
	assert_int_equal(rp_export_steps_range(&r, 1000, 2000, &from, &to), -ENOENT);
	out = render(&r, rp_render_chrome, wf, wt, &len);
	parse_chrome(out, &p);
	check_spans(&g, &p, wf, wt);
	parsed_free(&p);
	free(out);
	rp_report_free(&r);
	free(g.s);
	free(g.c);
}

/* Two sources with the same pid get distinct pids; numeric labels stay first. */
static void test_export_sources_apart(void **state)
{
	struct gen g;
	struct rp_engine *e;
	struct rp_report r;
	struct parsed p;
	char why[RP_WHY_MAX], *buf, *out;
	size_t len, n;
	bool seen[2] = { false, false };

	(void)state;
	generate(&g, 42, 5);
	buf = write_trace(&g, &len);
	assert_int_equal(rp_engine_open(NULL, &e), 0);
	assert_int_equal(rp_import_chrome_buf(e, buf, len, "a.json", why), 0);
	assert_int_equal(rp_import_chrome_buf(e, buf, len, "b.json", why), 0);
	assert_int_equal(rp_engine_report(e, &r), 0);
	rp_engine_close(e);
	out = render(&r, rp_render_chrome, 0, UINT64_MAX, &n);
	parse_chrome(out, &p);
	assert_int_equal(p.n, 2 * g.n);
	assert_int_equal(p.procs, 6);
	assert_int_equal(p.threads, 10);
	/* Each of a's tracks keeps its numbers; b's pids are all different ones. */
	for (size_t i = 0; i < p.n; i++) {
		bool orig = p.s[i].pid == 100 || p.s[i].pid == 200 || p.s[i].pid == 300;
		seen[orig] = true;
	}
	assert_true(seen[0] && seen[1]);
	assert_non_null(strstr(out, "\"name\":\"pid 100 (a.json)\""));
	assert_non_null(strstr(out, "\"name\":\"pid 100 (b.json)\""));
	parsed_free(&p);
	free(out);
	free(buf);
	rp_report_free(&r);
	free(g.s);
	free(g.c);
}

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;

	for (const char *s = hay; (s = strstr(s, needle)) != NULL; s++)
		n++;
	return n;
}

/* Tags balance (a small XML well-formedness check: no attribute contains '>'). */
static void check_balanced(const char *svg)
{
	const char *stack[64];
	size_t lens[64], depth = 0;

	for (const char *s = strchr(svg, '<'); s; s = strchr(s + 1, '<')) {
		const char *end = strchr(s, '>');
		size_t n;

		assert_non_null(end);
		if (s[1] == '?' || s[1] == '!')
			continue;
		if (s[1] == '/') {
			n = strcspn(s + 2, " >");
			assert_true(depth > 0);
			depth--;
			assert_int_equal(lens[depth], n);
			assert_memory_equal(stack[depth], s + 2, n);
		} else if (end[-1] != '/') {
			assert_true(depth < 64);
			stack[depth] = s + 1;
			lens[depth++] = strcspn(s + 1, " >");
		}
	}
	assert_int_equal(depth, 0);
}

static void test_export_gantt(void **state)
{
	struct gen g;
	struct rp_report r;
	size_t len;
	char *svg;
	const char *py = "/usr/bin/python3";

	(void)state;
	generate(&g, 777, 60);
	analyze(&g, &r);
	svg = render(&r, rp_render_gantt, 0, UINT64_MAX, &len);
	check_balanced(svg);
	assert_int_equal(count(svg, "<rect class=\"s\""), g.n);
	assert_int_equal(count(svg, "<title>"), g.n);
	assert_int_equal(count(svg, "<g class=\"lg\">"), 5); /* cpu gpu io net step */
	/* Row labels fit their column (30 characters), which is clipped too. */
	assert_non_null(strstr(svg, "<g clip-path=\"url(#labels)\">"));
	for (const char *l = svg; (l = strstr(l, "<text x=\"5\" y=\"")) != NULL; l++) {
		const char *a = strchr(l, '>') + 1, *b = strstr(a, "</text>");
		size_t n = 0;

		for (const char *c = a; c < b; c++)
			n += ((unsigned char)*c & 0xc0) != 0x80;
		assert_true(n <= 30);
	}
	for (size_t i = 0; i < 4; i++) {
		char want[64];
		snprintf(want, sizeof(want), ">%s</text></g>", cats[i]);
		assert_int_equal(count(svg, want), 1);
	}
	assert_int_equal(count(svg, ">step</text></g>"), 1);
	if (access(py, X_OK) == 0) { /* a real XML parser agrees */
		char path[] = "/tmp/rp_gantt_XXXXXX", cmd[512];
		int fd = mkstemp(path);
		FILE *f;
		unsigned long n = 0;

		assert_true(fd >= 0);
		assert_int_equal(write(fd, svg, len), (ssize_t)len);
		close(fd);
		snprintf(
			cmd, sizeof(cmd),
			"%s -c \"import xml.etree.ElementTree as E,sys; r=E.parse(sys.argv[1])."
			"getroot(); print(sum(1 for e in r.iter('{http://www.w3.org/2000/svg}rect')"
			" if e.get('class')=='s'))\" %s",
			py, path);
		f = popen(cmd, "r");
		assert_non_null(f);
		assert_int_equal(fscanf(f, "%lu", &n), 1);
		assert_int_equal(pclose(f), 0);
		assert_int_equal(n, g.n);
		unlink(path);
	}
	free(svg);
	/* A time range: bars only for the spans it keeps. */
	{
		uint64_t from = g.s[10].ts, to = g.s[10].ts + g.s[10].dur, want = 0;
		for (size_t i = 0; i < g.n; i++)
			want += g.s[i].ts + g.s[i].dur >= from && g.s[i].ts <= to;
		svg = render(&r, rp_render_gantt, from, to, &len);
		check_balanced(svg);
		assert_int_equal(count(svg, "<rect class=\"s\""), want);
		free(svg);
	}
	/* The row cap: tracks past it are noted, not drawn. */
	{
		struct rp_export_opts o = { .from = 0, .to = UINT64_MAX, .max_rows = 2 };
		FILE *f = open_memstream(&svg, &len);
		uint64_t drawn = 0;

		assert_int_equal(rp_render_gantt(&r, f, &o), 0);
		fclose(f);
		for (size_t i = 0; i < g.n; i++) /* rows by (pid, tid): (100,1), (100,2) */
			drawn += g.s[i].pid == 100;
		assert_int_equal(count(svg, "<rect class=\"s\""), drawn);
		assert_non_null(strstr(svg, "3 more tracks"));
		free(svg);
	}
	rp_report_free(&r);
	free(g.s);
	free(g.c);
}

/* The steps block: json members and the text table. */
static void test_export_steps_render(void **state)
{
	struct gen g;
	struct rp_report r;
	char *buf = NULL, err[128];
	size_t len;
	FILE *f;
	yajl_val root, phases;

	(void)state;
	generate(&g, 99, 12);
	analyze(&g, &r);
	f = open_memstream(&buf, &len);
	assert_int_equal(rp_render_json(&r, f), 0);
	fclose(f);
	root = yajl_tree_parse(buf, err, sizeof(err));
	if (root == NULL)
		fail_msg("json: %s", err);
	{
		const char *p1[] = { "steps", "phases", NULL };
		const char *p2[] = { "recorder", "recorder_wrapped", NULL };
		phases = yajl_tree_get(root, p1, yajl_t_array);
		assert_non_null(phases);
		assert_int_equal(phases->u.array.len, 2);
		assert_int_equal(YAJL_GET_INTEGER(yajl_tree_get(root, p2, yajl_t_number)), 0);
	}
	uint64_t n = 0;
	for (size_t i = 0; i < phases->u.array.len; i++)
		n += (uint64_t)YAJL_GET_INTEGER(get(phases->u.array.values[i], "count"));
	assert_int_equal(n, (uint64_t)g.steps);
	yajl_tree_free(root);
	free(buf);
	f = open_memstream(&buf, &len);
	assert_int_equal(rp_render_text(&r, f, 10), 0);
	fclose(f);
	assert_non_null(strstr(buf, "steps by phase"));
	assert_non_null(strstr(buf, "\n  train "));
	assert_non_null(strstr(buf, "\n  eval "));
	free(buf);
	rp_report_free(&r);
	free(g.s);
	free(g.c);
}

/* Live-like sources: no labels; the source's pid, threads and async tracks numbered. */
static void test_export_live_tracks(void **state)
{
	struct rp_engine *e;
	struct rp_report r, empty;
	struct parsed p;
	size_t len;
	char *out;
	uint32_t a, req;

	(void)state;
	assert_int_equal(rp_engine_open(NULL, &e), 0);
	assert_int_equal(rp_engine_add_source(e, "/ringprof.s.1234", 1234, 0), 0);
	a = rp_engine_name(e, 0, "work", "cpu", "", 0);
	req = rp_engine_name(e, 0, "request", "req", "", 0);
	const struct rp_event evs[] = {
		{ .ts = 1000, .name = a, .kind = RP_EV_BEGIN },
		{ .ts = 1500, .name = req, .kind = RP_EV_ASYNC_BEGIN, .track = 9, .arg = 1 },
		{ .ts = 2000, .name = a, .kind = RP_EV_END },
		{ .ts = 2500, .name = req, .kind = RP_EV_ASYNC_END, .track = 9, .arg = 1 },
	};
	for (size_t i = 0; i < sizeof(evs) / sizeof(evs[0]); i++)
		rp_engine_event(e, 0, (uint64_t)3 << 32 | 1, &evs[i]);
	assert_int_equal(rp_engine_report(e, &r), 0);
	rp_engine_close(e);
	out = render(&r, rp_render_chrome, 0, UINT64_MAX, &len);
	parse_chrome(out, &p);
	/* The thread's span as an X event, the request as an async slice on the
	 * process's one "requests" row (not a thread row of its own). */
	assert_int_equal(p.n, 1);
	assert_int_equal(p.n_async, 1);
	assert_int_equal(p.open_async, 0);
	assert_string_equal(p.async_first, "request");
	assert_int_equal(p.async_dur, 1000);
	assert_int_equal(p.procs, 1);
	assert_int_equal(p.threads, 2);
	assert_int_equal(p.s[0].pid, 1234);
	assert_non_null(strstr(out, "\"name\":\"requests\""));
	assert_null(strstr(out, "\"name\":\"async 9\""));
	assert_null(strstr(out, "trace_source"));
	assert_non_null(strstr(out, "\"name\":\"pid 1234 (ringprof.s.1234)\""));
	parsed_free(&p);
	free(out);
	rp_report_free(&r);
	/* An empty report (a snapshot without a recorder): valid, empty outputs. */
	memset(&empty, 0, sizeof(empty));
	out = render(&empty, rp_render_chrome, 0, UINT64_MAX, &len);
	parse_chrome(out, &p);
	assert_int_equal(p.n + p.nc + p.procs + p.threads, 0);
	parsed_free(&p);
	free(out);
	out = render(&empty, rp_render_gantt, 0, UINT64_MAX, &len);
	check_balanced(out);
	assert_int_equal(count(out, "<rect class=\"s\""), 0);
	free(out);
}

#define run(out, cmd) rp_test_sh(out, NULL, "%s", cmd)

/* The CLI: formats, --steps errors, and when the progress line shows. */
static void test_export_cli(void **state)
{
	const char *bin = getenv("RP_BIN_DIR");
	char path[] = "/tmp/rp_export_XXXXXX", cmd[1024], *out, *trace;
	struct parsed p;
	struct gen g;
	size_t len;
	int fd;

	(void)state;
	if (bin == NULL)
		skip();
	generate(&g, 31337, 30);
	trace = write_trace(&g, &len);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, trace, len), (ssize_t)len);
	close(fd);
	/* stdout a pipe: the export, and no progress on stderr */
	snprintf(cmd, sizeof(cmd), "%s/ringprof analyze %s --format chrome 2>%s.err", bin, path,
		 path);
	assert_int_equal(run(&out, cmd), 0);
	parse_chrome(out, &p);
	check_spans(&g, &p, 0, UINT64_MAX);
	parsed_free(&p);
	free(out);
	snprintf(cmd, sizeof(cmd), "cat %s.err", path);
	assert_int_equal(run(&out, cmd), 0);
	assert_string_equal(out, "");
	free(out);
	/* forced: one line with bytes and events/s */
	snprintf(cmd, sizeof(cmd), "%s/ringprof analyze %s --progress -o %s.json 2>&1", bin, path,
		 path);
	assert_int_equal(run(&out, cmd), 0);
	assert_non_null(strstr(out, "\ranalyze: "));
	assert_non_null(strstr(out, "M events/s"));
	free(out);
	snprintf(cmd, sizeof(cmd), "%s/ringprof analyze %s --no-progress -o %s.json 2>&1", bin,
		 path, path);
	assert_int_equal(run(&out, cmd), 0);
	assert_string_equal(out, "");
	free(out);
	/* on a terminal (script(1) gives a pty): on with -o, off when stdout is piped */
	if (access("/usr/bin/script", X_OK) == 0) {
		snprintf(cmd, sizeof(cmd),
			 "/usr/bin/script -qec '%s/ringprof analyze %s -o %s.json' /dev/null", bin,
			 path, path);
		assert_int_equal(run(&out, cmd), 0);
		assert_non_null(strstr(out, "events/s"));
		free(out);
		snprintf(cmd, sizeof(cmd),
			 "/usr/bin/script -qec '%s/ringprof analyze %s --format json | wc -c' "
			 "/dev/null",
			 bin, path);
		assert_int_equal(run(&out, cmd), 0);
		assert_null(strstr(out, "events/s"));
		free(out);
	}
	/* step ranges: none recorded, and a backwards range */
	snprintf(cmd, sizeof(cmd), "%s/ringprof analyze %s --format chrome --steps 900:901 2>&1",
		 bin, path);
	assert_int_equal(run(&out, cmd), 1);
	assert_non_null(strstr(out, "no such steps"));
	free(out);
	snprintf(cmd, sizeof(cmd), "%s/ringprof analyze %s --format gantt --steps 2:1 2>&1", bin,
		 path);
	assert_int_equal(run(&out, cmd), 2);
	free(out);
	snprintf(cmd, sizeof(cmd), "%s/ringprof analyze %s --format gantt --steps 1:3", bin, path);
	assert_int_equal(run(&out, cmd), 0);
	assert_non_null(strstr(out, "<svg"));
	free(out);
	snprintf(cmd, sizeof(cmd), "rm -f %s %s.err %s.json", path, path, path);
	assert_int_equal(run(&out, cmd), 0);
	free(out);
	free(trace);
	free(g.s);
	free(g.c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_export_chrome_round_trip),
		cmocka_unit_test(test_export_chrome_time_filter),
		cmocka_unit_test(test_export_step_range),
		cmocka_unit_test(test_export_sources_apart),
		cmocka_unit_test(test_export_gantt),
		cmocka_unit_test(test_export_steps_render),
		cmocka_unit_test(test_export_live_tracks),
		cmocka_unit_test(test_export_cli),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
