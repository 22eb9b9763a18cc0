// SPDX-License-Identifier: MIT
/*
 * Read-ahead for the trace readers (readahead.h). The slots form a ring: the thread
 * fills slot head while fewer than RP_RA_SLOTS are filled or held, the caller takes
 * slot tail and gives it back on its next call. The thread ends after the chunk
 * that ends the file (n <= 0), or when asked to stop. In plain mode a slot is a
 * block of RP_RA_BLOCK bytes, handed out chunk by chunk; the block that ends the
 * file (short, or a failed read) is the thread's last.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* Up to RP_RA_BLOCK bytes of the plain file at ra->next_at; true if the file goes on. */
static bool read_block(struct rp_readahead *ra, struct rp_ra_block *b)
{
	ssize_t r = 0;

	b->at = ra->next_at;
	b->len = 0;
	b->saved_errno = 0;
	while (b->len < RP_RA_BLOCK) {
		r = pread(ra->fd, b->data + b->len, RP_RA_BLOCK - b->len, b->at + (off_t)b->len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		b->len += (size_t)r;
	}
	if (r < 0)
		b->saved_errno = errno ? errno : EIO;
	ra->next_at += (int64_t)b->len;
	return b->len == RP_RA_BLOCK && r > 0;
}

static void *reader(void *arg)
{
	struct rp_readahead *ra = arg;

	for (;;) {
		unsigned k;
		bool more;

		pthread_mutex_lock(&ra->mu);
		while (!ra->stop && ra->head - ra->tail == RP_RA_SLOTS)
			pthread_cond_wait(&ra->cv, &ra->mu);
		if (ra->stop) {
			pthread_mutex_unlock(&ra->mu);
			return NULL;
		}
		k = ra->head % RP_RA_SLOTS;
		pthread_mutex_unlock(&ra->mu);
		if (ra->fd >= 0) { /* a slot nobody else touches */
			more = read_block(ra, &ra->block[k]);
		} else {
			read_chunk(ra->gz, ra->size, &ra->slot[k]);
			more = ra->slot[k].n > 0;
		}
		pthread_mutex_lock(&ra->mu);
		ra->head++;
		pthread_cond_broadcast(&ra->cv);
		pthread_mutex_unlock(&ra->mu);
		if (!more)
			return NULL;
	}
}

/* Whether @fd is a regular file that zlib would copy: not starting 0x1f 0x8b. */
static bool plain_file(int fd, size_t size)
{
	unsigned char m[2];
	struct stat sb;

	if (fd < 0 || RP_RA_BLOCK % size != 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))
		return false;
	if (lseek(fd, 0, SEEK_CUR) != 0 || pread(fd, m, 2, 0) != 2)
		return false; /* zlib decides for a file of 0 or 1 byte */
	return !(m[0] == 0x1f && m[1] == 0x8b);
}

int rp_ra_start(struct rp_readahead *ra, gzFile gz, int fd, size_t size)
{
	memset(ra, 0, sizeof(*ra));
	ra->gz = gz;
	ra->fd = plain_file(fd, size) ? fd : -1;
	ra->size = size;
	size_t slot = ra->fd >= 0 ? RP_RA_BLOCK : size;
	ra->mem = malloc(slot * RP_RA_SLOTS);
	if (ra->mem == NULL)
		return -ENOMEM;
	for (unsigned i = 0; i < RP_RA_SLOTS; i++) {
		ra->slot[i].data = ra->mem + i * slot;
		ra->block[i].data = ra->mem + i * slot;
	}
	pthread_mutex_init(&ra->mu, NULL);
	pthread_cond_init(&ra->cv, NULL);
	ra->threaded = pthread_create(&ra->th, NULL, reader, ra) == 0;
	return 0;
}

/* The thread's next filled slot (block or chunk), the one held before given back:
 * @return its number (mod RP_RA_SLOTS); held until the next call. */
static unsigned hand_over(struct rp_readahead *ra)
{
	unsigned tail;

	pthread_mutex_lock(&ra->mu);
	if (ra->holding) {
		ra->tail++;
		pthread_cond_broadcast(&ra->cv);
	}
	while (ra->head == ra->tail)
		pthread_cond_wait(&ra->cv, &ra->mu);
	ra->holding = true;
	tail = ra->tail;
	pthread_mutex_unlock(&ra->mu);
	return tail;
}

/* Plain mode: the next block to hand out, read here if there is no thread. */
static struct rp_ra_block *take_block(struct rp_readahead *ra)
{
	if (!ra->threaded) {
		read_block(ra, &ra->block[0]);
		ra->holding = true;
		return &ra->block[0];
	}
	return &ra->block[hand_over(ra) % RP_RA_SLOTS];
}

/* Plain mode: the held block's next chunk, as gzread would have returned it. */
static const struct rp_ra_chunk *plain_next(struct rp_readahead *ra)
{
	struct rp_ra_chunk *c = &ra->cur;
	struct rp_ra_block *b = ra->holding ? &ra->block[ra->threaded ? ra->tail % RP_RA_SLOTS : 0]
					    : NULL;

	if (!ra->ended && (b == NULL || ra->cur_pos == RP_RA_BLOCK)) {
		b = take_block(ra);
		ra->cur_pos = 0;
	}
	c->err = Z_OK;
	c->saved_errno = 0;
	c->msg[0] = '\0';
	if (!ra->ended && ra->cur_pos < b->len && (b->len - ra->cur_pos >= ra->size ||
						    b->saved_errno == 0)) {
		c->data = b->data + ra->cur_pos;
		c->n = (int)(b->len - ra->cur_pos < ra->size ? b->len - ra->cur_pos : ra->size);
		ra->cur_pos += (size_t)c->n;
		c->offset = b->at + (int64_t)ra->cur_pos;
		return c;
	}
	/* The end of the file, or the read that failed: no more chunks after this. */
	ra->ended = true;
	c->data = b->data;
	c->offset = b->at + (int64_t)b->len;
	c->n = b->saved_errno ? -1 : 0;
	if (b->saved_errno) {
		c->err = Z_ERRNO;
		c->saved_errno = b->saved_errno;
		snprintf(c->msg, sizeof(c->msg), "%s", strerror(b->saved_errno));
	}
	return c;
}

const struct rp_ra_chunk *rp_ra_next(struct rp_readahead *ra)
{
	if (ra->fd >= 0)
		return plain_next(ra);
	if (!ra->threaded) {
		read_chunk(ra->gz, ra->size, &ra->slot[0]);
		return &ra->slot[0];
	}
	return &ra->slot[hand_over(ra) % RP_RA_SLOTS];
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
