/* SPDX-License-Identifier: MIT */
/*
 * Test helpers: cmocka includes in the order cmocka 1.1.5 needs, and a consumer
 * view of this process's own segment.
 */
#ifndef RP_TEST_SUPPORT_H
#define RP_TEST_SUPPORT_H

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ringprof/ringprof.h>

#include "segment.h"

/*
 * Initialises the producer and attaches a consumer view to its segment at the
 * producer's own addresses, so that ThreadSanitizer, which tracks addresses, sees
 * both sides of every access (a second mapping would hide them from it).
 * Cross-process tests open segments by name instead.
 */
static inline struct rp_segment *rp_test_open_self(void)
{
	char why[RP_WHY_MAX];
	struct rp_segment *s = NULL;
	struct rp_wire_header *h = NULL;

	if (rp_init() != 0 || (h = rp_segment_header()) == NULL)
		fail_msg("rp_init failed");
	if (rp_segment_attach(h, h->segment_size, &s, why) != 0)
		fail_msg("rp_segment_attach: %s", why);
	return s;
}

static inline struct rp_wire_ring *rp_test_ring(struct rp_segment *s, uint32_t i)
{
	return (struct rp_wire_ring *)((char *)s->base + s->v.ring_desc_offset) + i;
}

static inline struct rp_wire_header *rp_test_hdr(struct rp_segment *s)
{
	return s->base;
}

static inline int rp_test_gettid(void)
{
	return (int)syscall(SYS_gettid);
}

/*
 * rp_test_sh() - run a shell command (printf-style @fmt); all its stdout, NUL-terminated,
 * in *@out (malloc'ed; NULL: discarded) and its length in *@len (may be NULL).
 * Return: its exit status, or -1 if it did not exit.
 */
static int rp_test_sh(char **out, size_t *len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4), unused));
static int rp_test_sh(char **out, size_t *len, const char *fmt, ...)
{
	char cmd[8192], *buf = NULL;
	size_t n = 0, cap = 0, got;
	va_list ap;
	FILE *p;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	p = popen(cmd, "r");
	assert_non_null(p);
	do { /* all of it: a report of many names is megabytes */
		if (n + 65536 > cap) {
			cap = cap ? cap * 2 : 1 << 20;
			buf = realloc(buf, cap);
			assert_non_null(buf);
		}
		got = fread(buf + n, 1, cap - n - 1, p);
		n += got;
	} while (got > 0);
	buf[n] = '\0';
	st = pclose(p);
	if (len)
		*len = n;
	if (out)
		*out = buf;
	else
		free(buf);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The whole file at @path, NUL-terminated (malloc'ed); *@len its length. */
static char *rp_test_slurp(const char *path, size_t *len) __attribute__((unused));
static char *rp_test_slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	if (f == NULL)
		fail_msg("%s: %s", path, strerror(errno));
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	rewind(f);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	*len = (size_t)n;
	return buf;
}

/* A fresh temporary file name "/tmp/rp_test_XXXXXX@suffix"; the caller unlinks it. */
static inline void rp_test_temp_path(char path[64], const char *suffix)
{
	int fd;

	snprintf(path, 64, "/tmp/rp_test_XXXXXX%s", suffix);
	fd = mkstemps(path, (int)strlen(suffix));
	assert_true(fd >= 0);
	close(fd);
}

/* @path made to hold the @n bytes at @data. */
static inline void rp_test_write_file(const char *path, const void *data, size_t n)
{
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, n, f), n);
	assert_int_equal(fclose(f), 0);
}

/* A loopback TCP port free just now (for an engine's --prometheus), or -1. */
static inline int rp_test_free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), p;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	p = ntohs(a.sin_port);
	close(fd);
	return p;
}

#endif
