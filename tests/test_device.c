// SPDX-License-Identifier: MIT
/*
 * Device idle time (engine/analyses/device.c) against a brute-force reference: a literal port,
 * in the test, of torch.profiler's BasicEvaluation (compute_queue_depth,
 * compute_idle_time with intervals_overlap, rank_events), run on the spans a
 * generator made, while the engine reads the same spans from the Kineto-style Chrome
 * trace the generator wrote (correlation ids in args, or only in flow events), or
 * from live events with rp_link()-style LINK records. And the torch sample: per-name
 * self and cumulative time against a reference computed from the file's DOM.
 */
#include "support.h"

#include <ctype.h>
#include <math.h>
#include <string.h>

#include <yajl/yajl_tree.h>

#include "engine.h"
#include "import_chrome.h"

/* ---- the generator ---------------------------------------------------------------- */

#define MAXS 20000

struct gspan {
	int64_t s, e;		/* µs */
	char name[64];
	const char *cat;
	int tid;		/* 1, 2: CPU threads; 7, 8: GPU streams (pid 0) */
	int parent;		/* index, -1 for roots */
	long long corr;		/* 0: none */
	int flow_only;		/* the correlation travels in flow events only */
};

static struct gspan g[MAXS];
static int ng;
static uint64_t rng = 88172645463325252ull;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static int64_t range(int64_t lo, int64_t hi)
{
	return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1));
}

static int add(int64_t s, int64_t e, const char *name, const char *cat, int tid, int parent)
{
	assert_true(ng < MAXS);
	g[ng] = (struct gspan){ s, e, "", cat, tid, parent, 0, 0 };
	snprintf(g[ng].name, sizeof(g[ng].name), "%s", name);
	return ng++;
}

static int64_t stream_free, stream2_free;
static long long next_corr;

/* A kernel (or memcpy) on the stream for a launch at [ls, le). */
static void device_work(int launch, const char *name, const char *cat, bool burst)
{
	int64_t start = g[launch].s + range(2, 6);
	int k;

	if (rnd() % 5 == 0) { /* a second stream: kernels out of launch order */
		start = g[launch].s + range(2, 60);
		if (start < stream2_free)
			start = stream2_free;
		k = add(start, start + range(1, 30), name, cat, 8, -1);
		stream2_free = g[k].e;
	} else {
		if (start < stream_free)
			start = stream_free;
		start += range(0, 3);
		k = add(start, start + (burst ? range(20, 60) : range(1, 30)), name, cat, 7, -1);
		stream_free = g[k].e;
	}
	g[k].corr = g[launch].corr;
	g[k].flow_only = g[launch].flow_only;
	/* Kernels of two streams starting together have no defined order (torch takes
	 * Kineto's); keep starts distinct. */
	for (bool moved = true; moved;) {
		moved = false;
		for (int i = k - 1; i >= 0; i--)
			if (g[i].tid >= 7 && g[i].s == g[k].s) {
				g[k].s++, g[k].e++, moved = true;
				if (g[k].tid == 7)
					stream_free = g[k].e;
				else
					stream2_free = g[k].e;
			}
	}
}

/* One op on thread 1 at t: a python frame > aten op > launch (or a CPU-only op). */
static int64_t op(int64_t t, int parent, bool burst)
{
	int64_t end;
	int py, at, l;
	char name[64];
	int kind = (int)(rnd() % 10);

	snprintf(name, sizeof(name), "model.py(%d): forward", (int)range(10, 14));
	py = add(t, 0, name, "python_function", 1, parent);
	at = add(t + 1, 0, kind < 7 ? "aten::mm" : kind < 8 ? "aten::copy_" : "aten::relu",
		 "cpu_op", 1, py);
	end = t + 1 + range(1, 4);
	if (kind < 8) {
		bool memcpy = kind == 7;
		int64_t ls = end;
		bool zero = rnd() % 10 == 0;
		l = add(ls, ls + (zero ? 0 : range(3, 8)),
			memcpy ? "cudaMemcpyAsync" : "cudaLaunchKernel", "cuda_runtime", 1, at);
		g[l].corr = ++next_corr;
		/* A flow binds by time: at a zero-length launch, to its parent. Kineto writes
		 * args.correlation too, which is what counts then. */
		g[l].flow_only = !zero && rnd() % 10 < 3;
		end = g[l].e;
		if (memcpy)
			device_work(l, "Memcpy HtoD (Pageable -> Device)", "gpu_memcpy", false);
		else if (rnd() % 20 != 0) /* 5% of launches have no kernel */
			device_work(l, rnd() % 2 ? "void gemm_kernel<float>" : "elementwise_kernel",
				    "kernel", burst);
	} else {
		end += range(5, 40); /* a CPU-only op: the queue drains */
		add(end - 1, end - 1, "aten::empty", "cpu_op", 1, at); /* zero length */
	}
	end += range(1, 2);
	g[at].e = end;
	end += range(0, 2);
	g[py].e = end;
	return end + range(0, burst ? 1 : 6);
}

static void generate(int steps)
{
	int64_t t = 1000;

	ng = 0;
	stream_free = stream2_free = 0;
	next_corr = 100;
	for (int st = 0; st < steps; st++) {
		char name[32];
		int root, n = (int)range(3, 12);
		bool burst = rnd() % 3 == 0;

		snprintf(name, sizeof(name), "ProfilerStep#%d", st);
		root = add(t, 0, name, "user_annotation", 1, -1);
		t += 1;
		for (int i = 0; i < (burst ? 3 * n : n); i++)
			t = op(t, root, burst);
		t += 1;
		g[root].e = t;
		/* Some idle CPU work after the step. */
		t += range(0, 80);
	}
	/* A dataloader thread, never launching. */
	for (int64_t u = 1003; u < t; u += range(50, 300)) {
		int p = add(u, u + range(10, 40), "DataLoader::next", "cpu_op", 2, -1);
		add(g[p].s + 2, g[p].e - 2, "data.py(88): __getitem__", "python_function", 2, p);
	}
	/* A kernel nobody launched (correlation of no launch). */
	{
		int k = add(stream_free + 5, stream_free + 9, "orphan_kernel", "kernel", 7, -1);
		g[k].corr = 999999;
	}
}

static void write_trace(const char *path)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs("{\"schemaVersion\": 1, \"traceEvents\": [\n", f);
	for (int i = 0; i < ng; i++) {
		const struct gspan *s = &g[i];
		fprintf(f,
			"%s{\"ph\": \"X\", \"cat\": \"%s\", \"name\": \"%s\", \"pid\": %d, "
			"\"tid\": %d, \"ts\": %lld.000, \"dur\": %lld.000, \"args\": {",
			i ? ",\n" : "", s->cat, s->name, s->tid >= 7 ? 0 : 4242, s->tid,
			(long long)s->s, (long long)(s->e - s->s));
		if (s->corr && !s->flow_only)
			fprintf(f, "\"External id\": 7, \"correlation\": %lld", s->corr);
		fputs("}}", f);
		if (s->corr) /* Kineto writes both; flow_only spans have only the flow */
			fprintf(f,
				",\n{\"ph\": \"%s\", \"id\": %lld, \"pid\": %d, \"tid\": %d, "
				"\"ts\": %lld, \"cat\": \"ac2g\", \"name\": \"ac2g\"%s}",
				s->tid >= 7 ? "f" : "s", s->corr, s->tid >= 7 ? 0 : 4242, s->tid,
				(long long)s->s, s->tid >= 7 ? ", \"bp\": \"e\"" : "");
	}
	fputs("\n]}\n", f);
	fclose(f);
}

/* ---- the reference: BasicEvaluation, literally ------------------------------------ */

struct iv {
	int64_t start, end;
	int qd;
};

static int cpu[MAXS], ncpu;		 /* torch's events: every span, by start */
static int tparent[MAXS];		 /* parent in torch's tree */
static int lau[MAXS], nlau, ker[MAXS], nker; /* launches and kernels, by start */
static int64_t self_of[MAXS];
static struct iv qdl[2 * MAXS];
static int nqdl;
static struct iv idle[2 * MAXS + 2];
static int nidle;
static int64_t idle_of[MAXS];
static struct iv dec[2 * MAXS];
static int ndec;

static bool startswith(const char *s, const char *p)
{
	return strncmp(s, p, strlen(p)) == 0;
}

static bool ref_is_launch(const char *n)
{
	return startswith(n, "cudaLaunchKernel") || startswith(n, "cudaLaunchKernelExC") ||
	       startswith(n, "__cudaLaunchKernel") || startswith(n, "cudaLaunchCooperativeKernel") ||
	       startswith(n, "cudaLaunchCooperativeKernelMultiDevice");
}

static bool ref_is_kernel(const struct gspan *s)
{
	char low[64];

	if (s->tid < 7)
		return false;
	for (int i = 0; i < 64; i++)
		low[i] = (char)tolower((unsigned char)s->name[i]);
	return !strstr(low, "mem") && !strstr(low, "cpy") && !strstr(low, "alloc") &&
	       !strstr(low, "free");
}

/* Stable insertion sort of indices by start (n is small enough). */
static void sort_by_start(int *a, int n)
{
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && g[a[j - 1]].s > g[a[j]].s; j--) {
			int t = a[j];
			a[j] = a[j - 1];
			a[j - 1] = t;
		}
}

/* EventKey.intervals_overlap, with its in-place updates of the intervals. */
static int64_t intervals_overlap(int64_t s, int64_t e, struct iv *in, int n)
{
	int64_t overlap_time = 0;
	int i = 0, j = 1;

	for (int a = 1; a < n; a++) /* sorted(key=start), stable */
		for (int b = a; b > 0 && in[b - 1].start > in[b].start; b--) {
			struct iv t = in[b];
			in[b] = in[b - 1];
			in[b - 1] = t;
		}
	if (n > 0) {
		int64_t os = s > in[0].start ? s : in[0].start;
		int64_t oe = e < in[0].end ? e : in[0].end;
		if (os < oe)
			overlap_time += oe - os;
	}
	while (j < n) {
		struct iv *prev = &in[i], *curr = &in[j];
		j++;
		if (prev->end > curr->start) {
			if (prev->end > curr->end) {
				j++;
				continue;
			}
			curr->start = prev->end;
			i = j;
		}
		int64_t os = s > curr->start ? s : curr->start;
		int64_t oe = e < curr->end ? e : curr->end;
		if (os < oe)
			overlap_time += oe - os;
	}
	return overlap_time;
}

static int first_match_le0(const int *v, int n, int start)
{
	for (int i = start; i < n; i++)
		if (v[i] <= 0)
			return i;
	return -1;
}

static int argmax(const int *v, int start, int end)
{
	int best = -1;

	for (int i = start; i < end; i++)
		if (best < 0 || v[i] > v[best])
			best = i;
	return best;
}

static int mapping[MAXS];

static void reference(void)
{
	static int all[3 * MAXS], grp[3 * MAXS], rq[2 * MAXS];
	static struct iv tmp[2 * MAXS + 2];
	int last = 0, cur = 0, spawned = -1, nall = 0;

	ncpu = nlau = nker = 0;
	for (int i = 0; i < ng; i++) {
		cpu[ncpu++] = i; /* the tree holds device work too */
		tparent[i] = g[i].parent;
		if (g[i].tid >= 7) {
			/* its parent: the runtime call with its correlation (flow start) */
			for (int j = 0; j < ng; j++)
				if (g[j].tid < 7 && g[i].corr && g[j].corr == g[i].corr)
					tparent[i] = j;
			if (ref_is_kernel(&g[i]))
				ker[nker++] = i;
			continue;
		}
		if (ref_is_launch(g[i].name))
			lau[nlau++] = i;
	}
	sort_by_start(cpu, ncpu);
	sort_by_start(lau, nlau);
	sort_by_start(ker, nker);
	/* compute_self_time */
	for (int i = 0; i < ng; i++)
		self_of[i] = g[i].e - g[i].s;
	for (int i = 0; i < ng; i++)
		if (tparent[i] >= 0)
			self_of[tparent[i]] -= g[i].e - g[i].s;
	/* compute_queue_depth: kernel_mapping */
	for (int l = 0; l < nlau; l++) {
		mapping[l] = -1;
		for (int k = last; k < nker && g[lau[l]].corr; k++)
			if (g[ker[k]].corr == g[lau[l]].corr) {
				mapping[l] = k;
				break;
			}
		if (mapping[l] >= 0)
			last = mapping[l];
	}
	/* all_events = launches + kernels + events, stably sorted by start */
	for (int l = 0; l < nlau; l++)
		all[nall] = l, grp[nall++] = 0;
	for (int k = 0; k < nker; k++)
		all[nall] = k, grp[nall++] = 1;
	for (int c = 0; c < ncpu; c++)
		all[nall] = c, grp[nall++] = 2;
#define START_OF(x) (grp[x] == 0 ? g[lau[all[x]]].s : grp[x] == 1 ? g[ker[all[x]]].s : g[cpu[all[x]]].s)
	{
		static int ord[3 * MAXS];
		for (int i = 0; i < nall; i++)
			ord[i] = i;
		/* stable merge of the three sorted runs = stable sort by start */
		for (int i = 1; i < nall; i++)
			for (int j = i; j > 0 && START_OF(ord[j - 1]) > START_OF(ord[j]); j--) {
				int t = ord[j];
				ord[j] = ord[j - 1];
				ord[j - 1] = t;
			}
		nqdl = 0;
		for (int x = 0; x < nall; x++) {
			int i = ord[x];
			int64_t st = START_OF(i);
			if (grp[i] == 0 && mapping[all[i]] >= 0)
				spawned = mapping[all[i]];
			while (cur < nker && g[ker[cur]].s <= st)
				cur++;
			int qd = spawned - cur + 1;
			if (qd < 0)
				qd = 0;
			if (grp[i] == 0)
				qdl[nqdl++] = (struct iv){ st, g[lau[all[i]]].e, qd };
			else if (grp[i] == 1)
				qdl[nqdl++] = (struct iv){ st, g[ker[all[i]]].e, qd };
		}
	}
	/* compute_idle_time */
	nidle = 0;
	if (nqdl && ncpu) {
		/* events[-1]: the last to start; of several, torch's tree order puts the
		 * innermost (shortest) last */
		int lastev = cpu[ncpu - 1];
		for (int c = 0; c < ncpu; c++)
			if (g[cpu[c]].s == g[lastev].s && g[cpu[c]].e < g[lastev].e)
				lastev = cpu[c];
		idle[nidle++] = (struct iv){ g[cpu[0]].s, qdl[0].start, 0 };
		idle[nidle++] = (struct iv){ qdl[nqdl - 1].end, g[lastev].e, 0 };
		bool is_idle = false;
		int64_t idle_start = 0;
		for (int i = 0; i < nqdl; i++) {
			if (qdl[i].qd == 0 && !is_idle) {
				idle_start = qdl[i].end;
				is_idle = true;
			}
			if (qdl[i].qd > 0 && is_idle) {
				idle[nidle++] = (struct iv){ idle_start, qdl[i].start, 0 };
				is_idle = false;
			}
		}
	}
	/* intervals_overlap on one shared list, span after span */
	memcpy(tmp, idle, (size_t)nidle * sizeof(*tmp));
	for (int c = 0; c < ncpu; c++)
		idle_of[cpu[c]] = intervals_overlap(g[cpu[c]].s, g[cpu[c]].e, tmp, nidle);
	/* rank_events: falling intervals */
	for (int i = 0; i < nqdl; i++)
		rq[i] = qdl[nqdl - 1 - i].qd;
	ndec = 0;
	for (int i = 0; i < nqdl;) {
		if (rq[i] > 0) {
			i++;
			continue;
		}
		for (int j = i + 1; j < nqdl; j++) {
			int nm = first_match_le0(rq, nqdl, j);
			int pk = argmax(rq, j, nm < 0 ? nqdl : nm);
			if (pk >= 0 && rq[pk] >= 4) {
				dec[ndec++] = (struct iv){ qdl[nqdl - 1 - pk].start,
							   qdl[nqdl - 1 - i].start, 0 };
				i = nm >= 0 ? nm : i;
				break;
			}
		}
		i++;
	}
}

struct rcand {
	int span;
	double score;
};

static int cmp_rcand(const void *x, const void *y)
{
	const struct rcand *a = x, *b = y;

	if (a->score != b->score)
		return a->score > b->score ? -1 : 1;
	if (g[a->span].s != g[b->span].s)
		return g[a->span].s < g[b->span].s ? -1 : 1;
	return 0;
}

static int ref_rank(struct rcand *out)
{
	static struct iv tmp[2 * MAXS];
	int n = 0;
	double ma = 0, mb = 0, sa = 0, sb = 0;

	for (int c = 0; c < ncpu; c++) {
		memcpy(tmp, dec, (size_t)ndec * sizeof(*tmp));
		if (intervals_overlap(g[cpu[c]].s, g[cpu[c]].e, tmp, ndec) > 0)
			out[n++] = (struct rcand){ cpu[c], 0 };
	}
	if (n == 0)
		return 0;
	for (int i = 0; i < n; i++) {
		int s = out[i].span;
		double dur = (double)(g[s].e - g[s].s);
		ma += dur ? (double)idle_of[s] / dur : 0;
		mb += (double)self_of[s];
	}
	ma /= n, mb /= n;
	for (int i = 0; i < n; i++) {
		int s = out[i].span;
		double dur = (double)(g[s].e - g[s].s), a = dur ? (double)idle_of[s] / dur : 0;
		sa += (a - ma) * (a - ma);
		sb += ((double)self_of[s] - mb) * ((double)self_of[s] - mb);
	}
	sa = n > 1 ? sqrt(sa / (n - 1)) : 0;
	sb = n > 1 ? sqrt(sb / (n - 1)) : 0;
	for (int i = 0; i < n; i++) {
		int s = out[i].span;
		double dur = (double)(g[s].e - g[s].s), a = dur ? (double)idle_of[s] / dur : 0;
		out[i].score = sa > 0 && sb > 0 ? (a - ma) / sa + 0.6 * ((double)self_of[s] - mb) / sb
						: 0;
	}
	qsort(out, (size_t)n, sizeof(*out), cmp_rcand);
	return n;
}

static const char *ref_source(int s)
{
	for (; s >= 0; s = tparent[s]) {
		const char *p = strstr(g[s].name, ".py(");
		if (p && strchr(p + 4, ')'))
			return g[s].name;
	}
	return "";
}

/* ---- comparing ------------------------------------------------------------------- */

static void engine_cfg(struct rp_engine_cfg *cfg)
{
	rp_engine_cfg_default(cfg);
	cfg->dev.max_ranked = 100000;
	cfg->dev.max_points = 100000;
	cfg->dev.max_idle = 100000;
	cfg->dev.max_phases = 100000;
	cfg->dev.always = true; /* the live test compares every span with the reference */
}

static void check_device(const struct rp_report_device *d)
{
	static struct rcand rc[MAXS];
	int nrc, prev = -1, npts = 0, maxqd = 0;
	int64_t busy = 0, a = 0, b = -1, idle_sum = 0;
	int nlinked = 0, unl = 0;

	reference();
	nrc = ref_rank(rc);
	assert_int_equal(d->launches, nlau);
	assert_int_equal(d->kernels, nker);
	assert_int_equal(d->spans, ncpu);
	/* linked/unmatched: torch's mapping (the first kernel at or after the last
	 * mapped one: a kernel that starts out of launch order is lost) */
	for (int l = 0; l < nlau; l++)
		nlinked += mapping[l] >= 0;
	for (int k = 0; k < nker; k++) {
		bool found = false;
		for (int l = 0; l < nlau; l++)
			found |= mapping[l] == k;
		unl += !found;
	}
	assert_int_equal(d->linked, nlinked);
	assert_int_equal(d->unmatched_launches, nlau - nlinked);
	assert_int_equal(d->unmatched_kernels, unl);
	/* queue depth over time: change points and the maximum */
	for (int i = 0; i < nqdl; i++) {
		if (qdl[i].qd > maxqd)
			maxqd = qdl[i].qd;
		if (qdl[i].qd == prev)
			continue;
		prev = qdl[i].qd;
		assert_true(npts < (int)d->n_points);
		assert_int_equal(d->points[npts].t_ns, qdl[i].start * 1000);
		assert_int_equal(d->points[npts].depth, qdl[i].qd);
		npts++;
	}
	assert_int_equal(d->n_points, npts);
	assert_int_equal(d->n_points_total, npts);
	assert_int_equal(d->max_queue_depth, maxqd);
	/* idle intervals: those with time in them, by start */
	{
		static struct iv pos[2 * MAXS + 2];
		int np = 0;
		for (int i = 0; i < nidle; i++)
			if (idle[i].end > idle[i].start)
				pos[np++] = idle[i];
		for (int i = 1; i < np; i++)
			for (int j = i; j > 0 && pos[j - 1].start > pos[j].start; j--) {
				struct iv t = pos[j];
				pos[j] = pos[j - 1];
				pos[j - 1] = t;
			}
		assert_int_equal(d->n_idle, np);
		for (int i = 0; i < np; i++) {
			assert_int_equal(d->idle[i].start_ns, pos[i].start * 1000);
			assert_int_equal(d->idle[i].end_ns, pos[i].end * 1000);
			idle_sum += pos[i].end - pos[i].start;
		}
		assert_int_equal(d->idle_ns, idle_sum * 1000);
	}
	/* falling phases */
	assert_int_equal(d->n_phases, ndec);
	for (int i = 0; i < ndec; i++) { /* found latest first; reported earliest first */
		assert_int_equal(d->phases[i].start_ns, dec[ndec - 1 - i].start * 1000);
		assert_int_equal(d->phases[i].end_ns, dec[ndec - 1 - i].end * 1000);
	}
	/* the ranking: same candidates, same scores in the same order */
	assert_int_equal(d->candidates, nrc);
	assert_int_equal(d->n_ranked, nrc);
	for (int i = 0; i < nrc; i++) {
		const struct rp_report_dev_span *r = &d->ranked[i];
		int s = rc[i].span;
		bool same = false;

		assert_true(fabs(r->score - rc[i].score) < 1e-9);
		/* ties may order differently only among equal scores */
		for (int j = 0; j < nrc && !same; j++) {
			int t = rc[j].span;
			same = fabs(rc[j].score - r->score) < 1e-9 &&
			       (int64_t)r->start_ns == g[t].s * 1000 &&
			       (int64_t)r->dur_ns == (g[t].e - g[t].s) * 1000 &&
			       strcmp(r->name, g[t].name) == 0 &&
			       r->self_ns == self_of[t] * 1000 &&
			       (int64_t)r->idle_ns == idle_of[t] * 1000 &&
			       strcmp(r->source, ref_source(t)) == 0;
		}
		assert_true(same);
		(void)s;
	}
	/* busy: the union of the kernels */
	for (int k = 0; k < nker; k++) {
		if (b >= 0 && g[ker[k]].s <= b) {
			if (g[ker[k]].e > b)
				b = g[ker[k]].e;
			continue;
		}
		if (b >= 0)
			busy += b - a;
		a = g[ker[k]].s, b = g[ker[k]].e;
	}
	if (b >= 0)
		busy += b - a;
	assert_int_equal(d->busy_ns, busy * 1000);
}

static void import_ranked(const char *path, struct rp_report *rep, uint32_t max_ranked)
{
	struct rp_engine_cfg cfg;
	struct rp_engine *e;
	char why[RP_WHY_MAX];

	engine_cfg(&cfg);
	cfg.dev.max_ranked = max_ranked;
	assert_int_equal(rp_engine_open(&cfg, &e), 0);
	if (rp_import_chrome(e, path, NULL, NULL, why) != 0)
		fail_msg("%s", why);
	assert_int_equal(rp_engine_report(e, rep), 0);
	rp_engine_close(e);
}

static void import_file(const char *path, struct rp_report *rep)
{
	import_ranked(path, rep, 100000);
}

static void test_device_synthetic_matches_reference(void **state)
{
	char path[] = "/tmp/rp_device_XXXXXX";
	int fd = mkstemp(path);
	int bursts_with_phases = 0, lost = 0;

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	for (int round = 0; round < 12; round++) {
		struct rp_report rep;

		generate(5 + round * 4);
		write_trace(path);
		import_file(path, &rep);
		check_device(&rep.device);
		bursts_with_phases += ndec > 0;
		lost += rep.device.unmatched_launches;
		/* memcpy: launched by cudaMemcpyAsync, never in the queue */
		assert_true(rep.device.other_device > 0);
		assert_int_equal(rep.device.links_orphan, 0);
		rp_report_free(&rep);
	}
	assert_true(bursts_with_phases >= 6); /* the generator does reach depth 4 */
	assert_true(lost > 0); /* and kernels out of launch order */
	unlink(path);
}

/* A few ranked spans (the default keeps 10 of thousands): the first of the whole
 * ranking, in its order. */
static void test_device_ranked_cap_keeps_the_first(void **state)
{
	static const uint32_t caps[] = { 0, 1, 2, 3, 7, 10, 64, 65 };
	char path[] = "/tmp/rp_device_XXXXXX";
	int fd = mkstemp(path);
	int capped = 0;

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	for (int round = 0; round < 12; round++) {
		struct rp_report all;

		generate(5 + round * 4);
		write_trace(path);
		import_file(path, &all);
		assert_int_equal(all.device.n_ranked, all.device.candidates);
		for (size_t c = 0; c < sizeof(caps) / sizeof(caps[0]); c++) {
			struct rp_report rep;
			uint32_t want =
				all.device.candidates < caps[c] ? all.device.candidates : caps[c];

			import_ranked(path, &rep, caps[c]);
			capped += want < all.device.candidates;
			assert_int_equal(rep.device.candidates, all.device.candidates);
			assert_int_equal(rep.device.n_ranked, want);
			for (uint32_t i = 0; i < want; i++) {
				const struct rp_report_dev_span *a = &all.device.ranked[i];
				const struct rp_report_dev_span *r = &rep.device.ranked[i];

				assert_true(r->score == a->score);
				assert_int_equal(r->start_ns, a->start_ns);
				assert_int_equal(r->dur_ns, a->dur_ns);
				assert_int_equal(r->self_ns, a->self_ns);
				assert_int_equal(r->idle_ns, a->idle_ns);
				assert_string_equal(r->name, a->name);
			}
			rp_report_free(&rep);
		}
		rp_report_free(&all);
	}
	assert_true(capped > 0); /* some rounds have more candidates than a cap */
	unlink(path);
}

/* The same spans as live events: BEGIN/END per thread, a LINK inside each linked
 * span (device work on its own thread track, named without a category). */
struct lev {
	int64_t ts;
	int kind, span, order;
};

static int cmp_lev(const void *x, const void *y)
{
	const struct lev *a = x, *b = y;

	if (a->ts != b->ts)
		return a->ts < b->ts ? -1 : 1;
	return a->order < b->order ? -1 : a->order > b->order;
}

static void test_device_live_links_match_reference(void **state)
{
	static struct lev ev[4 * MAXS];
	struct rp_engine_cfg cfg;
	struct rp_engine *e;
	struct rp_report rep;
	uint32_t names[MAXS];
	int n = 0;

	(void)state;
	generate(20);
	engine_cfg(&cfg);
	assert_int_equal(rp_engine_open(&cfg, &e), 0);
	assert_int_equal(rp_engine_add_source(e, "live", 1, 0), 0);
	for (int i = 0; i < ng; i++) {
		/* device work is marked by the link (no category) or by a memcpy category */
		names[i] = rp_engine_name(e, 0, g[i].name,
					  g[i].tid >= 7 && !g[i].corr ? "kernel" :
					  g[i].tid >= 7 && strcmp(g[i].cat, "gpu_memcpy") == 0
						  ? "gpu_memcpy" : "",
					  "", 0);
		/* ends before begins at one time; parents open before and close after
		 * their children: order by (depth-first position) */
		ev[n++] = (struct lev){ g[i].s, RP_EV_BEGIN, i, 2 * i + 1 };
		ev[n++] = (struct lev){ g[i].e, RP_EV_END, i, -(2 * i + 2) };
	}
	for (int i = 0; i < n; i++) /* zero-length spans: the END after the BEGIN */
		if (ev[i].kind == RP_EV_END && g[ev[i].span].s == g[ev[i].span].e)
			ev[i].order = 2 * ev[i].span + 2;
	qsort(ev, (size_t)n, sizeof(*ev), cmp_lev);
	for (int i = 0; i < n; i++) {
		const struct gspan *s = &g[ev[i].span];
		struct rp_event r = { .ts = (uint64_t)ev[i].ts * 1000, .name = names[ev[i].span],
				      .kind = (uint8_t)ev[i].kind };

		rp_engine_event(e, 0, (uint64_t)s->tid, &r);
		if (ev[i].kind == RP_EV_BEGIN && s->corr) {
			struct rp_event l = { .ts = r.ts, .name = r.name, .kind = RP_EV_LINK,
					      .flags = s->tid >= 7 ? RP_LINK_DEVICE : RP_LINK_LAUNCH,
					      .arg = (uint64_t)s->corr };
			rp_engine_event(e, 0, (uint64_t)s->tid, &l);
		}
	}
	assert_int_equal(rp_engine_report(e, &rep), 0);
	check_device(&rep.device);
	assert_int_equal(rep.device.links_orphan, 0);
	rp_report_free(&rep);
	rp_engine_close(e);
}

/* Live, the analysis keeps spans only from the first device activity: an engine that
 * never sees a link or device work keeps nothing. */
static void test_device_arms_at_first_link(void **state)
{
	struct rp_engine *e;
	struct rp_report rep;
	uint32_t L, op;

	(void)state;
	assert_int_equal(rp_engine_open(NULL, &e), 0);
	assert_int_equal(rp_engine_add_source(e, "live", 1, 0), 0);
	L = rp_engine_name(e, 0, "cudaLaunchKernel", "cuda_runtime", "", 0);
	op = rp_engine_name(e, 0, "aten::mm", "", "", 0);
#define EV(t, k, n, a, fl)                                                                  \
	rp_engine_event(e, 0, 1, &(struct rp_event){ .ts = (t), .name = (n), .kind = (k),   \
						     .arg = (a), .flags = (fl) })
	for (int i = 0; i < 5; i++) { /* before any device work: not kept */
		EV(10 * i + 1, RP_EV_BEGIN, op, 0, 0);
		EV(10 * i + 5, RP_EV_END, op, 0, 0);
	}
	assert_int_equal(rp_engine_report(e, &rep), 0);
	assert_int_equal(rep.device.spans, 0);
	rp_report_free(&rep);
	EV(100, RP_EV_BEGIN, op, 0, 0);
	EV(110, RP_EV_BEGIN, L, 0, 0);
	EV(111, RP_EV_LINK, L, 7, RP_LINK_LAUNCH); /* arms: spans closing from now on */
	EV(115, RP_EV_END, L, 0, 0);
	EV(120, RP_EV_END, op, 0, 0);
	EV(130, RP_EV_BEGIN, op, 0, 0);
	EV(140, RP_EV_END, op, 0, 0);
	assert_int_equal(rp_engine_report(e, &rep), 0);
	assert_int_equal(rep.device.spans, 3);
	assert_int_equal(rep.device.launches, 1);
	rp_report_free(&rep);
	rp_engine_close(e);
#undef EV
}

/* Hand-made: async device spans linked by span id, caps counted, orphans. */
static void test_device_span_links_and_caps(void **state)
{
	struct rp_engine_cfg cfg;
	struct rp_engine *e;
	struct rp_report rep;
	uint32_t L, K, op;

	(void)state;
	rp_engine_cfg_default(&cfg);
	cfg.dev.max_events = 3;
	assert_int_equal(rp_engine_open(&cfg, &e), 0);
	assert_int_equal(rp_engine_add_source(e, "live", 1, 0), 0);
	L = rp_engine_name(e, 0, "cudaLaunchKernel", "cuda_runtime", "", 0);
	K = rp_engine_name(e, 0, "gemm", "", "", 0);
	op = rp_engine_name(e, 0, "aten::mm", "", "", 0);
#define EV(t, k, n, tr, a, fl)                                                              \
	rp_engine_event(e, 0, 1,                                                            \
			&(struct rp_event){ .ts = (t), .name = (n), .kind = (k), .track = (tr), \
					    .arg = (a), .flags = (fl) })
	EV(100, RP_EV_LINK, L, 0, 1, RP_LINK_LAUNCH); /* no open span: orphan */
	EV(100, RP_EV_BEGIN, op, 0, 0, 0);
	for (int i = 0; i < 4; i++) {
		EV(110 + 10 * i, RP_EV_BEGIN, L, 0, 0, 0);
		EV(111 + 10 * i, RP_EV_LINK, L, 0, 50 + i, RP_LINK_LAUNCH);
		EV(115 + 10 * i, RP_EV_END, L, 0, 0, 0);
	}
	EV(200, RP_EV_END, op, 0, 0, 0);
	/* device work as async spans on track 9, linked by span id */
	EV(120, RP_EV_ASYNC_BEGIN, K, 9, 77, 0);
	EV(120, RP_EV_LINK, K, 77, 50, RP_LINK_DEVICE);
	EV(160, RP_EV_ASYNC_END, K, 9, 77, 0);
	EV(170, RP_EV_LINK, K, 0, 50, 9); /* a bad side */
	assert_int_equal(rp_engine_report(e, &rep), 0);
	assert_int_equal(rep.device.launches, 3);
	assert_int_equal(rep.device.kernels, 0); /* the fourth event did not fit */
	assert_int_equal(rep.device.events_dropped, 2);
	assert_int_equal(rep.device.links_orphan, 1);
	assert_int_equal(rep.anomalies[RP_ANOM_BAD_EVENT], 1);
	assert_int_equal(rep.device.spans, 6); /* the kernel too */
	rp_report_free(&rep);
	rp_engine_close(e);

	cfg.dev.max_events = 100;
	assert_int_equal(rp_engine_open(&cfg, &e), 0);
	assert_int_equal(rp_engine_add_source(e, "live", 1, 0), 0);
	L = rp_engine_name(e, 0, "cudaLaunchKernel", "cuda_runtime", "", 0);
	K = rp_engine_name(e, 0, "gemm", "", "", 0);
	EV(110, RP_EV_BEGIN, L, 0, 0, 0);
	EV(111, RP_EV_LINK, L, 0, 50, RP_LINK_LAUNCH);
	EV(115, RP_EV_END, L, 0, 0, 0);
	EV(120, RP_EV_ASYNC_BEGIN, K, 9, 77, 0);
	EV(120, RP_EV_LINK, K, 77, 50, RP_LINK_DEVICE);
	EV(160, RP_EV_ASYNC_END, K, 9, 77, 0);
	assert_int_equal(rp_engine_report(e, &rep), 0);
	assert_int_equal(rep.device.launches, 1);
	assert_int_equal(rep.device.kernels, 1);
	assert_int_equal(rep.device.linked, 1);
	assert_int_equal(rep.device.busy_ns, 40);
	/* points: launch at 110 (depth 1: its kernel not started), kernel at 120 (0) */
	assert_int_equal(rep.device.n_points, 2);
	assert_int_equal(rep.device.points[0].depth, 1);
	assert_int_equal(rep.device.points[1].t_ns, 120);
	assert_int_equal(rep.device.points[1].depth, 0);
	/* idle: [110, 110) head (empty), tail [160, 115) (negative): none */
	assert_int_equal(rep.device.n_idle, 0);
	rp_report_free(&rep);
	rp_engine_close(e);
#undef EV
}

static void test_device_names(void **state)
{
	(void)state;
	assert_true(rp_device_is_launch_name("cudaLaunchKernel"));
	assert_true(rp_device_is_launch_name("cudaLaunchKernelExC_v11060"));
	assert_true(rp_device_is_launch_name("__cudaLaunchKernel"));
	assert_true(rp_device_is_launch_name("cudaLaunchCooperativeKernelMultiDevice"));
	assert_false(rp_device_is_launch_name("cuLaunchKernel"));
	assert_false(rp_device_is_launch_name("cudaMemcpyAsync"));
	assert_true(rp_device_is_kernel_name("void gemm<float>"));
	assert_false(rp_device_is_kernel_name("Memcpy HtoD"));
	assert_false(rp_device_is_kernel_name("Memset (Device)"));
	assert_false(rp_device_is_kernel_name("CUDA mem cpy"));
	assert_false(rp_device_is_kernel_name("cudaFree"));
	assert_false(rp_device_is_kernel_name("ALLOCATE"));
	assert_true(rp_device_is_source_name("torch/nn/modules/module.py(1501): _call_impl"));
	assert_false(rp_device_is_source_name("model.py"));
	assert_false(rp_device_is_source_name("model.py(12"));
}

/* ---- the torch sample ------------------------------------------------------------ */

struct tspan {
	int64_t s, e;
	int name, track, seq, parent;
	int64_t self;
};

#define TMAX 20000
static struct tspan ts[TMAX];
static char tnames[2048][128];
static int ntn;

static int tname(const char *s)
{
	for (int i = 0; i < ntn; i++)
		if (strcmp(tnames[i], s) == 0)
			return i;
	assert_true(ntn < 2048);
	snprintf(tnames[ntn], sizeof(tnames[ntn]), "%s", s);
	return ntn++;
}

static int cmp_tspan(const void *x, const void *y)
{
	const struct tspan *a = x, *b = y;

	if (a->track != b->track)
		return a->track - b->track;
	if (a->s != b->s)
		return a->s < b->s ? -1 : 1;
	if (a->e - a->s != b->e - b->s)
		return a->e - a->s > b->e - b->s ? -1 : 1;
	return a->seq - b->seq;
}

static const char *testdata(void)
{
	const char *d = getenv("RP_TESTDATA");
	return d ? d : "tests/data";
}

static void test_device_torch_sample(void **state)
{
	char path[512], err[256];
	FILE *f;
	char *text;
	long len;
	yajl_val root;
	int n = 0;
	static int64_t self[2048], cum[2048];
	struct rp_report rep;
	const char *p_name[] = { "name", NULL }, *p_ts[] = { "ts", NULL },
		   *p_dur[] = { "dur", NULL }, *p_tid[] = { "tid", NULL };

	(void)state;
	snprintf(path, sizeof(path), "%s/torch/cpu_legacy_trace.json", testdata());
	f = fopen(path, "rb");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	text = malloc((size_t)len + 1);
	assert_int_equal(fread(text, 1, (size_t)len, f), (size_t)len);
	text[len] = 0;
	fclose(f);
	root = yajl_tree_parse(text, err, sizeof(err));
	free(text);
	assert_non_null(root);
	assert_true(YAJL_IS_ARRAY(root));
	ntn = 0;
	for (size_t i = 0; i < root->u.array.len; i++) {
		yajl_val o = root->u.array.values[i];
		yajl_val nm = yajl_tree_get(o, p_name, yajl_t_string);
		yajl_val t = yajl_tree_get(o, p_ts, yajl_t_number);
		yajl_val d = yajl_tree_get(o, p_dur, yajl_t_number);
		yajl_val tid = yajl_tree_get(o, p_tid, yajl_t_any);
		assert_true(nm && t && d);
		assert_true(n < TMAX);
		ts[n] = (struct tspan){ YAJL_GET_INTEGER(t) * 1000,
					(YAJL_GET_INTEGER(t) + YAJL_GET_INTEGER(d)) * 1000,
					tname(YAJL_GET_STRING(nm)),
					tid && YAJL_IS_INTEGER(tid) ? (int)YAJL_GET_INTEGER(tid) : 0, n,
					-1, 0 };
		n++;
	}
	yajl_tree_free(root);
	assert_int_equal(n, 12978);
	/* nest: by track, start, longer first, file order; a zero-length span contains
	 * nothing; children overhanging their parent are clamped to it */
	qsort(ts, (size_t)n, sizeof(*ts), cmp_tspan);
	{
		static int stack[TMAX];
		int depth = 0;
		for (int i = 0; i < n; i++) {
			if (i > 0 && ts[i].track != ts[i - 1].track)
				depth = 0;
			while (depth) {
				struct tspan *p = &ts[stack[depth - 1]];
				if (p->e > p->s &&
				    (ts[i].s < p->e || (ts[i].s == p->e && ts[i].e == ts[i].s)))
					break;
				depth--;
			}
			if (depth) {
				ts[i].parent = stack[depth - 1];
				if (ts[i].e > ts[ts[i].parent].e)
					ts[i].e = ts[ts[i].parent].e;
			}
			stack[depth++] = i;
		}
	}
	for (int i = 0; i < n; i++)
		ts[i].self = ts[i].e - ts[i].s;
	for (int i = 0; i < n; i++)
		if (ts[i].parent >= 0)
			ts[ts[i].parent].self -= ts[i].e - ts[i].s;
	memset(self, 0, sizeof(self));
	memset(cum, 0, sizeof(cum));
	for (int i = 0; i < n; i++) {
		bool prim = true;
		for (int p = ts[i].parent; p >= 0 && prim; p = ts[p].parent)
			prim = ts[p].name != ts[i].name;
		self[ts[i].name] += ts[i].self;
		if (prim)
			cum[ts[i].name] += ts[i].e - ts[i].s;
	}
	import_file(path, &rep);
	assert_int_equal(rep.n_fns, ntn);
	for (uint32_t i = 0; i < rep.n_fns; i++) {
		int id = tname(rep.fns[i].name);
		assert_true(id < ntn);
		if ((int64_t)rep.fns[i].self_ns != self[id] || (int64_t)rep.fns[i].cum_ns != cum[id])
			fail_msg("%s: self %llu cum %llu, reference %lld %lld", rep.fns[i].name,
				 (unsigned long long)rep.fns[i].self_ns,
				 (unsigned long long)rep.fns[i].cum_ns, (long long)self[id],
				 (long long)cum[id]);
	}
	/* A CPU-only profile: every span analysed, no device work, nothing idle. */
	assert_int_equal(rep.device.spans, 12978);
	assert_int_equal(rep.device.launches, 0);
	assert_int_equal(rep.device.kernels, 0);
	assert_int_equal(rep.device.n_idle, 0);
	assert_int_equal(rep.device.n_ranked, 0);
	rp_report_free(&rep);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_device_names),
		cmocka_unit_test(test_device_synthetic_matches_reference),
		cmocka_unit_test(test_device_ranked_cap_keeps_the_first),
		cmocka_unit_test(test_device_live_links_match_reference),
		cmocka_unit_test(test_device_span_links_and_caps),
		cmocka_unit_test(test_device_arms_at_first_link),
		cmocka_unit_test(test_device_torch_sample),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
