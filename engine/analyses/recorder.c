// SPDX-License-Identifier: MIT
/*
 * The flight recorder; see recorder.h. Recording is inline in the header; this file
 * has the slow parts: allocation, track labels, and turning the rings into report
 * data (tracks deduplicated through a small open-addressing table built per report).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "recorder.h"

size_t rp_recorder_memory_bound(uint32_t max_spans, uint32_t max_samples, uint32_t max_labels)
{
	size_t slots = 4;

	while (slots < 2 * (size_t)max_labels)
		slots <<= 1;
	return ((size_t)max_spans + 1) * sizeof(struct rp_rec_span) +
	       ((size_t)max_samples + 1) * sizeof(struct rp_rec_sample) +
	       slots * sizeof(struct rp_rec_label) +
	       (size_t)max_labels * 2 * (RP_REC_LABEL_MAX + 1 + 16) + 3 * 4096;
}

int rp_recorder_init(struct rp_recorder *r, uint32_t max_spans, uint32_t max_samples,
		     uint32_t max_labels)
{
	uint32_t slots = 4;

	memset(r, 0, sizeof(*r));
	while (slots < 2 * max_labels)
		slots <<= 1;
	r->max_spans = max_spans;
	r->max_samples = max_samples;
	r->max_labels = max_labels;
	r->spans = calloc(max_spans ? max_spans : 1, sizeof(*r->spans));
	r->samples = calloc(max_samples ? max_samples : 1, sizeof(*r->samples));
	r->labels = malloc((size_t)slots * sizeof(*r->labels));
	if (!r->spans || !r->samples || !r->labels) {
		rp_recorder_fini(r);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < slots; i++)
		r->labels[i] = (struct rp_rec_label){ .src = UINT32_MAX };
	r->labels_mask = slots - 1;
	return 0;
}

void rp_recorder_fini(struct rp_recorder *r)
{
	for (uint32_t i = 0; r->labels != NULL && i <= r->labels_mask; i++) {
		free(r->labels[i].pid);
		free(r->labels[i].tid);
	}
	free(r->labels);
	free(r->spans);
	free(r->samples);
	memset(r, 0, sizeof(*r));
}

static uint32_t hash2(uint32_t src, uint64_t track)
{
	uint64_t k = (track ^ ((uint64_t)src << 43)) * UINT64_C(0x9e3779b97f4a7c15);

	return (uint32_t)(k >> 32);
}

static struct rp_rec_label *label_slot(const struct rp_recorder *r, uint32_t src, uint64_t track)
{
	uint32_t i = hash2(src, track) & r->labels_mask;

	while (r->labels[i].src != UINT32_MAX &&
	       !(r->labels[i].src == src && r->labels[i].track == track))
		i = (i + 1) & r->labels_mask;
	return &r->labels[i];
}

int rp_recorder_label(struct rp_recorder *r, uint32_t src, uint64_t track, const char *pid,
		      const char *tid)
{
	struct rp_rec_label *l = label_slot(r, src, track);
	char *p, *t;

	if (l->src == UINT32_MAX && r->n_labels >= r->max_labels) {
		r->labels_dropped++;
		return -ENOSPC;
	}
	p = strndup(pid ? pid : "", RP_REC_LABEL_MAX);
	t = strndup(tid ? tid : "", RP_REC_LABEL_MAX);
	if (!p || !t) {
		free(p);
		free(t);
		return -ENOMEM;
	}
	if (l->src == UINT32_MAX)
		r->n_labels++;
	free(l->pid);
	free(l->tid);
	*l = (struct rp_rec_label){ .track = track, .src = src, .pid = p, .tid = t };
	return 0;
}

/* Per report: (src, kind, track) -> index into out->tracks. */
struct track_set {
	uint32_t *slot, mask;
	const struct rp_recorder *rec;
	const uint32_t *src_map;
	struct rp_report_recorder *out;
};

static int track_set_init(struct track_set *ts, uint32_t n)
{
	uint32_t slots = 4;

	while (slots < 2 * n)
		slots <<= 1;
	ts->slot = malloc((size_t)slots * sizeof(*ts->slot));
	if (ts->slot == NULL)
		return -ENOMEM;
	memset(ts->slot, 0xff, (size_t)slots * sizeof(*ts->slot));
	ts->mask = slots - 1;
	return 0;
}

/* The index of the track (report source @rsrc, engine row @src); made if new. */
static int64_t track_of(struct track_set *ts, uint32_t src, uint8_t kind, uint64_t id)
{
	struct rp_report_rtrack *t = ts->out->tracks;
	uint32_t rsrc = ts->src_map[src], i;
	const struct rp_rec_label *l = NULL;

	for (i = hash2(rsrc ^ ((uint32_t)kind << 30), id) & ts->mask; ts->slot[i] != UINT32_MAX;
	     i = (i + 1) & ts->mask) {
		const struct rp_report_rtrack *o = &t[ts->slot[i]];
		if (o->source == rsrc && o->kind == kind && o->id == id)
			return ts->slot[i];
	}
	if (kind == 1)
		l = label_slot(ts->rec, src, id);
	t[ts->out->n_tracks] = (struct rp_report_rtrack){
		.source = rsrc,
		.kind = kind,
		.id = id,
		.pid = strdup(l && l->pid ? l->pid : ""),
		.tid = strdup(l && l->tid ? l->tid : ""),
	};
	if (!t[ts->out->n_tracks].pid || !t[ts->out->n_tracks].tid) {
		ts->out->n_tracks++; /* freed with the rest */
		return -ENOMEM;
	}
	ts->slot[i] = ts->out->n_tracks;
	return ts->out->n_tracks++;
}

static int copy_spans(struct track_set *ts, const uint32_t *map, uint32_t n_src)
{
	const struct rp_recorder *rec = ts->rec;
	struct rp_report_recorder *out = ts->out;
	uint64_t kept = rec->n_spans < rec->max_spans ? rec->n_spans : rec->max_spans;

	for (uint64_t k = rec->n_spans - kept; k < rec->n_spans; k++) {
		const struct rp_rec_span *s = &rec->spans[k % rec->max_spans];
		int64_t tr;

		if (s->src >= n_src || ts->src_map[s->src] == RP_NONE || map[s->name] == RP_NONE) {
			out->unlisted++;
			continue;
		}
		if ((tr = track_of(ts, s->src, s->kind, s->track)) < 0)
			return (int)tr;
		out->spans[out->n_spans++] = (struct rp_report_rspan){
			.fn = map[s->name],
			.track = (uint32_t)tr,
			.depth = s->depth,
			.step = s->step,
			.start_ns = s->start,
			.dur_ns = s->dur,
		};
	}
	return 0;
}

/* Counter names: engine name id -> index into out->names, made on first use. */
static int copy_samples(struct track_set *ts, const struct rp_names *names, uint32_t n_src)
{
	const struct rp_recorder *rec = ts->rec;
	struct rp_report_recorder *out = ts->out;
	uint64_t kept = rec->n_samples < rec->max_samples ? rec->n_samples : rec->max_samples;
	uint32_t *nm = malloc((size_t)(names->n ? names->n : 1) * sizeof(*nm));
	int err = 0;

	if (nm == NULL)
		return -ENOMEM;
	memset(nm, 0xff, (size_t)names->n * sizeof(*nm));
	for (uint64_t k = rec->n_samples - kept; k < rec->n_samples && !err; k++) {
		const struct rp_rec_sample *s = &rec->samples[k % rec->max_samples];
		int64_t tr;

		if (s->src >= n_src || ts->src_map[s->src] == RP_NONE || s->name >= names->n)
			continue;
		if (nm[s->name] == UINT32_MAX) {
			out->names[out->n_names] = strdup(names->e[s->name].name);
			if (out->names[out->n_names] == NULL) {
				err = -ENOMEM;
				break;
			}
			nm[s->name] = out->n_names++;
		}
		if ((tr = track_of(ts, s->src, 1, s->track)) < 0) {
			err = (int)tr;
			break;
		}
		out->samples[out->n_samples++] = (struct rp_report_rsample){
			.name = nm[s->name],
			.track = (uint32_t)tr,
			.ts_ns = s->ts,
			.value = s->value,
		};
	}
	free(nm);
	return err;
}

int rp_recorder_report(const struct rp_recorder *rec, const struct rp_names *names,
		       const uint32_t *map, const uint32_t *src_map, uint32_t n_src,
		       struct rp_report_recorder *out)
{
	uint64_t ns = rec->n_spans < rec->max_spans ? rec->n_spans : rec->max_spans;
	uint64_t nc = rec->n_samples < rec->max_samples ? rec->n_samples : rec->max_samples;
	struct track_set ts = { .rec = rec, .src_map = src_map, .out = out };
	uint32_t n_names = names->n;
	int err;

	memset(out, 0, sizeof(*out));
	out->max_spans = rec->max_spans;
	out->max_samples = rec->max_samples;
	out->spans_seen = rec->n_spans;
	out->samples_seen = rec->n_samples;
	out->wrapped = rp_recorder_wrapped(rec);
	out->samples_wrapped = rec->n_samples - nc;
	out->labels_dropped = rec->labels_dropped;
	out->spans = calloc(ns ? ns : 1, sizeof(*out->spans));
	out->samples = calloc(nc ? nc : 1, sizeof(*out->samples));
	out->tracks = calloc(ns + nc ? ns + nc : 1, sizeof(*out->tracks));
	out->names =
		calloc(n_names < nc ? (n_names ? n_names : 1) : (nc ? nc : 1), sizeof(*out->names));
	if (!out->spans || !out->samples || !out->tracks || !out->names ||
	    track_set_init(&ts, (uint32_t)(ns + nc)) != 0) {
		free(ts.slot);
		return -ENOMEM;
	}
	err = copy_spans(&ts, map, n_src);
	if (err == 0)
		err = copy_samples(&ts, names, n_src);
	free(ts.slot);
	return err;
}
