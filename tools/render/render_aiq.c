// SPDX-License-Identifier: MIT
/*
 * The agent toolkit's outputs of its nested-call analysis (engine/formats/aiq.h):
 *   aiq       its NestedCallProfilingResult as JSON without the text report:
 *             {"concurrency": {"timeline_segments": [[start, end, level], ...],
 *             "p50", "p90", "p95", "p99"}, "node_metrics": {uuid: {...}},
 *             "top_bottlenecks": [...]}, plus "ringprof": what was irregular;
 *   aiq-text  its textual report, line for line.
 * Floats are written as Python's repr() writes them (the shortest text that reads
 * back as the same double), so the numbers are the toolkit's to the last digit.
 * The two long lists (timeline segments, node metrics) are rendered on two cores,
 * block by block, and written in order.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "aiq.h"
#include "render.h"

__extension__ typedef unsigned __int128 u128;

/* n / 10^d as fixed-point text ("-12.345"), d > 0 or ".0" when d == 0. */
static void fixed_text(char *buf, int64_t n, int d)
{
	char dig[32];
	uint64_t u = n < 0 ? 0 - (uint64_t)n : (uint64_t)n;
	int k = 0, p = 0;

	do {
		dig[k++] = (char)('0' + u % 10);
		u /= 10;
	} while (u > 0 || k <= d);
	if (n < 0)
		buf[p++] = '-';
	while (k > d)
		buf[p++] = dig[--k];
	buf[p++] = '.';
	if (d == 0)
		buf[p++] = '0';
	while (k > 0)
		buf[p++] = dig[--k];
	buf[p] = '\0';
}

/*
 * Whether strtod(fixed_text(n, d)) == v, without strtod (the text is n / 10^d
 * exactly, strtod rounds it correctly): for |n| < 2^53 one IEEE division of exact
 * operands, rounded as strtod rounds; above, whether n / 10^d lies in v's rounding
 * interval, in 128-bit integers. -1: out of those ranges (ask strtod).
 */
static int reads_back(int64_t n, int d, double v)
{
	static const double p10[] = { 1e0,  1e1,  1e2,	1e3,  1e4,  1e5,  1e6,	1e7,
				      1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
				      1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22 };
	uint64_t a = n < 0 ? 0 - (uint64_t)n : (uint64_t)n, bits, m;
	double av = v < 0 ? -v : v;
	int e;

	if (a == 0)
		return v == 0;
	if ((n < 0) != (v < 0) || v == 0)
		return 0;
	if (a < (1ull << 53))
		return (double)a / p10[d] == av;
	memcpy(&bits, &av, sizeof(bits));
	e = (int)(bits >> 52);
	if (e == 0 || e == 0x7ff || d > 20)
		return -1;
	m = (bits & ((1ull << 52) - 1)) | (1ull << 52);
	e -= 1075; /* av = m x 2^e */
	if (e > 2 || 2 - e > 64)
		return -1;
	/* In units of 2^(e-2): av's interval is [4m - 2, 4m + 2] (4m - 1 below a power
	 * of two), ends included when m is even; n / 10^d is a x 2^(2-e) / 10^d. */
	u128 ten = 1, x = (u128)a << (2 - e), lo, hi;

	for (int k = 0; k < d; k++)
		ten *= 10;
	lo = ((u128)4 * m - (m == (1ull << 52) && e > -1074 ? 1 : 2)) * ten;
	hi = ((u128)4 * m + 2) * ten;
	if (m % 2 == 0)
		return x >= lo && x <= hi;
	return x > lo && x < hi;
}

/*
 * Python's repr(float): the shortest text that reads back as the same double. Fast
 * path: the fewest decimals d for which round(v x 10^d) / 10^d is v again (in long
 * double, then confirmed as strtod would, which is what decides: reads_back());
 * fixed-point text (Python writes 1e-05 where this writes 0.00001: the same value).
 * Otherwise %.17g. @buf: 48 bytes. The reference rp_render_repr_double() is
 * compared with (test_aiq), and its path for what that one does not decide.
 */
static void repr_slow(char *buf, double v)
{
	static const long double p10[] = { 1e0L,  1e1L,	 1e2L,	1e3L,  1e4L,  1e5L,  1e6L,  1e7L,
					   1e8L,  1e9L,	 1e10L, 1e11L, 1e12L, 1e13L, 1e14L, 1e15L,
					   1e16L, 1e17L, 1e18L, 1e19L, 1e20L, 1e21L, 1e22L };
	uint64_t bits, m;
	int k;
	u128 ten = 1;

	/* |v| = m x 2^-k: for 0 < k < 128, a cheap exact test skips the decimals
	 * that cannot hold v (no integer within 10^d / 2 of m x 10^d in units of
	 * 2^-k, so n / 10^d is outside v's rounding interval for every n). */
	memcpy(&bits, &v, sizeof(bits));
	m = (bits & ((1ull << 52) - 1)) | (1ull << 52);
	k = 1075 - (int)((bits >> 52) & 0x7ff);
	if (((bits >> 52) & 0x7ff) == 0 || k <= 0 || k > 124)
		k = 0;
	/* r = m x 10^d mod 2^k, kept from d to d + 1 (r x 10 < 2^128 as k <= 124) */
	u128 mask = k ? ((u128)1 << k) - 1 : 0, half = k ? (u128)1 << (k - 1) : 0, r = m & mask;
	for (int d = 0; d <= 22 && v == v; d++, ten *= 10, r = (r * 10) & mask) {
		/* The test first: |x| grows with d, so a skipped d past the 2^62 limit
		 * only defers the break to the next d tested, with the same outcome. */
		if (k != 0 && (r < half ? r : mask + 1 - r) * 2 > ten)
			continue;
		long double x = (long double)v * p10[d];
		if (!(x < 0x1p62L && x > -0x1p62L))
			break;
		long double ax = x < 0 ? -x : x;
		int64_t n = (int64_t)ax; /* nearest, ties to even as Python's repr picks */
		long double fr = ax - (long double)n;
		n += fr > 0.5L || (fr == 0.5L && (n & 1));
		n = x < 0 ? -n : n;
		if ((double)((long double)n / p10[d]) != v)
			continue;
		int rb = reads_back(n, d, v);
		if (rb == 0)
			continue;
		fixed_text(buf, n, d);
		if (rb == 1 || strtod(buf, NULL) == v)
			return;
	}
	if (v != v || v - v != 0) { /* as Python's json.dumps writes them */
		strcpy(buf, v != v ? "NaN" : v > 0 ? "Infinity" : "-Infinity");
		return;
	}
	snprintf(buf, 48, "%.17g", v);
	if (strpbrk(buf, ".en") == NULL)
		strcat(buf, ".0");
}

static const char digit_pairs[201] = "00010203040506070809101112131415161718192021222324"
				      "25262728293031323334353637383940414243444546474849"
				      "50515253545556575859606162636465666768697071727374"
				      "75767778798081828384858687888990919293949596979899";

/* @v (< 10^8) as exactly eight digits at @p, in 32-bit arithmetic. */
static void eight_digits(char *p, uint32_t v)
{
	uint32_t hi = v / 10000, lo = v % 10000;

	memcpy(p, digit_pairs + 2 * (hi / 100), 2);
	memcpy(p + 2, digit_pairs + 2 * (hi % 100), 2);
	memcpy(p + 4, digit_pairs + 2 * (lo / 100), 2);
	memcpy(p + 6, digit_pairs + 2 * (lo % 100), 2);
}

/* @n / 10^@d as fixed_text() writes it ("-" if @neg); @return its length. */
static size_t fixed_fast(char *buf, bool neg, uint64_t n, int d)
{
	/* n < 2^62 < 10^19: zero-padded to 24 digits, then room for the fixed-size
	 * copies below, which read and write past the digits they need */
	char dig[48];
	int nd, p = 0;

	eight_digits(dig + 16, (uint32_t)(n % 100000000));
	eight_digits(dig + 8, (uint32_t)(n / 100000000 % 100000000));
	if (n >= 10000000000000000ull) /* a duration's n has 16 digits or fewer */
		eight_digits(dig, (uint32_t)(n / 10000000000000000ull));
	else
		memcpy(dig, "00000000", 8);
	/* digits of n: from its bit length (x log10(2) ~ 1233 / 4096), then one test */
	static const uint64_t p10[20] = { 1, 10, 100, 1000, 10000, 100000, 1000000, 10000000,
					  100000000, 1000000000, 10000000000ull, 100000000000ull,
					  1000000000000ull, 10000000000000ull, 100000000000000ull,
					  1000000000000000ull, 10000000000000000ull,
					  100000000000000000ull, 1000000000000000000ull,
					  10000000000000000000ull };
	nd = (int)(((64 - __builtin_clzll(n | 1)) * 1233) >> 12);
	nd += n >= p10[nd];
	if (nd <= d) /* at least one digit before the point */
		nd = d + 1;
	if (neg)
		buf[p++] = '-';
	/* Copies of a constant 24 bytes (a few moves, where a length known only here
	 * calls memcpy): the bytes past each part are overwritten next or lie past
	 * the end. At most 1 + 19 + 1 + 24 = 45 bytes of @buf's 48 are written. */
	memcpy(buf + p, dig + 24 - nd, 24), p += nd - d;
	buf[p++] = '.';
	if (d == 0)
		buf[p++] = '0';
	memcpy(buf + p, dig + 24 - d, 24), p += d;
	return (size_t)p;
}

static const uint64_t p10_u64[20] = { 1, 10, 100, 1000, 10000, 100000, 1000000, 10000000,
					100000000, 1000000000, 10000000000ull, 100000000000ull,
					1000000000000ull, 10000000000000ull, 100000000000000ull,
					1000000000000000ull, 10000000000000000ull,
					100000000000000000ull, 1000000000000000000ull,
					10000000000000000000ull };

/*
 * Whether the nearest n to m x 2^-k x @ten (a power of ten) certainly does not
 * read back, by rp_render_repr_double()'s test (m != 2^52, so v's interval is
 * symmetric): false also when unsure (n near 2^62, where that one goes slow).
 */
static bool repr_fails_at(uint64_t m, int k, uint64_t ten)
{
	u128 p = (u128)m * ten, mask = ((u128)1 << k) - 1, r = p & mask, dist;

	if ((p >> k) >= ((u128)1 << 62) - 1)
		return false;
	dist = r <= mask + 1 - r ? r : mask + 1 - r;
	return m % 2 == 0 ? dist * 2 > ten : dist * 2 >= ten;
}

/*
 * repr_slow()'s text, found in integers alone for the doubles it handles with its
 * cheap test (|v| = m x 2^-k, 0 < k <= 124: every timestamp and duration): the
 * fewest decimals d for which the nearest n to v x 10^d (ties to even) reads back
 * as v, i.e. lies in v's rounding interval, decided exactly on m x 10^d (< 2^127)
 * rather than in long double and strtod. What it does not decide (other doubles,
 * n near 2^62) goes to repr_slow(). test_aiq compares the two on millions of
 * doubles and with Python's repr.
 */
size_t rp_render_repr_double(char *buf, double v)
{
	uint64_t bits, m;
	int k, d;

	memcpy(&bits, &v, sizeof(bits));
	m = (bits & ((1ull << 52) - 1)) | (1ull << 52);
	k = 1075 - (int)((bits >> 52) & 0x7ff);
	if (((bits >> 52) & 0x7ff) == 0 || k <= 0 || k > 124)
		goto slow;
	u128 mask = ((u128)1 << k) - 1, half = (u128)1 << (k - 1), r, ten = 1;

	d = 0;
	/* Most numbers here need 16 or 17 digits, reached from d = 0 one decimal at a
	 * time. So first d0, about 15 significant digits: if n at d0 fails, every d
	 * below fails too (n x 10^(d0 - d) is as near v at d0, and the nearest n at d0
	 * nearer still, inside v's symmetric interval: not so below a power of two,
	 * m == 2^52, left to the loop), and the search goes on from d0 + 1. */
	if (m != (1ull << 52)) {
		int e10 = ((52 - k) * 1233) >> 12; /* ~floor(log10 |v|), may be one low */
		int d0 = 14 - e10;

		if (d0 > 0 && d0 <= 18 && repr_fails_at(m, k, p10_u64[d0]))
			d = d0 + 1, ten = (u128)p10_u64[d0] * 10;
	}
next:
	/* The first d that repr_slow()'s cheap test keeps: r = m x 10^d mod 2^k. In
	 * 64 bits while r x 10 fits (k <= 60; 10^19 > 2^61 ends it by d = 19). */
	if (k <= 60 && d <= 19) {
		/* m x 10^d mod 2^k from the product's low 64 bits (2^k divides 2^64) */
		uint64_t r64 = (m * p10_u64[d]) & (uint64_t)mask, h64 = (uint64_t)half;
		uint64_t t64 = (uint64_t)ten;

		while ((r64 < h64 ? r64 : (uint64_t)mask + 1 - r64) * 2 > t64) {
			r64 = (r64 * 10) & (uint64_t)mask, t64 *= 10, d++;
			if (d > 19)
				goto slow;
		}
		ten = t64;
	} else {
		r = m & mask;
		for (int i = 0; i < d; i++)
			r = (r * 10) & mask;
		while ((r < half ? r : mask + 1 - r) * 2 > ten) {
			r = (r * 10) & mask, ten *= 10, d++;
			if (d > 22)
				goto slow;
		}
	}
	if (d > 22)
		goto slow;
	/* v x 10^d = q + r / 2^k exactly; n the nearest integer, D its distance in
	 * units of 2^-k, below whether n x 10^-d <= v. */
	u128 p = (u128)m * ten, q = p >> k, dist;
	bool below;
	uint64_t n;

	r = p & mask;
	if (q >= ((u128)1 << 62) - 1) /* where repr_slow() stops, or close to it */
		goto slow;
	n = (uint64_t)q;
	if (r < half || (r == half && !(n & 1))) {
		dist = r, below = true;
	} else {
		dist = mask + 1 - r, below = false, n++;
	}
	/* v's interval: +-2^-k / 2, ends in when m is even (strtod's ties to even);
	 * below a power of two only 2^-k / 4 (the double below is closer). */
	bool ok = dist == 0 || (below && m == (1ull << 52) ? dist * 4 <= ten :
			       m % 2 == 0		   ? dist * 2 <= ten :
							     dist * 2 < ten);
	if (!ok) {
		if (++d > 22)
			goto slow;
		ten *= 10;
		goto next;
	}
	return fixed_fast(buf, v < 0, n, d);
slow:
	repr_slow(buf, v);
	return strlen(buf);
}

/*
 * Text gathered in memory and written with one fwrite: through stdio, every piece
 * (a key, a float, a bracket) cost ~100 instructions of its own, more than the
 * formatting of most of them.
 */
struct wb {
	FILE *out;
	const struct seg_text *seg; /* the timeline's texts, or NULL */
	uint32_t near[2];	    /* put_time(): where the last start, end was found */
	size_t n;
	char b[8192];
};

/*
 * The texts of the timeline's boundaries (seg_t[0..n_seg]), kept as the timeline is
 * written, for the node metrics written after it: a node's start or end that opened
 * or closed a segment (nearly all) is found among the boundaries (sorted) and its
 * text copied, not formatted again (~400 instructions). The search starts where the
 * last start (or end) was found: nodes come request by request, depth first, so
 * their starts nearly in time order and their ends near each other, and a search
 * stays in memory just read (a hash table of the boundaries, random reads in 16 MB
 * and more, cost more time than formatting saved). A timeline too long for
 * SEG_TEXT_MAX entries, a text too long for an entry, or no memory: formatted as
 * before.
 */
#define SEG_TEXT_MAX (1u << 21) /* entries: 48 MiB of text at most */

struct seg_entry {
	char s[23];
	uint8_t len; /* 0: not kept */
};

struct seg_text {
	uint32_t n; /* entries: n_seg + 1 */
	struct seg_entry *t;
};

static void wb_flush(struct wb *w)
{
	fwrite_unlocked(w->b, 1, w->n, w->out);
	w->n = 0;
}

/* Room for @k bytes at the end (@k <= sizeof(w->b)). */
static inline char *wb_room(struct wb *w, size_t k)
{
	if (w->n + k > sizeof(w->b))
		wb_flush(w);
	return w->b + w->n;
}

static inline void wb_put(struct wb *w, const char *s, size_t k)
{
	if (k > sizeof(w->b) / 2) {
		wb_flush(w);
		fwrite_unlocked(s, 1, k, w->out);
		return;
	}
	memcpy(wb_room(w, k), s, k);
	w->n += k;
}

static inline void wb_str(struct wb *w, const char *s)
{
	wb_put(w, s, strlen(s));
}

/* Whether @x and @y are the same double, bit for bit (so the same text). */
static inline bool same_double(double x, double y)
{
	uint64_t a, b;

	memcpy(&a, &x, sizeof(a));
	memcpy(&b, &y, sizeof(b));
	return a == b;
}

/* Keeps the text @s[0..@k) of boundary @i, if it fits (the blocks of the timeline
 * keep disjoint ranges of boundaries: see put_segments()). */
static void seg_keep(const struct seg_text *st, uint32_t i, const char *s, size_t k)
{
	if (st != NULL && i < st->n && k < sizeof(st->t[i].s)) {
		memcpy(st->t[i].s, s, k);
		st->t[i].len = (uint8_t)k;
	}
}

static void put_double(struct wb *w, double v);

/*
 * The boundary seg_t[i] that is @v bit for bit, searched outward from *@near (then
 * set to where @v falls), or UINT32_MAX. seg_t[0..n_seg] increase strictly.
 */
static uint32_t seg_find(const struct rp_aiq *a, double v, uint32_t *near)
{
	const double *t = a->seg_t;
	uint32_t n = a->n_seg + 1, lo, hi, step = 1;

	if (!(v >= t[0] && v <= t[n - 1])) /* NaN too */
		return UINT32_MAX;
	lo = *near < n ? *near : 0;
	if (t[lo] <= v) { /* up to the first above v (or n) */
		hi = lo + 1;
		while (hi < n && t[hi] <= v) {
			lo = hi;
			step *= 2;
			hi = n - lo > step ? lo + step : n;
		}
	} else { /* down to one at or below v (t[0] is) */
		hi = lo;
		lo = hi - 1;
		while (lo > 0 && t[lo] > v) {
			hi = lo;
			step *= 2;
			lo = hi > step ? hi - step : 0;
		}
	}
	while (hi - lo > 1) { /* t[lo] <= v < t[hi] (t[n]: above all) */
		uint32_t m = lo + (hi - lo) / 2;
		if (t[m] <= v)
			lo = m;
		else
			hi = m;
	}
	*near = lo;
	return same_double(t[lo], v) ? lo : UINT32_MAX;
}

/* put_double() of a node's start (@end false) or end: copied when it is a timeline
 * boundary whose text was kept. */
static void put_time(struct wb *w, const struct rp_aiq *a, double v, bool end)
{
	const struct seg_text *st = w->seg;
	uint32_t i;

	if (st != NULL && st->n > 0 && (i = seg_find(a, v, &w->near[end])) != UINT32_MAX && i < st->n &&
	    st->t[i].len != 0) {
		wb_put(w, st->t[i].s, st->t[i].len);
		return;
	}
	put_double(w, v);
}

static void put_double(struct wb *w, double v)
{
	char *p = wb_room(w, 48);

	w->n += rp_render_repr_double(p, v);
}

/* put_double(), its text also kept in @keep (48 bytes): @return its length. */
static size_t put_double_keep(struct wb *w, double v, char *keep)
{
	char *p = wb_room(w, 48);
	size_t k = rp_render_repr_double(p, v);

	memcpy(keep, p, k);
	w->n += k;
	return k;
}

/* @s as a JSON string: '"' and '\\' escaped, control bytes as \u00XX. */
/* Whether a word holds a byte below 0x20, a '"' or a '\\' (exact as a whole: a
 * borrow only flags bytes above one that qualifies). */
static inline bool special8(uint64_t x)
{
	const uint64_t ones = 0x0101010101010101ull, high = ones * 0x80;
	uint64_t q = x ^ (ones * '"'), b = x ^ (ones * '\\');

	return (((x - ones * 0x20) & ~x) | ((q - ones) & ~q) | ((b - ones) & ~b)) & high;
}

static void put_string(struct wb *w, const char *s);

/* String @id of @t: as put_string(), a plain one (no byte to escape, eight at a
 * time) copied in one piece with the length the table knows. */
static void put_strtab(struct wb *w, const struct rp_strtab *t, uint32_t id)
{
	const char *s = rp_strtab_str(t, id);
	size_t n = rp_strtab_len(t, id), i = 0;
	uint64_t x;

	for (; i + 8 <= n; i += 8) {
		memcpy(&x, s + i, 8);
		if (special8(x))
			goto slow;
	}
	for (; i < n; i++)
		if (s[i] == '"' || s[i] == '\\' || (unsigned char)s[i] < 0x20)
			goto slow;
	if (__builtin_expect(n + 2 <= sizeof(w->b) / 2, 1)) {
		char *p = wb_room(w, n + 2);

		p[0] = '"';
		memcpy(p + 1, s, n);
		p[n + 1] = '"';
		w->n += n + 2;
		return;
	}
slow:
	put_string(w, s);
}

static void put_string(struct wb *w, const char *s)
{
	const char *run = s;

	wb_put(w, "\"", 1);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p != '"' && *p != '\\' && *p >= 0x20)
			continue;
		char e[6] = { '\\', (char)*p };
		size_t k = 2;

		if (*p < 0x20) {
			memcpy(e + 1, "u00", 3);
			e[4] = "0123456789abcdef"[*p >> 4], e[5] = "0123456789abcdef"[*p & 15];
			k = 6;
		}
		wb_put(w, run, (size_t)((const char *)p - run));
		wb_put(w, e, k);
		run = (const char *)p + 1;
	}
	wb_str(w, run);
	wb_put(w, "\"", 1);
}

/* @v in decimal (fprintf's %u, without parsing a format each time). */
static void put_uint(struct wb *w, uint32_t v)
{
	char b[12];
	int k = sizeof(b);

	do {
		b[--k] = (char)('0' + v % 10);
		v /= 10;
	} while (v > 0);
	wb_put(w, b + k, sizeof(b) - (size_t)k);
}

/* A string literal @s, its length known at compile time. */
#define put_lit(w, s) wb_put(w, s, sizeof(s) - 1)

/* The indentation of a node's metrics (an entry of node_metrics or top_bottlenecks). */
#define INDENT "    "

/* @lead INDENT "  \"@key\": ": a member's start (hundreds of MB of it), one copy of
 * a literal of known length (@lead and @key are literals). */
#define put_key(w, lead, key) put_lit(w, lead INDENT "  \"" key "\": ")

static void put_metrics(struct wb *w, const struct rp_aiq *a, uint32_t id)
{
	const struct rp_aiq_node *n = &a->nodes[id];
	double dur = rp_aiq_duration(n);
	char t_dur[48], t_self[48], t_sub[48];
	size_t dur_len, self_len, sub_len;

	put_key(w, "{\n", "uuid");
	put_strtab(w, &a->uuids, n->uuid);
	put_key(w, ",\n", "operation_type");
	wb_put(w, "\"", 1);
	wb_str(w, rp_aiq_type_names[n->type]);
	wb_put(w, "\"", 1);
	put_key(w, ",\n", "operation_name");
	put_strtab(w, &a->names, n->name);
	put_key(w, ",\n", "start_time");
	put_time(w, a, n->start, false);
	put_key(w, ",\n", "end_time");
	put_time(w, a, n->end, true);
	put_key(w, ",\n", "duration");
	dur_len = put_double_keep(w, dur, t_dur);
	/* A call's subtree time is its duration, a leaf's self time its subtree time
	 * (bit for bit: -0.0 == 0.0 but writes otherwise): the text of each once. */
	put_key(w, ",\n", "self_time");
	if (same_double(n->self, dur))
		memcpy(t_self, t_dur, dur_len), self_len = dur_len, wb_put(w, t_self, self_len);
	else
		self_len = put_double_keep(w, n->self, t_self);
	put_key(w, ",\n", "subtree_time");
	if (same_double(n->subtree, dur))
		memcpy(t_sub, t_dur, dur_len), sub_len = dur_len, wb_put(w, t_sub, sub_len);
	else if (same_double(n->subtree, n->self))
		memcpy(t_sub, t_self, self_len), sub_len = self_len, wb_put(w, t_sub, sub_len);
	else
		sub_len = put_double_keep(w, n->subtree, t_sub);
	put_key(w, ",\n", "concurrency_midpoint");
	put_uint(w, n->mid);
	wb_put(w, ".0", 2);
	put_key(w, ",\n", "bottleneck_score");
	wb_put(w, t_sub, sub_len); /* the same double: its text once */
	put_lit(w, "\n" INDENT "}");
}

static void put_counts(FILE *out, const struct rp_aiq_counts *c)
{
	fprintf(out,
		"  \"ringprof\": {\"calls\": %llu, \"nodes_dropped\": %llu, \"end_unmatched\": "
		"%llu, \"end_not_top\": %llu, \"open_at_end\": %llu, \"duplicate_uuids\": %llu, "
		"\"replaced_roots\": %llu}\n",
		(unsigned long long)c->calls, (unsigned long long)c->nodes_dropped,
		(unsigned long long)c->end_unmatched, (unsigned long long)c->end_not_top,
		(unsigned long long)c->open_at_end, (unsigned long long)c->duplicate_uuids,
		(unsigned long long)c->replaced_roots);
}

/* Segments [from, to) of the concurrency timeline; the texts of boundaries
 * (from, to] kept in @st (and 0's by the first block), so two blocks never write
 * the same entry. */
static void put_segments(FILE *out, const struct rp_aiq *a, struct seg_text *st, uint32_t from,
			 uint32_t to)
{
	struct wb w = { .out = out };
	char end[48]; /* segment k's end, segment k + 1's start: its text once */
	size_t end_len = 0;

	for (uint32_t k = from; k < to; k++) {
		wb_str(&w, k ? ",\n      [" : "\n      [");
		if (k == from) {
			end_len = put_double_keep(&w, a->seg_t[k], end);
			if (k == 0)
				seg_keep(st, 0, end, end_len);
		} else {
			wb_put(&w, end, end_len);
		}
		wb_put(&w, ", ", 2);
		end_len = put_double_keep(&w, a->seg_t[k + 1], end);
		seg_keep(st, k + 1, end, end_len);
		wb_put(&w, ", ", 2);
		put_uint(&w, a->seg_level[k]);
		wb_put(&w, "]", 1);
	}
	wb_flush(&w);
}

/* Entries [from, to) of node_metrics. */
static void put_node_metrics(FILE *out, const struct rp_aiq *a, struct seg_text *st, uint32_t from,
			     uint32_t to)
{
	struct wb w = { .out = out, .seg = st };

	for (uint32_t i = from; i < to; i++) {
		wb_str(&w, i ? ",\n    " : "\n    ");
		put_strtab(&w, &a->uuids, a->nodes[a->metrics[i]].uuid);
		wb_put(&w, ": ", 2);
		put_metrics(&w, a, a->metrics[i]);
	}
	wb_flush(&w);
}

typedef void (*put_range_fn)(FILE *out, const struct rp_aiq *a, struct seg_text *st, uint32_t from,
			     uint32_t to);

#define BLOCK 8192 /* entries a thread renders at a time (a few MB of text) */

/* One block rendered into memory by the second thread. */
struct block {
	put_range_fn fn;
	const struct rp_aiq *a;
	struct seg_text *st;
	uint32_t from, to;
	char *text;
	size_t len, cap;
	bool ok;
};

/* The block's FILE writes here: open_memstream() zeroed every byte it grew by
 * (memset in _IO_str_overflow) before the text was copied in, ~2.5% of the run. */
static ssize_t block_write(void *cookie, const char *s, size_t k)
{
	struct block *b = cookie;

	if (k > b->cap - b->len) {
		size_t cap = b->cap ? b->cap : 1 << 16;
		char *t;

		while (k > cap - b->len) {
			if (cap > SIZE_MAX / 2)
				return -1;
			cap *= 2;
		}
		t = realloc(b->text, cap);
		if (t == NULL)
			return -1;
		b->text = t, b->cap = cap;
	}
	memcpy(b->text + b->len, s, k);
	b->len += k;
	return (ssize_t)k;
}

static void *put_block(void *arg)
{
	struct block *b = arg;
	FILE *f = fopencookie(b, "w", (cookie_io_functions_t){ .write = block_write });

	if (f == NULL)
		return NULL;
	setvbuf(f, NULL, _IONBF, 0); /* the renderer hands over 8 KiB pieces itself */
	b->fn(f, b->a, b->st, b->from, b->to);
	b->ok = !ferror(f);
	b->ok = fclose(f) == 0 && b->ok;
	return NULL;
}

/*
 * Entries [0, @n) through @fn, in order, on two cores: of every two blocks, this
 * thread writes the first to @out while another renders the second into memory,
 * then copies it out. Memory: one block of text (twice while it grows). Without a thread or memory, the
 * second block is rendered here too.
 */
static void put_two_cores(FILE *out, const struct rp_aiq *a, struct seg_text *st, uint32_t n,
			  put_range_fn fn)
{
	for (uint32_t at = 0; at < n; at += 2 * BLOCK) {
		uint32_t mid = n - at > BLOCK ? at + BLOCK : n;
		uint32_t end = n - mid > BLOCK ? mid + BLOCK : n;
		struct block b = { fn, a, st, mid, end, NULL, 0, 0, false };
		pthread_t t;
		bool th = mid < end && pthread_create(&t, NULL, put_block, &b) == 0;

		fn(out, a, st, at, mid);
		if (th)
			pthread_join(t, NULL);
		if (b.ok)
			fwrite_unlocked(b.text, 1, b.len, out);
		else
			fn(out, a, st, mid, end);
		free(b.text);
	}
}

int rp_render_aiq_json(const struct rp_aiq *a, FILE *out)
{
	const double p[4] = { a->p50, a->p90, a->p95, a->p99 };
	static const char *const pn[4] = { "p50", "p90", "p95", "p99" };

	struct seg_text st = { 0 };

	/* zeroed: a boundary a failed block did not keep is formatted again */
	if (a->n_seg > 0 && a->n_seg < SEG_TEXT_MAX && (st.t = calloc(a->n_seg + 1, sizeof(*st.t))))
		st.n = a->n_seg + 1;
	fputs_unlocked("{\n  \"concurrency\": {\n    \"timeline_segments\": [", out);
	put_two_cores(out, a, &st, a->n_seg, put_segments);
	fputs_unlocked(a->n_seg ? "\n    ]" : "]", out);
	struct wb w = { .out = out };

	for (int i = 0; i < 4; i++) {
		fprintf(out, ",\n    \"%s\": ", pn[i]);
		put_double(&w, p[i]);
		wb_flush(&w);
	}
	fputs_unlocked("\n  },\n  \"node_metrics\": {", out);
	put_two_cores(out, a, &st, a->n_metrics, put_node_metrics);
	free(st.t);
	fputs_unlocked(a->n_metrics ? "\n  },\n  \"top_bottlenecks\": [" : "},\n  \"top_bottlenecks\": [",
	      out);
	for (uint32_t i = 0; i < a->n_top; i++) {
		fputs_unlocked(i ? ",\n    " : "\n    ", out);
		put_metrics(&w, a, a->top[i]);
		wb_flush(&w);
	}
	fputs_unlocked(a->n_top ? "\n  ],\n" : "],\n", out);
	put_counts(out, &a->c);
	fputs_unlocked("}\n", out);
	return ferror(out) ? -EIO : 0;
}

/* CallNode._repr: "  " per level, each root's calls depth-first. */
static void put_tree(FILE *out, const struct rp_aiq *a, uint32_t root, uint32_t *stack)
{
	uint32_t cur = root, sp = 0;

	do {
		const struct rp_aiq_node *n = &a->nodes[cur];
		for (uint32_t i = 0; i < sp; i++)
			fputs_unlocked("  ", out);
		fprintf(out, "- %s '%s' (uuid=%s, start=%.2f, end=%.2f, dur=%.2f)\n",
			rp_aiq_type_names[n->type], rp_strtab_str(&a->names, n->name),
			rp_strtab_str(&a->uuids, n->uuid), n->start, n->end, rp_aiq_duration(n));
	} while (rp_aiq_walk_next(a, &cur, stack, &sp));
}

/* The walk of put_tree() without the output: indentation bytes and the deepest level. */
static void tree_cost(const struct rp_aiq *a, uint32_t root, uint32_t *stack, uint64_t *indent,
		      uint32_t *depth)
{
	uint32_t cur = root, sp = 0;

	do {
		*indent += 2 * (uint64_t)sp;
		*depth = sp > *depth ? sp : *depth;
	} while (rp_aiq_walk_next(a, &cur, stack, &sp));
}

int rp_render_aiq_text_indent(const struct rp_aiq *a, uint64_t *indent, uint32_t *depth)
{
	uint32_t *stack = malloc(((size_t)a->n_nodes + 1) * sizeof(*stack));

	*indent = 0;
	*depth = 0;
	if (stack == NULL)
		return -ENOMEM;
	for (uint32_t r = 0; r < a->n_roots; r++)
		tree_cost(a, a->roots[r], stack, indent, depth);
	free(stack);
	return 0;
}

int rp_render_aiq_text(const struct rp_aiq *a, FILE *out)
{
	uint32_t *stack;

	if (a->n_roots == 0) {
		fputs_unlocked("No calls found.\n", out);
		return ferror(out) ? -EIO : 0;
	}
	stack = malloc(((size_t)a->n_nodes + 1) * sizeof(*stack));
	if (stack == NULL)
		return -ENOMEM;
	fprintf(out,
		"=== Multi-Example Nested Call Profiling Report ===\n"
		"Total calls (across all examples): %u\n\n"
		"-- Concurrency Distribution (all examples) --\n"
		"p50=%.1f, p90=%.1f, p95=%.1f, p99=%.1f\n\n"
		"-- Top 5 Calls by Bottleneck Score (subtree_time) --\n",
		a->n_order, a->p50, a->p90, a->p95, a->p99);
	for (uint32_t i = 0; i < a->n_top; i++) {
		const struct rp_aiq_node *n = &a->nodes[a->top[i]];
		fprintf(out,
			"%u) UUID=%s, %s '%s', dur=%.2f, self_time=%.2f, subtree_time=%.2f, "
			"concurrency=%.1f, score=%.2f\n",
			i + 1, rp_strtab_str(&a->uuids, n->uuid), rp_aiq_type_names[n->type],
			rp_strtab_str(&a->names, n->name), rp_aiq_duration(n), n->self, n->subtree,
			(double)n->mid, n->subtree);
	}
	fputs_unlocked("\n-- Full Tree(s) (All Examples) --\n", out);
	for (uint32_t r = 0; r < a->n_roots; r++)
		put_tree(out, a, a->roots[r], stack);
	free(stack);
	return ferror(out) ? -EIO : 0;
}
