// SPDX-License-Identifier: MIT
/*
 * --format chrome: the flight recorder as one Chrome trace (Trace Event Format),
 * loadable in Perfetto, chrome://tracing / catapult and speedscope. Track numbering
 * and filters are in render_export.h. Times are written as µs with three decimals
 * ("ts":12.345), which carries the engine's nanoseconds exactly and is what the
 * viewers parse.
 *
 * What a viewer shows, row by row:
 * - a process per source (process_name "pid <pid> (<source>)", process_sort_index
 *   its pid, so processes keep one order);
 * - a thread per thread track, named by its OS thread id ("tid 4242": live producers
 *   report it in their ring descriptors, traces carry their own) and sorted by it
 *   (thread_sort_index), with its spans as "X" events, sorted by start, parents
 *   before children, then recording order;
 * - the async tracks (requests) not as a thread each but as async slices: nested
 *   "b"/"e" pairs with the track's id, all of category "async" (a pair nests only
 *   within its category; the span's own category is args.category), on one row per
 *   process named "requests" and sorted first, where viewers stack them by name.
 * Only standard metadata events (process_name, process_sort_index, thread_name,
 * thread_sort_index). When the recorder dropped spans (it keeps the newest
 * --recorder-spans), otherData.warning says which time the export still covers, and
 * the CLI repeats it on stderr (rp_render_chrome_warning()).
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

/* @sep: "" for the first event of the array, else ",\n". */
static void put_meta(FILE *out, const char *sep, const char *what, uint32_t pid, uint32_t tid,
		     const char *name, const char *name2)
{
	fprintf(out,
		"%s{\"ph\":\"M\",\"name\":\"%s\",\"pid\":%u,\"tid\":%u,\"args\":{\"name\":", sep,
		what, pid, tid);
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

static void put_sort(FILE *out, const char *what, uint32_t pid, uint32_t tid, int64_t index)
{
	fprintf(out,
		",\n{\"ph\":\"M\",\"name\":\"%s\",\"pid\":%u,\"tid\":%u,"
		"\"args\":{\"sort_index\":%" PRId64 "}}",
		what, pid, tid, index);
}

/* req[p]: the tid of process p's "requests" row: past every thread's tid. */
static uint32_t *request_rows(const struct rp_report *r, const struct rp_export_map *m)
{
	uint32_t *req = calloc(m->n_p + 1, sizeof(*req));

	for (uint32_t i = 0; req != NULL && i < r->recorder.n_tracks; i++)
		if (r->recorder.tracks[i].kind != 2 && m->t[i].tid >= req[m->t[i].proc])
			req[m->t[i].proc] = m->t[i].tid + 1;
	return req;
}

static void put_metadata(const struct rp_report *r, const struct rp_export_map *m,
			 const uint32_t *req, const bool *has_async, FILE *out)
{
	const struct rp_report_recorder *rec = &r->recorder;

	for (uint32_t i = 0; i < m->n_p; i++) {
		const struct rp_export_proc *p = &m->p[i];
		const char *src = p->source < r->n_sources ? r->sources[p->source].name : "?";

		put_meta(out, i ? ",\n" : "", "process_name", p->pid, 0, src,
			 p->label[0] ? p->label : "-");
		put_sort(out, "process_sort_index", p->pid, 0, p->pid);
		if (has_async[i]) {
			put_meta(out, ",\n", "thread_name", p->pid, req[i], "requests", NULL);
			put_sort(out, "thread_sort_index", p->pid, req[i], -1);
		}
	}
	for (uint32_t i = 0; i < rec->n_tracks; i++) {
		if (rec->tracks[i].kind == 2)
			continue;
		put_meta(out, ",\n", "thread_name", m->t[i].pid, m->t[i].tid, m->t[i].name, NULL);
		put_sort(out, "thread_sort_index", m->t[i].pid, m->t[i].tid, m->t[i].tid);
	}
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

/* One end of an async span: a "b" (@begin) or an "e" event. */
static void put_async(const struct rp_report *r, const struct rp_export_map *m, const uint32_t *req,
		      const struct rp_report_rspan *s, bool begin, FILE *out)
{
	const struct rp_report_fn *f = &r->fns[s->fn];
	const struct rp_export_track *t = &m->t[s->track];

	fprintf(out, ",\n{\"ph\":\"%c\",\"cat\":\"async\",\"id\":\"0x%" PRIx64 "\",\"name\":",
		begin ? 'b' : 'e', r->recorder.tracks[s->track].id);
	rp_render_json_str(out, f->name);
	fprintf(out, ",\"pid\":%u,\"tid\":%u", t->pid, req[t->proc]);
	put_us(out, "ts", begin ? s->start_ns : s->start_ns + s->dur_ns);
	if (begin) {
		fputs(",\"args\":{\"category\":", out);
		rp_render_json_str(out, f->category);
		if (s->step)
			fprintf(out, ",\"step\":%" PRIu64, s->step - 1);
		fputc('}', out);
	}
	fputc('}', out);
}

/*
 * An async span's two ends in the order that nests them: by time; at one time the
 * ends of spans that began earlier first (deepest first), then the begins (outermost
 * first), a zero-length span's end right after its begin.
 */
struct aev {
	uint64_t ts;
	uint32_t rank, depth, i;
	bool begin;
};

static int cmp_aev(const void *a, const void *b)
{
	const struct aev *x = a, *y = b;

	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	if (x->depth != y->depth) /* ends: deepest first; begins: outermost first */
		return (x->depth < y->depth) == (x->rank == 0) ? 1 : -1;
	if (x->i != y->i)
		return x->i < y->i ? -1 : 1;
	return x->begin ? -1 : y->begin;
}

static int put_async_spans(const struct rp_report *r, const struct rp_export_map *m,
			   const uint32_t *req, const struct key *idx, uint32_t n, FILE *out)
{
	const struct rp_report_recorder *rec = &r->recorder;
	struct aev *v = malloc((2 * (size_t)n + 1) * sizeof(*v));
	size_t k = 0;

	if (v == NULL)
		return -ENOMEM;
	for (uint32_t j = 0; j < n; j++) {
		const struct rp_report_rspan *s = &rec->spans[idx[j].i];
		bool zero = s->dur_ns == 0;

		if (rec->tracks[s->track].kind != 2)
			continue;
		v[k++] = (struct aev){ s->start_ns, 1, s->depth, idx[j].i, true };
		v[k++] = (struct aev){ s->start_ns + s->dur_ns, zero ? 1 : 0, s->depth, idx[j].i,
				       false };
	}
	if (k > 0)
		qsort(v, k, sizeof(*v), cmp_aev);
	for (size_t j = 0; j < k; j++)
		put_async(r, m, req, &rec->spans[v[j].i], v[j].begin, out);
	free(v);
	return 0;
}

bool rp_render_chrome_warning(const struct rp_report *r, char *buf, size_t len)
{
	const struct rp_report_recorder *rec = &r->recorder;
	uint64_t t0 = UINT64_MAX;

	if (rec->wrapped == 0)
		return false;
	for (uint32_t i = 0; i < rec->n_spans; i++)
		if (rec->spans[i].start_ns < t0)
			t0 = rec->spans[i].start_ns;
	snprintf(buf, len,
		 "the flight recorder kept the newest %u of %" PRIu64 " spans (%" PRIu64
		 " dropped; raise --recorder-spans): the timeline starts at %.3f ms of %.3f ms",
		 rec->n_spans, rec->spans_seen, rec->wrapped,
		 t0 == UINT64_MAX || t0 < r->t_first ? 0.0 : (double)(t0 - r->t_first) / 1e6,
		 r->t_last > r->t_first ? (double)(r->t_last - r->t_first) / 1e6 : 0.0);
	return true;
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
	struct key *idx = NULL;
	uint32_t n, *req = NULL;
	bool *has_async = NULL;
	char warn[300];
	int err = -ENOMEM;

	if (rp_export_map_build(r, &m) != 0)
		return -ENOMEM;
	idx = span_order(r, o, &n);
	req = request_rows(r, &m);
	has_async = calloc(m.n_p + 1, sizeof(*has_async));
	if (idx == NULL || req == NULL || has_async == NULL)
		goto out;
	for (uint32_t i = 0; i < rec->n_tracks; i++)
		if (rec->tracks[i].kind == 2)
			has_async[m.t[i].proc] = true;
	fputs("{\"displayTimeUnit\":\"ns\",\"otherData\":{\"generator\":\"ringprof\"", out);
	fprintf(out,
		",\"spans_seen\":%" PRIu64 ",\"spans_kept\":%u,\"spans_exported\":%u"
		",\"recorder_wrapped\":%" PRIu64 ",\"samples_wrapped\":%" PRIu64,
		rec->spans_seen, rec->n_spans, n, rec->wrapped, rec->samples_wrapped);
	if (rp_render_chrome_warning(r, warn, sizeof(warn))) {
		fputs(",\"warning\":", out);
		rp_render_json_str(out, warn);
	}
	fputs("},\n\"traceEvents\":[\n", out); /* every event has a track: none without a process */
	put_metadata(r, &m, req, has_async, out);
	for (uint32_t i = 0; i < n; i++)
		if (rec->tracks[rec->spans[idx[i].i].track].kind != 2)
			put_span(r, &m, &rec->spans[idx[i].i], out);
	if ((err = put_async_spans(r, &m, req, idx, n, out)) != 0)
		goto out;
	put_samples(r, &m, o, out);
	fputs("\n]}\n", out);
	err = fflush(out) || ferror(out) ? -EIO : 0;
out:
	free(idx);
	free(req);
	free(has_async);
	rp_export_map_free(&m);
	return err;
}
