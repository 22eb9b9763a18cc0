// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the toolkit importer's step lane (import_nat.c, "the step
 * lane"): each input is imported twice, as shipped and with rp_nat_lane_off (every
 * step through the fast path's callbacks, the reference), and both must give the
 * same return value, error text, counts and analysis (every call, its ids and
 * times, the names and UUIDs behind the ids, segments, percentiles and top list),
 * and, for an engine, the same functions, events and anomalies; any difference
 * aborts. The first byte chooses what else is done: bit 0 an engine too, bit 1
 * the text also read from a file after the number of spaces that puts the next
 * two bytes' offset (mod 1024) on the readers' 64 KiB chunk end, so a step is cut
 * there. The text is the input after those three bytes. tests/test_nat_lane.c
 * does the same for chosen inputs.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../jsupport.h"
#include "fuzz_cfg.h"
#include "aiq.h"
#include "import_nat.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHUNK (64u * 1024)

struct outcome {
	int rc;
	char why[RP_WHY_MAX];
	struct rp_nat_stats st;
	struct rp_aiq a;
	uint64_t h; /* the engine's report */
};

static char path[64];

static void remove_file(void)
{
	unlink(path);
}

/* One way, into the toolkit analysis (@e NULL) or an engine; @file: from the file. */
static void import(const uint8_t *text, size_t n, bool file, bool engine, bool off,
		   struct outcome *o)
{
	struct rp_nat_caps caps = { .max_events = 256, .max_request_steps = 64 };
	struct rp_engine_cfg cfg;
	struct rp_engine *e = NULL;
	struct rp_aiq *a = engine ? NULL : &o->a;

	memset(o, 0, sizeof(*o));
	if (engine) {
		fuzz_small_cfg(&cfg);
		if (rp_engine_open(&cfg, &e) != 0)
			abort();
	} else if (rp_aiq_init(&o->a, 64) != 0) {
		abort(); /* a valid configuration: the target must run */
	}
	rp_nat_lane_off = off;
	o->rc = file ? rp_import_nat(e, a, &caps, path, NULL, NULL, &o->st, o->why)
		     : rp_import_nat_buf(e, a, &caps, text, n, "fuzz", &o->st, o->why);
	rp_nat_lane_off = false;
	if (o->rc == 0 && a != NULL && rp_aiq_finish(a) != 0)
		abort();
	if (o->rc == 0 && e != NULL && rp_test_engine_digest(e, &o->h) != 0)
		abort();
	if (e != NULL)
		rp_engine_close(e);
}

static void both_ways(const uint8_t *text, size_t n, bool file, bool engine)
{
	struct outcome lane, cb;

	import(text, n, file, engine, false, &lane);
	import(text, n, file, engine, true, &cb);
	if (lane.rc != cb.rc || strcmp(lane.why, cb.why) != 0 ||
	    memcmp(&lane.st, &cb.st, sizeof(lane.st)) != 0 || lane.h != cb.h ||
	    (lane.rc == 0 && !engine && !rp_test_same_aiq(&lane.a, &cb.a))) {
		fprintf(stderr, "fuzz_nat_lane: lane %d \"%s\", callbacks %d \"%s\"%s%s\n", lane.rc,
			lane.why, cb.rc, cb.why, file ? " (file)" : "", engine ? " (engine)" : "");
		abort();
	}
	rp_aiq_free(&lane.a);
	rp_aiq_free(&cb.a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char pad[CHUNK];
	size_t n, at;
	FILE *f;

	if (size < 3)
		return 0;
	n = size - 3;
	both_ways(data + 3, n, false, false);
	if (data[0] & 1)
		both_ways(data + 3, n, false, true);
	if (!(data[0] & 2))
		return 0;
	if (path[0] == '\0') {
		int fd;

		snprintf(path, sizeof(path), "/tmp/fuzz_nat_lane.XXXXXX");
		fd = mkstemp(path);
		if (fd < 0)
			abort();
		close(fd);
		atexit(remove_file); /* libFuzzer exits through exit() when its time is up */
		memset(pad, ' ', sizeof(pad));
	}
	at = (size_t)(data[1] | data[2] << 8) % 1024; /* the text's byte at the chunk end */
	f = fopen(path, "wb");
	if (f == NULL || fwrite(pad, 1, CHUNK - at, f) != CHUNK - at ||
	    fwrite(data + 3, 1, n, f) != n || fclose(f) != 0)
		abort();
	both_ways(NULL, 0, true, (data[0] & 1) != 0);
	return 0;
}
