// SPDX-License-Identifier: MIT
/*
 * Segment geometry: header, ring descriptors, ring records (page-aligned so a
 * ring's pages can be faulted in at claim time), name table, name arena; each
 * region 64-byte aligned, the whole a multiple of the page size.
 */
#include <errno.h>

#include "layout.h"

static uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) & ~(a - 1);
}

int rp_layout_compute(const struct rp_layout_cfg *cfg, struct rp_layout *out)
{
	uint64_t off;

	out->ring_count = cfg->ring_count;
	out->ring_capacity = cfg->ring_capacity;
	out->name_capacity = cfg->name_capacity;
	out->name_arena_size = cfg->arena_size;
	off = align_up(sizeof(struct rp_wire_header), RP_WIRE_CACHELINE);
	out->ring_desc_offset = off;
	off += (uint64_t)cfg->ring_count * sizeof(struct rp_wire_ring);
	out->ring_data_offset = off = align_up(off, 4096);
	off += (uint64_t)cfg->ring_count * cfg->ring_capacity * sizeof(struct rp_event);
	out->name_table_offset = off = align_up(off, RP_WIRE_CACHELINE);
	off += (uint64_t)cfg->name_capacity * sizeof(struct rp_wire_name);
	out->name_arena_offset = off = align_up(off, RP_WIRE_CACHELINE);
	off += cfg->arena_size;
	out->segment_size = align_up(off, 4096);
	return out->segment_size > RP_WIRE_MAX_SEGMENT ? -E2BIG : 0;
}

void rp_layout_cfg_from(const struct rp_layout *l, struct rp_layout_cfg *cfg)
{
	cfg->ring_count = l->ring_count;
	cfg->ring_capacity = l->ring_capacity;
	cfg->name_capacity = l->name_capacity;
	cfg->arena_size = l->name_arena_size;
}

void rp_layout_store(const struct rp_layout *l, struct rp_wire_header *h)
{
	h->segment_size = l->segment_size;
	h->ring_count = l->ring_count;
	h->ring_capacity = l->ring_capacity;
	h->ring_desc_size = sizeof(struct rp_wire_ring);
	h->ring_desc_offset = l->ring_desc_offset;
	h->ring_data_offset = l->ring_data_offset;
	h->name_table_offset = l->name_table_offset;
	h->name_arena_offset = l->name_arena_offset;
	h->name_arena_size = l->name_arena_size;
	h->name_capacity = l->name_capacity;
	h->name_entry_size = sizeof(struct rp_wire_name);
}
