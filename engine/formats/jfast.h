/* SPDX-License-Identifier: MIT */
/*
 * A fast path in front of yajl for the trace readers (trace_chrome.c, import_nat.c).
 *
 * It tokenizes JSON text itself, calls the reader's own yajl callbacks for the
 * values the reader looks at, and only checks the syntax of the rest (what the
 * reader calls muted: an LLM's prompt in an agent-toolkit trace, a kernel's launch
 * arguments). It accepts a strict subset of what yajl accepts, and everything
 * else, whether malformed input or merely unusual (a \f between tokens, a number
 * longer than 64 characters, a surrogate escape in a name, a token longer than
 * the window), it hands back: the reader then primes a fresh yajl parser with a
 * few bytes that put it in the same state (same nesting, same expectation) and
 * gives it the text from the last complete token on, so the answer, the error
 * message and its byte offset are yajl's own for every input.
 *
 * The reader sees what yajl would have given it, callback for callback: container
 * starts and ends always (so its depth bookkeeping holds), and within containers
 * it did not mute every key, string (decoded, the first RP_JFAST_STR_KEEP raw
 * bytes as the readers' scanners give yajl), number (its text) and literal.
 */
#ifndef RP_ENGINE_JFAST_H
#define RP_ENGINE_JFAST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <yajl/yajl_parse.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define RP_JFAST_STR_KEEP 4096 /* raw bytes of a string the readers hand to yajl */
#define RP_JFAST_DEPTH	  256  /* deeper nesting: handed back */
#define RP_JFAST_NUM	  64   /* longer number tokens: handed back */
#define RP_JFAST_PRIME	  (RP_JFAST_DEPTH * 8 + 16) /* room for rp_jfast_prime() */

enum rp_jfast_rc {
	RP_JFAST_MORE,	 /* give the text from *used on again, with more after it */
	RP_JFAST_DONE,	 /* the whole text (eof) was read: one value, then whitespace */
	RP_JFAST_CANCEL, /* a callback returned 0; *used: the end of its token */
	RP_JFAST_BAIL,	 /* hand over to yajl from *used (the end of the last token) */
	RP_JFAST_NOMEM,
};

struct rp_jfast {
	const yajl_callbacks *cb;
	void *ctx;
	/* After a container's start callback: non-zero if what it holds is not looked at. */
	int (*mute)(void *ctx);

	unsigned depth, mute_depth; /* mute_depth: contents of this depth on are muted; 0 */
	uint8_t state;
	uint8_t numrun; /* number characters that end the last token (yajl's scanner counts) */
	uint8_t stack[RP_JFAST_DEPTH];		  /* '[' or '{' per open container */
	unsigned char dec[RP_JFAST_STR_KEEP + 8]; /* a decoded string */
	size_t dec_len;
	bool priming; /* rp_jfast_relay drops every callback */
	const unsigned char *tok; /* during a start_map callback: its '{' in the text */
};

/*
 * The text not read yet, as it came: the readers get it in chunks (64 KiB from
 * gzread or inflate, or one buffer) and yajl's error offsets depend on where its
 * input is cut, so a hand-over gives yajl the rest in the same chunks.
 */
#define RP_JFAST_WIN	(1u << 20) /* a token longer than about this is handed over */
#define RP_JFAST_BOUNDS 256

struct rp_jfast_win {
	unsigned char *buf;
	size_t cap, start, fill;	 /* unread: buf[start, fill) */
	uint64_t base;			 /* text offset of buf[0] */
	uint64_t bound[RP_JFAST_BOUNDS]; /* text offsets where a chunk ended, ascending */
	unsigned nb;
};

/* The callbacks a reader's yajl handle gets, with the struct rp_jfast as context:
 * they pass everything on to j->cb, j->ctx, except while priming. */
extern const yajl_callbacks rp_jfast_relay;

int rp_jfast_win_init(struct rp_jfast_win *w);
void rp_jfast_win_free(struct rp_jfast_win *w);
/* Appends one chunk; false if it does not fit (then hand over). */
bool rp_jfast_win_put(struct rp_jfast_win *w, const unsigned char *b, size_t n);
/* Unread bytes. */
static inline size_t rp_jfast_win_len(const struct rp_jfast_win *w)
{
	return w->fill - w->start;
}
/* The unread bytes (never NULL). */
static inline const unsigned char *rp_jfast_win_data(const struct rp_jfast_win *w)
{
	return w->buf ? w->buf + w->start : (const unsigned char *)"";
}
/* Marks @n more bytes read. */
void rp_jfast_win_take(struct rp_jfast_win *w, size_t n);
/**
 * rp_jfast_win_next() - after a hand-over, the unread text chunk by chunk, as it came.
 * @return the length of the next piece at *@b (0 at the end); marks it read.
 */
size_t rp_jfast_win_next(struct rp_jfast_win *w, const unsigned char **b);

/* What rp_jfast_feed() runs: rp_jfast_run() on @b, @n at text offset @at. */
typedef enum rp_jfast_rc (*rp_jfast_run_fn)(void *ctx, const unsigned char *b, size_t n,
					    uint64_t at, bool eof, size_t *used);

struct rp_jfast_stop {
	uint64_t at; /* CANCEL, NOMEM: the text offset where it stopped; BAIL: yajl's start */
	const unsigned char *rest; /* BAIL: after the window's pieces, these bytes (or none) */
	size_t rest_n;
};

/**
 * rp_jfast_feed() - read the next chunk @b, @n of the text (@eof: the last) through
 * @run, as rp_jfast_win_put() then one run over the window would, without
 * copying it: with nothing pending the chunk is read where it is and only its
 * unread end is kept; behind a pending token only the chunk's first bytes are
 * copied, and the rest is read in place once that token is read. The callbacks
 * see the same, and a hand-over gets yajl the same pieces of text.
 * @return RP_JFAST_MORE or DONE when read; CANCEL, NOMEM or BAIL as in @s.
 */
enum rp_jfast_rc rp_jfast_feed(struct rp_jfast_win *w, rp_jfast_run_fn run, void *ctx,
			       const unsigned char *b, size_t n, bool eof, struct rp_jfast_stop *s);

/**
 * rp_jfast_strtod() - strtod(@s, NULL) for a JSON number @s (NUL-terminated), the
 * same double: exactly (one correctly rounded IEEE operation on exact operands)
 * when the digits fit 53 bits and the power of ten is within 10^22; for up to 19
 * digits and 10^27, one x87 operation and a midpoint test (jfast.c); else strtod.
 */
double rp_jfast_strtod(const char *s);

/* A JSON number of the plain form -?D+(.D+)? with at most 19 digits, as read. */
struct rp_jfast_dec {
	uint64_t w; /* its digits, point dropped */
	int p;	    /* minus the digits after the point */
	int digits;
	bool neg, point;
};

/**
 * rp_jfast_dec() - the number @s[0..@n) (a JSON number token) as a rp_jfast_dec,
 * digits read eight at a time. @return false if it is not of that plain form
 * (an exponent, more than 19 digits): then *@d means nothing.
 */
bool rp_jfast_dec(const char *s, size_t n, struct rp_jfast_dec *d);

/* rp_jfast_strtod(@s) for the number @s (NUL-terminated) that gave @d. */
double rp_jfast_dec_double(const struct rp_jfast_dec *d, const char *s);

/* Primes the fresh @h (allocated with rp_jfast_relay and @j) for a hand-over. */
bool rp_jfast_prime_yajl(struct rp_jfast *j, yajl_handle h);

/* Tests and fuzzers: true makes every run hand over at once, so the readers are
 * yajl alone, the reference the fast path is compared with. */
extern bool rp_jfast_off;

void rp_jfast_init(struct rp_jfast *j, const yajl_callbacks *cb, void *ctx, int (*mute)(void *ctx));

/* After rp_jfast_init(): the state inside an unmuted top-level array after a ',', a
 * value expected (a reader starting at one of the array's elements). */
void rp_jfast_enter_array(struct rp_jfast *j);

/**
 * rp_jfast_run() - read @buf[0..@n) on from the state the last call left.
 * @eof: nothing follows @buf.
 * @used: see enum rp_jfast_rc; always a token boundary.
 */
enum rp_jfast_rc rp_jfast_run(struct rp_jfast *j, const unsigned char *buf, size_t n, bool eof,
			      size_t *used);

/**
 * rp_jfast_prime() - the text that brings a fresh yajl parser to the state after the
 * last token read (with the reader's callbacks switched off while it is parsed).
 * @out: RP_JFAST_PRIME bytes. @return its length.
 */
size_t rp_jfast_prime(const struct rp_jfast *j, char *out);

/* ---- for a reader that reads some of an array's elements itself (trace_chrome.c) ---- */

/* Bytes from @s before one of '"', '\\', < 0x20, >= 0x80 (or @n): 16 at a time. */
static inline size_t rp_jfast_plain(const unsigned char *s, size_t n)
{
	size_t i = 0;

#if defined(__SSE2__)
	const __m128i q = _mm_set1_epi8('"'), bs = _mm_set1_epi8('\\'), sp = _mm_set1_epi8(0x20);

	for (; i + 16 <= n; i += 16) {
		__m128i x = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
		/* signed: bytes >= 0x80 are negative, so below 0x20 too */
		__m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, q), _mm_cmpeq_epi8(x, bs)),
					 _mm_cmplt_epi8(x, sp));
		int bits = _mm_movemask_epi8(m);
		if (bits)
			return i + (size_t)__builtin_ctz((unsigned)bits);
	}
#endif
	while (i < n && s[i] != '"' && s[i] != '\\' && s[i] >= 0x20 && s[i] < 0x80)
		i++;
	return i;
}

/*
 * Sixteen bytes classified at once, for readers that know 16 bytes from @s are
 * readable: bit k of the result stands for @s[k]. A portable version of each
 * (64-bit words) stands beside the SSE2 one; tests compare the two.
 */

/* The bytes a string scan must look at: '"', '\\', < 0x20 and >= 0x80. */
static inline unsigned rp_jfast_special16_port(const unsigned char *s)
{
	unsigned m = 0;

	for (int h = 0; h < 2; h++) {
		uint64_t x, q, b, c;

		memcpy(&x, s + 8 * h, sizeof(x));
		/* per byte: its high bit set where the byte is 0, exactly (no carry
		 * crosses a byte: each sum is at most 0xfe) */
#define RP_JFAST_ZERO8(v)                                                                          \
	(~((((v) & 0x7f7f7f7f7f7f7f7full) + 0x7f7f7f7f7f7f7f7full) | (v)) & 0x8080808080808080ull)
		q = RP_JFAST_ZERO8(x ^ 0x2222222222222222ull);
		b = RP_JFAST_ZERO8(x ^ 0x5c5c5c5c5c5c5c5cull);
		/* < 0x20: none of bits 5..7 set; >= 0x80: bit 7 */
		c = RP_JFAST_ZERO8(x & 0xe0e0e0e0e0e0e0e0ull) | (x & 0x8080808080808080ull);
#undef RP_JFAST_ZERO8
		x = q | b | c;
		for (int k = 0; k < 8; k++) {
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
			int at = 8 * (7 - k) + 7; /* byte k is the word's k-th from the top */
#else
			int at = 8 * k + 7;
#endif
			m |= (unsigned)((x >> at) & 1) << (8 * h + k);
		}
	}
	return m;
}

/* The bytes that are not ASCII digits. */
static inline unsigned rp_jfast_nondigit16_port(const unsigned char *s)
{
	unsigned m = 0;

	for (int k = 0; k < 16; k++)
		m |= (unsigned)(s[k] < '0' || s[k] > '9') << k;
	return m;
}

#if defined(__SSE2__)
static inline unsigned rp_jfast_special16_sse2(const unsigned char *s)
{
	__m128i x = _mm_loadu_si128((const __m128i *)(const void *)s);
	/* signed: bytes >= 0x80 are negative, so below 0x20 too */
	__m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('"')),
					      _mm_cmpeq_epi8(x, _mm_set1_epi8('\\'))),
				 _mm_cmplt_epi8(x, _mm_set1_epi8(0x20)));

	return (unsigned)_mm_movemask_epi8(m);
}

static inline unsigned rp_jfast_nondigit16_sse2(const unsigned char *s)
{
	__m128i x =
		_mm_sub_epi8(_mm_loadu_si128((const __m128i *)(const void *)s), _mm_set1_epi8('0'));
	/* a digit is 0..9 after the subtraction, unsigned */
	__m128i d = _mm_cmpeq_epi8(_mm_min_epu8(x, _mm_set1_epi8(9)), x);

	return ~(unsigned)_mm_movemask_epi8(d) & 0xffffu;
}
#define rp_jfast_special16  rp_jfast_special16_sse2
#define rp_jfast_nondigit16 rp_jfast_nondigit16_sse2
#else
#define rp_jfast_special16  rp_jfast_special16_port
#define rp_jfast_nondigit16 rp_jfast_nondigit16_port
#endif

enum rp_jfast_scan { RP_JFAST_SCAN_OK, RP_JFAST_SCAN_MORE, RP_JFAST_SCAN_BAD };

/**
 * rp_jfast_scan_string() - the string whose opening quote is @s[-1], checked as the
 * fast path checks it (so as yajl does): OK with its raw length in *@len (to the
 * closing quote) and *@esc if it has escapes; MORE if it does not end before @n;
 * BAD if yajl would refuse it.
 */
enum rp_jfast_scan rp_jfast_scan_string(const unsigned char *s, size_t n, size_t *len, bool *esc);

/* The number token at @s likewise: OK if yajl reads it, it ends before @n and a
 * whitespace, ',', ']' or '}' follows it (*@len its length, at most RP_JFAST_NUM). */
enum rp_jfast_scan rp_jfast_scan_number(const unsigned char *s, size_t n, bool eof, size_t *len);

/**
 * rp_jfast_in_array() - whether the last token left @j directly inside an array whose
 * contents are not muted, between elements: *@value true where an element may
 * come next (after '[' or ','), false right after one.
 */
bool rp_jfast_in_array(const struct rp_jfast *j, bool *value);

/* From there the reader read a whole element (@comma false: now after it) or the
 * ',' after one (@comma true: now an element is expected), with its callbacks. */
void rp_jfast_array_step(struct rp_jfast *j, bool comma);

/* ---- for a reader that skips whole values itself (import_nat.c's step lane) ---- */

/* JSON's whitespace (the fast path's: a \f between tokens is handed over). */
static inline __attribute__((always_inline)) bool rp_jfast_ws(unsigned char c)
{
	return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

static inline bool rp_jfast_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

/* The literal (true, false, null) at @s likewise: OK with its length in *@len; MORE if
 * it is right as far as @n goes. Four bytes compared at once, and false's 'e'. */
static inline __attribute__((always_inline)) enum rp_jfast_scan
rp_jfast_scan_literal(const unsigned char *s, size_t n, size_t *len)
{
	const char *lit = s[0] == 't' ? "true" : s[0] == 'f' ? "false" : "null";
	size_t ll = s[0] == 'f' ? 5 : 4;
	uint32_t x, y;

	if (n < ll) /* a wrong byte ends it before the rest comes, as in yajl */
		return memcmp(s, lit, n) == 0 ? RP_JFAST_SCAN_MORE : RP_JFAST_SCAN_BAD;
	memcpy(&x, s, 4);
	memcpy(&y, lit, 4);
	if (x != y || (ll == 5 && s[4] != 'e'))
		return RP_JFAST_SCAN_BAD;
	*len = ll;
	return RP_JFAST_SCAN_OK;
}

/* rp_jfast_scan_string() with the plain run found here first: most strings are
 * plain, and then there is no call. */
static inline __attribute__((always_inline)) enum rp_jfast_scan
rp_jfast_scan_str(const unsigned char *s, size_t n, size_t *len, bool *esc)
{
	size_t k = rp_jfast_plain(s, n), r;
	enum rp_jfast_scan sc;

	*esc = false;
	if (k >= n)
		return RP_JFAST_SCAN_MORE;
	if (s[k] == '"') {
		*len = k;
		return RP_JFAST_SCAN_OK;
	}
	if ((sc = rp_jfast_scan_string(s + k, n - k, &r, esc)) == RP_JFAST_SCAN_OK)
		*len = k + r;
	return sc;
}

/**
 * rp_jfast_skip_nest() - the value that starts at @s[0] (not whitespace), checked as
 * the fast path checks every token of it (so as yajl does) and skipped: OK with its
 * length in *@len; MORE if the text ends (at @n) before it does; BAD if the fast
 * path would not take it or it nests deeper than @max_depth containers (its own
 * included; at most RP_JFAST_DEPTH). As with rp_jfast_scan_number(), a number must
 * be followed, before @n, by whitespace, ',', ']' or '}'.
 */
enum rp_jfast_scan rp_jfast_skip_nest(const unsigned char *s, size_t n, unsigned max_depth,
				      size_t *len);

/* The same, with a scalar (the usual skipped value) checked here, without a call. */
static inline __attribute__((always_inline)) enum rp_jfast_scan
rp_jfast_skip_value(const unsigned char *s, size_t n, unsigned max_depth, size_t *len)
{
	unsigned char c = n > 0 ? s[0] : '{';
	enum rp_jfast_scan sc;
	bool esc;

	if (c == '"') {
		if ((sc = rp_jfast_scan_str(s + 1, n - 1, len, &esc)) == RP_JFAST_SCAN_OK)
			*len += 2;
		return sc;
	}
	if (c == 't' || c == 'f' || c == 'n')
		return rp_jfast_scan_literal(s, n, len);
	if (c == '-' || rp_jfast_digit(c))
		return rp_jfast_scan_number(s, n, false, len);
	return rp_jfast_skip_nest(s, n, max_depth, len);
}

#endif
