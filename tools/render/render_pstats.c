// SPDX-License-Identifier: MIT
/*
 * The pstats report: the file cProfile's Stats.dump_stats() writes, so that
 * pstats.Stats, snakeviz and gprof2dot open our profiles. It is one value in
 * Python's marshal format:
 *
 *   {(file, line, name): (primitive_calls, calls, self_s, cum_s,
 *                         {caller_key: (calls, primitive_calls, self_s, cum_s)})}
 *
 * (the per-caller tuples put total calls first, the function tuples primitive calls
 * first: that is pstats' own layout). A function without a file gets cProfile's
 * convention for built-ins, file "~" and line 0 (pstats then prints just the name),
 * and, as pstats has no category field, its category in its name as the text report
 * writes it, "decode_step [LLM]", so spans of different categories stay apart (a
 * function with a file is told apart by file:line and keeps its bare name). Python's
 * functions (category "python") are keyed as cProfile keys them: the code object's
 * co_name, the last part of the qualified name the Python producer interns
 * ("Tokenizer.encode" is "encode"; the text and JSON reports keep the qualified name),
 * and built-ins bare, so pstats.Stats.add() of both profiles and key-based diffs line
 * up. Times are seconds as float64 (ns / 1e9). Callers come from the report's edges.
 *
 * A marshal dict cannot hold a key twice (the later entry would silently replace the
 * earlier), and our names are (name, category, file, line) while pstats keys drop
 * the category, so functions whose keys are equal are merged here: their figures
 * are summed (saturating) and their callers united, edges from callers that share a
 * key summed too. Keys are compared after the UTF-8 repair marshal needs ('u'
 * strings must be well-formed UTF-8; rp_render_utf8_next() replaces ill-formed
 * bytes with U+FFFD, as Python's errors="replace" does), so two names that only
 * differed in bad bytes merge as well. Entries are written in key order.
 *
 * Request milestones (report.h `milestone`: a request's time to its mark, no self or
 * cumulative time) are no functions: they are left out, as cProfile has none.
 *
 * Marshal codes used: '{' dict ... '0' end, '(' tuple with an int32 count, 'u' str
 * with an int32 byte length, 'i' int32, 'l' long (int32 digit count, then 15-bit
 * digits as little-endian uint16, least significant first) for counts and lines above
 * INT32_MAX, 'g' float64 little-endian. No references (FLAG_REF) are written.
 */
#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "render.h"
#include "render_priv.h"


/* A function's pstats key; the strings are repaired copies, owned. */
struct pkey {
	char *file;
	char *name;
	uint32_t line;
	uint32_t fn;	/* index into r->fns */
};

/* One merged entry: the figures of every function with the same key. */
struct pentry {
	uint64_t calls, primitive_calls, self_ns, cum_ns;
	bool function; /* a function's, not only request milestones' (those are left out) */
};

/* An edge seen from its callee's entry: sorted by (callee, caller, edge). */
struct pcaller {
	uint32_t callee, caller; /* entry indices */
	uint32_t edge;
};

struct pstats {
	const struct rp_report *r;
	struct pkey *keys;	/* n_fns, sorted by key */
	uint32_t *entry_of;	/* n_fns: fn index -> entry index */
	struct pentry *entries;
	uint32_t n_entries;
	uint32_t *first_key;	/* n_entries: index into keys of each entry's key */
	struct pcaller *callers; /* n_edges */
};

static uint64_t add_sat(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static int cmp_key(const void *pa, const void *pb)
{
	const struct pkey *a = pa, *b = pb;
	int c;

	if ((c = strcmp(a->file, b->file)) != 0)
		return c;
	if (a->line != b->line)
		return a->line < b->line ? -1 : 1;
	if ((c = strcmp(a->name, b->name)) != 0)
		return c;
	return a->fn < b->fn ? -1 : a->fn > b->fn;
}

static bool same_key(const struct pkey *a, const struct pkey *b)
{
	return a->line == b->line && !strcmp(a->file, b->file) && !strcmp(a->name, b->name);
}

/* "name [category]", repaired (NULL: no memory); the bare name without a category. */
static char *name_in_category(const struct rp_report_fn *f)
{
	char *both, *fixed;

	if (f->category == NULL || f->category[0] == '\0')
		return rp_render_utf8_copy(f->name);
	if (asprintf(&both, "%s [%s]", f->name ? f->name : "", f->category) < 0)
		return NULL;
	fixed = rp_render_utf8_copy(both);
	free(both);
	return fixed;
}

/* The pstats name of a Python function (producers/python): cProfile's co_name. A
 * built-in (file "~": "<built-in method append of list object>") keeps its name whole. */
static char *python_name(const struct rp_report_fn *f)
{
	const char *dot = f->name ? strrchr(f->name, '.') : NULL;

	if (f->file && f->file[0] && strcmp(f->file, "~") != 0 && dot != NULL && dot[1] != '\0')
		return rp_render_utf8_copy(dot + 1);
	return rp_render_utf8_copy(f->name ? f->name : "");
}

static bool is_python(const struct rp_report_fn *f)
{
	return f->category != NULL && strcmp(f->category, "python") == 0;
}

/* keys[] for every function, sorted; strings too long for marshal are -EOVERFLOW. */
static int make_keys(struct pstats *p)
{
	const struct rp_report *r = p->r;

	for (uint32_t i = 0; i < r->n_fns; i++) {
		const struct rp_report_fn *f = &r->fns[i];
		struct pkey *k = &p->keys[i];

		k->fn = i;
		k->line = f->line;
		k->file = rp_render_utf8_copy(f->file && f->file[0] ? f->file : "~");
		if (is_python(f))
			k->name = python_name(f);
		else if (f->file && f->file[0])
			k->name = rp_render_utf8_copy(f->name);
		else
			k->name = name_in_category(f);
		if (k->file == NULL || k->name == NULL)
			return -ENOMEM;
		if (strlen(k->file) > INT32_MAX || strlen(k->name) > INT32_MAX)
			return -EOVERFLOW;
	}
	qsort(p->keys, r->n_fns, sizeof(*p->keys), cmp_key);
	return 0;
}

/* Groups equal keys into entries and sums their figures. */
static void merge_entries(struct pstats *p)
{
	for (uint32_t i = 0; i < p->r->n_fns; i++) {
		const struct rp_report_fn *f = &p->r->fns[p->keys[i].fn];
		struct pentry *e;

		if (i == 0 || !same_key(&p->keys[i - 1], &p->keys[i]))
			p->first_key[p->n_entries++] = i;
		p->entry_of[p->keys[i].fn] = p->n_entries - 1;
		e = &p->entries[p->n_entries - 1];
		e->function |= !f->milestone;
		e->calls = add_sat(e->calls, f->calls);
		e->primitive_calls = add_sat(e->primitive_calls, f->primitive_calls);
		/* pstats has no negative tottime: a torch-nesting total below 0 is 0 */
		e->self_ns = add_sat(e->self_ns, (int64_t)f->self_ns < 0 ? 0 : f->self_ns);
		e->cum_ns = add_sat(e->cum_ns, f->cum_ns);
	}
}

static int cmp_caller(const void *pa, const void *pb)
{
	const struct pcaller *a = pa, *b = pb;

	if (a->callee != b->callee)
		return a->callee < b->callee ? -1 : 1;
	if (a->caller != b->caller)
		return a->caller < b->caller ? -1 : 1;
	return a->edge < b->edge ? -1 : a->edge > b->edge;
}

static void sort_callers(struct pstats *p)
{
	for (uint32_t i = 0; i < p->r->n_edges; i++) {
		p->callers[i].callee = p->entry_of[p->r->edges[i].callee];
		p->callers[i].caller = p->entry_of[p->r->edges[i].caller];
		p->callers[i].edge = i;
	}
	qsort(p->callers, p->r->n_edges, sizeof(*p->callers), cmp_caller);
}

static void put_le(FILE *out, uint64_t v, unsigned bytes)
{
	for (unsigned i = 0; i < bytes; i++)
		fputc((int)(v >> (8 * i) & 0xff), out);
}

/* 'i' when it fits an int32, else 'l' with 15-bit digits. */
static void put_int(FILE *out, uint64_t v)
{
	unsigned n = 0;

	if (v <= INT32_MAX) {
		fputc('i', out);
		put_le(out, v, 4);
		return;
	}
	for (uint64_t t = v; t; t >>= 15)
		n++;
	fputc('l', out);
	put_le(out, n, 4);
	for (; v; v >>= 15)
		put_le(out, v & 0x7fff, 2);
}

/* Nanoseconds as float64 seconds. */
static void put_seconds(FILE *out, uint64_t ns)
{
	double s = (double)ns / 1e9;
	uint64_t bits;

	memcpy(&bits, &s, sizeof(bits));
	fputc('g', out);
	put_le(out, bits, 8);
}

static void put_str(FILE *out, const char *s)
{
	size_t n = strlen(s);

	fputc('u', out);
	put_le(out, n, 4);
	fwrite(s, 1, n, out);
}

static void put_tuple(FILE *out, unsigned n)
{
	fputc('(', out);
	put_le(out, n, 4);
}

static void put_key(FILE *out, const struct pkey *k)
{
	put_tuple(out, 3);
	put_str(out, k->file);
	put_int(out, k->line);
	put_str(out, k->name);
}

/* The callers of entry @e, from callers[*at] on: one tuple per caller entry. */
static void put_callers(FILE *out, const struct pstats *p, uint32_t e, uint32_t *at)
{
	const struct pcaller *c = p->callers;
	uint32_t i = *at, n = p->r->n_edges;

	fputc('{', out);
	while (i < n && c[i].callee == e) {
		struct pentry sum = { 0 };
		uint32_t caller = c[i].caller;

		for (; i < n && c[i].callee == e && c[i].caller == caller; i++) {
			const struct rp_report_edge *ed = &p->r->edges[c[i].edge];

			sum.calls = add_sat(sum.calls, ed->calls);
			sum.primitive_calls = add_sat(sum.primitive_calls, ed->primitive_calls);
			sum.self_ns = add_sat(sum.self_ns, ed->self_ns);
			sum.cum_ns = add_sat(sum.cum_ns, ed->cum_ns);
		}
		put_key(out, &p->keys[p->first_key[caller]]);
		put_tuple(out, 4);
		put_int(out, sum.calls);
		put_int(out, sum.primitive_calls);
		put_seconds(out, sum.self_ns);
		put_seconds(out, sum.cum_ns);
	}
	fputc('0', out);
	*at = i;
}

static void put_stats(FILE *out, const struct pstats *p)
{
	uint32_t at = 0;

	fputc('{', out);
	for (uint32_t e = 0; e < p->n_entries; e++) {
		const struct pentry *en = &p->entries[e];

		if (!en->function) { /* a milestone: no function (and no edges) */
			while (at < p->r->n_edges && p->callers[at].callee == e)
				at++;
			continue;
		}
		put_key(out, &p->keys[p->first_key[e]]);
		put_tuple(out, 5);
		put_int(out, en->primitive_calls);
		put_int(out, en->calls);
		put_seconds(out, en->self_ns);
		put_seconds(out, en->cum_ns);
		put_callers(out, p, e, &at);
	}
	fputc('0', out);
}

static int pstats_alloc(struct pstats *p)
{
	size_t n = p->r->n_fns ? p->r->n_fns : 1, m = p->r->n_edges ? p->r->n_edges : 1;

	p->keys = calloc(n, sizeof(*p->keys));
	p->entry_of = calloc(n, sizeof(*p->entry_of));
	p->entries = calloc(n, sizeof(*p->entries));
	p->first_key = calloc(n, sizeof(*p->first_key));
	p->callers = calloc(m, sizeof(*p->callers));
	if (!p->keys || !p->entry_of || !p->entries || !p->first_key || !p->callers)
		return -ENOMEM;
	return 0;
}

static void pstats_free(struct pstats *p)
{
	for (uint32_t i = 0; p->keys && i < p->r->n_fns; i++) {
		free(p->keys[i].file);
		free(p->keys[i].name);
	}
	free(p->keys);
	free(p->entry_of);
	free(p->entries);
	free(p->first_key);
	free(p->callers);
}

/*
 * rp_render_pstats() - see render.h and above.
 * Return: 0; -EINVAL (nothing written) if an edge names a function outside r->fns;
 * -ENOMEM; -EOVERFLOW for a string of 2 GiB or more; -EIO when writing failed.
 */
int rp_render_pstats(const struct rp_report *r, FILE *out)
{
	struct pstats p = { .r = r };
	int err;

	assert(r != NULL && out != NULL);
	for (uint32_t i = 0; i < r->n_edges; i++)
		if (r->edges[i].caller >= r->n_fns || r->edges[i].callee >= r->n_fns)
			return -EINVAL;
	err = pstats_alloc(&p);
	if (err)
		goto out_free;
	err = make_keys(&p);
	if (err)
		goto out_free;
	merge_entries(&p);
	sort_callers(&p);
	put_stats(out, &p);
	err = fflush(out) || ferror(out) ? -EIO : 0;
out_free:
	pstats_free(&p);
	return err;
}
