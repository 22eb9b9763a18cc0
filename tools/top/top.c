// SPDX-License-Identifier: MIT
/*
 * `ringprof top`: a running engine, live. Every second it connects to the engine's
 * socket (serve.h: "snapshot\n" answers a framed MessagePack snapshot), decodes the
 * report and draws one frame with ncurses: a header (session, event range, events/s
 * over the selected window's length from the fetches remembered, dropped, late,
 * truncated, caps hit by name, off-CPU time, counters), the concurrency distributions
 * (overall, roots) over the selected window, a level at its cap marked (≥255), a table
 * per name (calls, rate/s, self%, off%, cum%, p50/p90/p99) and, room permitting, the
 * bottleneck lists and the slowest spans. Keys: w cycles the window (all time, then
 * each one the report has); 1-6 sort by a column (calls ... p99, as py-spy top's
 * digits), < > move the sort a column (as htop's), s to the next; v the view (names;
 * sources, one row per producer process or file; threads, one row per thread or
 * request track of the flight recorder's recent spans); / filters by name;
 * arrows/PgUp/PgDn/Home/End (or j/k/g/G) scroll, p or Space pauses, h or ? shows the
 * help, r refreshes, q quits. Every line fits the screen: a header line wraps between
 * its fields, the table leaves out columns (p90 under 100 columns, rate/s and off%
 * under 70, p50 under 60) before the name loses its room. A DROPPING line at the top
 * says producers lost events since the last frame.
 *
 * The frame is plain text built by one function (frame()), so --once, and stdout
 * that is not a terminal, get the same frame without ncurses and no escape code.
 * The terminal is restored on q, SIGINT, SIGTERM and when the engine goes away (then
 * a message and exit status 1).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <langinfo.h>
#include <limits.h>
#include <locale.h>
#include <ncurses.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "render_priv.h" /* rp_render_safe_*: names may hold ESC and bad UTF-8 */
#include "serve.h"
#include "snapshot.h"

/* In the table's column order: key 1 sorts by calls, ... 6 by p99 (as py-spy top's
 * digits); < and > move to the neighbouring column (as htop's). */
enum sort_key { SORT_CALLS, SORT_SELF, SORT_CUM, SORT_P50, SORT_P90, SORT_P99, SORT_KEYS };
static const char *const sort_names[SORT_KEYS] = { "calls", "self", "cum",
						   "p50",   "p90",  "p99" };
enum view { VIEW_NAMES, VIEW_SOURCES, VIEW_THREADS, VIEWS };
static const char *const view_names[VIEWS] = { "names", "sources", "threads" };

#define HIST_MAX 320 /* fetches remembered: a 5 min window at one a second */
#define RATE_NS_DEFAULT 10000000000ull /* events/s over the last 10 s, all time */

/* One table row, all-time or over a window. */
struct row {
	const struct rp_report_fn *fn;
	uint64_t calls, self_ns, cum_ns, p50, p90, p99;
	bool q; /* p50..p99 exist (else "-": no sketch) */
};

struct top {
	char sock[PATH_MAX];
	const char *session;
	struct rp_report cur, prev;
	uint64_t cur_at, prev_at; /* CLOCK_MONOTONIC of the fetches; 0: none */
	unsigned win;		  /* 0: all time; i: cur.windows[i - 1] */
	const char *want_win;	  /* --window, matched once a report is there */
	enum sort_key sort;
	enum view view;
	uint32_t scroll, n_rows; /* the first row shown; rows the list has */
	unsigned visible;	 /* rows of it on the screen */
	bool paused, help, filtering;
	char filter[64]; /* names shown contain it (any case); "": all */
	/* events at each fetch, newest last: events/s over the window (or 10 s), not
	 * between two frames, which swings with the engine's drain ticks */
	struct { uint64_t at, events; } hist[HIST_MAX];
	unsigned n_hist;
	const char *ge;	  /* the capped-figure mark: "≥", or ">=" off UTF-8 */
	int col_at[SORT_KEYS], col_w[SORT_KEYS]; /* the table's columns, as drawn */
};

static volatile sig_atomic_t quit_signal;

static void on_quit(int sig)
{
	quit_signal = sig;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* --- fetching --- */

static int read_all(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len > 0) {
		ssize_t n = read(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n == 0 ? -ECONNRESET : -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Ask the engine at @path for a snapshot into @r. @return 0 or -errno, @why set. */
static int fetch(const char *path, struct rp_report *r, char why[RP_WHY_MAX])
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = 5 };
	unsigned char hdr[4];
	char *body = NULL;
	uint32_t len;
	int fd, err;

	memset(r, 0, sizeof(*r));
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    send(fd, "snapshot\n", 9, MSG_NOSIGNAL) != 9) {
		err = -errno;
		snprintf(why, RP_WHY_MAX, "%.100s: %s", path, strerror(errno));
		goto out;
	}
	if ((err = read_all(fd, hdr, 4)) != 0) {
		snprintf(why, RP_WHY_MAX, "%.100s: %s", path, strerror(-err));
		goto out;
	}
	if (hdr[0] == 'e') { /* "error: ...\n" */
		char line[RP_WHY_MAX] = "";
		ssize_t n = read(fd, line, sizeof(line) - 1);

		snprintf(why, RP_WHY_MAX, "engine: %.4s%.*s", (const char *)hdr,
			 n > 0 ? (int)strcspn(line, "\n") : 0, line);
		err = -EPROTO;
		goto out;
	}
	len = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 | (uint32_t)hdr[2] << 8 | hdr[3];
	body = len < RP_SERVE_REPLY_MAX ? malloc(len ? len : 1) : NULL;
	if (body == NULL) {
		err = -ENOMEM;
		snprintf(why, RP_WHY_MAX, "%.100s: reply of %" PRIu32 " bytes refused", path, len);
		goto out;
	}
	if ((err = read_all(fd, body, len)) != 0)
		snprintf(why, RP_WHY_MAX, "%.100s: %s", path, strerror(-err));
	else
		err = rp_snapshot_decode(body, len, r, why);
out:
	free(body);
	if (fd >= 0)
		close(fd);
	return err;
}

static int refresh_report(struct top *t, char why[RP_WHY_MAX])
{
	struct rp_report r;
	int err = fetch(t->sock, &r, why);

	if (err) {
		rp_report_free(&r);
		return err;
	}
	rp_report_free(&t->prev);
	t->prev = t->cur;
	t->prev_at = t->cur_at;
	t->cur = r;
	t->cur_at = mono_ns();
	if (t->n_hist > 0 && r.events < t->hist[t->n_hist - 1].events)
		t->n_hist = 0; /* a new engine: its count starts again */
	if (t->n_hist == HIST_MAX)
		memmove(t->hist, t->hist + 1, --t->n_hist * sizeof(t->hist[0]));
	t->hist[t->n_hist].at = t->cur_at;
	t->hist[t->n_hist++].events = r.events;
	if (t->win > t->cur.n_windows)
		t->win = 0;
	for (uint32_t i = 0; t->want_win && i < t->cur.n_windows; i++)
		if (t->cur.windows[i].name && strcmp(t->cur.windows[i].name, t->want_win) == 0) {
			t->win = i + 1;
			t->want_win = NULL;
		}
	return 0;
}

/* --- the frame --- */

static const struct rp_report_window *window_of(const struct top *t)
{
	return t->win > 0 && t->win <= t->cur.n_windows ? &t->cur.windows[t->win - 1] : NULL;
}

/*
 * A duration in 8 columns with a unit that fits it: "950ns", "12.3us", "4.56ms",
 * "1.23s"; three significant digits from 1 us up. ASCII "us": one byte, one column.
 */
static char *dur(char buf[16], uint64_t ns)
{
	if (ns < 1000)
		snprintf(buf, 16, "%" PRIu64 "ns", ns);
	else if (ns < 1000000)
		snprintf(buf, 16, "%.*fus", ns < 10000 ? 2 : ns < 100000 ? 1 : 0, (double)ns / 1e3);
	else if (ns < 1000000000)
		snprintf(buf, 16, "%.*fms",
			 ns < 10000000	  ? 2
			 : ns < 100000000 ? 1
					  : 0,
			 (double)ns / 1e6);
	else
		snprintf(buf, 16, "%.2fs", (double)ns / 1e9);
	return buf;
}

static uint64_t row_key(const struct row *r, enum sort_key k)
{
	switch (k) {
	case SORT_SELF: return r->self_ns;
	case SORT_CALLS: return r->calls;
	case SORT_P50: return r->p50;
	case SORT_P90: return r->p90;
	case SORT_P99: return r->p99;
	default: return r->cum_ns;
	}
}

static enum sort_key sort_by;

static int row_cmp(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	uint64_t kx = row_key(x, sort_by), ky = row_key(y, sort_by);

	if (kx != ky)
		return kx < ky ? 1 : -1;
	return strcmp(x->fn->name ? x->fn->name : "", y->fn->name ? y->fn->name : "");
}

/* A name on one line, cut to @room columns: control characters escaped and bad
 * UTF-8 as U+FFFD (rp_render_safe_char()), so that a name from a producer or a trace
 * file cannot drive the terminal. */
static void put_cut(FILE *out, const char *s, int room)
{
	rp_render_safe_str(out, s, room > 0 ? (size_t)room : 0);
}

/* Does @s contain @needle, ignoring ASCII case? An empty needle matches all. */
static bool matches(const char *s, const char *needle)
{
	size_t n = strlen(needle);

	for (; s && n && *s; s++)
		if (strncasecmp(s, needle, n) == 0)
			return true;
	return n == 0;
}

/* The rows of the selected window (or all time) that pass the filter, sorted. *@n
 * rows; NULL: no memory. */
static struct row *rows_of(const struct top *t, const struct rp_report_window *w, uint32_t *n)
{
	const struct rp_report *r = &t->cur;
	uint32_t i, cap = w ? w->n_fns : r->n_fns;
	struct row *v = calloc(cap + 1, sizeof(*v));

	*n = 0;
	if (v == NULL)
		return NULL;
	for (i = 0; i < cap; i++) {
		if (w != NULL) {
			const struct rp_report_wfn *x = &w->fns[i];

			/* milestones have their own line (milestones()), not rows */
			if (x->fn >= r->n_fns || x->calls == 0 || r->fns[x->fn].milestone)
				continue;
			v[*n] = (struct row){ &r->fns[x->fn], x->calls,	 x->self_ns, x->cum_ns,
					      x->p50_ns,      x->p90_ns, x->p99_ns, true };
		} else if (r->fns[i].calls > 0 && !r->fns[i].milestone) {
			const struct rp_report_fn *f = &r->fns[i];

			v[*n] = (struct row){ f,	 f->calls,  f->self_ns, f->cum_ns,
					      f->p50_ns, f->p90_ns, f->p99_ns,
					      rp_report_fn_has_quantiles(f) };
		} else {
			continue;
		}
		if (matches(v[*n].fn->name, t->filter) || matches(v[*n].fn->category, t->filter))
			(*n)++;
	}
	sort_by = t->sort;
	qsort(v, *n, sizeof(*v), row_cmp);
	return v;
}

/* The time the selected window's events cover: from the later of its start and the
 * first event to its end (a window longer than the run would dilute rates). */
static uint64_t covered_ns(const struct rp_report *r, const struct rp_report_window *w)
{
	uint64_t from = w ? (w->t_from > r->t_first ? w->t_from : r->t_first) : r->t_first;
	uint64_t to = w ? w->t_to : r->t_last;

	return to > from ? to - from : 0;
}

/*
 * events/s over the selected window's length (10 s for all time), from the fetches
 * remembered; fewer if top has not run that long. 0 and *@over 0 when there are
 * not two fetches yet.
 */
static double smoothed_rate(const struct top *t, const struct rp_report_window *w,
			    uint64_t *over)
{
	uint64_t len = w && w->t_to > w->t_from ? w->t_to - w->t_from : RATE_NS_DEFAULT;
	unsigned i = t->n_hist;

	*over = 0;
	if (i < 2)
		return 0.0;
	while (i > 1 && t->hist[t->n_hist - 1].at - t->hist[i - 2].at <= len + len / 20)
		i--; /* the oldest fetch still inside the window (5% slack for jitter) */
	if (i == t->n_hist)
		i--;
	*over = t->hist[t->n_hist - 1].at - t->hist[i - 1].at;
	return *over ? (double)(t->hist[t->n_hist - 1].events - t->hist[i - 1].events) * 1e9 /
			       (double)*over
		     : 0.0;
}

/* Which caps were hit: "name_cap 12, window_level_cap 3" (the largest first, as many
 * as fit @room bytes, then "+N more"). @return their total. */
static uint64_t caps_hit(const struct rp_report *r, char *buf, size_t room)
{
	bool done[RP_ANOM_KIND_COUNT] = { false };
	uint64_t total = 0;
	size_t len = 0;
	unsigned more = 0;

	buf[0] = '\0';
	for (int k = 0; k < RP_ANOM_KIND_COUNT; k++)
		if (strstr(rp_anomaly_names[k], "_cap") != NULL)
			total += r->anomalies[k];
		else
			done[k] = true;
	for (;;) {
		int best = -1;
		char item[64];

		for (int k = 0; k < RP_ANOM_KIND_COUNT; k++)
			if (!done[k] && r->anomalies[k] &&
			    (best < 0 || r->anomalies[k] > r->anomalies[best]))
				best = k;
		if (best < 0)
			break;
		done[best] = true;
		snprintf(item, sizeof(item), "%s%s %" PRIu64, len ? ", " : "",
			 rp_anomaly_names[best], r->anomalies[best]);
		if (more == 0 && len + strlen(item) + 10 < room) {
			memcpy(buf + len, item, strlen(item) + 1);
			len += strlen(item);
		} else {
			more++;
		}
	}
	if (more)
		snprintf(buf + len, room - len, ", +%u more", more);
	return total;
}

/*
 * Prints @line within @width columns: a line too long is wrapped where its fields
 * part (two spaces), the rest indented, so that every figure stays whole on a
 * narrow screen; a field longer than a line is cut. @return the lines written.
 */
static unsigned put_line(FILE *out, const char *line, int width)
{
	unsigned n = 1;
	bool more = false;

	while ((int)rp_render_safe_width(line) > width - (more ? 2 : 0)) {
		const char *cut = NULL;
		int room = width - (more ? 2 : 0);

		/* the last field boundary that leaves this line within @room */
		for (const char *p = strstr(line, "  "); p; p = strstr(p + 1, "  ")) {
			char head[512];

			snprintf(head, sizeof(head), "%.*s", (int)(p - line), line);
			if ((int)rp_render_safe_width(head) > room)
				break;
			cut = p;
		}
		if (cut == NULL || cut == line)
			break;
		fprintf(out, "%s%.*s\n", more ? "  " : "", (int)(cut - line), line);
		line = cut + strspn(cut, " ");
		more = true;
		n++;
	}
	if (more)
		fputs("  ", out);
	put_cut(out, line, width - (more ? 2 : 0));
	fputc('\n', out);
	return n;
}

#define TOP_ITEM 120 /* an item's room, with its NUL */

/* A header line of items after a label, as many as fit @width in their order, then
 * "+N more" for the rest (charged_line(), milestones()). */
struct items {
	char line[512];
	size_t len;
	uint32_t all, shown;
	int width;
};

static void items_start(struct items *l, const char *label, int width)
{
	l->len = (size_t)snprintf(l->line, sizeof(l->line), "%s", label);
	l->all = l->shown = 0;
	l->width = width;
}

/* @item, @k its snprintf() result: kept if every item before it was and it fits. */
static void items_add(struct items *l, const char *item, int k)
{
	l->all++;
	if (l->all != l->shown + 1 || k < 0 || (size_t)k >= TOP_ITEM ||
	    (int)l->len + k + 12 > l->width || l->len + (size_t)k >= sizeof(l->line))
		return; /* counted in "+N more" */
	memcpy(l->line + l->len, item, (size_t)k + 1);
	l->len += (size_t)k;
	l->shown++;
}

/* @return the lines written: 0 with no item. */
static unsigned items_end(struct items *l, FILE *out)
{
	if (l->all == 0)
		return 0;
	if (l->shown < l->all)
		snprintf(l->line + l->len, sizeof(l->line) - l->len, "  +%" PRIu32 " more",
			 l->all - l->shown);
	put_cut(out, l->line, l->width);
	fputc('\n', out);
	return 1;
}

/*
 * Batched work charged to requests (1.6, engine/core/charge.h), all time: per request
 * name the mean charged to a request and the shares, as many as fit one line. Only
 * when something was charged. @return the lines written.
 */
static unsigned charged_line(const struct top *t, FILE *out, int width)
{
	const struct rp_report *r = &t->cur;
	struct items l;

	items_start(&l, "charged (all time)", width);
	for (uint32_t i = 0; i < r->n_fns; i++) {
		const struct rp_report_fn *f = &r->fns[i];
		char name[40], a[16], item[TOP_ITEM];

		if (f->charged == 0)
			continue;
		items_add(&l, item,
			  snprintf(item, sizeof(item), "  %s %s/req (%" PRIu64 " shares)",
				   rp_render_safe_buf(name, sizeof(name), f->name ? f->name : "?"),
				   f->calls ? dur(a, f->charged_ns / f->calls) : "-", f->charged));
	}
	return items_end(&l, out);
}

/*
 * Request milestones (1.5, engine/core/marks.h: time from a request's start to its mark,
 * "first_token" for a TTFT) over the selected window, as many as fit one line: p50/p99
 * and how many requests marked it ("-" without a sketch). @return the lines written.
 */
static unsigned milestones(const struct top *t, FILE *out, int width)
{
	const struct rp_report *r = &t->cur;
	const struct rp_report_window *w = window_of(t);
	uint32_t cap = w ? w->n_fns : r->n_fns;
	struct items l;

	items_start(&l, "milestones", width);
	for (uint32_t i = 0; i < cap; i++) {
		const struct rp_report_fn *f = w ? (w->fns[i].fn < r->n_fns ? &r->fns[w->fns[i].fn]
									: NULL)
						 : &r->fns[i];
		uint64_t calls = w ? w->fns[i].calls : f ? f->calls : 0;
		bool q = f && (w ? true : rp_report_fn_has_quantiles(f));
		char name[40], a[16] = "-", b[16] = "-", item[TOP_ITEM];

		if (f == NULL || !f->milestone || calls == 0)
			continue;
		if (q) {
			dur(a, w ? w->fns[i].p50_ns : f->p50_ns);
			dur(b, w ? w->fns[i].p99_ns : f->p99_ns);
		}
		items_add(&l, item,
			  snprintf(item, sizeof(item), "  %s p50 %s p99 %s (%" PRIu64 ")",
				   rp_render_safe_buf(name, sizeof(name), f->name ? f->name : "?"),
				   a, b, calls));
	}
	return items_end(&l, out);
}

/*
 * The header, every line within @width: session, events and their rate; losses and
 * caps (each cap by name); window, sort, view, filter, off-CPU; counters; milestones.
 * @return the lines written.
 */
static unsigned header(const struct top *t, FILE *out, int width)
{
	const struct rp_report *r = &t->cur;
	uint64_t span = r->t_last > r->t_first ? r->t_last - r->t_first : 0, caps, over;
	const struct rp_report_window *w = window_of(t);
	char line[512], wname[48], session[48], cap_names[256], rate[64];
	double ev_s = smoothed_rate(t, w, &over);
	unsigned n = 0;
	size_t len;

	caps = caps_hit(r, cap_names, (size_t)(width > 40 ? width - 10 : 30));
	if (r->dropped || r->anomalies[RP_ANOM_DROP_LOST]) { /* first: figures miss these */
		snprintf(line, sizeof(line), "LOST: %" PRIu64 " records dropped (full rings), %"
			 PRIu64 " spans cut (rows with !); docs/live.md", r->dropped,
			 r->anomalies[RP_ANOM_DROP_LOST]);
		n += put_line(out, line, width);
	}
	if (over > 0) /* over the window, not between two frames */
		snprintf(rate, sizeof(rate), "%.0f events/s (%.0f s)", ev_s, (double)over / 1e9);
	else if (span > 0) /* one report so far: the average over its time range */
		snprintf(rate, sizeof(rate), "%.0f events/s (average)",
			 (double)r->events * 1e9 / (double)span);
	else
		snprintf(rate, sizeof(rate), "- events/s");
	snprintf(line, sizeof(line), "ringprof top  session %s  events %" PRIu64 " over %" PRIu64
		 ".%01" PRIu64 " s  %s%s", rp_render_safe_buf(session, sizeof(session), t->session),
		 r->events, span / 1000000000u, span / 100000000u % 10, rate,
		 t->paused ? "  PAUSED" : "");
	n += put_line(out, line, width);
	snprintf(line, sizeof(line), "dropped %" PRIu64 "  late %" PRIu64 "  truncated %" PRIu64
		 "  sources %" PRIu32 "  caps hit %" PRIu64 "%s%s%s", r->dropped, r->late,
		 r->truncated, r->n_sources, caps, caps ? " (" : "", cap_names, caps ? ")" : "");
	n += put_line(out, line, width);
	len = (size_t)snprintf(line, sizeof(line), "window %s  sort %s  view %s",
			       rp_render_safe_buf(wname, sizeof(wname),
						  w ? (w->name ? w->name : "?") : "all"),
			       sort_names[t->sort], view_names[t->view]);
	if (r->offcpu.state == RP_OFFCPU_ON && r->offcpu.total_ns > 0)
		len += (size_t)snprintf(line + len, sizeof(line) - len,
					"  off-CPU %.1f s (%" PRIu32 " threads)",
					(double)r->offcpu.total_ns / 1e9, r->offcpu.threads);
	else if (r->offcpu.state == RP_OFFCPU_ON)
		len += (size_t)snprintf(line + len, sizeof(line) - len, "  off-CPU on");
	else if (r->offcpu.state == RP_OFFCPU_REFUSED)
		len += (size_t)snprintf(line + len, sizeof(line) - len, "  off-CPU refused");
	if (t->filter[0]) {
		char filter[80];

		snprintf(line + len, sizeof(line) - len, "  filter %s",
			 rp_render_safe_buf(filter, sizeof(filter), t->filter));
	}
	n += put_line(out, line, width);
	if (r->n_counters > 0) { /* the newest value of each, as many as fit one line */
		uint32_t shown = 0;

		len = (size_t)snprintf(line, sizeof(line), "counters");
		for (uint32_t i = 0; i < r->n_counters; i++) {
			char name[40], item[80];
			int k = snprintf(item, sizeof(item), "  %s %" PRId64,
					 rp_render_safe_buf(name, sizeof(name),
							    r->counters[i].name ?
								    r->counters[i].name : "?"),
					 r->counters[i].last);

			/* room for this one, and for "  +N more" if others follow */
			if (k < 0 || (size_t)k >= sizeof(item) ||
			    (int)len + k + (i + 1 < r->n_counters ? 12 : 0) > width)
				break;
			memcpy(line + len, item, (size_t)k + 1);
			len += (size_t)k;
			shown++;
		}
		if (shown < r->n_counters)
			snprintf(line + len, sizeof(line) - len, "  +%" PRIu32 " more",
				 r->n_counters - shown);
		put_cut(out, line, width); /* one line: counters never push the table out */
		fputc('\n', out);
		n++;
	}
	n += milestones(t, out, width);
	return n + charged_line(t, out, width);
}

/* Drops first: a line above everything else while producers are losing events.
 * @return the lines written. */
static unsigned drop_alert(const struct top *t, FILE *out, int width)
{
	const struct rp_report *r = &t->cur;
	char line[256];

	if (t->prev_at == 0 || r->dropped <= t->prev.dropped)
		return 0;
	snprintf(line, sizeof(line),
		 "DROPPING: %" PRIu64 " events lost in the last %.1f s (rings full: the engine "
		 "falls behind, or RINGPROF_RING_EVENTS is small)",
		 r->dropped - t->prev.dropped, (double)(t->cur_at - t->prev_at) / 1e9);
	return put_line(out, line, width);
}

/* A concurrency level: "255", or "≥255" when it is the cap (levels above it are
 * counted at it, so the true figure may be higher). */
static const char *level(const struct top *t, char buf[16], uint32_t v, uint32_t cap)
{
	snprintf(buf, 16, "%s%" PRIu32, cap && v >= cap ? t->ge : "", v);
	return buf;
}

/* Concurrency: the selected window's levels are capped at max_window_level (the
 * sub-windows keep that many levels); all time at the sweep's own cap, where time
 * was spent above it (over_cap_ns: its max is then the cap). */
static unsigned conc_lines(const struct top *t, FILE *out, int width)
{
	const struct rp_report_window *w = window_of(t);
	const struct rp_report_conc *c = w && w->n_conc ? w->conc : t->cur.conc;
	uint32_t n = w && w->n_conc ? w->n_conc : t->cur.n_conc;
	char name[48], line[256], a[16], b[16], d[16], e[16];
	unsigned i, lines = 0;

	for (i = 0; i < n && i < 2; i++) { /* "now" from the all-time rows */
		uint32_t cap = w && w->n_conc ? t->cur.caps.max_window_level : 0;

		if (c[i].over_cap_ns > 0 && (cap == 0 || c[i].max < cap))
			cap = c[i].max;
		snprintf(line, sizeof(line),
			 "concurrency %-7s now %" PRIu32 "  p50 %s  p90 %s  p99 %s  max %s  mean %"
			 PRIu64 ".%03" PRIu64,
			 rp_render_safe_buf(name, sizeof(name), c[i].name ? c[i].name : "?"),
			 i < t->cur.n_conc ? t->cur.conc[i].now : 0, level(t, a, c[i].p50, cap),
			 level(t, b, c[i].p90, cap), level(t, d, c[i].p99, cap),
			 level(t, e, c[i].max, cap), c[i].mean_milli / 1000, c[i].mean_milli % 1000);
		lines += put_line(out, line, width);
	}
	if (n == 0) {
		fputs("concurrency -\n", out);
		lines = 1;
	}
	if (rp_report_has_requests(&t->cur)) { /* all time: request spans only */
		snprintf(line, sizeof(line),
			 "requests in flight now %" PRIu32 "  p50 %" PRIu32 "  p99 %" PRIu32
			 "  max %" PRIu32 " (all time)",
			 t->cur.requests.now, t->cur.requests.p50, t->cur.requests.p99,
			 t->cur.requests.max);
		lines += put_line(out, line, width);
	}
	return lines;
}

/*
 * The names table. Columns: calls, rate/s, self%, [off%: the part of the name's
 * self time its thread was switched out, all time, where measured], cum%, p50, [p90],
 * p99, then the name, which gets the rest of the line: p90 from 100 columns on; below
 * 70 columns rate/s goes (calls says as much), below 60 p50, so that the name keeps
 * at least 12 columns. Where each sortable column lands is kept in t->col_at/col_w
 * (the screen highlights the sorted one). @first: the first row shown (scrolling),
 * @limit rows at most (0: all).
 */
static uint32_t table(struct top *t, FILE *out, uint32_t first, unsigned limit, int width)
{
	const struct rp_report_window *w = window_of(t);
	const struct rp_report *r = &t->cur;
	uint64_t range = covered_ns(r, w), total_self = 0;
	bool p90 = width >= 100, off = r->offcpu.state == RP_OFFCPU_ON && width >= 70;
	bool rate = width >= 70, p50 = width >= 60;
	int x = 0, room = width - 10 - 1 - 6 - 1 - 6 - 1 - 8 - 2;
	uint32_t n, i;
	struct row *v = rows_of(t, w, &n);
	char a[16], b[16], c[16];

	if (v == NULL)
		return 0;
	room -= (rate ? 10 : 0) + (off ? 7 : 0) + (p50 ? 9 : 0) + (p90 ? 9 : 0);
	for (i = 0; i < n; i++)
		total_self += v[i].self_ns;
	for (int k = 0; k < SORT_KEYS; k++)
		t->col_w[k] = 0;
#define COL(key, wid, fmt, ...)                                                             \
	do {                                                                                \
		if ((key) < SORT_KEYS) {                                                    \
			t->col_at[key] = x;                                                 \
			t->col_w[key] = (wid);                                              \
		}                                                                           \
		x += fprintf(out, fmt, __VA_ARGS__);                                        \
	} while (0)
	COL(SORT_CALLS, 10, "%10s ", "calls");
	if (rate)
		COL(SORT_KEYS, 9, "%9s ", "rate/s");
	COL(SORT_SELF, 6, "%6s ", "self%");
	if (off)
		COL(SORT_KEYS, 6, "%6s ", "off%");
	COL(SORT_CUM, 6, "%6s ", "cum%");
	if (p50)
		COL(SORT_P50, 8, "%8s ", "p50");
	if (p90)
		COL(SORT_P90, 8, "%8s ", "p90");
	COL(SORT_P99, 8, "%8s  ", "p99");
#undef COL
	fprintf(out, "%s\n", "name [category]");
	for (i = first; i < n && (limit == 0 || i < first + limit); i++) {
		const struct row *y = &v[i];
		const char *name = y->fn->name ? y->fn->name : "";

		/* "!": drops cut some of this name's calls (its row is short by them) */
		fprintf(out, "%10" PRIu64 "%c", y->calls, y->fn->drop_lost ? '!' : ' ');
		if (rate)
			fprintf(out, "%9.1f ",
				range ? (double)y->calls * 1e9 / (double)range : 0.0);
		fprintf(out, "%6.1f ",
			total_self ? 100.0 * (double)y->self_ns / (double)total_self : 0.0);
		/* off-CPU time is a part of self time: a share above 100% is not a
		 * figure to show (the engine's attribution went wrong), so "-" */
		if (off && y->fn->self_ns > 0 && (int64_t)y->fn->self_ns > 0 &&
		    y->fn->offcpu_ns <= y->fn->self_ns)
			fprintf(out, "%6.1f ",
				100.0 * (double)y->fn->offcpu_ns / (double)y->fn->self_ns);
		else if (off)
			fprintf(out, "%6s ", y->fn->self_ns ? "-" : "0.0");
		fprintf(out, "%6.1f ",
			total_self ? 100.0 * (double)y->cum_ns / (double)total_self : 0.0);
		if (p50)
			fprintf(out, "%8s ", y->q ? dur(a, y->p50) : "-");
		if (p90)
			fprintf(out, "%8s ", y->q ? dur(b, y->p90) : "-");
		fprintf(out, "%8s  ", y->q ? dur(c, y->p99) : "-");
		put_cut(out, name, room < 8 ? 8 : room);
		if (y->fn->category && y->fn->category[0] && /* whole, or not at all */
		    (int)(rp_render_safe_width(name) + rp_render_safe_width(y->fn->category)) +
				    3 <= room) {
			fputs(" [", out);
			put_cut(out, y->fn->category, room);
			fputc(']', out);
		}
		fputc('\n', out);
	}
	free(v);
	return n;
}

/* Per source (a producer process or a file): what it sent and lost. */
static uint32_t sources_view(const struct top *t, FILE *out, uint32_t first, unsigned limit,
			     int width)
{
	const struct rp_report *r = &t->cur;
	uint32_t n = 0;

	fprintf(out, "%8s %11s %9s %8s %9s %7s  %s\n", "pid", "events", "dropped", "late",
		"truncated", "state", "source");
	for (uint32_t i = 0; i < r->n_sources; i++) {
		const struct rp_report_source *s = &r->sources[i];
		const char *state = s->flags & RP_SRC_DEAD	? "dead"
				    : s->flags & RP_SRC_EXITED	? "exited"
				    : s->flags & RP_SRC_FILE	? "file"
				    : s->flags & RP_SRC_REFUSED ? "refused"
								: "live";

		if (!matches(s->name, t->filter) || n++ < first || (limit && n > first + limit))
			continue;
		fprintf(out,
			"%8" PRId32 " %11" PRIu64 " %9" PRIu64 " %8" PRIu64 " %9" PRIu64 " %7s  ",
			s->pid, s->events, s->dropped, s->late, s->truncated, state);
		put_cut(out, s->name, width - 59 > 8 ? width - 59 : 8);
		fputc('\n', out);
	}
	return n;
}

/* Per thread (and per request track), from the flight recorder's recent spans: spans,
 * busy time (its roots' durations) and the name that took most of it. */
struct trow {
	uint32_t track, spans, top_fn;
	uint64_t busy_ns, top_ns;
};

static int trow_cmp(const void *a, const void *b)
{
	const struct trow *x = a, *y = b;

	if (x->busy_ns != y->busy_ns)
		return x->busy_ns < y->busy_ns ? 1 : -1;
	return x->track < y->track ? -1 : x->track > y->track;
}

static uint32_t threads_view(const struct top *t, FILE *out, uint32_t first, unsigned limit,
			     int width)
{
	const struct rp_report_recorder *rec = &t->cur.recorder;
	const struct rp_report *r = &t->cur;
	struct trow *v = calloc(rec->n_tracks + 1, sizeof(*v));
	uint32_t n = 0, shown = 0;
	char a[16], b[16];

	if (v == NULL)
		return 0;
	for (uint32_t i = 0; i < rec->n_tracks; i++)
		v[i].track = i;
	for (uint32_t i = 0; i < rec->n_spans; i++) { /* roots only: busy, and its top name */
		const struct rp_report_rspan *s = &rec->spans[i];

		if (s->track >= rec->n_tracks || s->depth != 0)
			continue;
		v[s->track].spans++;
		v[s->track].busy_ns += s->dur_ns;
		if (s->dur_ns > v[s->track].top_ns) {
			v[s->track].top_ns = s->dur_ns;
			v[s->track].top_fn = s->fn;
		}
	}
	qsort(v, rec->n_tracks, sizeof(*v), trow_cmp);
	fprintf(out, "%8s %-14s %8s %10s %10s  %s\n", "pid", "thread", "spans", "busy", "longest",
		"longest name");
	for (uint32_t i = 0; i < rec->n_tracks; i++) {
		const struct rp_report_rtrack *k = &rec->tracks[v[i].track];
		const char *name = v[i].top_fn < r->n_fns ? r->fns[v[i].top_fn].name : "?";
		char label[40], pid[16], safe[24];

		if (v[i].spans == 0 || (!matches(name, t->filter) && !matches(k->tid, t->filter)))
			continue;
		if (n++ < first || (limit && n > first + limit))
			continue;
		if (k->kind == 2)
			snprintf(label, sizeof(label), "request %" PRIu64, k->id);
		else if (k->tid && k->tid[0])
			snprintf(label, sizeof(label), "tid %s",
				 rp_render_safe_buf(safe, 21, k->tid));
		else
			snprintf(label, sizeof(label), "thread %" PRIu64, k->id);
		if (k->pid && k->pid[0])
			rp_render_safe_buf(pid, sizeof(pid), k->pid);
		else if (k->source < r->n_sources && r->sources[k->source].pid > 0)
			snprintf(pid, sizeof(pid), "%" PRId32, r->sources[k->source].pid);
		else
			snprintf(pid, sizeof(pid), "-");
		fprintf(out, "%8s %-14s %8" PRIu32 " %10s %10s  ", pid, label, v[i].spans,
			dur(a, v[i].busy_ns), dur(b, v[i].top_ns));
		put_cut(out, name, width - 57 > 8 ? width - 57 : 8);
		fputc('\n', out);
		shown++;
	}
	free(v);
	(void)shown;
	return n;
}

static void top_list(const struct rp_report *r, FILE *out, const char *what,
		     const struct rp_report_top *v, uint32_t n, unsigned max, int width)
{
	int col = 12;

	if (n == 0)
		return;
	fprintf(out, "top by %-5s", what);
	for (uint32_t i = 0; i < n && i < max; i++) {
		const char *name =
			v[i].fn < r->n_fns && r->fns[v[i].fn].name ? r->fns[v[i].fn].name : "?";

		if (col + 2 + (int)strlen(name) > width)
			break;
		fputs("  ", out);
		put_cut(out, name, width);
		col += 2 + (int)strlen(name);
	}
	fputc('\n', out);
}

/* The bottleneck lists and up to @room - 4 slowest spans, in aligned columns. */
static void bottlenecks(const struct top *t, FILE *out, unsigned room, int width)
{
	const struct rp_report_window *w = window_of(t);
	const struct rp_report_bottlenecks *b = w ? &w->top : &t->cur.bottlenecks;
	const struct rp_report *r = &t->cur;
	char d[16], s[16], c[16];
	bool charged = false; /* the column only when something was charged (1.6) */

	if (room < 2 || (b->n_by_cum == 0 && b->n_slowest == 0))
		return;
	for (uint32_t i = 0; i < b->n_slowest && width >= 70; i++)
		charged = charged || b->slowest[i].charged_ns != 0;
	fputc('\n', out);
	top_list(r, out, "cum", b->by_cum, b->n_by_cum, 6, width);
	top_list(r, out, "self", b->by_self, b->n_by_self, 6, width);
	top_list(r, out, "count", b->by_count, b->n_by_count, 6, width);
	if (b->n_slowest > 0 && room > 5 && charged)
		fprintf(out, "%-8s %9s %9s %9s %5s  %s\n", "slowest", "duration", "self",
			"charged", "conc", "name");
	else if (b->n_slowest > 0 && room > 5)
		fprintf(out, "%-8s %9s %9s %5s  %s\n", "slowest", "duration", "self", "conc",
			"name");
	for (uint32_t i = 0; i < b->n_slowest && i + 5 < room; i++) {
		const struct rp_report_span *sp = &b->slowest[i];
		char conc[16];

		snprintf(conc, sizeof(conc), "%s%" PRIu32, sp->concurrency_known ? "" : "~",
			 sp->concurrency);
		fprintf(out, "%8u %9s %9s ", i + 1, dur(d, sp->dur_ns), dur(s, sp->self_ns));
		if (charged) /* "-": nothing charged to it (not a request, or none) */
			fprintf(out, "%9s ", sp->charged_ns ? dur(c, sp->charged_ns) : "-");
		fprintf(out, "%5s  ", conc);
		put_cut(out, sp->fn < r->n_fns && r->fns[sp->fn].name ? r->fns[sp->fn].name : "?",
			width - 37 - (charged ? 10 : 0) > 8 ? width - 37 - (charged ? 10 : 0) : 8);
		fputc('\n', out);
	}
}

static void ms(FILE *out, uint64_t ns, int width)
{
	fprintf(out, " %*" PRIu64 ".%03" PRIu64, width - 4, ns / 1000000u, ns / 1000u % 1000u);
}

/* Step statistics by phase (all time), when the report has steps: one line each. */
static void steps(const struct top *t, FILE *out, unsigned room)
{
	const struct rp_report *r = &t->cur;

	for (uint32_t i = 0; i < r->n_steps && i < room; i++) {
		const struct rp_report_step_phase *p = &r->steps[i];
		char name[48];

		fprintf(out, "%ssteps %-10s n %-8" PRIu64 " p50", i ? "" : "\n",
			rp_render_safe_buf(name, sizeof(name),
					   p->name && p->name[0] ? p->name : "(none)"),
			p->count);
		ms(out, p->p50_ns, 10);
		fputs(" p95", out);
		ms(out, p->p95_ns, 10);
		fputs(" p99", out);
		ms(out, p->p99_ns, 10);
		fputs(" max", out);
		ms(out, p->max_ns, 10);
		fputc('\n', out);
	}
}

static const char help_text[] =
	"ringprof top: keys\n"
	"\n"
	"  Up/Down, k/j   scroll one row            PgUp/PgDn  scroll one page\n"
	"  Home/End, g/G  first / last row\n"
	"  1 2 3 4 5 6    sort by calls, self, cum, p50, p90, p99 (the sorted column\n"
	"                 is highlighted); < > the column left or right; s the next\n"
	"  w              window: all time, then each rolling window (10s, 1m, 5m)\n"
	"  v              view: names, sources (per process), threads (per thread)\n"
	"  /              filter by name (substring, any case); Enter keeps it,\n"
	"                 Esc clears it\n"
	"  p or Space     pause (the frame stays; the engine keeps running)\n"
	"  r              refresh now\n"
	"  h or ?         this help (any key closes it)\n"
	"  q              quit\n"
	"\n"
	"Durations carry their unit (ns, us, ms, s). rate/s divides by the time the\n"
	"window's events cover; events/s is over the window (10 s for all time). A\n"
	"level marked >= (≥255) is at its cap: the true one may be higher. A DROPPING\n"
	"line at the top means producers are losing events now (their rings are full).\n";

/* The whole frame as text: @rows of screen (0: no limit), @width columns. Returns
 * the number of rows the scrolled list has (for the scroll bounds). */
static uint32_t frame(struct top *t, FILE *out, unsigned rows, int width, unsigned *visible)
{
	const struct rp_report *r = &t->cur;
	unsigned fixed, bottom, limit, st = r->n_steps < 3 ? r->n_steps : 3;
	uint32_t n;

	*visible = 0;
	if (t->help) {
		fputs(help_text, out);
		return 0;
	}
	fixed = header(t, out, width);
	fixed += drop_alert(t, out, width);
	fixed += conc_lines(t, out, width);
	fputc('\n', out);
	fixed += 2; /* that blank line and the list's title */
	/* The list gets the screen but for the header and, when there is room (over 24
	 * rows), the bottleneck lists (up to 3 + 1 + 10 slowest) and the steps. */
	bottom = rows == 0 ? 16 : rows > 40 ? 14 : rows > 30 ? 9 : rows > 24 ? 6 : 0;
	if (rows != 0 && rows <= 24)
		st = 0;
	limit = rows == 0 ? 25 : rows > fixed + bottom + 1 ? rows - fixed - bottom : 1;
	*visible = limit;
	if (t->view == VIEW_SOURCES)
		n = sources_view(t, out, t->scroll, limit, width);
	else if (t->view == VIEW_THREADS)
		n = threads_view(t, out, t->scroll, limit, width);
	else
		n = table(t, out, t->scroll, limit, width);
	if (t->view == VIEW_NAMES) {
		bottlenecks(t, out, bottom > st + 1 ? bottom - st - (st > 0) : 0, width);
		steps(t, out, rows ? st : 16);
	}
	return n;
}

/* --- the screen --- */

static void status_line(const struct top *t, char *buf, size_t len, int width);

static void draw(struct top *t)
{
	char status[PATH_MAX + 128];
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	unsigned rows = (unsigned)(LINES > 2 ? LINES - 1 : 1);
	int y = 0, sx, sw;
	uint32_t n;

	if (m == NULL)
		return;
	n = frame(t, m, rows, COLS, &t->visible);
	fclose(m);
	if (n > 0 && t->scroll >= n) { /* the list shrank (a filter, a new window) */
		t->scroll = n - 1;
		free(buf);
		draw(t);
		return;
	}
	t->n_rows = n;
	status_line(t, status, sizeof(status), COLS);
	erase();
	sx = t->col_at[t->sort];
	sw = t->col_w[t->sort];
	for (char *line = buf, *nl; line && *line && y < LINES - 1; line = nl ? nl + 1 : NULL) {
		bool title = strncmp(line, "     calls", 10) == 0 ||
			     strncmp(line, "     pid", 8) == 0 || strncmp(line, "slowest", 7) == 0;

		nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		if (strncmp(line, "DROPPING", 8) == 0)
			attron(A_BOLD | (has_colors() ? COLOR_PAIR(1) : A_REVERSE));
		if (title)
			attron(A_REVERSE);
		mvaddnstr(y, 0, line, COLS);
		if (title && t->view == VIEW_NAMES && line[5] == 'c' && sw > 0 &&
		    (int)strlen(line) > sx) {
			attron(A_BOLD | A_UNDERLINE);
			if (has_colors())
				attron(COLOR_PAIR(2));
			mvaddnstr(y, sx, line + sx, sw);
		}
		attrset(A_NORMAL);
		y++;
	}
	attron(A_REVERSE);
	mvaddnstr(LINES - 1, 0, status, COLS);
	attrset(A_NORMAL);
	refresh();
	free(buf);
}

static void scroll_by(struct top *t, long d)
{
	long s = (long)t->scroll + d, max = t->n_rows ? (long)t->n_rows - 1 : 0;

	t->scroll = (uint32_t)(s < 0 ? 0 : s > max ? max : s);
}

/* A key while the filter line is being typed. */
static void filter_key(struct top *t, int ch)
{
	size_t n = strlen(t->filter);

	if (ch == '\n' || ch == KEY_ENTER)
		t->filtering = false;
	else if (ch == 27) { /* Esc */
		t->filter[0] = '\0';
		t->filtering = false;
	} else if ((ch == KEY_BACKSPACE || ch == 127 || ch == 8) && n > 0)
		t->filter[n - 1] = '\0';
	else if (ch >= 0x20 && ch < 0x7f && n + 1 < sizeof(t->filter)) {
		t->filter[n] = (char)ch;
		t->filter[n + 1] = '\0';
	}
	t->scroll = 0;
}

static bool key(struct top *t, int ch, bool *fetch_now)
{
	long page = LINES > 12 ? LINES - 12 : 1;

	if (t->filtering) {
		filter_key(t, ch);
		return true;
	}
	if (t->help) { /* any key closes the help */
		t->help = false;
		return ch != 'q' && ch != 'Q';
	}
	switch (ch) {
	case 'q':
	case 'Q': return false;
	case 'w': t->win = (t->win + 1) % (t->cur.n_windows + 1); break;
	case 's': t->sort = (enum sort_key)((t->sort + 1) % SORT_KEYS); break;
	case '<': t->sort = t->sort > 0 ? t->sort - 1 : SORT_KEYS - 1; break;
	case '>': t->sort = (enum sort_key)((t->sort + 1) % SORT_KEYS); break;
	case '1': case '2': case '3': case '4': case '5': case '6':
		t->sort = (enum sort_key)(ch - '1');
		break;
	case 'v':
		t->view = (enum view)((t->view + 1) % VIEWS);
		t->scroll = 0;
		break;
	case 'r': *fetch_now = true; break;
	case 'p':
	case ' ': t->paused = !t->paused; break;
	case 'h':
	case '?': t->help = true; break;
	case '/':
		t->filtering = true;
		t->filter[0] = '\0';
		break;
	case KEY_DOWN:
	case 'j': scroll_by(t, 1); break;
	case KEY_UP:
	case 'k': scroll_by(t, -1); break;
	case KEY_NPAGE: scroll_by(t, page); break;
	case KEY_PPAGE: scroll_by(t, -page); break;
	case KEY_HOME:
	case 'g': t->scroll = 0; break;
	case KEY_END:
	case 'G': scroll_by(t, (long)t->n_rows); break;
	}
	return true;
}

static void status_line(const struct top *t, char *buf, size_t len, int width)
{
	if (t->filtering)
		snprintf(buf, len, "filter: %s_   (Enter keeps it, Esc clears it)", t->filter);
	else if (t->help)
		snprintf(buf, len, "help: any key closes it");
	else {
		uint32_t last =
			t->scroll + t->visible < t->n_rows ? t->scroll + t->visible : t->n_rows;

		/* all of it at 80 columns: the keys shorter there */
		snprintf(buf, len,
			 width >= 100 ? "rows %u-%u of %u  %s  h help  / filter  v view  1-6 or "
					"s sort  w window  p pause  q quit"
				      : "%u-%u/%u %s  h:help /:filter v:view 1-6:sort w:window "
					"p:pause q:quit",
			 t->n_rows ? t->scroll + 1 : 0, last, t->n_rows,
			 t->paused ? "PAUSED" : "live");
	}
}

static int run_screen(struct top *t)
{
	char why[RP_WHY_MAX] = "";
	uint64_t next = 0;
	bool running = true, dirty = true;
	int err = 0;

	/* ncursesw draws the frame's UTF-8 (names, the cap mark) in a UTF-8 locale */
	setlocale(LC_ALL, "");
	if (strcmp(nl_langinfo(CODESET), "UTF-8") != 0)
		t->ge = ">=";
	initscr();
	cbreak();
	noecho();
	keypad(stdscr, TRUE);
	set_escdelay(25);
	curs_set(0);
	timeout(100);
	if (has_colors()) {
		start_color();
		use_default_colors();
		init_pair(1, COLOR_WHITE, COLOR_RED);
		init_pair(2, COLOR_BLACK, COLOR_CYAN);
	}
	while (running && !quit_signal) {
		bool fetch_now = !t->paused && mono_ns() >= next;
		int ch = getch();

		if (ch != ERR) {
			running = key(t, ch, &fetch_now);
			dirty = true;
		}
		if (running && fetch_now) {
			if ((err = refresh_report(t, why)) != 0)
				break;
			next = mono_ns() + 1000000000u;
			dirty = true;
		}
		if (running && dirty)
			draw(t);
		dirty = false;
	}
	endwin();
	if (err)
		return rp_cli_error(1, "top: %s", why); /* why says: gone, busy, ... */
	return 0;
}

/* --- the command --- */

static const char usage[] =
	"usage: ringprof top [--session S] [--dir D | --socket PATH] [--once] [--window W]\n"
	"                    [--sort calls|self|cum|p50|p90|p99] [--view V] [--filter S]\n"
	"Live view of a running engine, redrawn every second. On a terminal: full screen\n"
	"(keys below); else (a pipe, a file) plain frames, one a second, no terminal\n"
	"control.\n"
	"  --session S   the engine's session (default $RINGPROF_SESSION or \"default\")\n"
	"  --dir D       its snapshot directory (default: where the engine says, else\n"
	"                /tmp/ringprof); the socket is D/ringprof-<session>.sock\n"
	"  --once        print one frame to stdout, no terminal control\n"
	"  --frames N    plain frames: stop after N (1 to 1000000; default: until\n"
	"                interrupted)\n"
	"  --width N     plain frames: columns (40 to 1000, default 120)\n"
	"  --window W    start on that rolling window (10s, 1m, 5m)\n"
	"  --sort K      the sort column (default cum)\n"
	"  --view V      names, sources or threads (default names)\n"
	"  --filter S    only names containing S (any case)\n"
	"keys: arrows/PgUp/PgDn/Home/End scroll, 1-6 or < > sort by a column, s next sort,\n"
	"      w window, v view, / filter, p pause, h help, r refresh, q quit\n";

/*
 * Plain frames (--once, or stdout not a terminal): the same text as the screen, no
 * escape codes, one every second, a blank line between; until @frames (0: no end),
 * a signal, a write error (the reader went away) or the engine going away.
 */
static int run_plain(struct top *t, unsigned frames, int width)
{
	char why[RP_WHY_MAX] = "";
	unsigned visible;
	int err = 0;

	for (unsigned i = 0; !quit_signal && (frames == 0 || i < frames); i++) {
		struct timespec second = { 1, 0 };

		if (i > 0) {
			nanosleep(&second, NULL);
			if (quit_signal || (err = refresh_report(t, why)) != 0)
				break;
			fputc('\n', stdout);
		}
		frame(t, stdout, 0, width, &visible);
		if (fflush(stdout) != 0)
			return 1;
	}
	return err ? rp_cli_error(1, "top: %s", why) : 0;
}

/* The socket: beside the snapshot the engine announces, else in @dir. */
static void socket_path(struct top *t, const char *dir)
{
	char snap[PATH_MAX];
	int32_t pid;
	size_t n;

	if (dir == NULL && rp_cli_read_marker(t->session, &pid, snap, sizeof(snap)) == 0 &&
	    (n = strlen(snap)) > 8 && strcmp(snap + n - 8, ".msgpack") == 0) {
		snprintf(t->sock, sizeof(t->sock), "%.*s.sock", (int)(n - 8), snap);
		return;
	}
	snprintf(t->sock, sizeof(t->sock), "%s/ringprof-%s.sock", dir ? dir : "/tmp/ringprof",
		 t->session);
}

static int parse_sort(const char *s, enum sort_key *k)
{
	for (int i = 0; i < SORT_KEYS; i++)
		if (strcmp(s, sort_names[i]) == 0) {
			*k = (enum sort_key)i;
			return 0;
		}
	return rp_cli_error(2, "--sort %s: use calls, self, cum, p50, p90 or p99", s);
}

int rp_cmd_top(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "session", 1, NULL, 's' }, { "dir", 1, NULL, 'd' },	{ "socket", 1, NULL, 'S' },
		{ "once", 0, NULL, 'o' },    { "batch", 0, NULL, 'o' }, { "window", 1, NULL, 'w' },
		{ "sort", 1, NULL, 'k' },    { "help", 0, NULL, 'h' },	{ "view", 1, NULL, 'v' },
		{ "filter", 1, NULL, 'f' },  { "frames", 1, NULL, 'n' }, { "width", 1, NULL, 'W' },
		{ NULL, 0, NULL, 0 }
	};
	static struct top t = { .sort = SORT_CUM };
	const char *session = NULL, *dir = NULL, *sock = NULL;
	char why[RP_WHY_MAX] = "";
	bool once = false;
	uint64_t frames = 0, width = 120;
	int c, err;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 's': session = optarg; break;
		case 'd': dir = optarg; break;
		case 'S': sock = optarg; break;
		case 'o': once = true; break;
		case 'w': t.want_win = optarg; break;
		case 'k':
			if (parse_sort(optarg, &t.sort) != 0)
				return 2;
			break;
		case 'v':
			for (t.view = 0; t.view < VIEWS && strcmp(optarg, view_names[t.view]);
			     t.view++)
				;
			if (t.view == VIEWS)
				return rp_cli_error(2, "--view %s: names, sources or threads",
						    optarg);
			break;
		case 'f': snprintf(t.filter, sizeof(t.filter), "%s", optarg); break;
		case 'n':
			if (rp_cli_number("--frames", optarg, 1, 1000000, &frames))
				return 2;
			break;
		case 'W':
			if (rp_cli_number("--width", optarg, 40, 1000, &width))
				return 2;
			break;
		case 'h': fputs(usage, stdout); return 0;
		default: return rp_cli_bad_option("top", argv);
		}
	}
	if (optind != argc)
		return rp_cli_error(2, "top: %s: unexpected argument (try `ringprof help top`)",
				    argv[optind]);
	t.session = rp_cli_session(session);
	if (t.session == NULL)
		return 2;
	if (sock != NULL)
		snprintf(t.sock, sizeof(t.sock), "%s", sock);
	else
		socket_path(&t, dir);
	if ((err = refresh_report(&t, why)) != 0)
		return rp_cli_error(1, "top: no engine answers: %s", why);
	t.ge = "\xe2\x89\xa5"; /* U+2265 ≥ in the frame's UTF-8 text */
	signal(SIGINT, on_quit);
	signal(SIGTERM, on_quit);
	signal(SIGPIPE, SIG_IGN);
	/* Not a terminal (a pipe, a file): plain frames, never escape codes. */
	if (once || !isatty(STDOUT_FILENO))
		err = run_plain(&t, once ? 1 : (unsigned)frames, (int)width);
	else
		err = run_screen(&t);
	rp_report_free(&t.cur);
	rp_report_free(&t.prev);
	return err;
}
