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

/* msgpack-c's write callback. */
static int enc_write(void *data, const char *p, size_t len)
{
	struct enc *e = data;

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

static void pack_key(struct enc *e, const char *k, size_t len)
{
	msgpack_pack_str_with_body(&e->pk, k, len);
}

/* A NULL string (a report built carelessly) is written as "". */
static void pack_str(struct enc *e, const char *s)
{
	size_t n = s ? rp_snap_cut_len(s, strnlen(s, STR_MAX + 1)) : 0;

	msgpack_pack_str_with_body(&e->pk, s ? s : "", n);
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

/* An F_ARR or F_U64S: the array at @p, its count at @base + f->aux. */
static void pack_array(struct enc *e, const struct field *f, const void *base, const char *p)
{
	uint32_t n = *(const uint32_t *)((const char *)base + f->aux);
	const char *a = *(const char *const *)p;

	assert(a != NULL || n == 0);
	msgpack_pack_array(&e->pk, n);
	for (uint32_t i = 0; i < n && e->err == 0; i++) {
		if (f->type == F_U64S)
			msgpack_pack_uint64(&e->pk, ((const uint64_t *)a)[i]);
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
	case F_U64: msgpack_pack_uint64(&e->pk, *(const uint64_t *)p); break;
	case F_U32: msgpack_pack_uint32(&e->pk, *(const uint32_t *)p); break;
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
			msgpack_pack_uint32(&e->pk, ref);
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
	msgpack_pack_map(&e->pk, t->n);
	for (uint32_t i = 0; i < t->n; i++) {
		pack_key(e, t->f[i].key, t->f[i].keylen);
		pack_field(e, &t->f[i], base);
	}
}

int rp_snapshot_encode(const struct rp_report *r, rp_sink_fn sink, void *ctx)
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
	e->err = 0;
	e->n = 0;
	msgpack_packer_init(&e->pk, e, enc_write);
	pack_record(e, &rp_snap_top_table, r);
	enc_flush(e);
	err = e->err;
	free(e);
	return err;
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
