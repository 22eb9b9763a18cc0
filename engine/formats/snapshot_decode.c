// SPDX-License-Identifier: MIT
/*
 * Snapshots, decoding: MessagePack into a struct rp_report, trusting nothing.
 *
 * msgpack-c allocates an array or map of the size its header claims before it
 * reads one element, so five bytes could ask for 100 GB; scan() therefore walks the
 * raw bytes first and checks that every value is complete, that nesting stays
 * within msgpack-c's own limit and that no container claims more elements than
 * there are bytes left (each element takes one at least). After that
 * msgpack_unpack_next() builds the object tree in one zone of O(input) size
 * (strings point into the input), and the schema tables (snapshot_schema.c) copy it
 * into the report, checking each value's type and range, then every index. Keys the
 * tables do not know are skipped at every level: that is how later minor versions
 * add fields; keys an older minor version did not have read as 0, "" or empty (a
 * 1.0 file has no 1.1 function fields and no "concurrency"). Errors name the path of
 * the offending value ("functions[3].calls").
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <msgpack.h>

#include "sketch.h"
#include "snapshot_schema.h"

#define DEPTH_MAX 32u	     /* open containers; msgpack-c's MSGPACK_EMBED_STACK_SIZE */
#define FILE_MAX  (1u << 30) /* rp_snapshot_read_file refuses larger files */
#define KEY_SHOWN 32u	     /* bytes of an input key quoted in an error */

static const struct where root_where;

static void put(char *why, size_t *pos, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void put(char *why, size_t *pos, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (*pos >= RP_WHY_MAX - 1)
		return;
	va_start(ap, fmt);
	n = vsnprintf(why + *pos, RP_WHY_MAX - *pos, fmt, ap);
	va_end(ap);
	if (n > 0)
		*pos += (size_t)n < RP_WHY_MAX - 1 - *pos ? (size_t)n : RP_WHY_MAX - 1 - *pos;
}

/* "<what> <path>: <strerror>"; a long path is cut with the rest (one line). */
int rp_snap_sys_fail(char *why, int err, const char *what, const char *path)
{
	size_t pos = 0;

	put(why, &pos, "%s %s: %s", what, path, strerror(-err));
	return err;
}

/* Input keys are quoted safely: printable ASCII, at most KEY_SHOWN bytes. */
static void put_key(char *why, size_t *pos, const char *k, uint32_t len)
{
	put(why, pos, "%s", *pos ? "." : "");
	for (uint32_t i = 0; i < len && i < KEY_SHOWN; i++)
		put(why, pos, "%c", k[i] >= 0x20 && k[i] < 0x7f ? k[i] : '?');
	if (len > KEY_SHOWN)
		put(why, pos, "...");
}

static void put_where(char *why, size_t *pos, const struct where *w)
{
	if (w == NULL)
		return;
	put_where(why, pos, w->up);
	if (w->key != NULL)
		put_key(why, pos, w->key, w->keylen);
	else if (w->has_index)
		put(why, pos, "[%" PRIu32 "]", w->index);
}

/* Sets @why to "<path>: <message>" and returns @err. */
static int fail(char *why, const struct where *w, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int fail(char *why, const struct where *w, int err, const char *fmt, ...)
{
	size_t pos = 0;
	va_list ap;

	why[0] = '\0';
	put_where(why, &pos, w);
	put(why, &pos, "%s: ", pos ? "" : "snapshot");
	va_start(ap, fmt);
	vsnprintf(why + pos, RP_WHY_MAX - pos, fmt, ap);
	va_end(ap);
	return err;
}

static struct where at_key(const struct where *up, const char *key)
{
	return (struct where){ .up = up, .key = key, .keylen = (uint32_t)strlen(key) };
}

static struct where at_index(const struct where *up, uint32_t i)
{
	return (struct where){ .up = up, .index = i, .has_index = true };
}

/* --- decoding, pass 1: the raw bytes -------------------------------------------- */

enum { ITEM_SCALAR, ITEM_STR, ITEM_ARRAY, ITEM_MAP };

struct item {
	uint8_t kind;
	size_t head;	/* bytes of the header */
	uint64_t skip;	/* bytes after it (scalars, strings, bin, ext) */
	uint32_t count; /* entries of an array or map */
};

/* Type bytes 0xc4..0xdf: a big-endian length of len_bytes follows, then, for
 * everything but containers, that length plus `fixed` bytes (ext's type byte,
 * the fixed-size numbers). 0xc1 is never used. */
static const struct {
	uint8_t kind, len_bytes, fixed;
} heads[0xe0 - 0xc4] = {
	[0x00] = { ITEM_SCALAR, 1, 0 },	 [0x01] = { ITEM_SCALAR, 2, 0 }, /* bin 8, 16 */
	[0x02] = { ITEM_SCALAR, 4, 0 },					 /* bin 32 */
	[0x03] = { ITEM_SCALAR, 1, 1 },	 [0x04] = { ITEM_SCALAR, 2, 1 }, /* ext 8, 16 */
	[0x05] = { ITEM_SCALAR, 4, 1 },					 /* ext 32 */
	[0x06] = { ITEM_SCALAR, 0, 4 },	 [0x07] = { ITEM_SCALAR, 0, 8 }, /* float 32, 64 */
	[0x08] = { ITEM_SCALAR, 0, 1 },	 [0x09] = { ITEM_SCALAR, 0, 2 }, /* uint 8, 16 */
	[0x0a] = { ITEM_SCALAR, 0, 4 },	 [0x0b] = { ITEM_SCALAR, 0, 8 }, /* uint 32, 64 */
	[0x0c] = { ITEM_SCALAR, 0, 1 },	 [0x0d] = { ITEM_SCALAR, 0, 2 }, /* int 8, 16 */
	[0x0e] = { ITEM_SCALAR, 0, 4 },	 [0x0f] = { ITEM_SCALAR, 0, 8 }, /* int 32, 64 */
	[0x10] = { ITEM_SCALAR, 0, 2 },	 [0x11] = { ITEM_SCALAR, 0, 3 }, /* fixext 1, 2 */
	[0x12] = { ITEM_SCALAR, 0, 5 },	 [0x13] = { ITEM_SCALAR, 0, 9 }, /* fixext 4, 8 */
	[0x14] = { ITEM_SCALAR, 0, 17 },				 /* fixext 16 */
	[0x15] = { ITEM_STR, 1, 0 },	 [0x16] = { ITEM_STR, 2, 0 },	 /* str 8, 16 */
	[0x17] = { ITEM_STR, 4, 0 },					 /* str 32 */
	[0x18] = { ITEM_ARRAY, 2, 0 },	 [0x19] = { ITEM_ARRAY, 4, 0 },	 /* array 16, 32 */
	[0x1a] = { ITEM_MAP, 2, 0 },	 [0x1b] = { ITEM_MAP, 4, 0 },	 /* map 16, 32 */
};

/* Reads the header at @p (@left > 0 bytes): 0, 1 if it is cut short, -1 if @p[0]
 * is 0xc1. */
static int item_head(const unsigned char *p, size_t left, struct item *it)
{
	unsigned b = p[0];
	uint32_t v = 0;

	*it = (struct item){ .kind = ITEM_SCALAR, .head = 1 };
	if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3)
		return 0;
	if (b <= 0x9f) {
		it->kind = b <= 0x8f ? ITEM_MAP : ITEM_ARRAY;
		it->count = b & 0x0f;
		return 0;
	}
	if (b <= 0xbf) {
		it->kind = ITEM_STR;
		it->skip = b & 0x1f;
		return 0;
	}
	if (b == 0xc1)
		return -1;
	it->kind = heads[b - 0xc4].kind;
	it->head = 1u + heads[b - 0xc4].len_bytes;
	if (it->head > left)
		return 1;
	for (size_t i = 1; i < it->head; i++)
		v = v << 8 | p[i];
	if (it->kind == ITEM_ARRAY || it->kind == ITEM_MAP)
		it->count = v;
	else
		it->skip = (uint64_t)v + heads[b - 0xc4].fixed;
	return 0;
}

/* An open container while scanning, and where its next element is. */
struct level {
	uint64_t n, i; /* elements (a map has two per entry), elements done */
	bool map;
	const char *key; /* the last map key read, if it was a string */
	uint32_t keylen;
	struct where w;
};

static void level_where(struct level *l)
{
	const struct where *up = l->w.up;

	if (!l->map)
		l->w = at_index(up, (uint32_t)l->i);
	else if (l->i % 2 == 0)
		l->w = (struct where){ .up = up }; /* a key: the map's own path */
	else
		l->w = (struct where){ .up = up,
				       .key = l->key ? l->key : "?",
				       .keylen = l->key ? l->keylen : 1 };
}

/* One value is done: move on, closing the containers it completes. */
static void level_done(struct level *st, uint32_t *d)
{
	st[*d].i++;
	while (*d > 0 && st[*d].i == st[*d].n) {
		(*d)--;
		st[*d].i++;
	}
}

static int scan_container(struct level *st, uint32_t *d, const struct item *it, size_t need,
			  size_t left, char *why)
{
	uint64_t n = it->kind == ITEM_MAP ? 2ull * it->count : it->count;
	const char *what = it->kind == ITEM_MAP ? "a map" : "an array";
	struct level *l;

	if (*d == DEPTH_MAX)
		return fail(why, &st[*d].w, -EINVAL, "nested deeper than %u containers", DEPTH_MAX);
	if (n > left || need > left - n)
		return fail(why, &st[*d].w, -EINVAL,
			    "%s of %" PRIu32 " entries cannot fit in the %zu bytes left", what,
			    it->count, left);
	if (n == 0)
		return 1;
	l = &st[++*d];
	*l = (struct level){ .n = n, .map = it->kind == ITEM_MAP };
	l->w.up = &st[*d - 1].w;
	return 0;
}

/*
 * Pass 1: @len bytes must hold exactly one complete MessagePack value, nested at
 * most DEPTH_MAX deep, in which no container claims more elements than bytes are
 * left; so msgpack-c, run next, allocates O(@len) and cannot fail for lack of
 * input. `need` counts the values announced but not yet started.
 */
static int scan(const unsigned char *p, size_t len, char *why)
{
	struct level st[DEPTH_MAX + 1] = { { .n = 1 } }; /* st[0]: the input, one value */
	uint32_t d = 0;
	size_t off = 0, need = 1;
	struct item it;
	int rc;

	while (need > 0) {
		struct level *l = &st[d];

		if (d > 0) /* st[0], the input itself, has no path */
			level_where(l);
		if (l->map && l->i % 2 == 0)
			l->key = NULL;
		if (off == len)
			return fail(why, &l->w, -EINVAL, "truncated: the input ends at byte %zu",
				    len);
		rc = item_head(p + off, len - off, &it);
		if (rc < 0)
			return fail(why, &l->w, -EINVAL,
				    "byte 0x%02x at offset %zu is not MessagePack", p[off], off);
		if (rc > 0 || it.skip > len - off - it.head)
			return fail(why, &l->w, -EINVAL, "truncated: the input ends at byte %zu",
				    len);
		need--;
		off += it.head;
		if (it.kind == ITEM_ARRAY || it.kind == ITEM_MAP) {
			rc = scan_container(st, &d, &it, need, len - off, why);
			if (rc < 0)
				return rc;
			need += it.kind == ITEM_MAP ? 2ull * it.count : it.count;
			if (rc == 0)
				continue;
		} else if (l->map && l->i % 2 == 0 && it.kind == ITEM_STR) {
			l->key = (const char *)p + off;
			l->keylen = (uint32_t)it.skip;
		}
		off += it.skip;
		level_done(st, &d);
	}
	if (off != len)
		return fail(why, &root_where, -EINVAL, "%zu bytes after the end of the snapshot",
			    len - off);
	return 0;
}

/* --- decoding, pass 2: the object tree into the report -------------------------- */

static const char *type_name(const msgpack_object *o)
{
	switch (o->type) {
	case MSGPACK_OBJECT_NIL: return "nil";
	case MSGPACK_OBJECT_BOOLEAN: return "a boolean";
	case MSGPACK_OBJECT_POSITIVE_INTEGER: return "an unsigned integer";
	case MSGPACK_OBJECT_NEGATIVE_INTEGER: return "a negative integer";
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64: return "a float";
	case MSGPACK_OBJECT_STR: return "a string";
	case MSGPACK_OBJECT_ARRAY: return "an array";
	case MSGPACK_OBJECT_MAP: return "a map";
	case MSGPACK_OBJECT_BIN: return "binary";
	default: return "an ext value";
	}
}

static bool key_is(const msgpack_object *k, const char *s, size_t len)
{
	return k->type == MSGPACK_OBJECT_STR && k->via.str.size == len &&
	       memcmp(k->via.str.ptr, s, len) == 0;
}

static int get_u64(const msgpack_object *o, const struct where *w, char *why, uint64_t *v)
{
	if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		return fail(why, w, -EINVAL, "expected an unsigned integer, got %s", type_name(o));
	*v = o->via.u64;
	return 0;
}

static int get_u32(const msgpack_object *o, const struct where *w, char *why, uint32_t *v)
{
	uint64_t u = 0;
	int err = get_u64(o, w, why, &u);

	if (err)
		return err;
	if (u > UINT32_MAX)
		return fail(why, w, -EINVAL, "%" PRIu64 " is out of range (max %" PRIu32 ")", u,
			    UINT32_MAX);
	*v = (uint32_t)u;
	return 0;
}

static int get_u8(const msgpack_object *o, const struct where *w, char *why, uint8_t *v)
{
	uint32_t u = 0;
	int err = get_u32(o, w, why, &u);

	if (err)
		return err;
	if (u > UINT8_MAX)
		return fail(why, w, -EINVAL, "%" PRIu32 " is out of range (max %u)", u, UINT8_MAX);
	*v = (uint8_t)u;
	return 0;
}

static int get_i32(const msgpack_object *o, const struct where *w, char *why, int32_t *v)
{
	if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 <= INT32_MAX)
		*v = (int32_t)o->via.u64;
	else if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER && o->via.i64 >= INT32_MIN)
		*v = (int32_t)o->via.i64;
	else if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER ||
		 o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
		return fail(why, w, -EINVAL, "out of the range of a 32-bit signed integer");
	else
		return fail(why, w, -EINVAL, "expected an integer, got %s", type_name(o));
	return 0;
}

/* An index, or nil / -1 for RP_NONE; RP_NONE itself is not a valid index. */
static int get_ref(const msgpack_object *o, const struct where *w, char *why, uint32_t *v)
{
	if (o->type == MSGPACK_OBJECT_NIL ||
	    (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER && o->via.i64 == -1)) {
		*v = RP_NONE;
		return 0;
	}
	if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		return fail(why, w, -EINVAL, "expected an index or nil, got %s", type_name(o));
	if (o->via.u64 >= RP_NONE)
		return fail(why, w, -EINVAL, "index %" PRIu64 " is out of range", o->via.u64);
	*v = (uint32_t)o->via.u64;
	return 0;
}

static int get_str(const msgpack_object *o, const struct where *w, char *why, char **v)
{
	size_t n;
	char *s;

	if (o->type != MSGPACK_OBJECT_STR)
		return fail(why, w, -EINVAL, "expected a string, got %s", type_name(o));
	n = rp_snap_cut_len(o->via.str.ptr, o->via.str.size);
	if (n > 0 && memchr(o->via.str.ptr, '\0', n) != NULL)
		return fail(why, w, -EINVAL, "string contains a NUL byte");
	s = malloc(n + 1);
	if (s == NULL)
		return fail(why, w, -ENOMEM, "out of memory for a string of %zu bytes", n);
	if (n > 0)
		memcpy(s, o->via.str.ptr, n);
	s[n] = '\0';
	*v = s;
	return 0;
}

/* Known kinds by name; names this reader does not know are skipped. */
static int get_anomalies(const msgpack_object *o, const struct where *w, char *why, uint64_t *a)
{
	uint32_t seen = 0;

	if (o->type != MSGPACK_OBJECT_MAP)
		return fail(why, w, -EINVAL, "expected a map, got %s", type_name(o));
	for (uint32_t i = 0; i < o->via.map.size; i++) {
		const msgpack_object_kv *kv = &o->via.map.ptr[i];

		for (unsigned k = 0; k < RP_ANOM_KIND_COUNT; k++) {
			const char *name = rp_anomaly_names[k];
			struct where in;
			int err;

			if (!key_is(&kv->key, name, strlen(name)))
				continue;
			in = at_key(w, name);
			if (seen & (1u << k))
				return fail(why, &in, -EINVAL, "duplicate key");
			seen |= 1u << k;
			err = get_u64(&kv->val, &in, why, &a[k]);
			if (err)
				return err;
			break;
		}
	}
	return 0;
}

static int get_i64(const msgpack_object *o, const struct where *w, char *why, int64_t *v)
{
	if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 <= INT64_MAX)
		*v = (int64_t)o->via.u64;
	else if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
		*v = o->via.i64;
	else if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
		return fail(why, w, -EINVAL, "out of the range of a 64-bit signed integer");
	else
		return fail(why, w, -EINVAL, "expected an integer, got %s", type_name(o));
	return 0;
}

/* A float of either width, or an integer (writers in other languages may write 0
 * for 0.0); NaN and infinities are refused: every double of the schema is finite. */
static int get_f64(const msgpack_object *o, const struct where *w, char *why, double *v,
		   bool inf_ok)
{
	switch (o->type) {
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64: *v = o->via.f64; break;
	case MSGPACK_OBJECT_POSITIVE_INTEGER: *v = (double)o->via.u64; break;
	case MSGPACK_OBJECT_NEGATIVE_INTEGER: *v = (double)o->via.i64; break;
	default: return fail(why, w, -EINVAL, "expected a float, got %s", type_name(o));
	}
	if (isnan(*v) || (!inf_ok && isinf(*v)))
		return fail(why, w, -EINVAL, "%g is not a finite number", *v);
	return 0;
}

static int decode_record(const msgpack_object *o, const struct table *t, void *base,
			 const struct where *w, char *why);

/* An F_ARR or F_U64S into @p (the pointer) and @base + f->aux (the count). */
static int decode_array(const msgpack_object *o, const struct field *f, void *base, char *p,
			const struct where *w, char *why)
{
	size_t size = f->type == F_U64S	  ? sizeof(uint64_t)
		      : f->type == F_STRS ? sizeof(char *)
					  : f->sub->size;
	uint32_t n;
	char *a;

	if (o->type != MSGPACK_OBJECT_ARRAY)
		return fail(why, w, -EINVAL, "expected an array, got %s", type_name(o));
	n = o->via.array.size;
	if (n == 0)
		return 0;
	/* n <= the input's length (scan), so this is O(input). */
	a = calloc(n, size);
	if (a == NULL)
		return fail(why, w, -ENOMEM, "out of memory for %" PRIu32 " elements", n);
	/* Attached first: the report frees it (and what its records hold) from now on. */
	*(char **)p = a;
	*(uint32_t *)((char *)base + f->aux) = n;
	for (uint32_t i = 0; i < n; i++) {
		struct where item = at_index(w, i);
		const msgpack_object *e = &o->via.array.ptr[i];
		int err = f->type == F_U64S ? get_u64(e, &item, why, (uint64_t *)a + i)
			  : f->type == F_STRS
				  ? get_str(e, &item, why, (char **)a + i)
				  : decode_record(e, f->sub, a + (size_t)i * size, &item, why);

		if (err)
			return err;
	}
	return 0;
}

static int decode_field(const struct field *f, const msgpack_object *o, void *base,
			const struct where *w, char *why)
{
	char *p = (char *)base + f->off;

	switch (f->type) {
	case F_U64: return get_u64(o, w, why, (uint64_t *)p);
	case F_U32: return get_u32(o, w, why, (uint32_t *)p);
	case F_I32: return get_i32(o, w, why, (int32_t *)p);
	case F_I64: return get_i64(o, w, why, (int64_t *)p);
	case F_F64: return get_f64(o, w, why, (double *)p, false);
	case F_SUM: return get_f64(o, w, why, (double *)p, true);
	case F_STR: return get_str(o, w, why, (char **)p);
	case F_REF: return get_ref(o, w, why, (uint32_t *)p);
	case F_ANOM: return get_anomalies(o, w, why, (uint64_t *)p);
	case F_REC: return decode_record(o, f->sub, p, w, why);
	case F_U8: return get_u8(o, w, why, (uint8_t *)p);
	case F_ARR:
	case F_U64S:
	case F_STRS: return decode_array(o, f, base, p, w, why);
	case F_SKETCH:
		if (o->type == MSGPACK_OBJECT_NIL)
			return 0; /* no sketch: alpha 0, all zero */
		return decode_record(o, f->sub, p, w, why);
	default: return 0; /* F_VER: read first, by check_version */
	}
}

/* The field @k names, trying @hint (the one after the last) first: writers that
 * follow the table order cost one comparison per key. -1 for a key not known. */
static int find_field(const struct table *t, const msgpack_object *k, uint32_t hint)
{
	if (k->type != MSGPACK_OBJECT_STR)
		return -1;
	if (hint < t->n && key_is(k, t->f[hint].key, t->f[hint].keylen))
		return (int)hint;
	for (uint32_t i = 0; i < t->n; i++)
		if (key_is(k, t->f[i].key, t->f[i].keylen))
			return (int)i;
	return -1;
}

/* Fields the map did not have: required ones are an error; strings become "" and
 * nested records get their own defaults, so a decoded report has no NULL string. */
static int finish_record(const struct table *t, void *base, uint32_t seen, const struct where *w,
			 char *why)
{
	for (uint32_t i = 0; i < t->n; i++) {
		const struct field *f = &t->f[i];
		char **s = (char **)((char *)base + f->off);
		int err;

		if (seen & (1u << i))
			continue;
		if (f->required)
			return fail(why, w, -EINVAL, "missing key \"%s\"", f->key);
		if (f->type == F_STR && (*s = strdup("")) == NULL)
			return fail(why, w, -ENOMEM, "out of memory");
		if (f->type == F_REC) {
			err = finish_record(f->sub, (char *)base + f->off, 0, w, why);
			if (err)
				return err;
		}
	}
	return 0;
}

static int decode_record(const msgpack_object *o, const struct table *t, void *base,
			 const struct where *w, char *why)
{
	uint32_t seen = 0, hint = 0;
	int err;

	assert(t->n <= 32);
	if (o->type != MSGPACK_OBJECT_MAP)
		return fail(why, w, -EINVAL, "expected a map, got %s", type_name(o));
	for (uint32_t i = 0; i < o->via.map.size; i++) {
		const msgpack_object_kv *kv = &o->via.map.ptr[i];
		int k = find_field(t, &kv->key, hint);
		struct where in;

		if (k < 0)
			continue; /* not ours: a later minor version's */
		in = at_key(w, t->f[k].key);
		if (seen & (1u << k))
			return fail(why, &in, -EINVAL, "duplicate key");
		seen |= 1u << k;
		hint = (uint32_t)k + 1;
		err = decode_field(&t->f[k], &kv->val, base, &in, why);
		if (err)
			return err;
	}
	err = finish_record(t, base, seen, w, why);
	if (!err && t->check != NULL)
		err = t->check(base, w, why);
	return err;
}

/* Before anything else: another major version may mean anything by the rest. */
static int check_version(const msgpack_object *o, struct rp_report *r, char *why)
{
	const msgpack_object *v = NULL;
	struct where w = at_key(&root_where, "version");
	int err;

	for (uint32_t i = 0; i < o->via.map.size && v == NULL; i++)
		if (key_is(&o->via.map.ptr[i].key, "version", 7))
			v = &o->via.map.ptr[i].val;
	if (v == NULL)
		return fail(why, &root_where, -EINVAL, "no \"version\" key");
	if (v->type != MSGPACK_OBJECT_ARRAY || v->via.array.size < 2)
		return fail(why, &w, -EINVAL, "expected [major, minor], got %s", type_name(v));
	err = get_u32(&v->via.array.ptr[0], &w, why, &r->version_major);
	if (!err)
		err = get_u32(&v->via.array.ptr[1], &w, why, &r->version_minor);
	if (err)
		return err;
	if (r->version_major != RP_REPORT_VERSION_MAJOR) {
		snprintf(why, RP_WHY_MAX,
			 "snapshot schema version %" PRIu32 ".%" PRIu32 "; this reader reads %u.x",
			 r->version_major, r->version_minor, RP_REPORT_VERSION_MAJOR);
		return -EPROTONOSUPPORT;
	}
	return 0;
}

/* An index into @n things (@what: "function", "source"), or nil where @nil_ok. */
static int check_index(uint32_t v, uint32_t n, const char *what, bool nil_ok, const struct where *w,
		       char *why)
{
	if (v == RP_NONE && !nil_ok)
		return fail(why, w, -EINVAL, "nil where a %s index is needed", what);
	if (v != RP_NONE && v >= n)
		return fail(why, w, -EINVAL, "%" PRIu32 " is not a %s index (%" PRIu32 " %ss)", v,
			    what, n, what);
	return 0;
}

/* A function index: < n_fns, or nil where @nil_ok. */
static int check_fn(uint32_t v, const struct rp_report *r, bool nil_ok, const struct where *w,
		    char *why)
{
	return check_index(v, r->n_fns, "function", nil_ok, w, why);
}

/* Every F_REF with a target (edges, windows, bottlenecks) in the record at @base and
 * below it, once the whole report is read: the sections may come in any order. */
static int check_refs(const struct table *t, const void *base, const struct rp_report *r,
		      const struct where *w, char *why)
{
	for (uint32_t i = 0; i < t->n; i++) {
		const struct field *f = &t->f[i];
		const char *p = (const char *)base + f->off;
		struct where in = at_key(w, f->key);
		int err = 0;

		if (f->type == F_REF && f->ref == REF_SRC_OR_NIL)
			err = check_index(*(const uint32_t *)p, r->n_sources, "source", true, &in,
					  why);
		else if (f->type == F_REF && f->ref == REF_SRC)
			err = check_index(*(const uint32_t *)p, r->n_sources, "source", false, &in,
					  why);
		else if (f->type == F_REF && f->ref == REF_RTRACK)
			err = check_index(*(const uint32_t *)p, r->recorder.n_tracks, "track",
					  false, &in, why);
		else if (f->type == F_REF && f->ref == REF_RNAME)
			err = check_index(*(const uint32_t *)p, r->recorder.n_names, "name", false,
					  &in, why);
		else if (f->type == F_REF && f->ref == REF_PHASE_OR_NIL)
			err = check_index(*(const uint32_t *)p,
					  r->device.n_phases_total < RP_NONE
						  ? (uint32_t)r->device.n_phases_total
						  : RP_NONE,
					  "phase", true, &in, why);
		else if (f->type == F_REF && f->ref != REF_NONE)
			err = check_fn(*(const uint32_t *)p, r, f->ref == REF_FN_OR_NIL, &in, why);
		else if (f->type == F_REC)
			err = check_refs(f->sub, p, r, &in, why);
		else if (f->type == F_ARR) {
			uint32_t n = *(const uint32_t *)((const char *)base + f->aux);
			const char *a = *(const char *const *)p;

			for (uint32_t j = 0; j < n && !err; j++) {
				struct where item = at_index(&in, j);

				err = check_refs(f->sub, a + (size_t)j * f->sub->size, r, &item,
						 why);
			}
		}
		if (err)
			return err;
	}
	return 0;
}

/* Sum of a run, or false if it overflows. */
static bool run_sum(const uint64_t *run, uint32_t n, uint64_t *sum)
{
	for (uint32_t i = 0; i < n; i++)
		if (__builtin_add_overflow(*sum, run[i], sum))
			return false;
	return true;
}

/* A run of @n buckets from @lo within the sketch's index range. */
static int check_run(const struct rp_sketch *s, int32_t lo, uint32_t n, const char *key,
		     const struct where *w, char *why)
{
	struct where in = at_key(w, key);
	int64_t hi = (int64_t)lo + n - 1;

	if (n > 0 && (lo < s->index_min || hi > s->index_max))
		return fail(why, &in, -EINVAL,
			    "buckets %" PRId32 "..%" PRId64 " are outside the index range %" PRId32
			    "..%" PRId32 " of alpha %g",
			    lo, hi, s->index_min, s->index_max, s->alpha);
	return 0;
}

/* A sketch is valid when it rebuilds: alpha in the sketch's range, the runs within
 * its index range, count = zero + the buckets, and what rp_sketch_set_summary()
 * checks (min <= max, the collapsed counts). alpha 0 is "no sketch": all zero. */
int rp_snap_check_sketch(void *base, const struct where *w, char *why)
{
	const struct rp_report_sketch *k = base;
	struct where alpha = at_key(w, "alpha"), count = at_key(w, "count");
	uint64_t sum = k->zero;
	struct rp_sketch s;
	int err;

	if (k->alpha == 0) {
		if (k->count || k->zero || k->dropped || k->collapsed_neg || k->collapsed_pos ||
		    k->n_pos || k->n_neg || k->min != 0 || k->max != 0 || k->sum != 0 ||
		    k->pos_lo || k->neg_lo)
			return fail(why, &alpha, -EINVAL,
				    "0 (no sketch), but the sketch holds data");
		return 0;
	}
	if (!(k->alpha >= RP_SKETCH_ALPHA_MIN && k->alpha <= RP_SKETCH_ALPHA_MAX))
		return fail(why, &alpha, -EINVAL, "%g is not in [%g, %g]", k->alpha,
			    RP_SKETCH_ALPHA_MIN, RP_SKETCH_ALPHA_MAX);
	if (rp_sketch_init(&s, k->alpha) != 0)
		return fail(why, &alpha, -EINVAL, "%g: no sketch of this accuracy", k->alpha);
	err = check_run(&s, k->neg_lo, k->n_neg, "neg", w, why);
	if (!err)
		err = check_run(&s, k->pos_lo, k->n_pos, "pos", w, why);
	if (!err && (!run_sum(k->neg, k->n_neg, &sum) || !run_sum(k->pos, k->n_pos, &sum)))
		err = fail(why, &count, -EINVAL, "the buckets hold more than 2^64 - 1 values");
	if (!err && sum != k->count)
		err = fail(why, &count, -EINVAL,
			   "%" PRIu64 ", but zero and the buckets hold %" PRIu64, k->count, sum);
	if (!err && (err = rp_report_sketch_to(k, &s)) != 0)
		err = err == -ENOMEM ? fail(why, w, err, "out of memory rebuilding the sketch")
				     : fail(why, w, -EINVAL,
					    "min, max, sum or the collapsed counts do not fit "
					    "the buckets");
	rp_sketch_fini(&s);
	return err;
}

/* @n kept of @total: a list cut at a cap never holds more than there were. */
static int check_kept(uint64_t n, uint64_t total, const char *key, const char *total_key,
		      const struct where *w, char *why)
{
	struct where in = at_key(w, key);

	if (n > total)
		return fail(why, &in, -EINVAL, "%" PRIu64 " entries, but %s is %" PRIu64, n,
			    total_key, total);
	return 0;
}

int rp_snap_check_step(void *base, const struct where *w, char *why)
{
	const struct rp_report_step_phase *p = base;
	struct where in = at_key(w, "min_ns");

	if (p->min_ns > p->max_ns)
		return fail(why, &in, -EINVAL, "%" PRIu64 " is above max_ns %" PRIu64, p->min_ns,
			    p->max_ns);
	return 0;
}

int rp_snap_check_rtrack(void *base, const struct where *w, char *why)
{
	const struct rp_report_rtrack *t = base;
	struct where in = at_key(w, "kind");

	if (t->kind != 1 && t->kind != 2)
		return fail(why, &in, -EINVAL, "%u is not a track kind (1 thread, 2 async)",
			    t->kind);
	return 0;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

/* The rings hold at most their caps, and every span seen was kept, listed or not,
 * or overwritten (wrapped): kept + unlisted + wrapped <= seen (= after one engine).
 * The sum saturates at 2^64 - 1, as the counts do when merged. */
int rp_snap_check_recorder(void *base, const struct where *w, char *why)
{
	const struct rp_report_recorder *c = base;
	uint64_t a = sat_add(sat_add(c->n_spans, c->unlisted), c->wrapped);
	uint64_t b = sat_add(c->n_samples, c->samples_wrapped);
	struct where seen = at_key(w, "spans_seen"), sseen = at_key(w, "samples_seen");
	int err;

	err = check_kept(c->n_spans, c->max_spans, "spans", "max_spans", w, why);
	if (!err)
		err = check_kept(c->n_samples, c->max_samples, "samples", "max_samples", w, why);
	if (err)
		return err;
	if (a > c->spans_seen)
		return fail(why, &seen, -EINVAL,
			    "%" PRIu64 ", but %" PRIu32 " spans listed, %" PRIu64
			    " unlisted and %" PRIu64 " wrapped",
			    c->spans_seen, c->n_spans, c->unlisted, c->wrapped);
	if (b > c->samples_seen)
		return fail(why, &sseen, -EINVAL,
			    "%" PRIu64 ", but %" PRIu32 " samples listed and %" PRIu64 " wrapped",
			    c->samples_seen, c->n_samples, c->samples_wrapped);
	return 0;
}

int rp_snap_check_interval(void *base, const struct where *w, char *why)
{
	const struct rp_report_dev_interval *v = base;
	struct where in = at_key(w, "end_ns");

	if (v->end_ns < v->start_ns)
		return fail(why, &in, -EINVAL, "%" PRIu64 " is before start_ns %" PRIu64, v->end_ns,
			    v->start_ns);
	return 0;
}

int rp_snap_check_device(void *base, const struct where *w, char *why)
{
	const struct rp_report_device *d = base;
	int err;

	err = check_kept(d->n_points, d->n_points_total, "points", "points_total", w, why);
	if (!err)
		err = check_kept(d->n_idle, d->n_idle_total, "idle", "idle_total", w, why);
	if (!err)
		err = check_kept(d->n_phases, d->n_phases_total, "phases", "phases_total", w, why);
	if (!err)
		err = check_kept(d->n_ranked, d->candidates, "ranked", "candidates", w, why);
	return err;
}

/* Node 0 is the root (nil parent; nil function, or any valid one); every other
 * node's parent comes before it, so walks from the root meet parents first and
 * no chain of parents can loop. */
static int check_cct(const struct rp_report *r, char *why)
{
	struct where sec = at_key(&root_where, "cct");

	for (uint32_t i = 0; i < r->n_nodes; i++) {
		const struct rp_report_node *n = &r->nodes[i];
		struct where item = at_index(&sec, i);
		struct where parent = at_key(&item, "parent"), fn = at_key(&item, "fn");

		if (i == 0 && n->parent != RP_NONE)
			return fail(why, &parent, -EINVAL,
				    "the root (node 0) must have a nil parent");
		if (i > 0 && n->parent == RP_NONE)
			return fail(why, &parent, -EINVAL, "nil, but only node 0 is a root");
		if (i > 0 && n->parent >= i)
			return fail(why, &parent, -EINVAL,
				    "%" PRIu32 " does not come before node %" PRIu32
				    " (parents come first)",
				    n->parent, i);
		if (check_fn(n->fn, r, i == 0, &fn, why) != 0)
			return -EINVAL;
	}
	return 0;
}

static int decode_root(const msgpack_object *o, struct rp_report *r, char *why)
{
	int err;

	if (o->type != MSGPACK_OBJECT_MAP)
		return fail(why, &root_where, -EINVAL, "expected a map at the top, got %s",
			    type_name(o));
	err = check_version(o, r, why);
	if (!err)
		err = decode_record(o, &rp_snap_top_table, r, &root_where, why);
	if (!err)
		err = check_refs(&rp_snap_top_table, r, r, &root_where, why);
	if (!err)
		err = check_cct(r, why);
	return err;
}

int rp_snapshot_decode(const void *buf, size_t len, struct rp_report *out, char why[RP_WHY_MAX])
{
	msgpack_unpacked u;
	msgpack_unpack_return rc;
	size_t off = 0;
	int err;

	assert(out != NULL && why != NULL && (buf != NULL || len == 0));
	memset(out, 0, sizeof(*out));
	why[0] = '\0';
	if (len == 0)
		return fail(why, &root_where, -EINVAL, "empty input");
	err = scan(buf, len, why);
	if (err)
		return err;
	msgpack_unpacked_init(&u);
	rc = msgpack_unpack_next(&u, buf, len, &off);
	if (rc == MSGPACK_UNPACK_SUCCESS && off == len)
		err = decode_root(&u.data, out, why);
	else if (rc == MSGPACK_UNPACK_NOMEM_ERROR)
		err = fail(why, &root_where, -ENOMEM, "out of memory unpacking %zu bytes", len);
	else /* scan() accepted it: msgpack-c and scan() disagree */
		err = fail(why, &root_where, -EINVAL, "msgpack-c refused the input (%d)", (int)rc);
	msgpack_unpacked_destroy(&u);
	return err;
}

/* Reads all of @fd (a file, or a pipe) into *@buf: at most FILE_MAX bytes. */
/*
 * A snapshot starts with a MessagePack map whose first key is a string. Anything
 * else is refused after the first read, with what it looks like, before the rest is
 * read (`ringprof report /dev/zero` used to hold 1 GiB before failing).
 * @return NULL if @p may be a snapshot, else why not.
 */
static const char *not_a_snapshot(const unsigned char *p, size_t n)
{
	size_t i = 0;

	while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r'))
		i++;
	if (i < n && (p[i] == '{' || p[i] == '['))
		return "it is JSON (a trace? use `ringprof analyze`), not a MessagePack snapshot";
	if (n == 0)
		return NULL; /* empty: the decoder says so */
	if ((p[0] & 0xf0) == 0x80 || p[0] == 0xde || p[0] == 0xdf) {
		i = (p[0] & 0xf0) == 0x80 ? 1 : p[0] == 0xde ? 3 : 5;
		if (n <= i || (p[i] & 0xe0) == 0xa0 || p[i] == 0xd9 || p[i] == 0xda ||
		    p[i] == 0xdb || p[0] == 0x80)
			return NULL;
	}
	return "it does not start like a snapshot (a MessagePack map with string keys)";
}

static int read_all(int fd, char **buf, size_t *len, const char **bad)
{
	struct stat st;
	size_t cap, n = 0;
	char *p, *q;

	if (fstat(fd, &st) != 0)
		return -errno;
	if (st.st_size > (off_t)FILE_MAX)
		return -EFBIG;
	/* +1: a file read whole still needs one more read() to see its end. */
	cap = S_ISREG(st.st_mode) ? (size_t)st.st_size + 1 : MEMBUF_MIN;
	p = malloc(cap);
	while (p != NULL) {
		ssize_t got;

		if (n == cap) {
			if (cap > FILE_MAX)
				break;
			cap = cap > FILE_MAX / 2 ? (size_t)FILE_MAX + 1 : 2 * cap;
			q = realloc(p, cap);
			if (q == NULL)
				break;
			p = q;
		}
		got = read(fd, p + n, cap - n);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			*buf = p;
			*len = n;
			return got == 0 ? 0 : -errno;
		}
		if (n == 0 && (*bad = not_a_snapshot((unsigned char *)p, (size_t)got)) != NULL) {
			free(p);
			return -EINVAL;
		}
		n += (size_t)got;
	}
	free(p);
	return n > FILE_MAX ? -EFBIG : -ENOMEM;
}

int rp_snapshot_read_file(const char *path, struct rp_report *out, char why[RP_WHY_MAX])
{
	const char *bad = NULL;
	char *buf = NULL;
	size_t len = 0, pos = 0;
	struct stat st;
	int fd, err;

	assert(path != NULL && out != NULL && why != NULL);
	memset(out, 0, sizeof(*out));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return rp_snap_sys_fail(why, -errno, "cannot open", path);
	if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		close(fd);
		return rp_snap_sys_fail(why, -EISDIR, "cannot read", path);
	}
	err = read_all(fd, &buf, &len, &bad);
	close(fd);
	if (bad != NULL) {
		put(why, &pos, "%s: not a snapshot: %s", path, bad);
		return -EINVAL;
	}
	if (err == -EFBIG)
		put(why, &pos, "%s: larger than %u MiB: not a snapshot this reader takes", path,
		    FILE_MAX >> 20);
	else if (err)
		rp_snap_sys_fail(why, err, "cannot read", path);
	else if ((err = rp_snapshot_decode(buf, len, out, why)) != 0) {
		char what[RP_WHY_MAX];

		memcpy(what, why, RP_WHY_MAX);
		put(why, &pos, "%s: %s", path, what); /* which file, then what is wrong */
	}
	free(buf);
	return err;
}
