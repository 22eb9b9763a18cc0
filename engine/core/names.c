// SPDX-License-Identifier: MIT
/*
 * Global name table: an array of entries plus an open-addressing index sized for
 * twice the cap, so probes stay short even when full. Strings are copied once.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "names.h"

static uint32_t hash_key(const char *name, const char *cat, const char *file, uint32_t line)
{
	uint32_t h = 2166136261u; /* FNV-1a, with separators between the fields */

	for (const char *s = name; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	h = (h ^ 0xffu) * 16777619u;
	for (const char *s = cat; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	h = (h ^ 0xfeu) * 16777619u;
	for (const char *s = file; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	return (h ^ line) * 16777619u;
}

int rp_names_init(struct rp_names *t, uint32_t max_names)
{
	uint32_t slots = 4;

	memset(t, 0, sizeof(*t));
	if (max_names < 1)
		max_names = 1;
	while (slots < 2 * max_names)
		slots <<= 1;
	t->e = calloc(max_names, sizeof(*t->e));
	t->index = malloc((size_t)slots * sizeof(*t->index));
	if (t->e == NULL || t->index == NULL) {
		rp_names_free(t);
		return -ENOMEM;
	}
	memset(t->index, 0xff, (size_t)slots * sizeof(*t->index));
	t->index_mask = slots - 1;
	t->cap = max_names;
	t->e[0] = (struct rp_name_entry){ strdup("[other]"), strdup(""), strdup(""), 0, 0 };
	t->n = 1;
	if (t->e[0].name == NULL || t->e[0].category == NULL || t->e[0].file == NULL) {
		rp_names_free(t);
		return -ENOMEM;
	}
	return 0;
}

void rp_names_free(struct rp_names *t)
{
	for (uint32_t i = 0; t->e != NULL && i < t->n; i++) {
		free(t->e[i].name);
		free(t->e[i].category);
		free(t->e[i].file);
	}
	free(t->e);
	free(t->index);
	memset(t, 0, sizeof(*t));
}

static bool same(const struct rp_name_entry *e, uint32_t h, const char *name, const char *cat,
		 const char *file, uint32_t line)
{
	return e->hash == h && e->line == line && strcmp(e->name, name) == 0 &&
	       strcmp(e->category, cat) == 0 && strcmp(e->file, file) == 0;
}

uint32_t rp_names_get(struct rp_names *t, const char *name, const char *category,
		      const char *file, uint32_t line, bool *full)
{
	uint32_t h, i;
	struct rp_name_entry *e;

	name = name ? name : "";
	category = category ? category : "";
	file = file ? file : "";
	*full = false;
	h = hash_key(name, category, file, line);
	for (i = h & t->index_mask; t->index[i] != UINT32_MAX; i = (i + 1) & t->index_mask)
		if (same(&t->e[t->index[i]], h, name, category, file, line))
			return t->index[i];
	if (t->n >= t->cap) {
		*full = true;
		return RP_NAMES_OTHER;
	}
	e = &t->e[t->n];
	*e = (struct rp_name_entry){ strdup(name), strdup(category), strdup(file), line, h };
	if (e->name == NULL || e->category == NULL || e->file == NULL) {
		free(e->name);
		free(e->category);
		free(e->file);
		*full = true;
		return RP_NAMES_OTHER;
	}
	t->index[i] = t->n;
	return t->n++;
}
