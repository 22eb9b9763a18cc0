// SPDX-License-Identifier: MIT
/*
 * The streaming Chrome trace reader (engine/formats/trace_chrome.c). Small traces written
 * here, in both forms, plain and gzip, must give exactly the events spelled out
 * beside them: fields, µs -> ns conversion, ids, correlation, counter values, pid
 * and tid as text, nested and unknown values skipped at any depth. The torch
 * sample in tests/data is checked against a dumb byte scanner of its text
 * (events, "ph": "X", the sum of "dur"), and its gzip copy must give the same
 * sequence (a running hash of every field). Malformed input must fail with
 * -EINVAL and a "<where>: byte N: <what>" line, the offsets checked against the
 * length of the text before the bad token; a 10 MB string must be cut without
 * memory in proportion; the callback's value must stop the read.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <zlib.h>

#include "support.h"
#include "trace_chrome.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define MAX_RECS      32
#define TORCH_EVENTS  12978

/* ---- recording what the reader hands over ---- */

struct rec {
	char ph;
	char name[RP_CHROME_STR_MAX], cat[RP_CHROME_STR_MAX];
	char pid[RP_CHROME_STR_MAX], tid[RP_CHROME_STR_MAX];
	char id[RP_CHROME_STR_MAX], value_name[RP_CHROME_STR_MAX];
	int64_t ts, dur;
	bool has_ts, has_dur, has_corr, has_id, has_value;
	uint64_t corr;
	double value;
};

struct log {
	size_t n;
	uint64_t hash; /* FNV-1a over every field of every event, in order */
	int stop_at;   /* return stop_rc from event number stop_at (1-based); 0: never */
	int stop_rc;
	struct rec r[MAX_RECS];
};

static void fnv(uint64_t *h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		*h = (*h ^ b[i]) * 0x100000001b3ull;
}

static void hash_ev(uint64_t *h, const struct rp_chrome_ev *e)
{
	uint8_t flags = (uint8_t)(e->has_ts | e->has_dur << 1 | e->has_correlation << 2 |
				  e->has_id << 3 | e->has_value << 4);

	fnv(h, &e->ph, 1);
	fnv(h, e->name, strlen(e->name) + 1);
	fnv(h, e->cat, strlen(e->cat) + 1);
	fnv(h, e->pid, strlen(e->pid) + 1);
	fnv(h, e->tid, strlen(e->tid) + 1);
	fnv(h, e->id, strlen(e->id) + 1);
	fnv(h, e->value_name, strlen(e->value_name) + 1);
	fnv(h, &e->ts_ns, sizeof(e->ts_ns));
	fnv(h, &e->dur_ns, sizeof(e->dur_ns));
	fnv(h, &e->correlation, sizeof(e->correlation));
	fnv(h, &e->value, sizeof(e->value));
	fnv(h, &flags, 1);
}

static void copy_ev(struct rec *r, const struct rp_chrome_ev *e)
{
	r->ph = e->ph;
	strcpy(r->name, e->name);
	strcpy(r->cat, e->cat);
	strcpy(r->pid, e->pid);
	strcpy(r->tid, e->tid);
	strcpy(r->id, e->id);
	strcpy(r->value_name, e->value_name);
	r->ts = e->ts_ns;
	r->dur = e->dur_ns;
	r->has_ts = e->has_ts;
	r->has_dur = e->has_dur;
	r->has_corr = e->has_correlation;
	r->corr = e->correlation;
	r->has_id = e->has_id;
	r->has_value = e->has_value;
	r->value = e->value;
}

static int record(void *ctx, const struct rp_chrome_ev *e)
{
	struct log *l = ctx;

	assert_non_null(e->name);
	assert_true(strlen(e->name) < RP_CHROME_STR_MAX && strlen(e->cat) < RP_CHROME_STR_MAX);
	assert_true(strlen(e->pid) < RP_CHROME_STR_MAX && strlen(e->tid) < RP_CHROME_STR_MAX);
	assert_true(strlen(e->id) < RP_CHROME_STR_MAX);
	assert_true(strlen(e->value_name) < RP_CHROME_STR_MAX);
	if (l->n < MAX_RECS)
		copy_ev(&l->r[l->n], e);
	l->n++;
	hash_ev(&l->hash, e);
	if (l->stop_at != 0 && l->n == (size_t)l->stop_at)
		return l->stop_rc;
	return 0;
}

static void log_init(struct log *l)
{
	memset(l, 0, sizeof(*l));
	l->hash = 0xcbf29ce484222325ull;
}

/* ---- expected events ---- */

struct want {
	char ph;
	const char *name, *cat, *pid, *tid;
	bool has_ts;
	int64_t ts;
	bool has_dur;
	int64_t dur;
	bool has_id;
	const char *id;
	bool has_corr;
	uint64_t corr;
	bool has_value;
	double value;
	const char *value_name;
};

static void check_rec(const struct rec *r, const struct want *w)
{
	assert_int_equal(r->ph, w->ph);
	assert_string_equal(r->name, w->name ? w->name : "");
	assert_string_equal(r->cat, w->cat ? w->cat : "");
	assert_string_equal(r->pid, w->pid ? w->pid : "");
	assert_string_equal(r->tid, w->tid ? w->tid : "");
	assert_int_equal(r->has_ts, w->has_ts);
	assert_int_equal(r->ts, w->has_ts ? w->ts : 0);
	assert_int_equal(r->has_dur, w->has_dur);
	assert_int_equal(r->dur, w->has_dur ? w->dur : 0);
	assert_int_equal(r->has_id, w->has_id);
	assert_string_equal(r->id, w->has_id ? w->id : "");
	assert_int_equal(r->has_corr, w->has_corr);
	assert_int_equal(r->corr, w->has_corr ? w->corr : 0);
	assert_int_equal(r->has_value, w->has_value);
	assert_true(r->value == (w->has_value ? w->value : 0.0));
	assert_string_equal(r->value_name, w->has_value ? w->value_name : "");
}

/* gzip of @len bytes of @s; the caller frees. */
static unsigned char *gzip_mem(const void *s, size_t len, size_t *out_len)
{
	z_stream zs = {0};
	unsigned char *out;
	size_t cap;

	assert_int_equal(deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
	cap = deflateBound(&zs, (uLong)len) + 64;
	out = malloc(cap);
	assert_non_null(out);
	zs.next_in = (unsigned char *)s;
	zs.avail_in = (uInt)len;
	zs.next_out = out;
	zs.avail_out = (uInt)cap;
	assert_int_equal(deflate(&zs, Z_FINISH), Z_STREAM_END);
	*out_len = cap - zs.avail_out;
	deflateEnd(&zs);
	return out;
}

/*
 * Parses @text plain and gzipped, checks both give the same sequence and the same
 * stats, and that the events are @want.
 */
static void expect_events(const char *text, const struct want *want, size_t n,
			  uint64_t skipped, uint64_t cut)
{
	struct rp_chrome_stats st, gst;
	struct log plain, gz;
	char why[RP_WHY_MAX];
	unsigned char *z;
	size_t zlen;

	log_init(&plain);
	log_init(&gz);
	assert_int_equal(rp_chrome_parse(text, strlen(text), record, &plain, &st, why), 0);
	assert_int_equal(plain.n, n);
	assert_int_equal(st.events, n);
	assert_int_equal(st.skipped, skipped);
	assert_int_equal(st.cut, cut);
	assert_int_equal(st.bytes, strlen(text));
	for (size_t i = 0; i < n && i < MAX_RECS; i++)
		check_rec(&plain.r[i], &want[i]);

	z = gzip_mem(text, strlen(text), &zlen);
	assert_int_equal(rp_chrome_parse(z, zlen, record, &gz, &gst, why), 0);
	assert_int_equal(gz.n, n);
	assert_int_equal(gz.hash, plain.hash);
	assert_int_equal(gst.events, n);
	assert_int_equal(gst.skipped, skipped);
	assert_int_equal(gst.cut, cut);
	assert_int_equal(gst.bytes, zlen);
	free(z);
}

/* ---- small traces ---- */

static void test_trace_chrome_array_form_fields(void **state)
{
	static const char text[] =
		"[{\"name\": \"aten::zeros\", \"ph\": \"X\", \"ts\": 138, \"dur\": 57, \"tid\": 1,"
		" \"pid\": \"CPU functions\", \"args\": {}},\n"
		" {\"ph\":\"B\",\"name\":\"step\",\"cat\":\"user\",\"pid\":7,\"tid\":8,"
		"\"ts\":1000},\n"
		" {\"ph\":\"E\",\"pid\":7,\"tid\":8,\"ts\":2000.25},\n"
		" {\"ph\":\"i\",\"s\":\"g\",\"name\":\"mark\",\"ts\":5}, {}]";
	static const struct want want[] = {
		{.ph = 'X', .name = "aten::zeros", .pid = "CPU functions", .tid = "1",
		 .has_ts = true, .ts = 138000, .has_dur = true, .dur = 57000},
		{.ph = 'B', .name = "step", .cat = "user", .pid = "7", .tid = "8", .has_ts = true,
		 .ts = 1000000},
		{.ph = 'E', .pid = "7", .tid = "8", .has_ts = true, .ts = 2000250},
		{.ph = 'i', .name = "mark", .has_ts = true, .ts = 5000},
		{.ph = '\0'},
	};

	(void)state;
	expect_events(text, want, ARRAY_SIZE(want), 0, 0);
}

static void test_trace_chrome_ts_us_to_ns(void **state)
{
	/* Expected values worked out by hand: µs x 1000, rounded to nearest. */
	static const char text[] = "[{\"ts\": 1.5, \"dur\": 0}, {\"ts\": 1234567890123},"
				   " {\"ts\": 0.0004, \"dur\": 0.0006}, {\"ts\": -2.5},"
				   " {\"ts\": 1e3, \"dur\": 12.5}, {\"ts\": 9223372036854775},"
				   " {\"ts\": 123456789.123456}, {\"ts\": 1700000000123.25},"
				   " {\"dur\": 2.4996}, {\"ts\": -0},"
				   " {\"ts\": 0.0005, \"dur\": 1.0005},"
				   " {\"ts\": -0.0005, \"dur\": 0.0025}]";
	static const struct want want[] = {
		{.has_ts = true, .ts = 1500, .has_dur = true, .dur = 0},
		{.has_ts = true, .ts = 1234567890123000},
		{.has_ts = true, .ts = 0, .has_dur = true, .dur = 1},
		{.has_ts = true, .ts = -2500},
		{.has_ts = true, .ts = 1000000, .has_dur = true, .dur = 12500},
		{.has_ts = true, .ts = INT64_C(9223372036854775000)},
		{.has_ts = true, .ts = 123456789123},
		{.has_ts = true, .ts = 1700000000123250},
		{.has_dur = true, .dur = 2500},
		{.has_ts = true, .ts = 0},
		/* x 1000 is exactly n + 0.5 in double: halves go away from zero, as llround. */
		{.has_ts = true, .ts = 1, .has_dur = true, .dur = 1001},
		{.has_ts = true, .ts = -1, .has_dur = true, .dur = 3},
	};

	(void)state;
	expect_events(text, want, ARRAY_SIZE(want), 0, 0);
}

static void test_trace_chrome_ids_and_correlation(void **state)
{
	static const char text[] =
		"[{\"ph\":\"s\",\"id\":5,\"args\":{\"correlation\":123456789012}},"
		" {\"ph\":\"f\",\"id\":\"0x1a\",\"args\":{\"x\":{\"correlation\":9},\"y\":[1]}},"
		" {\"ph\":\"b\",\"id\":2.0,\"args\":{\"correlation\":\"5\"}},"
		" {\"ph\":\"e\",\"id\":2.5,\"args\":{\"correlation\":1.5}},"
		" {\"ph\":\"X\",\"id\":true,\"correlation\":4,\"args\":{\"correlation\":-3}},"
		" {\"ph\":\"X\",\"args\":{\"correlation\":18446744073709551615}},"
		" {\"ph\":\"X\",\"args\":{\"correlation\":18446744073709551616}}]";
	static const struct want want[] = {
		{.ph = 's', .has_id = true, .id = "5", .has_corr = true, .corr = 123456789012},
		{.ph = 'f', .has_id = true, .id = "0x1a"},
		{.ph = 'b', .has_id = true, .id = "2"},
		{.ph = 'e', .has_id = true, .id = "2.5"},
		{.ph = 'X'},
		{.ph = 'X', .has_corr = true, .corr = UINT64_MAX},
		{.ph = 'X'},
	};

	(void)state;
	expect_events(text, want, ARRAY_SIZE(want), 0, 0);
}

static void test_trace_chrome_counter_value(void **state)
{
	char text[2048], key[600], cut_key[RP_CHROME_STR_MAX];
	struct want want[] = {
		{.ph = 'C', .name = "mem", .has_value = true, .value = 1024.5,
		 .value_name = "bytes"},
		{.ph = 'C', .name = "cpu", .has_value = true, .value = -3, .value_name = "load"},
		{.ph = 'C', .name = "none"},
		{.ph = 'X', .name = "not a counter"},
		{.ph = 'C', .name = "long key", .has_value = true, .value = 1e-3,
		 .value_name = cut_key},
	};

	(void)state;
	memset(key, 'k', sizeof(key) - 1);
	key[sizeof(key) - 1] = '\0';
	memcpy(cut_key, key, RP_CHROME_STR_MAX - 1);
	cut_key[RP_CHROME_STR_MAX - 1] = '\0';
	snprintf(text, sizeof(text),
		 "[{\"ph\":\"C\",\"name\":\"mem\",\"args\":{\"label\":\"x\",\"n\":{\"v\":1},"
		 "\"bytes\":1024.5,\"other\":3}},"
		 " {\"args\":{\"load\":-3,\"f\":1},\"name\":\"cpu\",\"ph\":\"C\"},"
		 " {\"ph\":\"C\",\"name\":\"none\","
		 "\"args\":{\"a\":[1,2],\"b\":{\"c\":3},\"d\":true}},"
		 " {\"ph\":\"X\",\"name\":\"not a counter\",\"args\":{\"v\":1}},"
		 " {\"ph\":\"C\",\"name\":\"long key\",\"args\":{\"%s\":1e-3}}]",
		 key);
	expect_events(text, want, ARRAY_SIZE(want), 0, 1);
}

static void test_trace_chrome_pid_tid_text(void **state)
{
	static const char text[] = "[{\"pid\":\"CPU functions\",\"tid\":123},"
				   " {\"pid\":7.0,\"tid\":1.5},"
				   " {\"pid\":-1,\"tid\":99999999999999999999},"
				   " {\"pid\":1e3,\"tid\":null},"
				   " {\"pid\":{\"a\":1},\"tid\":[2],\"name\":5,\"cat\":false}]";
	static const struct want want[] = {
		{.pid = "CPU functions", .tid = "123"},
		{.pid = "7", .tid = "1.5"},
		{.pid = "-1", .tid = "99999999999999999999"},
		{.pid = "1000", .tid = ""},
		{.name = "5"},
	};

	(void)state;
	expect_events(text, want, ARRAY_SIZE(want), 0, 0);
}

static void test_trace_chrome_skips_nested_and_unknown(void **state)
{
	/* Keys that matter at the event level appear deeper, where they must not count. */
	static const char text[] =
		"[{\"ph\":\"X\","
		"\"stack\":[[\"a\",[{\"name\":\"bad\",\"ts\":\"x\"}]],{\"ph\":\"Z\"}],"
		"\"name\":\"ok\",\"unknown\":{\"args\":{\"correlation\":1},\"traceEvents\":[{}]},"
		"\"args\":{\"deep\":[[[[[[[[[[{\"ts\":null,\"dur\":{}}]]]]]]]]]],"
		"\"obj\":{\"a\":{\"b\":{\"c\":{\"d\":{\"e\":[\"}]\\\"\"]}}}}},"
		"\"correlation\":11},\"ts\":3,\"x\":[],\"y\":{},\"z\":null,\"w\":true},"
		" {\"name\":\"second\",\"ph\":\"i\",\"ts\":4}]";
	static const struct want want[] = {
		{.ph = 'X', .name = "ok", .has_ts = true, .ts = 3000, .has_corr = true, .corr = 11},
		{.ph = 'i', .name = "second", .has_ts = true, .ts = 4000},
	};

	(void)state;
	expect_events(text, want, ARRAY_SIZE(want), 0, 0);
}

static void test_trace_chrome_non_objects_skipped(void **state)
{
	static const char text[] = "[1, \"x\", null, [{\"ph\":\"X\"}], {\"ph\":\"i\"}, true, [],"
				   " -2.5, {\"ph\":\"n\"}]";
	static const struct want want[] = {{.ph = 'i'}, {.ph = 'n'}};

	(void)state;
	expect_events(text, want, ARRAY_SIZE(want), 7, 0);
}

static void test_trace_chrome_empty_traces(void **state)
{
	static const char *const texts[] = {
		"[]", " [ ]\n", "{\"traceEvents\": []}",
		"{\"a\": {\"traceEvents\": [{}]}, \"traceEvents\": [], \"b\": [1]}",
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(texts); i++)
		expect_events(texts[i], NULL, 0, 0, 0);
}

static void test_trace_chrome_escapes_decoded(void **state)
{
	static const char text[] = "[{\"name\":\"q\\\"b\\\\s\\/n\\n\\u00e9\\ud83d\\ude00\","
				   "\"cat\":\"\xc3\xa9t\xc3\xa9\",\"ph\":\"X\"}]";
	static const struct want want[] = {
		{.ph = 'X',
		 .name = "q\"b\\s/n\n\xc3\xa9\xf0\x9f\x98\x80",
		 .cat = "\xc3\xa9t\xc3\xa9"},
	};

	(void)state;
	expect_events(text, want, ARRAY_SIZE(want), 0, 0);
}

/* A Kineto-like object: the events after a large "metadata" object and others. */
static char *kineto_text(size_t *len)
{
	size_t cap = 512 * 1024, n = 0;
	char *s = malloc(cap);

	assert_non_null(s);
	n += (size_t)snprintf(s + n, cap - n,
			      "{\"schemaVersion\": 1, \"deviceProperties\": [{\"id\": 0, \"name\":"
			      " \"GPU\"}],\n \"metadata\": {\"runs\": [");
	for (int i = 0; i < 3000; i++)
		n += (size_t)snprintf(s + n, cap - n,
				      "%s{\"traceEvents\": [{\"ph\": \"X\", \"ts\": \"no\"}],"
				      " \"ph\": \"X\", \"i\": %d,"
				      " \"v\": [[%d.5], {\"ts\": [null]}]}",
				      i ? ", " : "", i, i);
	n += (size_t)snprintf(
		s + n, cap - n,
		"]},\n \"traceEvents\": [\n"
		"  {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::mm\", \"pid\": 1234,"
		" \"tid\": 5678, \"ts\": 1700000000123.250, \"dur\": 12.5,"
		" \"args\": {\"External id\": 3, \"correlation\": 77, \"Sequence number\": 9}},\n"
		"  {\"ph\": \"s\", \"id\": 77, \"pid\": 1234, \"tid\": 5678,"
		" \"ts\": 1700000000124.0, \"cat\": \"ac2g\", \"name\": \"ac2g\"},\n"
		"  {\"ph\": \"f\", \"id\": 77, \"pid\": 0, \"tid\": 7, \"ts\": 1700000000130,"
		" \"cat\": \"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"},\n"
		"  {\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1234, \"tid\": 0,"
		" \"args\": {\"name\": \"python\"}}\n ],\n"
		" \"traceName\": \"t.json\", \"displayTimeUnit\": \"ms\"}\n");
	assert_true(n < cap - 1);
	*len = n;
	return s;
}

static const struct want kineto_want[] = {
	{.ph = 'X', .name = "aten::mm", .cat = "cpu_op", .pid = "1234", .tid = "5678",
	 .has_ts = true, .ts = 1700000000123250, .has_dur = true, .dur = 12500, .has_corr = true,
	 .corr = 77},
	{.ph = 's', .name = "ac2g", .cat = "ac2g", .pid = "1234", .tid = "5678", .has_ts = true,
	 .ts = 1700000000124000, .has_id = true, .id = "77"},
	{.ph = 'f', .name = "ac2g", .cat = "ac2g", .pid = "0", .tid = "7", .has_ts = true,
	 .ts = 1700000000130000, .has_id = true, .id = "77"},
	{.ph = 'M', .name = "process_name", .pid = "1234", .tid = "0"},
};

static void test_trace_chrome_object_form_after_metadata(void **state)
{
	size_t len;
	char *text = kineto_text(&len);

	(void)state;
	assert_true(len > 3 * 64 * 1024); /* the events come after several chunks */
	expect_events(text, kineto_want, ARRAY_SIZE(kineto_want), 0, 0);
	free(text);
}

/* ---- files ---- */

static const char *testdata(void)
{
	static char path[4096];
	const char *env = getenv("RP_TESTDATA"), *slash = strrchr(__FILE__, '/');

	if (env != NULL && env[0] != '\0')
		return env;
	/* By hand: tests/data beside this file. */
	snprintf(path, sizeof(path), "%.*s/data",
		 slash ? (int)(slash - __FILE__) : 1, slash ? __FILE__ : ".");
	return path;
}

static const char *torch_path(void)
{
	static char path[4200];

	snprintf(path, sizeof(path), "%s/torch/cpu_legacy_trace.json", testdata());
	return path;
}

#define slurp rp_test_slurp

static void write_gz(const char *path, const void *s, size_t n)
{
	gzFile gz = gzopen(path, "wb");

	assert_non_null(gz);
	assert_int_equal(gzwrite(gz, s, (unsigned)n), (int)n);
	assert_int_equal(gzclose(gz), Z_OK);
}

static off_t file_size(const char *path)
{
	struct stat sb;

	assert_int_equal(stat(path, &sb), 0);
	return sb.st_size;
}

struct progress {
	int calls;
	uint64_t last, total;
	bool monotonic;
};

/* ---- the torch sample ---- */

/*
 * The dumb reference: occurrences of @needle in @s, and the sum of the integers
 * after them. A plain byte loop (strstr under ASan rescans the whole text per call).
 */
static size_t scan_count(const char *s, const char *needle, long long *sum, size_t *zeros)
{
	size_t n = 0, k = strlen(needle);

	*sum = 0;
	*zeros = 0;
	for (const char *p = s; *p != '\0'; p++) {
		long long v;

		if (strncmp(p, needle, k) != 0)
			continue;
		v = strtoll(p + k, NULL, 10);
		*sum += v;
		*zeros += v == 0;
		n++;
	}
	return n;
}

struct torch_log {
	struct log log;
	int64_t dur_sum;
	size_t zeros, x;
	struct progress prog;
};

static int torch_record(void *ctx, const struct rp_chrome_ev *e)
{
	struct torch_log *t = ctx;

	assert_true(e->has_ts && e->has_dur);
	t->dur_sum += e->dur_ns;
	t->zeros += e->dur_ns == 0;
	t->x += e->ph == 'X';
	return record(&t->log, e);
}

static void torch_progress(void *ctx, uint64_t bytes, uint64_t total)
{
	struct torch_log *t = ctx;

	t->prog.monotonic &= t->prog.calls == 0 || bytes > t->prog.last;
	t->prog.calls++;
	t->prog.last = bytes;
	t->prog.total = total;
}

static void torch_read(const char *path, struct torch_log *t, struct rp_chrome_stats *st)
{
	char why[RP_WHY_MAX];
	int rc;

	memset(t, 0, sizeof(*t));
	log_init(&t->log);
	t->prog.monotonic = true;
	rc = rp_chrome_read(path, torch_record, torch_progress, t, st, why);
	if (rc != 0)
		fail_msg("rp_chrome_read: %d %s", rc, why);
}

static void test_trace_chrome_torch_sample(void **state)
{
	struct rp_chrome_stats st;
	struct torch_log t;
	size_t len, zeros, zeros2;
	long long dur_us, unused;
	char *text = slurp(torch_path(), &len);
	const struct rec *r;

	(void)state;
	torch_read(torch_path(), &t, &st);
	assert_int_equal(scan_count(text, "\"ph\": ", &unused, &zeros2), TORCH_EVENTS);
	assert_int_equal(scan_count(text, "\"ph\": \"X\"", &unused, &zeros2), TORCH_EVENTS);
	assert_int_equal(scan_count(text, "\"dur\": ", &dur_us, &zeros), TORCH_EVENTS);
	assert_int_equal(t.log.n, TORCH_EVENTS);
	assert_int_equal(t.x, TORCH_EVENTS);
	assert_int_equal(t.dur_sum, dur_us * 1000);
	assert_int_equal(t.zeros, zeros);
	assert_int_equal(st.events, TORCH_EVENTS);
	assert_int_equal(st.skipped, 0);
	assert_int_equal(st.cut, 0);
	assert_int_equal(st.bytes, len);
	/* 1.37 MiB: one report past the first MiB, one at the end. */
	assert_int_equal(t.prog.calls, 2);
	assert_true(t.prog.monotonic);
	assert_int_equal(t.prog.last, len);
	assert_int_equal(t.prog.total, len);
	r = &t.log.r[0]; /* the file's first event, as its text shows */
	check_rec(r, &(struct want){.ph = 'X', .name = "aten::zeros", .pid = "CPU functions",
				    .tid = "1", .has_ts = true, .ts = 138000, .has_dur = true,
				    .dur = 57000});
	free(text);
}

static void test_trace_chrome_torch_gzip_same_sequence(void **state)
{
	struct rp_chrome_stats st, gst, bst;
	struct torch_log t, g;
	struct log b;
	char path[64], why[RP_WHY_MAX];
	size_t len, glen;
	char *text = slurp(torch_path(), &len), *gz;

	(void)state;
	rp_test_temp_path(path, ".json.gz");
	write_gz(path, text, len);
	torch_read(torch_path(), &t, &st);
	torch_read(path, &g, &gst);
	assert_int_equal(g.log.n, TORCH_EVENTS);
	assert_int_equal(g.log.hash, t.log.hash);
	assert_int_equal(g.dur_sum, t.dur_sum);
	assert_int_equal(gst.bytes, (uint64_t)file_size(path)); /* compressed bytes */
	assert_int_equal(g.prog.last, gst.bytes);
	assert_int_equal(g.prog.total, gst.bytes);
	assert_true(g.prog.calls >= 1 && g.prog.monotonic);

	gz = slurp(path, &glen); /* and the same gzip bytes from memory */
	log_init(&b);
	assert_int_equal(rp_chrome_parse(gz, glen, record, &b, &bst, why), 0);
	assert_int_equal(b.n, TORCH_EVENTS);
	assert_int_equal(b.hash, t.log.hash);
	assert_int_equal(bst.bytes, glen);
	unlink(path);
	free(gz);
	free(text);
}

/* ---- chunk boundaries: a generated file with escapes and long strings ---- */

#define GEN_EVENTS 3000

static void gen_event(FILE *f, int i)
{
	fprintf(f, "%s{\"name\":\"ev\\\"%d\\\\\\u00e9\\ud83d\\ude00", i ? ",\n" : "[", i);
	if (i % 50 == 7) /* 30000 raw bytes of escapes: 5000 x e-acute, 10000 bytes */
		for (int k = 0; k < 5000; k++)
			fputs("\\u00e9", f);
	if (i % 50 == 31) /* 10000 bytes of raw UTF-8 */
		for (int k = 0; k < 5000; k++)
			fputs("\xc3\xa9", f);
	if (i % 50 == 7 || i % 50 == 31) /* past the cut: escaped quotes must not end it */
		fputs("\\\"\\\\\\\"\\u0022\\\\", f);
	fprintf(f, "\",\"ph\":\"X\",\"ts\":%d.5,\"dur\":%d,\"pid\":%d,\"tid\":\"t%d\",\"args\":"
		   "{\"nested\":[[[{\"name\":\"no\"}]]],\"correlation\":%d}}",
		i, i * 7, i % 3, i, i);
}

/* What gen_event() wrote for event @i, as the reader must hand it over. */
static void gen_want(int i, char name[RP_CHROME_STR_MAX], char tid[32], char pid[32])
{
	int n = snprintf(name, RP_CHROME_STR_MAX, "ev\"%d\\\xc3\xa9\xf0\x9f\x98\x80", i);

	/* Cut to 511 bytes, at a character boundary: 2-byte e-acutes fill to 510 or 511. */
	if (i % 50 == 7 || i % 50 == 31) {
		while (n + 2 <= RP_CHROME_STR_MAX - 1)
			n += snprintf(name + n, RP_CHROME_STR_MAX - (size_t)n, "\xc3\xa9");
	}
	snprintf(tid, 32, "t%d", i);
	snprintf(pid, 32, "%d", i % 3);
}

struct gen_check {
	int next;
};

static int gen_record(void *ctx, const struct rp_chrome_ev *e)
{
	struct gen_check *g = ctx;
	char name[RP_CHROME_STR_MAX], tid[32], pid[32];
	int i = g->next++;

	gen_want(i, name, tid, pid);
	assert_string_equal(e->name, name);
	assert_string_equal(e->tid, tid);
	assert_string_equal(e->pid, pid);
	assert_int_equal(e->ph, 'X');
	assert_int_equal(e->ts_ns, (int64_t)i * 1000 + 500);
	assert_int_equal(e->dur_ns, (int64_t)i * 7000);
	assert_true(e->has_correlation);
	assert_int_equal(e->correlation, i);
	return 0;
}

static void test_trace_chrome_chunk_boundaries(void **state)
{
	struct rp_chrome_stats st;
	struct gen_check g;
	char path[64], gzpath[64], why[RP_WHY_MAX];
	size_t len;
	FILE *f;
	char *text;
	const char *paths[] = {path, gzpath};
	const uint64_t cuts = 2 * (GEN_EVENTS / 50); /* two long names in every 50 */

	(void)state;
	rp_test_temp_path(path, ".json");
	rp_test_temp_path(gzpath, ".json.gz");
	f = fopen(path, "wb");
	assert_non_null(f);
	for (int i = 0; i < GEN_EVENTS; i++)
		gen_event(f, i);
	fputs("]\n", f);
	assert_int_equal(fclose(f), 0);
	text = slurp(path, &len);
	assert_true(len > 20 * 64 * 1024);
	write_gz(gzpath, text, len);

	for (size_t k = 0; k < ARRAY_SIZE(paths); k++) {
		g.next = 0;
		assert_int_equal(rp_chrome_read(paths[k], gen_record, NULL, &g, &st, why), 0);
		assert_int_equal(g.next, GEN_EVENTS);
		assert_int_equal(st.events, GEN_EVENTS);
		assert_int_equal(st.cut, cuts);
	}
	g.next = 0;
	assert_int_equal(rp_chrome_parse(text, len, gen_record, &g, &st, why), 0);
	assert_int_equal(g.next, GEN_EVENTS);
	assert_int_equal(st.cut, cuts);
	unlink(path);
	unlink(gzpath);
	free(text);
}

static void test_trace_chrome_gzip_members_concatenated(void **state)
{
	static const char part1[] = "[{\"ph\":\"X\",\"name\":\"a\"},", part2[] = "{\"ph\":\"Y\"}]";
	unsigned char *z1, *z2, *both;
	size_t n1, n2;
	char path[64], why[RP_WHY_MAX];
	struct log l;

	(void)state;
	z1 = gzip_mem(part1, strlen(part1), &n1);
	z2 = gzip_mem(part2, strlen(part2), &n2);
	both = malloc(n1 + n2);
	assert_non_null(both);
	memcpy(both, z1, n1);
	memcpy(both + n1, z2, n2);
	log_init(&l);
	assert_int_equal(rp_chrome_parse(both, n1 + n2, record, &l, NULL, why), 0);
	assert_int_equal(l.n, 2);
	assert_string_equal(l.r[0].name, "a");
	assert_int_equal(l.r[1].ph, 'Y');

	rp_test_temp_path(path, ".json.gz"); /* gzread reads the members on, too */
	rp_test_write_file(path, both, n1 + n2);
	log_init(&l);
	assert_int_equal(rp_chrome_read(path, record, NULL, &l, NULL, why), 0);
	assert_int_equal(l.n, 2);
	assert_int_equal(l.r[1].ph, 'Y');
	unlink(path);
	free(both);
	free(z2);
	free(z1);
}

/* ---- errors ---- */

static int count_only(void *ctx, const struct rp_chrome_ev *e)
{
	(void)e;
	(*(int *)ctx)++;
	return 0;
}

/* Parses @text and expects -EINVAL with exactly @why, or "buffer: byte " if NULL. */
static void expect_invalid(const char *text, size_t len, const char *why_want)
{
	char why[RP_WHY_MAX];
	int n = 0, rc = rp_chrome_parse(text, len, count_only, &n, NULL, why);

	if (rc != -EINVAL)
		fail_msg("%.60s: rc %d, why \"%s\"", text, rc, why);
	if (why_want != NULL)
		assert_string_equal(why, why_want);
	else
		assert_true(strncmp(why, "buffer: byte ", 13) == 0);
}

static void test_trace_chrome_malformed_inputs(void **state)
{
	static const char *const texts[] = {
		"",
		"[{\"ph\":\"X\"",
		"[{\"ph\":\"X\"},",
		"{\"traceEvents\": [{}]",
		"\"str\"",
		"null",
		"{\"traceEvents\": {\"a\": []}}",
		"{\"other\": [1, 2]}",
		"[{\"dur\": null}]",
		"[{\"dur\": [1]}]",
		"[{\"ts\": 9223372036854776}]",
		"[{\"ts\": 1e300}]",
		"[] []",
		"[1,]",
		"{'traceEvents': []}",
		"[{\"name\": \"a\" \"b\"}]",
		"[\x1f\x8b]",
	};
	char why[RP_WHY_MAX], digits[1200];

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(texts); i++)
		expect_invalid(texts[i], strlen(texts[i]), NULL);

	/* The offset is the length of the text up to the end of the bad token. */
	snprintf(why, sizeof(why), "buffer: byte %zu: the top level is a number, not an array or"
		 " an object", strlen("42"));
	expect_invalid("42", 2, why);
	snprintf(why, sizeof(why), "buffer: byte %zu: \"traceEvents\" is a number, not an array",
		 strlen("{\"traceEvents\": 5"));
	expect_invalid("{\"traceEvents\": 5}", 18, why);
	snprintf(why, sizeof(why), "buffer: byte %zu: \"ts\" is a string, not a number",
		 strlen("{\"traceEvents\":[{\"ts\":\"x\""));
	expect_invalid("{\"traceEvents\":[{\"ts\":\"x\"}]}", 28, why);
	snprintf(why, sizeof(why), "buffer: byte %zu: parse error: premature EOF",
		 strlen("[{\"ph\":\"X\""));
	expect_invalid("[{\"ph\":\"X\"", 10, why);
	snprintf(why, sizeof(why), "buffer: byte %zu: no \"traceEvents\" array in the top-level"
		 " object", strlen("{\"a\": 1}"));
	expect_invalid("{\"a\": 1}", 8, why);

	/* A number token longer than the reader holds: refused where it gets too long. */
	digits[0] = '[';
	memset(digits + 1, '7', sizeof(digits) - 3);
	digits[sizeof(digits) - 2] = ']';
	digits[sizeof(digits) - 1] = '\0';
	expect_invalid(digits, strlen(digits), "buffer: byte 1025: number longer than 1024 bytes");
}

static void test_trace_chrome_invalid_utf8_no_crash(void **state)
{
	static const char *const texts[] = {
		"[{\"name\":\"\xff\xfe\",\"ph\":\"X\"}]",
		"[{\"name\":\"\xc3\",\"ph\":\"X\"}]",
		"[{\"name\":\"\xed\xa0\x80\"}]",
		"[{\"name\":\"\\ud800\"}]",
		"[{\"name\":\"\\udc00\\ud800x\"}]",
		"[{\"\xff\":1}]",
	};
	char why[RP_WHY_MAX];

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(texts); i++) {
		int n = 0, rc = rp_chrome_parse(texts[i], strlen(texts[i]), count_only, &n, NULL,
						why);

		assert_true(rc == 0 || rc == -EINVAL);
		if (rc == -EINVAL)
			assert_non_null(strstr(why, "byte "));
	}
}

static void test_trace_chrome_truncated_gzip(void **state)
{
	char path[64], why[RP_WHY_MAX];
	size_t len, zlen;
	char *text = slurp(torch_path(), &len);
	unsigned char *z = gzip_mem(text, len, &zlen);
	int n = 0, rc;

	(void)state;
	/* In memory: cut in the middle, and cut just before the 8-byte trailer ends. */
	rc = rp_chrome_parse(z, zlen / 2, count_only, &n, NULL, why);
	assert_int_equal(rc, -EINVAL);
	assert_non_null(strstr(why, "truncated gzip"));
	assert_true(strncmp(why, "buffer: byte ", 13) == 0);
	rc = rp_chrome_parse(z, zlen - 3, count_only, &n, NULL, why);
	assert_int_equal(rc, -EINVAL);
	assert_non_null(strstr(why, "truncated gzip"));

	/* A file, through gzread. */
	rp_test_temp_path(path, ".json.gz");
	rp_test_write_file(path, z, zlen / 2);
	rc = rp_chrome_read(path, count_only, NULL, &n, NULL, why);
	assert_int_equal(rc, -EINVAL);
	assert_true(strncmp(why, path, strlen(path)) == 0);
	assert_non_null(strstr(why, ": byte "));
	assert_non_null(strstr(why, "truncated gzip"));

	/* Corrupt data in the middle: refused, whichever check trips first. */
	z[zlen / 2] ^= 0x55;
	z[zlen / 2 + 1] ^= 0xaa;
	rp_test_write_file(path, z, zlen);
	assert_int_equal(rp_chrome_read(path, count_only, NULL, &n, NULL, why), -EINVAL);
	assert_non_null(strstr(why, ": byte "));
	assert_int_equal(rp_chrome_parse(z, zlen, count_only, &n, NULL, why), -EINVAL);
	unlink(path);
	free(z);
	free(text);
}

static void test_trace_chrome_missing_file(void **state)
{
	char why[RP_WHY_MAX];
	int n = 0;

	(void)state;
	assert_int_equal(rp_chrome_read("/nonexistent/trace.json", count_only, NULL, &n, NULL, why),
			 -ENOENT);
	assert_string_equal(why, "/nonexistent/trace.json: No such file or directory");
	assert_int_equal(n, 0);
	assert_int_equal(rp_chrome_read("/", count_only, NULL, &n, NULL, why), -EISDIR);
	assert_string_equal(why, "/: Is a directory");
}

/* ---- bounded memory ---- */

#define BIG (10u * 1000 * 1000)

static long maxrss_kib(void)
{
	struct rusage ru;

	assert_int_equal(getrusage(RUSAGE_SELF, &ru), 0);
	return ru.ru_maxrss;
}

static int expect_long_name(void *ctx, const struct rp_chrome_ev *e)
{
	size_t n = strlen(e->name);

	(*(int *)ctx)++;
	assert_int_equal(n, RP_CHROME_STR_MAX - 1);
	assert_true(e->name[0] == 'a' && e->name[n - 1] == 'a');
	assert_int_equal(e->ts_ns, 42000);
	return 0;
}

static void test_trace_chrome_long_name_bounded(void **state)
{
	static const char head[] = "[{\"ph\":\"X\",\"name\":\"", tail[] = "\",\"ts\":42}]";
	struct rp_chrome_stats st;
	char path[64], why[RP_WHY_MAX], block[64 * 1024];
	long before;
	int n = 0;
	FILE *f;
	char *text;

	(void)state;
	/* Written a block at a time, so that this process never holds 10 MB itself. */
	rp_test_temp_path(path, ".json");
	f = fopen(path, "wb");
	assert_non_null(f);
	memset(block, 'a', sizeof(block));
	fputs(head, f);
	for (size_t left = BIG; left > 0; left -= left < sizeof(block) ? left : sizeof(block))
		fwrite(block, 1, left < sizeof(block) ? left : sizeof(block), f);
	fputs(tail, f);
	assert_int_equal(fclose(f), 0);

	before = maxrss_kib();
	assert_int_equal(rp_chrome_read(path, expect_long_name, NULL, &n, &st, why), 0);
	assert_int_equal(n, 1);
	assert_int_equal(st.cut, 1);
	assert_true(maxrss_kib() - before < 4096); /* far below the string's 10 MB */

	/* The same from memory. */
	text = slurp(path, &(size_t){0});
	n = 0;
	assert_int_equal(rp_chrome_parse(text, strlen(text), expect_long_name, &n, &st, why), 0);
	assert_int_equal(n, 1);
	assert_int_equal(st.cut, 1);
	unlink(path);
	free(text);
}

/* ---- the callback's value ---- */

static void test_trace_chrome_callback_stops(void **state)
{
	struct rp_chrome_stats st;
	char why[RP_WHY_MAX];
	struct log l;
	static const char text[] = "[{\"ph\":\"a\"},{\"ph\":\"b\"},{\"ph\":\"c\"},{\"ph\":\"d\"}]";

	(void)state;
	log_init(&l);
	l.stop_at = 3;
	l.stop_rc = 7;
	assert_int_equal(rp_chrome_read(torch_path(), record, NULL, &l, &st, why), 7);
	assert_int_equal(l.n, 3);
	assert_int_equal(st.events, 3);

	log_init(&l);
	l.stop_at = 3;
	l.stop_rc = 7;
	assert_int_equal(rp_chrome_parse(text, strlen(text), record, &l, &st, why), 7);
	assert_int_equal(l.n, 3);
	assert_int_equal(l.r[2].ph, 'c');

	log_init(&l); /* a negative value, even -EINVAL, comes back as it is */
	l.stop_at = 1;
	l.stop_rc = -EINVAL;
	why[0] = '\0';
	assert_int_equal(rp_chrome_parse(text, strlen(text), record, &l, &st, why), -EINVAL);
	assert_int_equal(l.n, 1);
	assert_string_equal(why, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_trace_chrome_array_form_fields),
		cmocka_unit_test(test_trace_chrome_ts_us_to_ns),
		cmocka_unit_test(test_trace_chrome_ids_and_correlation),
		cmocka_unit_test(test_trace_chrome_counter_value),
		cmocka_unit_test(test_trace_chrome_pid_tid_text),
		cmocka_unit_test(test_trace_chrome_skips_nested_and_unknown),
		cmocka_unit_test(test_trace_chrome_non_objects_skipped),
		cmocka_unit_test(test_trace_chrome_empty_traces),
		cmocka_unit_test(test_trace_chrome_escapes_decoded),
		cmocka_unit_test(test_trace_chrome_object_form_after_metadata),
		cmocka_unit_test(test_trace_chrome_long_name_bounded),
		cmocka_unit_test(test_trace_chrome_torch_sample),
		cmocka_unit_test(test_trace_chrome_torch_gzip_same_sequence),
		cmocka_unit_test(test_trace_chrome_chunk_boundaries),
		cmocka_unit_test(test_trace_chrome_gzip_members_concatenated),
		cmocka_unit_test(test_trace_chrome_malformed_inputs),
		cmocka_unit_test(test_trace_chrome_invalid_utf8_no_crash),
		cmocka_unit_test(test_trace_chrome_truncated_gzip),
		cmocka_unit_test(test_trace_chrome_missing_file),
		cmocka_unit_test(test_trace_chrome_callback_stops),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
