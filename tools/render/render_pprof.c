// SPDX-License-Identifier: MIT
/*
 * pprof: the gzipped profile.proto that `go tool pprof`, Pyroscope and Parca read
 * (the message and its field numbers: github.com/google/pprof, proto/profile.proto).
 *
 * One sample per calling-context node with calls or self time: its stack is the path
 * of function locations from the node (the leaf, first) up to the CCT's top, its
 * values [calls, wall] are the node's calls and self time in nanoseconds. pprof's flat
 * of a function (the samples it is the leaf of) is then the sum of its nodes' self
 * times, the report's self_ns; its cum (the samples whose stack holds it, each once) is
 * the self time under its outermost nodes, which is the report's cum_ns, the durations
 * of its primitive calls; flat calls are its calls. wall is the default sample type.
 * Each function of the report is one Function (name, system name, file, start line)
 * and one Location (a Line with that function and line, no address), all in one Mapping
 * "ringprof" that says functions, files and lines are there: pprof then neither tries
 * to symbolize the profile nor complains of a missing binary. The display name is
 * "name [category]" (just the name without a category), as the text report writes it,
 * and the bare name is the system name; pprof's default granularity joins functions
 * by display name, so two functions that differ only in file or line show as one
 * unless -lines (or -filefunctions) is asked. Labels: "category" (the leaf's, when it has one), and
 * "source" and "pid" when the report has one source, since the CCT mixes the sources'
 * paths, and "host" when every source ran on one host (1.4 reports). Comments (go tool pprof
 * -comments) carry what the report lost: dropped, late, truncated and each anomaly.
 * time_nanos is the moment the report was made less duration_nanos (the events'
 * range): the profile's start, at most late by the gap between the last event and the
 * report.
 *
 * Why a hand-written writer (protobuf.c) and not protobuf-c: the profile is written,
 * never read, by this one file; its wire format takes varints, length-delimited fields
 * and packed varints, about 100 lines. protobuf-c would add a compiler (protoc-c) to the
 * build, generated code and a runtime library for that one message. The writer's
 * output is read back by an independent decoder in tests/test_pprof.c and by the real
 * `go tool pprof` there.
 *
 * Strings are repaired to well-formed UTF-8 (U+FFFD per ill-formed subpart): pprof's
 * string_table is a proto3 `string`, which strict decoders refuse otherwise. Equal
 * reports give equal files (the gzip header carries no time).
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "protobuf.h"
#include "render.h"
#include "render_priv.h"

/* profile.proto field numbers. */
enum {
	PROFILE_SAMPLE_TYPE = 1,
	PROFILE_SAMPLE = 2,
	PROFILE_MAPPING = 3,
	PROFILE_LOCATION = 4,
	PROFILE_FUNCTION = 5,
	PROFILE_STRING_TABLE = 6,
	PROFILE_TIME_NANOS = 9,
	PROFILE_DURATION_NANOS = 10,
	PROFILE_PERIOD_TYPE = 11,
	PROFILE_PERIOD = 12,
	PROFILE_COMMENT = 13,
	PROFILE_DEFAULT_SAMPLE_TYPE = 14,
	VALUETYPE_TYPE = 1,
	VALUETYPE_UNIT = 2,
	SAMPLE_LOCATION_ID = 1,
	SAMPLE_VALUE = 2,
	SAMPLE_LABEL = 3,
	LABEL_KEY = 1,
	LABEL_STR = 2,
	LABEL_NUM = 3,
	MAPPING_ID = 1,
	MAPPING_FILENAME = 5,
	MAPPING_HAS_FUNCTIONS = 7,
	MAPPING_HAS_FILENAMES = 8,
	MAPPING_HAS_LINE_NUMBERS = 9,
	LOCATION_ID = 1,
	LOCATION_MAPPING_ID = 2,
	LOCATION_LINE = 4,
	LINE_FUNCTION_ID = 1,
	LINE_LINE = 2,
	FUNCTION_ID = 1,
	FUNCTION_NAME = 2,
	FUNCTION_SYSTEM_NAME = 3,
	FUNCTION_FILENAME = 4,
	FUNCTION_START_LINE = 5,
};

/* The string table: index 0 is "", equal strings share an index (open addressing). */
struct strtab {
	char **s; /* owned, repaired copies */
	uint32_t n, cap;
	uint32_t *slot; /* index + 1 per slot, 0 free */
	uint32_t nslot; /* a power of two, at least twice n */
	int err;
};

struct pprof {
	const struct rp_report *r;
	struct strtab st;
	struct rp_pb prof, msg, sub; /* the profile; scratch for nested messages */
	uint64_t *stack;	     /* n_nodes location ids */
};

static uint64_t hash_str(const char *s)
{
	uint64_t h = 14695981039346656037ull; /* FNV-1a */

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211ull;
	return h;
}

static int strtab_grow(struct strtab *t)
{
	uint32_t nslot = t->nslot ? t->nslot * 2 : 64, *slot;
	char **s;

	if (nslot == 0 || t->cap > UINT32_MAX / 2)
		return -ENOMEM;
	slot = calloc(nslot, sizeof(*slot));
	s = realloc(t->s, sizeof(*s) * (nslot / 2));
	if (slot == NULL || s == NULL) {
		free(slot);
		if (s)
			t->s = s;
		return -ENOMEM;
	}
	t->s = s;
	t->cap = nslot / 2;
	for (uint32_t i = 0; i < t->n; i++) { /* rehash */
		uint32_t k = (uint32_t)hash_str(t->s[i]) & (nslot - 1);

		while (slot[k])
			k = (k + 1) & (nslot - 1);
		slot[k] = i + 1;
	}
	free(t->slot);
	t->slot = slot;
	t->nslot = nslot;
	return 0;
}

/* The index of @s (repaired) in the table, added if new; 0 after an error. */
static uint64_t intern(struct strtab *t, const char *s)
{
	char *fixed;
	uint32_t k;

	if (t->err)
		return 0;
	fixed = rp_render_utf8_copy(s);
	if (fixed == NULL || (t->n + 1 > t->cap && (t->err = strtab_grow(t)) != 0)) {
		t->err = -ENOMEM;
		free(fixed);
		return 0;
	}
	for (k = (uint32_t)hash_str(fixed) & (t->nslot - 1); t->slot[k];
	     k = (k + 1) & (t->nslot - 1)) {
		if (strcmp(t->s[t->slot[k] - 1], fixed) == 0) {
			free(fixed);
			return t->slot[k] - 1;
		}
	}
	t->s[t->n++] = fixed;
	t->slot[k] = t->n;
	return t->n - 1;
}

static void strtab_free(struct strtab *t)
{
	for (uint32_t i = 0; i < t->n; i++)
		free(t->s[i]);
	free(t->s);
	free(t->slot);
}

/* A ValueType {type, unit} as field @field of the profile. */
static void put_value_type(struct pprof *p, uint32_t field, const char *type, const char *unit)
{
	rp_pb_reset(&p->msg);
	rp_pb_uint(&p->msg, VALUETYPE_TYPE, intern(&p->st, type));
	rp_pb_uint(&p->msg, VALUETYPE_UNIT, intern(&p->st, unit));
	rp_pb_message(&p->prof, field, &p->msg);
}

/* "name [category]", or the name alone; NULL when out of memory. */
static char *display_name(const struct rp_report_fn *f)
{
	char *s;

	if (f->category == NULL || f->category[0] == '\0')
		return strdup(f->name ? f->name : "");
	return asprintf(&s, "%s [%s]", f->name ? f->name : "", f->category) < 0 ? NULL : s;
}

/* Function and Location @id for @f (NULL: a CCT node naming no function, "?"). */
static void put_function(struct pprof *p, uint64_t id, const struct rp_report_fn *f)
{
	char *name = f ? display_name(f) : strdup("?");

	if (name == NULL)
		p->st.err = -ENOMEM;
	rp_pb_reset(&p->msg);
	rp_pb_uint(&p->msg, FUNCTION_ID, id);
	rp_pb_uint(&p->msg, FUNCTION_NAME, intern(&p->st, name));
	rp_pb_uint(&p->msg, FUNCTION_SYSTEM_NAME, intern(&p->st, f ? f->name : "?"));
	if (f && f->file && f->file[0])
		rp_pb_uint(&p->msg, FUNCTION_FILENAME, intern(&p->st, f->file));
	if (f && f->line)
		rp_pb_uint(&p->msg, FUNCTION_START_LINE, f->line);
	rp_pb_message(&p->prof, PROFILE_FUNCTION, &p->msg);
	free(name);

	rp_pb_reset(&p->sub); /* the Line */
	rp_pb_uint(&p->sub, LINE_FUNCTION_ID, id);
	if (f && f->line)
		rp_pb_uint(&p->sub, LINE_LINE, f->line);
	rp_pb_reset(&p->msg);
	rp_pb_uint(&p->msg, LOCATION_ID, id);
	rp_pb_uint(&p->msg, LOCATION_MAPPING_ID, 1);
	rp_pb_message(&p->msg, LOCATION_LINE, &p->sub);
	rp_pb_message(&p->prof, PROFILE_LOCATION, &p->msg);
}

/* A Label {key, str} or {key, num} into the sample being written (p->msg). */
static void put_label(struct pprof *p, const char *key, const char *str, int64_t num)
{
	rp_pb_reset(&p->sub);
	rp_pb_uint(&p->sub, LABEL_KEY, intern(&p->st, key));
	if (str)
		rp_pb_uint(&p->sub, LABEL_STR, intern(&p->st, str));
	else
		rp_pb_uint(&p->sub, LABEL_NUM, (uint64_t)num);
	rp_pb_message(&p->msg, SAMPLE_LABEL, &p->sub);
}

/* Location id of a node's function: fn + 1, or n_fns + 1 ("?") out of range. */
static uint64_t location_of(const struct rp_report *r, uint32_t fn)
{
	return fn < r->n_fns ? (uint64_t)fn + 1 : (uint64_t)r->n_fns + 1;
}

/* The host every source ran on (1.4 reports), or NULL: none known, or several (a merge
 * of hosts mixes them in one path, so no sample is any one host's). */
static const char *one_host(const struct rp_report *r)
{
	const char *h = r->n_sources ? r->sources[0].host : NULL;

	if (h == NULL || h[0] == '\0')
		return NULL;
	for (uint32_t i = 1; i < r->n_sources; i++)
		if (r->sources[i].host == NULL || strcmp(r->sources[i].host, h) != 0)
			return NULL;
	return h;
}

/* One Sample per CCT node below the top with calls or self time. */
static void put_samples(struct pprof *p)
{
	const struct rp_report *r = p->r;
	const struct rp_report_source *one = r->n_sources == 1 ? &r->sources[0] : NULL;
	const char *host = one_host(r);

	for (uint32_t i = 0; i < r->n_nodes; i++) {
		const struct rp_report_node *n = &r->nodes[i];
		const struct rp_report_fn *f = rp_render_fn_at(r, n->fn);
		uint64_t values[2] = { n->calls, n->self_ns }; /* self: int64, may be < 0 */
		size_t d = 0;

		if (n->parent == RP_NONE || (n->calls == 0 && n->self_ns == 0))
			continue;
		for (uint32_t a = i; r->nodes[a].parent != RP_NONE; a = r->nodes[a].parent)
			p->stack[d++] = location_of(r, r->nodes[a].fn); /* leaf first */
		rp_pb_reset(&p->msg);
		rp_pb_packed(&p->msg, SAMPLE_LOCATION_ID, p->stack, d);
		rp_pb_packed(&p->msg, SAMPLE_VALUE, values, 2);
		if (f && f->category && f->category[0])
			put_label(p, "category", f->category, 0);
		if (one && one->name)
			put_label(p, "source", one->name, 0);
		if (one && one->pid)
			put_label(p, "pid", NULL, one->pid);
		if (host != NULL)
			put_label(p, "host", host, 0);
		rp_pb_message(&p->prof, PROFILE_SAMPLE, &p->msg);
	}
}

static void put_comment(struct pprof *p, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void put_comment(struct pprof *p, const char *fmt, ...)
{
	char line[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	rp_pb_uint(&p->prof, PROFILE_COMMENT, intern(&p->st, line));
}

/* What the report lost, and where it came from, as comments. */
static void put_comments(struct pprof *p)
{
	const struct rp_report *r = p->r;

	put_comment(p,
		    "ringprof report %" PRIu32 ".%" PRIu32 ", clock %s, events %" PRIu64
		    ", dropped %" PRIu64 ", late %" PRIu64 ", truncated %" PRIu64,
		    r->version_major, r->version_minor, r->clock ? r->clock : "?", r->events,
		    r->dropped, r->late, r->truncated);
	for (int k = 0; k < RP_ANOM_KIND_COUNT; k++)
		if (r->anomalies[k])
			put_comment(p, "anomaly %s: %" PRIu64, rp_anomaly_names[k],
				    r->anomalies[k]);
	for (uint32_t i = 0; i < r->n_sources; i++)
		put_comment(p, "source %.300s pid %" PRId32 " events %" PRIu64 " dropped %" PRIu64,
			    r->sources[i].name ? r->sources[i].name : "", r->sources[i].pid,
			    r->sources[i].events, r->sources[i].dropped);
}

static void put_profile(struct pprof *p)
{
	const struct rp_report *r = p->r;
	uint64_t duration = r->t_last > r->t_first ? r->t_last - r->t_first : 0;
	bool unknown_fn = false;

	intern(&p->st, ""); /* string 0 */
	put_value_type(p, PROFILE_SAMPLE_TYPE, "calls", "count");
	put_value_type(p, PROFILE_SAMPLE_TYPE, "wall", "nanoseconds");
	rp_pb_uint(&p->prof, PROFILE_DEFAULT_SAMPLE_TYPE, intern(&p->st, "wall"));
	put_value_type(p, PROFILE_PERIOD_TYPE, "wall", "nanoseconds");
	rp_pb_uint(&p->prof, PROFILE_PERIOD, 1);
	if (r->created_realtime_ns > duration)
		rp_pb_uint(&p->prof, PROFILE_TIME_NANOS, r->created_realtime_ns - duration);
	if (duration > 0 && duration <= INT64_MAX)
		rp_pb_uint(&p->prof, PROFILE_DURATION_NANOS, duration);
	put_comments(p);
	rp_pb_reset(&p->msg);
	rp_pb_uint(&p->msg, MAPPING_ID, 1);
	rp_pb_uint(&p->msg, MAPPING_FILENAME, intern(&p->st, "ringprof"));
	rp_pb_uint(&p->msg, MAPPING_HAS_FUNCTIONS, 1);
	rp_pb_uint(&p->msg, MAPPING_HAS_FILENAMES, 1);
	rp_pb_uint(&p->msg, MAPPING_HAS_LINE_NUMBERS, 1);
	rp_pb_message(&p->prof, PROFILE_MAPPING, &p->msg);
	for (uint32_t i = 0; i < r->n_fns; i++)
		put_function(p, (uint64_t)i + 1, &r->fns[i]);
	for (uint32_t i = 0; i < r->n_nodes; i++)
		unknown_fn |= r->nodes[i].parent != RP_NONE && r->nodes[i].fn >= r->n_fns;
	if (unknown_fn)
		put_function(p, (uint64_t)r->n_fns + 1, NULL);
	put_samples(p);
	for (uint32_t i = 0; i < p->st.n; i++) /* last: every string is in by now */
		rp_pb_string(&p->prof, PROFILE_STRING_TABLE, p->st.s[i]);
}

/* @len bytes at @buf, gzipped (RFC 1952, no name, no time) into @out. */
static int gzip_write(FILE *out, const uint8_t *buf, size_t len)
{
	uint8_t chunk[16384];
	z_stream z = { 0 };
	int zr;

	if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) !=
	    Z_OK)
		return -ENOMEM;
	z.next_in = (Bytef *)buf;
	do {
		/* avail_in is 32 bits: feed a large profile in pieces */
		size_t in = len - (size_t)(z.next_in - buf);
		int flush = in > (1u << 30) ? Z_NO_FLUSH : Z_FINISH;

		z.avail_in = flush == Z_FINISH ? (uInt)in : 1u << 30;
		do { /* until the piece is in (or, finishing, the stream ended) */
			z.next_out = chunk;
			z.avail_out = sizeof(chunk);
			zr = deflate(&z, flush);
			if (zr == Z_STREAM_ERROR || fwrite(chunk, 1, sizeof(chunk) - z.avail_out,
							   out) != sizeof(chunk) - z.avail_out) {
				deflateEnd(&z);
				return -EIO;
			}
		} while (z.avail_out == 0);
	} while (zr != Z_STREAM_END);
	deflateEnd(&z);
	return 0;
}

/*
 * rp_render_pprof() - see render.h and above.
 * Return: 0; -EINVAL (nothing written) when a node's parent is neither RP_NONE nor an
 * earlier node; -ENOMEM; -EIO when writing failed.
 */
int rp_render_pprof(const struct rp_report *r, FILE *out)
{
	struct pprof p = { .r = r };
	int err;

	assert(r != NULL && out != NULL);
	for (uint32_t i = 0; i < r->n_nodes; i++)
		if (r->nodes[i].parent != RP_NONE && r->nodes[i].parent >= i)
			return -EINVAL;
	rp_pb_init(&p.prof);
	rp_pb_init(&p.msg);
	rp_pb_init(&p.sub);
	p.stack = malloc(sizeof(*p.stack) * (r->n_nodes ? r->n_nodes : 1));
	err = p.stack ? 0 : -ENOMEM;
	if (err == 0) {
		put_profile(&p);
		err = p.st.err ? p.st.err : rp_pb_error(&p.prof);
	}
	if (err == 0)
		err = gzip_write(out, p.prof.buf, p.prof.len);
	if (err == 0)
		err = fflush(out) || ferror(out) ? -EIO : 0;
	free(p.stack);
	rp_pb_free(&p.prof);
	rp_pb_free(&p.msg);
	rp_pb_free(&p.sub);
	strtab_free(&p.st);
	return err;
}
