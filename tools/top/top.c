// SPDX-License-Identifier: MIT
/*
 * `ringprof top`: a running engine, live. Every second it connects to the engine's
 * socket (serve.h: "snapshot\n" answers a framed MessagePack snapshot), decodes the
 * report and draws one frame with ncurses: a header (session, event range, events and
 * events/s between the last two snapshots, dropped, late, truncated, caps hit), the
 * concurrency distributions (overall, roots) over the selected window, a table per
 * name (calls, rate/s, self%, cum%, p50/p90/p99) and, room permitting, the bottleneck
 * lists and the slowest spans. Keys: w cycles the window (all time, then each one the
 * report has), s the sort (cum, self, calls, p99; its column is highlighted), v the
 * view (names; sources, one row per producer process or file; threads, one row per
 * thread or request track of the flight recorder's recent spans), / filters by name,
 * arrows/PgUp/PgDn/Home/End (or j/k/g/G) scroll, p or Space pauses, h or ? shows the
 * help, r refreshes, q quits. The list takes the screen's rows but for the header
 * and, on a tall screen, the bottleneck lists and slowest spans (as many as fit);
 * durations carry adaptive units (ns, us, ms, s); the name column gets whatever the
 * numbers leave (26 columns at 80, more on wider screens, p90 from 100 columns on). A
 * DROPPING line at the top says producers lost events since the last frame.
 *
 * The frame is plain text built by one function (frame()), so --once prints the
 * same frame to stdout without ncurses, for scripts and tests. The terminal is
 * restored on q, SIGINT, SIGTERM and when the engine goes away (then a message and
 * exit status 1).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
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

enum sort_key { SORT_CUM, SORT_SELF, SORT_CALLS, SORT_P99, SORT_KEYS };
static const char *const sort_names[SORT_KEYS] = { "cum", "self", "calls", "p99" };
enum view { VIEW_NAMES, VIEW_SOURCES, VIEW_THREADS, VIEWS };
static const char *const view_names[VIEWS] = { "names", "sources", "threads" };

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

			if (x->fn >= r->n_fns || x->calls == 0)
				continue;
			v[*n] = (struct row){ &r->fns[x->fn], x->calls,	 x->self_ns, x->cum_ns,
					      x->p50_ns,      x->p90_ns, x->p99_ns, true };
		} else if (r->fns[i].calls > 0) {
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

static void header(const struct top *t, FILE *out)
{
	const struct rp_report *r = &t->cur;
	uint64_t span = r->t_last > r->t_first ? r->t_last - r->t_first : 0, caps = 0;
	const struct rp_report_window *w = window_of(t);
	char wname[48];

	for (int k = 0; k < RP_ANOM_KIND_COUNT; k++)
		if (strstr(rp_anomaly_names[k], "_cap") != NULL)
			caps += r->anomalies[k];
	if (r->dropped || r->anomalies[RP_ANOM_DROP_LOST]) /* first: figures miss these */
		fprintf(out, "LOST: %" PRIu64 " records dropped (full rings), %" PRIu64
			     " spans cut by drops (rows with \"!\"); see docs/live.md\n",
			r->dropped, r->anomalies[RP_ANOM_DROP_LOST]);
	fprintf(out,
		"ringprof top - session %s   events %" PRIu64 " over %" PRIu64 ".%01" PRIu64
		" s   ",
		t->session, r->events, span / 1000000000u, span / 100000000u % 10);
	if (t->prev_at != 0 && t->cur_at > t->prev_at && r->events >= t->prev.events)
		fprintf(out, "%.0f events/s%s\n",
			(double)(r->events - t->prev.events) * 1e9 /
				(double)(t->cur_at - t->prev_at),
			t->paused ? "   PAUSED" : "");
	else if (span > 0) /* one report so far: the average over its time range */
		fprintf(out, "%.0f events/s (average)%s\n", (double)r->events * 1e9 / (double)span,
			t->paused ? "   PAUSED" : "");
	else
		fprintf(out, "- events/s%s\n", t->paused ? "   PAUSED" : "");
	fprintf(out,
		"dropped %" PRIu64 "   late %" PRIu64 "   truncated %" PRIu64 "   caps hit %" PRIu64
		"   sources %" PRIu32 "\nwindow %s   sort %s   view %s%s",
		r->dropped, r->late, r->truncated, caps, r->n_sources,
		rp_render_safe_buf(wname, sizeof(wname), w ? (w->name ? w->name : "?") : "all"),
		sort_names[t->sort], view_names[t->view],
		t->filter[0] ? "   filter " : "");
	put_cut(out, t->filter, 40);
	fputc('\n', out);
}

/* Drops first: a line above everything else while producers are losing events. */
static void drop_alert(const struct top *t, FILE *out)
{
	const struct rp_report *r = &t->cur;

	if (t->prev_at == 0 || r->dropped <= t->prev.dropped)
		return;
	fprintf(out,
		"DROPPING: %" PRIu64 " events lost in the last %.1f s (rings full: the engine "
		"falls behind or RINGPROF_RING_EVENTS is small)\n",
		r->dropped - t->prev.dropped, (double)(t->cur_at - t->prev_at) / 1e9);
}

static void conc_lines(const struct top *t, FILE *out)
{
	const struct rp_report_window *w = window_of(t);
	const struct rp_report_conc *c = w && w->n_conc ? w->conc : t->cur.conc;
	uint32_t n = w && w->n_conc ? w->n_conc : t->cur.n_conc;
	char name[48];

	for (uint32_t i = 0; i < n && i < 2; i++) /* "now" from the all-time rows */
		fprintf(out,
			"concurrency %-7s now %" PRIu32 "  p50 %" PRIu32 "  p90 %" PRIu32
			"  p99 %" PRIu32 "  max %" PRIu32 "  mean %" PRIu64 ".%03" PRIu64 "\n",
			rp_render_safe_buf(name, sizeof(name), c[i].name ? c[i].name : "?"),
			i < t->cur.n_conc ? t->cur.conc[i].now : 0,
			c[i].p50, c[i].p90, c[i].p99, c[i].max, c[i].mean_milli / 1000,
			c[i].mean_milli % 1000);
	if (n == 0)
		fputs("concurrency -\n", out);
	if (rp_report_has_requests(&t->cur)) /* all time: request spans only */
		fprintf(out,
			"requests in flight now %" PRIu32 "  p50 %" PRIu32 "  p99 %" PRIu32
			"  max %" PRIu32 " (all time)\n",
			t->cur.requests.now, t->cur.requests.p50, t->cur.requests.p99,
			t->cur.requests.max);
}

/* The names table. Columns: calls, rate/s, self%, [off%: the part of the name's
 * self time its thread was switched out, all time, where measured], cum%, p50, [p90
 * from 100 columns on], p99, then the name, which gets the rest of the line. @first: the first row
 * shown (scrolling), @limit rows at most (0: all). */
static uint32_t table(const struct top *t, FILE *out, uint32_t first, unsigned limit, int width)
{
	const struct rp_report_window *w = window_of(t);
	const struct rp_report *r = &t->cur;
	uint64_t range = covered_ns(r, w), total_self = 0;
	bool p90 = width >= 100, off = r->offcpu.state == RP_OFFCPU_ON;
	uint32_t n, i;
	struct row *v = rows_of(t, w, &n);
	char a[16], b[16], c[16];

	if (v == NULL)
		return 0;
	for (i = 0; i < n; i++)
		total_self += v[i].self_ns;
	fprintf(out, "%10s %9s %6s ", "calls", "rate/s", "self%");
	if (off)
		fprintf(out, "%6s ", "off%");
	fprintf(out, "%6s %8s ", "cum%", "p50");
	if (p90)
		fprintf(out, "%8s ", "p90");
	fprintf(out, "%8s  %s\n", "p99", "name [category]");
	for (i = first; i < n && (limit == 0 || i < first + limit); i++) {
		const struct row *x = &v[i];
		int room = width - (p90 ? 64 : 55) - (off ? 7 : 0);

		/* "!": drops cut some of this name's calls (its row is short by them) */
		fprintf(out, "%10" PRIu64 "%c%9.1f %6.1f ", x->calls, x->fn->drop_lost ? '!' : ' ',
			range ? (double)x->calls * 1e9 / (double)range : 0.0,
			total_self ? 100.0 * (double)x->self_ns / (double)total_self : 0.0);
		if (off)
			fprintf(out, "%6.1f ", x->fn->self_ns && (int64_t)x->fn->self_ns > 0
					       ? 100.0 * (double)x->fn->offcpu_ns /
							 (double)x->fn->self_ns
					       : 0.0);
		fprintf(out, "%6.1f %8s ",
			total_self ? 100.0 * (double)x->cum_ns / (double)total_self : 0.0,
			x->q ? dur(a, x->p50) : "-");
		if (p90)
			fprintf(out, "%8s ", x->q ? dur(b, x->p90) : "-");
		fprintf(out, "%8s  ", x->q ? dur(c, x->p99) : "-");
		put_cut(out, x->fn->name ? x->fn->name : "", room < 8 ? 8 : room);
		if (x->fn->category && x->fn->category[0] &&
		    (int)strlen(x->fn->name ? x->fn->name : "") + 3 < room) {
			fputs(" [", out);
			put_cut(out, x->fn->category,
				room - 3 - (int)strlen(x->fn->name ? x->fn->name : ""));
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
	char d[16], s[16];

	if (room < 2 || (b->n_by_cum == 0 && b->n_slowest == 0))
		return;
	fputc('\n', out);
	top_list(r, out, "cum", b->by_cum, b->n_by_cum, 6, width);
	top_list(r, out, "self", b->by_self, b->n_by_self, 6, width);
	top_list(r, out, "count", b->by_count, b->n_by_count, 6, width);
	if (b->n_slowest > 0 && room > 5)
		fprintf(out, "%-8s %9s %9s %5s  %s\n", "slowest", "duration", "self", "conc",
			"name");
	for (uint32_t i = 0; i < b->n_slowest && i + 5 < room; i++) {
		const struct rp_report_span *sp = &b->slowest[i];
		char conc[16];

		snprintf(conc, sizeof(conc), "%s%" PRIu32, sp->concurrency_known ? "" : "~",
			 sp->concurrency);
		fprintf(out, "%8u %9s %9s %5s  ", i + 1, dur(d, sp->dur_ns), dur(s, sp->self_ns),
			conc);
		put_cut(out, sp->fn < r->n_fns && r->fns[sp->fn].name ? r->fns[sp->fn].name : "?",
			width - 37 > 8 ? width - 37 : 8);
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
	"  Up/Down, k/j      scroll one row          PgUp/PgDn  scroll one page\n"
	"  Home/End, g/G     first / last row\n"
	"  s                 sort: cum, self, calls, p99 (the sorted column is highlighted)\n"
	"  w                 window: all time, then each rolling window (10s, 1m, 5m)\n"
	"  v                 view: names, sources (per process), threads (per thread)\n"
	"  /                 filter by name (substring, any case); Enter keeps it,\n"
	"                    Esc clears it\n"
	"  p or Space        pause (the frame stays; the engine keeps running)\n"
	"  r                 refresh now\n"
	"  h or ?            this help (any key closes it)\n"
	"  q                 quit\n"
	"\n"
	"Durations carry their unit (ns, us, ms, s). rate/s divides by the time the\n"
	"window's events cover. A DROPPING line at the top means producers are losing\n"
	"events right now (their rings are full).\n";

/* The whole frame as text: @rows of screen (0: no limit), @width columns. Returns
 * the number of rows the scrolled list has (for the scroll bounds). */
static uint32_t frame(const struct top *t, FILE *out, unsigned rows, int width, unsigned *visible)
{
	const struct rp_report *r = &t->cur;
	unsigned fixed = 6 + (t->prev_at && r->dropped > t->prev.dropped), bottom, limit;
	uint32_t n;

	*visible = 0;
	if (t->help) {
		fputs(help_text, out);
		return 0;
	}
	/* The list gets the screen but for the header and, when there is room, the
	 * bottleneck lists (up to 3 + 1 + 10 slowest) and the steps. */
	bottom = rows == 0 ? 16 : rows > 40 ? 14 : rows > 30 ? 9 : rows > 24 ? 6 : 0;
	limit = rows == 0 ? 25 : rows > fixed + bottom + 2 ? rows - fixed - bottom - 1 : 1;
	*visible = limit;
	header(t, out);
	drop_alert(t, out);
	conc_lines(t, out);
	fputc('\n', out);
	if (t->view == VIEW_SOURCES)
		n = sources_view(t, out, t->scroll, limit, width);
	else if (t->view == VIEW_THREADS)
		n = threads_view(t, out, t->scroll, limit, width);
	else
		n = table(t, out, t->scroll, limit, width);
	if (t->view == VIEW_NAMES) {
		unsigned st = r->n_steps < 3 ? r->n_steps : 3;

		bottlenecks(t, out, bottom > st + 1 ? bottom - st - (st > 0) : 0, width);
		steps(t, out, rows ? st : 16);
	}
	return n;
}

/* --- the screen --- */

/* Where the sorted column's title is on the table's title line (names view). */
static void sort_column(const struct top *t, int width, int *x, int *w)
{
	static const int at[SORT_KEYS] = { 28, 21, 0, 0 }, len[SORT_KEYS] = { 6, 6, 10, 8 };

	*x = at[t->sort];
	*w = len[t->sort];
	if (t->sort == SORT_P99) /* after p50, and p90 on a wide screen */
		*x = width >= 100 ? 53 : 44;
}

static void status_line(const struct top *t, char *buf, size_t len);

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
	status_line(t, status, sizeof(status));
	erase();
	sort_column(t, COLS, &sx, &sw);
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
		if (title && t->view == VIEW_NAMES && line[5] == 'c' && (int)strlen(line) > sx) {
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

static void status_line(const struct top *t, char *buf, size_t len)
{
	if (t->filtering)
		snprintf(buf, len, "filter: %s_   (Enter keeps it, Esc clears it)", t->filter);
	else if (t->help)
		snprintf(buf, len, "help: any key closes it");
	else {
		uint32_t last =
			t->scroll + t->visible < t->n_rows ? t->scroll + t->visible : t->n_rows;

		snprintf(buf, len,
			 "rows %u-%u of %u  %s  h help  / filter  v view  s sort  w window  "
			 "p pause  q quit",
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
	"                    [--sort cum|self|calls|p99]\n"
	"  --session S   the engine's session (default $RINGPROF_SESSION or \"default\")\n"
	"  --dir D       its snapshot directory (default: where the engine says, else\n"
	"                /tmp/ringprof); the socket is D/ringprof-<session>.sock\n"
	"  --once        print one frame to stdout, no terminal control\n"
	"  --view V      names, sources or threads (default names)\n"
	"  --filter S    only names containing S (any case)\n"
	"keys: arrows/PgUp/PgDn/Home/End scroll, s sort, w window, v view, / filter,\n"
	"      p pause, h help, r refresh, q quit\n";

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
	return rp_cli_error(2, "--sort %s: use cum, self, calls or p99", s);
}

int rp_cmd_top(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "session", 1, NULL, 's' }, { "dir", 1, NULL, 'd' },	{ "socket", 1, NULL, 'S' },
		{ "once", 0, NULL, 'o' },    { "batch", 0, NULL, 'o' }, { "window", 1, NULL, 'w' },
		{ "sort", 1, NULL, 'k' },    { "help", 0, NULL, 'h' },	{ "view", 1, NULL, 'v' },
		{ "filter", 1, NULL, 'f' },  { NULL, 0, NULL, 0 }
	};
	static struct top t;
	const char *session = NULL, *dir = NULL, *sock = NULL;
	char why[RP_WHY_MAX] = "";
	bool once = false;
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
		case 'h': fputs(usage, stdout); return 0;
		default: fputs(usage, stderr); return 2;
		}
	}
	if (optind != argc)
		return rp_cli_error(2, "top: unexpected arguments (try --help)");
	t.session = rp_cli_session(session);
	if (t.session == NULL)
		return 2;
	if (sock != NULL)
		snprintf(t.sock, sizeof(t.sock), "%s", sock);
	else
		socket_path(&t, dir);
	if ((err = refresh_report(&t, why)) != 0)
		return rp_cli_error(1, "top: no engine answers: %s", why);
	if (once) {
		unsigned visible;

		frame(&t, stdout, 0, 120, &visible);
		err = fflush(stdout) == 0 ? 0 : 1;
	} else {
		signal(SIGINT, on_quit);
		signal(SIGTERM, on_quit);
		signal(SIGPIPE, SIG_IGN);
		err = run_screen(&t);
	}
	rp_report_free(&t.cur);
	rp_report_free(&t.prev);
	return err;
}
