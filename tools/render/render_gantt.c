// SPDX-License-Identifier: MIT
/*
 * --format gantt: the flight recorder as an SVG Gantt chart. A row per track
 * (sorted by Chrome pid, tid; see render_export.h), nested spans in stacked
 * sub-rows (depth 0 on top; depths past 7 share the last), one <rect class="s"> per
 * span with a <title> tooltip, colour by category with a legend, and a time axis
 * whose ticks are 1, 2 or 5 x 10^k ns apart, labelled relative to the chart's start.
 *
 * Readable with thousands of spans: every bar is at least MIN_W px wide (a 1 ns span
 * stays visible), at most max_rows tracks are drawn (a note counts the rest and
 * their spans), the legend lists at most LEGEND_MAX categories (+N more).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "render_export.h"
#include "render_priv.h"

#define WIDTH	    1400.0
#define LABEL_W	    190.0
#define LABEL_CHARS 30 /* characters of a row label (11 px text in LABEL_W) */
#define RIGHT	    20.0
#define SUB_H	    12.0
#define MAX_SUB	    8
#define ROW_GAP	    6.0
#define MIN_W	    1.0
#define LEGEND_MAX  48

static const char *const palette[] = {
	"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948",
	"#b07aa1", "#ff9da7", "#9c755f", "#bab0ac", "#1f77b4", "#17becf",
};
#define N_COLOURS (sizeof(palette) / sizeof(palette[0]))

/* XML text: markup characters escaped, control characters dropped, bad UTF-8 U+FFFD. */
static void put_xml(FILE *out, const char *s)
{
	bool valid;
	size_t n;

	for (; s && *s; s += n) {
		unsigned char c = (unsigned char)*s;

		n = rp_render_utf8_next(s, &valid);
		if (!valid)
			fputs("\xef\xbf\xbd", out);
		else if (c == '&')
			fputs("&amp;", out);
		else if (c == '<')
			fputs("&lt;", out);
		else if (c == '>')
			fputs("&gt;", out);
		else if (c == '"')
			fputs("&quot;", out);
		else if (c >= 0x20 && c != 0x7f)
			fwrite(s, 1, n, out);
	}
}

struct row {
	uint32_t sub; /* sub-rows */
	uint64_t spans;
	double y;
};

struct gantt {
	const struct rp_report *r;
	const struct rp_export_opts *o;
	struct rp_export_map m;
	struct row *rows; /* per track; rows[i].spans == 0: not drawn */
	uint32_t *order;  /* tracks with spans, by (pid, tid) */
	uint32_t n_order, n_drawn;
	uint64_t hidden_spans, drawn_spans;
	const char **cats; /* distinct categories, sorted */
	uint32_t n_cats;
	uint32_t *cat_of; /* per fn */
	uint64_t t0, t1;
	double x0, x1, legend_h, axis_y, height;
};

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Categories of the kept spans' names: sorted, distinct; cat_of per fn. */
static int collect_cats(struct gantt *g, const bool *used)
{
	const struct rp_report *r = g->r;

	g->cats = calloc(r->n_fns ? r->n_fns : 1, sizeof(*g->cats));
	g->cat_of = calloc(r->n_fns ? r->n_fns : 1, sizeof(*g->cat_of));
	if (!g->cats || !g->cat_of)
		return -ENOMEM;
	for (uint32_t i = 0; i < r->n_fns; i++)
		if (used[i])
			g->cats[g->n_cats++] = r->fns[i].category ? r->fns[i].category : "";
	if (g->n_cats)
		qsort(g->cats, g->n_cats, sizeof(*g->cats), cmp_str);
	uint32_t n = 0;
	for (uint32_t i = 0; i < g->n_cats; i++)
		if (n == 0 || strcmp(g->cats[n - 1], g->cats[i]) != 0)
			g->cats[n++] = g->cats[i];
	g->n_cats = n;
	for (uint32_t i = 0; i < r->n_fns; i++) {
		const char *c = r->fns[i].category ? r->fns[i].category : "";
		const char **hit =
			used[i] ? bsearch(&c, g->cats, n, sizeof(*g->cats), cmp_str) : NULL;
		g->cat_of[i] = hit ? (uint32_t)(hit - g->cats) : 0;
	}
	return 0;
}

struct tkey {
	uint32_t pid, tid, i;
};

static int cmp_tkey(const void *a, const void *b)
{
	const struct tkey *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

/* Which spans are kept; per track the span count and depth; the time range. */
static int scan(struct gantt *g, bool *used)
{
	const struct rp_report_recorder *rec = &g->r->recorder;
	bool any = false;

	for (uint32_t i = 0; i < rec->n_spans; i++) {
		const struct rp_report_rspan *s = &rec->spans[i];
		struct row *w;

		if (!rp_export_keep_span(g->o, s->start_ns, s->dur_ns) || s->fn >= g->r->n_fns ||
		    s->track >= rec->n_tracks)
			continue;
		w = &g->rows[s->track];
		w->spans++;
		if (s->depth + 1 > w->sub)
			w->sub = s->depth + 1 > MAX_SUB ? MAX_SUB : s->depth + 1;
		used[s->fn] = true;
		if (!any || s->start_ns < g->t0)
			g->t0 = s->start_ns;
		if (!any || s->start_ns + s->dur_ns > g->t1)
			g->t1 = s->start_ns + s->dur_ns;
		any = true;
	}
	if (g->t0 < g->o->from)
		g->t0 = g->o->from;
	if (g->t1 > g->o->to)
		g->t1 = g->o->to;
	if (g->t1 <= g->t0)
		g->t1 = g->t0 + 1;
	return 0;
}

/* Rows in (pid, tid) order, the first max_rows drawn; y of each. */
static int layout(struct gantt *g)
{
	const struct rp_report_recorder *rec = &g->r->recorder;
	uint32_t max_rows = g->o->max_rows ? g->o->max_rows : 200;
	double y;

	g->order = malloc((rec->n_tracks ? rec->n_tracks : 1) * sizeof(*g->order));
	if (g->order == NULL)
		return -ENOMEM;
	struct tkey *k = malloc((rec->n_tracks ? rec->n_tracks : 1) * sizeof(*k));

	if (k == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < rec->n_tracks; i++)
		if (g->rows[i].spans)
			k[g->n_order++] = (struct tkey){ g->m.t[i].pid, g->m.t[i].tid, i };
	if (g->n_order)
		qsort(k, g->n_order, sizeof(*k), cmp_tkey);
	for (uint32_t i = 0; i < g->n_order; i++)
		g->order[i] = k[i].i;
	free(k);
	g->x0 = LABEL_W + 10;
	g->x1 = WIDTH - RIGHT;
	g->legend_h = 18.0 * (1 + ((g->n_cats < LEGEND_MAX ? g->n_cats : LEGEND_MAX) + 5) / 6);
	g->axis_y = 40 + g->legend_h + 20;
	y = g->axis_y + 10;
	for (uint32_t j = 0; j < g->n_order; j++) {
		struct row *w = &g->rows[g->order[j]];

		if (j >= max_rows) {
			g->hidden_spans += w->spans;
			continue;
		}
		w->y = y;
		y += w->sub * SUB_H + ROW_GAP;
		g->drawn_spans += w->spans;
		g->n_drawn++;
	}
	g->height = y + (g->n_order > g->n_drawn ? 30 : 10);
	return 0;
}

static double x_of(const struct gantt *g, uint64_t t)
{
	if (t <= g->t0)
		return g->x0;
	if (t >= g->t1)
		return g->x1;
	return g->x0 + (double)(t - g->t0) * (g->x1 - g->x0) / (double)(g->t1 - g->t0);
}

static void put_duration(FILE *out, uint64_t ns)
{
	if (ns >= 1000000000)
		fprintf(out, "%.3f s", (double)ns / 1e9);
	else if (ns >= 1000000)
		fprintf(out, "%.3f ms", (double)ns / 1e6);
	else if (ns >= 1000)
		fprintf(out, "%.3f us", (double)ns / 1e3);
	else
		fprintf(out, "%" PRIu64 " ns", ns);
}

/* A tick step of 1, 2 or 5 x 10^k ns giving at most ~10 ticks. */
static uint64_t tick_step(uint64_t range)
{
	uint64_t p = 1;

	for (;;) {
		if (range / p <= 10)
			return p;
		if (range / (2 * p) <= 10)
			return 2 * p;
		if (range / (5 * p) <= 10)
			return 5 * p;
		if (p > UINT64_MAX / 100)
			return p * 10;
		p *= 10;
	}
}

static void put_tick_label(FILE *out, uint64_t v, uint64_t step)
{
	static const struct {
		uint64_t div;
		const char *unit;
	} units[] = { { 1000000000, "s" }, { 1000000, "ms" }, { 1000, "us" }, { 1, "ns" } };
	uint32_t u = 0, dec = 0;
	uint64_t t;

	while (units[u].div > step && u < 3)
		u++;
	for (t = units[u].div; step % t != 0 && dec < 6; t /= 10)
		dec++;
	fprintf(out, "+%.*f %s", (int)dec, (double)v / (double)units[u].div, units[u].unit);
}

static void put_axis(const struct gantt *g, FILE *out)
{
	uint64_t range = g->t1 - g->t0, step = tick_step(range);

	fprintf(out,
		"<g class=\"axis\"><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
		"stroke=\"#333\"/>\n",
		g->x0, g->axis_y, g->x1, g->axis_y);
	for (uint64_t v = 0; v <= range; v += step) {
		double x = x_of(g, g->t0 + v);

		fprintf(out,
			"<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
			"stroke=\"#ddd\"/><text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">",
			x, g->axis_y, x, g->height - 10, x, g->axis_y - 5);
		put_tick_label(out, v, step);
		fputs("</text>\n", out);
		if (v > UINT64_MAX - step)
			break;
	}
	fputs("</g>\n", out);
}

static void put_legend(const struct gantt *g, FILE *out)
{
	uint32_t n = g->n_cats < LEGEND_MAX ? g->n_cats : LEGEND_MAX;

	for (uint32_t i = 0; i < n; i++) {
		double x = 10 + (i % 6) * 230.0, y = 40 + (i / 6) * 18.0;

		fprintf(out,
			"<g class=\"lg\"><rect x=\"%.0f\" y=\"%.0f\" width=\"12\" height=\"12\" "
			"fill=\"%s\"/><text x=\"%.0f\" y=\"%.0f\">",
			x, y, palette[i % N_COLOURS], x + 16, y + 10);
		put_xml(out, g->cats[i][0] ? g->cats[i] : "(no category)");
		fputs("</text></g>\n", out);
	}
	if (g->n_cats > n)
		fprintf(out, "<text x=\"10\" y=\"%.0f\">+%u more categories</text>\n",
			40 + ((n + 5) / 6) * 18.0, g->n_cats - n);
}

/* Characters (not bytes) of a UTF-8 string. */
static size_t chars(const char *s)
{
	size_t n = 0;

	for (; *s; s++)
		n += ((unsigned char)*s & 0xc0) != 0x80;
	return n;
}

/* @s cut to its first @keep characters. */
static void cut_chars(char *s, size_t keep)
{
	for (size_t n = 0; *s; s++)
		if (((unsigned char)*s & 0xc0) != 0x80 && n++ == keep) {
			*s = '\0';
			return;
		}
}

/*
 * Row labels fit the LABEL_W column: "<pid>/<thread name>", then the source's file
 * name in parentheses only when the whole still fits LABEL_CHARS characters (11 px
 * sans-serif is about 6 px a character); a longer label is cut with "...". The
 * column is clipped as well, so no label can run into the plot in any font.
 */
static void put_row_labels(const struct gantt *g, FILE *out)
{
	const struct rp_report *r = g->r;

	fprintf(out,
		"<defs><clipPath id=\"labels\"><rect x=\"0\" y=\"0\" width=\"%.0f\" "
		"height=\"%.0f\"/></clipPath></defs>\n<g clip-path=\"url(#labels)\">\n",
		LABEL_W - 6, g->height);
	for (uint32_t k = 0; k < g->n_drawn; k++) {
		uint32_t i = g->order[k];
		const struct rp_export_track *t = &g->m.t[i];
		const struct rp_export_proc *p = &g->m.p[t->proc];
		const char *src = p->source < r->n_sources ? r->sources[p->source].name : "";
		const char *base = strrchr(src, '/');
		char label[200];

		snprintf(label, sizeof(label), "%u/%s", t->pid, t->name);
		if (chars(label) + 3 + chars(base ? base + 1 : src) <= LABEL_CHARS)
			snprintf(label + strlen(label), sizeof(label) - strlen(label), " (%s)",
				 base ? base + 1 : src);
		if (chars(label) > LABEL_CHARS) {
			cut_chars(label, LABEL_CHARS - 3);
			strcat(label, "...");
		}
		fprintf(out, "<text x=\"5\" y=\"%.1f\">", g->rows[i].y + 10);
		put_xml(out, label);
		fputs("</text>\n", out);
	}
	fputs("</g>\n", out);
}

static void put_spans(const struct gantt *g, FILE *out)
{
	const struct rp_report_recorder *rec = &g->r->recorder;
	for (uint32_t i = 0; i < rec->n_spans; i++) {
		const struct rp_report_rspan *s = &rec->spans[i];
		const struct rp_report_fn *f;
		const struct row *w;
		double x, x2;

		if (!rp_export_keep_span(g->o, s->start_ns, s->dur_ns) || s->fn >= g->r->n_fns ||
		    s->track >= rec->n_tracks)
			continue;
		w = &g->rows[s->track];
		if (w->y == 0) /* a hidden row */
			continue;
		f = &g->r->fns[s->fn];
		x = x_of(g, s->start_ns);
		x2 = x_of(g, s->start_ns + s->dur_ns);
		if (x2 - x < MIN_W)
			x2 = x + MIN_W;
		fprintf(out,
			"<rect class=\"s\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.0f\" "
			"fill=\"%s\"><title>",
			x, w->y + (s->depth < MAX_SUB ? s->depth : MAX_SUB - 1) * SUB_H, x2 - x,
			SUB_H - 1, palette[g->cat_of[s->fn] % N_COLOURS]);
		put_xml(out, f->name);
		fputs(" [", out);
		put_xml(out, f->category);
		fputs("] at +", out);
		put_duration(out, s->start_ns - (s->start_ns < g->t0 ? s->start_ns : g->t0));
		fputs(", ", out);
		put_duration(out, s->dur_ns);
		if (s->step)
			fprintf(out, ", step %" PRIu64, s->step - 1);
		fputs("</title></rect>\n", out);
	}
}

static void put_svg(const struct gantt *g, FILE *out)
{
	const struct rp_report_recorder *rec = &g->r->recorder;

	fprintf(out,
		"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
		"viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"11\">\n"
		"<rect class=\"bg\" width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
		"<text x=\"10\" y=\"20\" font-size=\"14\">ringprof: %" PRIu64 " spans drawn "
		"on %u of %u tracks; the recorder kept %u of %" PRIu64 " (%" PRIu64 " wrapped); ",
		WIDTH, g->height, WIDTH, g->height, g->drawn_spans, g->n_drawn, g->n_order,
		rec->n_spans, rec->spans_seen, rec->wrapped);
	put_duration(out, g->t1 - g->t0);
	fprintf(out, " from t=%" PRIu64 " ns</text>\n", g->t0);
	put_legend(g, out);
	put_axis(g, out);
	put_row_labels(g, out);
	put_spans(g, out);
	if (g->n_order > g->n_drawn)
		fprintf(out,
			"<text x=\"10\" y=\"%.0f\" fill=\"#a00\">%u more tracks (%" PRIu64
			" spans) not drawn (--gantt-rows)</text>\n",
			g->height - 12, g->n_order - g->n_drawn, g->hidden_spans);
	fputs("</svg>\n", out);
}

int rp_render_gantt(const struct rp_report *r, FILE *out, const struct rp_export_opts *o)
{
	const struct rp_report_recorder *rec = &r->recorder;
	struct gantt g = { .r = r, .o = o };
	bool *used = calloc(r->n_fns ? r->n_fns : 1, sizeof(*used));
	int err = -ENOMEM;

	g.rows = calloc(rec->n_tracks ? rec->n_tracks : 1, sizeof(*g.rows));
	if (!used || !g.rows || rp_export_map_build(r, &g.m) != 0)
		goto out;
	if ((err = scan(&g, used)) || (err = collect_cats(&g, used)) || (err = layout(&g)))
		goto out;
	put_svg(&g, out);
	err = fflush(out) || ferror(out) ? -EIO : 0;
out:
	rp_export_map_free(&g.m);
	free(used);
	free(g.rows);
	free(g.order);
	free(g.cats);
	free(g.cat_of);
	return err;
}
