// SPDX-License-Identifier: MIT
/*
 * --format chrome: the flight recorder as one Chrome trace (Trace Event Format),
 * loadable in Perfetto and chrome://tracing. Track numbering and filters are in
 * render_export.h. Times are written as µs with three decimals ("ts":12.345), which
 * carries the engine's nanoseconds exactly and is what both viewers parse; spans go
 * out sorted by start, parents before children, as chrome://tracing prefers.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "render_export.h"
#include "render_priv.h"

static void put_us(FILE *out, const char *key, uint64_t ns)
{
	fprintf(out, ",\"%s\":%" PRIu64 ".%03u", key, ns / 1000, (unsigned)(ns % 1000));
}

static void put_meta(FILE *out, const char *what, uint32_t pid, uint32_t tid, const char *name,
		     const char *name2)
{
	fprintf(out,
		",\n{\"ph\":\"M\",\"name\":\"%s\",\"pid\":%u,\"tid\":%u,\"args\":{\"name\":", what,
		pid, tid);
	if (name2 == NULL) {
		rp_render_json_str(out, name);
	} else { /* "pid <pid text> (<source file>)" or "<pid text> (<source file>)" */
		const char *base = strrchr(name, '/');
		char buf[1200];
		bool num = name2[0] && strspn(name2, "0123456789") == strlen(name2);

		snprintf(buf, sizeof(buf), "%s%s (%s)", num ? "pid " : "", name2,
			 base ? base + 1 : name);
		rp_render_json_str(out, buf);
	}
	fputs("}}", out);
}

static void put_metadata(const struct rp_report *r, const struct rp_export_map *m, FILE *out)
{
	const struct rp_report_recorder *rec = &r->recorder;

	fputs("{\"ph\":\"M\",\"name\":\"trace_source\",\"pid\":0,\"tid\":0,"
	      "\"args\":{\"name\":\"ringprof\"}}",
	      out);
	for (uint32_t i = 0; i < m->n_p; i++) {
		const struct rp_export_proc *p = &m->p[i];
		const char *src = p->source < r->n_sources ? r->sources[p->source].name : "?";

		put_meta(out, "process_name", p->pid, 0, src, p->label[0] ? p->label : "-");
	}
	for (uint32_t i = 0; i < rec->n_tracks; i++)
		put_meta(out, "thread_name", m->t[i].pid, m->t[i].tid, m->t[i].name, NULL);
}

/* Sort keys: start, then depth (parents first), then recording order. */
struct key {
	uint64_t start;
	uint32_t depth, i;
};

static int cmp_key(const void *a, const void *b)
{
	const struct key *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	if (x->depth != y->depth)
		return x->depth < y->depth ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

/* The kept spans, in output order (NULL: no memory). */
static struct key *span_order(const struct rp_report *r, const struct rp_export_opts *o,
			      uint32_t *n)
{
	const struct rp_report_recorder *rec = &r->recorder;
	struct key *k = malloc((rec->n_spans ? rec->n_spans : 1) * sizeof(*k));

	*n = 0;
	if (k == NULL)
		return NULL;
	for (uint32_t i = 0; i < rec->n_spans; i++) {
		const struct rp_report_rspan *s = &rec->spans[i];

		if (rp_export_keep_span(o, s->start_ns, s->dur_ns) && s->fn < r->n_fns &&
		    s->track < rec->n_tracks)
			k[(*n)++] = (struct key){ s->start_ns, s->depth, i };
	}
	if (*n > 0)
		qsort(k, *n, sizeof(*k), cmp_key);
	return k;
}

static void put_span(const struct rp_report *r, const struct rp_export_map *m,
		     const struct rp_report_rspan *s, FILE *out)
{
	const struct rp_report_fn *f = &r->fns[s->fn];

	fputs(",\n{\"ph\":\"X\",\"name\":", out);
	rp_render_json_str(out, f->name);
	fputs(",\"cat\":", out);
	rp_render_json_str(out, f->category);
	fprintf(out, ",\"pid\":%u,\"tid\":%u", m->t[s->track].pid, m->t[s->track].tid);
	put_us(out, "ts", s->start_ns);
	put_us(out, "dur", s->dur_ns);
	if (s->step)
		fprintf(out, ",\"args\":{\"step\":%" PRIu64 "}", s->step - 1);
	fputc('}', out);
}

static void put_samples(const struct rp_report *r, const struct rp_export_map *m,
			const struct rp_export_opts *o, FILE *out)
{
	const struct rp_report_recorder *rec = &r->recorder;

	for (uint32_t i = 0; i < rec->n_samples; i++) {
		const struct rp_report_rsample *c = &rec->samples[i];

		if (c->ts_ns < o->from || c->ts_ns > o->to || c->name >= rec->n_names ||
		    c->track >= rec->n_tracks)
			continue;
		fputs(",\n{\"ph\":\"C\",\"name\":", out);
		rp_render_json_str(out, rec->names[c->name]);
		fprintf(out, ",\"pid\":%u,\"tid\":%u", m->t[c->track].pid, m->t[c->track].tid);
		put_us(out, "ts", c->ts_ns);
		fprintf(out, ",\"args\":{\"value\":%" PRId64 "}}", c->value);
	}
}

int rp_render_chrome(const struct rp_report *r, FILE *out, const struct rp_export_opts *o)
{
	const struct rp_report_recorder *rec = &r->recorder;
	struct rp_export_map m;
	struct key *idx;
	uint32_t n;

	if (rp_export_map_build(r, &m) != 0)
		return -ENOMEM;
	idx = span_order(r, o, &n);
	if (idx == NULL) {
		rp_export_map_free(&m);
		return -ENOMEM;
	}
	fputs("{\"displayTimeUnit\":\"ns\",\"otherData\":{\"generator\":\"ringprof\"", out);
	fprintf(out,
		",\"spans_seen\":%" PRIu64 ",\"spans_kept\":%u,\"spans_exported\":%u"
		",\"recorder_wrapped\":%" PRIu64 ",\"samples_wrapped\":%" PRIu64 "},\n"
		"\"traceEvents\":[\n",
		rec->spans_seen, rec->n_spans, n, rec->wrapped, rec->samples_wrapped);
	put_metadata(r, &m, out);
	for (uint32_t i = 0; i < n; i++)
		put_span(r, &m, &rec->spans[idx[i].i], out);
	put_samples(r, &m, o, out);
	fputs("\n]}\n", out);
	free(idx);
	rp_export_map_free(&m);
	return fflush(out) || ferror(out) ? -EIO : 0;
}
