// SPDX-License-Identifier: MIT
/*
 * The renderers (tools/render_*.c) against references that do not share their code:
 * - JSON is parsed back with yajl's tree API and every field is compared with the
 *   report; strings with the byte-for-byte result written out here (escapes undone,
 *   ill-formed UTF-8 replaced by U+FFFD per maximal subpart), integers exactly
 *   (yajl's long long when it fits, else the raw digits).
 * - Text is compared with the whole expected report, written out here.
 * - pstats files are loaded by /usr/bin/python3 itself: marshal.load for every
 *   entry and caller tuple (types, ints, float bits), pstats.Stats for its totals
 *   and print_stats(); and an equivalent of the reference file testdata/pstats/
 *   example.prof must load to the same Stats. Skipped without /usr/bin/python3.
 *
 * The reports are built by hand: recursion (primitive calls < calls, a self edge),
 * a function with no file, names with quotes, backslashes, control characters,
 * non-ASCII and ill-formed UTF-8, two functions with the same pstats key (they differ
 * only in category), zero calls, uint64 figures above 2^53 and 2^63, counts above
 * 2^31 and a line above INT32_MAX. Report 1.1 adds duration quantiles, the midpoint
 * concurrency mean (none known, and known) and concurrency distributions: none (a 1.0
 * snapshot), overall and roots only, and two categories, one with a name that needs
 * escaping.
 */
#include "support.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>
#include <yajl/yajl_tree.h>

#include "engine.h"
#include "import_chrome.h"
#include "render.h"
#include "render_priv.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define PYTHON	      "/usr/bin/python3"
#define MS	      1000000ull /* ns */
#define P53	      9007199254740993ull  /* 2^53 + 1: not a double */
#define P63	      9223372036854775808ull /* 2^63: not an int64 */
/* A function's p50..p99 and midpoint sum and count when it has neither. */
#define NO_SKETCH     0, 0, 0, 0, 0, 0

typedef int (*render_fn)(const struct rp_report *r, FILE *out);

/* ---- the reports ------------------------------------------------------------------ */

/* The name of tricky fns 0 and 4: same pstats key, categories differ. */
#define QNAME "q\"b\\s\nt\x01\x7f"
/* ...and the same after a JSON round trip / marshal: unchanged (valid UTF-8). */
#define CAFE  "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"
#define BAD   "bad\xff\xc3(\xe2\x82x\xed\xa0\x80\xf4\x90\x80\x80" "end"
#define FFFD  "\xef\xbf\xbd"
#define BAD_FIXED                                                                          \
	"bad" FFFD FFFD "(" FFFD "x" FFFD FFFD FFFD FFFD FFFD FFFD FFFD "end"
/* Overlong forms, a byte never in UTF-8 and a sequence cut by the end. */
#define BADFILE "db\xfe\xc0\xaf\xe0\x80\xaf\xf0\x8f\xbf\xbf\xf8.py\xe2\x82"
#define BADFILE_FIXED                                                                      \
	"db" FFFD FFFD FFFD FFFD FFFD FFFD FFFD FFFD FFFD FFFD FFFD ".py" FFFD

static struct rp_report_source tricky_sources[] = {
	{ .name = "api \"srv\"\\\n\t", .pid = 4242, .flags = RP_SRC_EXITED, .events = 100,
	  .dropped = 3, .late = 1, .truncated = 2, .names_dropped = 4, .resyncs = 5,
	  .anomalies = { [RP_ANOM_END_MISMATCH] = 1, [RP_ANOM_CLAMPED] = 4 } },
	{ .name = "trace\xff.json", .pid = 0, .flags = RP_SRC_FILE, .events = 20 },
};

/* ..., min, max, p50, p90, p95, p99, midpoint sum, midpoint count. */
static struct rp_report_fn tricky_fns[] = {
	{ QNAME, "LLM", "app.py", 10, 3, 1, 300 * MS, 1000 * MS, 1800 * MS, 200 * MS, 1000 * MS,
	  500 * MS, 900 * MS, 950 * MS, 990 * MS, 7, 2 },
	{ CAFE, "", "", 0, 2, 2, 150 * MS, 150 * MS, 150 * MS + 1, 70 * MS, 80 * MS,
	  0, 0, 0, 0, 0, 0 }, /* no sketch, no midpoint known */
	{ BAD, "TOOL", BADFILE, 7, 1, 1, 50 * MS, 150 * MS, 150 * MS, 150 * MS, 150 * MS,
	  150 * MS, 150 * MS, 150 * MS, 150 * MS, 1, 3 },
	{ "idle", "", "idle.c", 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 },
	{ QNAME, "FUNCTION", "app.py", 10, 2, 2, 100 * MS, 400 * MS, 400 * MS, 150 * MS,
	  250 * MS, 150 * MS, 240 * MS, 245 * MS, 250 * MS, 10, 4 },
	{ "aaa", "", "idle.c", 3, 0, 0, 0, 0, 0, 0, 0, NO_SKETCH }, /* only the name differs */
};

/* A category name that needs escaping: 8 columns once escaped for text. */
#define CATNAME "T\"O\tO\xc3\xa9L"

/* name, observed_ns, mean_milli, p50, p90, p95, p99, max */
static struct rp_report_conc tricky_conc[] = {
	{ "overall", 2500000000u, 1500, 1, 2, 3, 4, 5 },
	{ "roots", 2400000000u, 1000, 1, 1, 1, 1, 1 },
	{ "LLM", 1000000000u, 250, 0, 1, 1, 1, 2 },
	{ CATNAME, 7, 0, 0, 0, 0, 0, 0 },
};

static struct rp_report_edge tricky_edges[] = {
	{ 0, 0, 2, 0, 100 * MS, 0 },		/* recursion */
	{ 1, 0, 1, 1, 200 * MS, 1000 * MS },
	{ 0, 2, 1, 1, 50 * MS, 150 * MS },
	{ 4, 1, 1, 1, 80 * MS, 80 * MS },	/* 4 and 0 share a pstats key */
	{ 0, 1, 1, 1, 70 * MS, 70 * MS },
	{ 1, 4, 2, 2, 100 * MS, 400 * MS },
};

static struct rp_report tricky_report(void)
{
	return (struct rp_report){
		.version_major = 1, .t_first = 1000, .t_last = 2500001000, .clock = "monotonic",
		.caps = { 1, 2, 3, 4, 5, 6, 7, 8, 9, P63 }, .events = 120, .dropped = 3, .late = 1,
		.truncated = 2,
		.anomalies = { [RP_ANOM_END_MISMATCH] = 1, [RP_ANOM_CLAMPED] = 4,
			       [RP_ANOM_OPEN_AT_END] = 7 },
		.sources = tricky_sources, .n_sources = ARRAY_SIZE(tricky_sources),
		.fns = tricky_fns, .n_fns = ARRAY_SIZE(tricky_fns),
		.edges = tricky_edges, .n_edges = ARRAY_SIZE(tricky_edges),
		.conc = tricky_conc, .n_conc = ARRAY_SIZE(tricky_conc),
	};
}

static struct rp_report_source big_sources[] = {
	{ .name = "big", .pid = -1, .flags = RP_SRC_DEAD | RP_SRC_FILE | 0x10,
	  .events = UINT64_MAX, .dropped = P63, .late = INT64_MAX, .truncated = P53,
	  .names_dropped = 0, .resyncs = 1,
	  .anomalies = { UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX,
			 UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX,
			 UINT64_MAX } },
};

static struct rp_report_fn big_fns[] = {
	{ "small", "", "", 0, 2147483648u, 2147483647u, 1, 2, 3, 1, 2, 1, 1, 1, 2,
	  UINT64_MAX, 1 },
	{ "big", "", "big.c", 3000000000u, 5000000000u, 4294967296u, P53, UINT64_MAX,
	  UINT64_MAX, 1, P63, P53, P63, UINT64_MAX - 1, UINT64_MAX, 2, 3 },
};

static struct rp_report_conc big_conc[] = {
	{ "overall", UINT64_MAX, UINT64_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX,
	  UINT32_MAX },
	{ "roots", P63, 999, 0, 0, 0, 0, UINT32_MAX },
};

static struct rp_report_edge big_edges[] = {
	{ 1, 0, UINT64_MAX, 2147483648u, P53, UINT64_MAX },
};

static struct rp_report big_report(void)
{
	return (struct rp_report){
		.version_major = 1, .t_first = P63, .t_last = UINT64_MAX, .clock = "trace",
		.caps = { UINT32_MAX, 0, 1, 2, 3, UINT32_MAX, 4, 5, 6, UINT64_MAX },
		.events = UINT64_MAX, .dropped = P63,
		.late = P53, .truncated = INT64_MAX,
		.anomalies = { [RP_ANOM_BAD_EVENT] = UINT64_MAX },
		.sources = big_sources, .n_sources = ARRAY_SIZE(big_sources),
		.fns = big_fns, .n_fns = ARRAY_SIZE(big_fns),
		.edges = big_edges, .n_edges = ARRAY_SIZE(big_edges),
		.conc = big_conc, .n_conc = ARRAY_SIZE(big_conc),
	};
}

/* ---- helpers ---------------------------------------------------------------------- */

static char *render_mem(render_fn fn, const struct rp_report *r)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	assert_int_equal(fn(r, f), 0);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(strlen(buf), len); /* no NUL inside */
	return buf;
}

static char *text_mem(const struct rp_report *r, unsigned limit)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	assert_int_equal(rp_render_text(r, f, limit), 0);
	assert_int_equal(fclose(f), 0);
	return buf;
}

/* A fresh file name under $TMPDIR (the file exists, empty); the caller frees it. */
static char *tmp_file(const char *suffix)
{
	const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char *path;
	int fd;

	assert_true(asprintf(&path, "%s/test_render_XXXXXX%s", dir, suffix) > 0);
	fd = mkstemps(path, (int)strlen(suffix));
	assert_true(fd >= 0);
	close(fd);
	return path;
}

static char *pstats_file(const struct rp_report *r)
{
	char *path = tmp_file(".prof");
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	assert_int_equal(rp_render_pstats(r, f), 0);
	assert_int_equal(fclose(f), 0);
	return path;
}

/* Runs @script with up to two arguments; its stdout (malloc'ed); fails on exit != 0. */
static char *run_python(const char *script, const char *a1, const char *a2)
{
	char *spath = tmp_file(".py"), *cmd, *buf = NULL;
	size_t len = 0, n;
	char chunk[4096];
	FILE *f = fopen(spath, "w"), *p, *mem = open_memstream(&buf, &len);

	assert_non_null(f);
	assert_non_null(mem);
	fputs(script, f);
	assert_int_equal(fclose(f), 0);
	assert_true(asprintf(&cmd, PYTHON " '%s' '%s' '%s'", spath, a1, a2 ? a2 : "") > 0);
	p = popen(cmd, "r");
	assert_non_null(p);
	while ((n = fread(chunk, 1, sizeof(chunk), p)) > 0)
		fwrite(chunk, 1, n, mem);
	assert_int_equal(pclose(p), 0);
	assert_int_equal(fclose(mem), 0);
	unlink(spath);
	free(spath);
	free(cmd);
	return buf;
}

static void need_python(void)
{
	if (access(PYTHON, X_OK) != 0)
		skip();
}

/* ---- JSON ------------------------------------------------------------------------- */

static const char *const anomaly_keys[] = { "end_mismatch", "end_unmatched", "depth_cap",
					    "track_cap",    "name_cap",	     "cct_cap",
					    "clamped",	    "bad_event",     "open_at_end",
					    "window_cap",   "counter_cap",   "drop_lost",
					    "window_level_cap", "restart_gap",
					    "sketch_evicted",   "window_evicted",
					    "mark_unmatched",   "mark_repeat",
					    "charge_orphan",    "charge_late",
					    "charge_cap" };

static yajl_val json_parse(const char *text)
{
	char err[512];
	yajl_val v = yajl_tree_parse(text, err, sizeof(err));

	if (v == NULL)
		fail_msg("yajl_tree_parse: %s\n%s", err, text);
	return v;
}

/* @o is an object with exactly these keys, in this order. */
static void assert_keys(yajl_val o, const char *const *keys, size_t n)
{
	assert_true(YAJL_IS_OBJECT(o));
	assert_int_equal(o->u.object.len, n);
	for (size_t i = 0; i < n; i++)
		assert_string_equal(o->u.object.keys[i], keys[i]);
}

static yajl_val field(yajl_val o, const char *key)
{
	const char *path[] = { key, NULL };
	yajl_val v = yajl_tree_get(o, path, yajl_t_any);

	if (v == NULL)
		fail_msg("no key \"%s\"", key);
	return v;
}

/* An unsigned JSON integer, exactly: yajl's long long, or the raw digits above it. */
static uint64_t json_u64(yajl_val v)
{
	const char *raw;
	uint64_t x;

	assert_true(YAJL_IS_NUMBER(v));
	raw = YAJL_GET_NUMBER(v);
	assert_true(raw[0] != '\0' && strspn(raw, "0123456789") == strlen(raw));
	if (YAJL_IS_INTEGER(v)) {
		assert_true(YAJL_GET_INTEGER(v) >= 0);
		return (uint64_t)YAJL_GET_INTEGER(v);
	}
	errno = 0;
	x = strtoull(raw, NULL, 10);
	assert_int_equal(errno, 0);
	assert_true(x > INT64_MAX);
	return x;
}

static void assert_u64(yajl_val o, const char *key, uint64_t want)
{
	uint64_t got = json_u64(field(o, key));

	if (got != want)
		fail_msg("\"%s\": %" PRIu64 ", want %" PRIu64, key, got, want);
}

static void assert_jstr(yajl_val v, const char *want)
{
	assert_true(YAJL_IS_STRING(v));
	assert_string_equal(YAJL_GET_STRING(v), want);
}

static void check_anomalies(yajl_val o, const uint64_t want[RP_ANOM_KIND_COUNT])
{
	assert_keys(o, anomaly_keys, ARRAY_SIZE(anomaly_keys));
	for (unsigned k = 0; k < RP_ANOM_KIND_COUNT; k++)
		assert_u64(o, anomaly_keys[k], want[k]);
}

static void check_words(yajl_val a, const char *const *words, size_t n)
{
	assert_true(YAJL_IS_ARRAY(a));
	assert_int_equal(a->u.array.len, n);
	for (size_t i = 0; i < n; i++)
		assert_jstr(a->u.array.values[i], words[i]);
}

static void check_source(yajl_val o, const struct rp_report_source *s, const char *name,
			 const char *const *flags, size_t n_flags)
{
	static const char *const keys[] = { "name",	 "pid",		  "flags",   "events",
					    "dropped",	 "late",	  "truncated",
					    "names_dropped", "nospace_dropped", "rings_nospace", "reentrant",
					    "resyncs", "anomalies", "offcpu_idle_ns", "host", "boot_id",
					    "anchor_realtime_ns", "anchor_monotonic_ns", "clock_shift_ns",
					    "summary_ns", "summary_raised" };

	assert_keys(o, keys, ARRAY_SIZE(keys));
	assert_jstr(field(o, "name"), name);
	assert_true(YAJL_IS_INTEGER(field(o, "pid")));
	assert_int_equal(YAJL_GET_INTEGER(field(o, "pid")), s->pid);
	check_words(field(o, "flags"), flags, n_flags);
	assert_u64(o, "events", s->events);
	assert_u64(o, "dropped", s->dropped);
	assert_u64(o, "late", s->late);
	assert_u64(o, "truncated", s->truncated);
	assert_u64(o, "names_dropped", s->names_dropped);
	assert_u64(o, "nospace_dropped", s->nospace_dropped);
	assert_u64(o, "reentrant", s->reentrant);
	assert_u64(o, "rings_nospace", s->rings_nospace);
	assert_u64(o, "resyncs", s->resyncs);
	check_anomalies(field(o, "anomalies"), s->anomalies);
	assert_u64(o, "offcpu_idle_ns", s->offcpu_idle_ns);
	/* 1.4: unknown host and anchor are null, not "" or 0 */
	if (s->host != NULL && s->host[0] != '\0')
		assert_jstr(field(o, "host"), s->host);
	else
		assert_true(YAJL_IS_NULL(field(o, "host")));
	if (s->anchor_realtime_ns != 0) {
		assert_u64(o, "anchor_realtime_ns", s->anchor_realtime_ns);
		assert_u64(o, "anchor_monotonic_ns", s->anchor_monotonic_ns);
	} else {
		assert_true(YAJL_IS_NULL(field(o, "anchor_realtime_ns")));
	}
	assert_int_equal(YAJL_GET_INTEGER(field(o, "clock_shift_ns")), s->clock_shift_ns);
	assert_u64(o, "summary_ns", s->summary_ns);
	assert_u64(o, "summary_raised", s->summary_raised);
}

/* A JSON number written exactly as @raw (not an integer: a fraction or exponent). */
static void assert_raw_number(yajl_val v, const char *key, const char *raw)
{
	if (!YAJL_IS_NUMBER(v))
		fail_msg("\"%s\": not a number", key);
	if (strcmp(YAJL_GET_NUMBER(v), raw) != 0)
		fail_msg("\"%s\": %s, want %s", key, YAJL_GET_NUMBER(v), raw);
}

/* What a function must look like in JSON; strings as they must come back. */
struct want_fn {
	uint32_t fn; /* index into the report's fns */
	const char *name, *category, *file;
	uint64_t mean_ns;
	const char *midpoint_mean; /* the number as written */
};

static void check_fn(yajl_val o, const struct rp_report_fn *f, const struct want_fn *w)
{
	static const char *const keys[] = { "name",	"category", "file",   "line",
					    "calls",	"drop_lost",  "errors", "started", "milestone",
					    "charged_ns", "charged", "primitive_calls",
					    "self_ns",
					    "cum_ns",	"offcpu_ns", "offcpu_cum_ns",
					    "min_ns",   "max_ns", "mean_ns",
					    "p50_ns",	"p90_ns",   "p95_ns", "p99_ns",
					    "midpoint_concurrency_mean" };
	yajl_val mid;

	assert_keys(o, keys, ARRAY_SIZE(keys));
	assert_jstr(field(o, "name"), w->name);
	assert_jstr(field(o, "category"), w->category);
	assert_jstr(field(o, "file"), w->file);
	assert_u64(o, "line", f->line);
	assert_u64(o, "calls", f->calls);
	assert_u64(o, "drop_lost", f->drop_lost);
	assert_u64(o, "errors", f->errors);
	assert_u64(o, "started", f->started);
	assert_true(f->milestone ? YAJL_IS_TRUE(field(o, "milestone"))
				   : YAJL_IS_FALSE(field(o, "milestone")));
	assert_u64(o, "charged_ns", f->charged_ns); /* 1.6 */
	assert_u64(o, "charged", f->charged);
	assert_u64(o, "primitive_calls", f->primitive_calls);
	assert_u64(o, "self_ns", f->self_ns);
	assert_u64(o, "cum_ns", f->cum_ns);
	assert_u64(o, "offcpu_ns", f->offcpu_ns);
	assert_u64(o, "offcpu_cum_ns", f->offcpu_cum_ns);
	assert_u64(o, "min_ns", f->min_ns);
	assert_u64(o, "max_ns", f->max_ns);
	assert_u64(o, "mean_ns", w->mean_ns);
	if (rp_report_fn_has_quantiles(f)) {
		assert_u64(o, "p50_ns", f->p50_ns);
		assert_u64(o, "p90_ns", f->p90_ns);
		assert_u64(o, "p95_ns", f->p95_ns);
		assert_u64(o, "p99_ns", f->p99_ns);
	} else { /* none: null, never 0 */
		assert_true(YAJL_IS_NULL(field(o, "p50_ns")) && YAJL_IS_NULL(field(o, "p90_ns")) &&
			    YAJL_IS_NULL(field(o, "p95_ns")) && YAJL_IS_NULL(field(o, "p99_ns")));
	}
	mid = field(o, "midpoint_concurrency_mean");
	assert_raw_number(mid, "midpoint_concurrency_mean", w->midpoint_mean);
	if (f->midpoint_count == 0) {
		assert_true(YAJL_IS_INTEGER(mid) && YAJL_GET_INTEGER(mid) == 0);
	} else { /* within the 6 digits written */
		double want = (double)f->midpoint_sum / (double)f->midpoint_count;
		double d = YAJL_GET_DOUBLE(mid) - want;

		assert_true(YAJL_IS_DOUBLE(mid));
		assert_true((d < 0 ? -d : d) <= want * 1e-5);
	}
}

/* A concurrency distribution; @mean as it must be written (3 decimals). */
static void check_dist(yajl_val o, const struct rp_report_conc *c, const char *mean)
{
	static const char *const keys[] = { "p50", "p90",  "p95",	"p99",
					    "max", "mean", "observed_ns", "now" };

	assert_keys(o, keys, ARRAY_SIZE(keys));
	assert_u64(o, "p50", c->p50);
	assert_u64(o, "p90", c->p90);
	assert_u64(o, "p95", c->p95);
	assert_u64(o, "p99", c->p99);
	assert_u64(o, "max", c->max);
	assert_raw_number(field(o, "mean"), "mean", mean);
	assert_u64(o, "observed_ns", c->observed_ns);
}

/* "concurrency": {} without distributions, else overall, roots and by_category with
 * the categories in report order under their names (@cats, as they come back);
 * means[i] is conc[i]'s mean as written. */
static void check_concurrency(yajl_val top, const struct rp_report *r,
			      const char *const *means, const char *const *cats)
{
	static const char *const keys[] = { "overall", "roots", "by_category" };
	yajl_val o = field(top, "concurrency"), by;

	if (r->n_conc == 0) {
		assert_keys(o, keys, 0);
		return;
	}
	assert_true(r->n_conc >= 2);
	assert_keys(o, keys, ARRAY_SIZE(keys));
	check_dist(field(o, "overall"), &r->conc[0], means[0]);
	check_dist(field(o, "roots"), &r->conc[1], means[1]);
	by = field(o, "by_category");
	assert_keys(by, cats, r->n_conc - 2);
	for (uint32_t i = 2; i < r->n_conc; i++)
		check_dist(by->u.object.values[i - 2], &r->conc[i], means[i]);
}

static void check_edge(yajl_val o, const struct rp_report_edge *e, const char *caller,
		       const char *callee)
{
	static const char *const keys[] = { "caller", "callee",	 "calls",
					    "primitive_calls", "self_ns", "cum_ns" };

	assert_keys(o, keys, ARRAY_SIZE(keys));
	assert_jstr(field(o, "caller"), caller);
	assert_jstr(field(o, "callee"), callee);
	assert_u64(o, "calls", e->calls);
	assert_u64(o, "primitive_calls", e->primitive_calls);
	assert_u64(o, "self_ns", e->self_ns);
	assert_u64(o, "cum_ns", e->cum_ns);
}

/* async_expiry: the counts, and the bound (the most suspect spans open at a sweep or
 * now, each for the longer of the stale time and the expiry; null with suspects and
 * no expiry). */
static void check_expiry(yajl_val o, const struct rp_report_expiry *x)
{
	static const char *const keys[] = { "expire_ns",	"requests",
					    "spans",		"stale_max_ns",
					    "suspect_requests", "suspect_spans",
					    "peak_spans",	"overstated_max",
					    "overstated_ns" };
	uint64_t n = x->peak_spans > x->suspect_spans ? x->peak_spans : x->suspect_spans;
	uint64_t ns = x->stale_max_ns > x->expire_ns ? x->stale_max_ns : x->expire_ns;

	assert_keys(o, keys, ARRAY_SIZE(keys));
	assert_u64(o, "expire_ns", x->expire_ns);
	assert_u64(o, "requests", x->requests);
	assert_u64(o, "spans", x->spans);
	assert_u64(o, "stale_max_ns", x->stale_max_ns);
	assert_u64(o, "suspect_requests", x->suspect_requests);
	assert_u64(o, "suspect_spans", x->suspect_spans);
	assert_u64(o, "peak_spans", x->peak_spans);
	assert_u64(o, "overstated_max", n);
	if (x->suspect_spans > 0 && x->expire_ns == 0)
		assert_true(YAJL_IS_NULL(field(o, "overstated_ns")));
	else
		assert_u64(o, "overstated_ns", n ? ns : 0);
}

static void check_offcpu(yajl_val o, const struct rp_report_offcpu *x)
{
	static const char *const keys[] = { "state",	"threads",  "watched",
					    "refused",	"lost",	    "unpaired", "overflow", "overflow_ns",
					    "late",	"intervals", "total_ns" };
	static const char *const states[] = { "unknown", "on", "refused" };

	assert_keys(o, keys, ARRAY_SIZE(keys));
	assert_jstr(field(o, "state"), x->state < 3 ? states[x->state] : "unknown");
	assert_u64(o, "threads", x->threads);
	assert_u64(o, "watched", x->watched);
	assert_u64(o, "refused", x->refused);
	assert_u64(o, "lost", x->lost);
	assert_u64(o, "unpaired", x->unpaired);
	assert_u64(o, "overflow", x->overflow);
	assert_u64(o, "overflow_ns", x->overflow_ns);
	assert_u64(o, "late", x->late);
	assert_u64(o, "intervals", x->intervals);
	assert_u64(o, "total_ns", x->total_ns);
}

/* Everything but sources, functions and edges, which the callers check. */
static yajl_val check_top(const struct rp_report *r, const char *text, const char *clock)
{
	static const char *const keys[] = { "events",	     "dropped", "late",	 "truncated",
					    "anomalies",     "async_expiry",	"offcpu",
					    "time_range_ns", "clock",	"writer",
					    "unmerged_records",
					    "caps",	     "concurrency",	"steps",
					    "recorder",	     "sources",		"functions",
					    "edges",	     "categories",	"counters",
					    "windows",	     "bottlenecks" };
	static const char *const cap_keys[] = { "max_names",	    "max_tracks",
						"max_depth",	    "max_cct_nodes",
						"max_sources",	    "max_sketch_names",
						"max_window_names", "max_counters",
						"topk",		    "memory_bound",
						"subwindows",	    "max_window_level" };
	yajl_val o = json_parse(text), range, caps;

	assert_keys(o, keys, ARRAY_SIZE(keys));
	assert_u64(o, "events", r->events);
	assert_u64(o, "dropped", r->dropped);
	assert_u64(o, "late", r->late);
	assert_u64(o, "truncated", r->truncated);
	check_anomalies(field(o, "anomalies"), r->anomalies);
	check_expiry(field(o, "async_expiry"), &r->expiry);
	check_offcpu(field(o, "offcpu"), &r->offcpu);
	range = field(o, "time_range_ns");
	assert_true(YAJL_IS_ARRAY(range) && range->u.array.len == 2);
	assert_true(json_u64(range->u.array.values[0]) == r->t_first);
	assert_true(json_u64(range->u.array.values[1]) == r->t_last);
	assert_jstr(field(o, "clock"), clock);
	if (r->writer != NULL && r->writer[0] != '\0')
		assert_jstr(field(o, "writer"), r->writer);
	else
		assert_true(YAJL_IS_NULL(field(o, "writer")));
	assert_u64(o, "unmerged_records", r->unmerged_records);
	caps = field(o, "caps");
	assert_keys(caps, cap_keys, ARRAY_SIZE(cap_keys));
	assert_u64(caps, "max_names", r->caps.max_names);
	assert_u64(caps, "max_tracks", r->caps.max_tracks);
	assert_u64(caps, "max_depth", r->caps.max_depth);
	assert_u64(caps, "max_cct_nodes", r->caps.max_cct_nodes);
	assert_u64(caps, "max_sources", r->caps.max_sources);
	assert_u64(caps, "max_sketch_names", r->caps.max_sketch_names);
	assert_u64(caps, "max_window_names", r->caps.max_window_names);
	assert_u64(caps, "max_counters", r->caps.max_counters);
	assert_u64(caps, "topk", r->caps.topk);
	assert_u64(caps, "memory_bound", r->caps.memory_bound);
	assert_u64(caps, "subwindows", r->caps.subwindows);
	assert_u64(caps, "max_window_level", r->caps.max_window_level);
	return o;
}

static yajl_val array_of(yajl_val o, const char *key, size_t n)
{
	yajl_val a = field(o, key);

	assert_true(YAJL_IS_ARRAY(a));
	assert_int_equal(a->u.array.len, n);
	return a;
}

static void check_no_analyses(yajl_val o, const struct rp_report *r, const char *text);

/* Names of tricky fns as they must come back (index = fn). */
static const char *const tricky_names[] = { QNAME, CAFE, BAD_FIXED, "idle", QNAME, "aaa" };

static void test_render_json_tricky_round_trips(void **state)
{
	/* cum desc, self desc, name: 0 (1000 ms), 4 (400), 1 and 2 tie on cum 150 and
	 * self decides, 5 and 3 tie on everything but the name. */
	static const struct want_fn want[] = {
		{ 0, QNAME, "LLM", "app.py", 600 * MS, "3.5" },
		{ 4, QNAME, "FUNCTION", "app.py", 200 * MS, "2.5" },
		{ 1, CAFE, "", "", 75 * MS, "0" }, /* 150 ms + 1 ns over 2, rounded down */
		{ 2, BAD_FIXED, "TOOL", BADFILE_FIXED, 150 * MS, "0.333333" },
		{ 5, "aaa", "", "idle.c", 0, "0" },
		{ 3, "idle", "", "idle.c", 0, "0" },
	};
	static const char *const means[] = { "1.500", "1.000", "0.250", "0.000" };
	static const char *const cats[] = { "LLM", CATNAME };
	static const char *const exited[] = { "exited" }, *const file[] = { "file" };
	struct rp_report r = tricky_report();
	char *text;
	yajl_val o, a;

	(void)state;
	r.unmerged_records = 123457; /* a live snapshot's backlog (1.5) */
	text = render_mem(rp_render_json, &r);
	o = check_top(&r, text, "monotonic");
	a = array_of(o, "sources", 2);
	check_source(a->u.array.values[0], &r.sources[0], "api \"srv\"\\\n\t", exited, 1);
	check_source(a->u.array.values[1], &r.sources[1], "trace" FFFD ".json", file, 1);
	check_concurrency(o, &r, means, cats);
	a = array_of(o, "functions", ARRAY_SIZE(want));
	for (size_t i = 0; i < ARRAY_SIZE(want); i++)
		check_fn(a->u.array.values[i], &r.fns[want[i].fn], &want[i]);
	a = array_of(o, "edges", r.n_edges);
	for (uint32_t i = 0; i < r.n_edges; i++)
		check_edge(a->u.array.values[i], &r.edges[i], tricky_names[r.edges[i].caller],
			   tricky_names[r.edges[i].callee]);
	/* The escapes themselves: \u00XX for controls and DEL, \" and \\, raw U+FFFD. */
	assert_non_null(strstr(text, "\"name\":\"q\\\"b\\\\s\\u000at\\u0001\\u007f\""));
	assert_non_null(strstr(text, "\"file\":\"" BADFILE_FIXED "\""));
	/* The layout of the distributions, and the escaped category name. */
	assert_non_null(strstr(
		text, ",\n  \"concurrency\":{\n"
		      "    \"overall\":{\"p50\":1,\"p90\":2,\"p95\":3,\"p99\":4,\"max\":5,"
		      "\"mean\":1.500,\"observed_ns\":2500000000,\"now\":0},\n"
		      "    \"roots\":{\"p50\":1,\"p90\":1,\"p95\":1,\"p99\":1,\"max\":1,"
		      "\"mean\":1.000,\"observed_ns\":2400000000,\"now\":0},\n"
		      "    \"by_category\":{\n"
		      "      \"LLM\":{\"p50\":0,\"p90\":1,\"p95\":1,\"p99\":1,\"max\":2,"
		      "\"mean\":0.250,\"observed_ns\":1000000000,\"now\":0},\n"
		      "      \"T\\\"O\\u0009O\xc3\xa9L\":{\"p50\":0,\"p90\":0,\"p95\":0,"
		      "\"p99\":0,\"max\":0,\"mean\":0.000,\"observed_ns\":7,\"now\":0}\n"
		      "    }\n  },\n  \"steps\":")); /* export: steps follow */
	assert_non_null(strstr(text, "\"mean_ns\":600000000,\"p50_ns\":500000000,"
				     "\"p90_ns\":900000000,\"p95_ns\":950000000,"
				     "\"p99_ns\":990000000,\"midpoint_concurrency_mean\":3.5}"));
	/* aaa has no sketch: its quantiles are null, never 0. */
	assert_non_null(strstr(text, "\"name\":\"aaa\""));
	assert_non_null(strstr(strstr(text, "\"name\":\"aaa\""),
			       "\"p50_ns\":null,\"p90_ns\":null,\"p95_ns\":null,\"p99_ns\":null"));
	check_no_analyses(o, &r, text);
	yajl_tree_free(o);
	free(text);
}

static void test_render_json_big_values_exact(void **state)
{
	static const struct want_fn want[] = {
		{ 1, "big", "", "big.c", 3689348814u, "0.666667" }, /* (2^64 - 1) / 5e9 */
		{ 0, "small", "", "", 0, "1.84467e+19" },	      /* 3 / 2^31 */
	};
	static const char *const means[] = { "18446744073709551.615", "0.999" };
	static const char *const flags[] = { "dead", "file", "0x10" };
	struct rp_report r = big_report();
	char *text;
	yajl_val o, a;

	r.fns[0].drop_lost = UINT64_MAX;
	r.expiry = (struct rp_report_expiry){ .expire_ns = 1000000000, .requests = 7,
					      .spans = 9, .stale_max_ns = UINT64_MAX - 1,
					      .suspect_requests = 2, .suspect_spans = 3,
					      .peak_spans = 12 };
	text = render_mem(rp_render_json, &r);
	o = check_top(&r, text, "trace");

	(void)state;
	a = array_of(o, "sources", 1);
	check_source(a->u.array.values[0], &r.sources[0], "big", flags, 3);
	check_concurrency(o, &r, means, NULL);
	a = array_of(o, "functions", 2);
	for (size_t i = 0; i < ARRAY_SIZE(want); i++)
		check_fn(a->u.array.values[i], &r.fns[want[i].fn], &want[i]);
	a = array_of(o, "edges", 1);
	check_edge(a->u.array.values[0], &r.edges[0], "big", "small");
	assert_non_null(strstr(text, "\"cum_ns\":18446744073709551615,"));
	assert_non_null(strstr(text, "\"self_ns\":9007199254740993,"));
	assert_non_null(strstr(text, "\"pid\":-1,"));
	assert_non_null(strstr(text, "\"drop_lost\":18446744073709551615,"));
	assert_non_null(
		strstr(text, "\"overstated_max\":12,\"overstated_ns\":18446744073709551614}"));
	assert_non_null(strstr(text, "\"p95_ns\":18446744073709551614,"
				     "\"p99_ns\":18446744073709551615,"));
	assert_non_null(strstr(text, "\"by_category\":{}\n  },\n"));
	assert_non_null(strstr(text, "\"max\":4294967295,\"mean\":18446744073709551.615,"
				     "\"observed_ns\":18446744073709551615,\"now\":0}"));
	check_no_analyses(o, &r, text);
	r.fns[0].drop_lost = 0; /* big_fns is shared */
	yajl_tree_free(o);
	free(text);
}

/* The off-CPU column shows only where it was measured; a refusal is said in a line. */
static void test_render_text_offcpu_column(void **state)
{
	struct rp_report r = big_report();
	struct rp_report_source src = { .name = "p", .offcpu_idle_ns = 3000000 };
	char *text;

	(void)state;
	text = text_mem(&r, 0);
	assert_null(strstr(text, "off-cpu"));
	free(text);
	r.offcpu = (struct rp_report_offcpu){ .state = RP_OFFCPU_REFUSED };
	text = text_mem(&r, 0);
	assert_null(strstr(text, "off-cpu ms"));
	assert_non_null(strstr(text, "off-cpu: not measured, the kernel refused"));
	free(text);
	r.offcpu = (struct rp_report_offcpu){ .state = RP_OFFCPU_ON, .watched = 2,
					      .total_ns = 5000000 };
	r.sources = &src;
	r.n_sources = 1;
	r.fns[1].offcpu_ns = 1500000;
	text = text_mem(&r, 0);
	assert_non_null(strstr(text, "  self%   off-cpu ms       cum ms"));
	assert_non_null(strstr(text, "        1.500 "));
	assert_non_null(strstr(text, "off-cpu ms: the part of self ms its thread was switched "
				     "out (context switches); 5.000 ms in all, 3.000 ms of it with "
				     "no span open; 2 threads watched\n"));
	free(text);
	r.fns[1].offcpu_ns = 0; /* big_fns is shared */
}

/* A row with spans cut by drops says so, and the header gives the expiry's bound. */
static void test_render_text_drops_marked(void **state)
{
	struct rp_report r = big_report();
	char *text;

	(void)state;
	text = text_mem(&r, 0);
	assert_null(strstr(text, "cut by drops"));
	assert_null(strstr(text, "async expiry"));
	free(text);
	r.fns[0].drop_lost = 42;
	r.expiry = (struct rp_report_expiry){ .expire_ns = 1000000000, .requests = 7,
					      .spans = 9, .stale_max_ns = 1000500000,
					      .suspect_requests = 2, .suspect_spans = 3,
					      .peak_spans = 12 };
	text = text_mem(&r, 0);
	assert_non_null(strstr(text, " small  (+42 cut by drops)\n"));
	assert_non_null(strstr(text, "(+N cut by drops): N more calls of that name"));
	assert_non_null(strstr(text, "\nasync expiry 1000.000 ms: 7 requests (9 spans) expired "
				     "after drops, 2 open across a drop\n  concurrency may be "
				     "overstated by at most 12 spans at a time, each for at most "
				     "1000.500 ms\n"));
	free(text);
	r.expiry = (struct rp_report_expiry){ .suspect_requests = 2, .suspect_spans = 3 };
	text = text_mem(&r, 0);
	assert_non_null(strstr(text, "\nasync expiry off: 2 requests open across a drop\n"
				     "  concurrency may be overstated by at most 3 spans, for as "
				     "long as they stay open\n"));
	free(text);
	r.fns[0].drop_lost = 0; /* big_fns is shared */
}

static void test_render_json_empty_report(void **state)
{
	struct rp_report r = { .clock = NULL };
	char *text = render_mem(rp_render_json, &r);
	yajl_val o = check_top(&r, text, "");

	(void)state;
	check_concurrency(o, &r, NULL, NULL);
	assert_non_null(strstr(text, ",\n  \"concurrency\":{},\n  \"steps\":"));
	array_of(o, "sources", 0);
	array_of(o, "functions", 0);
	array_of(o, "edges", 0);
	check_no_analyses(o, &r, text);
	yajl_tree_free(o);
	free(text);
}

/* An edge naming no function is refused before anything is written, by both formats
 * that follow edges. */
static void test_render_bad_edge_refused(void **state)
{
	struct rp_report_edge bad = { 0, 6, 1, 1, 1, 1 };
	struct rp_report r = tricky_report();
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	(void)state;
	r.edges = &bad;
	r.n_edges = 1;
	assert_int_equal(rp_render_json(&r, f), -EINVAL);
	assert_int_equal(rp_render_pstats(&r, f), -EINVAL);
	bad = (struct rp_report_edge){ 6, 0, 1, 1, 1, 1 };
	assert_int_equal(rp_render_pstats(&r, f), -EINVAL);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(len, 0);
	free(buf);
}

/* ---- text ------------------------------------------------------------------------- */

static struct rp_report_source text_sources[] = {
	{ .name = "demo", .pid = 4242, .flags = RP_SRC_EXITED, .events = 120, .dropped = 3,
	  .late = 1, .truncated = 2 },
};

/* sleep has calls but no sketch: its p50 and p99 show "-". */
static struct rp_report_fn text_fns[] = {
	{ "query", "", "db.py", 42, 6, 5, 500 * MS, 700 * MS, 800 * MS, 50 * MS, 200 * MS,
	  110000123, 150 * MS, 180 * MS, 199999999, 12, 6 },
	{ "handle_request", "FUNCTION", "app.py", 10, 3, 3, 200 * MS, 990 * MS, 990 * MS,
	  300 * MS, 360 * MS, 330 * MS, 350 * MS, 355 * MS, 359999500, 3, 3 },
	{ "sleep", "TOOL", "", 0, 4, 4, 90000123, 90000123, 90000123, 1500, 60 * MS, NO_SKETCH },
	{ "idle", "", "", 0, 0, 0, 0, 0, 0, 0, 0, NO_SKETCH },
};

static struct rp_report_conc text_conc[] = {
	{ "overall", 2500000000u, 1750, 2, 3, 3, 4, 6 },
	{ "roots", 2500000000u, 1000, 1, 1, 1, 1, 2 },
	{ "FUNCTION", 990000000u, 1000, 1, 1, 1, 1, 1 },
	{ "TOOL", 90000123u, 125, 0, 0, 1, 1, 1 },
};

static struct rp_report text_report(void)
{
	return (struct rp_report){
		.t_first = 1000, .t_last = 2500001000, .clock = "monotonic", .events = 120,
		.dropped = 3, .late = 1, .truncated = 2,
		.anomalies = { [RP_ANOM_END_MISMATCH] = 1, [RP_ANOM_CLAMPED] = 4 },
		.sources = text_sources, .n_sources = 1, .fns = text_fns, .n_fns = 4,
		.conc = text_conc, .n_conc = 4,
	};
}

#define TEXT_HEAD                                                                          \
	"ringprof report, clock monotonic\n"                                               \
	"time range 2500.000 ms from the first event (at 1000 ns on that clock)\n"                                 \
	"sources 1\n"                                                                      \
	"  demo  pid 4242  exited  events 120  dropped 3  late 1  truncated 2"             \
	"  names_dropped 0  resyncs 0\n"                                                   \
	"    dropped 3: full rings; raise RINGPROF_RING_EVENTS or exclude the busiest names\n" \
	"events 120  dropped 3  late 1  truncated 2\n"
/* Names padded to the longest, "FUNCTION". */
#define TEXT_CONC                                                                          \
	"concurrency overall   p50 2  p90 3  p95 3  p99 4  max 6  mean 1.750\n"          \
	"concurrency roots     p50 1  p90 1  p95 1  p99 1  max 2  mean 1.000\n"          \
	"concurrency FUNCTION  p50 1  p90 1  p95 1  p99 1  max 1  mean 1.000\n"          \
	"concurrency TOOL      p50 0  p90 0  p95 1  p99 1  max 1  mean 0.125\n"
#define TEXT_COLS                                                                          \
	"          calls      self ms  self%       cum ms  cum/call us       min us"      \
	"       max us       p50 us       p99 us  name [category] file:line\n"
/* self% of 790000123 ns; cum/call per primitive call: 990/3, 700/5, 90000123/4 ns
 * = 22500030.75, rounded to 22500.031 us; sleep's self 90.000123 ms shows 90.000. */
#define TEXT_ROW0                                                                          \
	"              3      200.000   25.3      990.000   330000.000   300000.000"      \
	"   360000.000   330000.000   359999.500  handle_request [FUNCTION] app.py:10\n"
#define TEXT_ROW1                                                                          \
	"            6/5      500.000   63.3      700.000   140000.000    50000.000"      \
	"   200000.000   110000.123   199999.999  query db.py:42\n"
#define TEXT_ROW2                                                                          \
	"              4       90.000   11.4       90.000    22500.031        1.500"      \
	"    60000.000            -            -  sleep [TOOL]\n"
#define TEXT_ROW3                                                                          \
	"              0        0.000    0.0        0.000            -            -"      \
	"            -            -            -  idle\n"

static void test_render_text_exact(void **state)
{
	struct rp_report r = text_report();
	char *text = text_mem(&r, 0);

	(void)state;
	assert_string_equal(text, TEXT_HEAD "anomalies  end_mismatch 1  clamped 4\n" TEXT_CONC
					    "\nfunctions 4 of 4, by cum time, then self time\n"
					    TEXT_COLS TEXT_ROW0 TEXT_ROW1 TEXT_ROW2 TEXT_ROW3);
	free(text);
}

/* Requests in flight (request spans only): a line in text, "requests" in JSON's
 * concurrency, when the report has the figure; nothing when it does not. */
static void test_render_requests_in_flight(void **state)
{
	struct rp_report r = text_report();
	char *text, *json;

	(void)state;
	json = render_mem(rp_render_json, &r);
	text = text_mem(&r, 0);
	assert_null(strstr(json, "\"requests\":{"));
	assert_null(strstr(text, "requests in flight"));
	free(json);
	free(text);
	r.requests = (struct rp_report_conc){ .name = "requests", .observed_ns = 9000,
					      .mean_milli = 2250, .p50 = 2, .p90 = 3, .p95 = 4,
					      .p99 = 5, .max = 6, .now = 1 };
	json = render_mem(rp_render_json, &r);
	text = text_mem(&r, 0);
	assert_non_null(strstr(json, ",\n    \"requests\":{\"p50\":2,\"p90\":3,\"p95\":4,"
				     "\"p99\":5,\"max\":6,\"mean\":2.250,\"observed_ns\":9000,"
				     "\"now\":1},\n    \"by_category\":"));
	assert_non_null(strstr(text, TEXT_CONC "requests in flight  now 1  p50 2  p90 3  p95 4"
					       "  p99 5  max 6  mean 2.250\n"));
	free(json);
	free(text);
}

static void test_render_text_limit_cuts_rows(void **state)
{
	struct rp_report r = text_report();
	char *two = text_mem(&r, 2), *all = text_mem(&r, 4), *more = text_mem(&r, 100);
	const char *want_all = TEXT_HEAD "anomalies  end_mismatch 1  clamped 4\n" TEXT_CONC
					 "\nfunctions 4 of 4, by cum time, then self time\n"
					 TEXT_COLS TEXT_ROW0 TEXT_ROW1 TEXT_ROW2 TEXT_ROW3;

	(void)state;
	assert_string_equal(two, TEXT_HEAD "anomalies  end_mismatch 1  clamped 4\n" TEXT_CONC
					   "\nfunctions 2 of 4, by cum time, then self time\n"
					   TEXT_COLS TEXT_ROW0 TEXT_ROW1);
	assert_string_equal(all, want_all);
	assert_string_equal(more, want_all);
	free(two);
	/* Overall and roots only: padded to "overall". */
	r.n_conc = 2;
	two = text_mem(&r, 2);
	assert_string_equal(two, TEXT_HEAD "anomalies  end_mismatch 1  clamped 4\n"
					   "concurrency overall  p50 2  p90 3  p95 3  p99 4"
					   "  max 6  mean 1.750\n"
					   "concurrency roots    p50 1  p90 1  p95 1  p99 1"
					   "  max 2  mean 1.000\n"
					   "\nfunctions 2 of 4, by cum time, then self time\n"
					   TEXT_COLS TEXT_ROW0 TEXT_ROW1);
	free(two);
	free(all);
	free(more);
}

/* Every cap hit names its knob: engine caps their `ringprof run` option and value,
 * the producer's name table both variables with their values and use. */
static void test_render_text_caps_name_knobs(void **state)
{
	struct rp_report_source src = { .name = "demo", .pid = 7, .events = 5,
					.names_dropped = 9, .names_used = 100, .name_capacity = 100,
					.name_bytes_used = 700, .name_bytes = 4096,
					.dropped = 6, .nospace_dropped = 2, .ring_capacity = 1024 };
	struct rp_report r = {
		.version_major = 1, .t_first = 5, .t_last = 5, .clock = "trace", .events = 5,
		.caps = { .max_names = 11, .max_depth = 12, .max_cct_nodes = 13,
			  .max_window_names = 14, .max_counters = 15, .max_window_level = 16 },
		.anomalies = { [RP_ANOM_DEPTH_CAP] = 1, [RP_ANOM_TRACK_CAP] = 2,
			       [RP_ANOM_NAME_CAP] = 3, [RP_ANOM_CCT_CAP] = 4,
			       [RP_ANOM_WINDOW_CAP] = 5, [RP_ANOM_COUNTER_CAP] = 6,
			       [RP_ANOM_LEVEL_CAP] = 7 },
		.sources = &src, .n_sources = 1 };
	char *text = text_mem(&r, 0);

	(void)state;
	assert_non_null(strstr(text, "\n    dropped 4: full rings; raise RINGPROF_RING_EVENTS "
				     "(now 1024) or exclude the busiest names\n"
				     "    names_dropped 9: recorded as [overflow]; raise "
				     "RINGPROF_NAME_BYTES (now 4096, 700 used) or RINGPROF_NAMES "
				     "(now 100, 100 used)\n"));
	assert_non_null(strstr(text, "\n  depth_cap 1: raise ringprof run --max-depth (now 12)\n"
				     "  track_cap 2: raise ringprof run --max-tracks\n"
				     "  name_cap 3: raise ringprof run --max-names (now 11)\n"
				     "  cct_cap 4: raise ringprof run --max-cct-nodes (now 13)\n"
				     "  window_cap 5: raise ringprof run --max-window-names (now 14)\n"
				     "  counter_cap 6: raise ringprof run --max-counters (now 15)\n"
				     "  window_level_cap 7: raise ringprof run --max-window-level "
				     "(now 16)\n"));
	free(text);
	/* summaries at the source: the threshold in force, and raised with its knobs */
	src.summary_ns = 10000;
	text = text_mem(&r, 0);
	assert_non_null(strstr(text, "\n    summaries: calls under 10000 ns folded at the source "
				     "(RINGPROF_SUMMARY_NS)\n"));
	free(text);
	src.summary_ns = 40000;
	src.summary_raised = 3;
	text = text_mem(&r, 0);
	assert_non_null(strstr(text, "\n    summaries: threshold raised 3 times, now up to 40000 ns "
				     "(rings more than half full; RINGPROF_SUMMARY_NS, "
				     "RINGPROF_RING_EVENTS)\n"));
	free(text);
}

static void test_render_text_nothing_lost(void **state)
{
	struct rp_report_source src = { .name = "demo", .pid = 7, .events = 5 };
	struct rp_report r = { .t_first = 5, .t_last = 5, .clock = "trace", .events = 5,
			       .sources = &src, .n_sources = 1 };
	char *text = text_mem(&r, 0);

	(void)state;
	assert_string_equal(text, "ringprof report, clock trace\n"
				  "time range 0.000 ms from the first event (at 5 ns on that clock)\n"
				  "sources 1\n"
				  "  demo  pid 7  live  events 5  dropped 0  late 0  truncated 0"
				  "  names_dropped 0  resyncs 0\n"
				  "events 5  dropped 0  late 0  truncated 0\n"
				  "nothing lost\n"
				  "\nfunctions 0 of 0, by cum time, then self time\n" TEXT_COLS);
	free(text);
}

/* A snapshot taken with a backlog says, in one line after the totals, how many records
 * it does not hold yet (they are not lost: "nothing lost" still follows). */
static void test_render_text_unmerged_said(void **state)
{
	struct rp_report_source src = { .name = "demo", .pid = 7, .events = 5 };
	struct rp_report r = { .t_first = 5, .t_last = 5, .clock = "monotonic", .events = 5,
			       .sources = &src, .n_sources = 1, .unmerged_records = 123457 };
	char *text = text_mem(&r, 0);

	(void)state;
	assert_non_null(strstr(text, "events 5  dropped 0  late 0  truncated 0\n"
				     "not yet merged 123457 records (the engine's backlog when "
				     "this snapshot was taken)\n"
				     "nothing lost\n"));
	free(text);
}

/* Control characters are escaped and bad UTF-8 repaired: one line per row. */
static void test_render_text_names_stay_on_one_line(void **state)
{
	struct rp_report r = tricky_report();
	char *text = text_mem(&r, 0);
	size_t lines = 0;

	(void)state;
	for (const char *p = text; *p; p++)
		lines += *p == '\n';
	/* 3 + 2 sources (the first's drops and names_dropped with their knobs) + totals,
	 * anomalies, blank, 2; one per distribution */
	assert_int_equal(lines, 12 + r.n_conc + r.n_fns);
	assert_non_null(strstr(text, "\n    names_dropped 4: recorded as [overflow]; raise "
				     "RINGPROF_NAME_BYTES or RINGPROF_NAMES\n"));
	assert_non_null(strstr(text, "  q\"b\\s\\nt\\x01\\x7f [LLM] app.py:10\n"));
	assert_non_null(strstr(text, "  q\"b\\s\\nt\\x01\\x7f [FUNCTION] app.py:10\n"));
	assert_non_null(strstr(text, "  " BAD_FIXED " [TOOL] " BADFILE_FIXED ":7\n"));
	assert_non_null(strstr(text, "  " CAFE "\n"));
	assert_non_null(strstr(text, "\n  api \"srv\"\\\\n\\t  pid 4242  exited  events 100"));
	assert_non_null(strstr(text, "\n  trace" FFFD ".json  pid 0  file  events 20"));
	assert_non_null(strstr(text, "\nanomalies  end_mismatch 1  clamped 4  open_at_end 7\n"
				     "concurrency overall   p50 1  p90 2  p95 3  p99 4  max 5"
				     "  mean 1.500\n"
				     "concurrency roots     p50 1"));
	/* The category escaped, 8 columns: é counts one. */
	assert_non_null(strstr(text, "\nconcurrency T\"O\\tO\xc3\xa9L  p50 0  p90 0  p95 0"
				     "  p99 0  max 0  mean 0.000\n\n"));
	/* No sketch: "-"; the name's p50 and p99 otherwise. */
	assert_non_null(strstr(text, "  1000000.000   500000.000   990000.000  q\"b"));
	assert_non_null(strstr(text, "    80000.000            -            -  " CAFE "\n"));
	free(text);
}

/* ---- report 1.2: bottlenecks, windows, categories, counters ----------------------- */

#define NO_FN	    99 /* an fn index out of range: rendered "?" */
#define ASYNC_TRACK 0x8000000000000001ull
#define W1M	    "1\"m\n"	    /* a window name that needs escaping */
#define CAT3	    "F\"N\t"	    /* a category name that needs escaping */
#define CNT0	    "queue\"depth" /* a counter name that needs escaping */

/* fn, value, error; every error within its list's bound (5 ms, 0, 2). */
static struct rp_report_top all_cum[] = { { 1, 990 * MS, 0 }, { 0, 700 * MS, 5 * MS },
					   { NO_FN, 3 * MS, 3 * MS } };
static struct rp_report_top all_self[] = { { 0, 500 * MS, 0 }, { 1, 200 * MS, 0 } };
static struct rp_report_top all_count[] = { { 0, 6, 0 }, { 2, 4, 2 } };

/* fn, source, track, span_id, start, dur, self, subtree, concurrency, known. The
 * second names no source, starts 500 ns before t_first and its concurrency is not
 * known. */
static struct rp_report_span all_slow[] = {
	{ 1, 0, 7, 0, 1000 + 100 * MS, 400 * MS, 100 * MS, 400 * MS, 3, 1 },
	{ 0, 5, ASYNC_TRACK, P63, 500, 300 * MS, 250 * MS, 350 * MS, 0, 0 },
};

/* fn, calls, self, cum, p50, p90, p95, p99: sleep without a sketch. */
static struct rp_report_wfn w10_fns[] = {
	{ 2, 4, 90000123, 90000123, 0, 0, 0, 0 },
	{ 0, 6, 500 * MS, 700 * MS, 110000123, 150 * MS, 180 * MS, 199999999 },
	{ 1, 3, 200 * MS, 990 * MS, 330 * MS, 350 * MS, 355 * MS, 359999500 },
};
static struct rp_report_conc w10_conc[] = {
	{ "overall", 2400000000u, 1500, 1, 2, 3, 4, 5 },
	{ "roots", 2400000000u, 1000, 1, 1, 1, 1, 2 },
};
static struct rp_report_top w10_cum[] = { { 1, 990 * MS, 0 } };
static struct rp_report_top w10_count[] = { { 0, 6, 1 } };
static struct rp_report_wfn w1m_fns[] = { { NO_FN, 7, 1, 2, 3, 4, 5, 6 } };

/* 10s covers 2.4 s (rates 1.25, 2.5 and 1.6667 per s); 1m covers nothing (rate 0),
 * has no distributions and no bottlenecks. */
static struct rp_report_window full_windows[] = {
	{ .name = "10s", .length_ns = 10000000000u, .subwindows = 10, .t_from = 1000,
	  .t_to = 2400001000u, .fns = w10_fns, .n_fns = 3, .conc = w10_conc, .n_conc = 2,
	  .top = { .by_cum = w10_cum, .n_by_cum = 1, .by_count = w10_count, .n_by_count = 1,
		   .bound_count = 1, .slowest = all_slow, .n_slowest = 1 } },
	{ .name = W1M, .length_ns = 60000000000u, .subwindows = 6, .t_from = 5, .t_to = 5,
	  .fns = w1m_fns, .n_fns = 1 },
};

/* name, calls, self, total, p50, p90, p95, p99: TOOL without a sketch, "" is none. */
static struct rp_report_cat full_cats[] = {
	{ "TOOL", 4, 90000123, 90000123, 0, 0, 0, 0, { 0 } },
	{ "", 9, 700 * MS, 1790 * MS, 110000123, 150 * MS, 180 * MS, 359999500, { 0 } },
	{ CAT3, 3, 200 * MS, 990 * MS, 330 * MS, 350 * MS, 355 * MS, 359999500, { 0 } },
};

/* name, category, samples, last, min, max, mean, p50, p90, p95, p99. */
static struct rp_report_counter full_counters[] = {
	{ CNT0, "", 5, 3, -2, 10, 2.5, 2.0, 9.9, 10.0, 10.0, { 0 } },
	{ "mem", "SYS", 0, 0, 0, 0, 0, 0, 0, 0, 0, { 0 } },
	{ "big", "", 1, INT64_MIN, INT64_MIN, INT64_MAX, 1e300, NAN, INFINITY, -INFINITY, 0.1,
	  { 0 } },
};

/* The text report's functions with every 1.2 section. */
static struct rp_report full_report(void)
{
	struct rp_report r = text_report();

	r.caps = (struct rp_report_caps){ 1, 2, 3, 4, 5, 6, 7, 8, 9, P63 };
	r.cats = full_cats;
	r.n_cats = ARRAY_SIZE(full_cats);
	r.counters = full_counters;
	r.n_counters = ARRAY_SIZE(full_counters);
	r.windows = full_windows;
	r.n_windows = ARRAY_SIZE(full_windows);
	r.bottlenecks = (struct rp_report_bottlenecks){
		.by_cum = all_cum, .n_by_cum = ARRAY_SIZE(all_cum),
		.by_self = all_self, .n_by_self = ARRAY_SIZE(all_self),
		.by_count = all_count, .n_by_count = ARRAY_SIZE(all_count),
		.bound_cum = 5 * MS, .bound_self = 0, .bound_count = 2,
		.slowest = all_slow, .n_slowest = ARRAY_SIZE(all_slow),
	};
	return r;
}

/* What a list entry must name: its fn's name and category, "?" out of range. */
static const char *want_name(const struct rp_report *r, uint32_t fn)
{
	return fn < r->n_fns ? r->fns[fn].name : "?";
}

static const char *want_cat(const struct rp_report *r, uint32_t fn)
{
	return fn < r->n_fns ? r->fns[fn].category : "?";
}

static void check_tops(yajl_val a, const struct rp_report *r, const struct rp_report_top *t,
		       uint32_t n, bool count)
{
	static const char *const keys[] = { "name", "category", "value_ns", "error_ns" };
	static const char *const count_keys[] = { "name", "category", "count", "error" };
	const char *const *k = count ? count_keys : keys;

	assert_true(YAJL_IS_ARRAY(a));
	assert_int_equal(a->u.array.len, n);
	for (uint32_t i = 0; i < n; i++) {
		yajl_val o = a->u.array.values[i];

		assert_keys(o, k, 4);
		assert_jstr(field(o, "name"), want_name(r, t[i].fn));
		assert_jstr(field(o, "category"), want_cat(r, t[i].fn));
		assert_u64(o, k[2], t[i].value);
		assert_u64(o, k[3], t[i].error);
	}
}

static void check_span(yajl_val o, const struct rp_report *r, const struct rp_report_span *s)
{
	static const char *const keys[] = { "name",	   "category",	  "source",
					    "track",	   "span_id",	  "start_ns",
					    "duration_ns", "self_ns",	  "subtree_ns",
					    "charged_ns",  "midpoint_concurrency" };
	yajl_val mid = field(o, "midpoint_concurrency");

	assert_keys(o, keys, ARRAY_SIZE(keys));
	assert_jstr(field(o, "name"), want_name(r, s->fn));
	assert_jstr(field(o, "category"), want_cat(r, s->fn));
	assert_jstr(field(o, "source"), s->source < r->n_sources ? r->sources[s->source].name
								 : "?");
	assert_u64(o, "track", s->track);
	assert_u64(o, "span_id", s->span_id);
	assert_u64(o, "start_ns", s->start_ns);
	assert_u64(o, "duration_ns", s->dur_ns);
	assert_u64(o, "self_ns", s->self_ns);
	assert_u64(o, "subtree_ns", s->subtree_ns);
	assert_u64(o, "charged_ns", s->charged_ns); /* 1.6 */
	if (s->concurrency_known)
		assert_u64(o, "midpoint_concurrency", s->concurrency);
	else
		assert_true(YAJL_IS_NULL(mid));
}

static void check_bottlenecks(yajl_val o, const struct rp_report *r,
			      const struct rp_report_bottlenecks *b)
{
	static const char *const keys[] = { "by_cum", "by_self", "by_count", "bound",
					    "slowest_spans" };
	static const char *const bound_keys[] = { "cum_ns", "self_ns", "count" };
	yajl_val bound = field(o, "bound"), a = field(o, "slowest_spans");

	assert_keys(o, keys, ARRAY_SIZE(keys));
	check_tops(field(o, "by_cum"), r, b->by_cum, b->n_by_cum, false);
	check_tops(field(o, "by_self"), r, b->by_self, b->n_by_self, false);
	check_tops(field(o, "by_count"), r, b->by_count, b->n_by_count, true);
	assert_keys(bound, bound_keys, ARRAY_SIZE(bound_keys));
	assert_u64(bound, "cum_ns", b->bound_cum);
	assert_u64(bound, "self_ns", b->bound_self);
	assert_u64(bound, "count", b->bound_count);
	assert_true(YAJL_IS_ARRAY(a));
	assert_int_equal(a->u.array.len, b->n_slowest);
	for (uint32_t i = 0; i < b->n_slowest; i++)
		check_span(a->u.array.values[i], r, &b->slowest[i]);
}

/* A window: its rows in the order @order (indices into w->fns), @rates as written,
 * its distributions with @means as written. */
static void check_window(yajl_val o, const struct rp_report *r, const struct rp_report_window *w,
			 const char *name, const uint32_t *order, const char *const *rates,
			 const char *const *means)
{
	static const char *const keys[] = { "name",	  "length_ns",	  "subwindows",
					    "t_from",	  "t_to",	  "functions",
					    "concurrency", "bottlenecks" };
	static const char *const fn_keys[] = { "name",	  "category", "calls",	"rate_per_s",
					       "self_ns", "cum_ns",   "p50_ns", "p90_ns",
					       "p95_ns",  "p99_ns" };
	static const char *const conc_keys[] = { "overall", "roots" };
	yajl_val a = field(o, "functions"), c = field(o, "concurrency");

	assert_keys(o, keys, ARRAY_SIZE(keys));
	assert_jstr(field(o, "name"), name);
	assert_u64(o, "length_ns", w->length_ns);
	assert_u64(o, "subwindows", w->subwindows);
	assert_u64(o, "t_from", w->t_from);
	assert_u64(o, "t_to", w->t_to);
	assert_true(YAJL_IS_ARRAY(a));
	assert_int_equal(a->u.array.len, w->n_fns);
	for (uint32_t i = 0; i < w->n_fns; i++) {
		const struct rp_report_wfn *f = &w->fns[order[i]];
		yajl_val e = a->u.array.values[i];

		assert_keys(e, fn_keys, ARRAY_SIZE(fn_keys));
		assert_jstr(field(e, "name"), want_name(r, f->fn));
		assert_jstr(field(e, "category"), want_cat(r, f->fn));
		assert_u64(e, "calls", f->calls);
		assert_raw_number(field(e, "rate_per_s"), "rate_per_s", rates[i]);
		assert_u64(e, "self_ns", f->self_ns);
		assert_u64(e, "cum_ns", f->cum_ns);
		assert_u64(e, "p50_ns", f->p50_ns);
		assert_u64(e, "p90_ns", f->p90_ns);
		assert_u64(e, "p95_ns", f->p95_ns);
		assert_u64(e, "p99_ns", f->p99_ns);
	}
	assert_keys(c, conc_keys, w->n_conc);
	for (uint32_t i = 0; i < w->n_conc; i++)
		check_dist(c->u.object.values[i], &w->conc[i], means[i]);
	check_bottlenecks(field(o, "bottlenecks"), r, &w->top);
}

static void check_cats(yajl_val o, const struct rp_report *r, const char *const *names)
{
	static const char *const keys[] = { "calls",  "errors", "self_ns", "total_ns", "p50_ns",
					    "p90_ns", "p95_ns",	 "p99_ns" };

	assert_keys(o, names, r->n_cats);
	for (uint32_t i = 0; i < r->n_cats; i++) {
		const struct rp_report_cat *c = &r->cats[i];
		yajl_val v = o->u.object.values[i];

		assert_keys(v, keys, ARRAY_SIZE(keys));
		assert_u64(v, "calls", c->calls);
		assert_u64(v, "self_ns", c->self_ns);
		assert_u64(v, "total_ns", c->total_ns);
		assert_u64(v, "p50_ns", c->p50_ns);
		assert_u64(v, "p90_ns", c->p90_ns);
		assert_u64(v, "p95_ns", c->p95_ns);
		assert_u64(v, "p99_ns", c->p99_ns);
	}
}

/* A signed JSON integer, exactly: its digits (yajl cannot hold INT64_MIN). */
static void assert_i64(yajl_val o, const char *key, int64_t want)
{
	yajl_val v = field(o, key);
	char raw[32];

	snprintf(raw, sizeof(raw), "%" PRId64, want);
	assert_raw_number(v, key, raw);
	if (want != INT64_MIN)
		assert_true(YAJL_IS_INTEGER(v) && YAJL_GET_INTEGER(v) == want);
}

/* A counter; @reals are mean, p50, p90, p95, p99 as written, NULL for null. */
static void check_counter(yajl_val o, const struct rp_report_counter *c, const char *name,
			  const char *const reals[5])
{
	static const char *const keys[] = { "name", "category", "samples", "last",
					    "min",  "max",	"mean",	   "p50",
					    "p90",  "p95",	"p99" };

	assert_keys(o, keys, ARRAY_SIZE(keys));
	assert_jstr(field(o, "name"), name);
	assert_jstr(field(o, "category"), c->category);
	assert_u64(o, "samples", c->samples);
	assert_i64(o, "last", c->last);
	assert_i64(o, "min", c->min);
	assert_i64(o, "max", c->max);
	for (int i = 0; i < 5; i++) {
		yajl_val v = field(o, keys[6 + i]);

		if (reals[i] == NULL)
			assert_true(YAJL_IS_NULL(v));
		else
			assert_raw_number(v, keys[6 + i], reals[i]);
	}
}

static void test_render_json_full_report(void **state)
{
	static const uint32_t w10_order[] = { 2, 1, 0 }, w1m_order[] = { 0 };
	static const char *const w10_rates[] = { "1.250", "2.500", "1.667" };
	static const char *const w1m_rates[] = { "0" };
	static const char *const w10_means[] = { "1.500", "1.000" };
	static const char *const cat_names[] = { "TOOL", "", CAT3 };
	static const char *const reals[3][5] = {
		{ "2.5", "2", "9.9", "10", "10" },
		{ "0", "0", "0", "0", "0" },
		{ "1e+300", NULL, NULL, NULL, "0.1" },
	};
	static const char *const counter_names[] = { CNT0, "mem", "big" };
	struct rp_report r = full_report();
	char *text = render_mem(rp_render_json, &r);
	yajl_val o = check_top(&r, text, "monotonic"), a;

	(void)state;
	a = array_of(o, "windows", 2);
	check_window(a->u.array.values[0], &r, &r.windows[0], "10s", w10_order, w10_rates,
		     w10_means);
	check_window(a->u.array.values[1], &r, &r.windows[1], W1M, w1m_order, w1m_rates, NULL);
	check_bottlenecks(field(o, "bottlenecks"), &r, &r.bottlenecks);
	check_cats(field(o, "categories"), &r, cat_names);
	a = array_of(o, "counters", 3);
	for (uint32_t i = 0; i < 3; i++)
		check_counter(a->u.array.values[i], &r.counters[i], counter_names[i], reals[i]);
	/* The layout: escapes, an empty window, null for what is not known. */
	assert_non_null(strstr(
		text, "\n    {\"name\":\"1\\\"m\\u000a\",\"length_ns\":60000000000,"
		      "\"subwindows\":6,\"t_from\":5,\"t_to\":5,\n"
		      "      \"functions\":[\n"
		      "        {\"name\":\"?\",\"category\":\"?\",\"calls\":7,\"rate_per_s\":0,"
		      "\"self_ns\":1,\"cum_ns\":2,\"p50_ns\":3,\"p90_ns\":4,\"p95_ns\":5,"
		      "\"p99_ns\":6}\n"
		      "      ],\n"
		      "      \"concurrency\":{},\n"
		      "      \"bottlenecks\":{\n"
		      "        \"by_cum\":[],\n"
		      "        \"by_self\":[],\n"
		      "        \"by_count\":[],\n"
		      "        \"bound\":{\"cum_ns\":0,\"self_ns\":0,\"count\":0},\n"
		      "        \"slowest_spans\":[]\n"
		      "      }\n"
		      "    }\n"
		      "  ],\n"
		      "  \"bottlenecks\":{\n"
		      "    \"by_cum\":[\n"
		      "      {\"name\":\"handle_request\",\"category\":\"FUNCTION\","
		      "\"value_ns\":990000000,\"error_ns\":0},\n"));
	assert_non_null(strstr(text, "\"span_id\":9223372036854775808,\"start_ns\":500,"
				     "\"duration_ns\":300000000,\"self_ns\":250000000,"
				     "\"subtree_ns\":350000000,\"charged_ns\":0,"
				     "\"midpoint_concurrency\":null}\n"
				     "    ]\n  }\n}\n"));
	assert_non_null(strstr(text, "\n  \"categories\":{\n"
				     "    \"TOOL\":{\"calls\":4,"));
	assert_non_null(strstr(text, "\n    \"F\\\"N\\u0009\":{\"calls\":3,"));
	assert_non_null(strstr(text, "{\"name\":\"queue\\\"depth\",\"category\":\"\","
				     "\"samples\":5,\"last\":3,\"min\":-2,\"max\":10,"
				     "\"mean\":2.5,\"p50\":2,\"p90\":9.9,\"p95\":10,\"p99\":10}"));
	assert_non_null(strstr(text, "\"last\":-9223372036854775808,"
				     "\"min\":-9223372036854775808,\"max\":9223372036854775807,"
				     "\"mean\":1e+300,\"p50\":null,\"p90\":null,\"p95\":null,"
				     "\"p99\":0.1}"));
	yajl_tree_free(o);
	free(text);
}

/* Without 1.2 data (a 1.1 snapshot): every section there, empty. */
static void check_no_analyses(yajl_val o, const struct rp_report *r, const char *text)
{
	assert_keys(field(o, "categories"), NULL, 0);
	array_of(o, "counters", 0);
	array_of(o, "windows", 0);
	check_bottlenecks(field(o, "bottlenecks"), r, &r->bottlenecks);
	assert_non_null(strstr(text, ",\n  \"categories\":{},\n"
				     "  \"counters\":[],\n"
				     "  \"windows\":[],\n"
				     "  \"bottlenecks\":{\n"
				     "    \"by_cum\":[],\n"
				     "    \"by_self\":[],\n"
				     "    \"by_count\":[],\n"
				     "    \"bound\":{\"cum_ns\":0,\"self_ns\":0,\"count\":0},\n"
				     "    \"slowest_spans\":[]\n"
				     "  }\n}\n"));
}

/* Rates exactly, with 128-bit intermediates: checked by hand (x 1e9 / range). */
static void test_render_rate_exact(void **state)
{
	static const struct {
		uint64_t calls, range;
		const char *want;
	} cases[] = {
		{ 0, 0, "0" },
		{ 5, 0, "0" },
		{ 0, 7, "0.000" },
		{ 1, 3, "333333333.333" },
		{ 2, 3, "666666666.667" },
		{ 1, 2000000000000u, "0.001" }, /* 0.0005: half up */
		{ 1, 2000000000001u, "0.000" },
		{ 3, 2400000000u, "1.250" },
		{ UINT64_MAX, 1, "18446744073709551615000000000.000" },
		{ UINT64_MAX, UINT64_MAX, "1000000000.000" },
		{ 1, UINT64_MAX, "0.000" },
	};
	char buf[48];

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		assert_string_equal(rp_render_rate(buf, cases[i].calls, cases[i].range),
				    cases[i].want);
}

/* The text blocks of full_report(), row by row; the header and function table are
 * text_report()'s. Errors show as "±" only when > 0; the second slowest span started
 * 500 ns before t_first (-0.0005 ms, rounded half up) with its concurrency unknown. */
#define FULL_HEAD(rows)                                                                    \
	TEXT_HEAD "anomalies  end_mismatch 1  clamped 4\n" TEXT_CONC                         \
		  "\nfunctions " rows " of 4, by cum time, then self time\n" TEXT_COLS
#define FULL_TOPS_HEAD                                                                     \
	"\nbottlenecks (all time): a name not listed weighs at most the bound\n"
#define FULL_CUM_HEAD                                                                      \
	"         cum ms      error ms  name [category]\n"
#define FULL_CUM0 "        990.000                handle_request [FUNCTION]\n"
#define FULL_CUM12                                                                         \
	"        700.000        \xc2\xb1" "5.000  query\n"                                   \
	"          3.000        \xc2\xb1" "3.000  ?\n"
#define FULL_SELF_HEAD                                                                     \
	"        self ms      error ms  name [category]\n"
#define FULL_SELF0 "        500.000                query\n"
#define FULL_SELF1 "        200.000                handle_request [FUNCTION]\n"
#define FULL_COUNT_HEAD                                                                    \
	"          calls         error  name [category]\n"
#define FULL_COUNT0 "              6                query\n"
#define FULL_COUNT1 "              4            \xc2\xb1" "2  sleep [TOOL]\n"
#define FULL_SLOW_HEAD                                                                     \
	"    duration ms      self ms   subtree ms     start ms   conc  name [category]\n"
#define FULL_SLOW0                                                                         \
	"        400.000      100.000      400.000      100.000      3  handle_request [FUNCTION]\n"
#define FULL_SLOW1                                                                         \
	"        300.000      250.000      350.000       -0.001      ?  query\n"
/* Rates over 2.4 s: 3 -> 1.250, 6 -> 2.500, 4 -> 1.667 (1.6666...). */
#define FULL_W10_HEAD                                                                      \
	"\nwindow 10s (10000.000 ms in 10 sub-windows), 0.000 .. 2400.000 ms (2400.000 ms)\n"
#define FULL_WCOLS                                                                         \
	"     calls       rate/s      cum ms     self ms      p50 us      p90 us      p99 us" \
	"  name [category]\n"
#define FULL_W10_ROW0                                                                      \
	"         3        1.250     990.000     200.000  330000.000  350000.000  359999.500" \
	"  handle_request [FUNCTION]\n"
#define FULL_W10_ROW12                                                                     \
	"         6        2.500     700.000     500.000  110000.123  150000.000  199999.999" \
	"  query\n"                                                                        \
	"         4        1.667      90.000      90.000           -           -           -" \
	"  sleep [TOOL]\n"
#define FULL_W10_CONC                                                                      \
	"concurrency overall  p50 1  p90 2  p95 3  p99 4  max 5  mean 1.500\n"             \
	"concurrency roots    p50 1  p90 1  p95 1  p99 1  max 2  mean 1.000\n"
/* No range: rate 0; no distributions: no concurrency lines; fn 99: "?". */
#define FULL_W1M                                                                           \
	"\nwindow 1\"m\\n (60000.000 ms in 6 sub-windows), -0.001 .. -0.001 ms (0.000 ms)\n"           \
	"names 1 of 1, by cum time\n" FULL_WCOLS                                           \
	"         7            0       0.000       0.000       0.003       0.004       0.006" \
	"  ?\n"
#define FULL_CAT_HEAD                                                                      \
	"     calls      self ms     total ms       p50 us       p90 us       p95 us"        \
	"       p99 us  category\n"
#define FULL_CAT0                                                                          \
	"         9      700.000     1790.000   110000.123   150000.000   180000.000"        \
	"   359999.500  (none)\n"
#define FULL_CAT12                                                                         \
	"         3      200.000      990.000   330000.000   350000.000   355000.000"        \
	"   359999.500  F\"N\\t\n"                                                           \
	"         4       90.000       90.000            -            -            -"        \
	"            -  TOOL\n"
#define FULL_CNT_HEAD                                                                      \
	"   samples         last          min          max         mean          p50"        \
	"          p99  name [category]\n"
#define FULL_CNT0                                                                          \
	"         5            3           -2           10        2.500        2.000"        \
	"       10.000  queue\"depth\n"
/* No samples: "-"; NaN: "-"; above 1e12: 6 digits. */
#define FULL_CNT12                                                                         \
	"         0            -            -            -            -            -"        \
	"            -  mem [SYS]\n"                                                       \
	"         1 -9223372036854775808 -9223372036854775808 9223372036854775807"           \
	"       1e+300            -        0.100  big\n"

static void test_render_text_full_report(void **state)
{
	struct rp_report r = full_report();
	char *text = text_mem(&r, 0), *want;

	(void)state;
	want = strdup(FULL_HEAD("4") TEXT_ROW0 TEXT_ROW1 TEXT_ROW2 TEXT_ROW3 FULL_TOPS_HEAD
		     "by cum time: 3 of 3, bound 5.000 ms\n" FULL_CUM_HEAD FULL_CUM0 FULL_CUM12
		     "by self time: 2 of 2, bound 0.000 ms\n" FULL_SELF_HEAD FULL_SELF0 FULL_SELF1
		     "by count: 2 of 2, bound 2\n" FULL_COUNT_HEAD FULL_COUNT0 FULL_COUNT1
		     "\nslowest spans (all time): 2 of 2, start from the first event\n"
		     FULL_SLOW_HEAD FULL_SLOW0 FULL_SLOW1
		     FULL_W10_HEAD "names 3 of 3, by cum time\n" FULL_WCOLS FULL_W10_ROW0
		     FULL_W10_ROW12 FULL_W10_CONC FULL_W1M
		     "\ncategories 3 of 3, by total time\n" FULL_CAT_HEAD FULL_CAT0 FULL_CAT12
		     "\ncounters 3 of 3\n" FULL_CNT_HEAD FULL_CNT0 FULL_CNT12);
	assert_string_equal(text, want);
	free(text);
	free(want);
}

/* --limit 1: one row per table; an empty list keeps its title and loses its columns;
 * a report with nothing but bounds still shows them. */
static void test_render_text_full_report_limit(void **state)
{
	struct rp_report r = full_report();
	char *text, *want;

	(void)state;
	r.bottlenecks.n_by_self = 0;
	text = text_mem(&r, 1);
	want = strdup(FULL_HEAD("1") TEXT_ROW0 FULL_TOPS_HEAD
		     "by cum time: 1 of 3, bound 5.000 ms\n" FULL_CUM_HEAD FULL_CUM0
		     "by self time: 0 of 0, bound 0.000 ms\n"
		     "by count: 1 of 2, bound 2\n" FULL_COUNT_HEAD FULL_COUNT0
		     "\nslowest spans (all time): 1 of 2, start from the first event\n"
		     FULL_SLOW_HEAD FULL_SLOW0
		     FULL_W10_HEAD "names 1 of 3, by cum time\n" FULL_WCOLS FULL_W10_ROW0
		     FULL_W10_CONC FULL_W1M
		     "\ncategories 1 of 3, by total time\n" FULL_CAT_HEAD FULL_CAT0
		     "\ncounters 1 of 3\n" FULL_CNT_HEAD FULL_CNT0);
	assert_string_equal(text, want);
	free(text);
	free(want);
	/* Only a bound: the block, with three empty lists; nothing else of 1.2. */
	r = text_report();
	r.bottlenecks.bound_count = 7;
	text = text_mem(&r, 0);
	want = strdup(FULL_HEAD("4") TEXT_ROW0 TEXT_ROW1 TEXT_ROW2 TEXT_ROW3 FULL_TOPS_HEAD
		     "by cum time: 0 of 0, bound 0.000 ms\n"
		     "by self time: 0 of 0, bound 0.000 ms\n"
		     "by count: 0 of 0, bound 7\n");
	assert_string_equal(text, want);
	free(text);
	free(want);
}

/* ---- pstats ----------------------------------------------------------------------- */

/*
 * Prints, sorted: "fn KEY cc nc tt ct" per entry, "caller KEY <- KEY nc cc tt ct" per
 * caller, "totals total_calls prim_calls [total_tt in ns]" from pstats.Stats and
 * "header ..." the summary line of print_stats(). KEY is "x<hex file> line x<hex
 * name>" (UTF-8 bytes), floats are their IEEE bits in hex. Asserts the types.
 */
static const char dump_py[] =
	"import io, marshal, pstats, struct, sys\n"
	"path = sys.argv[1]\n"
	"with open(path, 'rb') as f:\n"
	"    d = marshal.load(f)\n"
	"    assert f.read() == b''\n"
	"assert type(d) is dict\n"
	"def s(x):\n"
	"    assert type(x) is str\n"
	"    return 'x' + x.encode('utf-8').hex()\n"
	"def k(key):\n"
	"    assert type(key) is tuple and len(key) == 3 and type(key[1]) is int\n"
	"    return '%s %d %s' % (s(key[0]), key[1], s(key[2]))\n"
	"def i(x):\n"
	"    assert type(x) is int\n"
	"    return str(x)\n"
	"def g(x):\n"
	"    assert type(x) is float\n"
	"    return '%016x' % struct.unpack('<Q', struct.pack('<d', x))[0]\n"
	"out = []\n"
	"for key, v in d.items():\n"
	"    assert type(v) is tuple and len(v) == 5 and type(v[4]) is dict\n"
	"    out.append('fn %s %s %s %s %s' % (k(key), i(v[0]), i(v[1]), g(v[2]), g(v[3])))\n"
	"    for ck, cv in v[4].items():\n"
	"        assert type(cv) is tuple and len(cv) == 4\n"
	"        out.append('caller %s <- %s %s %s %s %s' % (k(key), k(ck), i(cv[0]),\n"
	"                   i(cv[1]), g(cv[2]), g(cv[3])))\n"
	"st = pstats.Stats(path, stream=io.StringIO())\n"
	"tot = 'totals %d %d' % (st.total_calls, st.prim_calls)\n"
	"if sys.argv[2] == 'tt':\n"
	"    tot += ' %d' % round(st.total_tt * 1e9)\n"
	"out.append(tot)\n"
	"st.stream = io.StringIO()\n"
	"st.sort_stats('cumulative').print_stats()\n"
	"head = [l.strip() for l in st.stream.getvalue().splitlines() if 'function calls' in l]\n"
	"out.append('header ' + head[0])\n"
	"print('\\n'.join(sorted(out)))\n";

/* A pstats key as dump_py prints it. */
struct pykey {
	const char *file;
	uint64_t line;
	const char *name;
};

struct py_entry {
	struct pykey key;
	uint64_t cc, nc, tt_ns, ct_ns;
};

struct py_caller {
	struct pykey callee, caller;
	uint64_t nc, cc, tt_ns, ct_ns;
};

static uint64_t seconds_bits(uint64_t ns)
{
	double s = (double)ns / 1e9;
	uint64_t bits;

	memcpy(&bits, &s, sizeof(bits));
	return bits;
}

static void put_hex(FILE *f, const char *s)
{
	fputc('x', f);
	for (; *s; s++)
		fprintf(f, "%02x", (unsigned char)*s);
}

static void put_pykey(FILE *f, const struct pykey *k)
{
	put_hex(f, k->file);
	fprintf(f, " %" PRIu64 " ", k->line);
	put_hex(f, k->name);
}

static int cmp_line(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* dump_py's output for these entries, callers and trailing lines (already sorted
 * lines are fine: they are sorted here). */
static char *expected_dump(const struct py_entry *e, size_t ne, const struct py_caller *c,
			   size_t nc, const char *const *tail, size_t nt)
{
	size_t n = ne + nc + nt, len;
	char **lines = calloc(n, sizeof(*lines)), *buf = NULL;
	FILE *f;

	assert_non_null(lines);
	for (size_t i = 0; i < n; i++) {
		f = open_memstream(&lines[i], &len);
		if (i < ne) {
			fputs("fn ", f);
			put_pykey(f, &e[i].key);
			fprintf(f, " %" PRIu64 " %" PRIu64 " %016" PRIx64 " %016" PRIx64, e[i].cc,
				e[i].nc, seconds_bits(e[i].tt_ns), seconds_bits(e[i].ct_ns));
		} else if (i < ne + nc) {
			const struct py_caller *k = &c[i - ne];

			fputs("caller ", f);
			put_pykey(f, &k->callee);
			fputs(" <- ", f);
			put_pykey(f, &k->caller);
			fprintf(f, " %" PRIu64 " %" PRIu64 " %016" PRIx64 " %016" PRIx64, k->nc,
				k->cc, seconds_bits(k->tt_ns), seconds_bits(k->ct_ns));
		} else {
			fputs(tail[i - ne - nc], f);
		}
		fclose(f);
	}
	qsort(lines, n, sizeof(*lines), cmp_line);
	f = open_memstream(&buf, &len);
	for (size_t i = 0; i < n; i++) {
		fprintf(f, "%s\n", lines[i]);
		free(lines[i]);
	}
	fclose(f);
	free(lines);
	return buf;
}

#define KEY_Q	 { "app.py", 10, QNAME }
#define KEY_CAFE { "~", 0, CAFE }
#define KEY_BAD	 { BADFILE_FIXED, 7, BAD_FIXED }

static void test_render_pstats_python_loads_tricky(void **state)
{
	/* fns 0 and 4 merged: calls 3+2, primitive 1+2, self 300+100, cum 1000+400. */
	static const struct py_entry entries[] = {
		{ KEY_Q, 3, 5, 400 * MS, 1400 * MS },
		{ KEY_CAFE, 2, 2, 150 * MS, 150 * MS },
		{ KEY_BAD, 1, 1, 50 * MS, 150 * MS },
		{ { "idle.c", 3, "idle" }, 0, 0, 0, 0 },
		{ { "idle.c", 3, "aaa" }, 0, 0, 0, 0 },
	};
	/* Callers sharing a key summed: edges 1 and 5 (cafe -> q), 3 and 4 (q -> cafe). */
	static const struct py_caller callers[] = {
		{ KEY_Q, KEY_Q, 2, 0, 100 * MS, 0 },
		{ KEY_Q, KEY_CAFE, 3, 3, 300 * MS, 1400 * MS },
		{ KEY_CAFE, KEY_Q, 2, 2, 150 * MS, 150 * MS },
		{ KEY_BAD, KEY_Q, 1, 1, 50 * MS, 150 * MS },
	};
	static const char *const tail[] = {
		"totals 8 6 600000000",
		"header 8 function calls (6 primitive calls) in 0.600 seconds",
	};
	struct rp_report r = tricky_report();
	char *path, *got, *want;

	(void)state;
	need_python();
	path = pstats_file(&r);
	got = run_python(dump_py, path, "tt");
	want = expected_dump(entries, ARRAY_SIZE(entries), callers, ARRAY_SIZE(callers), tail,
			     ARRAY_SIZE(tail));
	assert_string_equal(got, want);
	unlink(path);
	free(path);
	free(got);
	free(want);
}

static void test_render_pstats_python_loads_big(void **state)
{
	/* Counts above INT32_MAX and the line 3e9 need marshal's long; INT32_MAX not. */
	static const struct py_entry entries[] = {
		{ { "big.c", 3000000000u, "big" }, 4294967296u, 5000000000u, P53, UINT64_MAX },
		{ { "~", 0, "small" }, 2147483647u, 2147483648u, 1, 2 },
	};
	static const struct py_caller callers[] = {
		{ { "~", 0, "small" }, { "big.c", 3000000000u, "big" }, UINT64_MAX,
		  2147483648u, P53, UINT64_MAX },
	};
	static const char *const tail[] = {
		"totals 7147483648 6442450943",
		"header 7147483648 function calls (6442450943 primitive calls) in 9007199.255 "
		"seconds",
	};
	struct rp_report r = big_report();
	char *path, *got, *want;

	(void)state;
	need_python();
	path = pstats_file(&r);
	got = run_python(dump_py, path, "-");
	want = expected_dump(entries, ARRAY_SIZE(entries), callers, ARRAY_SIZE(callers), tail,
			     ARRAY_SIZE(tail));
	assert_string_equal(got, want);
	unlink(path);
	free(path);
	free(got);
	free(want);
}

/* A request milestone (1.5: a request's time to its mark, calls but no self or cum
 * time) is no function: pstats has the function beside it and nothing else. */
static void test_render_pstats_milestones_left_out(void **state)
{
	static const struct py_entry entries[] = {
		{ { "w.c", 7, "work" }, 2, 3, 10 * MS, 30 * MS },
	};
	static const char *const tail[] = {
		"totals 3 2",
		"header 3 function calls (2 primitive calls) in 0.010 seconds",
	};
	struct rp_report_fn fns[] = {
		{ .name = "first_token", .category = "milestone", .calls = 5, .total_ns = 90 * MS,
		  .min_ns = 10 * MS, .max_ns = 30 * MS, .milestone = 1 },
		{ .name = "work", .category = "", .file = "w.c", .line = 7, .calls = 3,
		  .primitive_calls = 2, .self_ns = 10 * MS, .cum_ns = 30 * MS, .total_ns = 30 * MS },
	};
	struct rp_report r = { .clock = "monotonic", .fns = fns, .n_fns = ARRAY_SIZE(fns) };
	char *path, *got, *want;

	(void)state;
	need_python();
	path = pstats_file(&r);
	got = run_python(dump_py, path, "-");
	want = expected_dump(entries, ARRAY_SIZE(entries), NULL, 0, tail, ARRAY_SIZE(tail));
	assert_string_equal(got, want);
	unlink(path);
	free(path);
	free(got);
	free(want);
}

/* Byte layout of small values, read by hand: an empty report is an empty dict. */
static void test_render_pstats_empty_is_empty_dict(void **state)
{
	struct rp_report r = { .clock = "trace" };
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	(void)state;
	assert_int_equal(rp_render_pstats(&r, f), 0);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(len, 2);
	assert_memory_equal(buf, "{0", 2);
	free(buf);
}

/* A window longer than the run: rates divide by the part the events cover (from the
 * first event to the window's end), not the window's length: 10 calls in the 5 s
 * between the first event and t_to are 2/s, not 10 calls / 10 s. */
static void test_render_window_rate_covered(void **state)
{
	struct rp_report_fn fn = { "f", "", "", 0, 10, 10, MS, MS, MS, 1, 1, NO_SKETCH };
	struct rp_report_wfn wf = { .fn = 0, .calls = 10, .self_ns = MS, .cum_ns = MS };
	struct rp_report_window w = { .name = "10s", .length_ns = 10000 * MS, .subwindows = 10,
				      .t_from = 0, .t_to = 10000 * MS, .fns = &wf, .n_fns = 1 };
	struct rp_report r = { .clock = "trace", .t_first = 5000 * MS, .t_last = 10000 * MS,
			       .fns = &fn, .n_fns = 1, .windows = &w, .n_windows = 1 };
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	(void)state;
	assert_int_equal(rp_render_json(&r, f), 0);
	assert_int_equal(fclose(f), 0);
	assert_non_null(strstr(buf, "\"rate_per_s\":2.000"));
	free(buf);
	buf = NULL;
	f = open_memstream(&buf, &len);
	assert_int_equal(rp_render_text(&r, f, 0), 0);
	assert_int_equal(fclose(f), 0);
	assert_non_null(strstr(buf, " 2.000 "));
	free(buf);
}

/* Times are from the first event; a window over every event is one line, not a
 * copy of the all-time tables (a 5 s run printed three identical ones). */
static void test_render_text_window_over_every_event(void **state)
{
	struct rp_report_fn fn = { "f", "", "", 0, 10, 10, MS, MS, MS, 1, 1, NO_SKETCH };
	struct rp_report_wfn wf = { .fn = 0, .calls = 4, .self_ns = MS, .cum_ns = MS };
	struct rp_report_window w[2] = {
		{ .name = "10s", .length_ns = 10000 * MS, .subwindows = 10, .t_from = 7000 * MS,
		  .t_to = 10000 * MS, .fns = &wf, .n_fns = 1 },
		{ .name = "1m", .length_ns = 60000 * MS, .subwindows = 6, .t_from = 0,
		  .t_to = 10000 * MS, .fns = &wf, .n_fns = 1 },
	};
	struct rp_report r = { .clock = "monotonic", .t_first = 5000 * MS, .t_last = 10000 * MS,
			       .events = 20, .fns = &fn, .n_fns = 1, .windows = w, .n_windows = 2 };
	char *text = text_mem(&r, 0), *p;

	(void)state;
	assert_non_null(strstr(text, "time range 5000.000 ms from the first event (at "
				     "5000000000 ns on that clock)\n"));
	p = strstr(text, "\nwindow 10s (10000.000 ms in 10 sub-windows), 2000.000 .. 5000.000 ms "
			 "(3000.000 ms)\nnames 1 of 1, by cum time\n");
	assert_non_null(p);
	assert_non_null(strstr(text, "\nwindow 1m (60000.000 ms in 6 sub-windows), every event: "
				     "as all time above\n"));
	assert_null(strstr(strstr(p, "names 1 of 1") + 1, "names 1 of 1")); /* none for 1m */
	free(text);
}

/* One entry, byte for byte: ('~', 0, 'f'): (1, 2, 0.5, 1.0, {}) (cProfile's file for
 * what has none). */
static void test_render_pstats_bytes_one_entry(void **state)
{
	static const unsigned char want[] = {
		'{', '(', 3, 0, 0, 0, 'u', 1, 0, 0, 0, '~', 'i', 0, 0, 0, 0,
		'u', 1, 0, 0, 0, 'f', '(', 5, 0, 0, 0, 'i', 1, 0, 0, 0, 'i', 2, 0, 0, 0,
		'g', 0, 0, 0, 0, 0, 0, 0xe0, 0x3f, 'g', 0, 0, 0, 0, 0, 0, 0xf0, 0x3f,
		'{', '0', '0',
	};
	struct rp_report_fn fn = { "f", "", "", 0, 2, 1, 500 * MS, 1000 * MS,
				   1000 * MS, 1, 1, NO_SKETCH };
	struct rp_report r = { .fns = &fn, .n_fns = 1 };
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	(void)state;
	assert_int_equal(rp_render_pstats(&r, f), 0);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(len, sizeof(want));
	assert_memory_equal(buf, want, sizeof(want));
	free(buf);
	/* With a category and no file: the category goes into the name, as in the text
	 * report: ('~', 0, 'f [LLM]'). */
	fn.category = "LLM";
	buf = NULL;
	f = open_memstream(&buf, &len);
	assert_int_equal(rp_render_pstats(&r, f), 0);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(len, sizeof(want) + 6);
	assert_memory_equal(buf, want, 18);
	assert_memory_equal(buf + 18, "\x07\0\0\0f [LLM]", 11);
	assert_memory_equal(buf + 29, want + 23, sizeof(want) - 23);
	free(buf);
}

/* The reference file's profile, as a report: root -> handle_request -> query, and
 * time.sleep called from both. */
static struct rp_report_fn example_fns[] = {
	/* the reference file names its root's file "span" */
	{ "<root>", "", "span", 0, 1, 1, 10 * MS, 1000 * MS, 1000 * MS, 1000 * MS, 1000 * MS,
	  NO_SKETCH },
	{ "handle_request", "", "app.py", 10, 3, 3, 200 * MS, 990 * MS, 990 * MS, 1, 1, NO_SKETCH },
	{ "query", "", "db.py", 42, 6, 5, 500 * MS, 700 * MS, 700 * MS, 1, 1, NO_SKETCH },
	{ "<built-in method time.sleep>", "", "~", 0, 4, 4, 90 * MS, 90 * MS, 90 * MS, 1, 1,
	  NO_SKETCH },
};

static struct rp_report_edge example_edges[] = {
	{ 0, 1, 3, 3, 200 * MS, 990 * MS }, { 1, 2, 6, 5, 500 * MS, 700 * MS },
	{ 1, 3, 2, 2, 40 * MS, 40 * MS },   { 2, 3, 2, 2, 50 * MS, 50 * MS },
};

static const char compare_py[] =
	"import io, marshal, pstats, sys\n"
	"def show(path):\n"
	"    st = pstats.Stats(path, stream=io.StringIO())\n"
	"    print(st.total_calls, st.prim_calls, round(st.total_tt * 1000), len(st.stats),\n"
	"          sorted(st.top_level), st.max_name_len)\n"
	"    return st\n"
	"a, b = show(sys.argv[1]), show(sys.argv[2])\n"
	"print(a.stats == b.stats)\n"
	"with open(sys.argv[1], 'rb') as f, open(sys.argv[2], 'rb') as g:\n"
	"    print(marshal.load(f) == marshal.load(g))\n";

static void test_render_pstats_matches_reference_file(void **state)
{
	struct rp_report r = { .clock = "trace", .fns = example_fns, .n_fns = 4,
			       .edges = example_edges, .n_edges = 4 };
	const char *dir = getenv("RP_TESTDATA");
	char *ref, *path, *got;

	(void)state;
	need_python();
	if (dir == NULL)
		skip();
	assert_true(asprintf(&ref, "%s/pstats/example.prof", dir) > 0);
	path = pstats_file(&r);
	got = run_python(compare_py, ref, path);
	/* 14 calls, 13 primitive, 0.8 s of self time, 4 entries, both alike. */
	assert_string_equal(got, "14 13 800 4 [] 28\n"
				 "14 13 800 4 [] 28\n"
				 "True\n"
				 "True\n");
	unlink(path);
	free(path);
	free(ref);
	free(got);
}

/* ---- folded ----------------------------------------------------------------------- */

static char *folded_mem(const struct rp_report *r)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	assert_int_equal(rp_render_folded(r, f), 0);
	assert_int_equal(fclose(f), 0);
	return buf;
}

/* Depth-first, recursively: node @i's line (when it has self time), then the
 * subtree of each child in node order (a child is found by scanning every node). */
static void folded_dfs(const struct rp_report *r, char **path, uint32_t i, FILE *f)
{
	if (r->nodes[i].parent != RP_NONE && r->nodes[i].self_ns > 0)
		fprintf(f, "%s %" PRIu64 "\n", path[i], r->nodes[i].self_ns);
	for (uint32_t j = i + 1; j < r->n_nodes; j++)
		if (r->nodes[j].parent == i)
			folded_dfs(r, path, j, f);
}

/*
 * The folded text computed another way: each node's path built top-down from its
 * parent's (parents come first) in a table of strings, rather than walked up; then
 * the lines written by a recursive depth-first walk, rather than with a stack.
 */
static char *folded_reference(const struct rp_report *r)
{
	char **path = calloc(r->n_nodes + 1, sizeof(*path)), *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(path);
	assert_non_null(f);
	for (uint32_t i = 0; i < r->n_nodes; i++) {
		const struct rp_report_node *n = &r->nodes[i];
		char *clean = strdup(n->fn < r->n_fns ? r->fns[n->fn].name : "?");

		for (char *p = clean; *p; p++)
			if (*p == ';' || *p == '\n' || *p == '\r')
				*p = '_';
		if (n->parent == RP_NONE)
			path[i] = strdup("");
		else if (r->nodes[n->parent].parent == RP_NONE)
			path[i] = strdup(clean);
		else
			assert_true(asprintf(&path[i], "%s;%s", path[n->parent], clean) > 0);
		free(clean);
	}
	for (uint32_t i = 0; i < r->n_nodes; i++)
		if (r->nodes[i].parent == RP_NONE)
			folded_dfs(r, path, i, f);
	for (uint32_t i = 0; i < r->n_nodes; i++)
		free(path[i]);
	free(path);
	assert_int_equal(fclose(f), 0);
	return buf;
}

/* The sum of the values (after each line's last space). */
static uint64_t folded_sum(const char *text, uint32_t *lines)
{
	uint64_t sum = 0;

	*lines = 0;
	for (const char *p = text; *p;) {
		const char *nl = strchr(p, '\n'), *sp;

		assert_non_null(nl);
		for (sp = nl; sp > p && sp[-1] != ' '; sp--)
			;
		assert_true(sp > p && sp < nl);
		sum += strtoull(sp, NULL, 10);
		(*lines)++;
		p = nl + 1;
	}
	return sum;
}

static struct rp_report_fn folded_fns[] = {
	{ .name = "main" }, { .name = "a;b" }, { .name = "x\ny\r" }, { .name = "[other]" },
	{ .name = "leaf" }, { .name = "" },
};

/* parent, fn, calls, self, total: skipped nodes have no self time. */
static struct rp_report_node folded_nodes[] = {
	{ RP_NONE, RP_NONE, 0, 0, 0 },
	{ 0, 0, 1, 10, 100 },	/* main */
	{ 1, 1, 1, 20, 100 },	/* main;a;b */
	{ 2, 2, 1, 0, 50 },	/* main;a;b;x\ny\r: no self time */
	{ 3, 4, 1, 30, 30 },	/* ...;leaf */
	{ 1, 3, 9, 40, 40 },	/* main;[other] */
	{ 0, NO_FN, 1, 50, 50 }, /* no such function */
	{ 4, 5, 1, 60, 60 },	/* ...;leaf; (an empty name) */
	{ 0, 4, 1, 70, 70 },	/* leaf, another top */
	{ 2, 4, 1, 0, 0 },
};

static void test_render_folded_hand_built(void **state)
{
	struct rp_report r = { .fns = folded_fns, .n_fns = ARRAY_SIZE(folded_fns),
			       .nodes = folded_nodes, .n_nodes = ARRAY_SIZE(folded_nodes) };
	char *got = folded_mem(&r), *ref = folded_reference(&r);
	uint32_t lines;

	(void)state;
	/* Tree order: main's whole subtree, then the other tops' (the node made last,
	 * under leaf, comes right after it, not after the later tops). */
	assert_string_equal(got, "main 10\n"
				 "main;a_b 20\n"
				 "main;a_b;x_y_;leaf 30\n"
				 "main;a_b;x_y_;leaf; 60\n"
				 "main;[other] 40\n"
				 "? 50\n"
				 "leaf 70\n");
	assert_string_equal(got, ref);
	assert_int_equal(folded_sum(got, &lines), 280);
	assert_int_equal(lines, 7);
	free(got);
	free(ref);
	/* Nothing at all: no nodes, or only the root. */
	r.n_nodes = 0;
	got = folded_mem(&r);
	assert_string_equal(got, "");
	free(got);
	r.n_nodes = 1;
	got = folded_mem(&r);
	assert_string_equal(got, "");
	free(got);
}

/* Bytes a terminal obeys, in any name: none reaches folded or text output raw. */
static void assert_no_terminal_bytes(const char *out)
{
	for (const char *p = out; *p; p++)
		if (((unsigned char)*p < 0x20 && *p != '\n') || (unsigned char)*p == 0x7f ||
		    (unsigned char)*p == 0xff || memcmp(p, "\xc2\x9b", 2) == 0)
			fail_msg("byte 0x%02x at %td of:\n%s", (unsigned char)*p, p - out, out);
}

static void test_render_names_escaped_for_terminals(void **state)
{
	struct rp_report_fn fns[] = {
		{ .name = "ev\x1b[2J", .category = "c\x07" }, { .name = "bad\xff;x" },
		{ .name = "c1\xc2\x9b\x7f" }, { .name = "tab\tq \xc3\xa9" },
	};
	struct rp_report_node nodes[] = {
		{ RP_NONE, RP_NONE, 0, 0, 0 }, { 0, 0, 1, 10, 60 }, { 1, 1, 1, 20, 50 },
		{ 2, 2, 1, 30, 30 }, { 0, 3, 1, 5, 5 },
	};
	struct rp_report r = { .fns = fns, .n_fns = ARRAY_SIZE(fns), .nodes = nodes,
			       .n_nodes = ARRAY_SIZE(nodes) };
	char *got;

	(void)state;
	for (unsigned i = 0; i < ARRAY_SIZE(fns); i++)
		fns[i].calls = 1;
	got = folded_mem(&r);
	/* ';' stays '_', escapes as the text report's, valid UTF-8 and spaces kept */
	assert_string_equal(got, "ev\\x1b[2J 10\n"
				 "ev\\x1b[2J;bad\xef\xbf\xbd_x 20\n"
				 "ev\\x1b[2J;bad\xef\xbf\xbd_x;c1\\xc2\\x9b\\x7f 30\n"
				 "tab\\tq \xc3\xa9 5\n");
	free(got);
	got = text_mem(&r, 0);
	assert_no_terminal_bytes(got);
	assert_non_null(strstr(got, "ev\\x1b[2J"));
	assert_non_null(strstr(got, "c\\x07"));
	assert_non_null(strstr(got, "bad\xef\xbf\xbd;x"));
	assert_non_null(strstr(got, "c1\\xc2\\x9b\\x7f"));
	assert_non_null(strstr(got, "tab\\tq \xc3\xa9"));
	free(got);
}

/* A parent that is not an earlier node (a loop) is refused before anything is written. */
static void test_render_folded_bad_parent_refused(void **state)
{
	struct rp_report_node nodes[ARRAY_SIZE(folded_nodes)];
	struct rp_report r = { .fns = folded_fns, .n_fns = ARRAY_SIZE(folded_fns),
			       .nodes = nodes, .n_nodes = ARRAY_SIZE(nodes) };
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	(void)state;
	memcpy(nodes, folded_nodes, sizeof(nodes));
	nodes[4].parent = 4;
	assert_int_equal(rp_render_folded(&r, f), -EINVAL);
	nodes[4].parent = 7;
	assert_int_equal(rp_render_folded(&r, f), -EINVAL);
	nodes[4].parent = UINT32_MAX - 1;
	assert_int_equal(rp_render_folded(&r, f), -EINVAL);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(len, 0);
	free(buf);
}

/* Folded output of an analyzed trace: the reference's lines, summing to the self time
 * of all functions. */
static void check_folded_of_engine(struct rp_engine *e, const char *want_sorted)
{
	struct rp_report r;
	char *got, *ref;
	uint64_t self = 0;
	uint32_t lines, with_self = 0;

	assert_int_equal(rp_engine_report(e, &r), 0);
	got = folded_mem(&r);
	ref = folded_reference(&r);
	assert_string_equal(got, ref);
	for (uint32_t i = 0; i < r.n_fns; i++)
		self += r.fns[i].self_ns;
	for (uint32_t i = 1; i < r.n_nodes; i++)
		with_self += r.nodes[i].self_ns > 0;
	assert_true(self > 0);
	assert_int_equal(folded_sum(got, &lines), self);
	assert_int_equal(lines, with_self);
	if (want_sorted) {
		char *v[64], *copy = strdup(got), *save = NULL, *buf = NULL;
		size_t n = 0, len = 0;
		FILE *f = open_memstream(&buf, &len);

		for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
			assert_true(n < ARRAY_SIZE(v));
			v[n++] = l;
		}
		qsort(v, n, sizeof(*v), cmp_line);
		for (size_t i = 0; i < n; i++)
			fprintf(f, "%s\n", v[i]);
		assert_int_equal(fclose(f), 0);
		assert_string_equal(buf, want_sorted);
		free(buf);
		free(copy);
	}
	free(got);
	free(ref);
	rp_report_free(&r);
}

static void test_render_folded_analyzed_trace(void **state)
{
	/* Track 1.1: a [0, 10] holds b [1, 4] (holding c [2, 3]), b [5, 6] and "d;e" [7, 9]:
	 * a's self is 4 us. Track 1.2: a [0, 2]. Track 2.1: a [20, 25] holds a [21, 23]
	 * (recursion: a;a). */
	static const char trace[] =
		"[{\"name\":\"a\",\"ph\":\"X\",\"ts\":0,\"dur\":10,\"pid\":1,\"tid\":1},"
		"{\"name\":\"b\",\"ph\":\"X\",\"ts\":1,\"dur\":3,\"pid\":1,\"tid\":1},"
		"{\"name\":\"c\",\"ph\":\"X\",\"ts\":2,\"dur\":1,\"pid\":1,\"tid\":1},"
		"{\"name\":\"b\",\"ph\":\"X\",\"ts\":5,\"dur\":1,\"pid\":1,\"tid\":1},"
		"{\"name\":\"d;e\",\"ph\":\"X\",\"ts\":7,\"dur\":2,\"pid\":1,\"tid\":1},"
		"{\"name\":\"a\",\"ph\":\"X\",\"ts\":0,\"dur\":2,\"pid\":1,\"tid\":2},"
		"{\"name\":\"a\",\"ph\":\"X\",\"ts\":20,\"dur\":5,\"pid\":2,\"tid\":1},"
		"{\"name\":\"a\",\"ph\":\"X\",\"ts\":21,\"dur\":2,\"pid\":2,\"tid\":1}]";
	struct rp_engine *e;
	char why[RP_WHY_MAX] = "";

	(void)state;
	assert_int_equal(rp_engine_open(NULL, &e), 0);
	assert_int_equal(rp_import_chrome_buf(e, trace, sizeof(trace) - 1, "buf", why), 0);
	check_folded_of_engine(e, "a 9000\n"
				  "a;a 2000\n"
				  "a;b 3000\n"
				  "a;b;c 1000\n"
				  "a;d_e 2000\n");
	rp_engine_close(e);
}

/* The torch sample: hundreds of CCT nodes, the same checks. */
static void test_render_folded_torch_trace(void **state)
{
	const char *dir = getenv("RP_TESTDATA");
	struct rp_engine *e;
	char why[RP_WHY_MAX] = "", *path;

	(void)state;
	if (dir == NULL)
		skip();
	assert_true(asprintf(&path, "%s/torch/cpu_legacy_trace.json", dir) > 0);
	assert_int_equal(rp_engine_open(NULL, &e), 0);
	if (rp_import_chrome(e, path, NULL, NULL, why) != 0)
		fail_msg("%s: %s", path, why);
	check_folded_of_engine(e, NULL);
	rp_engine_close(e);
	free(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_render_json_tricky_round_trips),
		cmocka_unit_test(test_render_names_escaped_for_terminals),
		cmocka_unit_test(test_render_json_big_values_exact),
		cmocka_unit_test(test_render_json_empty_report),
		cmocka_unit_test(test_render_text_drops_marked),
		cmocka_unit_test(test_render_text_offcpu_column),
		cmocka_unit_test(test_render_bad_edge_refused),
		cmocka_unit_test(test_render_json_full_report),
		cmocka_unit_test(test_render_rate_exact),
		cmocka_unit_test(test_render_text_exact),
		cmocka_unit_test(test_render_requests_in_flight),
		cmocka_unit_test(test_render_text_limit_cuts_rows),
		cmocka_unit_test(test_render_text_nothing_lost),
		cmocka_unit_test(test_render_text_unmerged_said),
		cmocka_unit_test(test_render_text_caps_name_knobs),
		cmocka_unit_test(test_render_text_names_stay_on_one_line),
		cmocka_unit_test(test_render_text_full_report),
		cmocka_unit_test(test_render_text_full_report_limit),
		cmocka_unit_test(test_render_pstats_python_loads_tricky),
		cmocka_unit_test(test_render_pstats_python_loads_big),
		cmocka_unit_test(test_render_pstats_milestones_left_out),
		cmocka_unit_test(test_render_pstats_empty_is_empty_dict),
		cmocka_unit_test(test_render_pstats_bytes_one_entry),
		cmocka_unit_test(test_render_window_rate_covered),
		cmocka_unit_test(test_render_text_window_over_every_event),
		cmocka_unit_test(test_render_pstats_matches_reference_file),
		cmocka_unit_test(test_render_folded_hand_built),
		cmocka_unit_test(test_render_folded_bad_parent_refused),
		cmocka_unit_test(test_render_folded_analyzed_trace),
		cmocka_unit_test(test_render_folded_torch_trace),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
