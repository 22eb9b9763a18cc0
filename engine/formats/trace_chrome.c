// SPDX-License-Identifier: MIT
/*
 * Streaming Chrome trace JSON reader. The text goes through yajl's callback parser
 * in chunks (64 KiB from zlib's gzread, which reads plain files transparently, or
 * from inflate over a gzip buffer), so memory holds one event's fields in fixed
 * buffers and never the JSON text or a tree. The structure is followed by depth
 * alone: the events array sits at depth 1 (bare array form) or 2 (the value of
 * "traceEvents" in the object form), an event's members one deeper and "args"
 * members one deeper still; anything else, at any depth, is counted in and out
 * and otherwise ignored, which is how nested values get skipped.
 *
 * yajl keeps a token that straddles two yajl_parse() calls in a growing buffer,
 * so one huge string would cost memory in proportion. A small scanner in front
 * of yajl follows string boundaries and hands yajl only the first STR_KEEP raw
 * bytes of a string (cut at a character boundary, never inside an escape) and
 * then its closing quote; the dropped middle is not validated. Number tokens
 * longer than NUM_MAX are refused. Bytes are counted in the original text, so
 * error offsets stay exact. What yajl still holds in proportion to the input is
 * its nesting stack, one byte a level.
 *
 * Error offsets: "byte N" is the offset in the JSON text (decompressed) for JSON
 * errors and in the compressed input for gzip errors.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yajl/yajl_parse.h>
#include <zlib.h>

#include "jfast.h"
#include "readahead.h"
#include "trace_chrome.h"

#define CHUNK	 (64u * 1024) /* bytes handed to yajl_parse / read by gzread at a time */
#define MIB	 (1024u * 1024)
#define STR_KEEP RP_JFAST_STR_KEEP /* raw bytes of a string given to yajl: decode to >= 682 */
#define NUM_MAX	 1024		   /* longest number token accepted */
#define PAD	 64	/* whole events: readable bytes from an index at or below lim */
#define TAIL_MAX 4096	/* whole events: a chunk's end from an event on, copied to read */

_Static_assert(STR_KEEP / 6 >= RP_CHROME_STR_MAX, "a kept string must still be cut by us");

enum form { FORM_NONE, FORM_ARRAY, FORM_OBJECT };
enum kind { V_NULL, V_BOOL, V_NUM, V_STR, V_MAP, V_ARR };
enum key { K_OTHER, K_PH, K_NAME, K_CAT, K_PID, K_TID, K_TS, K_DUR, K_ID, K_ARGS };

static const char *const kind_name[] = {
	[V_NULL] = "null",    [V_BOOL] = "a boolean", [V_NUM] = "a number",
	[V_STR] = "a string", [V_MAP] = "an object",  [V_ARR] = "an array",
};

/* String state of the bytes before yajl: which ones it gets (see the top). */
struct scan {
	bool in_str;
	bool dropping; /* inside a string, past STR_KEEP: skipping to its quote */
	int esc;       /* -1 after a backslash; 4..1 hex digits of \u left; 0 */
	size_t run;    /* raw bytes of this string, or of this run of number characters */
};

struct parser {
	yajl_handle h; /* its callbacks: rp_jfast_relay, through jf */
	struct rp_jfast jf;
	struct rp_jfast_win win;
	bool fast;     /* the fast path reads (jfast.h); false once it handed over to yajl */
	bool fast_end; /* the fast path read the whole text */
	bool pause;    /* jfast reads: stop it after the next event (fast events may follow) */
	bool paused;   /* ... and it stopped there */
	unsigned ev_skip; /* events left to jfast after a fast event was given up */
	/* A fast event's first number in args and its key, in the text being read:
	 * only a 'C' event's are copied (arg() and cb_map_key() copy every event's). */
	const unsigned char *fv_key, *fv_num;
	size_t fv_klen, fv_nlen;
	uint64_t text; /* JSON bytes given so far */
	rp_chrome_fn fn;
	void *ctx;
	struct rp_chrome_stats *st;
	const char *origin; /* the path, or "buffer" */
	char *why;
	int rc;	      /* the callback's non-zero value, or our -EINVAL */
	bool own_err; /* rc is ours, and what says why */
	char what[RP_WHY_MAX];
	uint64_t off; /* JSON text bytes before the chunk being parsed */
	struct scan sc;

	/* Progress of a file read. */
	rp_chrome_progress_fn progress;
	uint64_t total;
	uint64_t mark;	   /* report when st->bytes reaches this */
	uint64_t reported; /* st->bytes at the last report */

	/* Where we are: depth counts open containers. */
	size_t depth;
	size_t arr_depth; /* depth inside the events array (elements are values there); 0 */
	enum form form;
	bool top_key_events; /* object form: the last top-level key was "traceEvents" */
	bool seen_events;
	bool in_event;
	bool in_args;
	enum key key;	  /* the last key of the event */
	bool arg_is_corr; /* the last key of args was "correlation" */
	bool argkey_cut;

	/* The event being collected. */
	struct rp_chrome_ev ev;
	bool have_value;
	bool value_name_cut;
	char name[RP_CHROME_STR_MAX], cat[RP_CHROME_STR_MAX];
	char pid[RP_CHROME_STR_MAX], tid[RP_CHROME_STR_MAX];
	char id[RP_CHROME_STR_MAX];
	char argkey[RP_CHROME_STR_MAX]; /* with have_value: the key of the first number */
	char num[NUM_MAX + 1], value_num[NUM_MAX + 1];
	size_t num_len;

	unsigned char chunk[CHUNK];
	unsigned char tail[TAIL_MAX + PAD]; /* a chunk's end, with PAD zero bytes after it */
};

static int fail(struct parser *p, int err, uint64_t at, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int fail(struct parser *p, int err, uint64_t at, const char *fmt, ...)
{
	int n = snprintf(p->why, RP_WHY_MAX, "%s: byte %llu: ", p->origin, (unsigned long long)at);
	va_list ap;

	if (n < 0 || n >= RP_WHY_MAX)
		return err; /* a long path: the why is cut */
	va_start(ap, fmt);
	vsnprintf(p->why + n, RP_WHY_MAX - (size_t)n, fmt, ap);
	va_end(ap);
	return err;
}

/* From a callback: remember the error and stop yajl; parse_run() adds the offset. */
static int stop(struct parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int stop(struct parser *p, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(p->what, sizeof(p->what), fmt, ap);
	va_end(ap);
	p->rc = -EINVAL;
	p->own_err = true;
	return 0;
}

/* ---- the scanner in front of yajl ---- */

static bool number_char(unsigned char c)
{
	return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}

/* Outside strings. false: a number run is longer than NUM_MAX. */
static bool scan_outside(struct scan *s, unsigned char c)
{
	if (c == '"') {
		s->in_str = true;
		s->run = 0;
		return true;
	}
	s->run = number_char(c) ? s->run + 1 : 0;
	return s->run <= NUM_MAX;
}

/* Inside a string. false: it is long enough; drop from this byte to its quote. */
static bool scan_inside(struct scan *s, unsigned char c)
{
	if (s->esc < 0) {
		s->esc = c == 'u' ? 4 : 0;
	} else if (s->esc > 0) {
		s->esc--;
	} else if (c == '"') {
		s->in_str = false;
		s->run = 0;
		return true;
	} else if (s->run >= STR_KEEP && (c & 0xc0) != 0x80) {
		s->dropping = true; /* not inside an escape, not inside a UTF-8 sequence */
		return false;
	} else if (c == '\\') {
		s->esc = -1;
	}
	s->run++;
	return true;
}

/* Bytes of @b, at most @max, before a quote or a backslash: nothing to track there. */
static size_t plain_run(const unsigned char *b, size_t max)
{
	size_t i = 0;

	while (i < max && b[i] != '"' && b[i] != '\\')
		i++;
	return i;
}

/* How many of @b yajl gets before a drop starts or a number is too long. */
static size_t scan_keep(struct scan *s, const unsigned char *b, size_t n)
{
	struct scan t = *s; /* in registers for the loop */
	size_t i, k;

	for (i = 0; i < n; i++) {
		if (t.in_str && t.esc == 0 && t.run < STR_KEEP) {
			k = plain_run(b + i, STR_KEEP - t.run < n - i ? STR_KEEP - t.run : n - i);
			t.run += k;
			i += k;
			if (i == n)
				break;
		}
		if (!(t.in_str ? scan_inside(&t, b[i]) : scan_outside(&t, b[i])))
			break;
	}
	*s = t;
	return i;
}

/* How many of @b to drop: up to (not including) the string's closing quote. */
static size_t scan_drop(struct scan *s, const unsigned char *b, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (s->esc) {
			s->esc = 0;
		} else if (b[i] == '\\') {
			s->esc = 1;
		} else if (b[i] == '"') {
			s->dropping = false; /* scan_inside() closes the string on it */
			return i;
		}
	}
	return n;
}

/* ---- values ---- */

/* The length of @s cut to at most @n bytes, not inside a UTF-8 sequence. */
static size_t utf8_cut(const unsigned char *s, size_t n)
{
	size_t k = n;

	for (int back = 0; back < 4 && k > 0; back++, k--) {
		if ((s[k] & 0xc0) != 0x80)
			return k;
	}
	return n; /* not UTF-8 there: cut anywhere */
}

/* Copies @n bytes of @s into @dst, cut to fit; true if cut. */
static bool put_text(char dst[RP_CHROME_STR_MAX], const void *s, size_t n)
{
	bool cut = n >= RP_CHROME_STR_MAX;

	if (cut)
		n = utf8_cut(s, RP_CHROME_STR_MAX - 1);
	memcpy(dst, s, n);
	dst[n] = '\0';
	return cut;
}

/* yajl has checked the syntax: an integer is a number without '.', 'e' or 'E'. */
static bool is_integer(const char *s)
{
	return strpbrk(s, ".eE") == NULL;
}

/*
 * llround() for |d| < 2^63, without libm (the engine does not link it): the
 * nearest integer, halves away from zero.
 */
static int64_t round_nearest(double d)
{
	int64_t t = (int64_t)d;	     /* toward zero */
	double frac = d - (double)t; /* exact: the bits of d below 1 */

	if (frac >= 0.5)
		t++;
	else if (frac <= -0.5)
		t--;
	return t;
}

static bool in_int64(double d)
{
	return d >= -0x1p63 && d < 0x1p63;
}

/* is_integer() for the number token @s[0..@n). */
static bool is_integer_n(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] == '.' || s[i] == 'e' || s[i] == 'E')
			return false;
	return true;
}

/* A number as text: integers and integral floats in decimal, others as written. */
static void number_text(struct parser *p, char dst[RP_CHROME_STR_MAX])
{
	double d;

	if (!is_integer_n(p->num, p->num_len)) {
		d = rp_jfast_strtod(p->num);
		if (in_int64(d) && d == (double)(int64_t)d) {
			snprintf(dst, RP_CHROME_STR_MAX, "%lld", (long long)d);
			return;
		}
	}
	if (put_text(dst, p->num, p->num_len))
		p->st->cut++;
}

/* Microseconds to nanoseconds: integers exactly, floats rounded to nearest. */
static int us_to_ns(const char *s, size_t n, int64_t *ns)
{
	struct rp_jfast_dec dec;
	long long v;
	double d;

	/* the usual forms (up to 18 digits, no exponent) read in one pass */
	if (rp_jfast_dec(s, n, &dec) && dec.digits <= 18) {
		if (!dec.point) {
			v = dec.neg ? -(long long)dec.w : (long long)dec.w;
			return __builtin_mul_overflow(v, 1000, ns) ? -ERANGE : 0;
		}
		d = rp_jfast_dec_double(&dec, s) * 1000.0;
		if (!in_int64(d))
			return -ERANGE;
		*ns = round_nearest(d);
		return 0;
	}
	if (is_integer(s)) {
		errno = 0;
		v = strtoll(s, NULL, 10);
		if (errno == ERANGE || __builtin_mul_overflow(v, 1000, ns))
			return -ERANGE;
		return 0;
	}
	d = rp_jfast_strtod(s) * 1000.0; /* yajl uses strtod too: both assume the C locale */
	if (!in_int64(d))
		return -ERANGE;
	*ns = round_nearest(d);
	return 0;
}

static int put_time(struct parser *p, const char *key, int64_t *ns, bool *has)
{
	if (us_to_ns(p->num, p->num_len, ns) != 0)
		return stop(p, "\"%s\" %.40s is out of range", key, p->num);
	*has = true;
	return 1;
}

static int put_string(struct parser *p, char dst[RP_CHROME_STR_MAX], enum kind k,
		      const unsigned char *s, size_t n)
{
	if (k == V_STR && put_text(dst, s, n))
		p->st->cut++;
	else if (k == V_NUM)
		number_text(p, dst);
	return k == V_STR || k == V_NUM;
}

/* A member of the event. */
static int member(struct parser *p, enum kind k, const unsigned char *s, size_t n)
{
	struct rp_chrome_ev *ev = &p->ev;

	switch (p->key) {
	case K_PH:
		if (k == V_STR)
			ev->ph = n > 0 ? (char)s[0] : '\0';
		return 1;
	case K_NAME: put_string(p, p->name, k, s, n); return 1;
	case K_CAT: put_string(p, p->cat, k, s, n); return 1;
	case K_PID: put_string(p, p->pid, k, s, n); return 1;
	case K_TID: put_string(p, p->tid, k, s, n); return 1;
	case K_ID: ev->has_id |= put_string(p, p->id, k, s, n); return 1;
	case K_TS:
	case K_DUR:
		if (k != V_NUM)
			return stop(p, "\"%s\" is %s, not a number", p->key == K_TS ? "ts" : "dur",
				    kind_name[k]);
		if (p->key == K_TS)
			return put_time(p, "ts", &ev->ts_ns, &ev->has_ts);
		return put_time(p, "dur", &ev->dur_ns, &ev->has_dur);
	case K_ARGS: p->in_args = k == V_MAP; return 1;
	case K_OTHER: return 1;
	}
	return 1;
}

/* The number in p->num as the event's args.correlation, if it is one. */
static void arg_corr(struct parser *p)
{
	struct rp_jfast_dec dec;
	unsigned long long v;
	char *end;

	if (p->arg_is_corr && rp_jfast_dec(p->num, p->num_len, &dec) && !dec.point && !dec.neg) {
		p->ev.has_correlation = true; /* up to 19 digits: strtoull's value */
		p->ev.correlation = dec.w;
	} else if (p->arg_is_corr && is_integer(p->num) && p->num[0] != '-') {
		errno = 0;
		v = strtoull(p->num, &end, 10);
		if (errno == 0 && *end == '\0') {
			p->ev.has_correlation = true;
			p->ev.correlation = v;
		}
	}
}

/* A member of the event's "args": correlation, and the first number for 'C'. */
static int arg(struct parser *p, enum kind k)
{
	if (k != V_NUM)
		return 1;
	arg_corr(p);
	if (!p->have_value) {
		/* only a 'C' event's value is used, and "ph" may come later: converted
		 * at the event's end; its key stays in argkey (cb_map_key keeps it) */
		p->have_value = true;
		memcpy(p->value_num, p->num, strlen(p->num) + 1);
		p->value_name_cut = p->argkey_cut;
	}
	return 1;
}

static void event_begin(struct parser *p)
{
	p->name[0] = p->cat[0] = p->pid[0] = p->tid[0] = p->id[0] = '\0';
	p->ev = (struct rp_chrome_ev){
		.name = p->name,
		.cat = p->cat,
		.pid = p->pid,
		.tid = p->tid,
		.id = "",
		.value_name = "",
	};
	p->have_value = p->value_name_cut = false;
	p->in_event = true;
	p->in_args = false;
	p->key = K_OTHER;
}

static int event_end(struct parser *p)
{
	struct rp_chrome_ev *ev = &p->ev;
	int rc;

	p->in_event = false;
	if (ev->has_id)
		ev->id = p->id;
	if (ev->ph == 'C' && p->have_value) {
		ev->has_value = true;
		ev->value = rp_jfast_strtod(p->value_num);
		ev->value_name = p->argkey;
		p->st->cut += p->value_name_cut;
	}
	p->st->events++;
	rc = p->fn(p->ctx, ev);
	if (rc != 0) {
		p->rc = rc;
		return 0;
	}
	if (p->pause) { /* jfast read it: back to chrome_run(), which reads on */
		if (p->ev_skip == 0) {
			p->paused = true;
			return 0;
		}
		p->ev_skip--;
	}
	return 1;
}

static int top_value(struct parser *p, enum kind k)
{
	if (k == V_ARR) {
		p->form = FORM_ARRAY;
		p->arr_depth = 1;
		return 1;
	}
	if (k == V_MAP) {
		p->form = FORM_OBJECT;
		return 1;
	}
	return stop(p, "the top level is %s, not an array or an object", kind_name[k]);
}

/* Every value, containers before they open: dispatched by depth. */
static int on_value(struct parser *p, enum kind k, const unsigned char *s, size_t n)
{
	size_t d = p->depth;

	if (d == 0)
		return top_value(p, k);
	if (p->arr_depth != 0 && d == p->arr_depth) {
		if (k == V_MAP)
			event_begin(p);
		else
			p->st->skipped++;
		return 1;
	}
	if (p->in_event && d == p->arr_depth + 1)
		return member(p, k, s, n);
	if (p->in_args && d == p->arr_depth + 2)
		return arg(p, k);
	if (p->form == FORM_OBJECT && d == 1 && p->top_key_events) {
		if (k != V_ARR)
			return stop(p, "\"traceEvents\" is %s, not an array", kind_name[k]);
		p->arr_depth = 2;
	}
	return 1;
}

/* ---- yajl callbacks ---- */

static int cb_null(void *ctx)
{
	return on_value(ctx, V_NULL, NULL, 0);
}

static int cb_boolean(void *ctx, int v)
{
	(void)v;
	return on_value(ctx, V_BOOL, NULL, 0);
}

static int cb_number(void *ctx, const char *s, size_t n)
{
	struct parser *p = ctx;

	if (n > NUM_MAX) /* the scanner refuses these first */
		return stop(p, "number longer than %d bytes", NUM_MAX);
	memcpy(p->num, s, n);
	p->num[n] = '\0';
	p->num_len = n;
	return on_value(p, V_NUM, NULL, 0);
}

static int cb_string(void *ctx, const unsigned char *s, size_t n)
{
	return on_value(ctx, V_STR, s, n);
}

/* Whether the key @s[0..@n) is the string literal @lit. */
#define key_is(s, n, lit) ((n) == sizeof(lit) - 1 && memcmp((s), (lit), sizeof(lit) - 1) == 0)

/* The event member a key names: by length, then bytes (most keys are "ph", "ts", ...). */
static enum key event_key(const unsigned char *s, size_t n)
{
	switch (n) {
	case 2:
		if (s[0] == 'p' && s[1] == 'h')
			return K_PH;
		if (s[0] == 't' && s[1] == 's')
			return K_TS;
		if (s[0] == 'i' && s[1] == 'd')
			return K_ID;
		return K_OTHER;
	case 3:
		if (memcmp(s, "dur", 3) == 0)
			return K_DUR;
		if (memcmp(s, "pid", 3) == 0)
			return K_PID;
		if (memcmp(s, "tid", 3) == 0)
			return K_TID;
		if (memcmp(s, "cat", 3) == 0)
			return K_CAT;
		return K_OTHER;
	case 4:
		if (memcmp(s, "name", 4) == 0)
			return K_NAME;
		if (memcmp(s, "args", 4) == 0)
			return K_ARGS;
		return K_OTHER;
	}
	return K_OTHER;
}

/* A key of the event's "args". */
static void arg_key(struct parser *p, const unsigned char *s, size_t n)
{
	p->arg_is_corr = key_is(s, n, "correlation");
	if (!p->have_value) /* arg() keeps the key of the first number only */
		p->argkey_cut = put_text(p->argkey, s, n);
}

static int cb_map_key(void *ctx, const unsigned char *s, size_t n)
{
	struct parser *p = ctx;
	size_t d = p->depth;

	if (p->in_event && d == p->arr_depth + 1) {
		p->key = event_key(s, n);
	} else if (p->in_args && d == p->arr_depth + 2) {
		arg_key(p, s, n);
	} else if (p->form == FORM_OBJECT && d == 1) {
		p->top_key_events = key_is(s, n, "traceEvents");
	}
	return 1;
}

static int cb_start_map(void *ctx)
{
	struct parser *p = ctx;

	if (!on_value(p, V_MAP, NULL, 0))
		return 0;
	p->depth++;
	return 1;
}

static int cb_end_map(void *ctx)
{
	struct parser *p = ctx;

	assert(p->depth > 0);
	p->depth--;
	if (p->in_args && p->depth == p->arr_depth + 1)
		p->in_args = false;
	else if (p->in_event && p->depth == p->arr_depth)
		return event_end(p);
	return 1;
}

static int cb_start_array(void *ctx)
{
	struct parser *p = ctx;

	if (!on_value(p, V_ARR, NULL, 0))
		return 0;
	p->depth++;
	return 1;
}

static int cb_end_array(void *ctx)
{
	struct parser *p = ctx;

	assert(p->depth > 0);
	p->depth--;
	if (p->arr_depth != 0 && p->depth == p->arr_depth - 1) {
		p->arr_depth = 0;
		p->seen_events = true;
	}
	return 1;
}

static const yajl_callbacks callbacks = {
	.yajl_null = cb_null,
	.yajl_boolean = cb_boolean,
	.yajl_number = cb_number,
	.yajl_string = cb_string,
	.yajl_start_map = cb_start_map,
	.yajl_map_key = cb_map_key,
	.yajl_end_map = cb_end_map,
	.yajl_start_array = cb_start_array,
	.yajl_end_array = cb_end_array,
};

/* ---- driving yajl ---- */

/* After yajl stopped at JSON text offset @at: the callback's value, or why. */
static int parse_fail(struct parser *p, yajl_status st, uint64_t at)
{
	unsigned char *msg;
	size_t n;
	int rc;

	if (st == yajl_status_client_canceled) {
		if (p->own_err)
			return fail(p, p->rc, at, "%s", p->what);
		return p->rc;
	}
	msg = yajl_get_error(p->h, 0, NULL, 0);
	if (msg == NULL)
		return fail(p, -ENOMEM, at, "out of memory");
	n = strlen((char *)msg);
	while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
		n--;
	rc = fail(p, -EINVAL, at, "%.*s", (int)n, (char *)msg);
	yajl_free_error(p->h, msg);
	return rc;
}

static int parse_run(struct parser *p, const unsigned char *b, size_t n, uint64_t at)
{
	yajl_status st = yajl_parse(p->h, b, n);

	if (st == yajl_status_ok)
		return 0;
	return parse_fail(p, st, at + yajl_get_bytes_consumed(p->h));
}

/* The next @n bytes of JSON text, through the scanner, to yajl. */
static int slow_feed(struct parser *p, const unsigned char *b, size_t n)
{
	size_t i = 0, k;
	int rc;

	while (i < n) {
		k = p->sc.dropping ? 0 : scan_keep(&p->sc, b + i, n - i);
		if (k > 0 && (rc = parse_run(p, b + i, k, p->off + i)) != 0)
			return rc;
		i += k;
		if (!p->sc.in_str && p->sc.run > NUM_MAX)
			return fail(p, -EINVAL, p->off + i, "number longer than %d bytes", NUM_MAX);
		if (p->sc.dropping)
			i += scan_drop(&p->sc, b + i, n - i);
	}
	p->off += n;
	return 0;
}

/* ---- the fast path (jfast.h) and the hand-over to yajl ---- */

/* After a container's start: are its keys and values never looked at? (Then the
 * callbacks they would get change nothing: see on_value() and cb_end_map().) */
static int chrome_mute(void *ctx)
{
	const struct parser *p = ctx;
	size_t d = p->depth;

	if (d <= 1)
		return 0;
	if (p->arr_depth == 0 || d > p->arr_depth + 2)
		return 1;
	if (d == p->arr_depth + 1)
		return !p->in_event;
	if (d == p->arr_depth + 2)
		return !p->in_args;
	return 0;
}

/* yajl reads on from text offset @at, primed into the fast path's state: what is
 * left of the window chunk by chunk, then @n bytes at @b. */
static int hand_over(struct parser *p, uint64_t at, const unsigned char *b, size_t n)
{
	const unsigned char *c;
	size_t k;
	int rc;

	p->fast = false;
	p->off = at;
	p->sc = (struct scan){ .run = p->jf.numrun };
	if (!rp_jfast_prime_yajl(&p->jf, p->h))
		return fail(p, -ENOMEM, at, "out of memory");
	while ((k = rp_jfast_win_next(&p->win, &c)) > 0)
		if ((rc = slow_feed(p, c, k)) != 0)
			return rc;
	return n > 0 ? slow_feed(p, b, n) : 0;
}

/* ---- events read by structure ---- */

/*
 * Most of a trace is event objects of a few shapes, and jfast's cost is per token
 * (the dispatch on its first byte, the state checks, a callback each). So where
 * jfast stands between two elements of the events array, the reader reads whole
 * events itself: one loop per object over its keys, the members it uses matched
 * by length and bytes and given to member() and arg() as the callbacks would
 * give them, numbers checked and copied only where used, every other value
 * (unknown keys, args' nested values) checked by jfast's own rules and skipped.
 * Anything doubtful (an escape in a string it uses, a string longer than
 * STR_KEEP, nesting deeper than SKIP_DEPTH, an error a callback would report, an
 * event not whole in the text at hand) leaves that event, from its '{', to jfast
 * (and so to yajl), with nothing of it kept: the answer, the error and its offset
 * stay theirs. jfast then stops after the event's end (event_end() cancels it
 * with p->paused) so the next events are read whole again.
 */

bool rp_chrome_events_off;

#define SKIP_DEPTH 32	/* deeper nesting: the event is left to jfast */
#define EV_SKIP	   8	/* events left to jfast after one was given up */
#define EV_NEAR	   4096 /* an event given up this near the end may just be cut */

#define HOT static inline __attribute__((always_inline)) /* the per-member helpers */

static inline bool is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

/* JSON's whitespace: one load a byte rather than four compares. */
static const bool ws_byte[256] = { [' '] = true, ['\n'] = true, ['\r'] = true, ['\t'] = true };

static size_t __attribute__((noinline)) skip_ws_run(const unsigned char *b, size_t n, size_t i)
{
	while (i < n && ws_byte[b[i]])
		i++;
	return i;
}

/* Whitespace from @b[@i]: most calls find none, or the one space of ", " or ": ". */
HOT size_t skip_ws(const unsigned char *b, size_t n, size_t i)
{
	if (i < n && b[i] == ' ')
		i++;
	if (i < n && b[i] > ' ')
		return i;
	return skip_ws_run(b, n, i);
}

/*
 * The string at @b[@i] == '"' whose text a callback gets: whole before @n, no
 * escape (jfast would decode it), at most STR_KEEP bytes (it would cut it). Its
 * text is @b[@i + 1], *@len bytes. @return the index after it; 0: give up.
 */
HOT size_t str_used(const unsigned char *b, size_t n, size_t i, size_t *len)
{
	const unsigned char *s = b + i + 1;
	size_t m = n - i - 1, k = rp_jfast_plain(s, m);
	bool esc;

	if (k >= m)
		return 0;
	if (s[k] != '"' && (rp_jfast_scan_string(s, m, &k, &esc) != RP_JFAST_SCAN_OK || esc))
		return 0;
	if (k > STR_KEEP)
		return 0;
	*len = k;
	return i + k + 2;
}

/* A string no callback uses (or whose callback does nothing with it): checked only. */
HOT size_t str_skip(const unsigned char *b, size_t n, size_t i)
{
	const unsigned char *s = b + i + 1;
	size_t m = n - i - 1, k = rp_jfast_plain(s, m);
	bool esc;

	if (k < m && s[k] == '"')
		return i + k + 2;
	if (rp_jfast_scan_string(s, m, &k, &esc) != RP_JFAST_SCAN_OK)
		return 0;
	return i + k + 2;
}

/* The end of the digit run at @b[@i]: 16 bytes tested at once where the text allows. */
HOT size_t digits(const unsigned char *b, size_t n, size_t i)
{
#if defined(__SSE2__)
	if (i + 16 <= n) {
		__m128i x = _mm_sub_epi8(_mm_loadu_si128((const __m128i *)(const void *)(b + i)),
					 _mm_set1_epi8('0'));
		/* a digit is 0..9 after the subtraction, unsigned */
		__m128i d = _mm_cmpeq_epi8(_mm_min_epu8(x, _mm_set1_epi8(9)), x);
		unsigned m = ~(unsigned)_mm_movemask_epi8(d) & 0xffffu;

		if (m != 0)
			return i + (size_t)__builtin_ctz(m);
		i += 16;
	}
#endif
	while (i < n && is_digit(b[i]))
		i++;
	return i;
}

/* The value of the @n digits at @s, after @w's: eight at a time (as jfast's eight_digits()). */
HOT uint64_t dec_run(const unsigned char *s, size_t n, uint64_t w)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	for (; n >= 8; s += 8, n -= 8) {
		uint64_t x;

		memcpy(&x, s, sizeof(x));
		x -= 0x3030303030303030ull;
		x = (x * 10 + (x >> 8)) & 0x00ff00ff00ff00ffull;
		x = (x * 100 + (x >> 16)) & 0x0000ffff0000ffffull;
		x = (x * 10000 + (x >> 32)) & 0xffffffffull;
		w = w * 100000000u + x;
	}
#endif
	for (; n > 0; s++, n--)
		w = w * 10 + (uint64_t)(*s - '0');
	return w;
}

/*
 * The number token at @b[@i], followed by a byte that may end it: its end, its
 * length in *@len; 0. The plain forms -?(0|[1-9]D*)(.D+)? here, as jfast's
 * scan_number() reads them; the rest (an exponent, a bad form) by it.
 */
HOT size_t num_tok(const unsigned char *b, size_t n, size_t i, size_t *len)
{
	size_t k = i + (b[i] == '-');
	unsigned char c;

	if (k < n && b[k] == '0')
		k++;
	else if (k < n && is_digit(b[k]))
		k = digits(b, n, k + 1);
	else
		goto slow;
	if (k < n && b[k] == '.') {
		if (k + 1 >= n || !is_digit(b[k + 1]))
			goto slow;
		k = digits(b, n, k + 2);
	}
	if (k >= n || k - i > RP_JFAST_NUM)
		goto slow;
	c = b[k];
	if (c != ',' && c != '}' && c != ']' && c != ' ' && c != '\n' && c != '\r' && c != '\t')
		goto slow;
	*len = k - i;
	return k;
slow:
	if (rp_jfast_scan_number(b + i, n - i, false, len) != RP_JFAST_SCAN_OK)
		return 0;
	return i + *len;
}

/* true, false or null at @b[@i]: its end and kind; 0. (What follows is the
 * caller's to check: only whitespace, ',' or a close may.) */
HOT size_t literal(const unsigned char *b, size_t n, size_t i, enum kind *k)
{
	const char *l = b[i] == 't' ? "true" : b[i] == 'f' ? "false" : "null";
	size_t ll = b[i] == 'f' ? 5 : 4;

	if (n - i < ll || memcmp(b + i, l, ll) != 0)
		return 0;
	*k = b[i] == 'n' ? V_NULL : V_BOOL;
	return i + ll;
}

static size_t skip_container(const unsigned char *b, size_t n, size_t i, unsigned depth);

/* A value no callback looks at, starting at @b[@i]: checked and skipped; its end, or 0. */
static size_t skip_value(const unsigned char *b, size_t n, size_t i, unsigned depth)
{
	size_t len;
	enum kind k;

	switch (b[i]) {
	case '"': return str_skip(b, n, i);
	case '{':
	case '[': return skip_container(b, n, i, depth);
	case 't':
	case 'f':
	case 'n': return literal(b, n, i, &k);
	default: return b[i] == '-' || is_digit(b[i]) ? num_tok(b, n, i, &len) : 0;
	}
}

static size_t skip_container(const unsigned char *b, size_t n, size_t i, unsigned depth)
{
	unsigned char close = b[i] == '{' ? '}' : ']';

	if (depth >= SKIP_DEPTH)
		return 0;
	i = skip_ws(b, n, i + 1);
	if (i < n && b[i] == close)
		return i + 1;
	for (;;) {
		if (i >= n)
			return 0;
		if (close == '}') {
			if (b[i] != '"' || (i = str_skip(b, n, i)) == 0)
				return 0;
			i = skip_ws(b, n, i);
			if (i >= n || b[i] != ':')
				return 0;
			i = skip_ws(b, n, i + 1);
			if (i >= n)
				return 0;
		}
		if ((i = skip_value(b, n, i, depth + 1)) == 0)
			return 0;
		i = skip_ws(b, n, i);
		if (i >= n)
			return 0;
		if (b[i] == close)
			return i + 1;
		if (b[i] != ',')
			return 0;
		i = skip_ws(b, n, i + 1);
	}
}

/* The number token @s[0..@n) where cb_number() puts it. */
HOT void set_num(struct parser *p, const unsigned char *s, size_t n)
{
	memcpy(p->num, s, n);
	p->num[n] = '\0';
	p->num_len = n;
}

/* After a member or element: the index of the ',' or @close that must follow; 0. */
HOT size_t next_sep(const unsigned char *b, size_t n, size_t i, unsigned char close)
{
	if (i < n && (b[i] == ',' || b[i] == close))
		return i;
	i = skip_ws_run(b, n, i);
	if (i >= n || (b[i] != ',' && b[i] != close))
		return 0;
	return i;
}

/* After a key's closing quote at @i: the index of its value; 0. */
HOT size_t after_colon(const unsigned char *b, size_t n, size_t i)
{
	if (i < n && b[i] == ':') /* nearly always right after the key */
		i++;
	else if ((i = skip_ws(b, n, i)) >= n || b[i++] != ':')
		return 0;
	i = skip_ws(b, n, i);
	return i < n ? i : 0;
}

/* @s[0..@n) into @dst as put_text() does, where it is short: the copy in
 * fixed-size moves when the text allows reading that far. */
HOT void copy_short(char dst[RP_CHROME_STR_MAX], const unsigned char *b, size_t bn, size_t at,
		    size_t n)
{
	if (n < 32 && at + 32 <= bn)
		memcpy(dst, b + at, 32);
	else
		memcpy(dst, b + at, n);
	dst[n] = '\0';
}

/* member() for a string of @n bytes at @b[@at] where it is a plain copy: true if done. */
HOT bool fast_string(struct parser *p, const unsigned char *b, size_t bn, size_t at, size_t n)
{
	char *dst;

	switch (p->key) {
	case K_PH: p->ev.ph = n > 0 ? (char)b[at] : '\0'; return true;
	case K_NAME: dst = p->name; break;
	case K_CAT: dst = p->cat; break;
	case K_PID: dst = p->pid; break;
	case K_TID: dst = p->tid; break;
	default: return false;
	}
	if (n >= RP_CHROME_STR_MAX)
		return false; /* cut: put_text() */
	copy_short(dst, b, bn, at, n);
	return true;
}

/*
 * member() for the number token @s[0..@n) where it is plain: pid and tid
 * integers are their text; ts and dur with at most three decimals are exact in
 * nanoseconds, w x 10^(3 - decimals), when below 2^51: us_to_ns()'s double
 * d x 1000 is then within n x 2^-52 < 0.5 of that integer (d is correctly
 * rounded, and so is the product), so it rounds to it. true if done.
 */
HOT bool fast_number(struct parser *p, const unsigned char *s, size_t n)
{
	size_t i = s[0] == '-', k, fd = 0;
	uint64_t w;
	int64_t *ns;

	switch (p->key) {
	case K_TS: ns = &p->ev.ts_ns; break;
	case K_DUR: ns = &p->ev.dur_ns; break;
	case K_PID:
	case K_TID:
		if (!is_integer_n((const char *)s, n))
			return false;
		memcpy(p->key == K_PID ? p->pid : p->tid, s, n); /* n <= RP_JFAST_NUM */
		(p->key == K_PID ? p->pid : p->tid)[n] = '\0';
		return true;
	default: return false;
	}
	k = digits(s, n, i);
	if (k - i > 16) /* then w < 10^16, and w x 1000 fits 64 bits */
		return false;
	w = dec_run(s + i, k - i, 0);
	if (k < n) { /* num_tok() checked the form: a point and digits, or an exponent */
		if (s[k] != '.' || n - k - 1 > 3 || k - i + n - k - 1 > 16 ||
		    digits(s, n, k + 1) != n) /* no exponent after them */
			return false;
		fd = n - k - 1;
		w = dec_run(s + k + 1, fd, w);
	}
	for (; fd < 3; fd++)
		w *= 10;
	if (w >= (1ull << 51))
		return false;
	*ns = s[0] == '-' ? -(int64_t)w : (int64_t)w;
	if (p->key == K_TS)
		p->ev.has_ts = true;
	else
		p->ev.has_dur = true;
	return true;
}

/* The value of the event member p->key at @b[@i], through member(); its end, or 0. */
static size_t fast_member(struct parser *p, const unsigned char *b, size_t n, size_t i)
{
	unsigned char c = b[i];
	size_t e, len;
	enum kind k;

	if (c == '"') {
		if (p->key == K_OTHER)
			return str_skip(b, n, i);
		if ((e = str_used(b, n, i, &len)) == 0)
			return 0;
		return fast_string(p, b, n, i + 1, len) || member(p, V_STR, b + i + 1, len) ? e : 0;
	}
	if (c == '-' || is_digit(c)) {
		e = num_tok(b, n, i, &len);
		if (e == 0 || p->key == K_OTHER)
			return e;
		if (fast_number(p, b + i, len))
			return e;
		set_num(p, b + i, len);
		return member(p, V_NUM, NULL, 0) ? e : 0;
	}
	if (c == '{' || c == '[') {
		if (!member(p, c == '{' ? V_MAP : V_ARR, NULL, 0))
			return 0;
		return p->in_args ? 0 : skip_container(b, n, i, 1); /* args: fast_args() */
	}
	if (c == 't' || c == 'f' || c == 'n') {
		e = literal(b, n, i, &k);
		return e && member(p, k, NULL, 0) ? e : 0;
	}
	return 0;
}

/* ---- the member loop: fixed reads from padded text ---- */

/*
 * The loops below read fixed pieces of the text (a key's or a short string's 16
 * bytes, the ": " after a key, a number's digits 16 at a time) without testing
 * each byte against the end. They test the index against @lim instead, once at
 * each key, value and separator: from an index at or below @lim, PAD bytes are
 * readable. In a chunk lim is n - PAD; an event that reaches it is read again
 * from a copy of the chunk's end (p->tail), where lim is n and PAD zero bytes
 * follow it: a zero byte ends no token and is no separator, so nothing at or
 * past n is ever taken. What is not short and plain (long strings, escapes,
 * UTF-8, exponents, whitespace other than one space, values skipped by their
 * structure) goes to the checked helpers above, bounded by n.
 */
#define NEED_PAD SIZE_MAX /* fast_event(): read the event again from the copy */

_Static_assert(TAIL_MAX <= EV_NEAR, "an event given up in the copy is near the end");

HOT uint16_t ld16(const void *s)
{
	uint16_t v;

	memcpy(&v, s, sizeof(v));
	return v;
}

HOT uint32_t ld32(const void *s)
{
	uint32_t v;

	memcpy(&v, s, sizeof(v));
	return v;
}

HOT uint64_t ld64(const void *s)
{
	uint64_t v;

	memcpy(&v, s, sizeof(v));
	return v;
}

/* The event member a key names, the key @k[0..@len) followed by its quote and
 * readable for 4 bytes: event_key() by one load and compare per candidate. */
HOT enum key key_of(const unsigned char *k, size_t len)
{
	uint32_t w;

	switch (len) {
	case 2:
		w = ld16(k);
		return w == ld16("ph")	 ? K_PH
		       : w == ld16("ts") ? K_TS
		       : w == ld16("id") ? K_ID
					 : K_OTHER;
	case 3: /* with the closing quote */
		w = ld32(k);
		return w == ld32("dur\"")   ? K_DUR
		       : w == ld32("pid\"") ? K_PID
		       : w == ld32("tid\"") ? K_TID
		       : w == ld32("cat\"") ? K_CAT
					    : K_OTHER;
	case 4:
		w = ld32(k);
		return w == ld32("name") ? K_NAME : w == ld32("args") ? K_ARGS : K_OTHER;
	}
	return K_OTHER;
}

/* The first @k (1..8) bytes of an ld64(). */
HOT uint64_t head(unsigned k)
{
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	return k >= 8 ? ~0ull : ~(~0ull >> (8 * k));
#else
	return k >= 8 ? ~0ull : (1ull << (8 * k)) - 1;
#endif
}

/*
 * An event key written as torch writes it, quotes, colon and one space (`"ph": `):
 * the index of its value and the member in *@key; 0 for any other key or form
 * (then key_at(), key_of() and colon() read it). One 8-byte compare: a match is
 * that string, so nothing in it needs a check.
 */
HOT size_t key_fast(const unsigned char *b, size_t i, enum key *key)
{
	uint64_t w = ld64(b + i);

#define KEY_IS(lit, k)                                                                             \
	if ((w & head(sizeof(lit) - 1)) == (ld64(lit "        ") & head(sizeof(lit) - 1))) {       \
		*key = (k);                                                                        \
		return i + sizeof(lit) - 1;                                                        \
	}
	switch (b[i + 1]) {
	case 'p':
		KEY_IS("\"ph\": ", K_PH);
		KEY_IS("\"pid\": ", K_PID);
		break;
	case 't':
		KEY_IS("\"ts\": ", K_TS);
		KEY_IS("\"tid\": ", K_TID);
		break;
	case 'n': KEY_IS("\"name\": ", K_NAME); break;
	case 'c': KEY_IS("\"cat\": ", K_CAT); break;
	case 'd': KEY_IS("\"dur\": ", K_DUR); break;
	case 'a': KEY_IS("\"args\": ", K_ARGS); break;
	case 'i': KEY_IS("\"id\": ", K_ID); break;
	}
#undef KEY_IS
	return 0;
}

/* The string at @b[@v] == '"' if it is short and plain (under 32 bytes, none of
 * them a quote, backslash, control or non-ASCII byte): its end, its length in
 * *@len; 0 otherwise (then str_used() or str_skip() decides). */
HOT size_t str_short(const unsigned char *b, size_t v, size_t *len)
{
	unsigned m = rp_jfast_special16(b + v + 1), k;

	if (m != 0)
		k = (unsigned)__builtin_ctz(m);
	else if ((m = rp_jfast_special16(b + v + 17)) != 0)
		k = 16 + (unsigned)__builtin_ctz(m);
	else
		return 0;
	if (b[v + 1 + k] != '"')
		return 0;
	*len = k;
	return v + k + 2;
}

/* The run of @k (1..8) digits at @s, 8 bytes readable: its value, in one 64-bit word. */
HOT uint64_t swar_digits(const unsigned char *s, unsigned k)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	uint64_t x = ld64(s) - 0x3030303030303030ull; /* borrows only move up, past the digits */

	x <<= 8 * (8 - k); /* the bytes after the run out, zeros (leading digits) in */
	x = (x * 10 + (x >> 8)) & 0x00ff00ff00ff00ffull;
	x = (x * 100 + (x >> 16)) & 0x0000ffff0000ffffull;
	return (x * 10000 + (x >> 32)) & 0xffffffffull;
#else
	return dec_run(s, k, 0);
#endif
}

/* The run of @k (1..15) digits at @s, 16 bytes readable. */
HOT uint64_t digits15(const unsigned char *s, unsigned k)
{
	if (k <= 8)
		return swar_digits(s, k);
	return swar_digits(s, k - 8) * 100000000u + swar_digits(s + k - 8, 8);
}

/*
 * The number at @b[@v] if it is plain: -?(0|[1-9]D*)(\.D+)? with under 16 digits
 * before and after the point (so at most 32 bytes, within RP_JFAST_NUM), followed
 * by ',', '}', ']' or whitespace, the form num_tok() and jfast's scan_number()
 * take. @return its end, *@ip the end of its integer digits; 0: not that form.
 */
HOT size_t num_plain(const unsigned char *b, size_t v, size_t *ip)
{
	size_t s = v + (b[v] == '-'), e;
	unsigned k = (unsigned)__builtin_ctz(rp_jfast_nondigit16(b + s) | 0x10000u), f;
	unsigned char c;

	if (k - 1 >= 15 || (b[s] == '0' && k > 1)) /* none, 16 or more, a leading zero */
		return 0;
	e = *ip = s + k;
	if (b[e] == '.') {
		f = (unsigned)__builtin_ctz(rp_jfast_nondigit16(b + e + 1) | 0x10000u);
		if (f - 1 >= 15)
			return 0;
		e += 1 + f;
	}
	c = b[e];
	if (c == ',' || c == '}' || c == ' ' || c == ']' || c == '\n' || c == '\r' || c == '\t')
		return e;
	return 0;
}

/* "ts" or "dur" at @b[@v] as fast_number() reads it, where num_plain() takes it:
 * its end; 0 to leave it to fast_member(). */
HOT size_t fast_time(struct parser *p, const unsigned char *b, size_t v, enum key key)
{
	static const uint64_t scale[] = { 1000, 100, 10, 1 };
	size_t ip, e = num_plain(b, v, &ip), s = v + (b[v] == '-');
	unsigned fd;
	uint64_t w;

	if (e == 0)
		return 0;
	fd = e > ip ? (unsigned)(e - ip - 1) : 0;
	if (fd > 3 || ip - s + fd > 16)
		return 0;
	w = digits15(b + s, (unsigned)(ip - s));
	if (fd > 0)
		w = w * (1000 / scale[fd]) + swar_digits(b + ip + 1, fd);
	w *= scale[fd];
	if (w >= (1ull << 51))
		return 0;
	if (key == K_TS) {
		p->ev.ts_ns = s > v ? -(int64_t)w : (int64_t)w;
		p->ev.has_ts = true;
	} else {
		p->ev.dur_ns = s > v ? -(int64_t)w : (int64_t)w;
		p->ev.has_dur = true;
	}
	return e;
}

/* name, cat, ph, pid, tid or id at @b[@v] where it is a short plain string or an
 * integer under 16 digits (member()'s text for it is the text): its end; 0 to
 * leave it to fast_member(). */
HOT size_t fast_text(struct parser *p, const unsigned char *b, size_t v, enum key key)
{
	size_t len, e, ip;
	char *dst;

	if (b[v] == '"') {
		if ((e = str_short(b, v, &len)) == 0)
			return 0;
		v++;
	} else {
		if (key == K_PH || key == K_NAME || key == K_CAT ||
		    (e = num_plain(b, v, &ip)) == 0 || e != ip)
			return 0; /* member() converts a fraction (number_text()) */
		len = e - v;
	}
	switch (key) {
	case K_PH: p->ev.ph = len > 0 ? (char)b[v] : '\0'; return e;
	case K_NAME: dst = p->name; break;
	case K_CAT: dst = p->cat; break;
	case K_PID: dst = p->pid; break;
	case K_TID: dst = p->tid; break;
	default:
		dst = p->id;
		p->ev.has_id = true;
		break;
	}
	memcpy(dst, b + v, 32); /* len < 32, and 32 bytes are readable */
	dst[len] = '\0';
	return e;
}

/* After a key's closing quote at @e: its value's index; 0. */
HOT size_t colon(const unsigned char *b, size_t n, size_t e)
{
	if (ld16(b + e) == ld16(": "))
		return e + 2;
	return after_colon(b, n, e);
}

/* After a member's value, at @e <= lim: the next key's index, or that of the
 * closing '}' with *@end; 0 if neither follows. */
HOT size_t next_key(const unsigned char *b, size_t n, size_t e, bool *end)
{
	if ((ld64(b + e) & head(3)) == (ld64(", \"     ") & head(3)))
		return e + 2; /* torch's ", " before a key */
	if (b[e] == ',') {
		e += 1 + (b[e + 1] == ' ');
		return b[e] == '"' ? e : skip_ws(b, n, e);
	}
	if (b[e] == '}') {
		*end = true;
		return e;
	}
	if ((e = next_sep(b, n, e, '}')) == 0)
		return 0;
	if (b[e] == '}') {
		*end = true;
		return e;
	}
	return skip_ws(b, n, e + 1);
}

/* A key at @b[@i] (@i <= lim): its end, its length in *@len; 0 if it is not a
 * string a callback would get as is. */
HOT size_t key_at(const unsigned char *b, size_t n, size_t i, size_t *len)
{
	size_t e;

	if (b[i] != '"')
		return 0;
	if ((e = str_short(b, i, len)) != 0)
		return e;
	return str_used(b, n, i, len);
}

/* A value of args no callback uses, at @b[@v] (@v <= lim): an array of short
 * plain numbers and strings (torch's "grid": [2484, 1, 1]) read here, anything
 * else (or anything more) by skip_value() from its start. Its end; 0. */
static size_t fast_skip(const unsigned char *b, size_t n, size_t lim, size_t v)
{
	size_t a = v + 1, e, ip, len;

	if (b[v] != '[')
		return skip_value(b, n, v, 1);
	while (a <= lim) {
		if (b[a] == '"')
			e = str_short(b, a, &len);
		else if (b[a] == '-' || is_digit(b[a]))
			e = num_plain(b, a, &ip);
		else
			break;
		if (e == 0)
			break;
		if (b[e] == ']')
			return e + 1;
		if (b[e] != ',')
			break;
		a = e + 1 + (b[e + 1] == ' ');
	}
	return skip_value(b, n, v, 1);
}

/* The event's "args" object at @b[@v] == '{' (@v <= lim): keys and numbers as
 * arg_key() and arg() take them, the rest checked and skipped. @return its end;
 * 0 to give the event up; NEED_PAD. */
static size_t fast_args(struct parser *p, const unsigned char *b, size_t n, size_t lim, size_t v)
{
	size_t a, e, len, ip;
	bool end = false;
	unsigned char c;

	p->in_args = true; /* member() for "args" and an object */
	a = v + 1 + (b[v + 1] == ' ');
	if (b[a] != '"') {
		a = skip_ws(b, n, a);
		if (a < n && b[a] == '}') {
			p->in_args = false;
			return a + 1;
		}
	}
	for (;;) {
		if (a > lim)
			return NEED_PAD;
		if ((e = key_at(b, n, a, &len)) == 0)
			return 0;
		p->arg_is_corr = len == 11 && ld64(b + a + 1) == ld64("correlat") &&
				 ld32(b + a + 8) == ld32("tion"); /* as arg_key() */
		if (!p->have_value) {
			p->fv_key = b + a + 1;
			p->fv_klen = len;
		}
		if (e > lim)
			return NEED_PAD;
		if ((v = colon(b, n, e)) == 0)
			return 0;
		if (v > lim)
			return NEED_PAD;
		c = b[v];
		if (c == '-' || is_digit(c)) {
			if ((e = num_plain(b, v, &ip)) != 0) {
				/* arg_corr(): a plain integer of under 16 digits is its value */
				if (p->arg_is_corr && b[v] != '-' && e == ip) {
					p->ev.has_correlation = true;
					p->ev.correlation = digits15(b + v, (unsigned)(e - v));
				}
				len = e - v;
			} else {
				if ((e = num_tok(b, n, v, &len)) == 0)
					return 0;
				if (p->arg_is_corr) {
					set_num(p, b + v, len);
					arg_corr(p);
				}
			}
			if (!p->have_value) { /* arg(), its copies left to fast_event() */
				p->have_value = true;
				p->fv_num = b + v;
				p->fv_nlen = len;
			}
		} else if (c == '"') {
			if ((e = str_short(b, v, &len)) == 0 && (e = str_skip(b, n, v)) == 0)
				return 0;
		} else if ((e = fast_skip(b, n, lim, v)) == 0) {
			return 0; /* literals and containers: arg() ignores them */
		}
		if (e > lim)
			return NEED_PAD;
		if ((a = next_key(b, n, e, &end)) == 0)
			return 0;
		if (end)
			break;
	}
	p->in_args = false;
	return a + 1;
}

/*
 * The event object at @b[0] == '{', whole before @n, readable as the loops above
 * want up to @lim: read, and handed to the callback (p->rc set if it stopped the
 * read). @return its length; 0 if it was given up, NEED_PAD if it reached @lim,
 * with nothing of it kept either way.
 */
static size_t fast_event(struct parser *p, const unsigned char *b, size_t n, size_t lim)
{
	uint64_t cut = p->st->cut;
	size_t i, v, e, len;
	bool end = false;
	enum key key;

	event_begin(p);
	i = skip_ws(b, n, 1);
	if (i < n && b[i] == '}')
		goto end;
	for (;;) {
		if (i > lim)
			goto pad;
		if ((v = key_fast(b, i, &key)) == 0) {
			if ((e = key_at(b, n, i, &len)) == 0)
				goto give_up;
			key = key_of(b + i + 1, len);
			if (e > lim)
				goto pad;
			if ((v = colon(b, n, e)) == 0)
				goto give_up;
			if (v > lim)
				goto pad;
		}
		switch (key) {
		case K_TS:
		case K_DUR: e = fast_time(p, b, v, key); break;
		case K_ARGS:
			if (b[v] != '{') {
				e = 0;
				break;
			}
			if ((e = fast_args(p, b, n, lim, v)) == NEED_PAD)
				goto pad;
			if (e == 0)
				goto give_up;
			break;
		case K_OTHER: e = b[v] == '"' ? str_short(b, v, &len) : 0; break;
		default: e = fast_text(p, b, v, key); break;
		}
		if (e == 0) { /* anything else as before */
			p->key = key;
			if ((e = fast_member(p, b, n, v)) == 0)
				goto give_up;
		}
		if (e > lim)
			goto pad;
		if ((i = next_key(b, n, e, &end)) == 0)
			goto give_up;
		if (end)
			break;
	}
end:
	if (p->have_value && p->ev.ph == 'C') { /* what arg() and arg_key() would have kept */
		p->argkey_cut = put_text(p->argkey, p->fv_key, p->fv_klen);
		p->value_name_cut = p->argkey_cut;
		memcpy(p->value_num, p->fv_num, p->fv_nlen);
		p->value_num[p->fv_nlen] = '\0';
	}
	event_end(p); /* p->pause is off: returns 0 only with p->rc set */
	return i + 1;
give_up: /* member() may have said why: jfast will again, at its place */
	e = 0;
	goto out;
pad:
	e = NEED_PAD;
out:
	p->st->cut = cut;
	p->in_event = p->in_args = false;
	p->rc = 0;
	p->own_err = false;
	return e;
}

/* The event at @b[@i], and fast_events()'s text moved to p->tail if it reached the
 * chunk's end (*@b, *@n, *@lim then the copy's, *@base the copy's offset). */
static size_t event_at(struct parser *p, const unsigned char **b, size_t *n, size_t *lim,
		       size_t *base, size_t *i)
{
	size_t e = fast_event(p, *b + *i, *n - *i, *lim > *i ? *lim - *i : 0), left = *n - *i;

	if (e != NEED_PAD)
		return e;
	if (*b == p->tail || left > TAIL_MAX)
		return 0; /* not within a copy: left to jfast */
	memcpy(p->tail, *b + *i, left);
	memset(p->tail + left, 0, PAD);
	*base += *i;
	*b = p->tail;
	*n = *lim = left;
	*i = 0;
	e = fast_event(p, *b, *n, *lim);
	return e == NEED_PAD ? 0 : e;
}

/*
 * Whole events from @b[0..@n), where jfast stands between two elements of the
 * events array. @return the bytes read (to the end of an event or a ','), with
 * jfast's state moved there; *@cancel if the callback stopped the read.
 */
static size_t fast_events(struct parser *p, const unsigned char *b, size_t n, bool *cancel)
{
	size_t i = 0, last = 0, e, base = 0, lim = n > PAD ? n - PAD : 0;
	bool value;

	*cancel = false;
	if (rp_jfast_off || rp_chrome_events_off || p->ev_skip > 0 || p->arr_depth == 0 ||
	    p->depth != p->arr_depth || !rp_jfast_in_array(&p->jf, &value))
		return 0;
	for (;;) {
		i = skip_ws(b, n, i);
		if (i >= n)
			break;
		if (!value) {
			if (b[i] != ',')
				break;
			last = base + ++i;
			value = true;
			continue;
		}
		if (b[i] != '{')
			break;
		if ((e = event_at(p, &b, &n, &lim, &base, &i)) == 0) {
			if (n - i > EV_NEAR) /* not merely cut by the end of the text */
				p->ev_skip = EV_SKIP;
			break;
		}
		i += e;
		last = base + i;
		value = false;
		if (p->rc != 0) {
			*cancel = true;
			break;
		}
	}
	if (last > 0)
		rp_jfast_array_step(&p->jf, value);
	return last;
}

static enum rp_jfast_rc chrome_run(void *ctx, const unsigned char *b, size_t n, uint64_t at,
				   bool eof, size_t *used);

/* One fast-path run over @n bytes at text offset @at; *@used: how many it read. */
static int fast_run(struct parser *p, const unsigned char *b, size_t n, uint64_t at, bool eof,
		    size_t *used, bool *bail)
{
	enum rp_jfast_rc rc = chrome_run(p, b, n, at, eof, used);

	*bail = rc == RP_JFAST_BAIL;
	if (rc == RP_JFAST_CANCEL)
		return parse_fail(p, yajl_status_client_canceled, at + *used);
	if (rc == RP_JFAST_NOMEM)
		return fail(p, -ENOMEM, at + *used, "out of memory");
	return 0;
}

/*
 * rp_jfast_run() over @b[0..@n), with whole events read by fast_events() wherever
 * jfast stands between two: jfast reads what they leave, up to the end of the
 * next event (p->pause), and they go on from there.
 */
static enum rp_jfast_rc chrome_run(void *ctx, const unsigned char *b, size_t n, uint64_t at,
				   bool eof, size_t *used)
{
	struct parser *p = ctx;
	enum rp_jfast_rc rc;
	size_t off = 0, u;
	bool cancel;

	(void)at;
	for (;;) {
		off += fast_events(p, b + off, n - off, &cancel);
		if (cancel) {
			*used = off;
			return RP_JFAST_CANCEL;
		}
		p->pause = !rp_chrome_events_off;
		rc = rp_jfast_run(&p->jf, b + off, n - off, eof, &u);
		p->pause = false;
		off += u;
		if (rc != RP_JFAST_CANCEL || !p->paused) {
			*used = off;
			return rc;
		}
		p->paused = false; /* jfast stopped right after an event's '}' */
		p->jf.numrun = 0;
	}
}

/* The next chunk of text, through the window (@eof: the end, no chunk). */
static int feed_win(struct parser *p, const unsigned char *b, size_t n, bool eof)
{
	struct rp_jfast_stop s;
	enum rp_jfast_rc rc;

	if (!p->fast)
		return n > 0 ? slow_feed(p, b, n) : 0;
	p->text += n;
	if (n == 0 && !eof)
		return 0;
	/* Each chunk is read as it comes, as yajl read it: what the callbacks saw
	 * when a chunk ends (or an error stops the read) is the same. */
	rc = rp_jfast_feed(&p->win, chrome_run, p, b, n, eof, &s);
	if (rc == RP_JFAST_CANCEL)
		return parse_fail(p, yajl_status_client_canceled, s.at);
	if (rc == RP_JFAST_NOMEM)
		return fail(p, -ENOMEM, s.at, "out of memory");
	if (rc == RP_JFAST_BAIL)
		return hand_over(p, s.at, s.rest, s.rest_n);
	if (eof) {
		p->off = p->text; /* read to the end */
		p->fast_end = true;
	}
	return 0;
}

static int feed(struct parser *p, const unsigned char *b, size_t n)
{
	return feed_win(p, b, n, false);
}

/* A whole plain buffer: the fast path over it in place, yajl from where it stopped. */
static int feed_buffer(struct parser *p, const unsigned char *b, size_t n)
{
	size_t used;
	bool bail;
	int rc = fast_run(p, b, n, 0, true, &used, &bail);

	if (rc || !bail) {
		p->off = n;
		p->fast_end = true;
		return rc;
	}
	p->fast = false;
	p->off = used;
	p->sc = (struct scan){ .run = p->jf.numrun };
	if (!rp_jfast_prime_yajl(&p->jf, p->h))
		return fail(p, -ENOMEM, used, "out of memory");
	return used < n ? slow_feed(p, b + used, n - used) : 0;
}

static int finish(struct parser *p)
{
	yajl_status st;
	int rc;

	if (p->fast && !p->fast_end && (rc = feed_win(p, NULL, 0, true)) != 0)
		return rc;
	st = p->fast_end ? yajl_status_ok : yajl_complete_parse(p->h);
	if (st != yajl_status_ok)
		return parse_fail(p, st, p->off);
	if (p->form == FORM_OBJECT && !p->seen_events)
		return fail(p, -EINVAL, p->off, "no \"traceEvents\" array in the top-level object");
	return 0;
}

static struct parser *parser_new(const char *origin, rp_chrome_fn fn, void *ctx,
				 struct rp_chrome_stats *st, char *why)
{
	struct parser *p = calloc(1, sizeof(*p));

	if (p == NULL)
		return NULL;
	rp_jfast_init(&p->jf, &callbacks, p, chrome_mute);
	p->fast = true;
	p->h = yajl_alloc(&rp_jfast_relay, NULL, &p->jf);
	if (p->h == NULL || rp_jfast_win_init(&p->win) != 0) {
		if (p->h != NULL)
			yajl_free(p->h);
		free(p);
		return NULL;
	}
	p->fn = fn;
	p->ctx = ctx;
	p->st = st;
	p->origin = origin;
	p->why = why;
	return p;
}

static void parser_free(struct parser *p)
{
	yajl_free(p->h);
	rp_jfast_win_free(&p->win);
	free(p);
}

/* ---- a buffer: plain, or gzip inflated in chunks ---- */

static int inflate_fail(struct parser *p, int zrc, const z_stream *zs, uint64_t at)
{
	if (zrc == Z_MEM_ERROR)
		return fail(p, -ENOMEM, at, "out of memory");
	if (zrc == Z_BUF_ERROR)
		return fail(p, -EINVAL, at, "truncated gzip stream");
	return fail(p, -EINVAL, at, "corrupt gzip stream (%s)", zs->msg ? zs->msg : "?");
}

static bool gzip_magic(const unsigned char *b, size_t n)
{
	return n >= 2 && b[0] == 0x1f && b[1] == 0x8b;
}

/* zlib counts input in uInt: hands it @buf up to 4 GiB at a time. */
static void inflate_input(z_stream *zs, const unsigned char *buf, size_t len, size_t *left)
{
	uInt n = *left > UINT_MAX ? UINT_MAX : (uInt)*left;

	if (zs->avail_in != 0 || n == 0)
		return;
	zs->next_in = (unsigned char *)buf + (len - *left);
	zs->avail_in = n;
	*left -= n;
}

/* Inflates @buf a chunk at a time; members are concatenated, trailing bytes ignored. */
static int parse_gzip(struct parser *p, const unsigned char *buf, size_t len)
{
	z_stream zs = { 0 };
	size_t left = len, used; /* left: not yet handed to zlib */
	int zrc, rc = 0;

	if (inflateInit2(&zs, 15 + 32) != Z_OK)
		return fail(p, -ENOMEM, 0, "out of memory");
	do {
		inflate_input(&zs, buf, len, &left);
		zs.next_out = p->chunk;
		zs.avail_out = CHUNK;
		zrc = inflate(&zs, Z_NO_FLUSH);
		used = len - left - zs.avail_in;
		if (zrc != Z_OK && zrc != Z_STREAM_END) {
			rc = inflate_fail(p, zrc, &zs, used);
			break;
		}
		rc = feed(p, p->chunk, CHUNK - zs.avail_out);
		if (rc == 0 && zrc == Z_STREAM_END && gzip_magic(buf + used, len - used))
			zrc = inflateReset(&zs);
	} while (rc == 0 && zrc == Z_OK);
	p->st->bytes = len - left - zs.avail_in;
	inflateEnd(&zs);
	return rc;
}

int rp_chrome_parse(const void *buf, size_t len, rp_chrome_fn fn, void *ctx,
		    struct rp_chrome_stats *st, char why[RP_WHY_MAX])
{
	struct rp_chrome_stats local;
	char local_why[RP_WHY_MAX];
	struct parser *p;
	int rc;

	assert(fn != NULL && (buf != NULL || len == 0));
	st = st ? st : &local;
	why = why ? why : local_why;
	memset(st, 0, sizeof(*st));
	why[0] = '\0';
	p = parser_new("buffer", fn, ctx, st, why);
	if (p == NULL) {
		snprintf(why, RP_WHY_MAX, "buffer: out of memory");
		return -ENOMEM;
	}
	if (gzip_magic(buf, len)) {
		rc = parse_gzip(p, buf, len);
	} else {
		rc = len > 0 ? feed_buffer(p, buf, len) : 0;
		st->bytes = len;
	}
	if (rc == 0)
		rc = finish(p);
	parser_free(p);
	return rc;
}

/* ---- a file, through zlib's gzread ---- */

/* A read failed, or the stream ended badly: @c is what zlib said after that read. */
static int gz_fail(struct parser *p, const struct rp_ra_chunk *c)
{
	const char *msg = c->msg, *s;
	uint64_t at = (uint64_t)c->offset;
	int err = c->err;

	if (err == Z_ERRNO)
		return fail(p, -c->saved_errno, at, "%s", strerror(c->saved_errno));
	if (err == Z_MEM_ERROR)
		return fail(p, -ENOMEM, at, "out of memory");
	if (err == Z_BUF_ERROR)
		return fail(p, -EINVAL, at, "truncated gzip stream");
	s = strstr(msg, ">: "); /* zlib's message starts "<fd:N>: " */
	return fail(p, -EINVAL, at, "corrupt gzip stream (%s)", s ? s + 3 : msg);
}

static void report(struct parser *p, int64_t at)
{
	if (at >= 0)
		p->st->bytes = (uint64_t)at;
	if (p->progress != NULL && p->st->bytes >= p->mark) {
		p->progress(p->ctx, p->st->bytes, p->total);
		p->reported = p->st->bytes;
		p->mark = p->st->bytes - p->st->bytes % MIB + MIB;
	}
}

/* The file's chunks, read ahead on a second thread (readahead.h), to the parser. */
static int read_chunks(struct parser *p, struct rp_readahead *ra)
{
	const struct rp_ra_chunk *c;
	int n, rc;

	p->mark = MIB;
	do {
		c = rp_ra_next(ra);
		n = c->n;
		if (n < 0)
			return gz_fail(p, c);
		if (n > 0 && (rc = feed(p, c->data, (size_t)n)) != 0)
			return rc;
		report(p, c->offset);
	} while (n > 0);
	if (c->err != Z_OK)
		return gz_fail(p, c);
	rc = finish(p);
	if (rc == 0 && p->progress != NULL && p->reported != p->st->bytes)
		p->progress(p->ctx, p->st->bytes, p->total); /* the end */
	return rc;
}

static int read_gz(struct parser *p, gzFile gz, int fd)
{
	struct rp_readahead ra;
	int rc;

	if (rp_ra_start(&ra, gz, fd, CHUNK) != 0)
		return fail(p, -ENOMEM, 0, "out of memory");
	rc = read_chunks(p, &ra);
	rp_ra_stop(&ra);
	return rc;
}

static int open_fail(struct parser *p, int fd, int err)
{
	if (fd >= 0)
		close(fd);
	snprintf(p->why, RP_WHY_MAX, "%s: %s", p->origin, strerror(err));
	return -err;
}

static int open_gz(struct parser *p, const char *path, gzFile *gz, int *fdp)
{
	struct stat sb;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &sb) != 0)
		return open_fail(p, fd, errno);
	if (S_ISDIR(sb.st_mode))
		return open_fail(p, fd, EISDIR);
	p->total = S_ISREG(sb.st_mode) ? (uint64_t)sb.st_size : 0;
	*gz = gzdopen(fd, "rb");
	if (*gz == NULL)
		return open_fail(p, fd, ENOMEM);
	gzbuffer(*gz, CHUNK);
	*fdp = fd;
	return 0;
}

int rp_chrome_read(const char *path, rp_chrome_fn fn, rp_chrome_progress_fn progress, void *ctx,
		   struct rp_chrome_stats *st, char why[RP_WHY_MAX])
{
	struct rp_chrome_stats local;
	char local_why[RP_WHY_MAX];
	struct parser *p;
	gzFile gz = NULL;
	int rc, fd = -1;

	assert(path != NULL && fn != NULL);
	st = st ? st : &local;
	why = why ? why : local_why;
	memset(st, 0, sizeof(*st));
	why[0] = '\0';
	p = parser_new(path, fn, ctx, st, why);
	if (p == NULL) {
		snprintf(why, RP_WHY_MAX, "%s: out of memory", path);
		return -ENOMEM;
	}
	p->progress = progress;
	rc = open_gz(p, path, &gz, &fd);
	if (rc == 0) {
		rc = read_gz(p, gz, fd);
		gzclose_r(gz);
	}
	parser_free(p);
	return rc;
}
