// SPDX-License-Identifier: MIT
/*
 * Chrome trace import; the nesting rules are in import_chrome.h. Three passes over
 * compact arrays: collect spans while streaming the file (names and tracks found by
 * hints), sort the spans by track and nest each track into BEGIN/END events (one run
 * in time order per track), merge the runs by time and feed the engine a track's
 * stretch at a time.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import_chrome.h"
#include "sort.h"

bool rp_import_chrome_plain;

struct span {
	int64_t start, end;
	uint32_t name, track, seq;
	uint32_t link;		/* 1 + index into links, 0 if none */
};

struct open_b {			/* a B waiting for its E */
	int64_t start;
	uint32_t name, track;
	uint32_t link;
};

struct gen_ev {			/* a generated BEGIN, END or LINK */
	int64_t ts;
	uint32_t track, seq;	/* seq: order within the track */
	uint32_t name;		/* for a LINK: index into links */
	uint8_t kind;
};

struct ctr {			/* a counter sample (export: the flight recorder) */
	int64_t ts, value;
	uint32_t track, name, seq, pad;
};

/* A correlation id to pass on as an RP_EV_LINK: from args.correlation of a span
 * (right after its BEGIN), or from a flow event (s: launch side, f: device side)
 * after everything else at its time on its track, so that it lands on the innermost
 * span open there. */
struct link {
	uint64_t corr;
	uint32_t name;
	uint8_t side;
	bool flow;		/* from a flow event, not from args */
};

struct flow {
	int64_t ts;
	uint32_t track, link;
};

struct corr_key {		/* a correlation id some span carried in its args */
	uint64_t corr;
	uint8_t side;
};

/* A string's length and its first and last eight bytes (all of it up to 16 bytes): a
 * hint's key, compared as integers. */
struct skey {
	uint64_t w[2];
	size_t n;
};

/* A name or track id found lately: id + 1 (0: none), the keys of its two strings (so
 * that a compare never reads past the table's, and short ones need no memcmp), and
 * for a name whether its category is device work (device_cat()). */
struct hint {
	uint32_t id1;
	bool dev;
	uint64_t w[2][2];
	size_t n[2];
};

#define TRACK_HINT_BITS 4
#define NAME_HINT_BITS 6

struct vec {
	void *p;
	size_t n, cap, size;
};

struct imp {
	struct rp_engine *e;
	uint32_t src;
	struct rp_names tracks;	/* (pid, tid) -> track number */
	struct vec ctrs;	/* export: C events */
	struct vec spans, opens, evs, links, flows;
	/* evs: where each track's events start, then the flows' (feed_merged()); whether
	 * a track's came out of time order (never, by nest_track()'s rules: checked) */
	struct vec runs;
	int64_t run_ts;
	bool unordered, flows_unordered;
	uint32_t seq;
	bool device;		/* the trace has links or device work */
	int64_t t_max;
	int64_t *self_delta;	/* torch nesting: per name id, torch's self - ringprof's */
	rp_chrome_progress_fn progress;	/* the caller's, with its ctx */
	void *progress_ctx;
	struct rp_chrome_stats st;	/* elements that were not objects, ... */
	uint64_t used;			/* events that became spans, counters, flows */
	uint64_t unused;		/* events of no phase or time this reader uses */
	/* Ids found lately, by a hash of their strings' keys (hint_slot()),
	 * checked against the table's own strings: a trace repeats a few tracks and
	 * names, and these find them without hashing every byte (rp_names_get()). */
	struct hint track_hint[1u << TRACK_HINT_BITS], name_hint[1u << NAME_HINT_BITS];
};

/* Device work by category (torch/Kineto): its links are the device side. */
static bool device_cat(const char *cat)
{
	return rp_device_is_device_category(cat);
}

static inline uint64_t load8(const char *s)
{
	uint64_t v;

	memcpy(&v, s, 8);
	return v;
}

static inline uint64_t load4(const char *s)
{
	uint32_t v;

	memcpy(&v, s, 4);
	return v;
}

/* @s's key (struct skey): for a given length, each string has its own. */
static inline struct skey skey_of(const char *s)
{
	struct skey k = { { 0, 0 }, strlen(s) };

	if (k.n >= 8) {
		k.w[0] = load8(s);
		k.w[1] = load8(s + k.n - 8);
	} else if (k.n >= 4) {
		k.w[0] = load4(s) | load4(s + k.n - 4) << 32;
	} else {
		for (size_t i = 0; i < k.n; i++)
			k.w[0] |= (uint64_t)(unsigned char)s[i] << (8 * i);
	}
	return k;
}

/* Two keys mixed into a hint's slot among 2^@bits, the first of two it may be in:
 * names differ at their ends too ("aten::add_", "aten::addmm", kernels' template
 * arguments). */
static inline unsigned hint_slot(const struct skey *a, const struct skey *b, unsigned bits)
{
	uint64_t h = a->w[0] * 0x9e3779b97f4a7c15ull ^ a->w[1] * 0xff51afd7ed558ccdull ^
		     b->w[0] * 0xc4ceb9fe1a85ec53ull ^ b->w[1] * 0x2545f4914f6cdd1dull ^
		     (a->n << 32 | b->n);

	h ^= h >> 29;
	return (unsigned)((h * 0xc2b2ae3d27d4eb4full) >> (64 - bits)) & ~1u;
}

/* Whether the string of key @k, @s, is the hint's string @i (@x, from the table). */
static inline bool skey_is(const struct hint *h, unsigned i, const struct skey *k,
			   const char *x, const char *s)
{
	return h->n[i] == k->n && h->w[i][0] == k->w[0] && h->w[i][1] == k->w[1] &&
	       (k->n <= 16 || memcmp(x + 8, s + 8, k->n - 16) == 0);
}

/* Whether @h is an entry of @t whose strings are @a (key @ka) and @b (key @kb). */
static inline bool hint_is(const struct rp_names *t, const struct hint *h, const char *a,
			   const struct skey *ka, const char *b, const struct skey *kb)
{
	const struct rp_name_entry *x;

	if (h->id1 == 0)
		return false;
	x = &t->e[h->id1 - 1];
	return skey_is(h, 0, ka, x->name, a) && skey_is(h, 1, kb, x->category, b);
}

static void hint_set(struct hint *h, uint32_t id, const struct skey *ka, const struct skey *kb,
		     bool dev)
{
	*h = (struct hint){ id + 1, dev, { { ka->w[0], ka->w[1] }, { kb->w[0], kb->w[1] } },
			    { ka->n, kb->n } };
}

/* The hint of @t among the two at @h whose strings are @a (key @ka) and @b (@kb), or
 * NULL. */
static inline const struct hint *hint_find(const struct rp_names *t, const struct hint *h,
					   const char *a, const struct skey *ka, const char *b,
					   const struct skey *kb)
{
	if (hint_is(t, &h[0], a, ka, b, kb))
		return &h[0];
	return hint_is(t, &h[1], a, ka, b, kb) ? &h[1] : NULL;
}

/* A new hint at @h, the one there moved to its pair's other slot. */
static void hint_add(struct hint *h, uint32_t id, const struct skey *ka, const struct skey *kb,
		     bool dev)
{
	h[1] = h[0];
	hint_set(&h[0], id, ka, kb, dev);
}

/* rp_names_get(&m->tracks, pid, tid, "", 0, full), a found id remembered. */
static uint32_t track_of(struct imp *m, const struct rp_chrome_ev *ev, bool *full)
{
	struct skey kp = skey_of(ev->pid), kt = skey_of(ev->tid);
	struct hint *h = &m->track_hint[hint_slot(&kp, &kt, TRACK_HINT_BITS)];
	const struct hint *f = hint_find(&m->tracks, h, ev->pid, &kp, ev->tid, &kt);
	uint32_t id;

	if (f != NULL) {
		*full = false;
		return f->id1 - 1;
	}
	id = rp_names_get(&m->tracks, ev->pid, ev->tid, "", 0, full);
	if (!*full)
		hint_add(h, id, &kp, &kt, false);
	return id;
}

/* rp_engine_name(m->e, m->src, name, cat, "", 0), a found id remembered; @dev: whether
 * its category is device work. */
static uint32_t name_of(struct imp *m, const struct rp_chrome_ev *ev, bool *dev)
{
	struct skey kn = skey_of(ev->name), kc = skey_of(ev->cat);
	struct hint *h = &m->name_hint[hint_slot(&kn, &kc, NAME_HINT_BITS)];
	const struct hint *f = hint_find(&m->e->names, h, ev->name, &kn, ev->cat, &kc);
	bool full;
	uint32_t id;

	if (f != NULL) {
		*dev = f->dev;
		return f->id1 - 1;
	}
	*dev = device_cat(ev->cat);
	id = rp_names_get(&m->e->names, ev->name, ev->cat, "", 0, &full);
	if (full)
		m->e->src[m->src].counts.anomalies[RP_ANOM_NAME_CAP]++; /* as rp_engine_name() */
	else
		hint_add(h, id, &kn, &kc, *dev);
	return id;
}

static void *vec_push(struct vec *v)
{
	if (v->n == v->cap) {
		size_t cap = v->cap ? v->cap * 2 : 1024;
		void *p = realloc(v->p, cap * v->size);
		if (p == NULL)
			return NULL;
		v->p = p;
		v->cap = cap;
	}
	return (char *)v->p + v->size * v->n++;
}

static struct rp_counts *counts(struct imp *m)
{
	return &m->e->src[m->src].counts;
}

static int add_span(struct imp *m, int64_t start, int64_t end, uint32_t name, uint32_t track,
		    uint32_t link)
{
	struct span *s = vec_push(&m->spans);

	if (s == NULL)
		return -ENOMEM;
	*s = (struct span){ start, end < start ? start : end, name, track, m->seq++, link };
	return 0;
}

/* 1 + the index of a new link, 0 if out of memory. */
static uint32_t add_link(struct imp *m, uint64_t corr, uint32_t name, uint8_t side, bool flow)
{
	struct link *l = vec_push(&m->links);

	if (l == NULL)
		return 0;
	*l = (struct link){ corr, name, side, flow };
	return (uint32_t)m->links.n;
}

/* A flow event's id as a correlation id: a decimal or 0x-hex number, else none. */
static bool flow_id(const char *id, uint64_t *out)
{
	uint64_t v = 0;
	size_t n = 0;
	char *end;

	if (id == NULL || *id == '\0' || *id == '-')
		return false;
	/* the common id, 1 to 19 decimal digits with no leading 0, as strtoull reads it */
	for (; id[n] >= '0' && id[n] <= '9' && n < 19; n++)
		v = v * 10 + (uint64_t)(id[n] - '0');
	if (id[n] == '\0' && id[0] != '0') {
		*out = v;
		return true;
	}
	errno = 0;
	*out = strtoull(id, &end, 0);
	return errno == 0 && *end == '\0';
}

static int add_flow(struct imp *m, const struct rp_chrome_ev *ev, uint32_t track)
{
	uint64_t corr;
	uint32_t link;
	struct flow *f;
	bool dev;

	if (!ev->has_id || !flow_id(ev->id, &corr)) {
		counts(m)->anomalies[RP_ANOM_BAD_EVENT]++;
		return 0;
	}
	link = add_link(m, corr, name_of(m, ev, &dev),
			ev->ph == 's' ? RP_LINK_LAUNCH : RP_LINK_DEVICE, true);
	if (link == 0 || (f = vec_push(&m->flows)) == NULL)
		return -ENOMEM;
	*f = (struct flow){ ev->ts_ns, track, link };
	return 0;
}

/* E: closes the most recent open B of its track. */
static int close_b(struct imp *m, uint32_t track, int64_t ts)
{
	struct open_b *o = m->opens.p;

	for (size_t i = m->opens.n; i-- > 0;) {
		if (o[i].track != track)
			continue;
		int err = add_span(m, o[i].start, ts, o[i].name, track, o[i].link);
		memmove(&o[i], &o[i + 1], (m->opens.n - i - 1) * sizeof(*o));
		m->opens.n--;
		return err;
	}
	counts(m)->anomalies[RP_ANOM_END_UNMATCHED]++;
	return 0;
}

/* export: a C event's first numeric value, as the engine's int64 counter (rounded). */
static int add_counter(struct imp *m, const struct rp_chrome_ev *ev, uint32_t track)
{
	struct ctr *c;
	bool dev;

	if (!ev->has_value || !(ev->value > -9.2e18 && ev->value < 9.2e18)) {
		counts(m)->anomalies[RP_ANOM_BAD_EVENT]++;
		return 0;
	}
	if ((c = vec_push(&m->ctrs)) == NULL)
		return -ENOMEM;
	*c = (struct ctr){ ev->ts_ns, ev->value >= 0 ? (int64_t)(ev->value + 0.5) : -(int64_t)(0.5 - ev->value), track,
			   name_of(m, ev, &dev), m->seq++, 0 };
	return 0;
}

static int on_event(void *ctx, const struct rp_chrome_ev *ev)
{
	struct imp *m = ctx;
	bool full, dev;
	uint32_t track, name, link = 0;

	m->e->progress_events++; /* export: analyze --progress */
	if (ev->ph == 'C' && ev->has_ts && ev->ts_ns >= 0) { /* export: counters */
		track = track_of(m, ev, &full);
		if (full) {
			counts(m)->anomalies[RP_ANOM_TRACK_CAP]++;
			return 0;
		}
		m->used++;
		return add_counter(m, ev, track);
	}
	if ((ev->ph != 'X' && ev->ph != 'B' && ev->ph != 'E' && ev->ph != 's' && ev->ph != 'f') ||
	    !ev->has_ts) {
		/* Metadata, instants, ...: ignored by design. No phase, or a span with
		 * no time: not usable (and counted, so JSON that is not a trace fails). */
		if (ev->ph == '\0' || strchr("XBECsf", ev->ph) != NULL)
			m->unused++;
		return 0;
	}
	m->used++;
	/* Times before the epoch, or whose end does not fit in 64 bits, are not times
	 * (the engine's clock is unsigned): counted, skipped. */
	if (ev->ts_ns < 0 || (ev->ph == 'X' && ev->has_dur && ev->dur_ns > INT64_MAX - ev->ts_ns)) {
		counts(m)->anomalies[RP_ANOM_BAD_EVENT]++;
		return 0;
	}
	track = track_of(m, ev, &full);
	if (full) {
		counts(m)->anomalies[RP_ANOM_TRACK_CAP]++;
		return 0;
	}
	if (ev->ts_ns > m->t_max)
		m->t_max = ev->ts_ns;
	if (ev->ph == 'E')
		return close_b(m, track, ev->ts_ns);
	if (ev->ph == 's' || ev->ph == 'f') {
		m->device = true;
		return add_flow(m, ev, track);
	}
	name = name_of(m, ev, &dev);
	m->device |= ev->has_correlation || dev;
	if (ev->has_correlation &&
	    (link = add_link(m, ev->correlation, name, dev ? RP_LINK_DEVICE : RP_LINK_LAUNCH,
			     false)) == 0)
		return -ENOMEM;
	if (ev->ph == 'X') {
		int64_t dur = ev->has_dur && ev->dur_ns > 0 ? ev->dur_ns : 0;
		if (ev->ts_ns + dur > m->t_max)
			m->t_max = ev->ts_ns + dur;
		return add_span(m, ev->ts_ns, ev->ts_ns + dur, name, track, link);
	}
	struct open_b *o = vec_push(&m->opens);
	if (o == NULL)
		return -ENOMEM;
	*o = (struct open_b){ ev->ts_ns, name, track, link };
	return 0;
}

static int cmp_span(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	if (x->track != y->track)
		return x->track < y->track ? -1 : 1;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	if (x->end - x->start != y->end - y->start) /* longer first: parents first */
		return x->end - x->start > y->end - y->start ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int cmp_ev(const void *a, const void *b)
{
	const struct gen_ev *x = a, *y = b;

	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	if (x->track != y->track)
		return x->track < y->track ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* cmp_span() within one track: no two spans are equal (seq). */
static inline bool span_in_track_before(const struct span *x, const struct span *y)
{
	if (x->start != y->start)
		return x->start < y->start;
	if (x->end - x->start != y->end - y->start) /* longer first: parents first */
		return x->end - x->start > y->end - y->start;
	return x->seq < y->seq;
}

#define span_before(x, y) (cmp_span((x), (y)) < 0)
#define ev_before(x, y) (cmp_ev((x), (y)) < 0)
RP_SORT_DEFINE(sort_spans, struct span, span_before)
RP_SORT_DEFINE(sort_track_spans, struct span, span_in_track_before)
RP_SORT_DEFINE(sort_evs, struct gen_ev, ev_before)
/* nest_track() emits each track's events in time order: one run per track, then
 * the flows' links */
RP_SORT_RUNS_DEFINE(sort_evs_runs, sort_evs, struct gen_ev, ev_before)

static int emit(struct imp *m, uint8_t kind, int64_t ts, uint32_t name, uint32_t track,
		uint32_t *seq)
{
	struct gen_ev *g = vec_push(&m->evs);

	if (g == NULL)
		return -ENOMEM;
	*g = (struct gen_ev){ ts, track, (*seq)++, name, kind };
	m->unordered |= ts < m->run_ts;
	m->run_ts = ts;
	return 0;
}

/* A new run of m->evs starts (a track's events, or the flows'). */
static int run_start(struct imp *m)
{
	size_t *r = vec_push(&m->runs);

	if (r == NULL)
		return -ENOMEM;
	*r = m->evs.n;
	m->run_ts = INT64_MIN;
	return 0;
}

/* Does the open span `p` contain span `s` (which starts at or after it)? */
static bool contains(const struct span *p, const struct span *s)
{
	if (p->end == p->start)
		return false;
	return s->start < p->end || (s->start == p->end && s->end == s->start);
}

/*
 * Torch nesting of one track's sorted spans [lo, hi), before nest_track() clamps
 * them: the rule of torch's EventList._populate_cpu_children() (profiler_util.py),
 * which key_averages() sums. The spans come in its order (start, then end
 * descending, then file order); the innermost open span is a parent unless the new
 * one starts at or after its end or ends after it, and then it is popped for good,
 * never to be a parent again. A span's self time is its duration minus its
 * children's, which goes negative when un-nested siblings overlap. Adds every span's
 * torch self time to m->self_delta[name].
 */
static void torch_track(struct imp *m, size_t lo, size_t hi, size_t *stack)
{
	const struct span *sp = m->spans.p;
	size_t depth = 0;

	for (size_t i = lo; i < hi; i++) {
		while (depth > 0) {
			const struct span *p = &sp[stack[depth - 1]];

			if (sp[i].start < p->end && sp[i].end <= p->end) {
				m->self_delta[p->name] -= sp[i].end - sp[i].start;
				break;
			}
			depth--;
		}
		m->self_delta[sp[i].name] += sp[i].end - sp[i].start;
		stack[depth++] = i;
	}
}

/* Nests one track's sorted spans [lo, hi) with a stack of indices. With torch
 * nesting, each span's self time as the engine will count it is taken off
 * m->self_delta[name], leaving torch's minus ringprof's. */
static int nest_track(struct imp *m, size_t lo, size_t hi, size_t *stack)
{
	struct span *sp = m->spans.p;
	size_t depth = 0;
	uint32_t seq = 0;
	int err = 0;

	for (size_t i = lo; i < hi && !err; i++) {
		while (depth && !contains(&sp[stack[depth - 1]], &sp[i])) {
			struct span *p = &sp[stack[--depth]];
			err = emit(m, RP_EV_END, p->end, p->name, p->track, &seq);
		}
		if (depth && sp[i].end > sp[stack[depth - 1]].end) {
			sp[i].end = sp[stack[depth - 1]].end;
			counts(m)->anomalies[RP_ANOM_CLAMPED]++;
		}
		if (m->self_delta != NULL) {
			m->self_delta[sp[i].name] -= sp[i].end - sp[i].start;
			if (depth)
				m->self_delta[sp[stack[depth - 1]].name] += sp[i].end - sp[i].start;
		}
		stack[depth++] = i;
		err = err ? err : emit(m, RP_EV_BEGIN, sp[i].start, sp[i].name, sp[i].track, &seq);
		if (sp[i].link && !err)
			err = emit(m, RP_EV_LINK, sp[i].start, sp[i].link - 1, sp[i].track, &seq);
	}
	while (depth && !err) {
		struct span *p = &sp[stack[--depth]];
		err = emit(m, RP_EV_END, p->end, p->name, p->track, &seq);
	}
	return err;
}

/* The slot of @k in a table of 2^@bits (corr_has()). */
static inline size_t corr_slot(const struct corr_key *k, unsigned bits)
{
	return (size_t)(((k->corr ^ k->side) * 0x9e3779b97f4a7c15ull) >> (64 - bits));
}

/* Whether @k is in @t (2^@bits slots, side 0: empty), or if @add, added to it. */
static bool corr_has(struct corr_key *t, unsigned bits, const struct corr_key *k, bool add)
{
	size_t mask = ((size_t)1 << bits) - 1;

	for (size_t i = corr_slot(k, bits);; i = (i + 1) & mask) {
		if (t[i].side == 0) {
			if (add)
				t[i] = *k;
			return false;
		}
		if (t[i].corr == k->corr && t[i].side == k->side)
			return true;
	}
}

/* Flow events, but for correlations a span already carried in its args (Kineto writes
 * both): a flow binds by time, and at a zero-length launch it would bind to the
 * launch's parent instead. Those correlations are found in a hash set (sides are
 * never 0, the empty slot's), at most half full. */
static int emit_flows(struct imp *m)
{
	const struct link *l = m->links.p;
	struct corr_key *t;
	unsigned bits = 1;
	size_t n = 0;
	int err = 0;

	if (m->flows.n == 0)
		return 0;
	for (size_t i = 0; i < m->links.n; i++)
		n += !l[i].flow;
	while (((size_t)1 << bits) < 2 * n)
		bits++;
	if ((t = calloc((size_t)1 << bits, sizeof(*t))) == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < m->links.n; i++)
		if (!l[i].flow)
			corr_has(t, bits, &(struct corr_key){ l[i].corr, l[i].side }, true);
	for (size_t i = 0; i < m->flows.n && !err; i++) {
		const struct flow *f = &((const struct flow *)m->flows.p)[i];
		struct corr_key want = { l[f->link - 1].corr, l[f->link - 1].side };
		uint32_t last = UINT32_MAX; /* after all else at (ts, track) */

		if (corr_has(t, bits, &want, false))
			continue;
		err = emit(m, RP_EV_LINK, f->ts, f->link - 1, f->track, &last);
	}
	free(t);
	return err;
}

/*
 * One track's spans b[0..n) in order into a[0..n), b used as scratch: spans come
 * mostly in order (X events in start order; a B/E pair's span, added at its E, after
 * its children). The spans in order with the ones kept before them stay in b, the
 * others (few) go to the front of a and are sorted there, then both are merged
 * into a from the back, never over a reject not yet read. No two spans are equal,
 * so the order is cmp_span()'s whatever the method. @return false without memory.
 */
static bool sort_track(struct span *a, struct span *b, size_t n)
{
	size_t k = 0, r = 0;

	for (size_t i = 0; i < n; i++) {
		if (k == 0 || !span_in_track_before(&b[i], &b[k - 1]))
			b[k++] = b[i];
		else
			a[r++] = b[i];
	}
	if (r > 1 && !sort_track_spans(a, r)) {
		memcpy(a + r, b, k * sizeof(*b)); /* all of them in a, in some order */
		return false;
	}
	for (size_t d = n; d-- > 0;) {
		if (r > 0 && (k == 0 || span_in_track_before(&b[k - 1], &a[r - 1])))
			a[d] = a[--r];
		else
			a[d] = b[--k];
	}
	return true;
}

/*
 * The spans sorted by cmp_span(): by track with a counting sort into a buffer, then
 * each track by sort_track(). @return false without memory, the spans then in some
 * order for the caller to sort (cmp_span() is a total order: the same result).
 */
static bool sort_by_track(struct imp *m)
{
	struct span *sp = m->spans.p, *b;
	size_t n = m->spans.n, nt = m->tracks.n, *at;
	bool ok = true;

	if (!rp_sort_may_buffer(n * sizeof(*sp)) || (b = malloc(n * sizeof(*b))) == NULL)
		return false;
	if ((at = calloc(nt + 1, sizeof(*at))) == NULL) {
		free(b);
		return false;
	}
	for (size_t i = 0; i < n; i++) /* track < m->tracks.n: ids of that table */
		at[sp[i].track + 1]++;
	for (size_t t = 1; t <= nt; t++)
		at[t] += at[t - 1];
	for (size_t i = 0; i < n; i++)
		b[at[sp[i].track]++] = sp[i];
	/* at[t] is now where track t + 1 starts */
	for (size_t t = 0, lo = 0; t < nt; lo = at[t++]) {
		if (ok)
			ok = sort_track(sp + lo, b + lo, at[t] - lo);
		else
			memcpy(sp + lo, b + lo, (at[t] - lo) * sizeof(*b));
	}
	free(at);
	free(b);
	return ok;
}

static int nest_all(struct imp *m)
{
	struct span *sp = m->spans.p;
	size_t *stack = malloc((m->spans.n ? m->spans.n : 1) * sizeof(*stack));
	int err = 0;

	if (stack == NULL)
		return -ENOMEM;
	if (m->e->cfg.torch_nesting &&
	    (m->self_delta = calloc(m->e->names.n + 1, sizeof(*m->self_delta))) == NULL) {
		free(stack);
		return -ENOMEM;
	}
	if (m->spans.n > 0 && /* an empty trace has no array: qsort(NULL, 0) is undefined */
	    (rp_import_chrome_plain || !sort_by_track(m)) && !sort_spans(sp, m->spans.n))
		qsort(sp, m->spans.n, sizeof(*sp), cmp_span);
	for (size_t lo = 0, hi; lo < m->spans.n && !err; lo = hi) {
		for (hi = lo; hi < m->spans.n && sp[hi].track == sp[lo].track; hi++)
			;
		if (m->self_delta != NULL)
			torch_track(m, lo, hi, stack);
		err = run_start(m);
		err = err ? err : nest_track(m, lo, hi, stack);
	}
	free(stack);
	if (err || (err = run_start(m)) != 0)
		return err;
	m->flows_unordered = m->unordered; /* the tracks' only */
	return emit_flows(m);
}

static int cmp_ctr(const void *a, const void *b)
{
	const struct ctr *x = a, *y = b;

	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

#define ctr_before(x, y) (cmp_ctr((x), (y)) < 0)
RP_SORT_DEFINE(sort_ctrs, struct ctr, ctr_before)

/* export: counter samples up to time @t (all when @t is INT64_MAX), in time order. */
static void feed_ctrs(struct imp *m, size_t *k, int64_t t)
{
	const struct ctr *c = m->ctrs.p;

	for (; *k < m->ctrs.n && c[*k].ts <= t; (*k)++) {
		struct rp_event ev = { .ts = (uint64_t)c[*k].ts, .name = c[*k].name,
				       .kind = RP_EV_COUNTER, .arg = (uint64_t)c[*k].value };
		rp_engine_event(m->e, m->src, c[*k].track, &ev);
	}
}

/* export: the trace's own pid/tid text names each track in exports. */
static void label_tracks(struct imp *m)
{
	for (uint32_t i = 1; i < m->tracks.n; i++) /* 0 is "[other]" */
		rp_recorder_label(&m->e->rec, m->src, i, m->tracks.e[i].name,
				  m->tracks.e[i].category);
}

/* @g as the engine's event. */
static inline struct rp_event gen_event(const struct imp *m, const struct gen_ev *g)
{
	struct rp_event ev = { .ts = (uint64_t)g->ts, .name = g->name, .kind = g->kind };

	if (g->kind == RP_EV_LINK) {
		const struct link *l = &((const struct link *)m->links.p)[g->name];
		ev.name = l->name;
		ev.flags = l->side;
		ev.arg = l->corr;
	}
	return ev;
}

/* The slot hint of @track's engine track (engine.h); @one for all without memory. */
static inline uint32_t *track_hint(const struct imp *m, uint32_t *hint, uint32_t *one,
				   uint32_t track)
{
	return hint != NULL && track < m->tracks.n ? &hint[track] : one;
}

/* Every generated event sorted, then each to the engine with the counters due. */
static void feed_sorted(struct imp *m, uint32_t *hint, uint32_t *one)
{
	const struct gen_ev *g = m->evs.p;
	size_t k = 0;

	if (m->evs.n > 0 && !sort_evs_runs(m->evs.p, m->evs.n))
		qsort(m->evs.p, m->evs.n, sizeof(*g), cmp_ev);
	for (size_t i = 0; i < m->evs.n; i++) {
		struct rp_event ev = gen_event(m, &g[i]);

		feed_ctrs(m, &k, g[i].ts);
		rp_engine_event_at(m->e, m->src, g[i].track, &ev,
				   track_hint(m, hint, one, g[i].track));
	}
	feed_ctrs(m, &k, INT64_MAX);
}

/* A cursor of feed_merged(): events [i, end) of one run of m->evs, in cmp_ev() order. */
struct cur {
	size_t i, end;
};

static inline bool ev_lt(const struct gen_ev *x, const struct gen_ev *y)
{
	if (x->ts != y->ts)
		return x->ts < y->ts;
	if (x->track != y->track)
		return x->track < y->track;
	return x->seq < y->seq;
}

/* The min-heap of cursors by their next events: @h[@i] moved down to its place. */
static void cur_down(const struct gen_ev *g, struct cur *h, size_t n, size_t i)
{
	struct cur c = h[i];

	for (size_t j; (j = 2 * i + 1) < n; i = j) {
		if (j + 1 < n && ev_lt(&g[h[j + 1].i], &g[h[j].i]))
			j++;
		if (!ev_lt(&g[h[j].i], &g[c.i]))
			break;
		h[i] = h[j];
	}
	h[i] = c;
}

#define STRETCH_MAX 64 /* events given to rp_engine_run() at once */

/*
 * Events of one track's cursor @c, from its next while they come before @bound (the
 * other cursors' first; NULL: none), each after the counters due at its time: to
 * the engine in stretches through rp_engine_run(), the same as one by one.
 */
static void feed_stretch(struct imp *m, struct cur *c, const struct gen_ev *bound, size_t *k,
			 uint32_t *hint)
{
	const struct gen_ev *g = m->evs.p;
	const struct ctr *ct = m->ctrs.p;
	struct rp_event buf[STRETCH_MAX];
	uint32_t n = 0, track = g[c->i].track;

	do {
		const struct gen_ev *x = &g[c->i++];

		if (n == STRETCH_MAX || (*k < m->ctrs.n && ct[*k].ts <= x->ts)) {
			rp_engine_run(m->e, m->src, track, buf, n, hint);
			n = 0;
			feed_ctrs(m, k, x->ts);
		}
		buf[n++] = gen_event(m, x);
	} while (c->i < c->end && (bound == NULL || ev_lt(&g[c->i], bound)));
	rp_engine_run(m->e, m->src, track, buf, n, hint);
}

/*
 * What feed_sorted() does, without sorting: each track's events are a run in time
 * order (nest_track()), the flows' are sorted alone, and the runs are merged by a
 * min-heap of cursors. A cursor goes on while it comes before every other one, so
 * a track's events go to the engine in stretches. No two events of different runs
 * are equal under cmp_ev() (runs differ in track; flows' seq is UINT32_MAX), so the
 * order is feed_sorted()'s. @return false, having fed nothing, without memory.
 */
static bool feed_merged(struct imp *m, uint32_t *hint, uint32_t *one)
{
	const struct gen_ev *g = m->evs.p;
	const size_t *run = m->runs.p, nr = m->runs.n; /* the last run: the flows' */
	size_t n = 0, k = 0, flows = nr > 0 ? run[nr - 1] : 0;
	struct cur *h;

	if (nr == 0 || m->flows_unordered || (h = malloc(nr * sizeof(*h))) == NULL)
		return false;
	if (m->evs.n - flows > 1 &&
	    !sort_evs((struct gen_ev *)m->evs.p + flows, m->evs.n - flows)) {
		free(h);
		return false;
	}
	for (size_t r = 0; r < nr; r++) {
		size_t end = r + 1 < nr ? run[r + 1] : m->evs.n;

		if (end > run[r])
			h[n++] = (struct cur){ run[r], end };
	}
	for (size_t i = n / 2; i-- > 0;)
		cur_down(g, h, n, i);
	while (n > 0) {
		struct cur *c = &h[0];
		const struct gen_ev *bound = n > 1 ? &g[h[1].i] : NULL;

		if (n > 2 && ev_lt(&g[h[2].i], bound))
			bound = &g[h[2].i];
		if (c->i >= flows) { /* a flow's link, of any track */
			struct rp_event ev = gen_event(m, &g[c->i]);

			feed_ctrs(m, &k, g[c->i].ts);
			rp_engine_event_at(m->e, m->src, g[c->i].track, &ev,
					   track_hint(m, hint, one, g[c->i].track));
			c->i++;
		} else {
			feed_stretch(m, c, bound, &k, track_hint(m, hint, one, g[c->i].track));
		}
		if (c->i == c->end)
			h[0] = h[--n];
		cur_down(g, h, n, 0);
	}
	feed_ctrs(m, &k, INT64_MAX);
	free(h);
	return true;
}

/* Spans and links of every track, in time order. Each track keeps the slot of its
 * engine track found last (engine.h): a trace's threads and streams interleave.
 * Without memory for them, one hint serves all (slower, the same answer). */
static void feed(struct imp *m)
{
	uint32_t one = 0, *hint = calloc(m->tracks.n, sizeof(*hint));

	if (m->ctrs.n > 0 && !sort_ctrs(m->ctrs.p, m->ctrs.n))
		qsort(m->ctrs.p, m->ctrs.n, sizeof(struct ctr), cmp_ctr);
	if (m->device) /* device work in the trace: analyse every span, as torch does */
		rp_device_arm(m->e->dev);
	label_tracks(m);
	if (rp_import_chrome_plain || !feed_merged(m, hint, &one))
		feed_sorted(m, hint, &one);
	free(hint);
}

/* B events never closed end at the trace's last timestamp. */
static int close_open_bs(struct imp *m)
{
	const struct open_b *o = m->opens.p;
	int err = 0;

	for (size_t i = 0; i < m->opens.n && !err; i++) {
		counts(m)->anomalies[RP_ANOM_OPEN_AT_END]++;
		err = add_span(m, o[i].start, m->t_max, o[i].name, o[i].track, o[i].link);
	}
	m->opens.n = 0;
	return err;
}

/*
 * Torch nesting: the engine counted each span's self time under ringprof's nesting;
 * move every name's total to torch's. Torch's total may be negative (un-nested
 * siblings that overlap): self_ns then holds it as an int64 in two's complement
 * (report.h), which the renderers print with its sign.
 */
static void torch_self(struct imp *m)
{
	for (uint32_t n = 0; m->self_delta != NULL && n < m->e->names.n; n++)
		m->e->stats.fn[n].self_ns += (uint64_t)m->self_delta[n];
}

/*
 * JSON that is not a trace (`[1,2,"x"]`, `{"traceEvents":[{"ph":"X"}]}`) used to
 * give an empty report and exit 0: nothing in it could be used, but it was not
 * empty. An empty events array is an empty trace, and fine.
 */
static int check_used(const struct imp *m, const char *label, char *why)
{
	if (m->used > 0 || (m->st.skipped == 0 && m->unused == 0))
		return 0;
	if (m->st.skipped > 0 && m->unused == 0)
		snprintf(why, RP_WHY_MAX, "%s: not a trace: none of the %llu elements of its "
			 "events array is an event object", label,
			 (unsigned long long)m->st.skipped);
	else
		snprintf(why, RP_WHY_MAX, "%s: not a trace this reader can use: none of its "
			 "%llu events has a phase it reads (X, B/E, C, s/f) and a \"ts\"", label,
			 (unsigned long long)(m->unused + m->st.skipped));
	return -EINVAL;
}

static int finish(struct imp *m, int err)
{
	if (err == 0)
		err = close_open_bs(m);
	if (err == 0)
		err = nest_all(m);
	if (err == 0) {
		feed(m);
		torch_self(m);
	}
	free(m->self_delta);
	free(m->spans.p);
	free(m->opens.p);
	free(m->evs.p);
	free(m->ctrs.p);
	free(m->links.p);
	free(m->flows.p);
	free(m->runs.p);
	rp_names_free(&m->tracks);
	return err;
}

static int start(struct imp *m, struct rp_engine *e, const char *label, char *why)
{
	int src;

	memset(m, 0, sizeof(*m));
	m->e = e;
	m->spans.size = sizeof(struct span);
	m->opens.size = sizeof(struct open_b);
	m->evs.size = sizeof(struct gen_ev);
	m->ctrs.size = sizeof(struct ctr);
	m->links.size = sizeof(struct link);
	m->flows.size = sizeof(struct flow);
	m->runs.size = sizeof(size_t);
	src = rp_engine_add_source(e, label, 0, RP_SRC_FILE);
	if (src < 0) {
		snprintf(why, RP_WHY_MAX, "%s: too many sources", label);
		return src;
	}
	m->src = (uint32_t)src;
	strcpy(e->clock, "trace");
	if (rp_names_init(&m->tracks, e->cfg.max_tracks) != 0) {
		snprintf(why, RP_WHY_MAX, "%s: out of memory", label);
		return -ENOMEM;
	}
	return 0;
}

static void on_progress(void *ctx, uint64_t bytes, uint64_t total)
{
	struct imp *m = ctx;

	m->progress(m->progress_ctx, bytes, total);
}

int rp_import_chrome(struct rp_engine *e, const char *path, rp_chrome_progress_fn progress,
		     void *ctx, char why[RP_WHY_MAX])
{
	struct imp m;
	int err = start(&m, e, path, why);

	if (err)
		return err;
	m.progress = progress;
	m.progress_ctx = ctx;
	err = rp_chrome_read(path, on_event, progress ? on_progress : NULL, &m, &m.st, why);
	if (err == -ENOMEM)
		snprintf(why, RP_WHY_MAX, "%s: out of memory", path);
	if (err == 0)
		err = check_used(&m, path, why);
	return finish(&m, err);
}

int rp_import_chrome_buf(struct rp_engine *e, const void *buf, size_t len, const char *label,
			 char why[RP_WHY_MAX])
{
	struct imp m;
	int err = start(&m, e, label, why);

	if (err)
		return err;
	err = rp_chrome_parse(buf, len, on_event, &m, &m.st, why);
	if (err == 0)
		err = check_used(&m, label, why);
	return finish(&m, err);
}
