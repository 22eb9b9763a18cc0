// SPDX-License-Identifier: MIT
/*
 * Collapsed stacks ("folded"), the text flamegraph.pl, inferno and speedscope read:
 * one line per calling-context node with self time,
 *   root_fn;child;leaf <self_ns>
 * the names on the path from the CCT's top (the root node itself has no name) down to
 * the node, joined by ';', then a space and the node's self time in nanoseconds.
 * Lines come in CCT order (parents before children), so equal reports give equal
 * files, and the values add up to the report's total self time.
 *
 * A name is written as it is but for the three bytes that would break the format:
 * ';' (the separator), '\n' and '\r' (the line) each become '_'. "[other]" nodes (the
 * CCT cap hit) keep their name; a node naming no function (an index out of range)
 * is written "?". Spaces are fine: the readers split at the last one.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "render.h"
#include "render_priv.h"


static void put_frame(FILE *out, const struct rp_report *r, uint32_t fn)
{
	const struct rp_report_fn *f = rp_render_fn_at(r, fn);
	const char *s = f && f->name ? f->name : f ? "" : "?";

	for (; *s; s++)
		fputc(*s == ';' || *s == '\n' || *s == '\r' ? '_' : *s, out);
}

/*
 * rp_render_folded() - see render.h.
 * Return: 0; -EINVAL (nothing written) when a node's parent is neither RP_NONE nor an
 * earlier node (the path would not end); -ENOMEM; -EIO when writing failed.
 */
int rp_render_folded(const struct rp_report *r, FILE *out)
{
	const struct rp_report_node *nodes = r->nodes;
	uint32_t *path;

	assert(r != NULL && out != NULL);
	for (uint32_t i = 0; i < r->n_nodes; i++)
		if (nodes[i].parent != RP_NONE && nodes[i].parent >= i)
			return -EINVAL;
	path = malloc(sizeof(*path) * (r->n_nodes ? r->n_nodes : 1));
	if (path == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < r->n_nodes; i++) {
		uint32_t d = 0;

		if (nodes[i].self_ns == 0 || nodes[i].parent == RP_NONE)
			continue;
		/* parents are earlier nodes: at most i steps up */
		for (uint32_t j = i; nodes[j].parent != RP_NONE; j = nodes[j].parent)
			path[d++] = j;
		while (d-- > 0) {
			put_frame(out, r, nodes[path[d]].fn);
			if (d)
				fputc(';', out);
		}
		fprintf(out, " %" PRIu64 "\n", nodes[i].self_ns);
	}
	free(path);
	return fflush(out) || ferror(out) ? -EIO : 0;
}
