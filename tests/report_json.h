/* SPDX-License-Identifier: MIT */
/*
 * Readers of a JSON report (ringprof report --format json, parsed with yajl's tree
 * API) for the tests that run a program and look up its function rows and edges by
 * name. Include after support.h (cmocka). static inline: a test uses what it needs.
 */
#ifndef RP_TESTS_REPORT_JSON_H
#define RP_TESTS_REPORT_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_tree.h>

static inline uint64_t json_u64(yajl_val v, const char *key)
{
	const char *path[] = { key, NULL };
	yajl_val n = yajl_tree_get(v, path, yajl_t_number);

	assert_non_null(n);
	return (uint64_t)YAJL_GET_INTEGER(n);
}

static inline const char *json_str(yajl_val v, const char *key)
{
	const char *path[] = { key, NULL };
	yajl_val s = yajl_tree_get(v, path, yajl_t_string);

	return s ? YAJL_GET_STRING(s) : NULL;
}

static inline yajl_val json_arr(yajl_val root, const char *key)
{
	const char *path[] = { key, NULL };
	yajl_val a = yajl_tree_get(root, path, yajl_t_array);

	assert_non_null(a);
	return a;
}

/* The function row named @name (one per name in these programs), or NULL. */
static inline yajl_val fn_row(yajl_val root, const char *name)
{
	yajl_val fns = json_arr(root, "functions");

	for (size_t i = 0; i < YAJL_GET_ARRAY(fns)->len; i++) {
		yajl_val f = YAJL_GET_ARRAY(fns)->values[i];
		const char *n = json_str(f, "name");
		if (n && strcmp(n, name) == 0)
			return f;
	}
	return NULL;
}

static inline uint64_t calls(yajl_val root, const char *name)
{
	yajl_val f = fn_row(root, name);

	if (!f)
		print_message("    no function row \"%s\"\n", name);
	return f ? json_u64(f, "calls") : 0;
}

/* The edge row @caller -> @callee, or NULL. */
static inline yajl_val edge_row(yajl_val root, const char *caller, const char *callee)
{
	yajl_val es = json_arr(root, "edges");

	for (size_t i = 0; i < YAJL_GET_ARRAY(es)->len; i++) {
		yajl_val e = YAJL_GET_ARRAY(es)->values[i];
		const char *a = json_str(e, "caller"), *b = json_str(e, "callee");
		if (a && b && strcmp(a, caller) == 0 && strcmp(b, callee) == 0)
			return e;
	}
	return NULL;
}

static inline uint64_t edge_calls(yajl_val root, const char *caller, const char *callee)
{
	yajl_val es = json_arr(root, "edges");
	uint64_t n = 0;

	for (size_t i = 0; i < YAJL_GET_ARRAY(es)->len; i++) {
		yajl_val e = YAJL_GET_ARRAY(es)->values[i];
		const char *a = json_str(e, "caller"), *b = json_str(e, "callee");
		if (a && b && strcmp(a, caller) == 0 && strcmp(b, callee) == 0)
			n += json_u64(e, "calls");
	}
	return n;
}

/* The anomaly counter @name (absent: 0). */
static inline uint64_t anomaly(yajl_val root, const char *name)
{
	const char *path[] = { "anomalies", name, NULL };
	yajl_val v = yajl_tree_get(root, path, yajl_t_number);

	return v ? (uint64_t)YAJL_GET_INTEGER(v) : 0;
}

/*
 * rp_test_report_json() - the json report of snapshot @path (`@bin report`), parsed
 * (yajl_tree_free() it); with @no_drops, every source must show nothing dropped.
 */
static inline yajl_val rp_test_report_json(const char *bin, const char *path, bool no_drops)
{
	char *json = NULL, err[256];
	yajl_val root, srcs;

	assert_int_equal(rp_test_sh(&json, NULL, "%s report %s --format json", bin, path), 0);
	root = yajl_tree_parse(json, err, sizeof(err));
	assert_non_null(root);
	srcs = json_arr(root, "sources");
	for (size_t i = 0; i < YAJL_GET_ARRAY(srcs)->len && no_drops; i++)
		assert_int_equal(json_u64(YAJL_GET_ARRAY(srcs)->values[i], "dropped"), 0);
	free(json);
	return root;
}

#endif /* RP_TESTS_REPORT_JSON_H */
