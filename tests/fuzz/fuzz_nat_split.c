// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the toolkit importer's two-reader path (import_nat.c, "two
 * readers"): each input is written to a file and imported into the toolkit analysis
 * twice, with rp_nat_split_min at SIZE_MAX (one reader) and at 0 (every plain file
 * split at its guessed request start). Both must give the same return value, error
 * text, counts and analysis (every call, its ids and times, the names and UUIDs
 * behind the ids, the concurrency segments, percentiles and top list); any
 * difference aborts. tests/test_nat_split.c does the same for chosen inputs.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "aiq.h"
#include "import_nat.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct outcome {
	int rc;
	char why[RP_WHY_MAX];
	struct rp_nat_stats st;
	struct rp_aiq a;
};

static char path[64];

static void remove_file(void)
{
	unlink(path);
}

static void import(size_t split_min, struct outcome *o)
{
	memset(o, 0, sizeof(*o));
	rp_nat_split_min = split_min;
	if (rp_aiq_init(&o->a, 64) != 0)
		abort(); /* a valid configuration: the target must run */
	o->rc = rp_import_nat(NULL, &o->a, NULL, path, NULL, NULL, &o->st, o->why);
	if (o->rc == 0 && rp_aiq_finish(&o->a) != 0)
		abort();
}

#define SAME(x, y, n) ((n) == 0 || memcmp((x), (y), (n) * sizeof(*(x))) == 0)

/* By length and bytes: a toolkit string may hold "\u0000". */
static bool same_strings(const struct rp_strtab *x, const struct rp_strtab *y)
{
	if (x->n != y->n)
		return false;
	for (uint32_t i = 0; i < x->n; i++)
		if ((uint32_t)x->off[i] != (uint32_t)y->off[i] ||
		    memcmp(rp_strtab_str(x, i), rp_strtab_str(y, i), (uint32_t)x->off[i]) != 0)
			return false;
	return true;
}

/* Field by field: a node's padding is not part of the answer. */
static bool same_nodes(const struct rp_aiq *x, const struct rp_aiq *y)
{
	if (x->n_nodes != y->n_nodes)
		return false;
	for (uint32_t i = 0; i < x->n_nodes; i++) {
		const struct rp_aiq_node *p = &x->nodes[i], *q = &y->nodes[i];

		if (memcmp(&p->start, &q->start, 4 * sizeof(double)) != 0 || p->uuid != q->uuid ||
		    p->name != q->name || p->first_child != q->first_child ||
		    p->next_sibling != q->next_sibling || p->mid != q->mid ||
		    p->type != q->type || p->ended != q->ended)
			return false;
	}
	return true;
}

static bool same_analysis(const struct rp_aiq *x, const struct rp_aiq *y)
{
	return memcmp(&x->c, &y->c, sizeof(x->c)) == 0 && same_nodes(x, y) &&
	       x->n_roots == y->n_roots &&
	       SAME(x->roots, y->roots, x->n_roots) && x->n_order == y->n_order &&
	       SAME(x->order, y->order, x->n_order) && x->n_metrics == y->n_metrics &&
	       SAME(x->metrics, y->metrics, x->n_metrics) && x->n_seg == y->n_seg &&
	       SAME(x->seg_t, y->seg_t, x->n_seg + (x->seg_t != NULL)) &&
	       SAME(x->seg_level, y->seg_level, x->n_seg) &&
	       memcmp(&x->p50, &y->p50, 4 * sizeof(double)) == 0 && x->n_top == y->n_top &&
	       SAME(x->top, y->top, x->n_top) && same_strings(&x->names, &y->names) &&
	       same_strings(&x->uuids, &y->uuids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct outcome one, two;
	FILE *f;

	if (path[0] == '\0') {
		int fd;

		snprintf(path, sizeof(path), "/tmp/fuzz_nat_split.XXXXXX");
		fd = mkstemp(path);
		if (fd < 0)
			abort();
		close(fd);
		atexit(remove_file); /* libFuzzer exits through exit() when its time is up */
	}
	f = fopen(path, "wb");
	if (f == NULL || fwrite(data, 1, size, f) != size || fclose(f) != 0)
		abort();
	import(SIZE_MAX, &one);
	import(0, &two);
	if (one.rc != two.rc || strcmp(one.why, two.why) != 0 ||
	    memcmp(&one.st, &two.st, sizeof(one.st)) != 0 ||
	    (one.rc == 0 && !same_analysis(&one.a, &two.a))) {
		fprintf(stderr, "fuzz_nat_split: one reader %d \"%s\", two %d \"%s\"\n", one.rc,
			one.why, two.rc, two.why);
		abort();
	}
	rp_aiq_free(&one.a);
	rp_aiq_free(&two.a);
	return 0;
}
