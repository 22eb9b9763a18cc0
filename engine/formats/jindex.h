/* SPDX-License-Identifier: MIT */
/*
 * Block indexing of JSON text for the readers' fast path (jfast.c).
 *
 * Each 64-byte block of text becomes a few 64-bit masks, one bit per byte, all
 * computed at once: the quotes that open or close a string (a quote after an odd
 * run of backslashes is escaped and is not one), the bytes inside strings (by a
 * prefix XOR of those quotes), the structural characters {}[]:, outside strings,
 * whitespace, and the bytes of a string that need a closer look (backslash,
 * control characters, non-ASCII). A carry takes the open string and an odd
 * backslash run from one block to the next, so a string or an escape may cross
 * any block boundary. jfast then finds a string's end, and the next token after
 * whitespace, with a bit scan instead of a byte loop.
 *
 * The byte classes come from SSE2 (always on x86-64), AVX2 (chosen at run time),
 * or 64-bit SWAR elsewhere; the prefix XOR from a carry-less multiply (PCLMUL,
 * chosen at run time) or a shift-xor cascade. Every combination gives the same
 * masks (tests/test_jindex.c and tests/fuzz/fuzz_jindex.c compare them with each
 * other and with a byte-by-byte oracle).
 *
 * The masks are lexical only: a backslash or a quote outside a string is indexed
 * as if it were in one. jfast looks at every byte outside strings itself, and
 * stops (hands over to yajl) at the first that JSON does not allow, before the
 * masks after it could matter.
 */
#ifndef RP_ENGINE_JINDEX_H
#define RP_ENGINE_JINDEX_H

#include <stddef.h>
#include <stdint.h>

#define RP_JINDEX_BLOCK 64

struct rp_jindex_blk {
	uint64_t quote;	 /* quotes that open or close a string */
	uint64_t in_str; /* in a string: its opening quote and contents, not the closing quote */
	uint64_t op;	 /* {}[]:, outside strings */
	uint64_t ws;	 /* space, \t, \n, \r, wherever they are */
	uint64_t odd;	 /* backslash, < 0x20 or >= 0x80, wherever they are */
};

/* What a block leaves to the next; all zero at the start of the text (or of any
 * token boundary outside a string). */
struct rp_jindex_carry {
	uint64_t esc;	 /* 1: the block ended in an odd run of backslashes */
	uint64_t in_str; /* ~0: the block ended inside a string */
};

/* Implementations, for tests: a bit set of these. */
enum {
	RP_JINDEX_SWAR = 0,	/* portable byte classes and shift-xor cascade */
	RP_JINDEX_SSE2 = 1 << 0,
	RP_JINDEX_AVX2 = 1 << 1,
	RP_JINDEX_CLMUL = 1 << 2,
};

/* The implementations this CPU can run (a bit set), and the one used by default. */
unsigned rp_jindex_supported(void);
unsigned rp_jindex_best(void);

/**
 * rp_jindex_block_impl() - index the 64 bytes at @b with implementation @impl
 * (a subset of rp_jindex_supported()), carrying @c on.
 */
void rp_jindex_block_impl(unsigned impl, const unsigned char *b, struct rp_jindex_carry *c,
			  struct rp_jindex_blk *out);

/* The same with the default implementation. */
void rp_jindex_block(const unsigned char *b, struct rp_jindex_carry *c, struct rp_jindex_blk *out);

#endif
