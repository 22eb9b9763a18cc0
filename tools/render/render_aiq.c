// SPDX-License-Identifier: MIT
/*
 * The agent toolkit's outputs of its nested-call analysis (engine/formats/aiq.h):
 *   aiq       its NestedCallProfilingResult as JSON without the text report:
 *             {"concurrency": {"timeline_segments": [[start, end, level], ...],
 *             "p50", "p90", "p95", "p99"}, "node_metrics": {uuid: {...}},
 *             "top_bottlenecks": [...]}, plus "ringprof": what was irregular;
 *   aiq-text  its textual report, line for line.
 * Floats are written as Python's repr() writes them (the shortest text that reads
 * back as the same double), so the numbers are the toolkit's to the last digit.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aiq.h"
#include "render.h"

/* n / 10^d as fixed-point text ("-12.345"), d > 0 or ".0" when d == 0. */
static void fixed_text(char *buf, int64_t n, int d)
{
	char dig[32];
	uint64_t u = n < 0 ? 0 - (uint64_t)n : (uint64_t)n;
	int k = 0, p = 0;

	do {
		dig[k++] = (char)('0' + u % 10);
		u /= 10;
	} while (u > 0 || k <= d);
	if (n < 0)
		buf[p++] = '-';
	while (k > d)
		buf[p++] = dig[--k];
	buf[p++] = '.';
	if (d == 0)
		buf[p++] = '0';
	while (k > 0)
		buf[p++] = dig[--k];
	buf[p] = '\0';
}

/*
 * Python's repr(float): the shortest text that reads back as the same double. Fast
 * path: the fewest decimals d for which round(v x 10^d) / 10^d is v again (in long
 * double, then confirmed by strtod, which is what decides); fixed-point text (Python
 * writes 1e-05 where this writes 0.00001: the same value). Otherwise %.17g.
 */
static void put_double(FILE *out, double v)
{
	static const long double p10[] = { 1e0L,  1e1L,	 1e2L,	1e3L,  1e4L,  1e5L,  1e6L,  1e7L,
					   1e8L,  1e9L,	 1e10L, 1e11L, 1e12L, 1e13L, 1e14L, 1e15L,
					   1e16L, 1e17L, 1e18L, 1e19L, 1e20L, 1e21L, 1e22L };
	char buf[48];

	for (int d = 0; d <= 22 && v == v; d++) {
		long double x = (long double)v * p10[d];
		if (!(x < 0x1p62L && x > -0x1p62L))
			break;
		long double ax = x < 0 ? -x : x;
		int64_t n = (int64_t)ax; /* nearest, ties to even as Python's repr picks */
		long double fr = ax - (long double)n;
		n += fr > 0.5L || (fr == 0.5L && (n & 1));
		n = x < 0 ? -n : n;
		if ((double)((long double)n / p10[d]) != v)
			continue;
		fixed_text(buf, n, d);
		if (strtod(buf, NULL) == v) {
			fputs(buf, out);
			return;
		}
	}
	if (v != v || v - v != 0) { /* as Python's json.dumps writes them */
		fputs(v != v ? "NaN" : v > 0 ? "Infinity" : "-Infinity", out);
		return;
	}
	snprintf(buf, sizeof(buf), "%.17g", v);
	if (strpbrk(buf, ".en") == NULL)
		strcat(buf, ".0");
	fputs(buf, out);
}

static void put_string(FILE *out, const char *s)
{
	fputc('"', out);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(out, "\\%c", *p);
		else if (*p < 0x20)
			fprintf(out, "\\u%04x", *p);
		else
			fputc(*p, out);
	}
	fputc('"', out);
}

static void put_metrics(FILE *out, const struct rp_aiq *a, uint32_t id, const char *indent)
{
	const struct rp_aiq_node *n = &a->nodes[id];

	fprintf(out, "{\n%s  \"uuid\": ", indent);
	put_string(out, rp_strtab_str(&a->uuids, n->uuid));
	fprintf(out, ",\n%s  \"operation_type\": \"%s\",\n%s  \"operation_name\": ", indent,
		rp_aiq_type_names[n->type], indent);
	put_string(out, rp_strtab_str(&a->names, n->name));
	fprintf(out, ",\n%s  \"start_time\": ", indent);
	put_double(out, n->start);
	fprintf(out, ",\n%s  \"end_time\": ", indent);
	put_double(out, n->end);
	fprintf(out, ",\n%s  \"duration\": ", indent);
	put_double(out, rp_aiq_duration(n));
	fprintf(out, ",\n%s  \"self_time\": ", indent);
	put_double(out, n->self);
	fprintf(out, ",\n%s  \"subtree_time\": ", indent);
	put_double(out, n->subtree);
	fprintf(out, ",\n%s  \"concurrency_midpoint\": %u.0,\n%s  \"bottleneck_score\": ", indent,
		n->mid, indent);
	put_double(out, n->subtree);
	fprintf(out, "\n%s}", indent);
}

static void put_counts(FILE *out, const struct rp_aiq_counts *c)
{
	fprintf(out,
		"  \"ringprof\": {\"calls\": %llu, \"nodes_dropped\": %llu, \"end_unmatched\": "
		"%llu, \"end_not_top\": %llu, \"open_at_end\": %llu, \"duplicate_uuids\": %llu, "
		"\"replaced_roots\": %llu}\n",
		(unsigned long long)c->calls, (unsigned long long)c->nodes_dropped,
		(unsigned long long)c->end_unmatched, (unsigned long long)c->end_not_top,
		(unsigned long long)c->open_at_end, (unsigned long long)c->duplicate_uuids,
		(unsigned long long)c->replaced_roots);
}

int rp_render_aiq_json(const struct rp_aiq *a, FILE *out)
{
	const double p[4] = { a->p50, a->p90, a->p95, a->p99 };
	static const char *const pn[4] = { "p50", "p90", "p95", "p99" };

	fputs("{\n  \"concurrency\": {\n    \"timeline_segments\": [", out);
	for (uint32_t k = 0; k < a->n_seg; k++) {
		fputs(k ? ",\n      [" : "\n      [", out);
		put_double(out, a->seg_t[k]);
		fputs(", ", out);
		put_double(out, a->seg_t[k + 1]);
		fprintf(out, ", %u]", a->seg_level[k]);
	}
	fputs(a->n_seg ? "\n    ]" : "]", out);
	for (int i = 0; i < 4; i++) {
		fprintf(out, ",\n    \"%s\": ", pn[i]);
		put_double(out, p[i]);
	}
	fputs("\n  },\n  \"node_metrics\": {", out);
	for (uint32_t i = 0; i < a->n_metrics; i++) {
		fputs(i ? ",\n    " : "\n    ", out);
		put_string(out, rp_strtab_str(&a->uuids, a->nodes[a->metrics[i]].uuid));
		fputs(": ", out);
		put_metrics(out, a, a->metrics[i], "    ");
	}
	fputs(a->n_metrics ? "\n  },\n  \"top_bottlenecks\": [" : "},\n  \"top_bottlenecks\": [",
	      out);
	for (uint32_t i = 0; i < a->n_top; i++) {
		fputs(i ? ",\n    " : "\n    ", out);
		put_metrics(out, a, a->top[i], "    ");
	}
	fputs(a->n_top ? "\n  ],\n" : "],\n", out);
	put_counts(out, &a->c);
	fputs("}\n", out);
	return ferror(out) ? -EIO : 0;
}

/* CallNode._repr: "  " per level, each root's calls depth-first. */
static void put_tree(FILE *out, const struct rp_aiq *a, uint32_t root, uint32_t *stack)
{
	uint32_t cur = root, sp = 0;

	for (;;) {
		const struct rp_aiq_node *n = &a->nodes[cur];
		for (uint32_t i = 0; i < sp; i++)
			fputs("  ", out);
		fprintf(out, "- %s '%s' (uuid=%s, start=%.2f, end=%.2f, dur=%.2f)\n",
			rp_aiq_type_names[n->type], rp_strtab_str(&a->names, n->name),
			rp_strtab_str(&a->uuids, n->uuid), n->start, n->end, rp_aiq_duration(n));
		if (n->first_child != UINT32_MAX) {
			stack[sp++] = cur;
			cur = n->first_child;
			continue;
		}
		while (a->nodes[cur].next_sibling == UINT32_MAX && sp > 0)
			cur = stack[--sp];
		if (a->nodes[cur].next_sibling == UINT32_MAX)
			return;
		cur = a->nodes[cur].next_sibling;
	}
}

/* The walk of put_tree() without the output: indentation bytes and the deepest level. */
static void tree_cost(const struct rp_aiq *a, uint32_t root, uint32_t *stack, uint64_t *indent,
		      uint32_t *depth)
{
	uint32_t cur = root, sp = 0;

	for (;;) {
		*indent += 2 * (uint64_t)sp;
		*depth = sp > *depth ? sp : *depth;
		if (a->nodes[cur].first_child != UINT32_MAX) {
			stack[sp++] = cur;
			cur = a->nodes[cur].first_child;
			continue;
		}
		while (a->nodes[cur].next_sibling == UINT32_MAX && sp > 0)
			cur = stack[--sp];
		if (a->nodes[cur].next_sibling == UINT32_MAX)
			return;
		cur = a->nodes[cur].next_sibling;
	}
}

int rp_render_aiq_text_indent(const struct rp_aiq *a, uint64_t *indent, uint32_t *depth)
{
	uint32_t *stack = malloc(((size_t)a->n_nodes + 1) * sizeof(*stack));

	*indent = 0;
	*depth = 0;
	if (stack == NULL)
		return -ENOMEM;
	for (uint32_t r = 0; r < a->n_roots; r++)
		tree_cost(a, a->roots[r], stack, indent, depth);
	free(stack);
	return 0;
}

int rp_render_aiq_text(const struct rp_aiq *a, FILE *out)
{
	uint32_t *stack;

	if (a->n_roots == 0) {
		fputs("No calls found.\n", out);
		return ferror(out) ? -EIO : 0;
	}
	stack = malloc(((size_t)a->n_nodes + 1) * sizeof(*stack));
	if (stack == NULL)
		return -ENOMEM;
	fprintf(out,
		"=== Multi-Example Nested Call Profiling Report ===\n"
		"Total calls (across all examples): %u\n\n"
		"-- Concurrency Distribution (all examples) --\n"
		"p50=%.1f, p90=%.1f, p95=%.1f, p99=%.1f\n\n"
		"-- Top 5 Calls by Bottleneck Score (subtree_time) --\n",
		a->n_order, a->p50, a->p90, a->p95, a->p99);
	for (uint32_t i = 0; i < a->n_top; i++) {
		const struct rp_aiq_node *n = &a->nodes[a->top[i]];
		fprintf(out,
			"%u) UUID=%s, %s '%s', dur=%.2f, self_time=%.2f, subtree_time=%.2f, "
			"concurrency=%.1f, score=%.2f\n",
			i + 1, rp_strtab_str(&a->uuids, n->uuid), rp_aiq_type_names[n->type],
			rp_strtab_str(&a->names, n->name), rp_aiq_duration(n), n->self, n->subtree,
			(double)n->mid, n->subtree);
	}
	fputs("\n-- Full Tree(s) (All Examples) --\n", out);
	for (uint32_t r = 0; r < a->n_roots; r++)
		put_tree(out, a, a->roots[r], stack);
	free(stack);
	return ferror(out) ? -EIO : 0;
}
