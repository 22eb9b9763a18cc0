// SPDX-License-Identifier: MIT
/*
 * The toolkit importer's step lane (import_nat.c, "the step lane") against the
 * fast path's callbacks it stands in for: every input is imported twice, into the
 * toolkit analysis and into an engine, once as shipped and once with
 * rp_nat_lane_off (every step through jfast's callbacks, as before the lane), and
 * the two must agree on everything a caller sees: the return value, the error
 * text with its byte offset, the counters, the rendered analysis and the engine's
 * functions, events and anomalies.
 *
 * Inputs: a trace using what the lane reads and what it gives back (escapes in
 * skipped and in kept strings and in keys, quotes and brackets inside strings,
 * raw UTF-8, nested values, empty and odd steps, duplicate fields, every literal,
 * numbers of every form, long strings around the 4096-byte cut and the name cap,
 * nesting around the lane's depth, whitespace of each kind), then every prefix of
 * it and every byte overwritten by or preceded with each byte that matters to a
 * JSON lexer; timestamps of every shape; and generated files read in 64 KiB
 * chunks, shifted so that a chunk ends at every byte of a step, whole and damaged
 * there. Well-formed inputs must have gone through the lane (rp_nat_lane_steps).
 */
#include "support.h"
#include "jsupport.h"

#include "aiq.h"
#include "engine.h"
#include "import_nat.h"
#include "render.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static const char lane_text[] =
	"[{\"request_number\": 0, \"x\": {\"intermediate_steps\": [{\"payload\": {}}]},\n"
	" \"intermediate_steps\": [\n"
	" {\"parent_id\": \"r\\\"}]\", \"function_ancestry\": {\"function_id\": \"f{[\", "
	"\"function_name\": \"agent\xc3\xa9\", \"parent_id\": \"root\"}, \"payload\": "
	"{\"event_type\": \"FUNCTION_START\", \"event_timestamp\": 1750000000.25, \"name\": null,"
	" \"tags\": [\"a\", 1, true, false, null, -0.5e-3, {}], \"data\": {\"input\": "
	"\"a\\nb\\u00e9\\\\\", \"output\": [1, {\"k\": \"\xe2\x82\xac\", \"\\u006b\": [[]]}]}, "
	"\"UUID\": \"u-1\"}},\n"
	"\t{\"function_ancestry\": {\"function_name\": \"ag\\u0065nt\"}, \"payload\": "
	"{\"event_type\": \"LLM_START\", \"event_timestamp\": 1750000000.5, \"name\": "
	"\"llama \\\"3\\\"\", \"metadata\": {\"m\": true}, \"UUID\": \"u-2\"}},\r\n"
	" {\"payload\" : {\"event_type\" :\"LLM_END\" ,\"event_timestamp\":1.75e9,\"UUID\":"
	"\"u-2\"} } ,{\"payload\": {\"event_type\": \"TOOL_START\", \"event_timestamp\": -1, "
	"\"UUID\": \"u-3\", \"name\": {\"a\": 1}}}, 5, {}, [],\n"
	" {\"payload\": [1, 2], \"function_ancestry\": \"x\"}, {\"pay\\u006coad\": {\"event_type\":"
	" \"TOOL_START\", \"event_timestamp\": 1750000000.75, \"UUID\": \"u-4\"}},\n"
	" {\"payload\": {\"event_type\": \"TOOL_START\", \"event_timestamp\": 1750000000.8, "
	"\"UUID\": \"u-5\", \"name\": \"t1\"}, \"payload\": {\"event_type\": \"TOOL_END\", "
	"\"event_timestamp\": 1750000000.9, \"UUID\": \"u-5\", \"name\": true}},\n"
	" {\"payload\": {\"event_type\": \"LLM\\u005fSTART\", \"event_timestamp\": 1750000001, "
	"\"UUID\": \"u-6\"}}, {\"payload\": {\"event_type\": \"LLM_START\", \"event_timestamp\": "
	"\"1750000001\", \"UUID\": \"u-7\"}}, {\"payload\": {\"event_type\": 7, \"UUID\": null, "
	"\"event_timestamp\": 0}},\n"
	" {\"payload\": {\"event_type\": \"FUNCTION_END\", \"event_timestamp\": 1750000002, "
	"\"UUID\": \"u-1\", \"data\": {\"d\": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]"
	"]]]]]]]]]]]]]]]]]]]]}}}, {\"payload\": {\"event_type\": \"LLM_END\", "
	"\"event_timestamp\": 1750000002.5, \"UUID\": \"u-6\", \"x\": [[[[[[[[[[[[[[[[[[[[[[[[["
	"[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}}]},\n"
	" {\"request_number\": 1, \"intermediate_steps\": []}, 7,\n"
	" {\"intermediate_steps\": [{\"payload\": {\"event_type\": \"SPAN_START\", "
	"\"event_timestamp\": 2e0, \"UUID\": \"s\"}}, {\"payload\": {\"event_type\": "
	"\"SPAN_END\", \"event_timestamp\": 3.000, \"UUID\": \"s\"}}]}]\n";

struct seen {
	int rc, erc;
	char why[RP_WHY_MAX], ewhy[RP_WHY_MAX];
	struct rp_nat_stats st, est;
	char *json;  /* the rendered analysis (rc == 0) */
	uint64_t h;  /* the engine's functions, events and anomalies */
};

static void into_engine(const void *buf, size_t len, const char *path, struct seen *s)
{
	struct rp_nat_caps caps = { .max_events = 64, .max_request_steps = 16 };
	struct rp_engine_cfg cfg;
	struct rp_engine *e;

	s->h = 0xcbf29ce484222325ull;
	rp_test_small_engine_cfg(&cfg); /* an engine per input */
	assert_int_equal(rp_engine_open(&cfg, &e), 0);
	s->erc = path ? rp_import_nat(e, NULL, &caps, path, NULL, NULL, &s->est, s->ewhy)
		      : rp_import_nat_buf(e, NULL, &caps, buf, len, "buffer", &s->est, s->ewhy);
	if (s->erc == 0)
		assert_int_equal(rp_test_engine_digest(e, &s->h), 0);
	rp_engine_close(e);
}

/* One way: the toolkit analysis (all of it, rendered) and, with @engine, an engine. */
static void once(const void *buf, size_t len, const char *path, bool off, bool engine,
		 struct seen *s)
{
	struct rp_aiq a;
	size_t jl = 0;
	FILE *m;

	memset(s, 0, sizeof(*s));
	rp_nat_lane_off = off;
	assert_int_equal(rp_aiq_init(&a, 0), 0);
	s->rc = path ? rp_import_nat(NULL, &a, NULL, path, NULL, NULL, &s->st, s->why)
		     : rp_import_nat_buf(NULL, &a, NULL, buf, len, "buffer", &s->st, s->why);
	if (s->rc == 0) {
		assert_int_equal(rp_aiq_finish(&a), 0);
		m = open_memstream(&s->json, &jl);
		assert_non_null(m);
		assert_int_equal(rp_render_aiq_json(&a, m), 0);
		fclose(m);
	}
	rp_aiq_free(&a);
	if (engine)
		into_engine(buf, len, path, s);
	rp_nat_lane_off = false;
}

/* Both ways, the same answers; true if the lane read a step. */
static bool same(const void *buf, size_t len, const char *path, bool engine)
{
	uint64_t before = rp_nat_lane_steps;
	struct seen a, b;
	bool lane;

	once(buf, len, path, false, engine, &a);
	lane = rp_nat_lane_steps != before;
	before = rp_nat_lane_steps;
	once(buf, len, path, true, engine, &b);
	assert_true(rp_nat_lane_steps == before); /* off means off */
	if (a.rc != b.rc || strcmp(a.why, b.why) != 0 || memcmp(&a.st, &b.st, sizeof(a.st)) ||
	    a.erc != b.erc || strcmp(a.ewhy, b.ewhy) != 0 ||
	    memcmp(&a.est, &b.est, sizeof(a.est)) || a.h != b.h ||
	    (a.json == NULL) != (b.json == NULL) || (a.json && strcmp(a.json, b.json) != 0))
		fail_msg("lane: rc %d \"%s\" calls %llu / %d \"%s\"; callbacks: rc %d \"%s\" calls "
			 "%llu / %d \"%s\"; input %zu bytes: %.80s",
			 a.rc, a.why, (unsigned long long)a.st.calls, a.erc, a.ewhy, b.rc, b.why,
			 (unsigned long long)b.st.calls, b.erc, b.ewhy, len,
			 path ? path : (const char *)buf);
	free(a.json);
	free(b.json);
	return lane;
}

static void test_nat_lane_trace(void **state)
{
	(void)state;
	assert_true(same(lane_text, strlen(lane_text), NULL, true));
}

/* An engine for some of them: prefixes at positions 0 mod 7, the overwrite by the
 * position's own probe, insertions at 0 mod 5. */
static void mutated(void *ctx, const char *t, size_t len, size_t at, enum rp_test_mut kind,
		    size_t probe)
{
	(void)ctx;
	same(t, len, NULL,
	     kind == RP_TEST_PREFIX	 ? at % 7 == 0
	     : kind == RP_TEST_OVERWRITE ? probe == at % RP_TEST_N_PROBES
					 : at % 5 == 0);
}

/* Every prefix, every byte overwritten by and preceded with each probe (under a
 * sanitizer one in RP_TEST_STRIDE of each). */
static void test_nat_lane_mutations(void **state)
{
	(void)state;
	assert_true(rp_test_mutations(lane_text, strlen(lane_text), RP_TEST_STRIDE, mutated, NULL));
}

/* Every byte value after each backslash and in the \\u escapes' digits. */
static void test_nat_lane_every_byte(void **state)
{
	const char *text = lane_text;
	size_t n = strlen(text);
	char *m = malloc(n + 1);

	(void)state;
	assert_non_null(m);
	for (size_t i = 1; i < n; i++) {
		bool esc = false;
		if (i % RP_TEST_STRIDE != 0)
			continue;
		for (size_t k = 1; k <= 5 && k <= i; k++)
			esc |= text[i - k] == '\\' && (k == 1 || text[i - k + 1] == 'u');
		if (!esc)
			continue;
		for (int c = 0; c < 256; c++) {
			memcpy(m, text, n);
			m[i] = (char)c;
			same(m, n, NULL, false);
		}
	}
	free(m);
}

/*
 * Keys the lane learned from earlier steps (each object kind's keys by position):
 * three steps of one layout, the third then damaged at every byte as above. Its
 * layout has keys of 28 and 29 bytes (with their quotes, colon and space: the
 * 32-byte slot and one byte more), a key without the space and one with two, more
 * members than slots, a payload "data" with nested values, numbers and literals,
 * and the kept fields among them.
 */
static const char learn_step[] =
	"{\"parent_id\": \"r\", \"function_ancestry\": {\"function_id\": \"f\", "
	"\"function_name\": \"fn\", \"parent_name\":\"w\"}, \"payload\": {"
	"\"event_type\": \"%s\", \"event_timestamp\": %s, \"span_event_timestamp\": null, "
	"\"a_key_of_twenty_eight_bytes_\": 1, \"a_key_of_twenty_nine_bytes___\": -0.5, "
	"\"name\":  \"nm\", \"k1\": 1, \"k2\": 2, \"k3\": 3, \"k4\": 4, \"k5\": 5, "
	"\"k6\": 6, \"k7\": 7, \"k8\": 8, \"k9\": 9, \"data\": {\"input\": \"q\", "
	"\"output\": {\"o\": [1, {\"p\": [[]]}], \"n\": 0.25}, \"x\": 10, \"y\": true}, "
	"\"UUID\": \"%s\"}}";

static size_t learn_from; /* where the third step starts */

static void learn_mutated(void *ctx, const char *t, size_t len, size_t at, enum rp_test_mut kind,
			  size_t probe)
{
	if (at >= learn_from)
		mutated(ctx, t, len, at, kind, probe);
}

static void test_nat_lane_learned_keys(void **state)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	(void)state;
	assert_non_null(f);
	fputs("[{\"intermediate_steps\": [", f);
	fprintf(f, learn_step, "LLM_START", "1750000000.5", "u1");
	fputs(",\n ", f);
	fprintf(f, learn_step, "TOOL_START", "1750000000.75", "u2");
	fputs(",\n ", f);
	fflush(f);
	learn_from = len;
	fprintf(f, learn_step, "LLM_END", "1750000001", "u1");
	fputs("]}]\n", f);
	fclose(f);
	assert_true(same(buf, len, NULL, true));
	assert_true(rp_test_mutations(buf, len, RP_TEST_STRIDE, learn_mutated, NULL));
	free(buf);
}

/* A step of @type at @ts (the number's text) with @uuid: one request of them. */
static void put_step(FILE *f, bool *first, const char *type, const char *ts, const char *uuid)
{
	fprintf(f,
		"%s\n   {\"parent_id\": \"r\", \"function_ancestry\": {\"function_id\": \"f\", "
		"\"function_name\": \"fn\", \"parent_id\": \"root\", \"parent_name\": \"<w>\"}, "
		"\"payload\": {\"event_type\": \"%s\", \"event_timestamp\": %s, "
		"\"span_event_timestamp\": null, \"framework\": \"langchain\", \"name\": \"nm\", "
		"\"tags\": null, \"metadata\": null, \"data\": {\"input\": \"q\", \"output\": null}, "
		"\"usage_info\": null, \"UUID\": \"%s\"}}",
		*first ? "" : ",", type, ts, uuid);
	*first = false;
}

/* Timestamps of every shape: the lane's digits against rp_jfast_dec() and strtod. */
static void test_nat_lane_timestamps(void **state)
{
	static const char *const ts[] = {
		"0", "-0", "0.0", "1", "-1", "1750000000", "1750000000.3340001",
		"1750000040.22590065", "0.000000001", "0.0000000005", "0.0000000004999",
		"123456789012345678", "1234567890123456789", "12345678901234567890",
		"18446744073.709551615", "18446744073.709551616", "99999999999.99999999",
		"1750000000.123456789012", "1.5e9", "1750000000E0", "17500000000e-1", "-2.5",
		"00", "01", "1.", ".5", "1e", "0.12345678", "12345678.9", "123456789.87654321",
		"9007199254740993", "9007199254740993.0", "4.35", "1750000000.5000000000000001",
	};
	char *buf = NULL, uuid[16];
	uint64_t rng = 88172645463325252ull;
	size_t len = 0;
	FILE *f;
	bool first = true;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(ts); i++) { /* each alone: a bad one stops the read */
		f = open_memstream(&buf, &len);
		assert_non_null(f);
		first = true;
		fputs("[{\"intermediate_steps\": [", f);
		put_step(f, &first, "LLM_START", ts[i], "a");
		put_step(f, &first, "LLM_END", "1750000100.5", "a");
		put_step(f, &first, "TOOL_START", "0.5", "b");
		put_step(f, &first, "TOOL_END", ts[i], "b");
		fputs("]}]", f);
		fclose(f);
		same(buf, len, NULL, true);
		free(buf);
		buf = NULL;
	}
	/* the same in one trace, and random digit strings of 1 to 21 digits */
	f = open_memstream(&buf, &len);
	assert_non_null(f);
	first = true;
	fputs("[{\"intermediate_steps\": [", f);
	for (size_t i = 0; i < 4000; i++) {
		char t[64];
		int nd = 1 + (int)rp_test_rnd(&rng, 21), ip = (int)rp_test_rnd(&rng, (uint64_t)nd + 1);
		size_t k = 0;
		for (int d = 0; d < nd; d++) {
			if (d == ip && d > 0)
				t[k++] = '.';
			t[k++] = (char)('0' + (d == 0 && nd > 1 && ip != 1 ? 1 + rp_test_rnd(&rng, 9)
									    : rp_test_rnd(&rng, 10)));
		}
		t[k] = '\0';
		snprintf(uuid, sizeof(uuid), "u%zu", i);
		put_step(f, &first, i % 2 ? "LLM_START" : "TOOL_START", t, uuid);
		put_step(f, &first, i % 2 ? "LLM_END" : "TOOL_END", t, uuid);
	}
	fputs("]}]", f);
	fclose(f);
	assert_true(same(buf, len, NULL, false));
	free(buf);
}

/* A generated trace of @steps steps, after @pad spaces (so its bytes move across the
 * readers' 64 KiB chunk ends). */
static char *gen(size_t steps, size_t pad, size_t *len)
{
	char *buf = NULL, uuid[32];
	FILE *f = open_memstream(&buf, len);
	bool first = true;
	size_t req = 0;

	assert_non_null(f);
	for (size_t i = 0; i < pad; i++)
		fputc(i % 5 == 4 ? '\n' : ' ', f);
	fputs("[", f);
	for (size_t s = 0; s < steps; req++) {
		fprintf(f, "%s\n {\"request_number\": %zu, \"intermediate_steps\": [", req ? "," : "",
			req);
		first = true;
		for (int k = 0; k < 40 && s < steps; k++, s += 2) {
			char t0[32], t1[32];
			snprintf(uuid, sizeof(uuid), "r%zu-u%d", req, k);
			snprintf(t0, sizeof(t0), "%.7f", 1750000000.0 + (double)req * 0.35 + k * 0.01);
			snprintf(t1, sizeof(t1), "%.7f",
				 1750000000.0 + (double)req * 0.35 + k * 0.01 + 0.005);
			put_step(f, &first, k % 3 ? "LLM_START" : "TOOL_START", t0, uuid);
			put_step(f, &first, k % 3 ? "LLM_END" : "TOOL_END", t1, uuid);
		}
		fputs("]}", f);
	}
	fputs("\n]\n", f);
	fclose(f);
	return buf;
}

/* Files read in 64 KiB chunks: a chunk end at every byte of a step, whole and with
 * the byte there damaged. */
static void test_nat_lane_chunk_ends(void **state)
{
	char path[64];
	size_t len, step;
	char *t;

	(void)state;
	snprintf(path, sizeof(path), "/tmp/rp_test_nat_lane_%d", (int)getpid());
	t = gen(10, 0, &len);
	step = len / 10 + 8; /* a step's length and some: every byte of one at 65536 */
	free(t);
	for (size_t pad = 0; pad < step; pad += RP_TEST_STRIDE) {
		t = gen(200, pad, &len);
		assert_true(len > 65536 + 4096);
		rp_test_write_file(path, t, len);
		assert_true(same(NULL, 0, path, pad % 16 == 0));
		if (pad % 4 == 0) {
			char keep = t[65536 - pad % 8];
			t[65536 - pad % 8] = (char)rp_test_probes[pad % RP_TEST_N_PROBES];
			rp_test_write_file(path, t, len);
			same(NULL, 0, path, pad % 32 == 0);
			t[65536 - pad % 8] = keep;
		}
		free(t);
	}
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nat_lane_trace),
		cmocka_unit_test(test_nat_lane_mutations),
		cmocka_unit_test(test_nat_lane_every_byte),
		cmocka_unit_test(test_nat_lane_timestamps),
		cmocka_unit_test(test_nat_lane_chunk_ends),
		cmocka_unit_test(test_nat_lane_learned_keys),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
