// SPDX-License-Identifier: MIT
/*
 * Host identity and the wall-clock anchor of CLOCK_MONOTONIC (hostid.h). A clock
 * pair read apart by a preemption would shift every aligned time by the delay, so
 * the anchor keeps the tightest of a few bracketed reads; its error is half that
 * bracket.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hostid.h"

#define ANCHOR_TRIES 5

static int read_ns(clockid_t id, uint64_t *ns)
{
	struct timespec ts;

	if (clock_gettime(id, &ts) != 0)
		return -errno;
	*ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	return 0;
}

int rp_clock_anchor(uint64_t *realtime_ns, uint64_t *monotonic_ns)
{
	uint64_t best = UINT64_MAX, m0 = 0, m1 = 0, rt = 0;
	int err;

	for (int i = 0; i < ANCHOR_TRIES; i++) {
		if ((err = read_ns(CLOCK_MONOTONIC, &m0)) != 0 ||
		    (err = read_ns(CLOCK_REALTIME, &rt)) != 0 ||
		    (err = read_ns(CLOCK_MONOTONIC, &m1)) != 0)
			return err;
		if (m1 - m0 < best) {
			best = m1 - m0;
			*realtime_ns = rt;
			*monotonic_ns = m0 + (m1 - m0) / 2;
		}
	}
	return 0;
}

static void read_boot_id(char *buf, size_t n)
{
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	ssize_t got;

	buf[0] = '\0';
	if (fd < 0)
		return;
	got = read(fd, buf, n - 1);
	close(fd);
	if (got <= 0) {
		buf[0] = '\0';
		return;
	}
	buf[got] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
}

void rp_host_id_read(struct rp_host_id *h)
{
	memset(h, 0, sizeof(*h));
	if (gethostname(h->host, sizeof(h->host) - 1) != 0)
		h->host[0] = '\0';
	read_boot_id(h->boot_id, sizeof(h->boot_id));
	if (rp_clock_anchor(&h->realtime_ns, &h->monotonic_ns) != 0)
		h->realtime_ns = h->monotonic_ns = 0;
}
