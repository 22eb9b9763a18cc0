// SPDX-License-Identifier: MIT
/*
 * The readers' fast path (engine/formats/jfast.h) against yajl alone, the
 * reference: every input read twice, once as shipped and once with rp_jfast_off
 * (yajl reads everything, as before the fast path existed), and the two must agree
 * on everything a caller can see: the return value, the error text with its byte
 * offset, the counters, and every event (Chrome) or the toolkit analysis and the
 * engine's report (agent toolkit).
 *
 * Inputs: small traces that use what the readers handle (escapes, UTF-8, numbers
 * of every form, nested values they skip, long strings cut at RP_JFAST_STR_KEEP),
 * then every prefix of them and every position overwritten or preceded by each
 * byte that matters to a JSON lexer; and files larger than the readers' 64 KiB
 * chunks with damage near chunk ends, plain and gzip.
 */
#include "support.h"
#include "jsupport.h"

#include <math.h>
#include <zlib.h>

#include "aiq.h"
#include "engine.h"
#include "import_nat.h"
#include "jfast.h"
#include "trace_chrome.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static const char chrome_text[] =
	"{\"schemaVersion\": 1, \"deviceProperties\": [{\"id\": 0, \"x\": [1, [2, {}], -3.5e+2]}],"
	"\n \"traceEvents\": [\n"
	"  {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::mm\", \"pid\": 12, \"tid\": 3,"
	" \"ts\": 1700000000123.456, \"dur\": 7.25, \"args\": {\"External id\": 5, "
	"\"correlation\": 77, \"grid\": [1, 1, 1], \"s\": {\"a\": null}}},\n"
	"  {\"ph\": \"B\", \"name\": \"q\\\"uo\\\\te\\u00e9\\ud83d\\ude00\\/\\b\\f\\n\\r\\t\", "
	"\"pid\": \"proc\", \"tid\": \"th\\u0041\", \"ts\": 0.5},\n"
	"  {\"ph\": \"E\", \"pid\": \"proc\", \"tid\": \"thA\", \"ts\": 2e3, \"x\": true},\n"
	"  {\"ph\": \"C\", \"name\": \"mem \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\", \"pid\": 1, "
	"\"tid\": 1, \"ts\": 10, \"args\": {\"note\": \"s\", \"v\": -12.75E-1, \"w\": 3}},\n"
	"  {\"ph\": \"s\", \"id\": \"0x1f\", \"pid\": 1, \"tid\": 1, \"ts\": 11, \"bp\": false},\n"
	"  {\"ph\": \"f\", \"id\": 31, \"pid\": 1, \"tid\": 1, \"ts\": 0.0001},\n"
	"  [1, 2], \"str\", 0, null\n"
	" ], \"traceName\": \"t\", \"z\": {\"traceEvents\": 1}}\n";

static const char nat_text[] =
	"[{\"request_number\": 0, \"other\": [{\"payload\": {}}], \"intermediate_steps\": [\n"
	" {\"parent_id\": \"r\", \"function_ancestry\": {\"function_name\": \"agent\\u00e9\", "
	"\"parent_id\": \"root\"}, \"payload\": {\"event_type\": \"FUNCTION_START\", "
	"\"event_timestamp\": 1750000000.25, \"name\": null, \"data\": {\"input\": \"a\\nb\", "
	"\"output\": [1, {\"k\": \"\xe2\x82\xac\"}]}, \"UUID\": \"u-1\"}},\n"
	" {\"function_ancestry\": {\"function_name\": \"agent\"}, \"payload\": {\"event_type\": "
	"\"LLM_START\", \"event_timestamp\": 1750000000.5, \"name\": \"llama \\\"3\\\"\", "
	"\"tags\": null, \"metadata\": {\"m\": true}, \"UUID\": \"u-2\"}},\n"
	" {\"payload\": {\"event_type\": \"LLM_END\", \"event_timestamp\": 1.75e9, \"UUID\": "
	"\"u-2\"}},\n"
	" {\"payload\": {\"event_type\": \"TOOL_START\", \"event_timestamp\": -1, \"UUID\": "
	"\"u-3\"}}, 5,\n"
	" {\"payload\": {\"event_type\": \"FUNCTION_END\", \"event_timestamp\": 1750000001, "
	"\"UUID\": \"u-1\"}}]},\n"
	" {\"request_number\": 1, \"intermediate_steps\": []}, 7]\n";

/* ---- Chrome: everything a caller sees, as one digest ---- */

/* The fast path and yajl alone agree on @buf (or the file @path). */
static void chrome_same(const void *buf, size_t len, const char *path)
{
	struct rp_test_chrome_seen a, b;

	rp_test_chrome_way(buf, len, path, 0, &a);
	rp_test_chrome_way(buf, len, path, 2, &b);
	if (!rp_test_chrome_same(&a, &b))
		fail_msg("fast: rc %d \"%s\" events %llu bytes %llu; yajl: rc %d \"%s\" events "
			 "%llu bytes %llu; input "
			 "%zu bytes: %.80s",
			 a.rc, a.why, (unsigned long long)a.st.events,
			 (unsigned long long)a.st.bytes, b.rc, b.why,
			 (unsigned long long)b.st.events, (unsigned long long)b.st.bytes, len,
			 path ? path : (const char *)buf);
}

struct mut_ctx {
	void (*same)(const void *, size_t, const char *);
};

static void mutated(void *ctx, const char *t, size_t len, size_t at, enum rp_test_mut kind,
		    size_t probe)
{
	const struct mut_ctx *c = ctx;

	(void)at;
	(void)kind;
	(void)probe;
	c->same(t, len, NULL);
}

/* rp_test_mutations() of @text through @same; under a sanitizer one case in
 * RP_TEST_STRIDE of each kind. */
static void mutations(const char *text, void (*same)(const void *, size_t, const char *))
{
	struct mut_ctx c = { same };

	assert_true(rp_test_mutations(text, strlen(text), RP_TEST_STRIDE, mutated, &c));
}

static void test_jfast_chrome_mutations(void **state)
{
	(void)state;
	mutations(chrome_text, chrome_same);
}

/* A name past RP_JFAST_STR_KEEP, with escapes and UTF-8 around the cut. */
static char *long_name_trace(size_t pad, const char *around)
{
	size_t n = pad + strlen(around) + 256;
	char *t = malloc(n + 64), *p = t;

	assert_non_null(t);
	p += sprintf(p, "[{\"ph\": \"X\", \"ts\": 1, \"name\": \"");
	memset(p, 'a', pad);
	p += pad;
	p += sprintf(p, "%s%s\", \"cat\": \"c\"}]", around, around);
	return t;
}

static void test_jfast_long_strings(void **state)
{
	static const char *const around[] = { "\\u00e9\\n",	"\xc3\xa9\xe2\x82\xac",
					      "\\\"\\\\",	"\xf0\x9f\x98\x80",
					      "\\ud83d\\ude00", "\\x",
					      "\x01",		"\xc3" };

	(void)state;
	for (size_t a = 0; a < ARRAY_SIZE(around); a++) {
		for (size_t pad = RP_JFAST_STR_KEEP - 14; pad <= RP_JFAST_STR_KEEP + 2; pad++) {
			char *t = long_name_trace(pad, around[a]);
			chrome_same(t, strlen(t), NULL);
			free(t);
		}
	}
}

static void test_jfast_deep_and_long_numbers(void **state)
{
	char t[4096];
	size_t n = 0;

	(void)state;
	/* Nesting past RP_JFAST_DEPTH inside a skipped value, and a 100-digit number. */
	n += (size_t)sprintf(t + n, "{\"a\": ");
	for (int i = 0; i < RP_JFAST_DEPTH + 10; i++)
		t[n++] = '[';
	for (int i = 0; i < RP_JFAST_DEPTH + 10; i++)
		t[n++] = ']';
	n += (size_t)sprintf(t + n, ", \"traceEvents\": [{\"ph\": \"i\", \"ts\": ");
	for (int i = 0; i < 100; i++)
		t[n++] = (char)('1' + i % 9);
	n += (size_t)sprintf(t + n, "}]}");
	t[n] = '\0';
	chrome_same(t, n, NULL);
	chrome_same(t, n - 1, NULL);
}

/* Text of @events events (about 150 bytes each), damaged at @at if @at < length. */
static char *big_trace(size_t events, size_t *len)
{
	size_t cap = events * 200 + 64, n = 0;
	char *t = malloc(cap);

	assert_non_null(t);
	n += (size_t)sprintf(t, "{\"traceEvents\": [");
	for (size_t i = 0; i < events; i++)
		n += (size_t)snprintf(
			t + n, cap - n,
			"%s{\"ph\": \"X\", \"name\": \"op%zu\", \"pid\": 1, \"tid\": %zu, "
			"\"ts\": %zu.5, \"dur\": 1, \"args\": {\"data\": \"%0*zu\"}}",
			i ? ",\n " : "", i % 50, i % 4, i * 3, (int)(i % 90), i);
	n += (size_t)sprintf(t + n, "]}\n");
	*len = n;
	return t;
}

static void write_file(const char *path, const void *b, size_t n, bool gz)
{
	assert_true(rp_test_write_text(path, b, n, gz));
}

/* Damage near the 64 KiB chunk ends the readers get text in, and near the end. */
static void test_jfast_chunk_ends(void **state)
{
	size_t len, at[] = { 65535, 65536, 131072, 0 };
	char *t = big_trace(3000, &len), path[64];
	static const unsigned char bytes[] = { '"', '\\', 0x01 };

	(void)state;
	at[ARRAY_SIZE(at) - 1] = len - 3;
	snprintf(path, sizeof(path), "/tmp/rp_test_jfast_%d", (int)getpid());
	for (int gz = 0; gz < 2; gz++) {
		write_file(path, t, len, gz);
		chrome_same(NULL, 0, path);
		for (size_t i = 0; i < ARRAY_SIZE(at); i++) {
			for (size_t b = 0; b < sizeof(bytes); b++) {
				for (size_t d = 0; d < 2; d++) {
					char keep = t[at[i] - d];
					t[at[i] - d] = (char)bytes[b];
					write_file(path, t, len, gz);
					chrome_same(NULL, 0, path);
					chrome_same(t, len, NULL);
					t[at[i] - d] = keep;
				}
			}
		}
		/* Cut anywhere near a chunk end. */
		for (size_t cut = 65534; cut < 65538; cut++) {
			write_file(path, t, cut, gz);
			chrome_same(NULL, 0, path);
		}
	}
	unlink(path);
	free(t);
}

/* ---- agent toolkit: the analysis and the engine's report ---- */

struct nat_seen {
	int rc;
	char why[RP_WHY_MAX];
	struct rp_nat_stats st;
	struct rp_aiq_counts c;
	uint32_t n_nodes, n_seg;
	double p[4];
	uint64_t h; /* the engine's functions and anomalies */
};

static void nat_once(const void *buf, size_t len, const char *path, bool off, struct nat_seen *s)
{
	struct rp_nat_caps caps = { .max_events = 64, .max_request_steps = 16 };
	struct rp_engine_cfg cfg;
	struct rp_engine *e;
	struct rp_aiq a;

	memset(s, 0, sizeof(*s));
	s->h = 0xcbf29ce484222325ull;
	rp_test_small_engine_cfg(&cfg); /* an engine per input */
	assert_int_equal(rp_engine_open(&cfg, &e), 0);
	assert_int_equal(rp_aiq_init(&a, 0), 0);
	rp_jfast_off = off;
	s->rc = path ? rp_import_nat(e, &a, &caps, path, NULL, NULL, &s->st, s->why)
		     : rp_import_nat_buf(e, &a, &caps, buf, len, "buffer", &s->st, s->why);
	rp_jfast_off = false;
	if (s->rc == 0) {
		assert_int_equal(rp_aiq_finish(&a), 0);
		s->c = a.c;
		s->n_nodes = a.n_nodes;
		s->n_seg = a.n_seg;
		s->p[0] = a.p50, s->p[1] = a.p90, s->p[2] = a.p95, s->p[3] = a.p99;
		assert_int_equal(rp_test_engine_digest(e, &s->h), 0);
	}
	rp_aiq_free(&a);
	rp_engine_close(e);
}

static void nat_same(const void *buf, size_t len, const char *path)
{
	struct nat_seen a, b;

	nat_once(buf, len, path, false, &a);
	nat_once(buf, len, path, true, &b);
	if (a.rc != b.rc || strcmp(a.why, b.why) != 0 || memcmp(&a.st, &b.st, sizeof(a.st)) ||
	    memcmp(&a.c, &b.c, sizeof(a.c)) || a.n_nodes != b.n_nodes || a.n_seg != b.n_seg ||
	    memcmp(a.p, b.p, sizeof(a.p)) || a.h != b.h)
		fail_msg("fast: rc %d \"%s\" calls %llu; yajl: rc %d \"%s\" calls %llu; input %zu "
			 "bytes: %.80s",
			 a.rc, a.why, (unsigned long long)a.st.calls, b.rc, b.why,
			 (unsigned long long)b.st.calls, len, path ? path : (const char *)buf);
}

static void test_jfast_nat_mutations(void **state)
{
	(void)state;
	mutations(nat_text, nat_same);
}

static void test_jfast_nat_file(void **state)
{
	char path[256], tmp[64];
	const char *dir = getenv("RP_TESTDATA");
	size_t len;
	FILE *f;
	char *t;

	(void)state;
	snprintf(path, sizeof(path), "%s/nat/small.json", dir ? dir : "tests/data");
	f = fopen(path, "rb");
	assert_non_null(f);
	t = malloc(1 << 20);
	assert_non_null(t);
	len = fread(t, 1, 1 << 20, f);
	fclose(f);
	snprintf(tmp, sizeof(tmp), "/tmp/rp_test_jfast_nat_%d", (int)getpid());
	for (int gz = 0; gz < 2; gz++) {
		write_file(tmp, t, len, gz);
		nat_same(NULL, 0, tmp);
		nat_same(t, len, NULL);
		for (size_t at = 1; at < len; at += len / 16) {
			char keep = t[at];
			t[at] = '"';
			write_file(tmp, t, len, gz);
			nat_same(NULL, 0, tmp);
			t[at] = keep;
			nat_same(t, at, NULL);
		}
	}
	unlink(tmp);
	free(t);
}

/* @text deflated as one gzip member that stops short: flushed, never finished. */
static size_t gzip_cut(const char *text, size_t n, unsigned char *out, size_t cap)
{
	z_stream zs = { 0 };

	assert_int_equal(deflateInit2(&zs, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
	zs.next_in = (unsigned char *)text;
	zs.avail_in = (uInt)n;
	zs.next_out = out;
	zs.avail_out = (uInt)cap;
	assert_int_equal(deflate(&zs, Z_SYNC_FLUSH), Z_OK);
	assert_int_equal(zs.avail_in, 0);
	n = cap - zs.avail_out;
	deflateEnd(&zs);
	return n;
}

/*
 * A token whose first bytes are already wrong, then the gzip stream ends: yajl
 * refuses the token as its bytes come, so the fast path must not wait for the rest
 * of it and report the truncation instead (found by fuzz_chrome).
 */
static void test_jfast_wrong_before_the_cut(void **state)
{
	static const char *const chrome[] = {
		"[f\xc9", "[tx", "[nul!", "[fals", "[\"\\u12G", "[\"\\u1", "[\"\xe2\x41",
		"[\"\xe2\x82", "[\"\xf0\x9f\x98(", "[\"\xc3", "[-x", "[1e", "[\"a\\",
	};
	static const char *const nat[] = {
		"[{\"request_number\": f\xc9", "[{\"intermediate_steps\": [{\"payload\": n!",
		"[{\"intermediate_steps\": [{\"payload\": {\"event_type\": \"\xe2\x41",
		"[{\"x\": \"\\u00G",
	};
	unsigned char gz[256];
	char path[64];

	(void)state;
	rp_test_temp_path(path, ".gz");
	for (size_t i = 0; i < ARRAY_SIZE(chrome) + ARRAY_SIZE(nat); i++) {
		bool is_nat = i >= ARRAY_SIZE(chrome);
		const char *t = is_nat ? nat[i - ARRAY_SIZE(chrome)] : chrome[i];
		size_t n = gzip_cut(t, strlen(t), gz, sizeof(gz));

		rp_test_write_file(path, gz, n);
		if (is_nat) {
			nat_same(NULL, 0, path);
		} else {
			chrome_same(gz, n, NULL);
			chrome_same(NULL, 0, path);
		}
	}
	unlink(path);
}

/* ---- rp_jfast_strtod against strtod itself, bit for bit ---- */

static uint64_t sd_rng = 0x9e3779b97f4a7c15ull;

static uint64_t sd_next(void)
{
	sd_rng ^= sd_rng << 13;
	sd_rng ^= sd_rng >> 7;
	sd_rng ^= sd_rng << 17;
	return sd_rng;
}

static unsigned sd_mismatch;

/* The toolkit reader's decimal-to-nanoseconds as it was, digit by digit: the
 * oracle for rp_nat_ns_of(). */
static bool ref_dec_to_ns(const char *s, uint64_t *out)
{
	char dig[128];
	size_t nd = 0;
	long ip = 0, ex = 0;
	uint64_t v = 0;
	bool point = false;

	if (*s == '-')
		return false;
	for (; *s && *s != 'e' && *s != 'E'; s++) {
		if (*s == '.') {
			point = true;
			continue;
		}
		dig[nd++] = *s;
		ip += !point;
	}
	if (*s)
		ex = strtol(s + 1, NULL, 10);
	if (ex > 40 || ex < -40)
		return ex < 0 ? (*out = 0, true) : false;
	ip += ex + 9;
	for (long i = 0; i < ip; i++) {
		unsigned d = i < (long)nd ? (unsigned)(dig[i] - '0') : 0;
		if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, d, &v))
			return false;
	}
	if (ip >= 0 && ip < (long)nd && dig[ip] >= '5' && __builtin_add_overflow(v, 1, &v))
		return false;
	*out = v;
	return true;
}

/* rp_jfast_strtod, rp_jfast_dec (taken exactly for the plain forms of up to 19
 * digits) and rp_nat_ns_of against strtod and the oracle above. */
static void sd_check(const char *s)
{
	double a = rp_jfast_strtod(s), b = strtod(s, NULL), c;
	size_t n = strlen(s), digits = 0;
	struct rp_jfast_dec d;
	uint64_t x = 0, y = 0;
	bool ox, oy;

	if (memcmp(&a, &b, sizeof(a)) != 0 && sd_mismatch++ < 10)
		print_error("rp_jfast_strtod(\"%s\") = %.17g, strtod %.17g\n", s, a, b);
	for (size_t i = 0; i < n; i++)
		digits += s[i] >= '0' && s[i] <= '9';
	if (rp_jfast_dec(s, n, &d) != (strpbrk(s, "eE") == NULL && digits <= 19) &&
	    sd_mismatch++ < 10)
		print_error("rp_jfast_dec(\"%s\") wrong form\n", s);
	if (rp_jfast_dec(s, n, &d)) {
		c = rp_jfast_dec_double(&d, s);
		if (memcmp(&c, &b, sizeof(c)) != 0 && sd_mismatch++ < 10)
			print_error("rp_jfast_dec_double(\"%s\") = %.17g, strtod %.17g\n", s, c, b);
	}
	ox = rp_nat_ns_of(s, n, &x);
	oy = ref_dec_to_ns(s, &y);
	if ((ox != oy || (ox && x != y)) && sd_mismatch++ < 10)
		print_error("rp_nat_ns_of(\"%s\") = %d %llu, oracle %d %llu\n", s, ox,
			    (unsigned long long)x, oy, (unsigned long long)y);
}

/* @nd digits (leading ones may be 0), a point after @ip of them, an exponent. */
static void sd_number(char *out, int nd, int ip, int ex, bool neg)
{
	int n = 0;

	if (neg)
		out[n++] = '-';
	for (int i = 0; i < nd; i++) {
		if (i == ip)
			out[n++] = '.';
		out[n++] = (char)('0' + sd_next() % 10);
	}
	if (ex != 0)
		n += sprintf(out + n, "e%d", ex);
	out[n] = '\0';
}

/* Random rounds: fewer under a sanitizer (each kind below still thousands). */
#define SD_ROUNDS(n) ((n) / (RP_TEST_STRIDE * RP_TEST_STRIDE))

/*
 * Random 1..20-digit decimals with exponents around the exact range, the
 * toolkit's 17-digit timestamps, and the doubles' own halfway points (the cases
 * the midpoint test sends to strtod): every result the same bits as strtod's.
 */
static void test_jfast_strtod_matches_strtod(void **state)
{
	char s[64];

	(void)state;
	for (int i = 0; i < SD_ROUNDS(3000000); i++) {
		int nd = 1 + (int)(sd_next() % 20), ex = (int)(sd_next() % 71) - 35;
		sd_number(s, nd, 1 + (int)(sd_next() % (unsigned)nd), sd_next() % 4 ? 0 : ex,
			  sd_next() % 8 == 0);
		if (s[s[0] == '-'] == '0' && s[1 + (s[0] == '-')] != '.' && nd > 1)
			s[s[0] == '-'] = '1'; /* JSON: no leading zero before digits */
		sd_check(s);
	}
	for (int i = 0; i < SD_ROUNDS(2000000); i++) { /* 1750000000.3340001: 10 + 7 digits */
		snprintf(s, sizeof(s), "17%08llu.%07llu",
			 (unsigned long long)(sd_next() % 100000000),
			 (unsigned long long)(sd_next() % 10000000));
		sd_check(s);
	}
	for (int i = 0; i < SD_ROUNDS(1000000); i++) { /* halfway between two doubles, written out */
		double d = (double)(sd_next() >> 11) * 0x1p-20, up = nextafter(d, 1e300);
		long double mid = ((long double)d + (long double)up) / 2;
		snprintf(s, sizeof(s), "%.19Lg", mid);
		if (strchr(s, 'e') == NULL)
			sd_check(s);
		snprintf(s, sizeof(s), "%.17g", d);
		sd_check(s);
	}
	static const char *const edge[] = {
		"0", "-0", "0.0", "18446744073709551615", "9999999999999999999", "9007199254740993",
		"9007199254740993.0", "1e-27", "1e27", "9999999999999999999e27",
		"9999999999999999999e-27", "1.7976931348623157e308", "4.9e-324", "123456789012345678e-5",
		"1750000000.3340001", "0.1", "0.30000000000000004", "2.2250738585072014e-308",
		"18446744073.709551615", "18446744073.709551616", "9999999999.9999999995", "0.0000000005",
		"0.00000000049", "-1.5", "12345678.12345678", "1234567812345678", "0.9999999999999999999",
		"9999999999.999999999", "99999999999.99999999", "18446744073.70955161",
	};
	for (size_t i = 0; i < ARRAY_SIZE(edge); i++)
		sd_check(edge[i]);
	assert_int_equal(sd_mismatch, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_jfast_chrome_mutations),
		cmocka_unit_test(test_jfast_long_strings),
		cmocka_unit_test(test_jfast_deep_and_long_numbers),
		cmocka_unit_test(test_jfast_chunk_ends),
		cmocka_unit_test(test_jfast_nat_mutations),
		cmocka_unit_test(test_jfast_nat_file),
		cmocka_unit_test(test_jfast_wrong_before_the_cut),
		cmocka_unit_test(test_jfast_strtod_matches_strtod),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
