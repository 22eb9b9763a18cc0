// SPDX-License-Identifier: MIT
/*
 * The text report: what a person reads first. A header says what the report covers
 * (clock, time range, sources) and, before any figure, what was lost on the way
 * (dropped, late, truncated records and every anomaly kind that was counted), so a
 * table built from partial data never looks complete. Then, when the report has them,
 * the concurrency distributions, one line each (overall, roots, then the categories).
 * Then a table in the spirit of cProfile's print_stats: one row per name, ordered by
 * cumulative time, then self time, then name (rp_render_fn_order(), shared with the
 * JSON renderer), with the p50 and p99 durations from the name's sketch.
 *
 * Names are printed so that a row stays one line: control characters as C escapes
 * (\n, \t, \r, \xNN) and ill-formed UTF-8 as U+FFFD (rp_render_utf8_next()).
 *
 * Every figure is formatted from integers (nanoseconds split into whole and
 * fractional parts), so the output is exact and the same on every machine; only the
 * self-time percentage goes through a double. Columns have fixed widths; the name
 * comes last and is never cut.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "render.h"
#include "render_priv.h"


static const char *str_or_empty(const char *s)
{
	return s ? s : "";
}

/* @s on one line, readable: see the top of the file. NULL prints nothing. */
static void put_name(FILE *out, const char *s)
{
	bool valid;
	size_t n;

	for (; s && *s; s += n) {
		unsigned char c = (unsigned char)*s;

		n = rp_render_utf8_next(s, &valid);
		if (!valid)
			fputs("\xef\xbf\xbd", out); /* U+FFFD */
		else if (c == '\n' || c == '\t' || c == '\r')
			fprintf(out, "\\%c", c == '\n' ? 'n' : c == '\t' ? 't' : 'r');
		else if (c < 0x20 || c == 0x7f)
			fprintf(out, "\\x%02x", c);
		else
			fwrite(s, 1, n, out);
	}
}

static int cmp_u64_desc(uint64_t a, uint64_t b)
{
	return a > b ? -1 : a < b;
}

/*
 * Cumulative time descending, self time descending, then name, category, file and
 * line ascending; last the position in the report, so equal rows keep their order.
 */
static int cmp_fn(const void *pa, const void *pb)
{
	const struct rp_report_fn *a = *(const struct rp_report_fn *const *)pa;
	const struct rp_report_fn *b = *(const struct rp_report_fn *const *)pb;
	int c;

	if ((c = cmp_u64_desc(a->cum_ns, b->cum_ns)) != 0)
		return c;
	if ((c = cmp_u64_desc(a->self_ns, b->self_ns)) != 0)
		return c;
	if ((c = strcmp(str_or_empty(a->name), str_or_empty(b->name))) != 0)
		return c;
	if ((c = strcmp(str_or_empty(a->category), str_or_empty(b->category))) != 0)
		return c;
	if ((c = strcmp(str_or_empty(a->file), str_or_empty(b->file))) != 0)
		return c;
	if (a->line != b->line)
		return a->line < b->line ? -1 : 1;
	return a < b ? -1 : a > b;
}

/*
 * rp_render_fn_order() - r->fns in display order (see cmp_fn).
 * Return: a malloc'ed array of r->n_fns pointers into r->fns (the caller frees it),
 * or NULL when out of memory. An empty report gives a valid one-element array.
 */
const struct rp_report_fn **rp_render_fn_order(const struct rp_report *r)
{
	const struct rp_report_fn **v = malloc(sizeof(*v) * (r->n_fns ? r->n_fns : 1));

	if (v == NULL)
		return NULL;
	for (uint32_t i = 0; i < r->n_fns; i++)
		v[i] = &r->fns[i];
	qsort(v, r->n_fns, sizeof(*v), cmp_fn);
	return v;
}

/* "whole.fff": v / div with three decimals, rounded half up; exact for any v. */
static char *fmt_dec3(char buf[32], uint64_t v, uint64_t div)
{
	uint64_t unit = div / 1000, q = v / unit, r = v % unit;

	if (unit > 1 && r >= unit - r)
		q++;
	snprintf(buf, 32, "%" PRIu64 ".%03" PRIu64, q / 1000, q % 1000);
	return buf;
}

/* ns as milliseconds with three decimals. */
static char *fmt_ms(char buf[32], uint64_t ns)
{
	return fmt_dec3(buf, ns, 1000000);
}

/* ns as microseconds with three decimals (exact: one decimal step is 1 ns). */
static char *fmt_us(char buf[32], uint64_t ns)
{
	return fmt_dec3(buf, ns, 1000);
}

/* num / den rounded half up, without overflow; den > 0. */
static uint64_t div_round(uint64_t num, uint64_t den)
{
	uint64_t q = num / den, r = num % den;

	return r >= den - r ? q + 1 : q;
}

static uint64_t add_sat(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static void print_flags(FILE *out, uint32_t flags)
{
	static const char *const words[] = { "exited", "dead", "file", "refused" };
	bool any = false;

	for (unsigned i = 0; i < 4; i++) {
		if (flags & (1u << i)) {
			fprintf(out, "%s%s", any ? "," : "", words[i]);
			any = true;
		}
	}
	if (flags & ~(RP_SRC_EXITED | RP_SRC_DEAD | RP_SRC_FILE | RP_SRC_REFUSED))
		fprintf(out, "%s0x%" PRIx32, any ? "," : "",
			flags & ~(RP_SRC_EXITED | RP_SRC_DEAD | RP_SRC_FILE | RP_SRC_REFUSED));
	else if (!any)
		fputs("live", out);
}

static void print_source(FILE *out, const struct rp_report_source *s)
{
	fputs("  ", out);
	put_name(out, s->name);
	fprintf(out, "  pid %" PRId32 "  ", s->pid);
	print_flags(out, s->flags);
	fprintf(out,
		"  events %" PRIu64 "  dropped %" PRIu64 "  late %" PRIu64 "  truncated %" PRIu64
		"  names_dropped %" PRIu64 "  resyncs %" PRIu64 "\n",
		s->events, s->dropped, s->late, s->truncated, s->names_dropped, s->resyncs);
}

/* Totals, then every non-zero anomaly kind, or "nothing lost". */
static void print_losses(FILE *out, const struct rp_report *r)
{
	bool lost = r->dropped || r->late || r->truncated;

	fprintf(out, "events %" PRIu64 "  dropped %" PRIu64 "  late %" PRIu64
		     "  truncated %" PRIu64 "\n",
		r->events, r->dropped, r->late, r->truncated);
	for (unsigned k = 0; k < RP_ANOM_KIND_COUNT; k++)
		lost = lost || r->anomalies[k];
	if (!lost) {
		fputs("nothing lost\n", out);
		return;
	}
	fputs("anomalies", out);
	for (unsigned k = 0; k < RP_ANOM_KIND_COUNT; k++)
		if (r->anomalies[k])
			fprintf(out, "  %s %" PRIu64, rp_anomaly_names[k], r->anomalies[k]);
	fputc('\n', out);
}

/* The columns @s takes once put_name() has escaped it: code points, not bytes. */
static size_t name_width(const char *s)
{
	size_t w = 0;
	bool valid;
	size_t n;

	for (; s && *s; s += n) {
		unsigned char c = (unsigned char)*s;

		n = rp_render_utf8_next(s, &valid);
		if (!valid || c >= 0x80)
			w += 1; /* one U+FFFD or one character */
		else if (c == '\n' || c == '\t' || c == '\r')
			w += 2;
		else if (c < 0x20 || c == 0x7f)
			w += 4;
		else
			w += 1;
	}
	return w;
}

/* The label of conc[i]: "overall", "roots", then the category's own name. */
static const char *conc_label(const struct rp_report *r, uint32_t i)
{
	return i == 0 ? "overall" : i == 1 ? "roots" : str_or_empty(r->conc[i].name);
}

/*
 * One line per distribution, the names padded to the longest:
 * "concurrency overall  p50 N  p90 N  p95 N  p99 N  max N  mean X.XXX".
 */
static void print_concurrency(FILE *out, const struct rp_report *r)
{
	size_t width = 0;

	for (uint32_t i = 0; i < r->n_conc; i++)
		if (name_width(conc_label(r, i)) > width)
			width = name_width(conc_label(r, i));
	for (uint32_t i = 0; i < r->n_conc; i++) {
		const struct rp_report_conc *c = &r->conc[i];

		fputs("concurrency ", out);
		put_name(out, conc_label(r, i));
		fprintf(out, "%*s", (int)(width - name_width(conc_label(r, i))), "");
		fprintf(out,
			"  p50 %" PRIu32 "  p90 %" PRIu32 "  p95 %" PRIu32 "  p99 %" PRIu32
			"  max %" PRIu32 "  mean %" PRIu64 ".%03" PRIu64 "\n",
			c->p50, c->p90, c->p95, c->p99, c->max, c->mean_milli / 1000,
			c->mean_milli % 1000);
	}
}

static void print_header(FILE *out, const struct rp_report *r)
{
	char span[32];

	fputs("ringprof report, clock ", out);
	put_name(out, r->clock ? r->clock : "?");
	fputc('\n', out);
	fprintf(out, "time range %" PRIu64 " .. %" PRIu64 " ns (%s ms)\n", r->t_first, r->t_last,
		fmt_ms(span, r->t_last > r->t_first ? r->t_last - r->t_first : 0));
	fprintf(out, "sources %" PRIu32 "\n", r->n_sources);
	for (uint32_t i = 0; i < r->n_sources; i++)
		print_source(out, &r->sources[i]);
	print_losses(out, r);
	print_concurrency(out, r);
}

/* "calls" or "calls/primitive" (cProfile's "3/1" for recursion). */
static char *fmt_calls(char buf[48], const struct rp_report_fn *f)
{
	if (f->calls == f->primitive_calls)
		snprintf(buf, 48, "%" PRIu64, f->calls);
	else
		snprintf(buf, 48, "%" PRIu64 "/%" PRIu64, f->calls, f->primitive_calls);
	return buf;
}

/* The percentage of the total self time, "-" when there is none. */
static char *fmt_pct(char buf[32], uint64_t part, uint64_t total)
{
	if (total == 0)
		snprintf(buf, 32, "-");
	else
		snprintf(buf, 32, "%.1f", 100.0 * (double)part / (double)total);
	return buf;
}

static void print_row(FILE *out, const struct rp_report_fn *f, uint64_t total_self)
{
	char calls[48], self[32], pct[32], cum[32], per[32] = "-", lo[32] = "-", hi[32] = "-";
	char p50[32] = "-", p99[32] = "-";

	if (f->primitive_calls)
		fmt_us(per, div_round(f->cum_ns, f->primitive_calls));
	if (f->calls) {
		fmt_us(lo, f->min_ns);
		fmt_us(hi, f->max_ns);
	}
	if (f->p99_ns) { /* 0: the name has no sketch (or no calls) */
		fmt_us(p50, f->p50_ns);
		fmt_us(p99, f->p99_ns);
	}
	fprintf(out, "%15s %12s %6s %12s %12s %12s %12s %12s %12s  ", fmt_calls(calls, f),
		fmt_ms(self, f->self_ns), fmt_pct(pct, f->self_ns, total_self),
		fmt_ms(cum, f->cum_ns), per, lo, hi, p50, p99);
	put_name(out, f->name);
	if (f->category && f->category[0]) {
		fputs(" [", out);
		put_name(out, f->category);
		fputc(']', out);
	}
	if (f->file && f->file[0]) {
		fputc(' ', out);
		put_name(out, f->file);
		if (f->line)
			fprintf(out, ":%" PRIu32, f->line);
	}
	fputc('\n', out);
}

static void print_table(FILE *out, const struct rp_report *r,
			const struct rp_report_fn *const *order, unsigned limit)
{
	uint32_t rows = limit && limit < r->n_fns ? limit : r->n_fns;
	uint64_t total_self = 0;

	for (uint32_t i = 0; i < r->n_fns; i++)
		total_self = add_sat(total_self, r->fns[i].self_ns);
	fprintf(out, "\nfunctions %" PRIu32 " of %" PRIu32 ", by cum time, then self time\n",
		rows, r->n_fns);
	fprintf(out, "%15s %12s %6s %12s %12s %12s %12s %12s %12s  %s\n", "calls", "self ms",
		"self%", "cum ms", "cum/call us", "min us", "max us", "p50 us", "p99 us",
		"name [category] file:line");
	for (uint32_t i = 0; i < rows; i++)
		print_row(out, order[i], total_self);
}

/*
 * rp_render_text() - see render.h. Rows: cum/call is per primitive call, like
 * cProfile's second percall; min and max are per call; p50 and p99 are the duration
 * quantiles of the name's sketch. A "-" stands for a figure that has no value (no
 * calls, no self time at all, no sketch: p99_ns == 0).
 * Return: 0, -ENOMEM, or -EIO when writing to @out failed.
 */
int rp_render_text(const struct rp_report *r, FILE *out, unsigned limit)
{
	const struct rp_report_fn **order;

	assert(r != NULL && out != NULL);
	order = rp_render_fn_order(r);
	if (order == NULL)
		return -ENOMEM;
	print_header(out, r);
	print_table(out, r, order, limit);
	rp_render_device_text(r, out);
	free(order);
	return fflush(out) || ferror(out) ? -EIO : 0;
}
