/* SPDX-License-Identifier: MIT */
/*
 * What the trace readers' differential tests and fuzzers share (test_jfast,
 * test_chrome_fast, test_nat_lane, fuzz_chrome, fuzz_chrome_fast, fuzz_nat_lane,
 * fuzz_nat_split): each reads one input two or three ways and compares everything a
 * caller sees, so they digest it the same way: a Chrome event field by field, an
 * engine's report, a toolkit analysis compared member by member; and they damage
 * their inputs the same way (every prefix, every byte overwritten by and preceded
 * with each byte that matters to a JSON lexer). No cmocka here: the fuzzers include
 * it too, so what fails is returned and the caller asserts or aborts.
 */
#ifndef RP_TEST_JSUPPORT_H
#define RP_TEST_JSUPPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "aiq.h"
#include "engine.h"
#include "jfast.h"
#include "trace_chrome.h"

/* Sanitized builds (tests/CMakeLists.txt defines RP_TEST_SANITIZED there) run 3-10x
 * slower on a loaded CI machine: exhaustive and random loops take one case in
 * RP_TEST_STRIDE there, chosen so that every kind of case still comes up. */
#ifdef RP_TEST_SANITIZED
#define RP_TEST_STRIDE 3
#else
#define RP_TEST_STRIDE 1
#endif

/* FNV-1a over @n bytes at @p, into *@h. */
static inline void rp_test_mix(uint64_t *h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		*h = (*h ^ b[i]) * 0x100000001b3ull;
}

/* A rp_chrome_read() callback: every field of the event @e, in order, into *@ctx
 * (a uint64_t hash). */
static inline int rp_test_chrome_digest(void *ctx, const struct rp_chrome_ev *e)
{
	uint64_t *h = ctx;
	const char *s[] = { e->name, e->cat, e->pid, e->tid, e->id, e->value_name };
	uint8_t f = (uint8_t)(e->has_ts | e->has_dur << 1 | e->has_correlation << 2 |
			      e->has_id << 3 | e->has_value << 4);

	for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++)
		rp_test_mix(h, s[i], strlen(s[i]) + 1);
	rp_test_mix(h, &e->ph, 1);
	rp_test_mix(h, &f, 1);
	rp_test_mix(h, &e->ts_ns, sizeof(e->ts_ns));
	rp_test_mix(h, &e->dur_ns, sizeof(e->dur_ns));
	rp_test_mix(h, &e->correlation, sizeof(e->correlation));
	rp_test_mix(h, &e->value, sizeof(e->value));
	return 0;
}

/* Everything a caller of the Chrome reader sees. */
struct rp_test_chrome_seen {
	uint64_t h; /* rp_test_chrome_digest() of every event */
	int rc;
	char why[RP_WHY_MAX];
	struct rp_chrome_stats st;
};

/* @buf, @len (or the file @path) read one way: 0 as shipped, 1 with
 * rp_chrome_events_off (jfast token by token), 2 with rp_jfast_off (yajl alone). */
static inline void rp_test_chrome_way(const void *buf, size_t len, const char *path, int way,
				      struct rp_test_chrome_seen *s)
{
	memset(s, 0, sizeof(*s));
	s->h = 0xcbf29ce484222325ull;
	rp_chrome_events_off = way == 1;
	rp_jfast_off = way == 2;
	s->rc = path ? rp_chrome_read(path, rp_test_chrome_digest, NULL, &s->h, &s->st, s->why)
		     : rp_chrome_parse(buf, len, rp_test_chrome_digest, &s->h, &s->st, s->why);
	rp_chrome_events_off = rp_jfast_off = false;
}

static inline bool rp_test_chrome_same(const struct rp_test_chrome_seen *a,
				       const struct rp_test_chrome_seen *b)
{
	return a->rc == b->rc && strcmp(a->why, b->why) == 0 && a->h == b->h &&
	       memcmp(&a->st, &b->st, sizeof(a->st)) == 0;
}

/* A small engine (one per input): every cap low enough to be hit by a small trace. */
static inline void rp_test_small_engine_cfg(struct rp_engine_cfg *cfg)
{
	rp_engine_cfg_default(cfg);
	cfg->max_names = 64;
	cfg->max_tracks = 16;
	cfg->max_cct_nodes = 64;
	cfg->max_sources = 2;
	cfg->max_sketch_names = 8;
	cfg->max_window_names = 4;
	cfg->max_counters = 4;
	cfg->recorder_spans = 64;
	cfg->recorder_samples = 16;
	cfg->dev.max_spans = 64;
	cfg->dev.max_events = 32;
}

/* The engine @e's functions (name, calls, total), events, last time and anomalies
 * into *@h. @return rp_engine_report()'s. */
static inline int rp_test_engine_digest(struct rp_engine *e, uint64_t *h)
{
	struct rp_report r;
	int rc = rp_engine_report(e, &r);

	if (rc != 0)
		return rc;
	for (uint32_t i = 0; i < r.n_fns; i++) {
		rp_test_mix(h, r.fns[i].name, strlen(r.fns[i].name));
		rp_test_mix(h, &r.fns[i].calls, sizeof(r.fns[i].calls));
		rp_test_mix(h, &r.fns[i].total_ns, sizeof(r.fns[i].total_ns));
	}
	rp_test_mix(h, &r.events, sizeof(r.events));
	rp_test_mix(h, &r.t_last, sizeof(r.t_last));
	rp_test_mix(h, r.anomalies, sizeof(r.anomalies));
	rp_report_free(&r);
	return 0;
}

#define RP_TEST_SAME(x, y, n) ((n) == 0 || memcmp((x), (y), (n) * sizeof(*(x))) == 0)

/* By length and bytes: a toolkit string may hold "\u0000". */
static inline bool rp_test_same_strtab(const struct rp_strtab *x, const struct rp_strtab *y)
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
static inline bool rp_test_same_nodes(const struct rp_aiq *x, const struct rp_aiq *y)
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

/* Two finished toolkit analyses: every call, its ids and times, the names and UUIDs
 * behind the ids, the concurrency segments, percentiles and top list. */
static inline bool rp_test_same_aiq(const struct rp_aiq *x, const struct rp_aiq *y)
{
	return memcmp(&x->c, &y->c, sizeof(x->c)) == 0 && rp_test_same_nodes(x, y) &&
	       x->n_roots == y->n_roots && RP_TEST_SAME(x->roots, y->roots, x->n_roots) &&
	       x->n_order == y->n_order && RP_TEST_SAME(x->order, y->order, x->n_order) &&
	       x->n_metrics == y->n_metrics && RP_TEST_SAME(x->metrics, y->metrics, x->n_metrics) &&
	       x->n_seg == y->n_seg &&
	       RP_TEST_SAME(x->seg_t, y->seg_t, x->n_seg + (x->seg_t != NULL)) &&
	       RP_TEST_SAME(x->seg_level, y->seg_level, x->n_seg) &&
	       memcmp(&x->p50, &y->p50, 4 * sizeof(double)) == 0 && x->n_top == y->n_top &&
	       RP_TEST_SAME(x->top, y->top, x->n_top) &&
	       rp_test_same_strtab(&x->names, &y->names) &&
	       rp_test_same_strtab(&x->uuids, &y->uuids);
}

/* @path made to hold @n bytes at @b, gzip (level 1) if @gz. @return false on failure. */
static inline bool rp_test_write_text(const char *path, const void *b, size_t n, bool gz)
{
	if (gz) {
		gzFile g = gzopen(path, "wb1");
		bool ok = g != NULL && gzwrite(g, b, (unsigned)n) == (int)n;
		return g != NULL && gzclose(g) == Z_OK && ok;
	}
	FILE *f = fopen(path, "wb");
	bool ok = f != NULL && fwrite(b, 1, n, f) == n;
	return f != NULL && fclose(f) == 0 && ok;
}

/* Bytes that matter to a JSON lexer, for overwriting and inserting. */
static const unsigned char rp_test_probes[] = { '"', '\\', '{', '}', '[', ']',  ',',  ':',
						' ', '\f', '0', '-', 'e', '.',	'n',  0x01,
						0x80, 0xc3, 0xff };
#define RP_TEST_N_PROBES sizeof(rp_test_probes)

/* What rp_test_mutations() made: a prefix, a byte overwritten, a byte inserted. */
enum rp_test_mut { RP_TEST_PREFIX, RP_TEST_OVERWRITE, RP_TEST_INSERT };

/*
 * rp_test_mutations() - @same(@ctx, text, length, @at, kind, probe index) for the @n
 * bytes at @text whole, then every prefix, every byte overwritten by every probe, and
 * preceded by one (a different one at each position, all of them in turn). With
 * @stride > 1, one in @stride of each kind: prefixes and insertions at positions
 * 0 mod @stride, an overwrite where position + probe is, so every position still
 * gets some probes and every probe some positions. @return false if out of memory.
 */
static inline bool rp_test_mutations(const char *text, size_t n, size_t stride,
				     void (*same)(void *ctx, const char *t, size_t len, size_t at,
						  enum rp_test_mut kind, size_t probe),
				     void *ctx)
{
	char *m = malloc(n + 2);

	if (m == NULL)
		return false;
	same(ctx, text, n, n, RP_TEST_PREFIX, 0);
	for (size_t i = 0; i <= n; i += stride)
		same(ctx, text, i, i, RP_TEST_PREFIX, 0);
	for (size_t i = 0; i < n; i++) {
		for (size_t p = 0; p < RP_TEST_N_PROBES; p++) {
			if ((i + p) % stride != 0)
				continue;
			memcpy(m, text, n);
			m[i] = (char)rp_test_probes[p];
			same(ctx, m, n, i, RP_TEST_OVERWRITE, p);
		}
		if (i % stride != 0)
			continue;
		memcpy(m, text, i);
		m[i] = (char)rp_test_probes[i % RP_TEST_N_PROBES];
		memcpy(m + i + 1, text + i, n - i);
		same(ctx, m, n + 1, i, RP_TEST_INSERT, i % RP_TEST_N_PROBES);
	}
	free(m);
	return true;
}

#endif
