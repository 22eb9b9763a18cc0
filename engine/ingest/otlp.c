// SPDX-License-Identifier: MIT
/*
 * OTLP traces into the engine (otlp.h): the protobuf and JSON decoders of one
 * ExportTraceServiceRequest, the mapping of a span to a name, category and source,
 * and the reorder buffer that feeds the engine in time order.
 *
 * The field numbers, from the OTLP specification (opentelemetry-proto v1):
 *   ExportTraceServiceRequest  1 resource_spans
 *   ResourceSpans   1 resource, 2 scope_spans
 *   Resource        1 attributes
 *   ScopeSpans      2 spans
 *   Span            1 trace_id, 2 span_id, 4 parent_span_id, 5 name, 6 kind,
 *                   7 start_time_unix_nano (fixed64), 8 end_time_unix_nano (fixed64),
 *                   9 attributes, 15 status
 *   Status          3 code (2 = ERROR)
 *   KeyValue        1 key, 2 value
 *   AnyValue        1 string_value, 2 bool_value, 3 int_value, 4 double_value
 * Everything else is skipped by its wire type; groups (wire types 3, 4) and anything
 * running past its message's end are malformed.
 *
 * Ordering: a span's records go into a min-heap by time. rp_otlp_advance() takes
 * the records due, one timestamp at a time, and orders those of one timestamp so
 * that the tree nests as the spans say: the ENDs of spans that began earlier
 * (children before their parent), then BEGINs (parents before their children),
 * then the ENDs of spans of no length (children first). A trace is one engine tree
 * track while one of its spans is open; its span ids map to 32-bit ids of the track.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include <yajl/yajl_tree.h>

#include "otlp.h"

#define MAX_SPANS_DEFAULT  (1u << 16)
#define HORIZON_DEFAULT_NS 15000000000ull
#define PENDING_DEFAULT	   (1u << 20)
#define TRACES_DEFAULT	   (1u << 16)
#define SOURCES_DEFAULT	   256u
#define JSON_DEPTH_MAX	   64 /* deeper JSON is refused before yajl builds a tree */
#define GROUP_ORDER_MAX                                                                            \
	256u /* records of one timestamp ordered by nesting (cubic                                 \
		 in it at worst: a chain of nested spans) */

/* --- decoding: common --- */

struct dec {
	const struct rp_otlp_decode_opts *o;
	rp_otlp_span_fn fn;
	void *ctx;
	struct rp_otlp_decode_stats *st;
	char *why;
	struct rp_otlp_str service;
	int64_t pid;
	char cat[RP_OTLP_STR_MAX]; /* the category attribute's value, as text */
	uint32_t max_spans;
};

static int fail(struct dec *d, const char *what)
{
	snprintf(d->why, RP_WHY_MAX, "%s", what);
	return -EINVAL;
}

/* Which well-known attribute a key is; higher wins (the documented table). */
enum wk { WK_NONE, WK_HTTP, WK_MESSAGING, WK_RPC, WK_DB, WK_GENAI, WK_ATTR };

static enum wk well_known(const struct dec *d, const char *k, size_t n)
{
	static const struct {
		const char *key;
		enum wk wk;
	} t[] = {
		{ "gen_ai.operation.name", WK_GENAI },
		{ "gen_ai.system", WK_GENAI },
		{ "db.system", WK_DB },
		{ "db.system.name", WK_DB },
		{ "rpc.system", WK_RPC },
		{ "messaging.system", WK_MESSAGING },
		{ "http.request.method", WK_HTTP },
		{ "http.method", WK_HTTP },
	};

	if (d->o && d->o->category_attr && strlen(d->o->category_attr) == n &&
	    memcmp(d->o->category_attr, k, n) == 0)
		return WK_ATTR;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (strlen(t[i].key) == n && memcmp(t[i].key, k, n) == 0)
			return t[i].wk;
	return WK_NONE;
}

static const char *const wk_cat[] = { [WK_HTTP] = "http",
				      [WK_MESSAGING] = "messaging",
				      [WK_RPC] = "rpc",
				      [WK_DB] = "db",
				      [WK_GENAI] = "llm" };
static const char *const kind_cat[] = {
	"span", "span", "server", "client", "producer", "consumer"
};

/* The span's category: the configured attribute's value, else the table. */
static struct rp_otlp_str category(struct dec *d, enum wk best, uint32_t kind)
{
	const char *c;

	if (best == WK_ATTR)
		return (struct rp_otlp_str){ d->cat, strlen(d->cat) };
	c = best != WK_NONE ? wk_cat[best] : kind_cat[kind < 6 ? kind : 0];
	return (struct rp_otlp_str){ c, strlen(c) };
}

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/* Hand @sp over, or reject it (counted). */
static void deliver(struct dec *d, struct rp_otlp_span *sp)
{
	sp->service = d->service;
	sp->pid = d->pid;
	if (d->st->spans + d->st->rejected >= d->max_spans || all_zero(sp->trace, 16) ||
	    all_zero(sp->id, 8) || sp->end < sp->start || d->fn(d->ctx, sp) != 0) {
		d->st->rejected++;
		return;
	}
	d->st->spans++;
}

/* --- decoding: protobuf --- */

struct pb {
	const uint8_t *p, *end;
};

static bool pb_varint(struct pb *b, uint64_t *v)
{
	uint64_t x = 0;

	for (unsigned s = 0; s < 64 && b->p < b->end; s += 7) {
		uint8_t c = *b->p++;
		x |= (uint64_t)(c & 0x7f) << s;
		if (!(c & 0x80)) {
			*v = x;
			return true;
		}
	}
	return false;
}

/* The next field of @b: its number, and its value (@v) or its bytes (@sub). 1: one
 * read, 0: the message's end, -1: malformed. */
static int pb_next(struct pb *b, uint32_t *num, struct pb *sub, uint64_t *v)
{
	uint64_t tag, n;

	if (b->p == b->end)
		return 0;
	if (!pb_varint(b, &tag) || (tag >> 3) == 0 || (tag >> 3) > UINT32_MAX)
		return -1;
	*num = (uint32_t)(tag >> 3);
	switch (tag & 7) {
	case 0: return pb_varint(b, v) ? 1 : -1;
	case 1:
	case 5:
		n = (tag & 7) == 1 ? 8 : 4;
		if ((size_t)(b->end - b->p) < n)
			return -1;
		*v = 0;
		for (unsigned i = 0; i < n; i++)
			*v |= (uint64_t)b->p[i] << (8 * i);
		b->p += n;
		sub->p = sub->end = NULL; /* not bytes */
		return 1;
	case 2:
		if (!pb_varint(b, &n) || n > (uint64_t)(b->end - b->p))
			return -1;
		sub->p = b->p;
		sub->end = b->p + n;
		b->p += n;
		return 2;
	default: return -1;
	}
}

/* Copy a value's text into @out (cut, NUL-terminated). */
static void pb_anyvalue_text(struct pb v, char *out, size_t cap)
{
	struct pb sub;
	uint32_t num;
	uint64_t x;
	int r;

	out[0] = '\0';
	while ((r = pb_next(&v, &num, &sub, &x)) > 0) {
		if (num == 1 && r == 2)
			snprintf(out, cap, "%.*s", (int)(sub.end - sub.p), (const char *)sub.p);
		else if (num == 3 && r == 1)
			snprintf(out, cap, "%" PRId64, (int64_t)x);
		else if (num == 2 && r == 1)
			snprintf(out, cap, "%s", x ? "true" : "false");
	}
}

/* One KeyValue: its key and its value's bytes. */
static int pb_keyvalue(struct pb kv, struct pb *key, struct pb *val)
{
	struct pb sub;
	uint32_t num;
	uint64_t x;
	int r;

	key->p = key->end = NULL;
	val->p = val->end = NULL;
	while ((r = pb_next(&kv, &num, &sub, &x)) > 0) {
		if (num == 1 && r == 2)
			*key = sub;
		else if (num == 2 && r == 2)
			*val = sub;
	}
	return r;
}

static bool key_is(const struct pb *k, const char *s)
{
	return k->p && (size_t)(k->end - k->p) == strlen(s) && memcmp(k->p, s, strlen(s)) == 0;
}

static bool pb_bytes(const struct pb *s, uint8_t *out, size_t n)
{
	if ((size_t)(s->end - s->p) != n)
		return false;
	memcpy(out, s->p, n);
	return true;
}

static int pb_span(struct dec *d, struct pb b)
{
	struct rp_otlp_span sp = { 0 };
	struct pb sub, k, v;
	enum wk best = WK_NONE, w;
	uint32_t num;
	uint64_t x;
	bool ok = true;
	int r;

	while ((r = pb_next(&b, &num, &sub, &x)) > 0) {
		switch (num) {
		case 1: ok &= r == 2 && pb_bytes(&sub, sp.trace, 16); break;
		case 2: ok &= r == 2 && pb_bytes(&sub, sp.id, 8); break;
		case 4:
			if (r == 2 && sub.p == sub.end)
				break;
			ok &= r == 2 && pb_bytes(&sub, sp.parent, 8);
			sp.has_parent = !all_zero(sp.parent, 8);
			break;
		case 5:
			if (r == 2)
				sp.name = (struct rp_otlp_str){ (const char *)sub.p,
								(size_t)(sub.end - sub.p) };
			break;
		case 6: sp.kind = r == 1 && x < 6 ? (uint32_t)x : 0; break;
		case 7: sp.start = r == 1 ? x : 0; break;
		case 8: sp.end = r == 1 ? x : 0; break;
		case 9:
			if (r != 2 || pb_keyvalue(sub, &k, &v) < 0)
				return fail(d, "malformed span attribute");
			w = k.p ? well_known(d, (const char *)k.p, (size_t)(k.end - k.p)) : WK_NONE;
			if (w > best) {
				best = w;
				if (w == WK_ATTR)
					pb_anyvalue_text(v, d->cat, sizeof(d->cat));
			}
			break;
		case 15:
			while (r == 2 && (r = pb_next(&sub, &num, &k, &x)) > 0)
				if (num == 3 && r == 1)
					sp.error = x == 2;
			if (r < 0)
				return fail(d, "malformed span status");
			r = 1;
			break;
		}
	}
	if (r < 0)
		return fail(d, "malformed span");
	sp.category = category(d, best, sp.kind);
	if (!ok)
		sp.end = 0, sp.start = 1; /* rejected by deliver(): end before start */
	deliver(d, &sp);
	return 0;
}

static int pb_resource(struct dec *d, struct pb b)
{
	static char service[RP_OTLP_STR_MAX];
	struct pb sub, k, v;
	uint32_t num;
	uint64_t x;
	int r;

	while ((r = pb_next(&b, &num, &sub, &x)) > 0) {
		if (num != 1 || r != 2)
			continue;
		if (pb_keyvalue(sub, &k, &v) < 0)
			return fail(d, "malformed resource attribute");
		if (key_is(&k, "service.name")) {
			(void)service;
			struct pb vv = v, s;
			while ((r = pb_next(&vv, &num, &s, &x)) > 0)
				if (num == 1 && r == 2)
					d->service = (struct rp_otlp_str){ (const char *)s.p,
									   (size_t)(s.end - s.p) };
		} else if (key_is(&k, "process.pid")) {
			struct pb vv = v, s;
			while ((r = pb_next(&vv, &num, &s, &x)) > 0)
				if (num == 3 && r == 1)
					d->pid = (int64_t)x;
		}
	}
	return r < 0 ? fail(d, "malformed resource") : 0;
}

static int pb_resource_spans(struct dec *d, struct pb b)
{
	struct pb sub, s2, again = b;
	uint32_t num, n2;
	uint64_t x;
	int r, r2, err;

	d->service = (struct rp_otlp_str){ "unknown_service", 15 };
	d->pid = 0;
	/* The resource first, wherever it is: its spans need its service. */
	while ((r = pb_next(&b, &num, &sub, &x)) > 0)
		if (num == 1 && r == 2 && (err = pb_resource(d, sub)) != 0)
			return err;
	if (r < 0)
		return fail(d, "malformed resource_spans");
	while ((r = pb_next(&again, &num, &sub, &x)) > 0) {
		if (num != 2 || r != 2)
			continue;
		while ((r2 = pb_next(&sub, &n2, &s2, &x)) > 0)
			if (n2 == 2 && r2 == 2 && (err = pb_span(d, s2)) != 0)
				return err;
		if (r2 < 0)
			return fail(d, "malformed scope_spans");
	}
	return 0;
}

static void dec_init(struct dec *d, const struct rp_otlp_decode_opts *o, rp_otlp_span_fn fn,
		     void *ctx, struct rp_otlp_decode_stats *st, char *why)
{
	*d = (struct dec){ .o = o, .fn = fn, .ctx = ctx, .st = st, .why = why };
	d->max_spans = o && o->max_spans ? o->max_spans : MAX_SPANS_DEFAULT;
	*st = (struct rp_otlp_decode_stats){ 0 };
	why[0] = '\0';
}

int rp_otlp_decode_pb(const void *buf, size_t len, const struct rp_otlp_decode_opts *o,
		      rp_otlp_span_fn fn, void *ctx, struct rp_otlp_decode_stats *st,
		      char why[RP_WHY_MAX])
{
	struct pb b = { buf, (const uint8_t *)buf + len }, sub;
	struct dec d;
	uint32_t num;
	uint64_t x;
	int r, err;

	dec_init(&d, o, fn, ctx, st, why);
	while ((r = pb_next(&b, &num, &sub, &x)) > 0)
		if (num == 1 && r == 2 && (err = pb_resource_spans(&d, sub)) != 0)
			return err;
	return r < 0 ? fail(&d, "malformed ExportTraceServiceRequest") : 0;
}

/* --- decoding: JSON (the protobuf JSON mapping OTLP specifies) --- */

static yajl_val jget(yajl_val obj, const char *key)
{
	if (!YAJL_IS_OBJECT(obj))
		return NULL;
	for (size_t i = 0; i < obj->u.object.len; i++)
		if (strcmp(obj->u.object.keys[i], key) == 0)
			return obj->u.object.values[i];
	return NULL;
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* A hex id of @n bytes; "" or absent: false with *@empty set. */
static bool jhex(yajl_val v, uint8_t *out, size_t n, bool *empty)
{
	const char *s = YAJL_IS_STRING(v) ? v->u.string : NULL;

	*empty = s == NULL || s[0] == '\0';
	if (*empty || strlen(s) != 2 * n)
		return false;
	for (size_t i = 0; i < n; i++) {
		int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return false;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return true;
}

/* An unsigned 64-bit integer: a decimal string (the mapping's) or a JSON integer. */
static bool ju64(yajl_val v, uint64_t *out)
{
	const char *s;
	uint64_t x = 0;

	if (YAJL_IS_INTEGER(v) && YAJL_GET_INTEGER(v) >= 0) {
		*out = (uint64_t)YAJL_GET_INTEGER(v);
		return true;
	}
	if (!YAJL_IS_STRING(v) || (s = v->u.string)[0] == '\0')
		return false;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || x > (UINT64_MAX - 9) / 10)
			return false;
		x = x * 10 + (uint64_t)(*s - '0');
	}
	*out = x;
	return true;
}

/* An enum: its number, or its name ending in one of @names' entries. */
static uint32_t jenum(yajl_val v, const char *const *names, uint32_t n)
{
	uint64_t x;

	if (ju64(v, &x))
		return x < n ? (uint32_t)x : 0;
	if (YAJL_IS_STRING(v))
		for (uint32_t i = 0; i < n; i++) {
			size_t a = strlen(v->u.string), b = strlen(names[i]);
			if (a >= b && strcmp(v->u.string + a - b, names[i]) == 0)
				return i;
		}
	return 0;
}

static void janyvalue_text(yajl_val v, char *out, size_t cap)
{
	yajl_val x;

	out[0] = '\0';
	if ((x = jget(v, "stringValue")) && YAJL_IS_STRING(x))
		snprintf(out, cap, "%s", x->u.string);
	else if ((x = jget(v, "intValue")) && (YAJL_IS_STRING(x) || YAJL_IS_INTEGER(x)))
		YAJL_IS_STRING(x) ? snprintf(out, cap, "%s", x->u.string)
				  : snprintf(out, cap, "%lld", YAJL_GET_INTEGER(x));
	else if ((x = jget(v, "boolValue")))
		snprintf(out, cap, "%s", YAJL_IS_TRUE(x) ? "true" : "false");
}

static struct rp_otlp_str jstr(yajl_val v)
{
	return YAJL_IS_STRING(v) ? (struct rp_otlp_str){ v->u.string, strlen(v->u.string) }
				 : (struct rp_otlp_str){ "", 0 };
}

static const char *const kind_names[] = { "UNSPECIFIED", "INTERNAL", "SERVER",
					  "CLIENT",	 "PRODUCER", "CONSUMER" };
static const char *const code_names[] = { "UNSET", "OK", "ERROR" };

static void json_span(struct dec *d, yajl_val s)
{
	struct rp_otlp_span sp = { 0 };
	yajl_val a = jget(s, "attributes"), st = jget(s, "status");
	enum wk best = WK_NONE, w;
	bool ok = true, empty;

	ok &= jhex(jget(s, "traceId"), sp.trace, 16, &empty);
	ok &= jhex(jget(s, "spanId"), sp.id, 8, &empty);
	sp.has_parent = jhex(jget(s, "parentSpanId"), sp.parent, 8, &empty);
	ok &= sp.has_parent || empty;
	sp.has_parent = sp.has_parent && !all_zero(sp.parent, 8);
	sp.name = jstr(jget(s, "name"));
	sp.kind = jenum(jget(s, "kind"), kind_names, 6);
	ok &= ju64(jget(s, "startTimeUnixNano"), &sp.start);
	ok &= ju64(jget(s, "endTimeUnixNano"), &sp.end);
	sp.error = st && jenum(jget(st, "code"), code_names, 3) == 2;
	for (size_t i = 0; YAJL_IS_ARRAY(a) && i < a->u.array.len; i++) {
		yajl_val k = jget(a->u.array.values[i], "key");

		if (!YAJL_IS_STRING(k))
			continue;
		w = well_known(d, k->u.string, strlen(k->u.string));
		if (w > best) {
			best = w;
			if (w == WK_ATTR)
				janyvalue_text(jget(a->u.array.values[i], "value"), d->cat,
					       sizeof(d->cat));
		}
	}
	sp.category = category(d, best, sp.kind);
	if (!ok)
		sp.end = 0, sp.start = 1;
	deliver(d, &sp);
}

static void json_resource(struct dec *d, yajl_val res)
{
	yajl_val a = jget(res, "attributes");

	d->service = (struct rp_otlp_str){ "unknown_service", 15 };
	d->pid = 0;
	for (size_t i = 0; YAJL_IS_ARRAY(a) && i < a->u.array.len; i++) {
		yajl_val kv = a->u.array.values[i], k = jget(kv, "key"), v = jget(kv, "value");
		yajl_val x;
		uint64_t pid;

		if (!YAJL_IS_STRING(k))
			continue;
		if (strcmp(k->u.string, "service.name") == 0 &&
		    YAJL_IS_STRING(x = jget(v, "stringValue")))
			d->service = jstr(x);
		else if (strcmp(k->u.string, "process.pid") == 0 &&
			 ju64(jget(v, "intValue"), &pid) && pid <= INT32_MAX)
			d->pid = (int64_t)pid;
	}
}

/* Nesting deeper than JSON_DEPTH_MAX is refused before yajl builds (and frees,
 * recursively) a tree of it. */
static bool json_shallow(const char *s, size_t n)
{
	int depth = 0;
	bool str = false;

	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (str) {
			if (c == '\\')
				i++;
			else if (c == '"')
				str = false;
		} else if (c == '"') {
			str = true;
		} else if (c == '[' || c == '{') {
			if (++depth > JSON_DEPTH_MAX)
				return false;
		} else if (c == ']' || c == '}') {
			depth--;
		}
	}
	return true;
}

int rp_otlp_decode_json(const void *buf, size_t len, const struct rp_otlp_decode_opts *o,
			rp_otlp_span_fn fn, void *ctx, struct rp_otlp_decode_stats *st,
			char why[RP_WHY_MAX])
{
	char err[128], *text;
	yajl_val root, rs;
	struct dec d;

	dec_init(&d, o, fn, ctx, st, why);
	if (memchr(buf, '\0', len) != NULL)
		return fail(&d, "NUL byte in the JSON");
	if (!json_shallow(buf, len))
		return fail(&d, "JSON nested too deep");
	text = malloc(len + 1);
	if (text == NULL)
		return -ENOMEM;
	memcpy(text, buf, len);
	text[len] = '\0';
	root = yajl_tree_parse(text, err, sizeof(err));
	free(text);
	if (root == NULL) {
		char *nl = strchr(err, '\n');
		if (nl)
			*nl = '\0';
		snprintf(why, RP_WHY_MAX, "malformed JSON: %s", err);
		return -EINVAL;
	}
	rs = jget(root, "resourceSpans");
	if (!YAJL_IS_OBJECT(root) || (rs != NULL && !YAJL_IS_ARRAY(rs))) {
		yajl_tree_free(root);
		return fail(&d, "not an ExportTraceServiceRequest");
	}
	for (size_t i = 0; rs && i < rs->u.array.len; i++) {
		yajl_val r = rs->u.array.values[i], ss = jget(r, "scopeSpans");

		json_resource(&d, jget(r, "resource"));
		for (size_t j = 0; YAJL_IS_ARRAY(ss) && j < ss->u.array.len; j++) {
			yajl_val spans = jget(ss->u.array.values[j], "spans");

			for (size_t k = 0; YAJL_IS_ARRAY(spans) && k < spans->u.array.len; k++)
				json_span(&d, spans->u.array.values[k]);
		}
	}
	yajl_tree_free(root);
	return 0;
}

/* --- the receiver --- */

/* A span held for the horizon, then open in the engine. */
struct pspan {
	uint8_t trace[16];
	uint64_t id, parent;
	uint64_t start, end; /* engine time */
	uint64_t track;	     /* once begun */
	uint32_t name, src, small;
	bool has_parent, root, error;
	uint32_t next_free;
};

/* A record due: BEGIN or END of span slot @span. */
struct hev {
	uint64_t ts;
	uint32_t span;
	uint32_t end;
};

/* A trace with spans open in the engine: one tree track. */
struct trace {
	uint8_t trace[16];
	uint32_t src;
	uint64_t track;
	uint32_t next_small, open;
	uint32_t cap, n; /* the id map: open addressing, cap a power of two */
	struct idmap {
		uint64_t id; /* 0: free (span id 0 is invalid) */
		uint32_t small;
	} * ids;
};

struct osrc {
	char name[RP_OTLP_STR_MAX + 8];
	int64_t pid;
	uint32_t src;
};

struct rp_otlp {
	struct rp_engine *e;
	struct rp_otlp_cfg cfg;
	struct rp_otlp_stats st;
	struct pspan *spans;
	uint32_t free_head;
	struct hev *heap;
	size_t n_heap, heap_cap;
	struct trace **traces; /* open addressing by (src, trace id), cap a power of two */
	uint32_t traces_cap;
	struct osrc *srcs;
	uint32_t n_srcs;
	uint64_t upto; /* records up to this were fed */
	uint64_t next_track;
	uint64_t t_last;
	uint32_t file_flags; /* RP_SRC_FILE for files */
	struct hev *group;   /* the records of one timestamp */
	size_t group_cap;
};

static uint64_t be64(const uint8_t *p)
{
	uint64_t x = 0;

	for (int i = 0; i < 8; i++)
		x = x << 8 | p[i];
	return x;
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

int rp_otlp_open(struct rp_engine *e, const struct rp_otlp_cfg *cfg, struct rp_otlp **out)
{
	struct rp_otlp *o = calloc(1, sizeof(*o));
	uint32_t cap = 2;

	*out = NULL;
	if (o == NULL)
		return -ENOMEM;
	o->e = e;
	if (cfg)
		o->cfg = *cfg;
	if (!o->cfg.horizon_ns)
		o->cfg.horizon_ns = HORIZON_DEFAULT_NS;
	if (!o->cfg.max_pending)
		o->cfg.max_pending = PENDING_DEFAULT;
	if (!o->cfg.max_traces)
		o->cfg.max_traces = TRACES_DEFAULT;
	if (!o->cfg.max_sources)
		o->cfg.max_sources = SOURCES_DEFAULT;
	while (cap < 2 * (uint64_t)o->cfg.max_traces)
		cap *= 2;
	o->traces_cap = cap;
	o->traces = calloc(cap, sizeof(*o->traces));
	o->srcs = calloc(o->cfg.max_sources, sizeof(*o->srcs));
	o->free_head = UINT32_MAX;
	o->next_track = 1;
	if (o->traces == NULL || o->srcs == NULL) {
		rp_otlp_close(o);
		return -ENOMEM;
	}
	*out = o;
	return 0;
}

static void trace_free(struct trace *t)
{
	if (t) {
		free(t->ids);
		free(t);
	}
}

void rp_otlp_close(struct rp_otlp *o)
{
	if (o == NULL)
		return;
	for (uint32_t i = 0; o->traces && i < o->traces_cap; i++)
		trace_free(o->traces[i]);
	free(o->traces);
	free(o->srcs);
	free(o->spans);
	free(o->heap);
	free(o->group);
	free(o);
}

uint64_t rp_otlp_horizon_ns(const struct rp_otlp *o)
{
	return o->cfg.horizon_ns;
}

void rp_otlp_stats(const struct rp_otlp *o, struct rp_otlp_stats *out)
{
	*out = o->st;
}

/* The engine source of (service, pid), registered on first sight. */
static int source_of(struct rp_otlp *o, const struct rp_otlp_span *sp, uint32_t *src)
{
	char name[sizeof(o->srcs[0].name)];
	size_t n = sp->service.n;
	int r;

	if (n > RP_OTLP_STR_MAX) {
		n = RP_OTLP_STR_MAX;
		o->st.cut++;
	}
	snprintf(name, sizeof(name), "otlp:%.*s", (int)n, sp->service.p);
	for (uint32_t i = 0; i < o->n_srcs; i++)
		if (o->srcs[i].pid == sp->pid && strcmp(o->srcs[i].name, name) == 0) {
			*src = o->srcs[i].src;
			return 0;
		}
	if (o->n_srcs == o->cfg.max_sources ||
	    (r = rp_engine_add_source(o->e, name, (int32_t)sp->pid, o->file_flags)) < 0) {
		o->st.sources_capped++;
		return -ENOSPC;
	}
	o->srcs[o->n_srcs] = (struct osrc){ .pid = sp->pid, .src = (uint32_t)r };
	memcpy(o->srcs[o->n_srcs++].name, name, sizeof(name));
	*src = (uint32_t)r;
	return 0;
}

/* A NUL-terminated copy of @s, cut to RP_OTLP_STR_MAX (counted). */
static void cstr(struct rp_otlp *o, struct rp_otlp_str s, char out[RP_OTLP_STR_MAX + 1])
{
	size_t n = s.n;

	if (n > RP_OTLP_STR_MAX) {
		n = RP_OTLP_STR_MAX;
		o->st.cut++;
	}
	if (n > 0) /* a span without a name has no pointer */
		memcpy(out, s.p, n);
	out[n] = '\0';
	/* a NUL inside would cut the name silently: make it visible */
	for (size_t i = 0; i < n; i++)
		if (out[i] == '\0')
			out[i] = '?';
}

/* Room for two more records (a span's), so that a span is pushed whole or not at all. */
static bool heap_grow(struct rp_otlp *o)
{
	size_t cap = o->heap_cap ? 2 * o->heap_cap : 1024;
	struct hev *n = realloc(o->heap, cap * sizeof(*n));

	if (n == NULL)
		return false;
	o->heap = n;
	o->heap_cap = cap;
	return true;
}

static void heap_push(struct rp_otlp *o, struct hev h)
{
	size_t i = o->n_heap++;

	while (i > 0 && o->heap[(i - 1) / 2].ts > h.ts) {
		o->heap[i] = o->heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	o->heap[i] = h;
}

static struct hev heap_pop(struct rp_otlp *o)
{
	struct hev top = o->heap[0], last = o->heap[--o->n_heap];
	size_t i = 0, n = o->n_heap;

	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= n)
			break;
		if (c + 1 < n && o->heap[c + 1].ts < o->heap[c].ts)
			c++;
		if (o->heap[c].ts >= last.ts)
			break;
		o->heap[i] = o->heap[c];
		i = c;
	}
	if (n > 0)
		o->heap[i] = last;
	return top;
}

/* A free span slot, or UINT32_MAX at max_pending. */
static uint32_t span_slot(struct rp_otlp *o)
{
	uint32_t i;

	if (o->free_head != UINT32_MAX) {
		i = o->free_head;
		o->free_head = o->spans[i].next_free;
		return i;
	}
	if (o->st.pending >= o->cfg.max_pending)
		return UINT32_MAX;
	i = o->st.pending; /* no free slot: every slot below is in use */
	if ((i & 1023) == 0) {
		struct pspan *n = realloc(o->spans, ((size_t)i + 1024) * sizeof(*n));
		if (n == NULL)
			return UINT32_MAX;
		o->spans = n;
	}
	return i;
}

int rp_otlp_add(void *ctx, const struct rp_otlp_span *sp)
{
	struct rp_otlp *o = ctx;
	char name[RP_OTLP_STR_MAX + 1], cat[RP_OTLP_STR_MAX + 1];
	uint64_t start, end;
	uint32_t src, i, id;

	if (sp->start <= (uint64_t)o->cfg.clock_offset ||
	    (o->cfg.clock_offset < 0 && sp->start > (uint64_t)INT64_MAX)) {
		o->st.bad++;
		return -EINVAL;
	}
	start = sp->start - (uint64_t)o->cfg.clock_offset;
	end = sp->end - (uint64_t)o->cfg.clock_offset;
	if (source_of(o, sp, &src) != 0)
		return -ENOSPC;
	if (start < o->upto) {
		o->st.late++;
		o->e->src[src].rep.late++;
		return 0; /* taken (the sender must not retry it), counted, not analysed */
	}
	i = span_slot(o);
	if (i == UINT32_MAX || (o->n_heap + 2 > o->heap_cap && !heap_grow(o))) {
		if (i != UINT32_MAX) {
			o->spans[i].next_free = o->free_head;
			o->free_head = i;
		}
		o->st.pending_capped++;
		return -ENOSPC;
	}
	cstr(o, sp->name, name);
	cstr(o, sp->category, cat);
	id = rp_engine_name(o->e, src, name, cat, "", 0);
	o->spans[i] = (struct pspan){ .id = be64(sp->id),
				      .parent = be64(sp->parent),
				      .start = start,
				      .end = end,
				      .name = id,
				      .src = src,
				      .has_parent = sp->has_parent,
				      .error = sp->error,
				      .root = !sp->has_parent || sp->kind == RP_OTLP_KIND_SERVER };
	memcpy(o->spans[i].trace, sp->trace, 16);
	heap_push(o, (struct hev){ start, i, 0 });
	heap_push(o, (struct hev){ end, i, 1 });
	o->st.pending++;
	o->st.spans++;
	return 0;
}

/* --- traces and their id maps --- */

static uint32_t trace_hash(uint32_t src, const uint8_t *trace)
{
	return (uint32_t)mix(be64(trace) ^ mix(be64(trace + 8) ^ src));
}

static struct trace **trace_find(struct rp_otlp *o, uint32_t src, const uint8_t *trace)
{
	uint32_t m = o->traces_cap - 1, i = trace_hash(src, trace) & m;

	for (; o->traces[i]; i = (i + 1) & m)
		if (o->traces[i]->src == src && memcmp(o->traces[i]->trace, trace, 16) == 0)
			break;
	return &o->traces[i];
}

/* Take the trace at @slot out (backward-shift deletion keeps probes whole). */
static void trace_del(struct rp_otlp *o, struct trace **slot)
{
	uint32_t m = o->traces_cap - 1, i = (uint32_t)(slot - o->traces), j = i;

	trace_free(o->traces[i]);
	o->traces[i] = NULL;
	o->st.traces--;
	for (;;) {
		uint32_t h;
		j = (j + 1) & m;
		if (o->traces[j] == NULL)
			return;
		h = trace_hash(o->traces[j]->src, o->traces[j]->trace) & m;
		/* can the entry at j move to i? (i lies cyclically in [h, j)) */
		if ((j > i && (h <= i || h > j)) || (j < i && h <= i && h > j)) {
			o->traces[i] = o->traces[j];
			o->traces[j] = NULL;
			i = j;
		}
	}
}

static bool ids_put(struct trace *t, uint64_t id, uint32_t small)
{
	uint32_t m, i;

	if (2 * (t->n + 1) > t->cap) {
		uint32_t ncap = t->cap ? 2 * t->cap : 16;
		struct idmap *n = calloc(ncap, sizeof(*n)), *old = t->ids;

		if (n == NULL)
			return false;
		t->ids = n;
		m = ncap - 1;
		for (uint32_t k = 0; k < t->cap; k++) {
			if (old[k].id == 0)
				continue;
			for (i = (uint32_t)mix(old[k].id) & m; n[i].id; i = (i + 1) & m)
				;
			n[i] = old[k];
		}
		free(old);
		t->cap = ncap;
	}
	m = t->cap - 1;
	for (i = (uint32_t)mix(id) & m; t->ids[i].id && t->ids[i].id != id; i = (i + 1) & m)
		;
	t->n += t->ids[i].id == 0;
	t->ids[i] = (struct idmap){ id, small };
	return true;
}

static uint32_t ids_get(const struct trace *t, uint64_t id)
{
	uint32_t m = t->cap - 1;

	if (t->cap == 0 || id == 0)
		return 0;
	for (uint32_t i = (uint32_t)mix(id) & m; t->ids[i].id; i = (i + 1) & m)
		if (t->ids[i].id == id)
			return t->ids[i].small;
	return 0;
}

/* --- feeding the engine --- */

static void span_begin(struct rp_otlp *o, struct pspan *s)
{
	struct trace **slot = trace_find(o, s->src, s->trace), *t = *slot;
	uint32_t parent = 0;
	struct rp_event ev = { .ts = s->start, .name = s->name, .kind = RP_EV_CHILD_BEGIN };

	if (t == NULL && o->st.traces < o->cfg.max_traces && (t = calloc(1, sizeof(*t))) != NULL) {
		memcpy(t->trace, s->trace, 16);
		t->src = s->src;
		t->track = o->next_track++;
		t->next_small = 1;
		*slot = t;
		o->st.traces++;
	}
	if (t == NULL) { /* a track of its own, as a root */
		o->st.traces_capped++;
		s->track = o->next_track++;
		s->small = 1;
	} else {
		if (!s->root)
			parent = ids_get(t, s->parent);
		s->track = t->track;
		s->small = t->next_small++;
		if (t->next_small == 0)
			t->next_small = 1;
		ids_put(t, s->id, s->small);
		t->open++;
	}
	ev.track = s->track;
	ev.arg = RP_CHILD_ARG(parent, s->small);
	if (s->start > o->t_last)
		o->t_last = s->start;
	rp_engine_event(o->e, s->src, 0, &ev);
}

static void span_end(struct rp_otlp *o, uint32_t i)
{
	struct pspan *s = &o->spans[i];
	struct trace **slot = trace_find(o, s->src, s->trace), *t = *slot;

	struct rp_event ev = { .ts = s->end,
			       .name = s->name,
			       .track = s->track,
			       .kind = RP_EV_CHILD_END,
			       .arg = s->small,
			       .flags = s->error ? RP_SPAN_ERROR : 0 };

	if (s->end > o->t_last)
		o->t_last = s->end;
	rp_engine_event(o->e, s->src, 0, &ev);
	o->st.released++;
	if (t != NULL && t->track == s->track && --t->open == 0)
		trace_del(o, slot);
	s->next_free = o->free_head;
	o->free_head = i;
	o->st.pending--;
}

/* Does record @a wait for record @b of the same timestamp? */
static bool waits(const struct rp_otlp *o, const struct hev *a, const struct hev *b)
{
	const struct pspan *x = &o->spans[a->span], *y = &o->spans[b->span];

	if (x->src != y->src || memcmp(x->trace, y->trace, 16) != 0)
		return false;
	if (a->end) /* an END waits for its children's */
		return y->has_parent && y->parent == x->id;
	return x->has_parent && x->parent == y->id; /* a BEGIN for its parent's */
}

/* Feed the records of one phase of one timestamp, in nesting order. */
static void feed_phase(struct rp_otlp *o, struct hev *g, size_t n)
{
	size_t left = n;

	while (left > 0) {
		size_t fed = 0;

		for (size_t i = 0; i < n; i++) {
			bool blocked = false;

			if (g[i].ts == UINT64_MAX) /* fed already */
				continue;
			for (size_t j = 0; n <= GROUP_ORDER_MAX && j < n && !blocked; j++)
				blocked = j != i && g[j].ts != UINT64_MAX && waits(o, &g[i], &g[j]);
			if (blocked)
				continue;
			if (g[i].end)
				span_end(o, g[i].span);
			else
				span_begin(o, &o->spans[g[i].span]);
			g[i].ts = UINT64_MAX;
			fed++;
		}
		if (fed == 0) { /* a cycle of ids: feed the rest as they are */
			for (size_t i = 0; i < n; i++)
				if (g[i].ts != UINT64_MAX) {
					if (g[i].end)
						span_end(o, g[i].span);
					else
						span_begin(o, &o->spans[g[i].span]);
					g[i].ts = UINT64_MAX;
					fed++;
				}
		}
		left -= fed;
	}
}

void rp_otlp_advance(struct rp_otlp *o, uint64_t upto)
{
	while (o->n_heap > 0 && o->heap[0].ts <= upto) {
		uint64_t t = o->heap[0].ts;
		size_t n = 0, a = 0, b, c;

		while (o->n_heap > 0 && o->heap[0].ts == t) {
			if (n == o->group_cap) {
				size_t cap = o->group_cap ? 2 * o->group_cap : 64;
				struct hev *g = realloc(o->group, cap * sizeof(*g));
				if (g == NULL)
					break; /* this timestamp's rest comes next round */
				o->group = g;
				o->group_cap = cap;
			}
			o->group[n++] = heap_pop(o);
		}
		/* ENDs of spans begun before t | BEGINs | ENDs of spans of no length */
		for (size_t i = 0; i < n; i++)
			if (o->group[i].end && o->spans[o->group[i].span].start < t) {
				struct hev x = o->group[a];
				o->group[a++] = o->group[i];
				o->group[i] = x;
			}
		b = a;
		for (size_t i = a; i < n; i++)
			if (!o->group[i].end) {
				struct hev x = o->group[b];
				o->group[b++] = o->group[i];
				o->group[i] = x;
			}
		c = n;
		/* the phases' records keep their own ts for feed_phase's marks */
		feed_phase(o, o->group, a);
		feed_phase(o, o->group + a, b - a);
		feed_phase(o, o->group + b, c - b);
	}
	if (upto > o->upto)
		o->upto = upto;
}

void rp_otlp_finish(struct rp_otlp *o)
{
	rp_otlp_advance(o, UINT64_MAX);
	for (uint32_t i = 0; i < o->n_srcs; i++) {
		rp_engine_close_source(o->e, o->srcs[i].src, o->t_last, RP_ANOM_OPEN_AT_END);
		rp_engine_finish_source(o->e, o->srcs[i].src);
	}
}

/* --- files: the Collector's file exporter --- */

int rp_otlp_detect(const char *path)
{
	gzFile gz = gzopen(path, "rb");
	char *buf;
	int n, hit;

	if (gz == NULL)
		return -errno ? -errno : -ENOMEM;
	buf = malloc(65537);
	if (buf == NULL) {
		gzclose(gz);
		return -ENOMEM;
	}
	n = gzread(gz, buf, 65536);
	gzclose(gz);
	if (n < 0) {
		free(buf);
		return -EIO;
	}
	buf[n] = '\0';
	for (int i = 0; i < n; i++)
		if (buf[i] == '\0')
			buf[i] = ' ';
	hit = strstr(buf, "\"resourceSpans\"") != NULL;
	free(buf);
	return hit;
}

int rp_otlp_import_file(struct rp_engine *e, const char *path, const char *category_attr,
			struct rp_otlp_stats *st, char why[RP_WHY_MAX])
{
	struct rp_otlp_decode_opts dopt = { .category_attr = category_attr,
					    .max_spans = UINT32_MAX };
	struct rp_otlp_cfg cfg = { .max_pending = UINT32_MAX };
	struct rp_otlp_decode_stats ds;
	struct rp_otlp *o;
	gzFile gz = gzopen(path, "rb");
	char *line = NULL, w2[RP_WHY_MAX];
	size_t cap = 0, len = 0;
	uint64_t lineno = 0;
	int err = 0, c;

	why[0] = '\0';
	if (gz == NULL) {
		err = errno ? -errno : -ENOMEM;
		snprintf(why, RP_WHY_MAX, "%.100s: %s", path, strerror(-err));
		return err;
	}
	if ((err = rp_otlp_open(e, &cfg, &o)) != 0) {
		gzclose(gz);
		return err;
	}
	o->file_flags = RP_SRC_FILE;
	for (;;) {
		c = gzgetc(gz);
		if (c != '\n' && c != -1) {
			if (len + 1 >= cap) {
				char *n = realloc(line, cap ? 2 * cap : 65536);
				if (n == NULL) {
					err = -ENOMEM;
					break;
				}
				line = n;
				cap = cap ? 2 * cap : 65536;
			}
			line[len++] = (char)c;
			continue;
		}
		lineno++;
		size_t k = 0;
		while (k < len && (line[k] == ' ' || line[k] == '\t' || line[k] == '\r'))
			k++;
		if (k < len) {
			err = rp_otlp_decode_json(line, len, &dopt, rp_otlp_add, o, &ds, w2);
			o->st.bad += ds.rejected; /* bad ids or times: told as bad */
			if (err != 0) {
				snprintf(why, RP_WHY_MAX, "%.80s: line %" PRIu64 ": %.60s", path,
					 lineno, w2);
				break;
			}
		}
		len = 0;
		if (c == -1)
			break;
	}
	if (err == 0) {
		int ge;
		gzerror(gz, &ge);
		if (ge != Z_OK && ge != Z_STREAM_END) {
			err = -EIO;
			snprintf(why, RP_WHY_MAX, "%.100s: read error", path);
		}
	}
	gzclose(gz);
	free(line);
	rp_otlp_finish(o);
	if (st)
		rp_otlp_stats(o, st);
	rp_otlp_close(o);
	return err;
}
