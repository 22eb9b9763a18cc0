// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the block index of JSON text (engine/formats/jindex.h):
 * the input, padded to whole 64-byte blocks, indexed by every implementation the
 * CPU runs (SWAR, SSE2, AVX2, with and without PCLMUL) and by a byte-by-byte
 * oracle; every mask of every block must agree. The readers' use of the index is
 * fuzzed by fuzz_chrome and fuzz_nat (the fast path against yajl alone).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jindex.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What jindex.h says, one byte at a time. */
static void oracle(const unsigned char *t, size_t n, struct rp_jindex_blk *o)
{
	size_t run = 0;
	bool in = false;

	memset(o, 0, n / 64 * sizeof(*o));
	for (size_t i = 0; i < n; i++) {
		unsigned char c = t[i];
		uint64_t bit = 1ull << (i % 64);
		struct rp_jindex_blk *b = &o[i / 64];

		if (c == '"' && run % 2 == 0) {
			b->quote |= bit;
			in = !in;
		}
		if (in)
			b->in_str |= bit;
		else if (c != 0 && strchr("{}[]:,", c) != NULL)
			b->op |= bit;
		if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
			b->ws |= bit;
		if (c == '\\' || c < 0x20 || c >= 0x80)
			b->odd |= bit;
		run = c == '\\' ? run + 1 : 0;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const unsigned cls[] = { RP_JINDEX_SWAR, RP_JINDEX_SSE2, RP_JINDEX_AVX2 };
	unsigned have = rp_jindex_supported();
	size_t n = (size + 63) / 64 * 64;
	unsigned char *t;
	struct rp_jindex_blk *o;

	if (n == 0 || n > (1u << 20))
		return 0;
	t = malloc(n);
	o = malloc(n / 64 * sizeof(*o));
	if (t == NULL || o == NULL)
		abort();
	memset(t, ' ', n);
	memcpy(t, data, size);
	oracle(t, n, o);
	for (size_t k = 0; k < sizeof(cls) / sizeof(cls[0]); k++)
		for (unsigned clmul = 0; clmul <= RP_JINDEX_CLMUL; clmul += RP_JINDEX_CLMUL) {
			unsigned impl = cls[k] | clmul;
			struct rp_jindex_carry c = { 0 };
			if ((impl & have) != impl)
				continue;
			for (size_t b = 0; b < n / 64; b++) {
				struct rp_jindex_blk x;
				rp_jindex_block_impl(impl, t + 64 * b, &c, &x);
				if (memcmp(&x, &o[b], sizeof(x)) != 0)
					abort(); /* an implementation disagrees with the oracle */
			}
		}
	free(o);
	free(t);
	return 0;
}
