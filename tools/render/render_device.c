// SPDX-License-Identifier: MIT
/*
 * The "device" section of the json and text formats (report.h struct
 * rp_report_device; semantics in engine/analyses/device.h). Kept apart from render_json.c and
 * render_text.c, which call it once each.
 *
 * JSON, only when launches, kernels or other device work were seen:
 * "device": {"launches", "kernels", "other_device", "linked",
 * "unmatched_launches", "unmatched_kernels", "spans", "busy_ns", "idle_ns",
 * "max_queue_depth", "points_total", "points": [[t_ns, depth]...], "idle_total",
 * "idle": [[start_ns, end_ns]...], "phases_total", "phases": [[start_ns, end_ns]...],
 * "candidates", "ranked": [{"name", "start_ns", "dur_ns", "self_ns", "idle_ns",
 * "idle_fraction", "score", "queue_depth", "phase" (null after a merge of several
 * inputs), "source", "source_file",
 * "source_line"}...], "spans_dropped", "events_dropped", "links_dropped",
 * "links_orphan"}.
 */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "render_priv.h"

/* @v in decimal at @p (%PRIu64, by hand: fprintf costs ~1,000 instructions a call
 * and the arrays below hold thousands of pairs). @return the end. */
static char *dec(char *p, uint64_t v)
{
	char d[20];
	int k = sizeof(d);

	do {
		d[--k] = (char)('0' + v % 10);
		v /= 10;
	} while (v > 0);
	memcpy(p, d + k, sizeof(d) - (size_t)k);
	return p + sizeof(d) - (size_t)k;
}

/* "[a,b]", after a ',' unless @first: one fwrite. */
static void put_pair(FILE *out, bool first, uint64_t a, uint64_t b)
{
	char buf[48], *p = buf;

	if (!first)
		*p++ = ',';
	*p++ = '[';
	p = dec(p, a);
	*p++ = ',';
	p = dec(p, b);
	*p++ = ']';
	fwrite(buf, 1, (size_t)(p - buf), out);
}

static void put_ivals(FILE *out, const char *key, const struct rp_report_dev_interval *v,
		      uint32_t n)
{
	fprintf(out, ",\n    \"%s\":[", key);
	for (uint32_t i = 0; i < n; i++)
		put_pair(out, i == 0, v[i].start_ns, v[i].end_ns);
	fputc(']', out);
}

static double fin(double x)
{
	return isfinite(x) ? x : 0.0;
}

void rp_render_device_json(const struct rp_report *r, FILE *out)
{
	const struct rp_report_device *d = &r->device;

	if (d->launches == 0 && d->kernels == 0 && d->other_device == 0)
		return; /* no device work seen: no section */
	fprintf(out,
		",\n  \"device\":{\"launches\":%" PRIu64 ",\"kernels\":%" PRIu64
		",\"other_device\":%" PRIu64 ",\"linked\":%" PRIu64
		",\"unmatched_launches\":%" PRIu64 ",\"unmatched_kernels\":%" PRIu64
		",\"spans\":%" PRIu64 ",\"busy_ns\":%" PRIu64 ",\"idle_ns\":%" PRIu64
		",\"max_queue_depth\":%" PRIu32,
		d->launches, d->kernels, d->other_device, d->linked, d->unmatched_launches,
		d->unmatched_kernels, d->spans, d->busy_ns, d->idle_ns, d->max_queue_depth);
	fprintf(out, ",\n    \"points_total\":%" PRIu64 ",\"points\":[", d->n_points_total);
	for (uint32_t i = 0; i < d->n_points; i++)
		put_pair(out, i == 0, d->points[i].t_ns, d->points[i].depth);
	fprintf(out, "],\n    \"idle_total\":%" PRIu64, d->n_idle_total);
	put_ivals(out, "idle", d->idle, d->n_idle);
	fprintf(out, ",\n    \"phases_total\":%" PRIu64, d->n_phases_total);
	put_ivals(out, "phases", d->phases, d->n_phases);
	fprintf(out, ",\n    \"candidates\":%" PRIu64 ",\"ranked\":[", d->candidates);
	for (uint32_t i = 0; i < d->n_ranked; i++) {
		const struct rp_report_dev_span *s = &d->ranked[i];

		fputs(i ? ",\n      {\"name\":" : "\n      {\"name\":", out);
		rp_render_json_str(out, s->name);
		fprintf(out,
			",\"start_ns\":%" PRIu64 ",\"dur_ns\":%" PRIu64 ",\"self_ns\":%" PRId64
			",\"idle_ns\":%" PRIu64 ",\"idle_fraction\":%.17g,\"score\":%.17g"
			",\"queue_depth\":%" PRIu32 ",\"phase\":",
			s->start_ns, s->dur_ns, s->self_ns, s->idle_ns, fin(s->idle_fraction),
			fin(s->score), s->queue_depth);
		if (s->phase == RP_NONE) /* merged from several inputs: no common phases */
			fputs("null", out);
		else
			fprintf(out, "%" PRIu32, s->phase);
		fputs(",\"source\":", out);
		rp_render_json_str(out, s->source);
		fputs(",\"source_file\":", out);
		rp_render_json_str(out, s->source_file);
		fprintf(out, ",\"source_line\":%" PRIu32 "}", s->source_line);
	}
	fprintf(out,
		"%s],\n    \"spans_dropped\":%" PRIu64 ",\"events_dropped\":%" PRIu64
		",\"links_dropped\":%" PRIu64 ",\"links_orphan\":%" PRIu64 "}",
		d->n_ranked ? "\n    " : "", d->spans_dropped, d->events_dropped,
		d->links_dropped, d->links_orphan);
}

static double ms(uint64_t ns)
{
	return (double)ns / 1e6;
}

static double ms_signed(int64_t ns)
{
	return (double)ns / 1e6;
}

void rp_render_device_text(const struct rp_report *r, FILE *out)
{
	const struct rp_report_device *d = &r->device;

	if (d->launches == 0 && d->kernels == 0 && d->other_device == 0)
		return;
	fprintf(out,
		"\nDevice (torch BasicEvaluation): %" PRIu64 " launches, %" PRIu64
		" kernels, %" PRIu64 " linked, %" PRIu64 " unmatched launches, %" PRIu64
		" unmatched kernels, %" PRIu64 " other device ops\n",
		d->launches, d->kernels, d->linked, d->unmatched_launches, d->unmatched_kernels,
		d->other_device);
	fprintf(out,
		"  busy %.3f ms, idle %.3f ms in %" PRIu64 " intervals, max queue depth %" PRIu32
		", %" PRIu64 " falling phases, %" PRIu64 " spans in them\n",
		ms(d->busy_ns), ms(d->idle_ns), d->n_idle_total, d->max_queue_depth,
		d->n_phases_total, d->candidates);
	if (d->spans_dropped || d->events_dropped || d->links_dropped || d->links_orphan)
		fprintf(out,
			"  caps: %" PRIu64 " spans and %" PRIu64 " launches/kernels not kept, "
			"%" PRIu64 " links dropped, %" PRIu64 " links without their span\n",
			d->spans_dropped, d->events_dropped, d->links_dropped, d->links_orphan);
	if (d->n_ranked == 0) {
		fputs("  No spans to optimize\n", out);
		return;
	}
	fputs("  Spans worth optimizing (z(idle fraction) + 0.6 z(self)):\n"
	      "     score   idle%    self_ms     dur_ms  qd  name  [source]\n",
	      out);
	for (uint32_t i = 0; i < d->n_ranked; i++) {
		const struct rp_report_dev_span *s = &d->ranked[i];

		fprintf(out, "  %8.3f %6.2f%% %10.3f %10.3f %3" PRIu32 "  ",
			fin(s->score), 100.0 * fin(s->idle_fraction), ms_signed(s->self_ns),
			ms(s->dur_ns), s->queue_depth);
		rp_render_safe_str(out, s->name, SIZE_MAX);
		if (s->source[0]) {
			fputs("  [", out);
			rp_render_safe_str(out, s->source, SIZE_MAX);
			fputc(']', out);
		}
		fputc('\n', out);
	}
}
