// SPDX-License-Identifier: MIT
/*
 * The readers' fast path; what it accepts and how it hands over is in jfast.h.
 *
 * One loop over the text: skip whitespace, look at one byte, act on it in the
 * current state (what JSON allows next: a value, a key, a colon, a comma or a
 * close). The state after the last complete token is all it keeps, so it can stop
 * at any token boundary: for more text, or to hand over to yajl. Strings are
 * scanned 16 bytes at a time for the bytes that need a look (quote, backslash,
 * control characters, non-ASCII); their syntax is checked as yajl checks it (the
 * escapes it allows, UTF-8 by the lead byte's length), so nothing yajl refuses
 * gets through: anything doubtful is handed back instead.
 */
#include <errno.h>
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "jfast.h"

enum {
	ST_START,     /* the top-level value */
	ST_ARR_FIRST, /* after '[': a value or ']' */
	ST_ARR_NEXT,  /* after ',' in an array: a value */
	ST_MAP_FIRST, /* after '{': a key or '}' */
	ST_MAP_NEXT,  /* after ',' in an object: a key */
	ST_COLON,     /* after a key */
	ST_MAP_VAL,   /* after ':': a value */
	ST_AFTER,     /* after a value: ',' or the close, or the end of the text */
};

bool rp_jfast_off;

void rp_jfast_init(struct rp_jfast *j, const yajl_callbacks *cb, void *ctx, int (*mute)(void *ctx))
{
	memset(j, 0, offsetof(struct rp_jfast, stack));
	j->cb = cb;
	j->ctx = ctx;
	j->mute = mute;
	j->state = ST_START;
}

void rp_jfast_enter_array(struct rp_jfast *j)
{
	j->stack[0] = '[';
	j->depth = 1;
	j->state = ST_ARR_NEXT;
}

static bool is_ws(unsigned char c)
{
	return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

static bool is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

static bool is_hex(unsigned char c)
{
	return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* Bytes from @s before one of '"', '\\', < 0x20, >= 0x80 (or @n). */
static size_t plain_bytes(const unsigned char *s, size_t n)
{
	return rp_jfast_plain(s, n);
}

/* yajl's UTF-8 rule: the lead byte's length, then that many continuation bytes. */
static int utf8_len(unsigned char c)
{
	if ((c >> 5) == 0x6)
		return 2;
	if ((c >> 4) == 0xe)
		return 3;
	if ((c >> 3) == 0x1e)
		return 4;
	return 0;
}

enum scan { SCAN_OK, SCAN_MORE, SCAN_BAD };

/*
 * The string whose opening quote is @s[-1]: its raw length (to the closing quote)
 * in *@len and whether it has escapes.
 */
static inline __attribute__((always_inline)) enum scan scan_string(const unsigned char *s, size_t n, size_t *len, bool *esc)
{
	size_t i = 0;

	for (;;) {
		i += plain_bytes(s + i, n - i);
		if (i >= n)
			return SCAN_MORE;
		unsigned char c = s[i];
		if (c == '"') {
			*len = i;
			return SCAN_OK;
		}
		if (c == '\\') {
			*esc = true;
			if (i + 1 >= n)
				return SCAN_MORE;
			c = s[i + 1];
			if (c == 'u') {
				/* yajl refuses a bad digit as it comes, before the rest */
				for (size_t k = 2; k < 6 && i + k < n; k++)
					if (!is_hex(s[i + k]))
						return SCAN_BAD;
				if (i + 6 > n)
					return SCAN_MORE;
				i += 6;
			} else if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' ||
				   c == 'n' || c == 'r' || c == 't') {
				i += 2;
			} else {
				return SCAN_BAD;
			}
		} else if (c < 0x20) {
			return SCAN_BAD;
		} else {
			int k = utf8_len(c);
			if (k == 0)
				return SCAN_BAD;
			for (size_t t = 1; t < (size_t)k && i + t < n; t++)
				if ((s[i + t] >> 6) != 0x2)
					return SCAN_BAD;
			if (i + (size_t)k > n)
				return SCAN_MORE;
			i += (size_t)k;
		}
	}
}

/*
 * What the readers' scanners give yajl of a string of raw length @n: all of it, or
 * the first bytes up to the first one at or past RP_JFAST_STR_KEEP that is neither
 * inside an escape nor a UTF-8 continuation byte.
 */
static size_t kept_len(const unsigned char *s, size_t n)
{
	size_t i = 0;

	if (n <= RP_JFAST_STR_KEEP)
		return n;
	while (i < RP_JFAST_STR_KEEP)
		i += s[i] == '\\' ? (s[i + 1] == 'u' ? 6 : 2) : 1;
	while (i < n && (s[i] & 0xc0) == 0x80)
		i++;
	return i;
}

/* Decoding escapes is yajl's business: the string, quoted, through yajl. */
static int dec_string(void *ctx, const unsigned char *s, size_t n)
{
	struct rp_jfast *j = ctx;

	if (n > sizeof(j->dec))
		return 0;
	memcpy(j->dec, s, n);
	j->dec_len = n;
	return 1;
}

static bool decode(struct rp_jfast *j, const unsigned char *s, size_t n)
{
	static const yajl_callbacks cb = { .yajl_string = dec_string };
	unsigned char q[RP_JFAST_STR_KEEP + 16];
	yajl_handle h = yajl_alloc(&cb, NULL, j);
	bool ok;

	if (h == NULL)
		return false;
	q[0] = '"';
	memcpy(q + 1, s, n);
	q[n + 1] = '"';
	j->dec_len = SIZE_MAX;
	ok = yajl_parse(h, q, n + 2) == yajl_status_ok && j->dec_len != SIZE_MAX;
	yajl_free(h);
	return ok;
}

/* The number at @s: its length if yajl would read it and it ends before @n. */
static inline __attribute__((always_inline)) enum scan scan_number(const unsigned char *s, size_t n, bool eof, size_t *len)
{
	size_t i = 0;

	if (i < n && s[i] == '-')
		i++;
	if (i < n && s[i] == '0') {
		i++;
	} else {
		if (i >= n || !is_digit(s[i]))
			goto edge;
		while (i < n && is_digit(s[i]))
			i++;
	}
	if (i < n && s[i] == '.') {
		i++;
		if (i >= n || !is_digit(s[i]))
			goto edge;
		while (i < n && is_digit(s[i]))
			i++;
	}
	if (i < n && (s[i] == 'e' || s[i] == 'E')) {
		i++;
		if (i < n && (s[i] == '+' || s[i] == '-'))
			i++;
		if (i >= n || !is_digit(s[i]))
			goto edge;
		while (i < n && is_digit(s[i]))
			i++;
	}
	if (i > RP_JFAST_NUM)
		return SCAN_BAD;
	if (i >= n)
		return eof ? SCAN_BAD : SCAN_MORE;
	if (!is_ws(s[i]) && s[i] != ',' && s[i] != ']' && s[i] != '}')
		return SCAN_BAD;
	*len = i;
	return SCAN_OK;
edge:
	return i >= n && !eof && i <= RP_JFAST_NUM ? SCAN_MORE : SCAN_BAD;
}

static bool value_state(uint8_t st)
{
	return st == ST_START || st == ST_ARR_FIRST || st == ST_ARR_NEXT || st == ST_MAP_VAL;
}

static bool muted(const struct rp_jfast *j)
{
	return j->mute_depth != 0 && j->depth >= j->mute_depth;
}

enum rp_jfast_scan rp_jfast_scan_string(const unsigned char *s, size_t n, size_t *len, bool *esc)
{
	*esc = false;
	return (enum rp_jfast_scan)scan_string(s, n, len, esc);
}

enum rp_jfast_scan rp_jfast_scan_number(const unsigned char *s, size_t n, bool eof, size_t *len)
{
	return (enum rp_jfast_scan)scan_number(s, n, eof, len);
}

bool rp_jfast_in_array(const struct rp_jfast *j, bool *value)
{
	if (j->depth == 0 || j->stack[j->depth - 1] != '[' || muted(j))
		return false;
	*value = j->state == ST_ARR_FIRST || j->state == ST_ARR_NEXT;
	return *value || j->state == ST_AFTER;
}

void rp_jfast_array_step(struct rp_jfast *j, bool comma)
{
	j->state = comma ? ST_ARR_NEXT : ST_AFTER;
	j->numrun = 0;
}

enum rp_jfast_rc rp_jfast_run(struct rp_jfast *j, const unsigned char *b, size_t n, bool eof,
			      size_t *used)
{
	const yajl_callbacks *cb = j->cb;
	size_t i = 0, last = 0, len;
	enum scan sc;
	bool esc;

#define DONE_TOKEN(end, nr)                                                                        \
	do {                                                                                       \
		i = last = (end);                                                                  \
		j->numrun = (nr);                                                                  \
	} while (0)
#define CALL(expr)                                                                                 \
	do {                                                                                       \
		if (!(expr)) {                                                                     \
			*used = i;                                                                 \
			return RP_JFAST_CANCEL;                                                    \
		}                                                                                  \
	} while (0)
#define STOP(rc)                                                                                   \
	do {                                                                                       \
		*used = last;                                                                      \
		return (rc);                                                                       \
	} while (0)

	if (rp_jfast_off)
		STOP(RP_JFAST_BAIL);
	for (;;) {
		while (i < n && is_ws(b[i]))
			i++;
		if (i >= n) {
			if (!eof)
				STOP(RP_JFAST_MORE);
			if (j->depth == 0 && j->state == ST_AFTER) {
				*used = n;
				return RP_JFAST_DONE;
			}
			STOP(RP_JFAST_BAIL);
		}
		unsigned char c = b[i];
		uint8_t st = j->state;

		switch (c) {
		case '{':
		case '[':
			if (!value_state(st) || j->depth >= RP_JFAST_DEPTH)
				STOP(RP_JFAST_BAIL);
			j->tok = b + i++;
			if (c == '{')
				CALL(cb->yajl_start_map(j->ctx));
			else
				CALL(cb->yajl_start_array(j->ctx));
			j->stack[j->depth++] = c;
			j->state = c == '{' ? ST_MAP_FIRST : ST_ARR_FIRST;
			if (!muted(j) && j->mute(j->ctx))
				j->mute_depth = j->depth;
			DONE_TOKEN(i, 0);
			continue;
		case '}':
		case ']':
			if (j->depth == 0 || j->stack[j->depth - 1] != (c == '}' ? '{' : '[') ||
			    !(st == ST_AFTER || st == (c == '}' ? ST_MAP_FIRST : ST_ARR_FIRST)))
				STOP(RP_JFAST_BAIL);
			i++;
			j->depth--;
			if (j->depth < j->mute_depth)
				j->mute_depth = 0;
			j->state = ST_AFTER;
			CALL(c == '}' ? cb->yajl_end_map(j->ctx) : cb->yajl_end_array(j->ctx));
			DONE_TOKEN(i, 0);
			continue;
		case ',':
			if (st != ST_AFTER || j->depth == 0)
				STOP(RP_JFAST_BAIL);
			j->state = j->stack[j->depth - 1] == '[' ? ST_ARR_NEXT : ST_MAP_NEXT;
			DONE_TOKEN(i + 1, 0);
			/* ", " is the common separator: its space without a turn */
			if (i < n && b[i] == ' ')
				i++;
			continue;
		case ':':
			if (st != ST_COLON)
				STOP(RP_JFAST_BAIL);
			j->state = ST_MAP_VAL;
			DONE_TOKEN(i + 1, 0);
			continue;
		case '"': {
			bool key = st == ST_MAP_FIRST || st == ST_MAP_NEXT;
			if (!key && !value_state(st))
				STOP(RP_JFAST_BAIL);
			esc = false;
			sc = scan_string(b + i + 1, n - i - 1, &len, &esc);
			if (sc != SCAN_OK)
				STOP(sc == SCAN_MORE && !eof ? RP_JFAST_MORE : RP_JFAST_BAIL);
			const unsigned char *s = b + i + 1;
			i += len + 2;
			j->state = key ? ST_COLON : ST_AFTER;
			if (!muted(j)) {
				size_t k = kept_len(s, len);
				if (esc) {
					if (!decode(j, s, k))
						STOP(RP_JFAST_BAIL);
					s = j->dec;
					k = j->dec_len;
				}
				CALL(key ? cb->yajl_map_key(j->ctx, s, k)
					 : cb->yajl_string(j->ctx, s, k));
			}
			DONE_TOKEN(i, 0);
			/* a key's colon nearly always follows it: take it without a turn */
			if (key && i < n && b[i] == ':') {
				j->state = ST_MAP_VAL;
				DONE_TOKEN(i + 1, 0);
				if (i < n && b[i] == ' ')
					i++;
			}
			continue;
		}
		case 't':
		case 'f':
		case 'n': {
			const char *lit = c == 't' ? "true" : c == 'f' ? "false" : "null";
			size_t ll = strlen(lit);
			if (!value_state(st))
				STOP(RP_JFAST_BAIL);
			if (i + ll <= n) { /* whole: four bytes at once, and false's 'e' */
				uint32_t x, y;
				memcpy(&x, b + i, 4);
				memcpy(&y, lit, 4);
				if (x != y || (ll == 5 && b[i + 4] != 'e'))
					STOP(RP_JFAST_BAIL);
			} else {
				/* a wrong byte ends it even before the rest comes, as in yajl */
				if (memcmp(b + i, lit, n - i) != 0)
					STOP(RP_JFAST_BAIL);
				STOP(eof ? RP_JFAST_BAIL : RP_JFAST_MORE);
			}
			i += ll;
			j->state = ST_AFTER;
			if (!muted(j))
				CALL(c == 'n' ? cb->yajl_null(j->ctx)
					      : cb->yajl_boolean(j->ctx, c == 't'));
			DONE_TOKEN(i, c == 'n' ? 0 : 1);
			continue;
		}
		default:
			if (!(c == '-' || is_digit(c)) || !value_state(st))
				STOP(RP_JFAST_BAIL);
			sc = scan_number(b + i, n - i, eof, &len);
			if (sc != SCAN_OK)
				STOP(sc == SCAN_MORE ? RP_JFAST_MORE : RP_JFAST_BAIL);
			const char *s = (const char *)b + i;
			i += len;
			j->state = ST_AFTER;
			if (!muted(j))
				CALL(cb->yajl_number(j->ctx, s, len));
			DONE_TOKEN(i, (uint8_t)len);
			continue;
		}
	}
#undef DONE_TOKEN
#undef CALL
#undef STOP
}

size_t rp_jfast_prime(const struct rp_jfast *j, char *out)
{
	size_t n = 0;
	const char *inner;

	if (j->depth == 0) {
		inner = j->state == ST_AFTER ? "null" : "";
		strcpy(out, inner);
		return strlen(inner);
	}
	for (unsigned k = 0; k + 1 < j->depth; k++) {
		const char *s = j->stack[k] == '[' ? "[" : "{\"\":";
		memcpy(out + n, s, strlen(s));
		n += strlen(s);
	}
	switch (j->state) {
	case ST_ARR_FIRST: inner = "["; break;
	case ST_ARR_NEXT: inner = "[null,"; break;
	case ST_MAP_FIRST: inner = "{"; break;
	case ST_MAP_NEXT: inner = "{\"\":null,"; break;
	case ST_COLON: inner = "{\"\""; break;
	case ST_MAP_VAL: inner = "{\"\":"; break;
	default: inner = j->stack[j->depth - 1] == '[' ? "[null" : "{\"\":null"; break;
	}
	strcpy(out + n, inner);
	return n + strlen(inner);
}

/* ---- numbers ---- */

/*
 * w x 10^p, exactly strtod's double, for w < 2^64 (up to 19 digits: the toolkit's
 * 17-digit timestamps, torch's long decimals) and |p| <= 27, or false.
 *
 * Both operands are exact in x87's 64-bit significand (5^27 < 2^64, the 2^p part
 * is the exponent), so the one product or quotient q is w x 10^p correctly rounded
 * to 64 bits. Rounding q to 53 bits then gives the correctly rounded double unless
 * q is itself a midpoint between two doubles (its low 11 bits 10000000000b): every
 * midpoint lies on the 64-bit grid and rounding to it is monotonic, so the exact
 * value and q are on the same side of every other midpoint. A midpoint q (about one
 * in 2,048 of inexact results) goes to strtod. Needs round-to-nearest and the x87's
 * extended precision (Linux's defaults, which strtod and yajl assume too).
 */
static bool wide_div(uint64_t w, int p, double *out)
{
#if (defined(__x86_64__) || defined(__i386__)) && LDBL_MANT_DIG == 64
	static const long double p10[] = {
		1e0L,  1e1L,  1e2L,  1e3L,  1e4L,  1e5L,  1e6L,	 1e7L,	1e8L,  1e9L,
		1e10L, 1e11L, 1e12L, 1e13L, 1e14L, 1e15L, 1e16L, 1e17L, 1e18L, 1e19L,
		1e20L, 1e21L, 1e22L, 1e23L, 1e24L, 1e25L, 1e26L, 1e27L,
	};
	long double q;
	uint64_t sig;

	if (p > 27 || p < -27)
		return false;
	q = p < 0 ? (long double)w / p10[-p] : (long double)w * p10[p];
	memcpy(&sig, &q, sizeof(sig)); /* x87: the significand first */
	if ((sig & 0x7ff) == 0x400)
		return false;
	*out = (double)q;
	return true;
#else
	(void)w;
	(void)p;
	(void)out;
	return false;
#endif
}

/* w x 10^p, negated if @neg: strtod(@s)'s double (@s: the number w and p came from). */
static double from_dec(uint64_t w, int p, bool neg, const char *s)
{
	static const double p10[] = { 1e0,  1e1,  1e2,	1e3,  1e4,  1e5,  1e6,	1e7,
				      1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
				      1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22 };
	double d;

	if (w >= (1ull << 53) || p > 22 || p < -22) {
		if (!wide_div(w, p, &d))
			return strtod(s, NULL);
	} else {
		d = (double)w;
		d = p < 0 ? d / p10[-p] : d * p10[p];
	}
	return neg ? -d : d;
}

/*
 * Eight decimal digits at @s as their value in *@v, or false if they are not all
 * digits: one load, a range test per byte, three multiplies that each join pairs
 * of neighbours (little-endian: the first digit is the low byte).
 */
static bool eight_digits(const char *s, uint64_t *v)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	const uint64_t hi = 0xf0f0f0f0f0f0f0f0ull, zeros = 0x3030303030303030ull;
	uint64_t x;

	memcpy(&x, s, sizeof(x));
	/* each byte 0x30..0x3f, and still so plus 6 (no carry: all below 0x40) */
	if ((x & hi) != zeros || ((x + 0x0606060606060606ull) & hi) != zeros)
		return false;
	x -= zeros;
	x = (x * 10 + (x >> 8)) & 0x00ff00ff00ff00ffull;
	x = (x * 100 + (x >> 16)) & 0x0000ffff0000ffffull;
	x = (x * 10000 + (x >> 32)) & 0xffffffffull;
	*v = x;
	return true;
#else
	(void)s;
	(void)v;
	return false;
#endif
}

/* Digits at @s[*i..@n) into *@w; how many. */
static int digit_run(const char *s, size_t n, size_t *i, uint64_t *w)
{
	size_t k = *i;
	uint64_t v;

	while (k + 8 <= n && eight_digits(s + k, &v)) {
		*w = *w * 100000000u + v;
		k += 8;
	}
	for (; k < n && is_digit((unsigned char)s[k]); k++)
		*w = *w * 10 + (uint64_t)(s[k] - '0');
	v = k - *i;
	*i = k;
	return (int)v;
}

bool rp_jfast_dec(const char *s, size_t n, struct rp_jfast_dec *d)
{
	size_t i = 0;
	int fd = 0;

	d->w = 0;
	d->neg = n > 0 && s[0] == '-';
	i += d->neg;
	d->digits = digit_run(s, n, &i, &d->w);
	d->point = i < n && s[i] == '.';
	if (d->point) {
		i++;
		fd = digit_run(s, n, &i, &d->w);
		d->digits += fd;
	}
	d->p = -fd;
	return i == n && d->digits > 0 && d->digits <= 19 && (!d->point || fd > 0);
}

double rp_jfast_dec_double(const struct rp_jfast_dec *d, const char *s)
{
	return from_dec(d->w, d->p, d->neg, s);
}

double rp_jfast_strtod(const char *s)
{
	const char *c = s;
	uint64_t w = 0;
	int digits = 0, p = 0, ex = 0, exs = 1;
	bool neg = *c == '-';

	c += neg;
	for (; is_digit((unsigned char)*c); c++, digits++)
		w = w * 10 + (uint64_t)(*c - '0');
	if (*c == '.')
		for (c++; is_digit((unsigned char)*c); c++, digits++, p--)
			w = w * 10 + (uint64_t)(*c - '0');
	if (*c == 'e' || *c == 'E') {
		c++;
		if (*c == '+' || *c == '-')
			exs = *c++ == '-' ? -1 : 1;
		for (; is_digit((unsigned char)*c) && ex < 10000; c++)
			ex = ex * 10 + (*c - '0');
		p += exs * ex;
	}
	if (*c != '\0' || digits > 19)
		return strtod(s, NULL);
	return from_dec(w, p, neg, s);
}

/* ---- the relay in front of a reader's yajl callbacks ---- */

static int r_null(void *c)
{
	struct rp_jfast *j = c;

	return j->priming || j->cb->yajl_null(j->ctx);
}

static int r_boolean(void *c, int v)
{
	struct rp_jfast *j = c;

	return j->priming || j->cb->yajl_boolean(j->ctx, v);
}

static int r_number(void *c, const char *s, size_t n)
{
	struct rp_jfast *j = c;

	return j->priming || j->cb->yajl_number(j->ctx, s, n);
}

static int r_string(void *c, const unsigned char *s, size_t n)
{
	struct rp_jfast *j = c;

	return j->priming || j->cb->yajl_string(j->ctx, s, n);
}

static int r_map_key(void *c, const unsigned char *s, size_t n)
{
	struct rp_jfast *j = c;

	return j->priming || j->cb->yajl_map_key(j->ctx, s, n);
}

static int r_start_map(void *c)
{
	struct rp_jfast *j = c;

	return j->priming || j->cb->yajl_start_map(j->ctx);
}

static int r_end_map(void *c)
{
	struct rp_jfast *j = c;

	return j->priming || j->cb->yajl_end_map(j->ctx);
}

static int r_start_array(void *c)
{
	struct rp_jfast *j = c;

	return j->priming || j->cb->yajl_start_array(j->ctx);
}

static int r_end_array(void *c)
{
	struct rp_jfast *j = c;

	return j->priming || j->cb->yajl_end_array(j->ctx);
}

const yajl_callbacks rp_jfast_relay = {
	.yajl_null = r_null,
	.yajl_boolean = r_boolean,
	.yajl_number = r_number,
	.yajl_string = r_string,
	.yajl_start_map = r_start_map,
	.yajl_map_key = r_map_key,
	.yajl_end_map = r_end_map,
	.yajl_start_array = r_start_array,
	.yajl_end_array = r_end_array,
};

bool rp_jfast_prime_yajl(struct rp_jfast *j, yajl_handle h)
{
	char text[RP_JFAST_PRIME];
	size_t n = rp_jfast_prime(j, text);
	bool ok;

	j->priming = true;
	ok = n == 0 || yajl_parse(h, (const unsigned char *)text, n) == yajl_status_ok;
	j->priming = false;
	return ok;
}

/* ---- the window ---- */

int rp_jfast_win_init(struct rp_jfast_win *w)
{
	memset(w, 0, sizeof(*w)); /* the buffer comes with the first chunk */
	return 0;
}

void rp_jfast_win_free(struct rp_jfast_win *w)
{
	free(w->buf);
	w->buf = NULL;
}

/* Forgets the chunk ends at or before the read position. */
static void drop_bounds(struct rp_jfast_win *w)
{
	unsigned k = 0;

	while (k < w->nb && w->bound[k] <= w->base + w->start)
		k++;
	if (k) {
		memmove(w->bound, w->bound + k, (w->nb - k) * sizeof(w->bound[0]));
		w->nb -= k;
	}
}

/* Appends @n bytes; @bound: they end a chunk (else more of the chunk follows). */
static bool win_add(struct rp_jfast_win *w, const unsigned char *b, size_t n, bool bound)
{
	if (n == 0)
		return true;
	drop_bounds(w);
	if (bound && w->nb == RP_JFAST_BOUNDS)
		return false;
	if (w->fill + n > w->cap && w->start > 0) {
		memmove(w->buf, w->buf + w->start, w->fill - w->start);
		w->base += w->start;
		w->fill -= w->start;
		w->start = 0;
	}
	if (w->fill + n > w->cap) { /* grows to hold a long token, up to RP_JFAST_WIN */
		size_t cap = w->cap ? w->cap : 2 * n;
		unsigned char *nb;
		while (cap < w->fill + n)
			cap *= 2;
		if (cap > RP_JFAST_WIN || (nb = realloc(w->buf, cap)) == NULL)
			return false;
		w->buf = nb;
		w->cap = cap;
	}
	memcpy(w->buf + w->fill, b, n);
	w->fill += n;
	if (bound)
		w->bound[w->nb++] = w->base + w->fill;
	return true;
}

bool rp_jfast_win_put(struct rp_jfast_win *w, const unsigned char *b, size_t n)
{
	return win_add(w, b, n, true);
}

/* Empties the window; the next byte read is at text offset @at. */
static void win_reset(struct rp_jfast_win *w, uint64_t at)
{
	w->base = at;
	w->start = w->fill = 0;
	w->nb = 0;
}

void rp_jfast_win_take(struct rp_jfast_win *w, size_t n)
{
	w->start += n;
}

size_t rp_jfast_win_next(struct rp_jfast_win *w, const unsigned char **b)
{
	uint64_t at = w->base + w->start, end = w->base + w->fill;
	size_t n;

	drop_bounds(w);
	if (w->nb > 0 && w->bound[0] < end)
		end = w->bound[0];
	n = (size_t)(end - at);
	if (n == 0)
		return 0;
	*b = w->buf + w->start;
	w->start += n;
	return n;
}

/* ---- one chunk, read in place where it can be ---- */

/* A chunk's first bytes copied behind a pending token: enough for nearly every one
 * (a longer token gets the whole chunk copied, as before). */
#define BRIDGE 512

static enum rp_jfast_rc feed_run(struct rp_jfast_win *w, rp_jfast_run_fn run, void *ctx, bool eof,
				 size_t *used)
{
	return run(ctx, rp_jfast_win_data(w), rp_jfast_win_len(w), w->base + w->start, eof, used);
}

/* The window empty: the chunk read where it is, what is left of it kept. */
static enum rp_jfast_rc feed_in_place(struct rp_jfast_win *w, rp_jfast_run_fn run, void *ctx,
				      const unsigned char *b, size_t n, bool eof,
				      struct rp_jfast_stop *s)
{
	uint64_t t = w->base + w->start; /* the text offset of b[0] */
	size_t used;
	enum rp_jfast_rc rc = run(ctx, b, n, t, eof, &used);

	s->at = t + used;
	win_reset(w, t + used);
	if (rc == RP_JFAST_BAIL) {
		s->rest = b + used;
		s->rest_n = n - used;
	} else if ((rc == RP_JFAST_MORE || rc == RP_JFAST_DONE) && !win_add(w, b + used, n - used, true)) {
		s->rest = b + used; /* a tail longer than the window: yajl's */
		s->rest_n = n - used;
		return RP_JFAST_BAIL;
	}
	return rc;
}

enum rp_jfast_rc rp_jfast_feed(struct rp_jfast_win *w, rp_jfast_run_fn run, void *ctx,
			       const unsigned char *b, size_t n, bool eof, struct rp_jfast_stop *s)
{
	size_t k = rp_jfast_win_len(w), m = n < BRIDGE ? n : BRIDGE, used;
	enum rp_jfast_rc rc;

	s->rest = NULL;
	s->rest_n = 0;
	if (b == NULL) /* the end: no chunk (no offsets from NULL) */
		b = (const unsigned char *)"";
	if (k == 0)
		return feed_in_place(w, run, ctx, b, n, eof, s);
	/* A token is pending: the chunk's first bytes after it, then, once it is
	 * read, the rest of the chunk in place. */
	if (!win_add(w, b, m, m == n)) {
		s->at = w->base + w->start;
		s->rest = b;
		s->rest_n = n;
		return RP_JFAST_BAIL;
	}
	rc = feed_run(w, run, ctx, eof && m == n, &used);
	s->at = w->base + w->start + used;
	if (rc == RP_JFAST_CANCEL || rc == RP_JFAST_NOMEM)
		return rc;
	rp_jfast_win_take(w, used);
	if (m < n && used >= k) { /* the pending token is read: b[used - k] on in place */
		size_t c = used - k;
		win_reset(w, s->at);
		if (rc == RP_JFAST_BAIL) {
			s->rest = b + c;
			s->rest_n = n - c;
			return rc;
		}
		return feed_in_place(w, run, ctx, b + c, n - c, eof, s);
	}
	if (m < n) { /* a long token: the whole chunk in the window, as one piece */
		if (!win_add(w, b + m, n - m, true)) {
			w->fill -= m;
			s->at = w->base + w->start;
			s->rest = b;
			s->rest_n = n;
			return RP_JFAST_BAIL;
		}
		if (rc != RP_JFAST_BAIL) {
			rc = feed_run(w, run, ctx, eof, &used);
			s->at = w->base + w->start + used;
			if (rc == RP_JFAST_CANCEL || rc == RP_JFAST_NOMEM)
				return rc;
			rp_jfast_win_take(w, used);
		}
	}
	s->at = w->base + w->start;
	return rc;
}

/* ---- a whole value, checked and skipped (import_nat.c's step lane) ---- */

/* The first byte from @s[@i] on that is not whitespace: its index (or @n). Usually
 * the first: one test. */
static inline __attribute__((always_inline)) size_t skip_ws(const unsigned char *s, size_t i,
							    size_t n)
{
	if (__builtin_expect(i < n && s[i] > ' ', 1))
		return i;
	while (i < n && is_ws(s[i]))
		i++;
	return i;
}

/* An object's key at @s[*@i], its colon and the whitespace after them: *@i at the value. */
static inline __attribute__((always_inline)) enum scan member_key(const unsigned char *s,
									  size_t n, size_t *i)
{
	enum scan sc;
	size_t k;
	bool esc;

	if (s[*i] != '"')
		return SCAN_BAD;
	if ((sc = scan_string(s + *i + 1, n - *i - 1, &k, &esc)) != SCAN_OK)
		return sc;
	*i = skip_ws(s, *i + k + 2, n);
	if (*i < n && s[*i] != ':')
		return SCAN_BAD;
	*i += *i + 1 < n && s[*i + 1] == ' ' ? 2 : 1; /* ": " first */
	*i = skip_ws(s, *i, n);
	return *i < n ? SCAN_OK : SCAN_MORE;
}

enum rp_jfast_scan rp_jfast_skip_nest(const unsigned char *s, size_t n, unsigned max_depth,
				      size_t *len)
{
	uint8_t stack[RP_JFAST_DEPTH]; /* '[' or '{' per open container */
	unsigned d = 0;
	size_t i = 0, k;
	enum scan sc;
	bool esc;

	if (max_depth > RP_JFAST_DEPTH)
		max_depth = RP_JFAST_DEPTH;
	if (n == 0)
		return RP_JFAST_SCAN_MORE;
	for (;;) {
		unsigned char c = s[i]; /* a value: i < n */

		if (c == '"') {
			if ((sc = scan_string(s + i + 1, n - i - 1, &k, &esc)) != SCAN_OK)
				return (enum rp_jfast_scan)sc;
			i += k + 2;
		} else if (c == '{' || c == '[') {
			if (d == max_depth)
				return RP_JFAST_SCAN_BAD;
			stack[d++] = c;
			if ((i = skip_ws(s, i + 1, n)) >= n)
				return RP_JFAST_SCAN_MORE;
			if (s[i] != c + 2) { /* not its close ('[' + 2 is ']', '{' + 2 '}') */
				if (c == '{' && (sc = member_key(s, n, &i)) != SCAN_OK)
					return (enum rp_jfast_scan)sc;
				continue; /* its first value */
			}
			i++;
			d--;
		} else if (c == 't' || c == 'f' || c == 'n') {
			if ((sc = (enum scan)rp_jfast_scan_literal(s + i, n - i, &k)) != SCAN_OK)
				return (enum rp_jfast_scan)sc;
			i += k;
		} else if (c == '-' || is_digit(c)) {
			if ((sc = scan_number(s + i, n - i, false, &k)) != SCAN_OK)
				return (enum rp_jfast_scan)sc;
			i += k;
		} else {
			return RP_JFAST_SCAN_BAD;
		}
		/* after a value: closes, then a ',' and the next value, or the end */
		for (;;) {
			if (d == 0) {
				*len = i;
				return RP_JFAST_SCAN_OK;
			}
			if ((i = skip_ws(s, i, n)) >= n)
				return RP_JFAST_SCAN_MORE;
			c = stack[d - 1];
			if (s[i] == c + 2) {
				i++;
				d--;
				continue;
			}
			if (s[i] != ',')
				return RP_JFAST_SCAN_BAD;
			i += i + 1 < n && s[i + 1] == ' ' ? 2 : 1; /* ", " first */
			if ((i = skip_ws(s, i, n)) >= n)
				return RP_JFAST_SCAN_MORE;
			if (c == '{' && (sc = member_key(s, n, &i)) != SCAN_OK)
				return (enum rp_jfast_scan)sc;
			break;
		}
	}
}
