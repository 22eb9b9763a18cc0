// SPDX-License-Identifier: MIT
/*
 * The toolkit importer's two-reader path (import_nat.c, "two readers") against the
 * one reader: every input is imported twice into the toolkit analysis, with
 * rp_nat_split_min at 0 (every plain file split) and at SIZE_MAX (never), and
 * must give the same return value, error text, counts and rendered analysis.
 * Inputs: tests/data's small trace and generated traces (both layouts the toolkit
 * writes, UUIDs and names shared across the halves, escapes, "intermediate_steps"
 * inside strings), then the generated ones truncated at and overwritten around the
 * guessed split byte and across the file. The well-formed inputs must have taken
 * the split (rp_nat_split_used), so the comparison is of two different paths.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "aiq.h"
#include "import_nat.h"
#include "render.h"
#include "support.h"

struct outcome {
	int rc;
	char why[RP_WHY_MAX];
	struct rp_nat_stats st;
	char *json; /* the rendered analysis (rc == 0) */
};

static void import_file(const char *path, size_t split_min, struct outcome *o)
{
	struct rp_aiq a;
	size_t len = 0;
	FILE *m;

	memset(o, 0, sizeof(*o));
	rp_nat_split_min = split_min;
	assert_int_equal(rp_aiq_init(&a, 0), 0);
	o->rc = rp_import_nat(NULL, &a, NULL, path, NULL, NULL, &o->st, o->why);
	if (o->rc == 0) {
		assert_int_equal(rp_aiq_finish(&a), 0);
		m = open_memstream(&o->json, &len);
		assert_non_null(m);
		assert_int_equal(rp_render_aiq_json(&a, m), 0);
		fclose(m);
	}
	rp_aiq_free(&a);
}

/* Both ways; true if the split path took the second half. */
static bool same_both_ways(const char *path)
{
	struct outcome one, two;
	unsigned used = rp_nat_split_used;

	import_file(path, SIZE_MAX, &one);
	assert_int_equal(rp_nat_split_used, used);
	import_file(path, 0, &two);
	if (one.rc != two.rc || strcmp(one.why, two.why) != 0)
		fail_msg("%s: one reader %d \"%s\", two %d \"%s\"", path, one.rc, one.why, two.rc,
			 two.why);
	assert_memory_equal(&one.st, &two.st, sizeof(one.st));
	if (one.rc == 0)
		assert_string_equal(one.json, two.json);
	free(one.json);
	free(two.json);
	return rp_nat_split_used != used;
}

/* A trace of @reqs requests; @pretty: one member a line, as json.dump(indent=1). */
static char *gen_trace(int reqs, bool pretty, size_t *len)
{
	static const char *const ev[] = { "LLM", "TOOL", "FUNCTION", "SPAN" };
	const char *nl = pretty ? "\n   " : " ";
	char *buf = NULL;
	FILE *m = open_memstream(&buf, len);
	unsigned seed = 12345;

	assert_non_null(m);
	fputs(pretty ? "[\n" : "[", m);
	for (int r = 0; r < reqs; r++) {
		int steps = 2 + r % 5;
		fprintf(m, "%s{%s\"request_number\": %d,%s\"intermediate_steps\": [", r ? ",\n " : " ",
			nl, r, nl);
		for (int s = 0; s < steps; s++) {
			const char *t = ev[(r + s) % 4];
			/* shared UUIDs and names: their ids depend on the order they are seen */
			char uuid[32];
			seed = seed * 1103515245 + 12345;
			if (s % 3 == 2)
				snprintf(uuid, sizeof(uuid), "shared-%d", (r * 7 + s) % 11);
			else
				snprintf(uuid, sizeof(uuid), "r%d-u%d", r, s);
			for (int half = 0; half < 2; half++) {
				double ts = 1750000000.0 + r * 0.75 + s * 0.125 + half * 0.0625 +
					    (seed >> 20) % 7 * 0.001;
				fprintf(m,
					"%s{\"function_ancestry\": {\"function_name\": \"fn\\u00e9%d\"}, "
					"\"payload\": {\"event_type\": \"%s_%s\", \"event_timestamp\": "
					"%.7f, \"name\": \"n%d \\\"q\\\"\", \"data\": {\"input\": "
					"\"{\\\"intermediate_steps\\\": [1, {}]}\", \"output\": [null, true, "
					"-1.5e3]}, \"UUID\": \"%s\"}}",
					s || half ? "," : "", (r + s) % 4, t, half ? "END" : "START", ts,
					(r * s) % 6, uuid);
			}
			if (s == 1 && r % 3 == 1) /* skipped, counted: bad and ignored steps */
				fputs(", {\"payload\": {\"event_type\": \"NOPE\"}}, {\"payload\": "
				      "{\"event_type\": \"WORKFLOW_START\"}}, {\"payload\": "
				      "{\"event_type\": \"TOOL_START\", \"UUID\": null}}", m);
			if (s == 0 && r % 5 == 3) { /* a name over RP_NAT_STR_MAX: cut, counted */
				fputs(", {\"payload\": {\"event_type\": \"LLM_START\", "
				      "\"event_timestamp\": 1750000000, \"UUID\": \"long\", "
				      "\"name\": \"", m);
				for (int i = 0; i < 700; i++)
					fputc('a' + i % 26, m);
				fputs("\"}}", m);
			}
		}
		fprintf(m, "]%s}", pretty ? "\n " : "");
	}
	fputs(pretty ? "\n]\n" : "]", m);
	fclose(m);
	return buf;
}

/* Where the split reader would start: the '{' before the first "intermediate_steps"
 * past 52% of the text (or 0). */
static size_t guessed(const char *text, size_t len)
{
	const char *k = strstr(text + len / 100 * 52, "\"intermediate_steps\"");

	if (k == NULL)
		return 0;
	while (k > text && *k != '{')
		k--;
	return (size_t)(k - text);
}

static void test_nat_split_well_formed(void **state)
{
	char path[64], data[4096];
	const char *dir = getenv("RP_TESTDATA");
	size_t len;
	char *t;

	(void)state;
	rp_test_temp_path(path, ".json");
	for (int pretty = 0; pretty < 2; pretty++) {
		for (int reqs = 4; reqs <= 64; reqs *= 2) {
			t = gen_trace(reqs, pretty, &len);
			rp_test_write_file(path, t, len);
			assert_true(same_both_ways(path));
			free(t);
		}
	}
	if (dir != NULL) {
		snprintf(data, sizeof(data), "%s/nat/small.json", dir);
		assert_true(same_both_ways(data));
	}
	/* a file too small to hold a split: the one reader only, the same either way */
	t = gen_trace(8, true, &len);
	rp_test_write_file(path, t, 10);
	assert_false(same_both_ways(path));
	free(t);
	unlink(path);
}

/*
 * Found by fuzz_nat_split: a second half whose requests have no step the analysis
 * keeps, so the second reader records requests but no step array at all, and its
 * replay offset that null array by zero. That is undefined behaviour only clang's
 * UBSan reports (the fuzzer's); here the path is taken and must answer as one reader.
 */
static void test_nat_split_second_half_without_steps(void **state)
{
	char path[64];
	size_t len, n;
	char *t, *buf = NULL;
	FILE *m = open_memstream(&buf, &n);

	(void)state;
	assert_non_null(m);
	t = gen_trace(2, false, &len);
	while (len > 0 && t[len - 1] != ']') /* the array left open */
		len--;
	fwrite(t, 1, len - 1, m);
	for (int r = 2; r < 66; r++)
		fprintf(m, ", {\"request_number\": %d, \"intermediate_steps\": "
			   "[{\"parent_id\": \"p\"}, {\"payload\": {\"event_type\": \"NOPE\"}}]}", r);
	fputs("]", m);
	fclose(m);
	rp_test_temp_path(path, ".json");
	rp_test_write_file(path, buf, n);
	assert_true(same_both_ways(path));
	unlink(path);
	free(buf);
	free(t);
}

/* Truncated at every byte around the split and at a sample of others. */
static void test_nat_split_truncated(void **state)
{
	char path[64];
	size_t len, at, took = 0;
	char *t = gen_trace(24, true, &len);

	(void)state;
	rp_test_temp_path(path, ".json");
	at = guessed(t, len);
	assert_true(at > 0);
	for (size_t n = 0; n < len; n += n + 400 < at || n > at + 400 ? 97 : 1) {
		rp_test_write_file(path, t, n);
		took += same_both_ways(path);
	}
	(void)took; /* a cut file ends in an error: the second reader's half is dropped */
	free(t);
	unlink(path);
}

/* One byte overwritten: around the guessed split, in the first half, in the second. */
static void test_nat_split_overwritten(void **state)
{
	static const char bytes[] = { '"', '{', '}', '[', ']', ',', ':', 'x', '\\', ' ', '0', '\n' };
	char path[64];
	size_t len, at, took = 0, runs = 0;
	char *t = gen_trace(24, false, &len), *c = malloc(len);

	(void)state;
	assert_non_null(c);
	rp_test_temp_path(path, ".json");
	at = guessed(t, len);
	assert_true(at > 200);
	for (size_t p = 1; p + 1 < len; p += p + 200 < at || p > at + 200 ? 331 : 1) {
		for (size_t b = 0; b < sizeof(bytes); b++) {
			if (t[p] == bytes[b])
				continue;
			memcpy(c, t, len);
			c[p] = bytes[b];
			rp_test_write_file(path, c, len);
			took += same_both_ways(path);
			runs++;
		}
	}
	/* many edits leave the split byte an element start and the text well formed or
	 * broken only in the first half: the second half's work is used in those */
	assert_true(took > 0 && took < runs);
	free(c);
	free(t);
	unlink(path);
}

/* The second reader started at every byte around the true element start, and at
 * a sample of others: wherever it starts, the result is the one reader's. */
static void test_nat_split_any_start(void **state)
{
	char path[64];
	size_t len, at, took = 0;
	char *t = gen_trace(16, true, &len);

	(void)state;
	rp_test_temp_path(path, ".json");
	rp_test_write_file(path, t, len);
	at = guessed(t, len);
	assert_true(at > 300);
	for (size_t p = 1; p < len; p += p + 300 < at || p > at + 300 ? 53 : 1) {
		rp_nat_split_at = p;
		took += same_both_ways(path);
	}
	rp_nat_split_at = 0;
	assert_true(took >= 1); /* at least the true element start in the window */
	free(t);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nat_split_well_formed),
		cmocka_unit_test(test_nat_split_second_half_without_steps),
		cmocka_unit_test(test_nat_split_truncated),
		cmocka_unit_test(test_nat_split_overwritten),
		cmocka_unit_test(test_nat_split_any_start),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
