// SPDX-License-Identifier: MIT
/*
 * The flight recorder; see recorder.h. Recording is inline in the header; this file
 * has the slow parts: allocation, track labels, and turning the rings into report
 * data (tracks numbered through an open-addressing table kept from one report to
 * the next: recorder.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "recorder.h"

/* A numbered track: engine source row, kind, id; the report that last used it. */
struct rec_track {
	uint64_t id, used;
	uint32_t src;
	uint8_t kind;
};

struct rp_rec_numbering {
	struct rec_track *t;	/* by number */
	uint32_t n, cap;
	uint32_t *slot, mask;	/* open addressing -> number; UINT32_MAX: empty */
	uint64_t serial;	/* reports made */
};

size_t rp_recorder_memory_bound(uint32_t max_spans, uint32_t max_samples, uint32_t max_labels)
{
	size_t slots = 4;
	size_t tracks = 2 * ((size_t)max_spans + max_samples) + RP_REC_TRACKS_SLACK, tslots = 4;

	while (slots < 2 * (size_t)max_labels)
		slots <<= 1;
	while (tslots < 2 * tracks)
		tslots <<= 1;
	return ((size_t)max_spans + 1) * sizeof(struct rp_rec_span) +
	       ((size_t)max_samples + 1) * sizeof(struct rp_rec_sample) +
	       slots * sizeof(struct rp_rec_label) +
	       (size_t)max_labels * 2 * (RP_REC_LABEL_MAX + 1 + 16) + 3 * 4096 +
	       tracks * 2 * 32 + tslots * sizeof(uint32_t); /* numbering (grows by doubling) */
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
	r->numbering = calloc(1, sizeof(*r->numbering));
	if (!r->spans || !r->samples || !r->labels || !r->numbering) {
		rp_recorder_fini(r);
		return -ENOMEM;
	}
	r->span_next = r->spans;
	r->span_lap = max_spans ? max_spans : 1; /* none kept: the scratch slot */
	r->span_end = r->spans + r->span_lap;
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
	if (r->numbering != NULL) {
		free(r->numbering->t);
		free(r->numbering->slot);
	}
	free(r->numbering);
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

/* Per report. */
struct track_set {
	struct rp_rec_numbering *nb;
	const struct rp_recorder *rec;
	const uint32_t *src_map;
	struct rp_report_recorder *out;
};

static uint32_t track_hash(uint32_t src, uint8_t kind, uint64_t id)
{
	return hash2(src ^ ((uint32_t)kind << 30), id);
}

/* The hash table again, for nb->n tracks and room to double. */
static int numbering_rehash(struct rp_rec_numbering *nb, uint32_t want)
{
	uint32_t slots = 4, *slot;

	while (slots < 2 * want)
		slots <<= 1;
	slot = malloc((size_t)slots * sizeof(*slot));
	if (slot == NULL)
		return -ENOMEM;
	memset(slot, 0xff, (size_t)slots * sizeof(*slot));
	for (uint32_t k = 0; k < nb->n; k++) {
		uint32_t i = track_hash(nb->t[k].src, nb->t[k].kind, nb->t[k].id) & (slots - 1);

		while (slot[i] != UINT32_MAX)
			i = (i + 1) & (slots - 1);
		slot[i] = k;
	}
	free(nb->slot);
	nb->slot = slot;
	nb->mask = slots - 1;
	return 0;
}

/* The number of the track (engine row @src, @kind, @id), marked used; made if new. */
static int64_t track_of(struct track_set *ts, uint32_t src, uint8_t kind, uint64_t id)
{
	struct rp_rec_numbering *nb = ts->nb;
	uint32_t i;

	if (nb->slot != NULL)
		for (i = track_hash(src, kind, id) & nb->mask; nb->slot[i] != UINT32_MAX;
		     i = (i + 1) & nb->mask) {
			struct rec_track *t = &nb->t[nb->slot[i]];

			if (t->src == src && t->kind == kind && t->id == id) {
				t->used = nb->serial;
				return nb->slot[i];
			}
		}
	if (nb->n == nb->cap) {
		uint32_t cap = nb->cap ? 2 * nb->cap : 64;
		struct rec_track *t = realloc(nb->t, (size_t)cap * sizeof(*t));

		if (t == NULL)
			return -ENOMEM;
		nb->t = t;
		nb->cap = cap;
	}
	if (nb->slot == NULL || 2 * (nb->n + 1) > nb->mask + 1) {
		if (numbering_rehash(nb, nb->cap) != 0)
			return -ENOMEM;
	}
	for (i = track_hash(src, kind, id) & nb->mask; nb->slot[i] != UINT32_MAX;
	     i = (i + 1) & nb->mask)
		;
	nb->t[nb->n] = (struct rec_track){ .id = id, .used = nb->serial, .src = src, .kind = kind };
	nb->slot[i] = nb->n;
	return nb->n++;
}

/* Whether a track no span or sample of this report uses may stay listed: its source
 * row is listed. */
static bool may_stay(const struct track_set *ts, const struct rec_track *t, uint32_t n_src)
{
	return t->src < n_src && ts->src_map[t->src] != RP_NONE;
}

/*
 * Unused tracks go when they are more than half the list (and RP_REC_TRACKS_SLACK),
 * or when one cannot be listed; the others are numbered again in their order, and the
 * report's spans and samples follow.
 */
static int numbering_trim(struct track_set *ts, uint32_t n_src)
{
	struct rp_rec_numbering *nb = ts->nb;
	struct rp_report_recorder *out = ts->out;
	uint32_t used = 0, *renum, k, n = 0;
	bool must = false;

	for (k = 0; k < nb->n; k++) {
		used += nb->t[k].used == nb->serial;
		must |= nb->t[k].used != nb->serial && !may_stay(ts, &nb->t[k], n_src);
	}
	if (!must && nb->n - used <= used + RP_REC_TRACKS_SLACK)
		return 0;
	renum = malloc((size_t)(nb->n ? nb->n : 1) * sizeof(*renum));
	if (renum == NULL)
		return -ENOMEM;
	for (k = 0; k < nb->n; k++) {
		renum[k] = nb->t[k].used == nb->serial ? n : UINT32_MAX;
		if (renum[k] != UINT32_MAX)
			nb->t[n++] = nb->t[k];
	}
	for (k = 0; k < out->n_spans; k++)
		out->spans[k].track = renum[out->spans[k].track];
	for (k = 0; k < out->n_samples; k++)
		out->samples[k].track = renum[out->samples[k].track];
	free(renum);
	nb->n = n;
	return numbering_rehash(nb, nb->cap);
}

/* out->tracks: every numbered track, with the labels of thread tracks. */
static int list_tracks(struct track_set *ts)
{
	struct rp_rec_numbering *nb = ts->nb;
	struct rp_report_recorder *out = ts->out;

	out->tracks = calloc(nb->n ? nb->n : 1, sizeof(*out->tracks));
	if (out->tracks == NULL)
		return -ENOMEM;
	for (uint32_t k = 0; k < nb->n; k++) {
		const struct rec_track *t = &nb->t[k];
		const struct rp_rec_label *l = t->kind == 1 ? label_slot(ts->rec, t->src, t->id) : NULL;
		struct rp_report_rtrack *o = &out->tracks[out->n_tracks++]; /* freed with the rest */

		*o = (struct rp_report_rtrack){
			.source = ts->src_map[t->src],
			.kind = t->kind,
			.id = t->id,
			.pid = strdup(l && l->pid ? l->pid : ""),
			.tid = strdup(l && l->tid ? l->tid : ""),
		};
		if (!o->pid || !o->tid)
			return -ENOMEM;
	}
	return 0;
}

static int copy_spans(struct track_set *ts, const uint32_t *map, uint32_t n_src)
{
	const struct rp_recorder *rec = ts->rec;
	struct rp_report_recorder *out = ts->out;
	uint64_t n_spans = rp_recorder_n_spans(rec);
	uint64_t kept = n_spans < rec->max_spans ? n_spans : rec->max_spans;
	const struct rp_rec_span *prev = NULL; /* the last span listed, its track tr */
	int64_t tr = 0;

	for (uint64_t k = n_spans - kept; k < n_spans; k++) {
		const struct rp_rec_span *s = &rec->spans[k % rec->max_spans];

		if (s->src >= n_src || ts->src_map[s->src] == RP_NONE || map[s->name] == RP_NONE) {
			out->unlisted++;
			continue;
		}
		/* Spans come in runs of one track (a thread's, merged by runs): its number
		 * is looked up once a run (numbers do not change before the trim). */
		if ((prev == NULL || s->src != prev->src || s->kind != prev->kind ||
		     s->track != prev->track) &&
		    (tr = track_of(ts, s->src, s->kind, s->track)) < 0)
			return (int)tr;
		prev = s;
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
	uint64_t n_spans = rp_recorder_n_spans(rec);
	uint64_t ns = n_spans < rec->max_spans ? n_spans : rec->max_spans;
	uint64_t nc = rec->n_samples < rec->max_samples ? rec->n_samples : rec->max_samples;
	struct track_set ts = { .nb = rec->numbering, .rec = rec, .src_map = src_map, .out = out };
	uint32_t n_names = names->n;
	int err;

	memset(out, 0, sizeof(*out));
	out->max_spans = rec->max_spans;
	out->max_samples = rec->max_samples;
	out->spans_seen = n_spans;
	out->samples_seen = rec->n_samples;
	out->wrapped = rp_recorder_wrapped(rec);
	out->samples_wrapped = rec->n_samples - nc;
	out->labels_dropped = rec->labels_dropped;
	out->spans = calloc(ns ? ns : 1, sizeof(*out->spans));
	out->samples = calloc(nc ? nc : 1, sizeof(*out->samples));
	out->names =
		calloc(n_names < nc ? (n_names ? n_names : 1) : (nc ? nc : 1), sizeof(*out->names));
	if (!out->spans || !out->samples || !out->names)
		return -ENOMEM;
	ts.nb->serial++;
	err = copy_spans(&ts, map, n_src);
	if (err == 0)
		err = copy_samples(&ts, names, n_src);
	if (err == 0)
		err = numbering_trim(&ts, n_src);
	if (err == 0)
		err = list_tracks(&ts);
	return err;
}
