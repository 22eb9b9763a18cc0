// SPDX-License-Identifier: MIT
/*
 * What several renderers share, below all of them so that the call graph between the
 * render_*.c files has no cycle: the UTF-8 reader, the JSON string writer and the
 * escaping of names for a terminal or a line of text (names come from other
 * processes and trace files and may hold any byte: an ESC would drive the reader's
 * terminal, a newline would cut a row), the display
 * orders of the functions and of a window's rows (the text and JSON reports, the
 * Prometheus exposition and `top` list names in the same order), and the exact
 * decimal rate. Nothing here calls into another render_*.c file.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render_priv.h"

static const char *str_or_empty(const char *s)
{
	return s ? s : "";
}

static int cmp_u64_desc(uint64_t a, uint64_t b)
{
	return a > b ? -1 : a < b;
}

/*
 * rp_render_utf8_next() - the length of the UTF-8 sequence that starts at @s.
 * @s: a NUL-terminated string, *s != 0.
 * @valid: set to whether those bytes are one well-formed character; if not, they are
 *	one maximal ill-formed subpart, to be replaced by a single U+FFFD.
 * Return: 1 to 4; never reads past the terminating NUL (it is no continuation byte).
 */
size_t rp_render_utf8_next(const char *s, bool *valid)
{
	const unsigned char *u = (const unsigned char *)s;
	unsigned char lo = 0x80, hi = 0xbf;
	size_t need;

	*valid = true;
	if (u[0] < 0x80)
		return 1;
	if (u[0] >= 0xc2 && u[0] <= 0xdf)
		need = 1;
	else if (u[0] >= 0xe0 && u[0] <= 0xef)
		need = 2;
	else if (u[0] >= 0xf0 && u[0] <= 0xf4)
		need = 3;
	else
		need = 0;
	if (u[0] == 0xe0)
		lo = 0xa0; /* overlong */
	else if (u[0] == 0xed)
		hi = 0x9f; /* surrogates */
	else if (u[0] == 0xf0)
		lo = 0x90; /* overlong */
	else if (u[0] == 0xf4)
		hi = 0x8f; /* above U+10FFFF */
	*valid = need > 0;
	for (size_t i = 1; i <= need; i++) {
		if (u[i] < lo || u[i] > hi) {
			*valid = false;
			return i;
		}
		lo = 0x80;
		hi = 0xbf;
	}
	return need + 1;
}

void rp_render_json_str(FILE *out, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	bool valid;
	size_t n;

	putc_unlocked('"', out);
	for (; s && *s; s += n) {
		unsigned char c = (unsigned char)*s;
		size_t run = 0;

		/* the printable ASCII that goes out as it is, in one call: a report has
		 * thousands of names, and stdio costs ~100-150 instructions a call */
		while ((unsigned char)s[run] >= 0x20 && (unsigned char)s[run] < 0x7f &&
		       s[run] != '"' && s[run] != '\\')
			run++;
		if (run > 0) {
			fwrite_unlocked(s, 1, run, out);
			n = run;
			continue;
		}
		n = rp_render_utf8_next(s, &valid);
		if (!valid)
			fputs("\xef\xbf\xbd", out); /* U+FFFD */
		else if (c == '"' || c == '\\')
			fprintf(out, "\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			fprintf(out, "\\u00%c%c", hex[c >> 4], hex[c & 15]);
		else
			fwrite_unlocked(s, 1, n, out);
	}
	putc_unlocked('"', out);
}

size_t rp_render_safe_char(const char *s, char buf[16], size_t *cols)
{
	unsigned char c = (unsigned char)*s, c1 = (unsigned char)s[1];
	bool valid;
	size_t n = rp_render_utf8_next(s, &valid);

	if (!valid) {
		*cols = 1;
		memcpy(buf, "\xef\xbf\xbd", 4); /* U+FFFD */
	} else if (c == '\n' || c == '\t' || c == '\r') {
		*cols = 2;
		snprintf(buf, 16, "\\%c", c == '\n' ? 'n' : c == '\t' ? 't' : 'r');
	} else if (c < 0x20 || c == 0x7f) {
		*cols = 4;
		snprintf(buf, 16, "\\x%02x", c);
	} else if (c == 0xc2 && c1 >= 0x80 && c1 <= 0x9f) { /* C1: 0x9b is a CSI */
		*cols = 8;
		snprintf(buf, 16, "\\xc2\\x%02x", c1);
	} else {
		*cols = 1;
		memcpy(buf, s, n);
		buf[n] = '\0';
	}
	return n;
}

size_t rp_render_safe_str(FILE *out, const char *s, size_t room)
{
	char buf[16];
	size_t w = 0, cols;

	for (size_t n; s && *s; s += n) {
		n = rp_render_safe_char(s, buf, &cols);
		if (cols > room - w)
			break;
		fputs(buf, out);
		w += cols;
	}
	return w;
}

size_t rp_render_safe_width(const char *s)
{
	char buf[16];
	size_t w = 0, cols;

	for (size_t n; s && *s; s += n) {
		n = rp_render_safe_char(s, buf, &cols);
		w += cols;
	}
	return w;
}

char *rp_render_safe_buf(char *dst, size_t cap, const char *s)
{
	char buf[16];
	size_t len = 0, cols;

	dst[0] = '\0';
	for (size_t n; s && *s; s += n) {
		n = rp_render_safe_char(s, buf, &cols);
		if (strlen(buf) >= cap - len)
			break;
		memcpy(dst + len, buf, strlen(buf) + 1);
		len += strlen(buf);
	}
	return dst;
}

/*
 * Cumulative time descending, self time descending, then name, category, file and
 * line ascending; last the position in the report, so equal rows keep their order.
 */
static int cmp_fn(const void *pa, const void *pb)
{
	const struct rp_report_fn *a = *(const struct rp_report_fn *const *)pa;
	const struct rp_report_fn *b = *(const struct rp_report_fn *const *)pb;
	int c;

	if ((c = cmp_u64_desc(a->cum_ns, b->cum_ns)) != 0)
		return c;
	if ((c = cmp_u64_desc(a->self_ns, b->self_ns)) != 0)
		return c;
	if ((c = strcmp(str_or_empty(a->name), str_or_empty(b->name))) != 0)
		return c;
	if ((c = strcmp(str_or_empty(a->category), str_or_empty(b->category))) != 0)
		return c;
	if ((c = strcmp(str_or_empty(a->file), str_or_empty(b->file))) != 0)
		return c;
	if (a->line != b->line)
		return a->line < b->line ? -1 : 1;
	return a < b ? -1 : a > b;
}

/*
 * rp_render_fn_order() - r->fns in display order (see cmp_fn).
 * Return: a malloc'ed array of r->n_fns pointers into r->fns (the caller frees it),
 * or NULL when out of memory. An empty report gives a valid one-element array.
 */
const struct rp_report_fn **rp_render_fn_order(const struct rp_report *r)
{
	const struct rp_report_fn **v = malloc(sizeof(*v) * (r->n_fns ? r->n_fns : 1));

	if (v == NULL)
		return NULL;
	for (uint32_t i = 0; i < r->n_fns; i++)
		v[i] = &r->fns[i];
	qsort(v, r->n_fns, sizeof(*v), cmp_fn);
	return v;
}

struct wfn_key {
	const struct rp_report_wfn *w;
	const char *name;
	uint32_t i;
};

static int cmp_wfn(const void *pa, const void *pb)
{
	const struct wfn_key *a = pa, *b = pb;
	int c;

	if ((c = cmp_u64_desc(a->w->cum_ns, b->w->cum_ns)) != 0)
		return c;
	if ((c = cmp_u64_desc(a->w->self_ns, b->w->self_ns)) != 0)
		return c;
	if ((c = cmp_u64_desc(a->w->calls, b->w->calls)) != 0)
		return c;
	if ((c = strcmp(a->name, b->name)) != 0)
		return c;
	return a->i < b->i ? -1 : a->i > b->i;
}

/*
 * rp_render_wfn_order() - a window's rows in display order (see cmp_wfn).
 * Return: a malloc'ed array of w->n_fns indices (the caller frees it), or NULL.
 */
uint32_t *rp_render_wfn_order(const struct rp_report *r, const struct rp_report_window *w)
{
	size_t n = w->n_fns ? w->n_fns : 1;
	struct wfn_key *k = malloc(sizeof(*k) * n);
	uint32_t *v = malloc(sizeof(*v) * n);

	if (k == NULL || v == NULL) {
		free(k);
		free(v);
		return NULL;
	}
	for (uint32_t i = 0; i < w->n_fns; i++) {
		const struct rp_report_fn *f = rp_render_fn_at(r, w->fns[i].fn);

		k[i] = (struct wfn_key){ &w->fns[i], f ? str_or_empty(f->name) : "?", i };
	}
	qsort(k, w->n_fns, sizeof(*k), cmp_wfn);
	for (uint32_t i = 0; i < w->n_fns; i++)
		v[i] = k[i].i;
	free(k);
	return v;
}

__extension__ typedef unsigned __int128 u128;

/*
 * rp_render_rate() - @calls per second over @range_ns, three decimals, rounded half
 * up; "0" when @range_ns is 0. Return: @buf.
 */
char *rp_render_rate(char buf[48], uint64_t calls, uint64_t range_ns)
{
	u128 q, rem, whole;
	char digits[48];
	size_t n = 0;

	if (range_ns == 0) {
		snprintf(buf, 48, "0");
		return buf;
	}
	/* x 1e9 (ns per s) x 1000 (three decimals): below 2^104, no overflow */
	q = (u128)calls * 1000000000000u;
	rem = q % range_ns;
	q /= range_ns;
	if (rem >= range_ns - rem)
		q++;
	whole = q / 1000;
	do {
		digits[n++] = (char)('0' + (unsigned)(whole % 10));
		whole /= 10;
	} while (whole);
	for (size_t i = 0; i < n; i++)
		buf[i] = digits[n - 1 - i];
	snprintf(buf + n, 48 - n, ".%03u", (unsigned)(q % 1000));
	return buf;
}

uint64_t rp_render_covered_ns(const struct rp_report *r, const struct rp_report_window *w)
{
	uint64_t from = r->t_first > w->t_from ? r->t_first : w->t_from;

	return w->t_to > from ? w->t_to - from : 0;
}

/* U+FFFD for each invalid byte (render_priv.h). */
char *rp_render_utf8_copy(const char *s)
{
	size_t len = s ? strlen(s) : 0, o = 0, n;
	char *d = malloc(3 * len + 1); /* each bad byte grows to at most 3 */
	bool valid;

	if (d == NULL)
		return NULL;
	for (; s && *s; s += n) {
		n = rp_render_utf8_next(s, &valid);
		memcpy(d + o, valid ? s : "\xef\xbf\xbd", valid ? n : 3);
		o += valid ? n : 3;
	}
	d[o] = '\0';
	return d;
}

