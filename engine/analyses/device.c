// SPDX-License-Identifier: MIT
/*
 * Device idle time; the semantics are in device.h. Streaming keeps compact records
 * (32-40 bytes each, up to the caps); the analysis runs when a report is made, in
 * O(n log n) over what was kept.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <ringprof/wire.h>

#include "device.h"
#include "sort.h"

enum {
	CLS_DONE = 0x01,
	CLS_LAUNCH = 0x02,	/* torch's launch family */
	CLS_KERNEL = 0x04,	/* a device-work name that is not a memory operation */
	CLS_SOURCE = 0x08,	/* "file.py(line): fn" */
	CLS_DEVCAT = RP_DEVICE_CLS_DEVCAT, /* category of device work */
};

struct span_rec {		/* a span of torch's event tree */
	uint64_t start, end;
	uint64_t corr;		/* its link's correlation id, if side */
	int64_t self;		/* duration minus the children's (device work included) */
	uint32_t name;
	uint32_t source;	/* name id of its source frame, or RP_NONE */
	uint32_t seq;		/* arrival order */
	uint32_t src;
	uint8_t side;		/* RP_LINK_* of its link; 0 if none */
};

struct qev {			/* a launch or a kernel */
	uint64_t start, end, corr;
	uint32_t seq, src;
	uint8_t has_corr;
};

struct plink {			/* a link waiting for its thread frame to end */
	uint64_t start, corr;
	uint32_t depth, name;
	uint8_t side, used;
};

struct slink {			/* a link waiting for its async span to end */
	uint64_t span, corr;
	uint32_t src;
	uint8_t side, used;
};

struct rp_device {
	struct rp_device_head head;	/* first: device.h's inline checks read it */
	struct rp_device_cfg cfg;
	uint32_t max_tracks, max_names;
	bool any_source;		/* a classified name is a source location: until
					   then no span can have a source, skip the walk */
	struct span_rec *spans;
	uint32_t n_spans;
	struct qev *launches, *kernels;	/* together at most max_events */
	uint32_t n_launches, n_kernels;
	struct plink *plinks;		/* links_per_track per track slot */
	struct slink *slinks;		/* max_span_links, direct-mapped */
	uint64_t other_device;
	uint64_t spans_dropped, events_dropped, links_dropped, links_orphan;
};

void rp_device_cfg_default(struct rp_device_cfg *cfg)
{
	*cfg = (struct rp_device_cfg){
		.max_spans = 1u << 18, .max_events = 1u << 18, .links_per_track = 8,
		.max_span_links = 4096, .max_points = 4096, .max_idle = 1024,
		.max_phases = 256, .max_ranked = 10,
	};
}

bool rp_device_is_launch_name(const char *name)
{
	static const char *const fam[] = {
		"cudaLaunchKernel", "cudaLaunchKernelExC", "__cudaLaunchKernel",
		"cudaLaunchCooperativeKernel", "cudaLaunchCooperativeKernelMultiDevice",
	};

	for (size_t i = 0; i < sizeof(fam) / sizeof(fam[0]); i++)
		if (strncmp(name, fam[i], strlen(fam[i])) == 0)
			return true;
	return false;
}

/* Case-insensitive substring. */
static bool has_ci(const char *s, const char *pat)
{
	size_t n = strlen(pat);

	for (; *s; s++) {
		size_t i = 0;
		while (i < n && s[i] && tolower((unsigned char)s[i]) == pat[i])
			i++;
		if (i == n)
			return true;
	}
	return false;
}

bool rp_device_is_kernel_name(const char *name)
{
	return !has_ci(name, "mem") && !has_ci(name, "cpy") && !has_ci(name, "alloc") &&
	       !has_ci(name, "free");
}

/* re.search(r"\.py\(.*\)", name): ".py(" and a ')' somewhere after it. */
bool rp_device_is_source_name(const char *name)
{
	const char *p = strstr(name, ".py(");

	return p != NULL && strchr(p + 4, ')') != NULL;
}

bool rp_device_is_device_category(const char *cat)
{
	return strcmp(cat, "kernel") == 0 || strcmp(cat, "gpu_memcpy") == 0 ||
	       strcmp(cat, "gpu_memset") == 0;
}

static uint8_t classify(const struct rp_name_entry *ne)
{
	uint8_t c = CLS_DONE;

	if (rp_device_is_launch_name(ne->name))
		c |= CLS_LAUNCH;
	if (rp_device_is_kernel_name(ne->name))
		c |= CLS_KERNEL;
	if (rp_device_is_source_name(ne->name))
		c |= CLS_SOURCE;
	if (rp_device_is_device_category(ne->category))
		c |= CLS_DEVCAT;
	return c;
}

/* Names added to the table since the last span: classified once, off the hot path. */
__attribute__((noinline, cold)) static void classify_new(struct rp_device *d,
							  const struct rp_names *names)
{
	uint32_t n = names->n < d->max_names ? names->n : d->max_names;

	for (; d->head.n_cls < n; d->head.n_cls++) {
		d->head.cls[d->head.n_cls] = classify(&names->e[d->head.n_cls]);
		d->any_source |= (d->head.cls[d->head.n_cls] & CLS_SOURCE) != 0;
	}
}

/* The class of name @id; ids past the table (or the cap) have none. */
static inline uint8_t name_class(const struct rp_device *d, uint32_t id)
{
	return id < d->head.n_cls ? d->head.cls[id] : CLS_DONE;
}

int rp_device_open(const struct rp_device_cfg *cfg, uint32_t max_tracks, uint32_t max_names,
		   struct rp_device **out)
{
	struct rp_device *d = calloc(1, sizeof(*d));

	if (d == NULL)
		return -ENOMEM;
	if (cfg != NULL)
		d->cfg = *cfg;
	else
		rp_device_cfg_default(&d->cfg);
	if (d->cfg.max_span_links == 0 || (d->cfg.max_span_links & (d->cfg.max_span_links - 1)))
		d->cfg.max_span_links = 4096;
	d->max_tracks = max_tracks;
	d->max_names = max_names;
	d->head.armed = d->cfg.always;
	/* calloc: pages are touched only as records arrive. */
	d->head.cls = calloc(max_names ? max_names : 1, 1);
	d->spans = calloc(d->cfg.max_spans ? d->cfg.max_spans : 1, sizeof(*d->spans));
	d->launches = calloc(d->cfg.max_events ? d->cfg.max_events : 1, sizeof(*d->launches));
	d->kernels = calloc(d->cfg.max_events ? d->cfg.max_events : 1, sizeof(*d->kernels));
	d->plinks = calloc((size_t)max_tracks * d->cfg.links_per_track + 1, sizeof(*d->plinks));
	d->slinks = calloc(d->cfg.max_span_links, sizeof(*d->slinks));
	if (!d->head.cls || !d->spans || !d->launches || !d->kernels || !d->plinks || !d->slinks) {
		rp_device_close(d);
		return -ENOMEM;
	}
	*out = d;
	return 0;
}

void rp_device_close(struct rp_device *d)
{
	if (d == NULL)
		return;
	free(d->head.cls);
	free(d->spans);
	free(d->launches);
	free(d->kernels);
	free(d->plinks);
	free(d->slinks);
	free(d);
}

static struct slink *slot_of(const struct rp_device *d, uint32_t src, uint64_t span)
{
	uint64_t h = (span ^ ((uint64_t)src << 48)) * 0x9e3779b97f4a7c15ull;

	return &d->slinks[(h >> 32) & (d->cfg.max_span_links - 1)];
}

/* Device work seen (or kept from the start): keep spans from now on. No name is quiet
 * any more (RP_DEVICE_CLS_QUIET: the span sinks test that bit alone), once: armed
 * never clears. */
static void arm(struct rp_device *d)
{
	if (d->head.armed)
		return;
	d->head.armed = true;
	for (uint32_t i = 0; i < d->head.n_cls; i++)
		d->head.cls[i] &= (uint8_t)~RP_DEVICE_CLS_QUIET;
}

void rp_device_arm(struct rp_device *d)
{
	arm(d);
}

void rp_device_link(struct rp_device *d, uint32_t src, uint32_t tr, uint32_t depth,
		    const struct rp_frame *f, uint64_t span, uint8_t side, uint64_t correlation)
{
	arm(d);
	if (span != 0) {
		struct slink *s = slot_of(d, src, span);
		if (s->used)
			d->links_dropped++; /* a collision: the older link is lost */
		*s = (struct slink){ span, correlation, src, side, 1 };
		return;
	}
	if (tr >= d->max_tracks || f == NULL) {
		d->links_orphan++;
		return;
	}
	struct plink *p = &d->plinks[(size_t)tr * d->cfg.links_per_track], *free_slot = NULL;
	for (uint32_t i = 0; i < d->cfg.links_per_track; i++) {
		if (p[i].used && p[i].depth == depth && p[i].start == f->start &&
		    p[i].name == f->name)
			return; /* that span is linked already (the first link counts) */
		if (p[i].used && p[i].depth >= depth) { /* a frame that is gone */
			p[i].used = 0;
			d->head.plinks_live--;
			d->links_orphan++;
		}
		if (!p[i].used && free_slot == NULL)
			free_slot = &p[i];
	}
	if (free_slot == NULL) {
		d->links_dropped++;
		return;
	}
	*free_slot = (struct plink){ f->start, correlation, depth, f->name, side, 1 };
	d->head.plinks_live++;
}

void rp_device_track_end_slow(struct rp_device *d, uint32_t tr, uint32_t depth)
{
	struct plink *p;

	if (tr >= d->max_tracks)
		return;
	p = &d->plinks[(size_t)tr * d->cfg.links_per_track];
	for (uint32_t i = 0; i < d->cfg.links_per_track; i++)
		if (p[i].used && p[i].depth >= depth) {
			p[i].used = 0;
			d->head.plinks_live--;
			d->links_orphan++;
		}
}

static void add_qev(struct rp_device *d, bool kernel, uint32_t src, uint64_t start,
		    uint64_t end, bool has_corr, uint64_t corr)
{
	struct qev *q;

	if (d->n_launches + d->n_kernels >= d->cfg.max_events) {
		d->events_dropped++;
		return;
	}
	q = kernel ? &d->kernels[d->n_kernels] : &d->launches[d->n_launches];
	*q = (struct qev){ start, end, has_corr ? corr : 0,
			   kernel ? d->n_kernels++ : d->n_launches++, src, has_corr };
}

/* rp_device_span() once the analysis is armed (or arming on this span): out of line,
 * so that the unarmed case, every span of a run without device work, does not pay
 * for this body's register saves. */
__attribute__((noinline)) static void span_armed(struct rp_device *d, const struct rp_names *names,
						 const struct rp_track *k, uint32_t tr,
						 const struct rp_span_info *sp)
{
	bool async = k->kind == RP_TRACK_ASYNC;
	uint32_t src = k->src, depth = sp->depth;
	const struct rp_frame *stack = k->f, *f = &stack[depth];
	uint64_t span = async ? sp->span : 0, end = sp->end, self_ns = sp->self_ns;
	bool linked = false, device;
	uint8_t side = 0, c;
	uint64_t corr = 0;

	if (span != 0) {
		struct slink *s = slot_of(d, src, span);
		if (s->used && s->span == span && s->src == src) {
			linked = true;
			side = s->side;
			corr = s->corr;
			s->used = 0;
		}
	} else if (!async && tr < d->max_tracks && d->head.plinks_live != 0) {
		struct plink *p = &d->plinks[(size_t)tr * d->cfg.links_per_track];
		for (uint32_t i = 0; i < d->cfg.links_per_track; i++)
			if (p[i].used && p[i].depth == depth && p[i].start == f->start &&
			    p[i].name == f->name) {
				linked = true;
				side = p[i].side;
				corr = p[i].corr;
				p[i].used = 0;
				d->head.plinks_live--;
				break;
			}
	}
	if (names->n > d->head.n_cls && d->head.n_cls < d->max_names)
		classify_new(d, names);
	c = name_class(d, f->name);
	device = (c & CLS_DEVCAT) || (linked && side == RP_LINK_DEVICE);
	if (device && (c & CLS_KERNEL))
		add_qev(d, true, src, f->start, end, linked, corr);
	else if (device)
		d->other_device++;
	else if (span != 0)
		return; /* async spans other than device work are not in torch's tree */
	if (d->n_spans < d->cfg.max_spans) {
		struct span_rec *s = &d->spans[d->n_spans];
		*s = (struct span_rec){ f->start, end, corr, (int64_t)self_ns, f->name, RP_NONE,
					d->n_spans++, src, linked ? side : 0 };
		for (uint32_t i = span || !d->any_source ? 0 : depth + 1; i-- > 0;)
			if (name_class(d, stack[i].name) & CLS_SOURCE) {
				s->source = stack[i].name;
				break;
			}
	} else {
		d->spans_dropped++;
	}
	if (!device && (c & CLS_LAUNCH))
		add_qev(d, false, src, f->start, end, linked, corr);
}

void rp_device_span_slow(struct rp_device *d, const struct rp_names *names,
			 const struct rp_track *k, uint32_t tr, const struct rp_span_info *sp)
{
	if (!d->head.armed) { /* no device work yet: keep nothing (live, no GPU) */
		if (names->n > d->head.n_cls && d->head.n_cls < d->max_names)
			classify_new(d, names);
		if (!(name_class(d, k->f[sp->depth].name) & CLS_DEVCAT))
			return;
		arm(d);
	}
	span_armed(d, names, k, tr, sp);
}

/* ---- the analysis ------------------------------------------------------------- */

struct point {
	uint64_t start, end;
	uint32_t depth;
};

struct ival {
	uint64_t a, b;
};

struct cand {
	uint32_t span;
	uint32_t phase;
	double score;
};

static int cmp_qev(const void *x, const void *y)
{
	const struct qev *a = x, *b = y;

	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* Spans by start, longer first (parents first), then arrival: the last one at the
 * latest start is the innermost, as in torch's event order. */
static int cmp_span(const void *x, const void *y)
{
	const struct span_rec *a = x, *b = y;

	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	if (a->end != b->end)
		return a->end > b->end ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

struct kkey {			/* a kernel by (source, correlation, index) */
	uint64_t corr;
	uint32_t src, idx;
};

static int cmp_kkey(const void *x, const void *y)
{
	const struct kkey *a = x, *b = y;

	if (a->src != b->src)
		return a->src < b->src ? -1 : 1;
	if (a->corr != b->corr)
		return a->corr < b->corr ? -1 : 1;
	return a->idx < b->idx ? -1 : a->idx > b->idx;
}

static int cmp_ival(const void *x, const void *y)
{
	const struct ival *a = x, *b = y;

	return a->a < b->a ? -1 : a->a > b->a;
}

static int cmp_cand(const void *x, const void *y)
{
	const struct cand *a = x, *b = y;

	if (a->score != b->score)
		return a->score > b->score ? -1 : 1;
	return a->span < b->span ? -1 : a->span > b->span;
}

/* The same orders with the comparison inlined (sort.h): the report sorts every span,
 * launch and kernel kept, ~n log n calls through qsort's pointer otherwise. Stable
 * like glibc's qsort, and every order but cmp_ival's is total anyway; qsort() only
 * when sort.h gets no buffer. */
#define span_before(x, y) (cmp_span((x), (y)) < 0)
#define qev_before(x, y)  (cmp_qev((x), (y)) < 0)
#define kkey_before(x, y) (cmp_kkey((x), (y)) < 0)
#define ival_before(x, y) (cmp_ival((x), (y)) < 0)
#define cand_before(x, y) (cmp_cand((x), (y)) < 0)
RP_SORT_DEFINE(sort_spans, struct span_rec, span_before)
RP_SORT_DEFINE(sort_qevs, struct qev, qev_before)
RP_SORT_DEFINE(sort_kkeys, struct kkey, kkey_before)
RP_SORT_DEFINE(sort_ivals, struct ival, ival_before)
RP_SORT_DEFINE(sort_cands, struct cand, cand_before)
/* launches and kernels arrive mostly in start order, and so do correlation ids */
RP_SORT_RUNS_DEFINE(sort_qevs_runs, sort_qevs, struct qev, qev_before)
RP_SORT_RUNS_DEFINE(sort_kkeys_runs, sort_kkeys, struct kkey, kkey_before)

/*
 * Spans and kernels arrive in end order (a thread's spans after their children,
 * tracks interleaved): by start, runs of ~2 on gen_chrome, so the merge sort paid
 * its full n log n compares and moves of 40-56 byte records. Their orders start with
 * the start time: an LSD radix sort of (start - min) << ib | index, on the start's
 * bits only (the index bits are in order already and each pass is stable), 11 bits
 * a pass, gives them by (start, arrival); then each run of equal starts is sorted by
 * the full comparison (a span's ties: longer first, then arrival). Both orders are
 * total, so this is the comparison sort's array. false when the two do not fit in 64
 * bits, when the records are few, or without memory: the caller sorts by comparison.
 */
#define RADIX_BITS 11
#define RADIX_MIN  256

static unsigned bit_width(uint64_t x)
{
	return x ? 64u - (unsigned)__builtin_clzll(x) : 0;
}

/* @v[0..n) by bits [lo, hi), stably; @tmp holds n. Returns the sorted array (@v or
 * @tmp). @count holds 1 << RADIX_BITS. */
static uint64_t *radix_sort(uint64_t *v, uint64_t *tmp, uint32_t n, unsigned lo, unsigned hi,
			    uint32_t *count)
{
	for (unsigned sh = lo; sh < hi; sh += RADIX_BITS) {
		uint64_t mask = (1u << RADIX_BITS) - 1, *t;
		uint32_t sum = 0;

		memset(count, 0, sizeof(*count) << RADIX_BITS);
		for (uint32_t i = 0; i < n; i++)
			count[(v[i] >> sh) & mask]++;
		for (uint32_t b = 0; b <= mask; b++) {
			uint32_t c = count[b];
			count[b] = sum;
			sum += c;
		}
		for (uint32_t i = 0; i < n; i++)
			tmp[count[(v[i] >> sh) & mask]++] = v[i];
		t = v, v = tmp, tmp = t;
	}
	return v;
}

#define RP_BY_START_DEFINE(name, type, sort, cmp)                                        \
	static bool name(type *dst, const type *src, uint32_t n)                            \
	{                                                                                   \
		uint64_t min = UINT64_MAX, max = 0, *v, *o, imask;                          \
		uint32_t *count;                                                            \
		unsigned ib = bit_width(n - 1), rb;                                         \
		uint32_t descents = 0;                                                      \
                                                                                            \
		if (n < RADIX_MIN)                                                          \
			return false;                                                       \
		for (uint32_t i = 0; i < n; i++) {                                          \
			min = src[i].start < min ? src[i].start : min;                      \
			max = src[i].start > max ? src[i].start : max;                      \
			descents += i > 0 && cmp(&src[i], &src[i - 1]) < 0;                \
		}                                                                           \
		rb = bit_width(max - min);                                                  \
		if (ib + rb > 64 || descents == 0) /* in order: the caller's copy */       \
			return false;                                                       \
		v = malloc((size_t)n * 2 * sizeof(*v));                                     \
		count = malloc(sizeof(*count) << RADIX_BITS);                               \
		if (v == NULL || count == NULL) {                                           \
			free(v), free(count);                                               \
			return false;                                                       \
		}                                                                           \
		for (uint32_t i = 0; i < n; i++)                                            \
			v[i] = (src[i].start - min) << ib | i;                              \
		o = radix_sort(v, v + n, n, ib, ib + rb, count);                            \
		imask = (1ull << ib) - 1;                                                   \
		for (uint32_t i = 0; i < n; i++)                                            \
			dst[i] = src[o[i] & imask];                                         \
		free(v), free(count);                                                       \
		for (uint32_t i = 0, j; i < n; i = j) { /* equal starts: the rest */        \
			for (j = i + 1; j < n && dst[j].start == dst[i].start; j++)         \
				;                                                           \
			if (j - i > 1 && !sort(dst + i, j - i))                             \
				qsort(dst + i, j - i, sizeof(*dst), cmp);                   \
		}                                                                           \
		return true;                                                                \
	}

RP_BY_START_DEFINE(spans_by_start, struct span_rec, sort_spans, cmp_span)
RP_BY_START_DEFINE(qevs_by_start, struct qev, sort_qevs, cmp_qev)

/* The first of the sorted kk[0..n) not before @want (cmp_kkey), galloping from
 * @hint (the last answer): the binary search's answer, in a few steps when the
 * queries come nearly in key order (correlation ids grow with time). */
static uint32_t kkey_lower_bound(const struct kkey *kk, uint32_t n, const struct kkey *want,
				 uint32_t hint)
{
	uint64_t lo = 0, hi = hint < n ? hint : n, probe = 1;

	if (hi < n && cmp_kkey(&kk[hi], want) < 0) { /* up: the answer is past hint */
		for (lo = hi;; probe *= 2) {
			hi = lo + probe;
			if (hi >= n) {
				hi = n;
				break;
			}
			if (cmp_kkey(&kk[hi], want) >= 0)
				break;
			lo = hi;
		}
		lo++;
	} else { /* down: the answer is at or before hint */
		while (hi > 0) {
			uint64_t c = hi > probe ? hi - probe : 0;
			if (cmp_kkey(&kk[c], want) < 0) {
				lo = c + 1;
				break;
			}
			hi = c;
			probe *= 2;
		}
	}
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (cmp_kkey(&kk[mid], want) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (uint32_t)lo;
}

/* compute_queue_depth's kernel_mapping: for each launch (by start) the first kernel
 * at or after the last mapped one with its correlation id; -1 if none. */
static int map_launches(const struct qev *L, uint32_t nl, const struct qev *K, uint32_t nk,
			int64_t *map)
{
	struct kkey *kk = NULL;
	uint32_t n = 0;
	int64_t last = 0;

	if (nk > 0 && (kk = malloc((size_t)nk * sizeof(*kk))) == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < nk; i++)
		if (K[i].has_corr)
			kk[n++] = (struct kkey){ K[i].corr, K[i].src, i };
	if (!sort_kkeys_runs(kk, n))
		qsort(kk, n, sizeof(*kk), cmp_kkey);
	for (uint32_t l = 0, lo = 0; l < nl; l++) {
		struct kkey want = { L[l].corr, L[l].src, (uint32_t)last };

		map[l] = -1;
		if (!L[l].has_corr)
			continue;
		lo = kkey_lower_bound(kk, n, &want, lo); /* the first key >= (src, corr, last) */
		if (lo < n && kk[lo].src == want.src && kk[lo].corr == want.corr) {
			map[l] = kk[lo].idx;
			last = kk[lo].idx;
		}
	}
	free(kk);
	return 0;
}

/* The first of @n intervals, sorted by start, with b > @s. The queries come by
 * non-decreasing s (spans by start): while the intervals' ends do not decrease either,
 * the answer only moves forward, and a cursor finds the binary search's answer in
 * O(1) amortized; otherwise (or a query out of order) the binary search. */
struct ends {
	const struct ival *iv;
	uint32_t n, at;
	uint64_t last;	/* the last query */
	bool sweep;
};

static void ends_init(struct ends *c, const struct ival *iv, uint32_t n)
{
	*c = (struct ends){ iv, n, 0, 0, true };
	for (uint32_t i = 1; i < n && c->sweep; i++)
		c->sweep = iv[i].b >= iv[i - 1].b;
}

static uint32_t first_end_after(struct ends *c, uint64_t s)
{
	uint32_t lo = 0, hi = c->n;

	if (c->sweep && s >= c->last) {
		c->last = s;
		while (c->at < c->n && c->iv[c->at].b <= s)
			c->at++;
		return c->at;
	}
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (c->iv[mid].b > s)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

/* The first interval at or after @first with a >= @e (starts sorted): galloping from
 * @first, the binary search's answer; most spans end before the next interval. */
static uint32_t first_start_from(const struct ival *iv, uint32_t first, uint32_t n, uint64_t e)
{
	uint64_t lo = first, hi, probe = 1;

	if (lo >= n || iv[lo].a >= e)
		return (uint32_t)lo;
	for (;; probe *= 2) { /* iv[lo].a < e: the answer is in (lo, hi] */
		hi = lo + probe;
		if (hi >= n) {
			hi = n;
			break;
		}
		if (iv[hi].a >= e)
			break;
		lo = hi;
	}
	for (lo++; lo < hi;) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (iv[mid].a >= e)
			hi = mid;
		else
			lo = mid + 1;
	}
	return (uint32_t)lo;
}

/* Overlap of [s, e) with sorted disjoint intervals, through prefix sums. */
static uint64_t overlap(struct ends *c, const uint64_t *pre, uint64_t s, uint64_t e)
{
	const struct ival *iv = c->iv;
	uint32_t first, last, lo;
	uint64_t sum;

	if (s >= e)
		return 0;
	first = first_end_after(c, s);
	lo = first_start_from(iv, first, c->n, e);
	if (lo == first)
		return 0;
	last = lo - 1;
	sum = pre[last + 1] - pre[first];
	if (s > iv[first].a)
		sum -= s - iv[first].a;
	if (iv[last].b > e)
		sum -= iv[last].b - e;
	return sum;
}

/* Index of the first phase [a, b) with max(s, a) < min(e, b), or RP_NONE. */
static uint32_t phase_of(struct ends *c, uint64_t s, uint64_t e)
{
	const struct ival *ph = c->iv;
	uint32_t lo;

	if (s >= e)
		return RP_NONE;
	for (lo = first_end_after(c, s); lo < c->n && ph[lo].a < e; lo++)
		if ((s > ph[lo].a ? s : ph[lo].a) < (e < ph[lo].b ? e : ph[lo].b))
			return lo;
	return RP_NONE;
}

/* rank_events' falling phases over the points reversed (see device.h). */
static int falling_phases(const struct point *P, uint32_t np, struct ival **out, uint32_t *n_out)
{
	uint32_t *rq = malloc(((size_t)np + 1) * sizeof(*rq)); /* reversed depths */
	uint32_t *nextzero = malloc(((size_t)np + 1) * sizeof(*nextzero));
	uint32_t *qual = malloc(((size_t)np + 1) * sizeof(*qual));
	uint32_t *peak = malloc(((size_t)np + 1) * sizeof(*peak));
	struct ival *ph = malloc(((size_t)np + 1) * sizeof(*ph));
	uint32_t n = 0;

	if (!rq || !nextzero || !qual || !peak || !ph) {
		free(rq), free(nextzero), free(qual), free(peak), free(ph);
		return -ENOMEM;
	}
	for (uint32_t r = 0; r < np; r++)
		rq[r] = P[np - 1 - r].depth;
	nextzero[np] = np;
	for (uint32_t r = np; r-- > 0;)
		nextzero[r] = rq[r] == 0 ? r : nextzero[r + 1];
	/* peak[s]: first argmax of the run starting at s (up to the next zero). */
	for (uint32_t s = 0; s < np; s = nextzero[s] + 1) {
		if (rq[s] == 0) {
			peak[s] = RP_NONE;
			nextzero[s] = s; /* keep stepping one by one through zeros */
			continue;
		}
		uint32_t best = s;
		for (uint32_t r = s; r < nextzero[s]; r++)
			if (rq[r] > rq[best])
				best = r;
		peak[s] = best;
		if (nextzero[s] == np)
			break;
	}
	/* qual[j]: the first run start >= j right after a zero whose peak is >= 4. */
	qual[np] = np;
	for (uint32_t j = np; j-- > 0;) {
		bool start = j > 0 && rq[j] > 0 && rq[j - 1] == 0 && rq[peak[j]] >= 4;
		qual[j] = start ? j : qual[j + 1];
	}
	for (uint32_t i = 0; i < np;) {
		if (rq[i] > 0) {
			i++;
			continue;
		}
		uint32_t q = qual[i + 1 <= np ? i + 1 : np];
		if (q >= np) {
			i++;
			continue;
		}
		uint32_t z = nextzero[q], pk = peak[q];
		ph[n++] = (struct ival){ P[np - 1 - pk].start, P[np - 1 - i].start };
		i = (z < np ? z : i) + 1;
	}
	free(rq), free(nextzero), free(qual), free(peak);
	if (n > 0)
		qsort(ph, n, sizeof(*ph), cmp_ival);
	*out = ph;
	*n_out = n;
	return 0;
}

static char *dup_name(const struct rp_names *names, uint32_t id)
{
	return strdup(id < names->n ? names->e[id].name : "");
}

/* "path/file.py(42): fn" -> file "path/file.py", line 42. */
static int source_parts(const char *s, struct rp_report_dev_span *o)
{
	const char *p = strstr(s, ".py(");

	o->source = strdup(s);
	if (p == NULL) {
		o->source_file = strdup("");
		return o->source && o->source_file ? 0 : -ENOMEM;
	}
	o->source_file = strndup(s, (size_t)(p + 3 - s));
	o->source_line = (uint32_t)strtoul(p + 4, NULL, 10);
	return o->source && o->source_file ? 0 : -ENOMEM;
}

struct work {
	struct span_rec *S;
	struct qev *L, *K;
	int64_t *map;
	struct point *P;
	uint32_t *sqd;
	struct ival *idle, *ph;
	uint64_t *pre;
	struct cand *cand;
};

static void work_free(struct work *w)
{
	free(w->S), free(w->L), free(w->K), free(w->map), free(w->P), free(w->sqd);
	free(w->idle), free(w->ph), free(w->pre), free(w->cand);
}

/* torch's tree makes device work a child of the runtime call that launched it (the
 * flow start, or the linked activity: the span on the launch side of its link): the
 * launch's self time loses the device work's duration (it may go negative), and the
 * device work takes the launch's source location. */
static int device_children(struct work *w, uint32_t ns)
{
	struct kkey *kk = malloc(((size_t)ns + 1) * sizeof(*kk));
	uint32_t n = 0;

	if (kk == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < ns; i++)
		if (w->S[i].side == RP_LINK_LAUNCH)
			kk[n++] = (struct kkey){ w->S[i].corr, w->S[i].src, i };
	if (!sort_kkeys_runs(kk, n))
		qsort(kk, n, sizeof(*kk), cmp_kkey);
	for (uint32_t i = 0, lo = 0; i < ns; i++) {
		struct kkey want = { w->S[i].corr, w->S[i].src, 0 };

		if (w->S[i].side != RP_LINK_DEVICE)
			continue;
		lo = kkey_lower_bound(kk, n, &want, lo);
		if (lo < n && kk[lo].src == want.src && kk[lo].corr == want.corr) {
			struct span_rec *l = &w->S[kk[lo].idx];
			l->self -= (int64_t)(w->S[i].end - w->S[i].start);
			if (w->S[i].source == RP_NONE)
				w->S[i].source = l->source;
		}
	}
	free(kk);
	return 0;
}

/* compute_queue_depth: points in start order, and each span's depth at its start. */
static void queue_depth(struct work *w, uint32_t nl, uint32_t nk, uint32_t ns)
{
	uint32_t il = 0, ik = 0, is = 0, np = 0, cur = 0;
	int64_t spawned = -1;

	while (il < nl || ik < nk || is < ns) {
		uint64_t tl = il < nl ? w->L[il].start : UINT64_MAX;
		uint64_t tk = ik < nk ? w->K[ik].start : UINT64_MAX;
		uint64_t ts = is < ns ? w->S[is].start : UINT64_MAX;
		int which = (il < nl && tl <= tk && tl <= ts) ? 0
			    : (ik < nk && tk <= ts)	   ? 1
						     : 2;
		uint64_t t = which == 0 ? tl : which == 1 ? tk : ts;
		int64_t qd;

		if (which == 0 && w->map[il] >= 0)
			spawned = w->map[il];
		while (cur < nk && w->K[cur].start <= t)
			cur++;
		qd = spawned - (int64_t)cur + 1;
		if (qd < 0)
			qd = 0;
		if (which == 0) {
			w->P[np++] = (struct point){ w->L[il].start, w->L[il].end, (uint32_t)qd };
			il++;
		} else if (which == 1) {
			w->P[np++] = (struct point){ w->K[ik].start, w->K[ik].end, (uint32_t)qd };
			ik++;
		} else {
			w->sqd[is++] = (uint32_t)qd;
		}
	}
}

/* compute_idle_time's intervals, those of positive length, sorted. */
static uint32_t idle_intervals(struct work *w, uint32_t np, uint32_t ns)
{
	uint32_t n = 0;
	bool idle = false;
	uint64_t idle_start = 0;

	if (np == 0 || ns == 0)
		return 0;
	if (w->S[0].start < w->P[0].start)
		w->idle[n++] = (struct ival){ w->S[0].start, w->P[0].start };
	if (w->P[np - 1].end < w->S[ns - 1].end)
		w->idle[n++] = (struct ival){ w->P[np - 1].end, w->S[ns - 1].end };
	for (uint32_t i = 0; i < np; i++) {
		if (w->P[i].depth == 0 && !idle) {
			idle_start = w->P[i].end;
			idle = true;
		}
		if (w->P[i].depth > 0 && idle) {
			if (idle_start < w->P[i].start)
				w->idle[n++] = (struct ival){ idle_start, w->P[i].start };
			idle = false;
		}
	}
	if (!sort_ivals(w->idle, n))
		qsort(w->idle, n, sizeof(*w->idle), cmp_ival);
	return n;
}

static void mean_sd(const double *x, uint32_t n, double *mean, double *sd)
{
	double m = 0, v = 0;

	for (uint32_t i = 0; i < n; i++)
		m += x[i];
	m /= n;
	for (uint32_t i = 0; i < n; i++)
		v += (x[i] - m) * (x[i] - m);
	*mean = m;
	*sd = n > 1 ? sqrt(v / (n - 1)) : 0;
}

/* The first @keep candidates in cmp_cand's order, in place (the report shows no
 * more): for a few (the default is 10), one pass with an insertion into the kept
 * ones instead of sorting them all. cmp_cand is a total order (scores are finite:
 * both deviations are > 0), so these are the first @keep of the sorted array. */
static void top_cands(struct cand *c, uint32_t nc, uint32_t keep)
{
	uint32_t m = 0;

	if (keep > 64) { /* O(nc x keep) no more */
		if (!sort_cands(c, nc))
			qsort(c, nc, sizeof(*c), cmp_cand);
		return;
	}

	for (uint32_t i = 0; i < nc; i++) {
		struct cand x = c[i];
		uint32_t j;

		if (m == keep && (keep == 0 || cmp_cand(&x, &c[m - 1]) >= 0))
			continue;
		j = m < keep ? m++ : m - 1; /* full: the last kept one drops out */
		for (; j > 0 && cmp_cand(&x, &c[j - 1]) < 0; j--)
			c[j] = c[j - 1];
		c[j] = x;
	}
}

/* rank_events' heuristic over the candidates: z(idle fraction) + 0.6 z(self). */
static int score(struct work *w, uint32_t nc, const double *frac, uint32_t keep)
{
	double *a = malloc(((size_t)nc + 1) * sizeof(*a)), *b = malloc(((size_t)nc + 1) * sizeof(*b));
	double ma, sa, mb, sb;

	if (nc == 0) {
		free(a), free(b);
		return 0;
	}
	if (!a || !b) {
		free(a), free(b);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < nc; i++) {
		a[i] = frac[w->cand[i].span];
		b[i] = (double)w->S[w->cand[i].span].self;
	}
	mean_sd(a, nc, &ma, &sa);
	mean_sd(b, nc, &mb, &sb);
	for (uint32_t i = 0; i < nc; i++)
		w->cand[i].score = sa > 0 && sb > 0 ? (a[i] - ma) / sa + 0.6 * (b[i] - mb) / sb : 0;
	free(a), free(b);
	top_cands(w->cand, nc, keep);
	return 0;
}

static int report_out(struct work *w, const struct rp_device *d, const struct rp_names *names,
		      uint32_t np, uint32_t ni, uint32_t nph, uint32_t nc, const double *frac,
		      const uint64_t *idle_ns, struct rp_report_device *o)
{
	const struct rp_device_cfg *c = &d->cfg;
	uint32_t prev = UINT32_MAX;

	o->points = calloc(c->max_points + 1, sizeof(*o->points));
	o->idle = calloc(c->max_idle + 1, sizeof(*o->idle));
	o->phases = calloc(c->max_phases + 1, sizeof(*o->phases));
	o->ranked = calloc(c->max_ranked + 1, sizeof(*o->ranked));
	if (!o->points || !o->idle || !o->phases || !o->ranked)
		return -ENOMEM;
	for (uint32_t i = 0; i < np; i++) {
		if (w->P[i].depth > o->max_queue_depth)
			o->max_queue_depth = w->P[i].depth;
		if (w->P[i].depth == prev)
			continue;
		prev = w->P[i].depth;
		o->n_points_total++;
		if (o->n_points < c->max_points)
			o->points[o->n_points++] = (struct rp_report_dev_point){ w->P[i].start,
										 prev };
	}
	o->n_idle_total = ni;
	for (uint32_t i = 0; i < ni; i++) {
		o->idle_ns += w->idle[i].b - w->idle[i].a;
		if (o->n_idle < c->max_idle)
			o->idle[o->n_idle++] = (struct rp_report_dev_interval){ w->idle[i].a,
										w->idle[i].b };
	}
	o->n_phases_total = nph;
	for (uint32_t i = 0; i < nph && o->n_phases < c->max_phases; i++)
		o->phases[o->n_phases++] = (struct rp_report_dev_interval){ w->ph[i].a, w->ph[i].b };
	o->candidates = nc;
	for (uint32_t i = 0; i < nc && o->n_ranked < c->max_ranked; i++) {
		const struct span_rec *s = &w->S[w->cand[i].span];
		struct rp_report_dev_span *r = &o->ranked[o->n_ranked++];

		*r = (struct rp_report_dev_span){
			.queue_depth = w->sqd[w->cand[i].span], .phase = w->cand[i].phase,
			.start_ns = s->start, .dur_ns = s->end - s->start, .self_ns = s->self,
			.idle_ns = idle_ns[w->cand[i].span],
			.idle_fraction = frac[w->cand[i].span], .score = w->cand[i].score,
		};
		r->name = dup_name(names, s->name);
		if (r->name == NULL ||
		    source_parts(s->source == RP_NONE ? "" : names->e[s->source].name, r))
			return -ENOMEM;
		if (s->source == RP_NONE)
			r->source_line = 0;
	}
	return 0;
}

static uint64_t busy(const struct qev *K, uint32_t nk)
{
	uint64_t sum = 0, a = 0, b = 0;
	bool open = false;

	for (uint32_t i = 0; i < nk; i++) {
		if (open && K[i].start <= b) {
			if (K[i].end > b)
				b = K[i].end;
			continue;
		}
		if (open)
			sum += b - a;
		a = K[i].start, b = K[i].end, open = true;
	}
	return open ? sum + (b - a) : sum;
}

size_t rp_device_memory_bound(const struct rp_device_cfg *cfg, uint32_t max_tracks,
			      uint32_t max_names)
{
	struct rp_device_cfg c;
	size_t ns, ne, per_span, per_event, b;

	if (cfg != NULL)
		c = *cfg;
	else
		rp_device_cfg_default(&c);
	if (c.max_span_links == 0 || (c.max_span_links & (c.max_span_links - 1)))
		c.max_span_links = 4096;
	ns = (size_t)c.max_spans + 1;
	ne = (size_t)c.max_events + 1;
	/* kept: the device itself, classes, spans, launches and kernels, links */
	b = sizeof(struct rp_device) + max_names + ns * sizeof(struct span_rec) +
	    2 * ne * sizeof(struct qev) +
	    ((size_t)max_tracks * c.links_per_track + 1) * sizeof(struct plink) +
	    (size_t)c.max_span_links * sizeof(struct slink);
	/* rp_device_report()'s scratch: a copy of every record and per-record arrays
	 * (every launch and kernel gives at most one queue-depth point) */
	per_span = 2 * sizeof(struct span_rec) + sizeof(struct cand) + sizeof(struct kkey) + 4 +
		   8 + 8;
	per_event = 2 * sizeof(struct qev) + 8 + 2 * (sizeof(struct point) + 8) +
		    2 * 2 * sizeof(struct ival) + 2 * 8 + 4 * 4 + sizeof(struct kkey);
	b += ns * per_span + ne * per_event;
	/* and what it hands to the report */
	b += ((size_t)c.max_points + 1) * sizeof(struct rp_report_dev_point) +
	     ((size_t)c.max_idle + 1 + c.max_phases + 1) * sizeof(struct rp_report_dev_interval) +
	     ((size_t)c.max_ranked + 1) * (sizeof(struct rp_report_dev_span) + 3 * 4096);
	return b + 64 * 16 + 16 * 4096; /* malloc: chunk headers, page rounding */
}

int rp_device_report(const struct rp_device *d, const struct rp_names *names,
		     struct rp_report_device *o)
{
	uint32_t nl = d->n_launches, nk = d->n_kernels, ns = d->n_spans, np = nl + nk;
	uint32_t ni, nph = 0, nc = 0;
	struct work w = { 0 };
	struct ends c;
	double *frac = NULL;
	uint64_t *idle_ns = NULL;
	int err = -ENOMEM;

	memset(o, 0, sizeof(*o));
	o->launches = nl;
	o->kernels = nk;
	o->other_device = d->other_device;
	o->spans = ns;
	o->spans_dropped = d->spans_dropped;
	o->events_dropped = d->events_dropped;
	o->links_dropped = d->links_dropped;
	o->links_orphan = d->links_orphan;
	if (np == 0)
		return 0; /* no queue: no idle intervals, no phases, nothing ranked */
	w.S = malloc(((size_t)ns + 1) * sizeof(*w.S));
	w.L = malloc(((size_t)nl + 1) * sizeof(*w.L));
	w.K = malloc(((size_t)nk + 1) * sizeof(*w.K));
	w.map = malloc(((size_t)nl + 1) * sizeof(*w.map));
	w.P = malloc(((size_t)np + 1) * sizeof(*w.P));
	w.sqd = malloc(((size_t)ns + 1) * sizeof(*w.sqd));
	w.idle = malloc(((size_t)np + 3) * sizeof(*w.idle));
	w.pre = malloc(((size_t)np + 4) * sizeof(*w.pre));
	w.cand = malloc(((size_t)ns + 1) * sizeof(*w.cand));
	frac = malloc(((size_t)ns + 1) * sizeof(*frac));
	idle_ns = malloc(((size_t)ns + 1) * sizeof(*idle_ns));
	if (!w.S || !w.L || !w.K || !w.map || !w.P || !w.sqd || !w.idle || !w.pre || !w.cand ||
	    !frac || !idle_ns)
		goto out;
	if (!spans_by_start(w.S, d->spans, ns)) {
		if (ns)
			memcpy(w.S, d->spans, (size_t)ns * sizeof(*w.S));
		if (!sort_spans(w.S, ns))
			qsort(w.S, ns, sizeof(*w.S), cmp_span);
	}
	if (nl)
		memcpy(w.L, d->launches, (size_t)nl * sizeof(*w.L));
	if (!sort_qevs_runs(w.L, nl))
		qsort(w.L, nl, sizeof(*w.L), cmp_qev);
	if (!qevs_by_start(w.K, d->kernels, nk)) {
		if (nk)
			memcpy(w.K, d->kernels, (size_t)nk * sizeof(*w.K));
		if (!sort_qevs_runs(w.K, nk))
			qsort(w.K, nk, sizeof(*w.K), cmp_qev);
	}
	if ((err = map_launches(w.L, nl, w.K, nk, w.map)) != 0)
		goto out;
	err = -ENOMEM;
	for (uint32_t l = 0; l < nl; l++)
		o->linked += w.map[l] >= 0;
	o->unmatched_launches = nl - o->linked;
	{
		uint8_t *hit = calloc((size_t)nk + 1, 1);
		if (hit == NULL)
			goto out;
		for (uint32_t l = 0; l < nl; l++)
			if (w.map[l] >= 0)
				hit[w.map[l]] = 1;
		for (uint32_t k = 0; k < nk; k++)
			o->unmatched_kernels += !hit[k];
		free(hit);
	}
	o->busy_ns = busy(w.K, nk);
	if (device_children(&w, ns) != 0)
		goto out;
	queue_depth(&w, nl, nk, ns);
	ni = idle_intervals(&w, np, ns);
	w.pre[0] = 0;
	for (uint32_t i = 0; i < ni; i++)
		w.pre[i + 1] = w.pre[i] + (w.idle[i].b - w.idle[i].a);
	ends_init(&c, w.idle, ni);
	for (uint32_t i = 0; i < ns; i++) {
		uint64_t dur = w.S[i].end - w.S[i].start;
		idle_ns[i] = overlap(&c, w.pre, w.S[i].start, w.S[i].end);
		frac[i] = dur ? (double)idle_ns[i] / (double)dur : 0.0;
	}
	if (falling_phases(w.P, np, &w.ph, &nph) != 0)
		goto out;
	ends_init(&c, w.ph, nph);
	for (uint32_t i = 0; i < ns; i++) {
		uint32_t p = phase_of(&c, w.S[i].start, w.S[i].end);
		if (p != RP_NONE)
			w.cand[nc++] = (struct cand){ i, p, 0 };
	}
	if (score(&w, nc, frac, d->cfg.max_ranked) != 0)
		goto out;
	err = report_out(&w, d, names, np, ni, nph, nc, frac, idle_ns, o);
out:
	work_free(&w);
	free(frac);
	free(idle_ns);
	return err;
}
