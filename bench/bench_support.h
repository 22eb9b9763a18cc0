/* SPDX-License-Identifier: MIT */
/*
 * Helpers the end-to-end benchmarks (bench_live, bench_snapshot) share: the monotonic
 * clock they time with and whether a `ringprof run` they started is up yet.
 */
#ifndef RP_BENCH_SUPPORT_H
#define RP_BENCH_SUPPORT_H

#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <ringprof/wire.h>

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Whether the engine of @session has made its marker (it runs once it has). */
static inline bool engine_up(const char *session)
{
	char path[96];
	int fd;

	snprintf(path, sizeof(path), RP_WIRE_ENGINE_FMT, session);
	fd = shm_open(path, O_RDONLY, 0);
	if (fd < 0)
		return false;
	close(fd);
	return true;
}

#endif /* RP_BENCH_SUPPORT_H */
