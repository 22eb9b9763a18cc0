// SPDX-License-Identifier: MIT
/*
 * The text report: what a person reads first. A header says what the report covers
 * (clock, time range: times are from the first event, sources) and, before any
 * figure, what was lost on the way (dropped, late, truncated records and every
 * anomaly kind that was counted), so a table built from partial data never looks
 * complete. Then, when the report has them, the concurrency distributions, one line
 * each (overall, roots, then the categories).
 * Then a table in the spirit of cProfile's print_stats: one row per name, ordered by
 * cumulative time, then self time, then name (rp_render_fn_order(), shared with the
 * JSON renderer), with the p50 and p99 durations from the name's sketch. Then, for
 * report 1.2, blocks for what the engine found beyond the table, each only when the
 * report has its data, so a 1.1 snapshot renders as before: the all-time bottleneck
 * lists (a "±error" beside an entry that Space-Saving may overstate), the slowest
 * spans, one block per rolling window (one line for a window over every event: its
 * tables would repeat the all-time ones), the categories and the counters. --limit
 * bounds the rows of every table. A row whose name had spans cut by drops (1.3)
 * ends with "(+N cut by drops)", and the header says what the async expiry closed
 * and the bound it leaves on the concurrency lines.
 *
 * Names are printed so that a row stays one line and drives no terminal: control
 * characters as C escapes (\n, \t, \r, \xNN; C1 controls \xc2\xNN) and ill-formed
 * UTF-8 as U+FFFD (rp_render_safe_char()).
 *
 * Every figure is formatted from integers (nanoseconds split into whole and
 * fractional parts), so the output is exact and the same on every machine; only the
 * self-time percentage goes through a double. Columns have fixed widths; the name
 * comes last and is never cut.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "render.h"
#include "render_export.h"
#include "render_priv.h"


static const char *str_or_empty(const char *s)
{
	return s ? s : "";
}

/* @s on one line, readable: see the top of the file. NULL prints nothing. */
static void put_name(FILE *out, const char *s)
{
	rp_render_safe_str(out, s, SIZE_MAX);
}

static int cmp_u64_desc(uint64_t a, uint64_t b)
{
	return a > b ? -1 : a < b;
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

/* Where the source ran (1.4 snapshots), and the shift a merge gave its times. */
static void print_source_host(FILE *out, const struct rp_report_source *s)
{
	if (s->host == NULL || s->host[0] == '\0')
		return;
	fprintf(out, "    host %s  boot %.8s", s->host, s->boot_id ? s->boot_id : "");
	if (s->clock_shift_ns != 0)
		fprintf(out, "  times shifted %+.6f s onto the first host's clock (wall time)",
			(double)s->clock_shift_ns / 1e9);
	fputc('\n', out);
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
	if (s->rings_nospace > 0) /* /dev/shm was full: the operator's to fix */
		fprintf(out, "    no room in /dev/shm: %" PRIu64 " ring claims refused, %" PRIu64
			" of the dropped events\n", s->rings_nospace, s->nospace_dropped);
	if (s->reentrant > 0) /* recorded from a signal handler inside a recording call */
		fprintf(out, "    reentrant: %" PRIu64 " of the dropped events were made by signal"
			" handlers inside a recording call of their thread\n", s->reentrant);
	if (s->dropped > s->nospace_dropped + s->reentrant) { /* full rings */
		fprintf(out, "    dropped %" PRIu64 ": full rings; raise RINGPROF_RING_EVENTS",
			s->dropped - s->nospace_dropped - s->reentrant);
		if (s->ring_capacity)
			fprintf(out, " (now %" PRIu64 ")", s->ring_capacity);
		fputs(" or exclude the busiest names\n", out);
	}
	if (s->summary_raised > 0) /* the producer folded more to keep up: say so */
		fprintf(out, "    summaries: threshold raised %" PRIu64 " times, now up to %" PRIu64
			" ns (rings more than half full; RINGPROF_SUMMARY_NS, RINGPROF_RING_EVENTS)"
			"\n", s->summary_raised, s->summary_ns);
	else if (s->summary_ns > 0)
		fprintf(out, "    summaries: calls under %" PRIu64 " ns folded at the source"
			" (RINGPROF_SUMMARY_NS)\n", s->summary_ns);
	if (s->names_dropped > 0) { /* the used figures say which table filled */
		fprintf(out, "    names_dropped %" PRIu64 ": recorded as [overflow]; raise "
			"RINGPROF_NAME_BYTES", s->names_dropped);
		if (s->name_bytes)
			fprintf(out, " (now %" PRIu64 ", %" PRIu64 " used)", s->name_bytes,
				s->name_bytes_used);
		fputs(" or RINGPROF_NAMES", out);
		if (s->name_capacity)
			fprintf(out, " (now %" PRIu64 ", %" PRIu64 " used)", s->name_capacity,
				s->names_used);
		fputc('\n', out);
	}
	print_source_host(out, s);
}

/*
 * Async requests a drop may have left open (report.h), when there are any: what the
 * expiry closed and the bound on the concurrency lines that follow.
 */
static void print_expiry(FILE *out, const struct rp_report_expiry *x)
{
	char a[32], b[32];
	uint64_t spans, ns;

	rp_report_expiry_bound(x, &spans, &ns);
	if (spans == 0)
		return;
	if (x->expire_ns)
		fprintf(out, "async expiry %s ms: %" PRIu64 " requests (%" PRIu64
			     " spans) expired after drops, %" PRIu64 " open across a drop\n",
			fmt_ms(a, x->expire_ns), x->requests, x->spans, x->suspect_requests);
	else
		fprintf(out, "async expiry off: %" PRIu64 " requests open across a drop\n",
			x->suspect_requests);
	if (ns == UINT64_MAX)
		fprintf(out, "  concurrency may be overstated by at most %" PRIu64
			     " spans, for as long as they stay open\n", spans);
	else
		fprintf(out, "  concurrency may be overstated by at most %" PRIu64
			     " spans at a time, each for at most %s ms\n", spans, fmt_ms(b, ns));
}

/* Each engine cap that was hit, with the `ringprof run` option that raises it. */
static void print_cap_knobs(FILE *out, const struct rp_report *r)
{
	const struct rp_report_caps *c = &r->caps;
	const struct {
		int kind;
		const char *option;
		uint64_t now;
	} knobs[] = {
		{ RP_ANOM_DEPTH_CAP, "--max-depth", c->max_depth },
		{ RP_ANOM_TRACK_CAP, "--max-tracks", c->max_tracks },
		{ RP_ANOM_NAME_CAP, "--max-names", c->max_names },
		{ RP_ANOM_CCT_CAP, "--max-cct-nodes", c->max_cct_nodes },
		{ RP_ANOM_WINDOW_CAP, "--max-window-names", c->max_window_names },
		{ RP_ANOM_COUNTER_CAP, "--max-counters", c->max_counters },
		{ RP_ANOM_LEVEL_CAP, "--max-window-level", c->max_window_level },
		{ RP_ANOM_SKETCH_EVICTED, "--max-sketch-names", c->max_sketch_names },
		{ RP_ANOM_WINDOW_EVICTED, "--max-window-names", c->max_window_names },
	};

	for (size_t i = 0; i < sizeof(knobs) / sizeof(knobs[0]); i++) {
		uint64_t n = r->anomalies[knobs[i].kind];
		if (n == 0)
			continue;
		fprintf(out, "  %s %" PRIu64 ": raise ringprof run %s", rp_anomaly_names[knobs[i].kind],
			n, knobs[i].option);
		if (knobs[i].now)
			fprintf(out, " (now %" PRIu64 ")", knobs[i].now);
		fputc('\n', out);
	}
}

/* Totals, then every non-zero anomaly kind (a cap with its knob), or "nothing lost". */
static void print_losses(FILE *out, const struct rp_report *r)
{
	bool lost = r->dropped || r->late || r->truncated;

	fprintf(out, "events %" PRIu64 "  dropped %" PRIu64 "  late %" PRIu64
		     "  truncated %" PRIu64 "\n",
		r->events, r->dropped, r->late, r->truncated);
	if (r->unmerged_records > 0) /* not lost: in the engine's next snapshot */
		fprintf(out, "not yet merged %" PRIu64 " records (the engine's backlog when "
			     "this snapshot was taken)\n", r->unmerged_records);
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
	print_cap_knobs(out, r);
	print_expiry(out, &r->expiry);
}

/* The columns @s takes once put_name() has escaped it: code points, not bytes. */
static size_t name_width(const char *s)
{
	return rp_render_safe_width(s);
}

/* The label of conc[i]: "overall", "roots", then the category's own name. */
static const char *conc_label(const struct rp_report_conc *c, uint32_t i)
{
	return i == 0 ? "overall" : i == 1 ? "roots" : str_or_empty(c[i].name);
}

/*
 * One line per distribution, the names padded to the longest:
 * "concurrency overall  p50 N  p90 N  p95 N  p99 N  max N  mean X.XXX".
 */
static void print_conc_lines(FILE *out, const struct rp_report_conc *conc, uint32_t n)
{
	size_t width = 0;

	for (uint32_t i = 0; i < n; i++)
		if (name_width(conc_label(conc, i)) > width)
			width = name_width(conc_label(conc, i));
	for (uint32_t i = 0; i < n; i++) {
		const struct rp_report_conc *c = &conc[i];

		fputs("concurrency ", out);
		put_name(out, conc_label(conc, i));
		fprintf(out, "%*s", (int)(width - name_width(conc_label(conc, i))), "");
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
	/* Times below are from the first event; its own clock reading is said once, for
	 * --from/--to (which take the report clock) and for other tools' timestamps. */
	fprintf(out, "time range %s ms from the first event (at %" PRIu64 " ns on that clock)\n",
		fmt_ms(span, r->t_last > r->t_first ? r->t_last - r->t_first : 0), r->t_first);
	fprintf(out, "sources %" PRIu32 "\n", r->n_sources);
	for (uint32_t i = 0; i < r->n_sources; i++)
		print_source(out, &r->sources[i]);
	print_losses(out, r);
	print_conc_lines(out, r->conc, r->n_conc);
	if (rp_report_has_requests(r)) /* request spans only: no batching loop's */
		fprintf(out,
			"requests in flight  now %" PRIu32 "  p50 %" PRIu32 "  p90 %" PRIu32
			"  p95 %" PRIu32 "  p99 %" PRIu32 "  max %" PRIu32 "  mean %" PRIu64
			".%03" PRIu64 "\n",
			r->requests.now, r->requests.p50, r->requests.p90, r->requests.p95,
			r->requests.p99, r->requests.max, r->requests.mean_milli / 1000,
			r->requests.mean_milli % 1000);
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

/* A name's self time as ms; negative only with torch nesting (report.h). */
static char *fmt_self_ms(char buf[32], uint64_t ns)
{
	char abs[32];

	if ((int64_t)ns >= 0)
		return fmt_ms(buf, ns);
	snprintf(buf, 32, "-%.30s", fmt_ms(abs, -ns));
	return buf;
}

/* Off-CPU time is shown when it was measured (or a merged input has some). */
static bool offcpu_known(const struct rp_report *r)
{
	if (r->offcpu.state == RP_OFFCPU_ON)
		return true;
	for (uint32_t i = 0; i < r->n_fns; i++)
		if (r->fns[i].offcpu_ns)
			return true;
	return false;
}

/* How off-CPU time was measured, one line (or none: not a live session, or off). */
static void print_offcpu(FILE *out, const struct rp_report *r)
{
	const struct rp_report_offcpu *o = &r->offcpu;
	char tot[32], idle[32];
	uint64_t idle_ns = 0;

	if (o->state == RP_OFFCPU_REFUSED) {
		fputs("off-cpu: not measured, the kernel refused perf_event_open (the engine "
		      "log says why)\n", out);
		return;
	}
	if (!offcpu_known(r))
		return;
	for (uint32_t i = 0; i < r->n_sources; i++)
		idle_ns = add_sat(idle_ns, r->sources[i].offcpu_idle_ns);
	fprintf(out,
		"off-cpu ms: the part of self ms its thread was switched out (context switches);"
		" %s ms in all, %s ms of it with no span open; %" PRIu64 " threads watched",
		fmt_ms(tot, o->total_ns), fmt_ms(idle, idle_ns), o->watched);
	if (o->refused)
		fprintf(out, ", %" PRIu64 " not (--offcpu-threads)", o->refused);
	if (o->lost || o->unpaired)
		fprintf(out, ", %" PRIu64 " switch records lost, %" PRIu64 " unpaired", o->lost,
			o->unpaired);
	if (o->overflow)
		fprintf(out, ", %" PRIu64 " intervals (%s ms) left out: the engine fell behind",
			o->overflow, fmt_ms(tot, o->overflow_ns));
	fputc('\n', out);
}

/* @off: the off-CPU column is shown (offcpu_known()). */
static void print_row(FILE *out, const struct rp_report_fn *f, uint64_t total_self, bool off)
{
	char calls[48], self[32], pct[32], cum[32], per[32] = "-", lo[32] = "-", hi[32] = "-";
	char p50[32] = "-", p99[32] = "-", offcpu[32];

	if (f->primitive_calls)
		fmt_us(per, div_round(f->cum_ns, f->primitive_calls));
	if (f->calls) {
		fmt_us(lo, f->min_ns);
		fmt_us(hi, f->max_ns);
	}
	if (rp_report_fn_has_quantiles(f)) { /* else "-": no sketch (or no calls) */
		fmt_us(p50, f->p50_ns);
		fmt_us(p99, f->p99_ns);
	}
	fprintf(out, "%15s %12s %6s ", fmt_calls(calls, f), fmt_self_ms(self, f->self_ns),
		fmt_pct(pct, (int64_t)f->self_ns < 0 ? 0 : f->self_ns, total_self));
	if (off)
		fprintf(out, "%12s ", fmt_ms(offcpu, f->offcpu_ns));
	fprintf(out, "%12s %12s %12s %12s %12s %12s  ", fmt_ms(cum, f->cum_ns), per, lo, hi, p50,
		p99);
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
	if (f->drop_lost) /* the row is short by these */
		fprintf(out, "  (+%" PRIu64 " cut by drops)", f->drop_lost);
	if (f->errors) /* of its calls, not more */
		fprintf(out, "  (%" PRIu64 " errors)", f->errors);
	fputc('\n', out);
}

static void print_table(FILE *out, const struct rp_report *r,
			const struct rp_report_fn *const *order, unsigned limit)
{
	uint32_t rows = limit && limit < r->n_fns ? limit : r->n_fns;
	uint64_t total_self = 0;
	bool off = offcpu_known(r);

	for (uint32_t i = 0; i < r->n_fns; i++)
		if ((int64_t)r->fns[i].self_ns > 0)
			total_self = add_sat(total_self, r->fns[i].self_ns);
	fprintf(out, "\nfunctions %" PRIu32 " of %" PRIu32 ", by cum time, then self time\n",
		rows, r->n_fns);
	fprintf(out, "%15s %12s %6s ", "calls", "self ms", "self%");
	if (off)
		fprintf(out, "%12s ", "off-cpu ms");
	fprintf(out, "%12s %12s %12s %12s %12s %12s  %s\n", "cum ms", "cum/call us", "min us",
		"max us", "p50 us", "p99 us", "name [category] file:line");
	for (uint32_t i = 0; i < rows; i++)
		print_row(out, order[i], total_self, off);
	for (uint32_t i = 0; i < r->n_fns; i++)
		if (r->fns[i].drop_lost) {
			fputs("(+N cut by drops): N more calls of that name a drop cut, in none "
			      "of its figures\n", out);
			break;
		}
	print_offcpu(out, r);
}

/* Rows shown of @n: all, or the first @limit. */
static uint32_t rows_of(uint32_t n, unsigned limit)
{
	return limit && limit < n ? limit : n;
}

/* @s (ASCII or "±") right-aligned in @width columns. */
static void put_right(FILE *out, const char *s, size_t width)
{
	size_t w = name_width(s);

	fprintf(out, "%*s%s", (int)(w < width ? width - w : 0), "", s);
}

/* "name [category]" of fns[@fn] (the category when it has one), "?" out of range. */
static void put_fn_label(FILE *out, const struct rp_report *r, uint32_t fn)
{
	const struct rp_report_fn *f = rp_render_fn_at(r, fn);

	if (f == NULL) {
		fputc('?', out);
		return;
	}
	put_name(out, f->name);
	if (f->category && f->category[0]) {
		fputs(" [", out);
		put_name(out, f->category);
		fputc(']', out);
	}
}

/* Request milestones (1.5, engine/core/marks.h): each call is one request's time from
 * its start to the mark; listed apart, as their rows above have no self or cum time. */
static void print_milestones(FILE *out, const struct rp_report *r,
			     const struct rp_report_fn *const *order)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < r->n_fns; i++)
		n += r->fns[i].milestone != 0;
	if (n == 0)
		return;
	fprintf(out, "\nmilestones %" PRIu32 ": time from a request's start to its mark\n", n);
	fprintf(out, "%15s %12s %12s %12s %12s %12s %12s  %s\n", "requests", "mean us", "min us",
		"p50 us", "p90 us", "p99 us", "max us", "name [category]");
	for (uint32_t i = 0; i < r->n_fns; i++) {
		const struct rp_report_fn *f = order[i];
		char c[32], mean[32] = "-", lo[32] = "-", hi[32] = "-";
		char p50[32] = "-", p90[32] = "-", p99[32] = "-";

		if (!f->milestone)
			continue;
		if (f->calls) {
			fmt_us(mean, div_round(f->total_ns, f->calls));
			fmt_us(lo, f->min_ns);
			fmt_us(hi, f->max_ns);
		}
		if (rp_report_fn_has_quantiles(f)) {
			fmt_us(p50, f->p50_ns);
			fmt_us(p90, f->p90_ns);
			fmt_us(p99, f->p99_ns);
		}
		snprintf(c, sizeof(c), "%" PRIu64, f->calls);
		fprintf(out, "%15s %12s %12s %12s %12s %12s %12s  ", c, mean, lo, p50, p90, p99, hi);
		put_fn_label(out, r, (uint32_t)(f - r->fns));
		fputc('\n', out);
	}
}

/* Batched work charged to requests (1.6, engine/core/charge.h), per request name: the
 * shares (one per charged span and request), their sum, and the mean per request. An
 * attribution view: the charged spans keep their time in their own rows. */
static void print_charged(FILE *out, const struct rp_report *r,
			  const struct rp_report_fn *const *order)
{
	uint32_t n = 0;
	char c[32], ns[32], per[32];

	for (uint32_t i = 0; i < r->n_fns; i++)
		n += r->fns[i].charged != 0;
	if (n == 0)
		return;
	fprintf(out, "\ncharged to requests %" PRIu32 ": batched spans' time split between the "
		     "requests they served (the spans keep it in their own rows)\n", n);
	fprintf(out, "%15s %12s %15s  %s\n", "shares", "charged ms", "per request ms",
		"name [category]");
	for (uint32_t i = 0; i < r->n_fns; i++) {
		const struct rp_report_fn *f = order[i];

		if (f->charged == 0)
			continue;
		snprintf(c, sizeof(c), "%" PRIu64, f->charged);
		fprintf(out, "%15s %12s %15s  ", c, fmt_ms(ns, f->charged_ns),
			f->calls ? fmt_ms(per, div_round(f->charged_ns, f->calls)) : "-");
		put_fn_label(out, r, (uint32_t)(f - r->fns));
		fputc('\n', out);
	}
}

/* One bottleneck list: times in ms, or counts; "±error" when the entry is not exact. */
static void print_tops(FILE *out, const struct rp_report *r, const char *what, const char *column,
		       const struct rp_report_top *t, uint32_t n, uint64_t bound, bool count,
		       unsigned limit)
{
	char v[32], e[40], b[32];
	uint32_t rows = rows_of(n, limit);

	if (count)
		snprintf(b, sizeof(b), "%" PRIu64, bound);
	else
		fmt_ms(b, bound);
	fprintf(out, "by %s: %" PRIu32 " of %" PRIu32 ", bound %s%s\n", what, rows, n, b,
		count ? "" : " ms");
	if (rows)
		fprintf(out, "%15s %13s  %s\n", column, count ? "error" : "error ms",
			"name [category]");
	for (uint32_t i = 0; i < rows; i++) {
		if (count)
			snprintf(v, sizeof(v), "%" PRIu64, t[i].value);
		else
			fmt_ms(v, t[i].value);
		e[0] = '\0';
		if (t[i].error && count)
			snprintf(e, sizeof(e), "\xc2\xb1%" PRIu64, t[i].error);
		else if (t[i].error)
			snprintf(e, sizeof(e), "\xc2\xb1%s", fmt_ms(b, t[i].error));
		fprintf(out, "%15s ", v);
		put_right(out, e, 13);
		fputs("  ", out);
		put_fn_label(out, r, t[i].fn);
		fputc('\n', out);
	}
}

static bool have_tops(const struct rp_report_bottlenecks *b)
{
	return b->n_by_cum || b->n_by_self || b->n_by_count || b->bound_cum || b->bound_self ||
	       b->bound_count;
}

static void print_bottlenecks(FILE *out, const struct rp_report *r, unsigned limit)
{
	const struct rp_report_bottlenecks *b = &r->bottlenecks;

	if (!have_tops(b))
		return;
	fputs("\nbottlenecks (all time): a name not listed weighs at most the bound\n", out);
	print_tops(out, r, "cum time", "cum ms", b->by_cum, b->n_by_cum, b->bound_cum, false,
		   limit);
	print_tops(out, r, "self time", "self ms", b->by_self, b->n_by_self, b->bound_self,
		   false, limit);
	print_tops(out, r, "count", "calls", b->by_count, b->n_by_count, b->bound_count, true,
		   limit);
}

/* "ms" from the first event; a start before it (never from the engine) gets a '-'. */
static char *fmt_rel_ms(char buf[40], uint64_t t, uint64_t t0)
{
	char ms[32];

	if (t >= t0)
		return fmt_ms(buf, t - t0);
	snprintf(buf, 40, "-%s", fmt_ms(ms, t0 - t));
	return buf;
}

static void print_slowest(FILE *out, const struct rp_report *r, unsigned limit)
{
	const struct rp_report_bottlenecks *b = &r->bottlenecks;
	uint32_t rows = rows_of(b->n_slowest, limit);
	char dur[32], self[32], sub[32], start[40], conc[16], ch[32];
	bool charged = false; /* a column only when something was charged (1.6) */

	if (b->n_slowest == 0)
		return;
	for (uint32_t i = 0; i < rows; i++)
		charged = charged || b->slowest[i].charged_ns != 0;
	fprintf(out, "\nslowest spans (all time): %" PRIu32 " of %" PRIu32
		     ", start from the first event\n", rows, b->n_slowest);
	fprintf(out, "%15s %12s %12s %12s ", "duration ms", "self ms", "subtree ms", "start ms");
	if (charged)
		fprintf(out, "%12s ", "charged ms");
	fprintf(out, "%6s  %s\n", "conc", "name [category]");
	for (uint32_t i = 0; i < rows; i++) {
		const struct rp_report_span *sp = &b->slowest[i];

		if (sp->concurrency_known)
			snprintf(conc, sizeof(conc), "%" PRIu32, sp->concurrency);
		else
			snprintf(conc, sizeof(conc), "?");
		fprintf(out, "%15s %12s %12s %12s ", fmt_ms(dur, sp->dur_ns),
			fmt_ms(self, sp->self_ns), fmt_ms(sub, sp->subtree_ns),
			fmt_rel_ms(start, sp->start_ns, r->t_first));
		if (charged) /* "-": nothing charged to it (not a request, or none) */
			fprintf(out, "%12s ", sp->charged_ns ? fmt_ms(ch, sp->charged_ns) : "-");
		fprintf(out, "%6s  ", conc);
		put_fn_label(out, r, sp->fn);
		fputc('\n', out);
	}
}

/* The p50, p90 and p99 columns: "-" without a sketch (p99 0). */
static void fmt_quantiles(char q[3][32], uint64_t p50, uint64_t p90, uint64_t p99)
{
	for (int i = 0; i < 3; i++)
		snprintf(q[i], 32, "-");
	if (p99) {
		fmt_us(q[0], p50);
		fmt_us(q[1], p90);
		fmt_us(q[2], p99);
	}
}

static void print_wfn(FILE *out, const struct rp_report *r, const struct rp_report_wfn *f,
		      uint64_t range)
{
	char rate[48], cum[32], self[32], q[3][32];

	fmt_quantiles(q, f->p50_ns, f->p90_ns, f->p99_ns);
	fprintf(out, "%10" PRIu64 " %12s %11s %11s %11s %11s %11s  ", f->calls,
		rp_render_rate(rate, f->calls, range), fmt_ms(cum, f->cum_ns),
		fmt_ms(self, f->self_ns), q[0], q[1], q[2]);
	put_fn_label(out, r, f->fn);
	fputc('\n', out);
}

static int print_window(FILE *out, const struct rp_report *r, const struct rp_report_window *w,
			unsigned limit)
{
	uint64_t range = w->t_to > w->t_from ? w->t_to - w->t_from : 0;
	uint64_t covered = rp_render_covered_ns(r, w); /* what rates divide by */
	uint32_t rows, *order;
	char len[32], cov[32], from[40], to[40];

	fputs("\nwindow ", out);
	put_name(out, w->name);
	fprintf(out, " (%s ms in %" PRIu32 " sub-windows), ", fmt_ms(len, w->length_ns),
		w->subwindows);
	/* A window over every event holds what the tables above hold: said, not
	 * repeated (a 5 s run printed three identical window tables) */
	if (r->events > 0 && w->t_from <= r->t_first && w->t_to >= r->t_last) {
		fputs("every event: as all time above\n", out);
		return 0;
	}
	fprintf(out, "%s .. %s ms (%s ms)\n", fmt_rel_ms(from, w->t_from, r->t_first),
		fmt_rel_ms(to, w->t_to, r->t_first), fmt_ms(cov, range));
	rows = rows_of(w->n_fns, limit);
	order = rp_render_wfn_order(r, w);
	if (order == NULL)
		return -ENOMEM;
	fprintf(out, "names %" PRIu32 " of %" PRIu32 ", by cum time\n", rows, w->n_fns);
	if (rows)
		fprintf(out, "%10s %12s %11s %11s %11s %11s %11s  %s\n", "calls", "rate/s",
			"cum ms", "self ms", "p50 us", "p90 us", "p99 us", "name [category]");
	for (uint32_t i = 0; i < rows; i++)
		print_wfn(out, r, &w->fns[order[i]], covered);
	free(order);
	print_conc_lines(out, w->conc, w->n_conc < 2 ? w->n_conc : 2);
	return 0;
}

static int cmp_cat(const void *pa, const void *pb)
{
	const struct rp_report_cat *a = *(const struct rp_report_cat *const *)pa;
	const struct rp_report_cat *b = *(const struct rp_report_cat *const *)pb;
	int c;

	if ((c = cmp_u64_desc(a->total_ns, b->total_ns)) != 0)
		return c;
	if ((c = strcmp(str_or_empty(a->name), str_or_empty(b->name))) != 0)
		return c;
	return a < b ? -1 : a > b;
}

/* Categories by total time, "(none)" for the spans without one. */
static int print_cats(FILE *out, const struct rp_report *r, unsigned limit)
{
	uint32_t rows = rows_of(r->n_cats, limit);
	const struct rp_report_cat **v;
	char self[32], total[32], q[3][32], p95[32];

	if (r->n_cats == 0)
		return 0;
	v = malloc(sizeof(*v) * r->n_cats);
	if (v == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < r->n_cats; i++)
		v[i] = &r->cats[i];
	qsort(v, r->n_cats, sizeof(*v), cmp_cat);
	fprintf(out, "\ncategories %" PRIu32 " of %" PRIu32 ", by total time\n", rows, r->n_cats);
	fprintf(out, "%10s %12s %12s %12s %12s %12s %12s  %s\n", "calls", "self ms", "total ms",
		"p50 us", "p90 us", "p95 us", "p99 us", "category");
	for (uint32_t i = 0; i < rows; i++) {
		const struct rp_report_cat *c = v[i];

		fmt_quantiles(q, c->p50_ns, c->p90_ns, c->p99_ns);
		if (c->p99_ns)
			fmt_us(p95, c->p95_ns);
		else
			snprintf(p95, sizeof(p95), "-");
		fprintf(out, "%10" PRIu64 " %12s %12s %12s %12s %12s %12s  ", c->calls,
			fmt_ms(self, c->self_ns), fmt_ms(total, c->total_ns), q[0], q[1], p95,
			q[2]);
		put_name(out, c->name && c->name[0] ? c->name : "(none)");
		fputc('\n', out);
	}
	free(v);
	return 0;
}

/* A counter value: three decimals below 1e12, else 6 significant digits; "-" for
 * NaN and infinities. */
static char *fmt_real(char buf[32], double v)
{
	if (!isfinite(v))
		snprintf(buf, 32, "-");
	else if (fabs(v) < 1e12)
		snprintf(buf, 32, "%.3f", v);
	else
		snprintf(buf, 32, "%.6g", v);
	return buf;
}

static void print_counter(FILE *out, const struct rp_report_counter *c)
{
	char last[32] = "-", lo[32] = "-", hi[32] = "-", mean[32] = "-", p50[32] = "-";
	char p99[32] = "-";

	if (c->samples) {
		snprintf(last, sizeof(last), "%" PRId64, c->last);
		snprintf(lo, sizeof(lo), "%" PRId64, c->min);
		snprintf(hi, sizeof(hi), "%" PRId64, c->max);
		fmt_real(mean, c->mean);
		fmt_real(p50, c->p50);
		fmt_real(p99, c->p99);
	}
	fprintf(out, "%10" PRIu64 " %12s %12s %12s %12s %12s %12s  ", c->samples, last, lo, hi,
		mean, p50, p99);
	put_name(out, c->name);
	if (c->category && c->category[0]) {
		fputs(" [", out);
		put_name(out, c->category);
		fputc(']', out);
	}
	fputc('\n', out);
}

static void print_counters(FILE *out, const struct rp_report *r, unsigned limit)
{
	uint32_t rows = rows_of(r->n_counters, limit);

	if (r->n_counters == 0)
		return;
	fprintf(out, "\ncounters %" PRIu32 " of %" PRIu32 "\n", rows, r->n_counters);
	fprintf(out, "%10s %12s %12s %12s %12s %12s %12s  %s\n", "samples", "last", "min", "max",
		"mean", "p50", "p99", "name [category]");
	for (uint32_t i = 0; i < rows; i++)
		print_counter(out, &r->counters[i]);
}

/* Report 1.2: each block only when the report has its data (a 1.1 snapshot has none). */
static int print_analyses(FILE *out, const struct rp_report *r, unsigned limit)
{
	int err;

	print_bottlenecks(out, r, limit);
	print_slowest(out, r, limit);
	for (uint32_t i = 0; i < r->n_windows; i++)
		if ((err = print_window(out, r, &r->windows[i], limit)) != 0)
			return err;
	if ((err = print_cats(out, r, limit)) != 0)
		return err;
	print_counters(out, r, limit);
	return 0;
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
	int err;

	assert(r != NULL && out != NULL);
	order = rp_render_fn_order(r);
	if (order == NULL)
		return -ENOMEM;
	print_header(out, r);
	print_table(out, r, order, limit);
	print_milestones(out, r, order);
	print_charged(out, r, order);
	rp_render_steps_text(r, out); /* export: steps by phase */
	rp_render_device_text(r, out);
	free(order);
	err = print_analyses(out, r, limit);
	if (err)
		return err;
	return fflush(out) || ferror(out) ? -EIO : 0;
}
