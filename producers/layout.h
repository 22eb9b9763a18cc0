/* SPDX-License-Identifier: MIT */
/*
 * Segment geometry on the producer side: from the configured sizes to the offsets
 * written into the header (wire.h). Private to libringprof; the consumer derives
 * its own view from a header it has validated (engine/ingest/segment.c), never from this.
 */
#ifndef RP_PRODUCER_LAYOUT_H
#define RP_PRODUCER_LAYOUT_H

#include <stdint.h>

#include <ringprof/wire.h>

struct rp_layout_cfg {
	uint32_t ring_count;
	uint32_t ring_capacity;	/* a power of two */
	uint32_t name_capacity;
	uint64_t arena_size;
};

struct rp_layout {
	uint32_t ring_count;
	uint32_t ring_capacity;
	uint32_t name_capacity;
	uint64_t ring_desc_offset;
	uint64_t ring_data_offset;
	uint64_t name_table_offset;
	uint64_t name_arena_offset;
	uint64_t name_arena_size;
	uint64_t segment_size;
};

/* Fills @out from @cfg. @return 0, or -E2BIG past RP_WIRE_MAX_SEGMENT. */
int rp_layout_compute(const struct rp_layout_cfg *cfg, struct rp_layout *out);

/* The sizes of an existing layout, to build an identical one (after fork). */
void rp_layout_cfg_from(const struct rp_layout *l, struct rp_layout_cfg *cfg);

/* Writes the layout fields and segment_size into a header. */
void rp_layout_store(const struct rp_layout *l, struct rp_wire_header *h);

static inline struct rp_wire_ring *rp_layout_ring(const struct rp_layout *l,
						  struct rp_wire_header *h, uint32_t i)
{
	return (struct rp_wire_ring *)((char *)h + l->ring_desc_offset) + i;
}

static inline struct rp_event *rp_layout_slots(const struct rp_layout *l,
					       struct rp_wire_header *h, uint32_t i)
{
	return (struct rp_event *)((char *)h + l->ring_data_offset) +
	       (uint64_t)i * l->ring_capacity;
}

static inline struct rp_wire_name *rp_layout_name(const struct rp_layout *l,
						  struct rp_wire_header *h, uint32_t id)
{
	return (struct rp_wire_name *)((char *)h + l->name_table_offset) + id;
}

#endif
