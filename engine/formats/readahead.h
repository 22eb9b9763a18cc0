/* SPDX-License-Identifier: MIT */
/*
 * Read-ahead for the trace readers: a second thread runs zlib's gzread (the file's
 * bytes, inflated if gzip) a few chunks ahead of the parser, so inflating and
 * parsing overlap on two cores. Each chunk carries what the reader would have
 * asked zlib right after that read (gzoffset, gzerror and errno), so errors and
 * progress are reported exactly as when it read the chunks itself. Memory:
 * RP_RA_SLOTS chunks. If no thread can be started, the chunks are read in the
 * caller's thread, one at a time.
 */
#ifndef RP_ENGINE_READAHEAD_H
#define RP_ENGINE_READAHEAD_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <zlib.h>

#define RP_RA_SLOTS 4

struct rp_ra_chunk {
	unsigned char *data;
	int n;		 /* gzread's value */
	int err;	 /* gzerror's code after it */
	int saved_errno; /* errno right after it */
	int64_t offset;	 /* gzoffset after it */
	char msg[160];	 /* gzerror's text after it */
};

struct rp_readahead {
	gzFile gz;
	size_t size; /* bytes per read */
	unsigned char *mem;
	struct rp_ra_chunk slot[RP_RA_SLOTS];
	unsigned head, tail; /* filled: [tail, head); the caller holds tail while holding */
	bool holding, stop, threaded;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t th;
};

/* @gz is read @size bytes at a time from now on. 0 or -ENOMEM. */
int rp_ra_start(struct rp_readahead *ra, gzFile gz, size_t size);
/* The next chunk in file order (the last one has n <= 0); valid until the next call. */
const struct rp_ra_chunk *rp_ra_next(struct rp_readahead *ra);
/* Stops the thread (mid-file too) and frees the chunks; @gz is the caller's again. */
void rp_ra_stop(struct rp_readahead *ra);

#endif
