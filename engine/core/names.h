/* SPDX-License-Identifier: MIT */
/*
 * The engine's name table: one id per (name, category, file, line) across every
 * source, so that a name interned by two processes (or found in a trace file) is
 * one row of the function table. Capped: past max_names every new name maps to
 * RP_NAMES_OTHER ("[other]"), counted by the caller as RP_ANOM_NAME_CAP.
 */
#ifndef RP_ENGINE_NAMES_H
#define RP_ENGINE_NAMES_H

#include <stdbool.h>
#include <stdint.h>

#define RP_NAMES_OTHER 0u /* "[other]": folded names, and the CCT's overflow nodes */

struct rp_name_entry {
	char *name;
	char *category;
	char *file;
	uint32_t line;
	uint32_t hash;
};

struct rp_names {
	struct rp_name_entry *e;	/* e[0] is "[other]" */
	uint32_t n;
	uint32_t cap;			/* max_names, "[other]" included */
	uint32_t *index;		/* open addressing over ids; UINT32_MAX = empty */
	uint32_t index_mask;
};

/* @return 0 or -ENOMEM. */
int rp_names_init(struct rp_names *t, uint32_t max_names);
void rp_names_free(struct rp_names *t);

/**
 * rp_names_get() - the id of (name, category, file, line), adding it if new.
 * NULL strings count as "". @full is set when the cap folded it into "[other]".
 * @return an id < t->n; RP_NAMES_OTHER when full (or out of memory).
 */
uint32_t rp_names_get(struct rp_names *t, const char *name, const char *category,
		      const char *file, uint32_t line, bool *full);

#endif
