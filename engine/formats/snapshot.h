/* SPDX-License-Identifier: MIT */
/*
 * Snapshots: a report (report.h) as MessagePack, through msgpack-c. The encoder
 * writes through a sink, so the same code serves a memory buffer (tests, the
 * io_uring writer) and a file. The schema is documented in docs/snapshot.md:
 * a map with a "version" [major, minor] first; readers skip keys they do not
 * know, and reject another major version or malformed bytes with a clear error.
 */
#ifndef RP_ENGINE_SNAPSHOT_H
#define RP_ENGINE_SNAPSHOT_H

#include <stddef.h>

#include "report.h"
#include "segment.h" /* RP_WHY_MAX */

/* A sink takes the next @len bytes; 0 or -errno. */
typedef int (*rp_sink_fn)(void *ctx, const void *buf, size_t len);

/* A growable memory sink: rp_membuf_sink with a struct rp_membuf as ctx. */
struct rp_membuf {
	char *data;
	size_t len;
	size_t cap;
};
int rp_membuf_sink(void *ctx, const void *buf, size_t len);
void rp_membuf_free(struct rp_membuf *m);

/** rp_snapshot_encode() - write @r through @sink. @return 0 or the sink's -errno. */
int rp_snapshot_encode(const struct rp_report *r, rp_sink_fn sink, void *ctx);

/*
 * An encoder's memory of the flight recorder's spans, for a writer that encodes one
 * engine's reports again and again (`ringprof run`): spans are encoded in chunks of
 * RP_SNAP_CHUNK by their place in the recorder's history (recorder.wrapped + index),
 * and a chunk whose spans are field for field those of the last report is copied as
 * it was encoded instead of encoded again. The bytes are those rp_snapshot_encode()
 * writes. Memory: about 100 bytes per span of the largest recorder encoded.
 */
#define RP_SNAP_CHUNK 512u
struct rp_snap_cache;

struct rp_snap_cache_stats {
	uint64_t hits, misses;	/* chunks copied, chunks encoded (and kept) */
	uint64_t loose;		/* spans encoded outside whole chunks (the ends) */
};

struct rp_snap_cache *rp_snap_cache_new(void);
void rp_snap_cache_free(struct rp_snap_cache *c);
void rp_snap_cache_stats(const struct rp_snap_cache *c, struct rp_snap_cache_stats *out);

/** rp_snapshot_encode_cached() - rp_snapshot_encode() through @c (NULL: none). */
int rp_snapshot_encode_cached(const struct rp_report *r, struct rp_snap_cache *c,
			      rp_sink_fn sink, void *ctx);

/**
 * rp_snapshot_decode() - read a snapshot into @out (which the caller frees with
 * rp_report_free, also on failure).
 * @return 0; -EPROTONOSUPPORT for another major version; -EINVAL for malformed
 *	   bytes, with @why saying what and where.
 */
int rp_snapshot_decode(const void *buf, size_t len, struct rp_report *out,
		       char why[RP_WHY_MAX]);

/** rp_snapshot_read_file() - read and decode the file at @path. */
int rp_snapshot_read_file(const char *path, struct rp_report *out, char why[RP_WHY_MAX]);

/**
 * rp_snapshot_write_file() - write @r to @path whole or not at all: a temporary file
 * in the same directory, write, fsync, rename over @path, fsync the directory.
 * Blocking; the engine's loop has its own asynchronous path for live snapshots.
 */
int rp_snapshot_write_file(const char *path, const struct rp_report *r, char why[RP_WHY_MAX]);

#endif
