// SPDX-License-Identifier: MIT
/*
 * Step statistics in the json and text formats, and the helpers the timeline
 * exports share (JSON strings, the track map, step ranges). See render_export.h.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "render_export.h"
#include "render_priv.h"

static uint64_t mean_ns(const struct rp_report_step_phase *p)
{
	return p->count ? (p->total_ns + p->count / 2) / p->count : 0;
}

void rp_render_steps_json(const struct rp_report *r, FILE *out)
{
	const struct rp_report_recorder *rec = &r->recorder;

	fprintf(out, ",\n  \"steps\":{\"folded\":%" PRIu64 ",\"phases\":[", r->steps_folded);
	for (uint32_t i = 0; i < r->n_steps; i++) {
		const struct rp_report_step_phase *p = &r->steps[i];

		fputs(i ? ",\n    {\"phase\":" : "\n    {\"phase\":", out);
		rp_render_json_str(out, p->name);
		fprintf(out,
			",\"count\":%" PRIu64 ",\"total_ns\":%" PRIu64 ",\"mean_ns\":%" PRIu64
			",\"min_ns\":%" PRIu64 ",\"max_ns\":%" PRIu64 ",\"p50_ns\":%" PRIu64
			",\"p95_ns\":%" PRIu64 ",\"p99_ns\":%" PRIu64 "}",
			p->count, p->total_ns, mean_ns(p), p->min_ns, p->max_ns, p->p50_ns,
			p->p95_ns, p->p99_ns);
	}
	fputs(r->n_steps ? "\n  ]}" : "]}", out);
	fprintf(out,
		",\n  \"recorder\":{\"max_spans\":%u,\"spans_seen\":%" PRIu64
		",\"spans_kept\":%u,\"recorder_wrapped\":%" PRIu64 ",\"max_samples\":%u"
		",\"samples_seen\":%" PRIu64 ",\"samples_kept\":%u,\"samples_wrapped\":%" PRIu64
		",\"unlisted\":%" PRIu64 ",\"labels_dropped\":%" PRIu64 "}",
		rec->max_spans, rec->spans_seen, rec->n_spans, rec->wrapped, rec->max_samples,
		rec->samples_seen, rec->n_samples, rec->samples_wrapped, rec->unlisted,
		rec->labels_dropped);
}

static void put_ms(FILE *out, uint64_t ns)
{
	fprintf(out, " %10" PRIu64 ".%03u", ns / 1000000, (unsigned)(ns / 1000 % 1000));
}

void rp_render_steps_text(const struct rp_report *r, FILE *out)
{
	if (r->n_steps == 0)
		return;
	fprintf(out, "\nsteps by phase (ms)%s\n",
		r->steps_folded ? "  (phases past the cap folded into [other])" : "");
	fprintf(out, "  %-20s %10s %14s %14s %14s %14s %14s %14s\n", "phase", "count", "mean",
		"min", "max", "p50", "p95", "p99");
	for (uint32_t i = 0; i < r->n_steps; i++) {
		const struct rp_report_step_phase *p = &r->steps[i];
		char name[21];

		fprintf(out, "  %-20s %10" PRIu64,
			rp_render_safe_buf(name, sizeof(name), p->name[0] ? p->name : "(none)"),
			p->count);
		put_ms(out, mean_ns(p));
		put_ms(out, p->min_ns);
		put_ms(out, p->max_ns);
		put_ms(out, p->p50_ns);
		put_ms(out, p->p95_ns);
		put_ms(out, p->p99_ns);
		fputc('\n', out);
	}
}

int rp_export_steps_range(const struct rp_report *r, uint64_t a, uint64_t b, uint64_t *from,
			  uint64_t *to)
{
	bool any = false;

	for (uint32_t i = 0; i < r->recorder.n_spans; i++) {
		const struct rp_report_rspan *s = &r->recorder.spans[i];

		if (s->step == 0 || s->step - 1 < a || s->step - 1 > b)
			continue;
		if (!any || s->start_ns < *from)
			*from = s->start_ns;
		if (!any || s->start_ns + s->dur_ns > *to)
			*to = s->start_ns + s->dur_ns;
		any = true;
	}
	return any ? 0 : -ENOENT;
}

/* ---- the track map ---- */

/* A set of uint64 keys (open addressing; 0 is never a key: keys are made non-zero). */
struct u64set {
	uint64_t *k;
	uint32_t mask;
};

static int set_init(struct u64set *s, uint32_t n)
{
	uint32_t slots = 16;

	while (slots < 2 * n + 16)
		slots <<= 1;
	s->k = calloc(slots, sizeof(*s->k));
	s->mask = slots - 1;
	return s->k ? 0 : -ENOMEM;
}

/* Adds @key; false if it was there already. */
static bool set_add(struct u64set *s, uint64_t key)
{
	uint32_t i = (uint32_t)((key * UINT64_C(0x9e3779b97f4a7c15)) >> 40) & s->mask;

	key++; /* never 0 */
	for (; s->k[i] != 0; i = (i + 1) & s->mask)
		if (s->k[i] == key)
			return false;
	s->k[i] = key;
	return true;
}

/* A decimal number in [0, 2^31) (what Chrome viewers accept as a pid or tid). */
static bool small_number(const char *s, uint32_t *v)
{
	uint64_t x = 0;

	if (s == NULL || *s == '\0' || strlen(s) > 10)
		return false;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return false;
		x = x * 10 + (uint64_t)(*s - '0');
	}
	if (x >= (UINT64_C(1) << 31))
		return false;
	*v = (uint32_t)x;
	return true;
}

/* The pid text a track's process is keyed by. */
static const char *proc_label(const struct rp_report *r, const struct rp_report_rtrack *t,
			      char buf[16])
{
	if (t->kind == 1 && t->pid[0])
		return t->pid;
	if (t->source < r->n_sources && r->sources[t->source].pid > 0) {
		snprintf(buf, 16, "%d", (int)r->sources[t->source].pid);
		return buf;
	}
	return "";
}

static int find_proc(const struct rp_report *r, struct rp_export_map *m,
		     const struct rp_report_rtrack *t)
{
	char buf[16];
	const char *label = proc_label(r, t, buf);
	struct rp_export_proc *p;

	for (uint32_t i = 0; i < m->n_p; i++)
		if (m->p[i].source == t->source && strcmp(m->p[i].label, label) == 0)
			return (int)i;
	p = &m->p[m->n_p];
	*p = (struct rp_export_proc){
		.source = t->source, .pid = UINT32_MAX, .label = label, .next_tid = 1
	};
	if (label == buf) { /* a source's pid: kept in the map itself (p never moves) */
		memcpy(p->own, buf, sizeof(p->own));
		p->label = p->own;
	}
	return (int)m->n_p++;
}

static uint32_t fresh(struct u64set *s, uint64_t hi, uint32_t *next)
{
	while (!set_add(s, hi | *next))
		(*next)++;
	return (*next)++;
}

static void name_track(const struct rp_report_rtrack *t, struct rp_export_track *o)
{
	if (t->kind == 2)
		snprintf(o->name, sizeof(o->name), "async %" PRIu64, t->id);
	else if (t->tid[0])
		snprintf(o->name, sizeof(o->name), "tid %s", t->tid);
	else
		snprintf(o->name, sizeof(o->name), "thread %" PRIu64, t->id);
}

/* Pass 1 keeps free numeric labels, pass 2 numbers the rest: pids first, then tids. */
static void number_procs(struct rp_export_map *m, struct u64set *pids, int pass, uint32_t *next_pid)
{
	uint32_t v;

	for (uint32_t i = 0; i < m->n_p; i++) {
		struct rp_export_proc *p = &m->p[i];

		if (p->pid != UINT32_MAX)
			continue;
		if (pass == 1 && small_number(p->label, &v) && set_add(pids, v))
			p->pid = v;
		else if (pass == 2)
			p->pid = fresh(pids, 0, next_pid);
	}
}

static void number_tracks(const struct rp_report *r, struct rp_export_map *m, struct u64set *tids,
			  int pass)
{
	const struct rp_report_recorder *rec = &r->recorder;
	uint32_t v;

	for (uint32_t i = 0; i < rec->n_tracks; i++) {
		const struct rp_report_rtrack *t = &rec->tracks[i];
		struct rp_export_track *o = &m->t[i];
		uint64_t hi = (uint64_t)m->p[o->proc].pid << 32;

		if (o->tid != UINT32_MAX)
			continue;
		if (pass == 1 && t->kind == 1 && small_number(t->tid, &v) && set_add(tids, hi | v))
			o->tid = v;
		else if (pass == 2)
			o->tid = fresh(tids, hi, &m->p[o->proc].next_tid);
	}
}

int rp_export_map_build(const struct rp_report *r, struct rp_export_map *m)
{
	const struct rp_report_recorder *rec = &r->recorder;
	struct u64set pids = { 0 }, tids = { 0 };
	uint32_t next_pid = 1;
	int err = -ENOMEM;

	memset(m, 0, sizeof(*m));
	m->t = calloc(rec->n_tracks ? rec->n_tracks : 1, sizeof(*m->t));
	m->p = calloc(rec->n_tracks ? rec->n_tracks : 1, sizeof(*m->p));
	if (!m->t || !m->p || set_init(&pids, rec->n_tracks) || set_init(&tids, rec->n_tracks))
		goto out;
	for (uint32_t i = 0; i < rec->n_tracks; i++) {
		int p = find_proc(r, m, &rec->tracks[i]);

		if (p < 0)
			goto out;
		m->t[i].proc = (uint32_t)p;
		m->t[i].tid = UINT32_MAX;
		name_track(&rec->tracks[i], &m->t[i]);
	}
	number_procs(m, &pids, 1, &next_pid);
	number_procs(m, &pids, 2, &next_pid);
	number_tracks(r, m, &tids, 1);
	number_tracks(r, m, &tids, 2);
	for (uint32_t i = 0; i < rec->n_tracks; i++)
		m->t[i].pid = m->p[m->t[i].proc].pid;
	err = 0;
out:
	free(pids.k);
	free(tids.k);
	if (err)
		rp_export_map_free(m);
	return err;
}

void rp_export_map_free(struct rp_export_map *m)
{
	free(m->t);
	free(m->p);
	memset(m, 0, sizeof(*m));
}
