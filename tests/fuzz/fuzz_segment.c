// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the consumer's trust boundary (engine/ingest/segment.c): the bytes
 * of a segment come from another process, so any input must be either refused by
 * rp_segment_validate or then drained and looked up without a read or write
 * outside the mapping. Start it from a real segment (make_seed.c): the validator
 * wants segment_size to equal the input's size, which random bytes never do.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "segment.h"

#define DRAIN_MAX	256u  /* records per drain call */
#define DRAINS_PER_RING 4     /* enough to see a ring of any fill resync or empty */
#define NAMES_MAX	4096u /* name ids looked up per input */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void drain_all(struct rp_segment *s)
{
	static struct rp_event ev[DRAIN_MAX];
	struct rp_ring_info info;

	for (uint32_t i = 0; i < s->v.ring_count; i++) {
		(void)rp_segment_ring_pending(s, i);
		for (int k = 0; k < DRAINS_PER_RING; k++)
			if (rp_segment_drain(s, i, ev, DRAIN_MAX, &info) == 0)
				break;
	}
}

static void lookup_all(struct rp_segment *s)
{
	uint32_t n = s->v.name_capacity < NAMES_MAX ? s->v.name_capacity : NAMES_MAX;
	struct rp_name name;

	for (uint32_t id = 0; id <= n; id++) /* one past the table, too */
		(void)rp_segment_name(s, id, &name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rp_segment_view v;
	struct rp_segment *s;
	char why[RP_WHY_MAX];
	void *buf;

	/* A writable copy (the reader stores c_head), aligned as a mapping is: the
	 * header type is 64-byte aligned (wire.h), and mmap() gives a page. Exactly
	 * `size` bytes, so ASan sees a read one past the end (posix_memalign: ASan's
	 * aligned_alloc wants size to be a multiple of the alignment). */
	if (posix_memalign(&buf, RP_WIRE_CACHELINE, size ? size : 1) != 0)
		return 0;
	memcpy(buf, data, size);
	if (rp_segment_validate(buf, size, &v, why) == 0 &&
	    rp_segment_attach(buf, size, &s, why) == 0) {
		drain_all(s);
		lookup_all(s);
		drain_all(s); /* again, from the c_head the first pass stored */
		rp_segment_close(s);
	}
	free(buf);
	return 0;
}
