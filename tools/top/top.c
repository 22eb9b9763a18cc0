// SPDX-License-Identifier: MIT
/*
 * `ringprof top`: a running engine, live. Every second it connects to the engine's
 * socket (serve.h: "snapshot\n" answers a framed MessagePack snapshot), decodes the
 * report and draws one frame with ncurses: a header (session, event range, events and
 * events/s between the last two snapshots, dropped, late, truncated, caps hit), the
 * concurrency distributions (overall, roots) over the selected window, a table per
 * name (calls, rate/s, self%, cum%, p50/p90/p99) and, room permitting, the bottleneck
 * lists and the slowest spans. Keys: w cycles the window (all time, then each one the
 * report has), s the sort (cum, self, calls, p99), r refreshes, q quits.
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
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "serve.h"
#include "snapshot.h"

enum sort_key { SORT_CUM, SORT_SELF, SORT_CALLS, SORT_P99, SORT_KEYS };
static const char *const sort_names[SORT_KEYS] = { "cum", "self", "calls", "p99" };

/* One table row, all-time or over a window. */
struct row {
	const struct rp_report_fn *fn;
	uint64_t calls, self_ns, cum_ns, p50, p90, p99;
};

struct top {
	char sock[PATH_MAX];
	const char *session;
	struct rp_report cur, prev;
	uint64_t cur_at, prev_at; /* CLOCK_MONOTONIC of the fetches; 0: none */
	unsigned win;		  /* 0: all time; i: cur.windows[i - 1] */
	const char *want_win;	  /* --window, matched once a report is there */
	enum sort_key sort;
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

static void ms(FILE *out, uint64_t ns, int width)
{
	fprintf(out, " %*" PRIu64 ".%03" PRIu64, width - 4, ns / 1000000u, ns / 1000u % 1000u);
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

/* The rows of the selected window (or all time), sorted. *@n rows; NULL: no memory. */
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
			v[(*n)++] = (struct row){ &r->fns[x->fn], x->calls,  x->self_ns, x->cum_ns,
						  x->p50_ns,	  x->p90_ns, x->p99_ns };
		} else if (r->fns[i].calls > 0) {
			const struct rp_report_fn *f = &r->fns[i];

			v[(*n)++] = (struct row){ f,	     f->calls,	f->self_ns, f->cum_ns,
						  f->p50_ns, f->p90_ns, f->p99_ns };
		}
	}
	sort_by = t->sort;
	qsort(v, *n, sizeof(*v), row_cmp);
	return v;
}

static void header(const struct top *t, FILE *out)
{
	const struct rp_report *r = &t->cur;
	uint64_t span = r->t_last > r->t_first ? r->t_last - r->t_first : 0, caps = 0;
	const struct rp_report_window *w = window_of(t);

	for (int k = 0; k < RP_ANOM_KIND_COUNT; k++)
		if (strstr(rp_anomaly_names[k], "_cap") != NULL)
			caps += r->anomalies[k];
	fprintf(out,
		"ringprof top - session %s   events %" PRIu64 " over %" PRIu64 ".%01" PRIu64
		" s   ",
		t->session, r->events, span / 1000000000u, span / 100000000u % 10);
	if (t->prev_at != 0 && t->cur_at > t->prev_at && r->events >= t->prev.events)
		fprintf(out, "%.0f events/s\n",
			(double)(r->events - t->prev.events) * 1e9 /
				(double)(t->cur_at - t->prev_at));
	else
		fputs("- events/s\n", out);
	fprintf(out,
		"dropped %" PRIu64 "   late %" PRIu64 "   truncated %" PRIu64 "   caps hit %" PRIu64
		"   sources %" PRIu32 "   window %s   sort %s\n",
		r->dropped, r->late, r->truncated, caps, r->n_sources,
		w ? (w->name ? w->name : "?") : "all", sort_names[t->sort]);
}

static void conc_lines(const struct top *t, FILE *out)
{
	const struct rp_report_window *w = window_of(t);
	const struct rp_report_conc *c = w && w->n_conc ? w->conc : t->cur.conc;
	uint32_t n = w && w->n_conc ? w->n_conc : t->cur.n_conc;

	for (uint32_t i = 0; i < n && i < 2; i++) /* "now" from the all-time rows */
		fprintf(out,
			"concurrency %-8s now %" PRIu32 "  p50 %" PRIu32 "  p90 %" PRIu32
			"  p99 %" PRIu32 "  max %" PRIu32 "  mean %" PRIu64 ".%03" PRIu64 "\n",
			c[i].name ? c[i].name : "?", i < t->cur.n_conc ? t->cur.conc[i].now : 0,
			c[i].p50, c[i].p90, c[i].p99, c[i].max, c[i].mean_milli / 1000,
			c[i].mean_milli % 1000);
	if (n == 0)
		fputs("concurrency -\n", out);
}

static void table(const struct top *t, FILE *out, unsigned limit, int width)
{
	const struct rp_report_window *w = window_of(t);
	const struct rp_report *r = &t->cur;
	uint64_t range = w ? w->t_to - w->t_from : r->t_last - r->t_first, total_self = 0;
	uint32_t n, i;
	struct row *v = rows_of(t, w, &n);

	if (v == NULL)
		return;
	for (i = 0; i < n; i++)
		total_self += v[i].self_ns;
	fprintf(out, "%10s %10s %6s %6s %10s %10s %10s  %s\n", "calls", "rate/s", "self%", "cum%",
		"p50 ms", "p90 ms", "p99 ms", "name [category]");
	for (i = 0; i < n && (limit == 0 || i < limit); i++) {
		const struct row *x = &v[i];
		char line[512];
		int len;

		fprintf(out, "%10" PRIu64 " %10.1f %6.1f %6.1f", x->calls,
			range ? (double)x->calls * 1e9 / (double)range : 0.0,
			total_self ? 100.0 * (double)x->self_ns / (double)total_self : 0.0,
			total_self ? 100.0 * (double)x->cum_ns / (double)total_self : 0.0);
		ms(out, x->p50, 10);
		ms(out, x->p90, 10);
		ms(out, x->p99, 10);
		len = snprintf(line, sizeof(line), "  %s%s%s%s", x->fn->name ? x->fn->name : "",
			       x->fn->category && x->fn->category[0] ? " [" : "",
			       x->fn->category ? x->fn->category : "",
			       x->fn->category && x->fn->category[0] ? "]" : "");
		for (int k = 0; k < len; k++) /* one line per row, whatever the name holds */
			if ((unsigned char)line[k] < 0x20)
				line[k] = '?';
		fprintf(out, "%.*s\n", width > 70 ? width - 70 : 8, line);
	}
	free(v);
}

static void top_list(const struct rp_report *r, FILE *out, const char *what,
		     const struct rp_report_top *v, uint32_t n, unsigned max)
{
	if (n == 0)
		return;
	fprintf(out, "top by %-5s", what);
	for (uint32_t i = 0; i < n && i < max; i++)
		if (v[i].fn < r->n_fns)
			fprintf(out, "  %s", r->fns[v[i].fn].name ? r->fns[v[i].fn].name : "?");
	fputc('\n', out);
}

static void bottlenecks(const struct top *t, FILE *out, unsigned room)
{
	const struct rp_report_window *w = window_of(t);
	const struct rp_report_bottlenecks *b = w ? &w->top : &t->cur.bottlenecks;
	const struct rp_report *r = &t->cur;

	if (room < 2 || (b->n_by_cum == 0 && b->n_slowest == 0))
		return;
	fputc('\n', out);
	top_list(r, out, "cum", b->by_cum, b->n_by_cum, 6);
	top_list(r, out, "self", b->by_self, b->n_by_self, 6);
	top_list(r, out, "count", b->by_count, b->n_by_count, 6);
	for (uint32_t i = 0; i < b->n_slowest && i + 5 < room && i < 5; i++) {
		const struct rp_report_span *s = &b->slowest[i];

		fprintf(out, "slowest %s",
			s->fn < r->n_fns && r->fns[s->fn].name ? r->fns[s->fn].name : "?");
		ms(out, s->dur_ns, 10);
		fprintf(out, " ms  self");
		ms(out, s->self_ns, 10);
		fprintf(out, " ms  concurrency %s%" PRIu32 "\n", s->concurrency_known ? "" : "~",
			s->concurrency);
	}
}

/* Step statistics by phase (all time), when the report has steps: one line each. */
static void steps(const struct top *t, FILE *out, unsigned room)
{
	const struct rp_report *r = &t->cur;

	for (uint32_t i = 0; i < r->n_steps && i < room; i++) {
		const struct rp_report_step_phase *p = &r->steps[i];

		fprintf(out, "%ssteps %-10s n %-8" PRIu64 " p50", i ? "" : "\n",
			p->name && p->name[0] ? p->name : "(none)", p->count);
		ms(out, p->p50_ns, 10);
		fputs(" p95", out);
		ms(out, p->p95_ns, 10);
		fputs(" p99", out);
		ms(out, p->p99_ns, 10);
		fputs(" max", out);
		ms(out, p->max_ns, 10);
		fputs(" ms\n", out);
	}
}

/* The whole frame as text: @rows of screen (0: no limit), @width columns. */
static void frame(const struct top *t, FILE *out, unsigned rows, int width)
{
	unsigned limit = rows > 12 ? rows - 12 : (rows ? 1 : 0);

	header(t, out);
	conc_lines(t, out);
	fputc('\n', out);
	table(t, out, rows ? limit : 25, width);
	bottlenecks(t, out, rows ? 8 : 12);
	steps(t, out, rows ? 3 : 16);
}

/* --- the screen --- */

static void draw(const struct top *t, const char *status)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	int y = 0;

	if (m == NULL)
		return;
	frame(t, m, (unsigned)(LINES > 2 ? LINES - 2 : 1), COLS);
	fclose(m);
	erase();
	for (char *line = buf, *nl; line && *line && y < LINES - 1; line = nl ? nl + 1 : NULL) {
		nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		if (strncmp(line, "     calls", 10) == 0)
			attron(A_REVERSE);
		mvaddnstr(y++, 0, line, COLS);
		attroff(A_REVERSE);
	}
	mvaddnstr(LINES - 1, 0, status, COLS);
	refresh();
	free(buf);
}

static bool key(struct top *t, int ch, bool *fetch_now)
{
	switch (ch) {
	case 'q':
	case 'Q': return false;
	case 'w': t->win = (t->win + 1) % (t->cur.n_windows + 1); break;
	case 's': t->sort = (enum sort_key)((t->sort + 1) % SORT_KEYS); break;
	case 'r': *fetch_now = true; break;
	}
	return true;
}

static int run_screen(struct top *t)
{
	char why[RP_WHY_MAX] = "", status[PATH_MAX + 64];
	uint64_t next = 0;
	bool running = true, dirty = true;
	int err = 0;

	initscr();
	cbreak();
	noecho();
	keypad(stdscr, TRUE);
	curs_set(0);
	timeout(100);
	snprintf(status, sizeof(status), "%s   w window  s sort  r refresh  q quit", t->sock);
	while (running && !quit_signal) {
		bool fetch_now = mono_ns() >= next;
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
			draw(t, status);
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
	"keys: w window (all time, 10s, 1m, 5m), s sort, r refresh, q quit\n";

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
		{ "sort", 1, NULL, 'k' },    { "help", 0, NULL, 'h' },	{ NULL, 0, NULL, 0 }
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
		frame(&t, stdout, 0, 200);
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
