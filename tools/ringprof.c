// SPDX-License-Identifier: MIT
/*
 * ringprof: the command-line tool. This first version has one command,
 * `ringprof segments`, which lists the producer segments of a session as the engine
 * will see them: each header validated, each ring's owner, backlog and drops. The
 * engine commands (run, snapshot, report, analyze, top) come with the engine.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe.h"
#include "segment.h"

static const char usage[] =
	"usage: ringprof segments [--session S] [--rings]\n"
	"       ringprof probe\n"
	"\n"
	"  segments   list the producer segments of a session (default: $RINGPROF_SESSION\n"
	"             or \"default\"), validating every header as the engine does\n"
	"  --rings    also list every claimed ring: owner, state, backlog, dropped\n"
	"  probe      what this kernel offers the engine: io_uring, futex waits, TSC\n";

static void print_rings(struct rp_segment *s)
{
	static const char *states[] = { "free", "active", "retired" };

	for (uint32_t i = 0; i < s->v.ring_count; i++) {
		const struct rp_wire_ring *r =
			(const struct rp_wire_ring *)((char *)s->base + s->v.ring_desc_offset) + i;
		uint32_t st = __atomic_load_n(&r->state, __ATOMIC_RELAXED);

		if (st == RP_RING_FREE && r->gen == 0)
			continue;
		printf("    ring %-4u %-8s gen %-6u tid %-8d backlog %-8u dropped %llu\n", i,
		       st <= RP_RING_RETIRED ? states[st] : "invalid", r->gen, r->tid,
		       rp_segment_ring_pending(s, i), (unsigned long long)r->dropped);
	}
}

static void print_segment(const char *name, bool rings)
{
	char why[RP_WHY_MAX];
	struct rp_segment *s;
	const struct rp_wire_header *h;
	uint64_t dropped = 0;
	int err;

	err = rp_segment_open(name, &s, why);
	if (err) {
		printf("%-40s  refused: %s\n", name, why);
		return;
	}
	h = s->base;
	for (uint32_t i = 0; i < s->v.ring_count; i++)
		dropped += ((const struct rp_wire_ring *)((char *)s->base +
							  s->v.ring_desc_offset))[i].dropped;
	printf("%-40s  pid %-7d %-6s rings %u x %u  names %u/%u  dropped %llu  noring %llu"
	       "  clock %s %.3f MHz\n",
	       name, s->v.pid, h->state == RP_SEG_EXITED ? "exited" : "live", s->v.ring_count,
	       s->v.ring_capacity, h->names_used, s->v.name_capacity,
	       (unsigned long long)dropped, (unsigned long long)h->noring_dropped,
	       s->v.clock.source == RP_CLOCK_TSC ? "tsc" : "monotonic",
	       (double)s->v.clock.ticks_per_sec / 1e6);
	if (rings)
		print_rings(s);
	rp_segment_close(s);
}

static int cmd_segments(int argc, char **argv)
{
	static const struct option opts[] = { { "session", required_argument, NULL, 's' },
					      { "rings", no_argument, NULL, 'r' },
					      { "help", no_argument, NULL, 'h' },
					      { NULL, 0, NULL, 0 } };
	const char *session = getenv("RINGPROF_SESSION");
	char prefix[64];
	bool rings = false;
	int c, n = 0;
	DIR *d;

	while ((c = getopt_long(argc, argv, "s:rh", opts, NULL)) != -1) {
		switch (c) {
		case 's': session = optarg; break;
		case 'r': rings = true; break;
		case 'h': fputs(usage, stdout); return 0;
		default: fputs(usage, stderr); return 2;
		}
	}
	if (session == NULL || *session == '\0')
		session = "default";
	snprintf(prefix, sizeof(prefix), RP_WIRE_NAME_PREFIX "%s.", session);
	d = opendir("/dev/shm");
	if (d == NULL) {
		fprintf(stderr, "ringprof: /dev/shm: %s\n", strerror(errno));
		return 1;
	}
	for (struct dirent *e; (e = readdir(d)) != NULL;) {
		char name[300];

		if (strncmp(e->d_name, prefix, strlen(prefix)) != 0 ||
		    strcmp(e->d_name + strlen(prefix), "engine") == 0)
			continue;
		snprintf(name, sizeof(name), "/%s", e->d_name);
		print_segment(name, rings);
		n++;
	}
	closedir(d);
	if (n == 0)
		printf("no segments in session \"%s\"\n", session);
	return 0;
}

static int cmd_probe(void)
{
	struct rp_probe p;

	rp_probe_run(&p);
	printf("io_uring:             %s\n",
	       p.io_uring_err == 0 ? "available" : strerror(-p.io_uring_err));
	printf("io_uring FUTEX_WAIT:  %s\n", p.uring_futex_wait ? "yes" : "no");
	printf("io_uring FUTEX_WAITV: %s\n", p.uring_futex_waitv ? "yes" : "no");
	printf("futex_waitv(2):       %s\n", p.futex_waitv ? "yes" : "no");
	printf("invariant TSC:        %s\n", p.tsc_invariant ? "yes" : "no");
	printf("doorbell wait:        %s\n", rp_probe_doorbell(&p));
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		fputs(usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (strcmp(argv[1], "segments") == 0)
		return cmd_segments(argc - 1, argv + 1);
	if (strcmp(argv[1], "probe") == 0)
		return cmd_probe();
	fprintf(stderr, "ringprof: unknown command \"%s\" (try --help)\n", argv[1]);
	return 2;
}
