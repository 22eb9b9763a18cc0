// SPDX-License-Identifier: MIT
/*
 * The JSON report: one object, for scripts and dashboards. Written by hand rather
 * than with yajl_gen because every integer is a uint64 and must come out exact
 * (yajl_gen_integer takes a long long), and because names come from other processes
 * and trace files: they may hold any byte, and the output must still be valid JSON.
 * So strings are escaped here: '"' and '\' with a backslash, control characters
 * (and DEL) as \u00XX, and every ill-formed UTF-8 sequence replaced by U+FFFD, one
 * per maximal ill-formed subpart (Unicode 15, 3.9 "U+FFFD substitution of maximal
 * subparts", which is also what Python's bytes.decode(errors="replace") does).
 *
 * Layout (one key per line at the top, one array element per line):
 *   {"events", "dropped", "late", "truncated", "anomalies" {kind: n, every kind},
 *    "time_range_ns" [t_first, t_last], "clock", "caps" {...},
 *    "concurrency" {"overall" DIST, "roots" DIST, "by_category" {category: DIST}},
 *    "sources" [{"name", "pid", "flags" [words], "events", "dropped", "late",
 *                "truncated", "names_dropped", "resyncs", "anomalies" {...}}],
 *    "functions" [{"name", "category", "file", "line", "calls", "primitive_calls",
 *                  "self_ns", "cum_ns", "min_ns", "max_ns", "mean_ns", "p50_ns",
 *                  "p90_ns", "p95_ns", "p99_ns", "midpoint_concurrency_mean"}],
 *    "edges" [{"caller", "callee", "calls", "primitive_calls", "self_ns", "cum_ns"}]}
 * DIST is {"p50", "p90", "p95", "p99", "max", "mean", "observed_ns"}: integers but for
 * "mean", mean_milli / 1000 written exactly with three decimals ("1.500").
 * "concurrency" is built from r->conc: conc[0] is "overall", conc[1] "roots" (left
 * out if missing), conc[2...] are "by_category" under their names, in report order;
 * it is {} when the report has none (n_conc == 0, a 1.0 snapshot).
 * Functions come in the text report's order: cum_ns descending, self_ns descending,
 * then name, category, file, line ascending (byte order). Edges come in the report's
 * order and name their ends. mean_ns is total_ns / calls rounded down, 0 for no calls.
 * The p*_ns quantiles are 0 when the name has no sketch. midpoint_concurrency_mean is
 * midpoint_sum / midpoint_count as a double with 6 significant digits ("%.6g": "0",
 * "2.5", "1.84467e+19", all valid JSON numbers), 0 when midpoint_count is 0.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>

#include "render.h"
#include "render_priv.h"


/*
 * rp_render_utf8_next() - the length of the UTF-8 sequence that starts at @s.
 * @s: a NUL-terminated string, *s != 0.
 * @valid: set to whether those bytes are one well-formed character; if not, they are
 *	one maximal ill-formed subpart, to be replaced by a single U+FFFD.
 * Return: 1 to 4; never reads past the terminating NUL (it is no continuation byte).
 */
size_t rp_render_utf8_next(const char *s, bool *valid)
{
	const unsigned char *u = (const unsigned char *)s;
	unsigned char lo = 0x80, hi = 0xbf;
	size_t need;

	*valid = true;
	if (u[0] < 0x80)
		return 1;
	if (u[0] >= 0xc2 && u[0] <= 0xdf)
		need = 1;
	else if (u[0] >= 0xe0 && u[0] <= 0xef)
		need = 2;
	else if (u[0] >= 0xf0 && u[0] <= 0xf4)
		need = 3;
	else
		need = 0;
	if (u[0] == 0xe0)
		lo = 0xa0; /* overlong */
	else if (u[0] == 0xed)
		hi = 0x9f; /* surrogates */
	else if (u[0] == 0xf0)
		lo = 0x90; /* overlong */
	else if (u[0] == 0xf4)
		hi = 0x8f; /* above U+10FFFF */
	*valid = need > 0;
	for (size_t i = 1; i <= need; i++) {
		if (u[i] < lo || u[i] > hi) {
			*valid = false;
			return i;
		}
		lo = 0x80;
		hi = 0xbf;
	}
	return need + 1;
}

/* A JSON string; NULL is written as "". */
static void put_str(FILE *out, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	bool valid;
	size_t n;

	fputc('"', out);
	for (; s && *s; s += n) {
		unsigned char c = (unsigned char)*s;

		n = rp_render_utf8_next(s, &valid);
		if (!valid)
			fputs("\xef\xbf\xbd", out); /* U+FFFD */
		else if (c == '"' || c == '\\')
			fprintf(out, "\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			fprintf(out, "\\u00%c%c", hex[c >> 4], hex[c & 15]);
		else
			fwrite(s, 1, n, out);
	}
	fputc('"', out);
}

static void put_key(FILE *out, const char *sep, const char *key)
{
	fprintf(out, "%s\"%s\":", sep, key);
}

static void put_u64(FILE *out, const char *sep, const char *key, uint64_t v)
{
	fprintf(out, "%s\"%s\":%" PRIu64, sep, key, v);
}

static void put_anomalies(FILE *out, const char *sep, const uint64_t a[RP_ANOM_KIND_COUNT])
{
	put_key(out, sep, "anomalies");
	for (unsigned k = 0; k < RP_ANOM_KIND_COUNT; k++)
		put_u64(out, k ? "," : "{", rp_anomaly_names[k], a[k]);
	fputc('}', out);
}

static void put_caps(FILE *out, const struct rp_report_caps *c)
{
	put_key(out, ",\n  ", "caps");
	fprintf(out,
		"{\"max_names\":%" PRIu32 ",\"max_tracks\":%" PRIu32 ",\"max_depth\":%" PRIu32
		",\"max_cct_nodes\":%" PRIu32 ",\"max_sources\":%" PRIu32 "}",
		c->max_names, c->max_tracks, c->max_depth, c->max_cct_nodes, c->max_sources);
}

/* One word per known RP_SRC_* bit; unknown bits as one "0x..." word. */
static void put_flags(FILE *out, uint32_t flags)
{
	static const char *const words[] = { "exited", "dead", "file", "refused" };
	const uint32_t known = RP_SRC_EXITED | RP_SRC_DEAD | RP_SRC_FILE | RP_SRC_REFUSED;
	const char *sep = "[";

	for (unsigned i = 0; i < 4; i++) {
		if (flags & (1u << i)) {
			fprintf(out, "%s\"%s\"", sep, words[i]);
			sep = ",";
		}
	}
	if (flags & ~known)
		fprintf(out, "%s\"0x%" PRIx32 "\"", sep, flags & ~known);
	fputs(flags ? "]" : "[]", out);
}

static void put_source(FILE *out, const struct rp_report_source *s)
{
	put_key(out, "{", "name");
	put_str(out, s->name);
	fprintf(out, ",\"pid\":%" PRId32 ",\"flags\":", s->pid);
	put_flags(out, s->flags);
	put_u64(out, ",", "events", s->events);
	put_u64(out, ",", "dropped", s->dropped);
	put_u64(out, ",", "late", s->late);
	put_u64(out, ",", "truncated", s->truncated);
	put_u64(out, ",", "names_dropped", s->names_dropped);
	put_u64(out, ",", "resyncs", s->resyncs);
	put_anomalies(out, ",", s->anomalies);
	fputc('}', out);
}

static void put_fn(FILE *out, const struct rp_report_fn *f)
{
	put_key(out, "{", "name");
	put_str(out, f->name);
	put_key(out, ",", "category");
	put_str(out, f->category);
	put_key(out, ",", "file");
	put_str(out, f->file);
	put_u64(out, ",", "line", f->line);
	put_u64(out, ",", "calls", f->calls);
	put_u64(out, ",", "primitive_calls", f->primitive_calls);
	put_u64(out, ",", "self_ns", f->self_ns);
	put_u64(out, ",", "cum_ns", f->cum_ns);
	put_u64(out, ",", "min_ns", f->min_ns);
	put_u64(out, ",", "max_ns", f->max_ns);
	put_u64(out, ",", "mean_ns", f->calls ? f->total_ns / f->calls : 0);
	put_u64(out, ",", "p50_ns", f->p50_ns);
	put_u64(out, ",", "p90_ns", f->p90_ns);
	put_u64(out, ",", "p95_ns", f->p95_ns);
	put_u64(out, ",", "p99_ns", f->p99_ns);
	put_key(out, ",", "midpoint_concurrency_mean");
	if (f->midpoint_count == 0)
		fputc('0', out);
	else /* finite and >= 0: %g writes a valid JSON number */
		fprintf(out, "%.6g", (double)f->midpoint_sum / (double)f->midpoint_count);
	fputc('}', out);
}

/* DIST (see the layout above), under @key. */
static void put_conc(FILE *out, const char *sep, const char *key,
		     const struct rp_report_conc *c)
{
	fputs(sep, out);
	put_str(out, key);
	fprintf(out,
		":{\"p50\":%" PRIu32 ",\"p90\":%" PRIu32 ",\"p95\":%" PRIu32 ",\"p99\":%" PRIu32
		",\"max\":%" PRIu32 ",\"mean\":%" PRIu64 ".%03" PRIu64 ",\"observed_ns\":%" PRIu64
		"}",
		c->p50, c->p90, c->p95, c->p99, c->max, c->mean_milli / 1000,
		c->mean_milli % 1000, c->observed_ns);
}

static void put_concurrency(FILE *out, const struct rp_report *r)
{
	put_key(out, ",\n  ", "concurrency");
	if (r->n_conc == 0) {
		fputs("{}", out);
		return;
	}
	put_conc(out, "{\n    ", "overall", &r->conc[0]);
	if (r->n_conc > 1)
		put_conc(out, ",\n    ", "roots", &r->conc[1]);
	fputs(",\n    \"by_category\":", out);
	for (uint32_t i = 2; i < r->n_conc; i++)
		put_conc(out, i > 2 ? ",\n      " : "{\n      ", r->conc[i].name, &r->conc[i]);
	fputs(r->n_conc > 2 ? "\n    }\n  }" : "{}\n  }", out);
}

static void put_edge(FILE *out, const struct rp_report *r, const struct rp_report_edge *e)
{
	put_key(out, "{", "caller");
	put_str(out, r->fns[e->caller].name);
	put_key(out, ",", "callee");
	put_str(out, r->fns[e->callee].name);
	put_u64(out, ",", "calls", e->calls);
	put_u64(out, ",", "primitive_calls", e->primitive_calls);
	put_u64(out, ",", "self_ns", e->self_ns);
	put_u64(out, ",", "cum_ns", e->cum_ns);
	fputc('}', out);
}

static void put_totals(FILE *out, const struct rp_report *r)
{
	put_u64(out, "{\n  ", "events", r->events);
	put_u64(out, ",\n  ", "dropped", r->dropped);
	put_u64(out, ",\n  ", "late", r->late);
	put_u64(out, ",\n  ", "truncated", r->truncated);
	put_anomalies(out, ",\n  ", r->anomalies);
	put_key(out, ",\n  ", "time_range_ns");
	fprintf(out, "[%" PRIu64 ",%" PRIu64 "]", r->t_first, r->t_last);
	put_key(out, ",\n  ", "clock");
	put_str(out, r->clock);
	put_caps(out, &r->caps);
	put_concurrency(out, r);
}

static void put_lists(FILE *out, const struct rp_report *r,
		      const struct rp_report_fn *const *order)
{
	put_key(out, ",\n  ", "sources");
	for (uint32_t i = 0; i < r->n_sources; i++) {
		fputs(i ? ",\n    " : "[\n    ", out);
		put_source(out, &r->sources[i]);
	}
	fputs(r->n_sources ? "\n  ]" : "[]", out);
	put_key(out, ",\n  ", "functions");
	for (uint32_t i = 0; i < r->n_fns; i++) {
		fputs(i ? ",\n    " : "[\n    ", out);
		put_fn(out, order[i]);
	}
	fputs(r->n_fns ? "\n  ]" : "[]", out);
	put_key(out, ",\n  ", "edges");
	for (uint32_t i = 0; i < r->n_edges; i++) {
		fputs(i ? ",\n    " : "[\n    ", out);
		put_edge(out, r, &r->edges[i]);
	}
	fputs(r->n_edges ? "\n  ]\n}\n" : "[]\n}\n", out);
}

/*
 * rp_render_json() - see render.h and the layout above.
 * Return: 0; -EINVAL (nothing written) if an edge names a function outside r->fns;
 * -ENOMEM; -EIO when writing to @out failed.
 */
int rp_render_json(const struct rp_report *r, FILE *out)
{
	const struct rp_report_fn **order;

	assert(r != NULL && out != NULL);
	for (uint32_t i = 0; i < r->n_edges; i++)
		if (r->edges[i].caller >= r->n_fns || r->edges[i].callee >= r->n_fns)
			return -EINVAL;
	order = rp_render_fn_order(r);
	if (order == NULL)
		return -ENOMEM;
	put_totals(out, r);
	rp_render_device_json(r, out);
	put_lists(out, r, order);
	free(order);
	return fflush(out) || ferror(out) ? -EIO : 0;
}
