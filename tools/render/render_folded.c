// SPDX-License-Identifier: MIT
/*
 * Collapsed stacks ("folded"), the text flamegraph.pl, inferno and speedscope read:
 * one line per calling-context node with self time,
 *   root_fn;child;leaf <self_ns>
 * the names on the path from the CCT's top (the root node itself has no name) down to
 * the node, joined by ';', then a space and the node's self time in nanoseconds.
 * Lines come in depth-first tree order: a node, then its subtrees one after another,
 * children in CCT order (first call first), so a subtree's lines are contiguous and
 * speedscope's time-order view draws each root in one piece. Equal reports give equal
 * files, and the values add up to the report's total self time.
 *
 * A name is written as it is but for the three bytes that would break the format:
 * ';' (the separator), '\n' and '\r' (the line) each become '_'; and since folded
 * files are read in terminals too and names come from other processes, the other
 * control characters become C escapes and ill-formed UTF-8 U+FFFD, as in the text
 * report (rp_render_safe_char()). "[other]" nodes (the
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
	char buf[16];
	size_t n, cols;

	for (; *s; s += n) {
		if (*s == ';' || *s == '\n' || *s == '\r') {
			fputc('_', out);
			n = 1;
			continue;
		}
		n = rp_render_safe_char(s, buf, &cols);
		fputs(buf, out);
	}
}

/*
 * rp_render_folded() - see render.h.
 * Return: 0; -EINVAL (nothing written) when a node's parent is neither RP_NONE nor an
 * earlier node (the path would not end); -ENOMEM; -EIO when writing failed.
 */
int rp_render_folded(const struct rp_report *r, FILE *out)
{
	const struct rp_report_node *nodes = r->nodes;
	uint32_t *path, *kid, *next, *last;

	assert(r != NULL && out != NULL);
	for (uint32_t i = 0; i < r->n_nodes; i++)
		if (nodes[i].parent != RP_NONE && nodes[i].parent >= i)
			return -EINVAL;
	path = malloc(sizeof(*path) * (r->n_nodes ? r->n_nodes : 1));
	kid = malloc(sizeof(*kid) * (r->n_nodes ? r->n_nodes : 1));
	next = malloc(sizeof(*next) * (r->n_nodes ? r->n_nodes : 1));
	last = malloc(sizeof(*last) * (r->n_nodes ? r->n_nodes : 1));
	if (path == NULL || kid == NULL || next == NULL || last == NULL) {
		free(path);
		free(kid);
		free(next);
		free(last);
		return -ENOMEM;
	}
	/* children lists in node order: kid[] the first, next[] the sibling after */
	for (uint32_t i = 0; i < r->n_nodes; i++) {
		kid[i] = next[i] = last[i] = RP_NONE;
		if (nodes[i].parent == RP_NONE)
			continue;
		if (last[nodes[i].parent] == RP_NONE)
			kid[nodes[i].parent] = i;
		else
			next[last[nodes[i].parent]] = i;
		last[nodes[i].parent] = i;
	}
	/* depth-first from every top node (parent RP_NONE, no name of its own):
	 * path[0..d) is the stack of nodes from the top's child down */
	for (uint32_t top = 0; top < r->n_nodes; top++) {
		uint32_t d = 0, at = nodes[top].parent == RP_NONE ? kid[top] : RP_NONE;

		while (at != RP_NONE) {
			path[d++] = at;
			if (nodes[at].self_ns > 0) {
				for (uint32_t k = 0; k < d; k++) {
					put_frame(out, r, nodes[path[k]].fn);
					if (k + 1 < d)
						fputc(';', out);
				}
				fprintf(out, " %" PRIu64 "\n", nodes[at].self_ns);
			}
			at = kid[at];
			while (at == RP_NONE && d > 0) /* up until a next sibling */
				at = next[path[--d]];
		}
	}
	free(kid);
	free(next);
	free(last);
	free(path);
	return fflush(out) || ferror(out) ? -EIO : 0;
}
