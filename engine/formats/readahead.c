// SPDX-License-Identifier: MIT
/*
 * Read-ahead for the trace readers (readahead.h). The slots form a ring: the thread
 * fills slot head while fewer than RP_RA_SLOTS are filled or held, the caller takes
 * slot tail and gives it back on its next call. The thread ends after the chunk
 * that ends the file (n <= 0), or when asked to stop.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "readahead.h"

/* One gzread and what zlib says right after it. */
static void read_chunk(gzFile gz, size_t size, struct rp_ra_chunk *c)
{
	const char *msg;

	errno = 0;
	c->n = gzread(gz, c->data, (unsigned)size);
	c->saved_errno = errno;
	msg = gzerror(gz, &c->err);
	snprintf(c->msg, sizeof(c->msg), "%s", msg ? msg : "");
	c->offset = (int64_t)gzoffset(gz);
}

static void *reader(void *arg)
{
	struct rp_readahead *ra = arg;

	for (;;) {
		struct rp_ra_chunk *c;

		pthread_mutex_lock(&ra->mu);
		while (!ra->stop && ra->head - ra->tail == RP_RA_SLOTS)
			pthread_cond_wait(&ra->cv, &ra->mu);
		if (ra->stop) {
			pthread_mutex_unlock(&ra->mu);
			return NULL;
		}
		c = &ra->slot[ra->head % RP_RA_SLOTS];
		pthread_mutex_unlock(&ra->mu);
		read_chunk(ra->gz, ra->size, c); /* a slot nobody else touches */
		pthread_mutex_lock(&ra->mu);
		ra->head++;
		pthread_cond_broadcast(&ra->cv);
		pthread_mutex_unlock(&ra->mu);
		if (c->n <= 0)
			return NULL;
	}
}

int rp_ra_start(struct rp_readahead *ra, gzFile gz, size_t size)
{
	memset(ra, 0, sizeof(*ra));
	ra->gz = gz;
	ra->size = size;
	ra->mem = malloc(size * RP_RA_SLOTS);
	if (ra->mem == NULL)
		return -ENOMEM;
	for (unsigned i = 0; i < RP_RA_SLOTS; i++)
		ra->slot[i].data = ra->mem + i * size;
	pthread_mutex_init(&ra->mu, NULL);
	pthread_cond_init(&ra->cv, NULL);
	ra->threaded = pthread_create(&ra->th, NULL, reader, ra) == 0;
	return 0;
}

const struct rp_ra_chunk *rp_ra_next(struct rp_readahead *ra)
{
	struct rp_ra_chunk *c;

	if (!ra->threaded) {
		read_chunk(ra->gz, ra->size, &ra->slot[0]);
		return &ra->slot[0];
	}
	pthread_mutex_lock(&ra->mu);
	if (ra->holding) {
		ra->tail++;
		pthread_cond_broadcast(&ra->cv);
	}
	while (ra->head == ra->tail)
		pthread_cond_wait(&ra->cv, &ra->mu);
	ra->holding = true;
	c = &ra->slot[ra->tail % RP_RA_SLOTS];
	pthread_mutex_unlock(&ra->mu);
	return c;
}

void rp_ra_stop(struct rp_readahead *ra)
{
	if (ra->threaded) {
		pthread_mutex_lock(&ra->mu);
		ra->stop = true;
		pthread_cond_broadcast(&ra->cv);
		pthread_mutex_unlock(&ra->mu);
		pthread_join(ra->th, NULL);
		ra->threaded = false;
	}
	pthread_cond_destroy(&ra->cv);
	pthread_mutex_destroy(&ra->mu);
	free(ra->mem);
	ra->mem = NULL;
}
