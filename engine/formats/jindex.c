// SPDX-License-Identifier: MIT
/*
 * Block indexing of JSON text; what the masks mean is in jindex.h.
 *
 * Two steps per block. First the byte classes (quote, backslash, structural,
 * whitespace, "odd") as 64-bit masks: SSE2 compares 16 bytes at a time, AVX2 32,
 * SWAR 8 (an exact zero-byte test per class, then the eight high bits gathered by
 * one multiply). Then, the same for every implementation: which quotes are
 * escaped (the byte after an odd run of backslashes, found with one addition per
 * parity of where the runs start, as in simdjson's stage 1), and the in-string
 * mask as the prefix XOR of the real quotes, by one carry-less multiply with an
 * all-ones word or by six shift-xors.
 */
#include <stdbool.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#define RP_JINDEX_X86 1
#include <immintrin.h>
#endif

#include "jindex.h"

/* The byte classes of one block. */
struct classes {
	uint64_t quote, bs, op, ws, odd;
};

/* ---- portable: 64-bit SWAR ---- */

#define ONES  0x0101010101010101ull
#define HIGHS 0x8080808080808080ull

static uint64_t load64(const unsigned char *b)
{
	uint64_t x;

	memcpy(&x, b, sizeof(x));
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	x = __builtin_bswap64(x);
#endif
	return x;
}

/* 0x80 in each byte of @x that is zero, exactly (no carry between bytes). */
static uint64_t zero_bytes(uint64_t x)
{
	return ~(((x & ~HIGHS) + ~HIGHS) | x) & HIGHS;
}

static uint64_t eq_bytes(uint64_t x, unsigned char c)
{
	return zero_bytes(x ^ (ONES * c));
}

/* The high bit of each byte of @h (the others zero) as 8 bits, byte 0 in bit 0. */
static unsigned gather8(uint64_t h)
{
	return (unsigned)(((h >> 7) * 0x0102040810204080ull) >> 56);
}

static void classes_swar(const unsigned char *b, struct classes *k)
{
	memset(k, 0, sizeof(*k));
	for (unsigned w = 0; w < 8; w++) {
		uint64_t x = load64(b + 8 * w), lo = x | (ONES * 0x20);
		/* bytes below 0x20: their low seven bits plus 0x60 stay below 0x80 */
		uint64_t ctl = ~((x & ~HIGHS) + ONES * 0x60) & ~x & HIGHS;
		unsigned sh = 8 * w;

		k->quote |= (uint64_t)gather8(eq_bytes(x, '"')) << sh;
		k->bs |= (uint64_t)gather8(eq_bytes(x, '\\')) << sh;
		/* '{' '[' and '}' ']' differ only in 0x20 */
		k->op |= (uint64_t)gather8(eq_bytes(lo, '{') | eq_bytes(lo, '}') | eq_bytes(x, ':') |
					   eq_bytes(x, ','))
			 << sh;
		k->ws |= (uint64_t)gather8(eq_bytes(x, ' ') | eq_bytes(x, '\t') | eq_bytes(x, '\n') |
					   eq_bytes(x, '\r'))
			 << sh;
		k->odd |= (uint64_t)gather8(eq_bytes(x, '\\') | ctl | (x & HIGHS)) << sh;
	}
}

static uint64_t prefix_xor_cascade(uint64_t x)
{
	x ^= x << 1;
	x ^= x << 2;
	x ^= x << 4;
	x ^= x << 8;
	x ^= x << 16;
	x ^= x << 32;
	return x;
}

/* ---- x86: SSE2, AVX2, PCLMUL ---- */

#if RP_JINDEX_X86
__attribute__((target("sse2"))) static void classes_sse2(const unsigned char *b, struct classes *k)
{
	const __m128i q = _mm_set1_epi8('"'), bs = _mm_set1_epi8('\\'), sp = _mm_set1_epi8(' ');
	const __m128i tab = _mm_set1_epi8('\t'), nl = _mm_set1_epi8('\n'), cr = _mm_set1_epi8('\r');
	const __m128i x20 = _mm_set1_epi8(0x20), ob = _mm_set1_epi8('{'), cb = _mm_set1_epi8('}');
	const __m128i co = _mm_set1_epi8(':'), cm = _mm_set1_epi8(','), c1f = _mm_set1_epi8(0x1f);

	memset(k, 0, sizeof(*k));
	for (unsigned w = 0; w < 4; w++) {
		__m128i x = _mm_loadu_si128((const __m128i *)(const void *)(b + 16 * w));
		__m128i lo = _mm_or_si128(x, x20);
		__m128i isbs = _mm_cmpeq_epi8(x, bs);
		/* unsigned x <= 0x1f: min(x, 0x1f) == x */
		__m128i ctl = _mm_cmpeq_epi8(_mm_min_epu8(x, c1f), x);
		__m128i op = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(lo, ob), _mm_cmpeq_epi8(lo, cb)),
					  _mm_or_si128(_mm_cmpeq_epi8(x, co), _mm_cmpeq_epi8(x, cm)));
		__m128i ws = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, sp), _mm_cmpeq_epi8(x, tab)),
					  _mm_or_si128(_mm_cmpeq_epi8(x, nl), _mm_cmpeq_epi8(x, cr)));
		unsigned sh = 16 * w;

		k->quote |= (uint64_t)(uint16_t)_mm_movemask_epi8(_mm_cmpeq_epi8(x, q)) << sh;
		k->bs |= (uint64_t)(uint16_t)_mm_movemask_epi8(isbs) << sh;
		k->op |= (uint64_t)(uint16_t)_mm_movemask_epi8(op) << sh;
		k->ws |= (uint64_t)(uint16_t)_mm_movemask_epi8(ws) << sh;
		/* the high bit of x itself marks >= 0x80 */
		k->odd |= (uint64_t)(uint16_t)_mm_movemask_epi8(_mm_or_si128(_mm_or_si128(isbs, ctl), x))
			  << sh;
	}
}

__attribute__((target("avx2"))) static void classes_avx2(const unsigned char *b, struct classes *k)
{
	const __m256i q = _mm256_set1_epi8('"'), bs = _mm256_set1_epi8('\\');
	const __m256i sp = _mm256_set1_epi8(' '), tab = _mm256_set1_epi8('\t');
	const __m256i nl = _mm256_set1_epi8('\n'), cr = _mm256_set1_epi8('\r');
	const __m256i x20 = _mm256_set1_epi8(0x20), ob = _mm256_set1_epi8('{');
	const __m256i cb = _mm256_set1_epi8('}'), co = _mm256_set1_epi8(':');
	const __m256i cm = _mm256_set1_epi8(','), c1f = _mm256_set1_epi8(0x1f);

	memset(k, 0, sizeof(*k));
	for (unsigned w = 0; w < 2; w++) {
		__m256i x = _mm256_loadu_si256((const __m256i *)(const void *)(b + 32 * w));
		__m256i lo = _mm256_or_si256(x, x20);
		__m256i isbs = _mm256_cmpeq_epi8(x, bs);
		__m256i ctl = _mm256_cmpeq_epi8(_mm256_min_epu8(x, c1f), x);
		__m256i op = _mm256_or_si256(
			_mm256_or_si256(_mm256_cmpeq_epi8(lo, ob), _mm256_cmpeq_epi8(lo, cb)),
			_mm256_or_si256(_mm256_cmpeq_epi8(x, co), _mm256_cmpeq_epi8(x, cm)));
		__m256i ws = _mm256_or_si256(
			_mm256_or_si256(_mm256_cmpeq_epi8(x, sp), _mm256_cmpeq_epi8(x, tab)),
			_mm256_or_si256(_mm256_cmpeq_epi8(x, nl), _mm256_cmpeq_epi8(x, cr)));
		unsigned sh = 32 * w;

		k->quote |= (uint64_t)(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(x, q)) << sh;
		k->bs |= (uint64_t)(uint32_t)_mm256_movemask_epi8(isbs) << sh;
		k->op |= (uint64_t)(uint32_t)_mm256_movemask_epi8(op) << sh;
		k->ws |= (uint64_t)(uint32_t)_mm256_movemask_epi8(ws) << sh;
		k->odd |= (uint64_t)(uint32_t)_mm256_movemask_epi8(
				  _mm256_or_si256(_mm256_or_si256(isbs, ctl), x))
			  << sh;
	}
}

__attribute__((target("sse2,pclmul"))) static uint64_t prefix_xor_clmul(uint64_t x)
{
	__m128i v = _mm_set_epi64x(0, (long long)x);

	return (uint64_t)_mm_cvtsi128_si64(_mm_clmulepi64_si128(v, _mm_set1_epi8((char)0xff), 0));
}
#endif

/* ---- the same for every implementation ---- */

/*
 * The bytes escaped by a backslash: the one right after each odd run of them.
 * A run's length is odd when its start and end have different parities; adding
 * its start bit to the run carries out at its end, so the runs starting on even
 * positions and those starting on odd ones are added separately.
 */
static uint64_t escaped_of(uint64_t bs, uint64_t *carry)
{
	const uint64_t even = 0x5555555555555555ull, odd = ~even;
	uint64_t starts = bs & ~(bs << 1);
	uint64_t even_start = even ^ *carry; /* a run carried in odd counts from one before */
	uint64_t e_starts = starts & even_start, o_starts = starts & ~even_start;
	uint64_t e_car = bs + e_starts, o_car;
	bool out = __builtin_add_overflow(bs, o_starts, &o_car);

	o_car |= *carry;
	*carry = out;
	return ((e_car & ~bs) & odd) | ((o_car & ~bs) & even);
}

static void finish(const struct classes *k, uint64_t (*pxor)(uint64_t), struct rp_jindex_carry *c,
		   struct rp_jindex_blk *out)
{
	uint64_t esc, quote, in;

	if (k->bs == 0 && c->esc == 0) {
		esc = 0;
	} else {
		esc = escaped_of(k->bs, &c->esc);
	}
	quote = k->quote & ~esc;
	in = pxor(quote) ^ c->in_str;
	c->in_str = (uint64_t)((int64_t)in >> 63);
	out->quote = quote;
	out->in_str = in;
	out->op = k->op & ~in;
	out->ws = k->ws;
	out->odd = k->odd;
}

unsigned rp_jindex_supported(void)
{
	unsigned s = 0;

#if RP_JINDEX_X86
	__builtin_cpu_init();
	if (__builtin_cpu_supports("sse2"))
		s |= RP_JINDEX_SSE2;
	if (__builtin_cpu_supports("avx2"))
		s |= RP_JINDEX_AVX2;
	if (__builtin_cpu_supports("pclmul"))
		s |= RP_JINDEX_CLMUL;
#endif
	return s;
}

void rp_jindex_block_impl(unsigned impl, const unsigned char *b, struct rp_jindex_carry *c,
			  struct rp_jindex_blk *out)
{
	struct classes k;
	uint64_t (*pxor)(uint64_t) = prefix_xor_cascade;

#if RP_JINDEX_X86
	if (impl & RP_JINDEX_AVX2)
		classes_avx2(b, &k);
	else if (impl & RP_JINDEX_SSE2)
		classes_sse2(b, &k);
	else
		classes_swar(b, &k);
	if (impl & RP_JINDEX_CLMUL)
		pxor = prefix_xor_clmul;
#else
	(void)impl;
	classes_swar(b, &k);
#endif
	finish(&k, pxor, c, out);
}

/* The default: the widest byte classes, and PCLMUL where present. */
static unsigned best = ~0u;

unsigned rp_jindex_best(void)
{
	unsigned s = __atomic_load_n(&best, __ATOMIC_RELAXED); /* orders nothing: a cache */

	if (s == ~0u) {
		s = rp_jindex_supported();
		if (s & RP_JINDEX_AVX2)
			s &= ~(unsigned)RP_JINDEX_SSE2;
		__atomic_store_n(&best, s, __ATOMIC_RELAXED);
	}
	return s;
}

void rp_jindex_block(const unsigned char *b, struct rp_jindex_carry *c, struct rp_jindex_blk *out)
{
	rp_jindex_block_impl(rp_jindex_best(), b, c, out);
}
