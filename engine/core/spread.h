/* SPDX-License-Identifier: MIT */
/*
 * Arrays whose low entries are hot, started at different cache sets.
 *
 * The engine's per-name and per-slot arrays (function rows, CCT nodes, edges, tracks,
 * midpoint sums, window tags, counters...) are large, so malloc() maps each one on
 * its own pages and every one starts 16 bytes into a page. Names and slots are
 * numbered from 0 in order of first use, so the hot entries of them all sit in the
 * first lines of a page: the same few sets of an 8-way L1, more than 8 lines for
 * one set, which evict each other between two uses (cachegrind: one L1 miss per
 * array and request in bench_engine). rp_spread_calloc() starts each array at its
 * own line of a page (enum rp_spread_at), so that their first entries land in
 * different sets. The pad, RP_SPREAD_PAD bytes (a page and 16) per array, fits in
 * the page per large array that rp_engine_memory_bound() allows malloc (256 pages
 * for fewer than 130 large arrays, these eleven included).
 *
 * Free with rp_spread_free() only: the offset from the block is stored in the 8
 * bytes before the array.
 */
#ifndef RP_ENGINE_SPREAD_H
#define RP_ENGINE_SPREAD_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#define RP_SPREAD_PAD (4096u + 16u) /* any start to any place in a page, after the
				     16 bytes that keep the offset */

/* Where each array starts, in lines into a page: after the hot entries of the one
 * before (bench_engine's: 6 names, a dozen nodes; a program's hottest names are its
 * first ones too). */
enum rp_spread_at {
	RP_SPREAD_FN = 0,	   /* function rows: 128 B each */
	RP_SPREAD_NODES = 14,	   /* CCT nodes */
	RP_SPREAD_EDGES = 22,	   /* caller edges */
	RP_SPREAD_TRACKS = 28,	   /* the track slots */
	RP_SPREAD_COUNTERS = 34,   /* counter rows */
	RP_SPREAD_MID = 39,	   /* midpoint sums */
	RP_SPREAD_COUNTER_OF = 41, /* name -> counter row */
	RP_SPREAD_TAG = 42,	   /* a window's name -> entry tags */
	RP_SPREAD_STEPS = 43,	   /* the step classes of names */
};

/* calloc(@n, @size), the array starting @at lines into a page; NULL if out of memory
 * or on overflow. */
static inline void *rp_spread_calloc(size_t n, size_t size, enum rp_spread_at at)
{
	size_t off, bytes;
	char *b;

	if (size != 0 && n > (SIZE_MAX - RP_SPREAD_PAD) / size)
		return NULL;
	bytes = n * size;
	b = calloc(1, bytes + RP_SPREAD_PAD);
	if (b == NULL)
		return NULL;
	/* from b + 16 (room for the offset) to @at's place in a page: a multiple of 16
	   bytes, so the array keeps malloc's alignment */
	off = 16 + (((uintptr_t)at * 64u - ((uintptr_t)b + 16)) & 4095u);
	((size_t *)(void *)(b + off))[-1] = off;
	return b + off;
}

static inline void rp_spread_free(void *p)
{
	if (p != NULL)
		free((char *)p - ((size_t *)p)[-1]);
}

#endif
