// SPDX-License-Identifier: MIT
/*
 * Snapshots, encoding: a struct rp_report as MessagePack through msgpack-c's
 * packer, walking the schema tables (snapshot_schema.c), and the file writer.
 *
 * The packer's write callback gathers the small writes into ENC_BUF-sized chunks
 * for the caller's sink: a sink (memory, file, io_uring) sees few, large writes.
 * Keys come out in table order, so the same report always gives the same bytes.
 * Files are written to a temporary name, synced and renamed, so a reader never
 * sees half a snapshot.
 *
 * The flight recorder's spans (65,536 by default, most of a live snapshot), and the
 * records of other tables of integers only (CCT nodes, call edges), are packed
 * here byte by byte rather than through msgpack-c, the same bytes (test_snapshot's
 * reference writer checks them), and with a struct rp_snap_cache a chunk of spans
 * equal to the last report's is copied instead of packed again (snapshot.h).
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <msgpack.h>

#include "sketch.h"
#include "snapshot_schema.h"

#define ENC_BUF 16384u /* bytes gathered before each call of the sink */

/* --- encoding ------------------------------------------------------------------- */

struct enc {
	rp_sink_fn sink;
	void *ctx;
	struct rp_snap_cache *cache; /* NULL: none */
	int err;  /* the sink's first error; nothing is written after it */
	size_t n; /* bytes in buf */
	msgpack_packer pk;
	char buf[ENC_BUF];
};

static void enc_flush(struct enc *e)
{
	if (e->err == 0 && e->n > 0)
		e->err = e->sink(e->ctx, e->buf, e->n);
	e->n = 0;
}

/*
 * @len <= 32 bytes from @s to @d without a call to memcpy (most writes are a few
 * bytes: an integer, a key): two fixed-size moves that may overlap.
 */
static inline void copy_short(void *d, const void *s, size_t len)
{
	unsigned char *dp = d;
	const unsigned char *sp = s;
	uint64_t a, b, c, x;
	uint32_t u, v;
	uint16_t h, k;

	if (len > 16) {
		memcpy(&a, sp, 8);
		memcpy(&b, sp + 8, 8);
		memcpy(&c, sp + len - 16, 8);
		memcpy(&x, sp + len - 8, 8);
		memcpy(dp, &a, 8);
		memcpy(dp + 8, &b, 8);
		memcpy(dp + len - 16, &c, 8);
		memcpy(dp + len - 8, &x, 8);
	} else if (len >= 8) {
		memcpy(&a, sp, 8);
		memcpy(&b, sp + len - 8, 8);
		memcpy(dp, &a, 8);
		memcpy(dp + len - 8, &b, 8);
	} else if (len >= 4) {
		memcpy(&u, sp, 4);
		memcpy(&v, sp + len - 4, 4);
		memcpy(dp, &u, 4);
		memcpy(dp + len - 4, &v, 4);
	} else if (len >= 2) {
		memcpy(&h, sp, 2);
		memcpy(&k, sp + len - 2, 2);
		memcpy(dp, &h, 2);
		memcpy(dp + len - 2, &k, 2);
	} else if (len == 1) {
		*dp = *sp;
	}
}

/* msgpack-c's write callback. */
static int enc_write(void *data, const char *p, size_t len)
{
	struct enc *e = data;

	if (len <= 32 && len <= sizeof(e->buf) - e->n && e->err == 0) {
		copy_short(e->buf + e->n, p, len);
		e->n += len;
		return 0;
	}
	if (len > sizeof(e->buf) - e->n) {
		enc_flush(e);
		if (e->err == 0 && len > sizeof(e->buf))
			e->err = e->sink(e->ctx, p, len);
		if (e->err || len > sizeof(e->buf))
			return e->err;
	}
	if (len > 0 && e->err == 0) {
		memcpy(e->buf + e->n, p, len);
		e->n += len;
	}
	return e->err;
}

/* Room for @need bytes at the end of the buffer (flushed if it lacks it), or NULL
 * after an error of the sink: written directly, then counted in e->n. */
static unsigned char *enc_room(struct enc *e, size_t need)
{
	if (need > sizeof(e->buf) - e->n)
		enc_flush(e);
	return e->err == 0 ? (unsigned char *)e->buf + e->n : NULL;
}

/* A string: a fixstr (< 32 bytes, what msgpack-c writes for it) directly, else
 * through msgpack-c. */
static void pack_strn(struct enc *e, const char *k, size_t len)
{
	unsigned char *p;

	if (len < 32) {
		p = enc_room(e, 1 + len);
		if (p != NULL) {
			*p = (unsigned char)(0xa0 | len);
			copy_short(p + 1, k, len);
			e->n += 1 + len;
		}
		return;
	}
	msgpack_pack_str_with_body(&e->pk, k, len);
}

static void pack_key(struct enc *e, const char *k, size_t len)
{
	pack_strn(e, k, len);
}

/* A NULL string (a report built carelessly) is written as "". */
static void pack_str(struct enc *e, const char *s)
{
	size_t n = s ? rp_snap_cut_len(s, strnlen(s, STR_MAX + 1)) : 0;

	pack_strn(e, s ? s : "", n);
}

static unsigned char *put_uint(unsigned char *p, uint64_t v);

/* An unsigned integer in its smallest form, as msgpack-c's pack_uint32/64 write it. */
static void pack_uint(struct enc *e, uint64_t v)
{
	unsigned char *p = enc_room(e, 9);

	if (p != NULL)
		e->n += (size_t)(put_uint(p, v) - p);
}

/* A map header: a fixmap below 16 entries, as msgpack-c writes it. */
static void pack_map(struct enc *e, uint32_t n)
{
	unsigned char *p;

	if (n >= 16) {
		msgpack_pack_map(&e->pk, n);
		return;
	}
	p = enc_room(e, 1);
	if (p != NULL) {
		*p = (unsigned char)(0x80 | n);
		e->n++;
	}
}

/* Every kind, in enum order, zeros too: a reader sees the whole list. */
static void pack_anomalies(struct enc *e, const uint64_t *a)
{
	msgpack_pack_map(&e->pk, RP_ANOM_KIND_COUNT);
	for (unsigned k = 0; k < RP_ANOM_KIND_COUNT; k++) {
		pack_key(e, rp_anomaly_names[k], strlen(rp_anomaly_names[k]));
		msgpack_pack_uint64(&e->pk, a[k]);
	}
}

static void pack_record(struct enc *e, const struct table *t, const void *base);
static void pack_rspans(struct enc *e, const struct rp_report_rspan *s, uint32_t n,
			uint64_t seq0);

static size_t direct_max(const struct table *t);
static unsigned char *put_direct(unsigned char *p, const struct table *t, const void *base);

/* Records of a table direct_max() takes, packed straight into the buffer: the
 * bytes pack_record() would write (CCT nodes and edges, thousands a report). */
static void pack_direct(struct enc *e, const struct table *t, const char *a, uint32_t n,
			size_t max)
{
	for (uint32_t i = 0; i < n; i++) {
		unsigned char *q = enc_room(e, max);

		if (q == NULL)
			return;
		e->n += (size_t)(put_direct(q, t, a + (size_t)i * t->size) - q);
	}
}

/* An F_ARR or F_U64S: the array at @p, its count at @base + f->aux. */
static void pack_array(struct enc *e, const struct field *f, const void *base, const char *p)
{
	size_t max;

	uint32_t n = *(const uint32_t *)((const char *)base + f->aux);
	const char *a = *(const char *const *)p;

	assert(a != NULL || n == 0);
	msgpack_pack_array(&e->pk, n);
	if (f->type == F_ARR && f->sub == rp_snap_rspan_table) {
		/* span i of the report is the recorder's span wrapped + i (when none
		 * was left out: unlisted); only the cache's hit rate depends on it */
		pack_rspans(e, (const struct rp_report_rspan *)a, n,
			    ((const struct rp_report_recorder *)base)->wrapped);
		return;
	}
	if (f->type == F_ARR && n > 0 && (max = direct_max(f->sub)) > 0) {
		pack_direct(e, f->sub, a, n, max);
		return;
	}
	for (uint32_t i = 0; i < n && e->err == 0; i++) {
		if (f->type == F_U64S)
			pack_uint(e, ((const uint64_t *)a)[i]);
		else if (f->type == F_STRS)
			pack_str(e, ((char *const *)a)[i]);
		else
			pack_record(e, f->sub, a + (size_t)i * f->sub->size);
	}
}

static void pack_field(struct enc *e, const struct field *f, const void *base)
{
	const char *p = (const char *)base + f->off;
	uint32_t ref;

	switch (f->type) {
	case F_U64: pack_uint(e, *(const uint64_t *)p); break;
	case F_U32: pack_uint(e, *(const uint32_t *)p); break;
	case F_I32: msgpack_pack_int32(&e->pk, *(const int32_t *)p); break;
	case F_U8: msgpack_pack_uint8(&e->pk, *(const uint8_t *)p); break;
	case F_I64: msgpack_pack_int64(&e->pk, *(const int64_t *)p); break;
	case F_F64:
	case F_SUM: msgpack_pack_double(&e->pk, *(const double *)p); break;
	case F_STR: pack_str(e, *(char *const *)p); break;
	case F_REF:
		ref = *(const uint32_t *)p;
		if (ref == RP_NONE)
			msgpack_pack_nil(&e->pk);
		else
			pack_uint(e, ref);
		break;
	case F_ANOM: pack_anomalies(e, (const uint64_t *)p); break;
	case F_REC: pack_record(e, f->sub, p); break;
	case F_ARR:
	case F_U64S:
	case F_STRS: pack_array(e, f, base, p); break;
	case F_SKETCH:
		if (((const struct rp_report_sketch *)p)->alpha == 0)
			msgpack_pack_nil(&e->pk); /* no sketch */
		else
			pack_record(e, f->sub, p);
		break;
	case F_VER:
		msgpack_pack_array(&e->pk, 2);
		msgpack_pack_uint32(&e->pk, RP_REPORT_VERSION_MAJOR);
		msgpack_pack_uint32(&e->pk, RP_REPORT_VERSION_MINOR);
		break;
	}
}

static void pack_record(struct enc *e, const struct table *t, const void *base)
{
	pack_map(e, t->n);
	for (uint32_t i = 0; i < t->n; i++) {
		pack_key(e, t->f[i].key, t->f[i].keylen);
		pack_field(e, &t->f[i], base);
	}
}

int rp_snapshot_encode(const struct rp_report *r, rp_sink_fn sink, void *ctx)
{
	return rp_snapshot_encode_cached(r, NULL, sink, ctx);
}

int rp_snapshot_encode_cached(const struct rp_report *r, struct rp_snap_cache *c,
			      rp_sink_fn sink, void *ctx)
{
	struct enc *e;
	int err;

	assert(r != NULL && sink != NULL);
	/* ~16 KiB: off the stack, which may be a small thread's. */
	e = malloc(sizeof(*e));
	if (e == NULL)
		return -ENOMEM;
	e->sink = sink;
	e->ctx = ctx;
	e->cache = c;
	e->err = 0;
	e->n = 0;
	msgpack_packer_init(&e->pk, e, enc_write);
	pack_record(e, &rp_snap_top_table, r);
	enc_flush(e);
	err = e->err;
	free(e);
	return err;
}

/* --- the recorder's spans -------------------------------------------------------- */

/*
 * MessagePack written directly: what msgpack-c writes for the same calls (integers in
 * their smallest form, nil for RP_NONE, fixmap and fixstr headers), without a call
 * and a copy per item. Fields of other types than these fall back to pack_record().
 */
#define SPAN_MAX 160u /* bytes of one packed span at most (16 keys < 32 bytes: checked) */

struct rp_snap_chunk {
	uint64_t tag;			/* chunk number + 1; 0: empty */
	struct rp_report_rspan *key;	/* the RP_SNAP_CHUNK spans it was packed from */
	unsigned char *bytes;
	size_t len, cap;
};

struct rp_snap_cache {
	struct rp_snap_chunk *ch;	/* chunk k in ch[k % n_ch] */
	uint32_t n_ch;
	struct rp_snap_cache_stats st;
};

static unsigned char *put_be(unsigned char *p, uint64_t v, unsigned bytes)
{
	for (unsigned i = bytes; i-- > 0; v >>= 8)
		p[i] = (unsigned char)v;
	return p + bytes;
}

static unsigned char *put_uint(unsigned char *p, uint64_t v)
{
	if (v < 0x80) {
		*p++ = (unsigned char)v;
		return p;
	}
	if (v <= 0xff) {
		*p++ = 0xcc;
		return put_be(p, v, 1);
	}
	if (v <= 0xffff) {
		*p++ = 0xcd;
		return put_be(p, v, 2);
	}
	if (v <= 0xffffffffu) {
		*p++ = 0xce;
		return put_be(p, v, 4);
	}
	*p++ = 0xcf;
	return put_be(p, v, 8);
}

/* The most bytes put_direct() writes for a record of @t, or 0 when it cannot pack
 * @t (more fields than a fixmap, a key longer than a fixstr, a type other than an
 * unsigned integer or a reference). */
static size_t direct_max(const struct table *t)
{
	size_t max = 1;

	if (t->n > 15)
		return 0;
	for (uint32_t i = 0; i < t->n; i++) {
		if (t->f[i].keylen > 31 ||
		    (t->f[i].type != F_REF && t->f[i].type != F_U32 && t->f[i].type != F_U64))
			return 0;
		max += 1 + t->f[i].keylen + 9;
	}
	return max;
}

/* Whether put_rspan() can pack the span table. */
static bool rspan_direct(void)
{
	size_t max = direct_max(rp_snap_rspan_table);

	return max > 0 && max <= SPAN_MAX;
}

/* One record of @t, at most direct_max(@t) bytes (not 0): a fixmap, fixstr keys,
 * integers in their smallest form and nil for a reference to nothing, as msgpack-c
 * writes them. */
static unsigned char *put_direct(unsigned char *p, const struct table *t, const void *base)
{
	*p++ = (unsigned char)(0x80 | t->n);
	for (uint32_t i = 0; i < t->n; i++) {
		const struct field *f = &t->f[i];
		const char *v = (const char *)base + f->off;

		*p++ = (unsigned char)(0xa0 | f->keylen);
		copy_short(p, f->key, f->keylen);
		p += f->keylen;
		if (f->type == F_U64)
			p = put_uint(p, *(const uint64_t *)v);
		else if (f->type == F_U32 || *(const uint32_t *)v != RP_NONE)
			p = put_uint(p, *(const uint32_t *)v);
		else
			*p++ = 0xc0; /* an F_REF to nothing */
	}
	return p;
}

/* One span, at most SPAN_MAX bytes (rspan_direct() holds). */
static unsigned char *put_rspan(unsigned char *p, const struct rp_report_rspan *s)
{
	return put_direct(p, rp_snap_rspan_table, s);
}

/* @n spans through the packer's buffer, a few at a time. */
static void put_rspans(struct enc *e, const struct rp_report_rspan *s, uint32_t n)
{
	unsigned char buf[16 * SPAN_MAX]; /* 2.5 KiB: the stack may be a small thread's */

	while (n > 0 && e->err == 0) {
		uint32_t k = n < 16 ? n : 16;
		unsigned char *p = buf;

		for (uint32_t i = 0; i < k; i++)
			p = put_rspan(p, &s[i]);
		enc_write(e, (const char *)buf, (size_t)(p - buf));
		s += k;
		n -= k;
	}
}

/* Field for field (the structs have padding). */
static bool same_spans(const struct rp_report_rspan *a, const struct rp_report_rspan *b,
		       uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (a[i].fn != b[i].fn || a[i].track != b[i].track || a[i].depth != b[i].depth ||
		    a[i].step != b[i].step || a[i].start_ns != b[i].start_ns ||
		    a[i].dur_ns != b[i].dur_ns)
			return false;
	return true;
}

static void cache_drop(struct rp_snap_cache *c)
{
	for (uint32_t i = 0; i < c->n_ch; i++) {
		free(c->ch[i].key);
		free(c->ch[i].bytes);
	}
	free(c->ch);
	c->ch = NULL;
	c->n_ch = 0;
}

/* Room for the chunks of @n spans (two more: the ends need not be aligned). */
static bool cache_fit(struct rp_snap_cache *c, uint32_t n)
{
	uint32_t need = n / RP_SNAP_CHUNK + 2;

	if (c->n_ch >= need)
		return true;
	cache_drop(c);
	c->ch = calloc(need, sizeof(*c->ch));
	if (c->ch == NULL)
		return false;
	c->n_ch = need;
	return true;
}

/* The whole chunk @k, spans @s: copied if the cache has it, else packed and kept. */
static void put_chunk(struct enc *e, uint64_t k, const struct rp_report_rspan *s)
{
	struct rp_snap_cache *c = e->cache;
	struct rp_snap_chunk *ch = &c->ch[k % c->n_ch];
	unsigned char *p;

	if (ch->tag == k + 1 && same_spans(ch->key, s, RP_SNAP_CHUNK)) {
		c->st.hits++;
		enc_write(e, (const char *)ch->bytes, ch->len);
		return;
	}
	ch->tag = 0;
	if (ch->key == NULL && (ch->key = malloc(RP_SNAP_CHUNK * sizeof(*s))) == NULL)
		goto uncached;
	if (ch->cap < RP_SNAP_CHUNK * SPAN_MAX) {
		/* packed spans are much shorter than SPAN_MAX: trimmed below */
		free(ch->bytes);
		ch->bytes = malloc(RP_SNAP_CHUNK * SPAN_MAX);
		ch->cap = ch->bytes ? RP_SNAP_CHUNK * SPAN_MAX : 0;
		if (ch->bytes == NULL)
			goto uncached;
	}
	p = ch->bytes;
	for (uint32_t i = 0; i < RP_SNAP_CHUNK; i++)
		p = put_rspan(p, &s[i]);
	ch->len = (size_t)(p - ch->bytes);
	if (ch->len < ch->cap / 2) { /* keep about what it needs */
		unsigned char *q = realloc(ch->bytes, ch->len + ch->len / 4);

		if (q != NULL) {
			ch->bytes = q;
			ch->cap = ch->len + ch->len / 4;
		}
	}
	memcpy(ch->key, s, RP_SNAP_CHUNK * sizeof(*s));
	ch->tag = k + 1;
	c->st.misses++;
	enc_write(e, (const char *)ch->bytes, ch->len);
	return;
uncached:
	put_rspans(e, s, RP_SNAP_CHUNK);
}

/* Spans s[0..n), s[0] the recorder's span @seq0: whole chunks through the cache. */
static void pack_rspans(struct enc *e, const struct rp_report_rspan *s, uint32_t n,
			uint64_t seq0)
{
	uint32_t i = 0;

	if (!rspan_direct()) {
		for (i = 0; i < n && e->err == 0; i++)
			pack_record(e, rp_snap_rspan_table, &s[i]);
		return;
	}
	if (e->cache == NULL || !cache_fit(e->cache, n)) {
		put_rspans(e, s, n);
		return;
	}
	while (i < n && e->err == 0) {
		uint64_t seq = seq0 + i, k = seq / RP_SNAP_CHUNK;
		uint32_t len = (uint32_t)((k + 1) * RP_SNAP_CHUNK - seq);

		if (len == RP_SNAP_CHUNK && n - i >= RP_SNAP_CHUNK) {
			put_chunk(e, k, &s[i]);
		} else {
			len = len < n - i ? len : n - i;
			e->cache->st.loose += len;
			put_rspans(e, &s[i], len);
		}
		i += len;
	}
}

struct rp_snap_cache *rp_snap_cache_new(void)
{
	return calloc(1, sizeof(struct rp_snap_cache));
}

void rp_snap_cache_free(struct rp_snap_cache *c)
{
	if (c == NULL)
		return;
	cache_drop(c);
	free(c);
}

void rp_snap_cache_stats(const struct rp_snap_cache *c, struct rp_snap_cache_stats *out)
{
	*out = c->st;
}

/* --- memory sink ---------------------------------------------------------------- */

int rp_membuf_sink(void *ctx, const void *buf, size_t len)
{
	struct rp_membuf *m = ctx;

	if (len == 0)
		return 0;
	if (len > m->cap - m->len) {
		size_t cap = m->cap ? m->cap : MEMBUF_MIN;
		char *p;

		while (len > cap - m->len) {
			if (cap > SIZE_MAX / 2)
				return -ENOMEM;
			cap *= 2;
		}
		p = realloc(m->data, cap);
		if (p == NULL)
			return -ENOMEM;
		m->data = p;
		m->cap = cap;
	}
	memcpy(m->data + m->len, buf, len);
	m->len += len;
	return 0;
}

void rp_membuf_free(struct rp_membuf *m)
{
	if (m == NULL)
		return;
	free(m->data);
	*m = (struct rp_membuf){ 0 };
}

/* --- files ---------------------------------------------------------------------- */

/* A sink writing to the file descriptor *ctx. */
static int fd_sink(void *ctx, const void *buf, size_t len)
{
	const int *fd = ctx;
	const char *p = buf;

	while (len > 0) {
		ssize_t n = write(*fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* The name has our pid, so an existing file was left by a dead process that had
 * it: replace it. O_EXCL keeps a planted symlink from redirecting the write. */
static int open_temp(const char *tmp)
{
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);

	if (fd < 0 && errno == EEXIST && unlink(tmp) == 0)
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
	return fd < 0 ? -errno : fd;
}

/* Writes @r to the new file @tmp and makes it durable; removes it on failure. */
static int write_temp(const char *tmp, const struct rp_report *r, char *why)
{
	const char *what;
	int fd = open_temp(tmp), err;

	if (fd < 0)
		return rp_snap_sys_fail(why, fd, "cannot create", tmp);
	err = rp_snapshot_encode(r, fd_sink, &fd);
	if (err) {
		what = "cannot write";
		goto err_close;
	}
	if (fsync(fd) != 0) {
		err = -errno;
		what = "cannot fsync";
		goto err_close;
	}
	if (close(fd) != 0) {
		err = -errno;
		what = "cannot close";
		goto err_unlink;
	}
	return 0;
err_close:
	close(fd);
err_unlink:
	unlink(tmp);
	return rp_snap_sys_fail(why, err, what, tmp);
}

/* Makes the rename of @path durable. EINVAL: a file system that cannot sync a
 * directory, where there is nothing more to do. */
static int sync_dir(const char *path, char *why)
{
	const char *slash = strrchr(path, '/');
	char dir[PATH_MAX] = ".";
	int fd, err = 0;

	if (slash == path)
		strcpy(dir, "/");
	else if (slash != NULL)
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return rp_snap_sys_fail(why, -errno, "cannot open directory", dir);
	if (fsync(fd) != 0 && errno != EINVAL)
		err = rp_snap_sys_fail(why, -errno, "cannot fsync directory", dir);
	close(fd);
	return err;
}

int rp_snapshot_write_file(const char *path, const struct rp_report *r, char why[RP_WHY_MAX])
{
	char tmp[PATH_MAX];
	int n, err;

	assert(path != NULL && r != NULL && why != NULL);
	n = snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
	if (n < 0 || (size_t)n >= sizeof(tmp))
		return rp_snap_sys_fail(why, -ENAMETOOLONG, "cannot write", path);
	err = write_temp(tmp, r, why);
	if (err)
		return err;
	if (rename(tmp, path) != 0) {
		err = rp_snap_sys_fail(why, -errno, "cannot rename to", path);
		unlink(tmp);
		return err;
	}
	return sync_dir(path, why);
}
