/* SPDX-License-Identifier: MIT */
/*
 * Read-ahead for the trace readers: a second thread runs zlib's gzread (the file's
 * bytes, inflated if gzip) a few chunks ahead of the parser, so inflating and
 * parsing overlap on two cores. Each chunk carries what the reader would have
 * asked zlib right after that read (gzoffset, gzerror and errno), so errors and
 * progress are reported exactly as when it read the chunks itself. Memory:
 * RP_RA_SLOTS chunks. If no thread can be started, the chunks are read in the
 * caller's thread, one at a time.
 *
 * A plain regular file (not starting with gzip's magic bytes, which zlib would
 * only copy) is read with pread(2) RP_RA_BLOCK bytes at a time instead and handed
 * out in the same chunks, each with what gzread would have said after it: the
 * bytes, the offset after them, Z_OK, or Z_ERRNO and errno for a failed read. One
 * hand-over between the threads per block instead of per chunk, no lseek per
 * chunk (gzoffset's), no copy through zlib. Memory: RP_RA_SLOTS blocks.
 */
#ifndef RP_ENGINE_READAHEAD_H
#define RP_ENGINE_READAHEAD_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <zlib.h>

#define RP_RA_SLOTS 4
#define RP_RA_BLOCK (256u << 10) /* bytes per pread of a plain file */

struct rp_ra_chunk {
	unsigned char *data;
	int n;		 /* gzread's value */
	int err;	 /* gzerror's code after it */
	int saved_errno; /* errno right after it */
	int64_t offset;	 /* gzoffset after it */
	char msg[160];	 /* gzerror's text after it */
};

/* A block of a plain file, as the thread read it. */
struct rp_ra_block {
	unsigned char *data;
	size_t len;	 /* bytes read */
	int64_t at;	 /* file offset of data[0] */
	int saved_errno; /* non-zero: the read after len bytes failed */
};

struct rp_readahead {
	gzFile gz;
	int fd;	     /* plain mode: the file read with pread; -1 otherwise */
	size_t size; /* bytes per chunk */
	unsigned char *mem;
	struct rp_ra_chunk slot[RP_RA_SLOTS];
	struct rp_ra_block block[RP_RA_SLOTS];
	struct rp_ra_chunk cur; /* plain mode: the chunk handed out */
	size_t cur_pos;		/* plain mode: bytes of the held block handed out */
	int64_t next_at;	/* plain mode: where the thread reads next */
	unsigned head, tail; /* filled: [tail, head); the caller holds tail while holding */
	bool holding, stop, threaded, ended;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t th;
};

/*
 * @gz is read @size bytes at a time from now on; @fd (or -1) is its file: if it is
 * a plain regular file, it is read with pread instead (gz is left unread). 0 or
 * -ENOMEM.
 */
int rp_ra_start(struct rp_readahead *ra, gzFile gz, int fd, size_t size);
/* The next chunk in file order (the last one has n <= 0); valid until the next call. */
const struct rp_ra_chunk *rp_ra_next(struct rp_readahead *ra);
/* Stops the thread (mid-file too) and frees the chunks; @gz is the caller's again. */
void rp_ra_stop(struct rp_readahead *ra);

#endif
