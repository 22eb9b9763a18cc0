// SPDX-License-Identifier: MIT
/*
 * The Chrome reader's whole-event path (trace_chrome.c, "events read by
 * structure") against the paths it stands in front of: every input read three
 * ways, as shipped, with rp_chrome_events_off (jfast token by token, callbacks)
 * and with rp_jfast_off (yajl alone, the reference), and all three must agree on
 * everything a caller sees: the return value, the error text and its byte offset,
 * the counters, and every field of every event in order.
 *
 * Inputs: generated events of every shape the path reads or hands back (escapes
 * and UTF-8 in used and skipped strings, braces and quotes inside strings, every
 * number form, unknown and repeated keys, nested args, literals, long strings),
 * valid and with errors; one such trace shifted so that a 64 KiB chunk end falls
 * at every byte of the events around it (files, plain and gzip); a small trace
 * with every position overwritten by or preceded with each byte that matters to a
 * lexer; and ts/dur of up to 17 digits checked against strtod x 1000, rounded.
 */
#include "support.h"
#include "jsupport.h"

#include <math.h>
#include <zlib.h>

#include "jfast.h"
#include "trace_chrome.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* ---- three ways, one digest ---- */

/* The three ways agree on @buf (or the file @path); @return the events read. */
static uint64_t same3(const void *buf, size_t len, const char *path)
{
	struct rp_test_chrome_seen s[3];

	for (int k = 0; k < 3; k++)
		rp_test_chrome_way(buf, len, path, k, &s[k]);
	for (int k = 1; k < 3; k++)
		if (!rp_test_chrome_same(&s[0], &s[k]))
			fail_msg("way 0: rc %d \"%s\" events %llu; way %d: rc %d \"%s\" events %llu;"
				 " input %zu bytes: %.300s",
				 s[0].rc, s[0].why, (unsigned long long)s[0].st.events, k, s[k].rc,
				 s[k].why, (unsigned long long)s[k].st.events, len,
				 path ? path : (const char *)buf);
	return s[0].st.events;
}

/* ---- a generator of events ---- */

struct gen {
	char *b;
	size_t n, cap;
	uint64_t rng;
	bool errors; /* may write what makes the reader fail */
};

static void put(struct gen *g, const char *s)
{
	size_t k = strlen(s);

	if (g->n + k + 1 > g->cap) {
		g->cap = (g->n + k + 1) * 2;
		g->b = realloc(g->b, g->cap);
		assert_non_null(g->b);
	}
	memcpy(g->b + g->n, s, k + 1);
	g->n += k;
}

static unsigned rnd(struct gen *g, unsigned m)
{
	return (unsigned)rp_test_rnd(&g->rng, m);
}

static const char *pick(struct gen *g, const char *const *v, size_t n)
{
	return v[rnd(g, (unsigned)n)];
}

static void ws(struct gen *g)
{
	static const char *const w[] = { "", "", "", " ", " ", "\n  ", "\t", "\r\n", "  " };

	put(g, pick(g, w, ARRAY_SIZE(w)));
}

/* A JSON string: plain, escaped, UTF-8, structural bytes inside, long. */
static void str(struct gen *g)
{
	static const char *const s[] = {
		"aten::mm", "", "x", "cudaLaunchKernel", "q\\\"uo\\\\te", "\\u00e9t\\u00e9",
		"\\ud83d\\ude00", "tab\\there", "{[}]:,", "\\\"}{\\\"", "mem \xc3\xa9\xe2\x82\xac",
		"\xf0\x9f\x98\x80", "a/b\\/c", "ac2g", "kernel<float, 4>(Params)", "\\n",
	};
	char tmp[700];

	put(g, "\"");
	if (rnd(g, 40) == 0) { /* longer than RP_CHROME_STR_MAX: cut */
		size_t k = 500 + rnd(g, 100);
		memset(tmp, 'a' + (char)rnd(g, 26), k);
		/* two-byte characters across the cut, inside the string (for k of 510..512
		 * they overwrote its NUL: the bytes after it were the stack's) */
		if (rnd(g, 2) && k >= 513)
			memcpy(tmp + 509, "\xc3\xa9\xc3\xa9", 4);
		tmp[k] = '\0';
		put(g, tmp);
	} else {
		put(g, pick(g, s, ARRAY_SIZE(s)));
	}
	put(g, "\"");
}

/* A JSON number of any form; @time: a ts or dur, out of range only with errors. */
static void num(struct gen *g, bool time)
{
	static const char *const fixed[] = {
		"0", "-0", "1", "-1", "0.5", "-0.000", "1e3", "2E-2", "1.5e+2", "1700000000000.031",
		"1700000000000031", "0.0001", "9007199254740993", "99.999", "1234567890123.4567",
		"-17.25", "2251799813685.247", "2251799813685.248", "4503599627370.496", "1e-7",
		"0.1e1", "9223372036854.775807",
	};
	/* fine as a pid or an arg; as a time (x 1000) out of range */
	static const char *const big[] = { "12345678901234567", "123456789012345678901",
					   "18446744073709551615", "18446744073709551616",
					   "9.5e15", "1e400", "-1e300", "9223372036854775808" };
	char tmp[64];

	if ((!time || (g->errors && rnd(g, 50) == 0)) && rnd(g, 8) == 0) {
		put(g, pick(g, big, ARRAY_SIZE(big)));
		return;
	}
	if (rnd(g, 2)) {
		put(g, pick(g, fixed, ARRAY_SIZE(fixed)));
		return;
	}
	snprintf(tmp, sizeof(tmp), "%s%llu.%0*u", rnd(g, 8) ? "" : "-",
		 (unsigned long long)rp_test_rnd(&g->rng, 10000000000000ull), (int)rnd(g, 4) + 1,
		 rnd(g, 1000));
	put(g, tmp);
}

static void value(struct gen *g, int depth);

static void container(struct gen *g, int depth, bool map)
{
	static const char *const keys[] = { "\"a\"", "\"b\\u0041\"", "\"\"", "\"x y\"" };
	unsigned k = rnd(g, 4);

	put(g, map ? "{" : "[");
	ws(g);
	for (unsigned i = 0; i < k; i++) {
		if (i)
			put(g, ",");
		ws(g);
		if (map) {
			put(g, pick(g, keys, ARRAY_SIZE(keys)));
			ws(g);
			put(g, ":");
			ws(g);
		}
		value(g, depth + 1);
		ws(g);
	}
	put(g, map ? "}" : "]");
}

static void value(struct gen *g, int depth)
{
	static const char *const lit[] = { "true", "false", "null" };

	switch (rnd(g, depth > 4 ? 3 : 5)) {
	case 0: str(g); break;
	case 1: num(g, false); break;
	case 2: put(g, pick(g, lit, ARRAY_SIZE(lit))); break;
	case 3: container(g, depth, true); break;
	default: container(g, depth, false); break;
	}
}

static void member(struct gen *g, const char *key)
{
	put(g, "\"");
	put(g, key);
	put(g, "\"");
	ws(g);
	put(g, ":");
	ws(g);
}

static void args(struct gen *g)
{
	static const char *const keys[] = { "correlation", "External id", "name", "v",
					    "corr\\u0065lation", "grid", "" };
	unsigned k = rnd(g, 6);

	put(g, "{");
	for (unsigned i = 0; i < k; i++) {
		const char *key = pick(g, keys, ARRAY_SIZE(keys));
		char longkey[530];
		put(g, i ? ", " : "");
		if (rnd(g, 16) == 0) { /* a key longer than RP_CHROME_STR_MAX: cut */
			memset(longkey, 'k', 520);
			memcpy(longkey + 509, "\xc3\xa9\xc3\xa9", 4);
			longkey[520] = '\0';
			key = longkey;
		}
		member(g, key);
		if (rnd(g, 2))
			num(g, false);
		else
			value(g, 2);
	}
	put(g, "}");
}

/* One event object: its members in any order, some repeated, some unknown. */
static void event(struct gen *g)
{
	static const char *const ph[] = { "\"X\"", "\"C\"", "\"E\"", "\"C\"", "\"s\"", "\"f\"",
					  "\"i\"", "\"M\"", "\"\"", "\"XY\"", "5", "null" };
	static const char *const keys[] = { "ph",  "name", "cat", "pid", "tid", "ts",  "dur",
					    "id",  "args", "bp",  "s",   "x",	"\\u0070h" };
	unsigned k = rnd(g, 10);

	put(g, "{");
	ws(g);
	for (unsigned i = 0; i < k; i++) {
		const char *key = pick(g, keys, ARRAY_SIZE(keys));
		if (i) {
			put(g, ",");
			ws(g);
		}
		member(g, key);
		if (strcmp(key, "ph") == 0)
			put(g, pick(g, ph, ARRAY_SIZE(ph)));
		else if (strcmp(key, "ts") == 0 || strcmp(key, "dur") == 0)
			g->errors && rnd(g, 100) == 0 ? str(g) : num(g, true);
		else if (strcmp(key, "args") == 0)
			rnd(g, 8) ? args(g) : value(g, 1);
		else if (strcmp(key, "pid") == 0 || strcmp(key, "tid") == 0 || strcmp(key, "id") == 0)
			rnd(g, 2) ? num(g, false) : str(g);
		else if (strcmp(key, "name") == 0 || strcmp(key, "cat") == 0)
			rnd(g, 8) ? str(g) : value(g, 1);
		else
			value(g, 1);
		ws(g);
	}
	put(g, "}");
}

/* A trace of @events generated events (some array elements not objects); @pad
 * spaces before it. */
static char *trace(uint64_t seed, size_t events, bool errors, size_t pad, size_t *len)
{
	struct gen g = { .rng = seed, .errors = errors };

	for (size_t i = 0; i < pad; i++)
		put(&g, " ");
	put(&g, rnd(&g, 2) ? "{\"other\": [1, {\"a\": 2}], \"traceEvents\": [" : "[");
	for (size_t i = 0; i < events; i++) {
		put(&g, i ? "," : "");
		ws(&g);
		if (rnd(&g, 50) == 0)
			value(&g, 1);
		else
			event(&g);
	}
	ws(&g);
	put(&g, g.b[pad] == '{' ? "], \"z\": null}\n" : "]\n");
	*len = g.n;
	return g.b;
}

/* ---- tests ---- */

static void test_chrome_fast_generated(void **state)
{
	uint64_t events = 0;

	(void)state;
	for (uint64_t seed = 1; seed <= 400; seed++) {
		size_t len;
		char *t = trace(seed * 0x9e3779b97f4a7c15ull, 1 + seed % 40, seed % 4 == 0, 0, &len);
		events += same3(t, len, NULL);
		free(t);
	}
	assert_true(events > 4000); /* most traces are read to the end */
}

/* A chunk end (the readers get 64 KiB at a time) at every byte of 320 bytes of
 * events: the same trace behind 0..319 spaces, from files, plain and gzip (under a
 * sanitizer every RP_TEST_STRIDE-th byte plain). */
static void test_chrome_fast_every_split(void **state)
{
	char path[64];

	(void)state;
	rp_test_temp_path(path, ".json");
	for (int gz = 0; gz < 2; gz++) {
		for (size_t pad = 0; pad < 320; pad += gz ? 11 : RP_TEST_STRIDE) {
			size_t len;
			char *t = trace(77, 900, false, pad, &len);
			assert_true(len > 70000);
			assert_true(rp_test_write_text(path, t, len, gz));
			uint64_t ev = same3(NULL, 0, path);
			if (ev <= 800) {
				struct rp_test_chrome_seen x;
				rp_test_chrome_way(NULL, 0, path, 0, &x);
				fail_msg("%llu events: %d %s", (unsigned long long)ev, x.rc, x.why);
			}
			if (pad % (64 * RP_TEST_STRIDE) == 0)
				same3(t, len, NULL);
			free(t);
		}
	}
	unlink(path);
}

static const char small_text[] =
	"{\"traceEvents\": [\n"
	"  {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::mm\", \"pid\": 12, \"tid\": 3,"
	" \"ts\": 1700000000123.456, \"dur\": 7.25, \"args\": {\"External id\": 5, "
	"\"correlation\": 77, \"grid\": [1, 1, 1], \"s\": {\"a\": null}}},\n"
	"  {\"ph\": \"B\", \"name\": \"q\\\"uo\\u00e9\", \"pid\": \"proc\", \"tid\": \"th\", \"ts\": 0.5},\n"
	"  {\"ph\": \"C\", \"name\": \"mem \xc3\xa9\", \"pid\": 1, \"tid\": 1.0, \"ts\": 10, "
	"\"args\": {\"note\": \"s\\n\", \"v\": -12.75E-1, \"w\": 3}},\n"
	"  {\"ph\": \"f\", \"id\": 31, \"pid\": 1, \"tid\": 1, \"ts\": 0.0001, \"bp\": \"e\"},\n"
	"  {\"ph\":\"X\",\"name\":\"k\",\"pid\":0,\"tid\":7,\"ts\":5,\"dur\":1e1,\"x\":[true,false]}"
	"\n], \"traceName\": \"t\"}\n";

static void mutated(void *ctx, const char *t, size_t len, size_t at, enum rp_test_mut kind,
		    size_t probe)
{
	(void)ctx;
	(void)at;
	(void)kind;
	(void)probe;
	same3(t, len, NULL);
}

/* Every prefix, every byte overwritten by each probe, and preceded by one (under a
 * sanitizer one in RP_TEST_STRIDE of each). */
static void test_chrome_fast_mutations(void **state)
{
	(void)state;
	assert_int_equal(same3(small_text, strlen(small_text), NULL), 5);
	assert_true(
		rp_test_mutations(small_text, strlen(small_text), RP_TEST_STRIDE, mutated, NULL));
}

/* ts read whole by the fast path: exactly llround(strtod(ts) x 1000). */
struct ts_check {
	const char (*text)[40];
	size_t i, bad;
};

static int ts_cb(void *ctx, const struct rp_chrome_ev *e)
{
	struct ts_check *c = ctx;
	const char *s = c->text[c->i++];
	long long want = strchr(s, '.') ? llround(strtod(s, NULL) * 1000.0)
					: strtoll(s, NULL, 10) * 1000; /* integers: exact */

	if (!e->has_ts || e->ts_ns != want) {
		if (c->bad++ < 5)
			print_error("ts %s: %lld, want %lld\n", s, (long long)e->ts_ns, want);
	}
	return 0;
}

static void test_chrome_fast_ts_exact(void **state)
{
	enum { N = 10000 };
	static char text[N][40];
	uint64_t rng = 12345;
	struct gen g = { .rng = 1 };

	(void)state;
	for (int round = 0; round < 8; round++) {
		struct ts_check c = { .text = (const char(*)[40])text };
		g.n = 0;
		put(&g, "[");
		for (size_t i = 0; i < N; i++) {
			unsigned nd = 1 + (unsigned)rp_test_rnd(&rng, 15), fd = (unsigned)rp_test_rnd(&rng, 5);
			uint64_t w = 0;
			size_t k = 0;
			for (unsigned d = 0; d < nd; d++)
				w = w * 10 + rp_test_rnd(&rng, 10);
			if (rp_test_rnd(&rng, 2))
				w = (1ull << 51) / 1000 * (uint64_t)(1 + rp_test_rnd(&rng, 1000)) / 1000 + rp_test_rnd(&rng, 3);
			k = (size_t)snprintf(text[i], 40, "%s%llu", rp_test_rnd(&rng, 10) ? "" : "-",
					     (unsigned long long)w);
			if (fd > 0 && k + fd + 2 < 40) {
				text[i][k++] = '.';
				for (unsigned d = 0; d < fd; d++)
					text[i][k++] = (char)('0' + rp_test_rnd(&rng, 10));
				text[i][k] = '\0';
			}
			put(&g, i ? ",{\"ph\": \"i\", \"ts\": " : "{\"ph\": \"i\", \"ts\": ");
			put(&g, text[i]);
			put(&g, "}");
		}
		put(&g, "]");
		assert_int_equal(rp_chrome_parse(g.b, g.n, ts_cb, &c, NULL, NULL), 0);
		assert_int_equal(c.i, N);
		assert_int_equal(c.bad, 0);
		if (round == 0)
			same3(g.b, g.n, NULL);
	}
	free(g.b);
}

/* ---- torch's own layout: the fixed reads of the member loop ---- */

/* A string of @k bytes: plain, or with one byte that needs a look at @at. */
static void torch_str(struct gen *g, unsigned k)
{
	static const char *const odd[] = { "\\\"", "\\n", "\xc3\xa9", "\\u0041", "\xe2\x82\xac" };
	char tmp[80];

	for (unsigned i = 0; i < k && i < 70; i++)
		tmp[i] = (char)('a' + (i * 7 + k) % 26);
	tmp[k < 70 ? k : 70] = '\0';
	put(g, "\"");
	if (k > 0 && rnd(g, 6) == 0) {
		unsigned at = rnd(g, k);
		tmp[at] = '\0';
		put(g, tmp);
		put(g, pick(g, odd, ARRAY_SIZE(odd)));
		put(g, tmp + at + 1);
	} else {
		put(g, tmp);
	}
	put(g, "\"");
}

/* A number of @nd digits and @fd decimals (and now and then an odd form). */
static void torch_num(struct gen *g, unsigned nd, unsigned fd)
{
	static const char *const odd[] = { "1e3", "-0", "0", "2E-2", "0.5", "0.0", "-0.25e-1" };
	static const char *const bad[] = { "01", "1.", "-", "-01", ".5", "1e" };
	char tmp[64];
	size_t k = 0;

	if (rnd(g, 30) == 0) {
		put(g, pick(g, odd, ARRAY_SIZE(odd)));
		return;
	}
	if (g->errors && rnd(g, 300) == 0) {
		put(g, pick(g, bad, ARRAY_SIZE(bad)));
		return;
	}
	if (rnd(g, 10) == 0)
		tmp[k++] = '-';
	for (unsigned d = 0; d < nd; d++) {
		bool lead = d == 0 && nd > 1; /* no leading zero */
		tmp[k++] = (char)((lead ? '1' : '0') + rnd(g, lead ? 9 : 10));
	}
	if (fd > 0) {
		tmp[k++] = '.';
		for (unsigned d = 0; d < fd; d++)
			tmp[k++] = (char)('0' + rnd(g, 10));
	}
	tmp[k] = '\0';
	put(g, tmp);
}

/* An event as torch writes it, keys in its order, values of every length around
 * the 16- and 32-byte reads. */
static void torch_event(struct gen *g)
{
	static const char *const args_keys[] = { "External id", "correlation", "grid", "cbid",
						 "Sequence number", "est. achieved occupancy %" };
	unsigned na = rnd(g, 5);

	put(g, "{\"ph\": ");
	torch_str(g, rnd(g, 3));
	put(g, ", \"cat\": ");
	torch_str(g, rnd(g, 40));
	put(g, ", \"name\": ");
	torch_str(g, rnd(g, 40));
	put(g, ", \"pid\": ");
	rnd(g, 4) ? torch_num(g, 1 + rnd(g, 18), 0) : torch_str(g, rnd(g, 20));
	put(g, ", \"tid\": ");
	torch_num(g, 1 + rnd(g, 18), rnd(g, 8) ? 0 : 1);
	put(g, rnd(g, 2) ? ", \"ts\": " : ", \"id\": ");
	torch_num(g, 1 + rnd(g, 18), rnd(g, 5));
	put(g, ", \"dur\": ");
	torch_num(g, 1 + rnd(g, 17), rnd(g, 5));
	if (na == 0) {
		put(g, "}");
		return;
	}
	put(g, ", \"args\": {");
	for (unsigned i = 0; i < na; i++) {
		const char *key = pick(g, args_keys, ARRAY_SIZE(args_keys));
		put(g, i ? ", \"" : "\"");
		put(g, key);
		put(g, "\": ");
		if (strcmp(key, "grid") == 0) {
			put(g, "[");
			for (unsigned j = 0, m = rnd(g, 4); j < m; j++) {
				put(g, j ? ", " : "");
				rnd(g, 4) ? torch_num(g, 1 + rnd(g, 17), 0)
					  : torch_str(g, rnd(g, 34));
			}
			put(g, "]");
		} else if (rnd(g, 8) == 0) {
			torch_str(g, rnd(g, 34));
		} else {
			torch_num(g, 1 + rnd(g, 17), rnd(g, 4) ? 0 : rnd(g, 8));
		}
	}
	put(g, "}}");
}

/* Torch-shaped events whole, and with a 64 KiB chunk end at every byte of some. */
static void test_chrome_fast_torch_layout(void **state)
{
	char path[64];
	uint64_t events = 0;

	(void)state;
	for (uint64_t seed = 1; seed <= 300; seed++) {
		struct gen g = { .rng = seed * 0x9e3779b97f4a7c15ull, .errors = seed % 3 == 0 };
		put(&g, "[");
		for (size_t i = 0, m = 1 + seed % 60; i < m; i++) {
			put(&g, i ? ",\n" : "\n");
			torch_event(&g);
		}
		put(&g, "\n]\n");
		events += same3(g.b, g.n, NULL);
		free(g.b);
	}
	assert_true(events > 1000);
	rp_test_temp_path(path, ".json");
	for (size_t pad = 0; pad < 400; pad++) {
		struct gen g = { .rng = 99 };
		for (size_t i = 0; i < pad; i++)
			put(&g, " ");
		put(&g, "[");
		for (size_t i = 0; g.n < 66000; i++) {
			put(&g, i ? ",\n" : "\n");
			torch_event(&g);
		}
		put(&g, "\n]\n");
		assert_true(rp_test_write_text(path, g.b, g.n, false));
		same3(NULL, 0, path);
		free(g.b);
	}
	unlink(path);
}

/* The 16-byte classifiers (jfast.h): SSE2 and portable agree on every byte value
 * at every position, and on random blocks. */
static void test_chrome_fast_classify16(void **state)
{
	static const unsigned char edge[] = { '"', '\\', '0', '9', '/', ':', 0x1f,
					      ' ', 0x7f, 0x80, 0xff, 0x00, 'a' };
	unsigned char blk[16];
	uint64_t rng = 7;

	(void)state;
	for (int pos = 0; pos < 16; pos++) {
		for (int c = 0; c < 256; c++) {
			memset(blk, 'a', sizeof(blk));
			blk[pos] = (unsigned char)c;
			unsigned sp = 0, nd = 0;
			for (int k = 0; k < 16; k++) { /* the oracle, byte by byte */
				bool special = blk[k] == '"' || blk[k] == '\\' || blk[k] < 0x20 ||
					       blk[k] >= 0x80;
				sp |= (unsigned)special << k;
				nd |= (unsigned)(blk[k] < '0' || blk[k] > '9') << k;
			}
			assert_int_equal(rp_jfast_special16_port(blk), sp);
			assert_int_equal(rp_jfast_nondigit16_port(blk), nd);
			assert_int_equal(rp_jfast_special16(blk), sp);
			assert_int_equal(rp_jfast_nondigit16(blk), nd);
		}
	}
	for (int r = 0; r < 200000; r++) {
		for (int k = 0; k < 16; k++) /* bytes at the classes' edges, mostly */
			blk[k] = rp_test_rnd(&rng, 4) ? edge[rp_test_rnd(&rng, sizeof(edge))]
						      : (unsigned char)rp_test_rnd(&rng, 256);
		assert_int_equal(rp_jfast_special16(blk), rp_jfast_special16_port(blk));
		assert_int_equal(rp_jfast_nondigit16(blk), rp_jfast_nondigit16_port(blk));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_chrome_fast_generated),
		cmocka_unit_test(test_chrome_fast_every_split),
		cmocka_unit_test(test_chrome_fast_mutations),
		cmocka_unit_test(test_chrome_fast_ts_exact),
		cmocka_unit_test(test_chrome_fast_torch_layout),
		cmocka_unit_test(test_chrome_fast_classify16),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
