// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the toolkit importer's two-reader path (import_nat.c, "two
 * readers"): each input is written to a file and imported into the toolkit analysis
 * twice, with rp_nat_split_min at SIZE_MAX (one reader) and at 0 (every plain file
 * split at its guessed request start). Both must give the same return value, error
 * text, counts and analysis (every call, its ids and times, the names and UUIDs
 * behind the ids, the concurrency segments, percentiles and top list); any
 * difference aborts. tests/test_nat_split.c does the same for chosen inputs.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../jsupport.h"
#include "aiq.h"
#include "import_nat.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct outcome {
	int rc;
	char why[RP_WHY_MAX];
	struct rp_nat_stats st;
	struct rp_aiq a;
};

static char path[64];

static void remove_file(void)
{
	unlink(path);
}

static void import(size_t split_min, struct outcome *o)
{
	memset(o, 0, sizeof(*o));
	rp_nat_split_min = split_min;
	if (rp_aiq_init(&o->a, 64) != 0)
		abort(); /* a valid configuration: the target must run */
	o->rc = rp_import_nat(NULL, &o->a, NULL, path, NULL, NULL, &o->st, o->why);
	if (o->rc == 0 && rp_aiq_finish(&o->a) != 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct outcome one, two;
	FILE *f;

	if (path[0] == '\0') {
		int fd;

		snprintf(path, sizeof(path), "/tmp/fuzz_nat_split.XXXXXX");
		fd = mkstemp(path);
		if (fd < 0)
			abort();
		close(fd);
		atexit(remove_file); /* libFuzzer exits through exit() when its time is up */
	}
	f = fopen(path, "wb");
	if (f == NULL || fwrite(data, 1, size, f) != size || fclose(f) != 0)
		abort();
	import(SIZE_MAX, &one);
	import(0, &two);
	if (one.rc != two.rc || strcmp(one.why, two.why) != 0 ||
	    memcmp(&one.st, &two.st, sizeof(one.st)) != 0 ||
	    (one.rc == 0 && !rp_test_same_aiq(&one.a, &two.a))) {
		fprintf(stderr, "fuzz_nat_split: one reader %d \"%s\", two %d \"%s\"\n", one.rc,
			one.why, two.rc, two.why);
		abort();
	}
	rp_aiq_free(&one.a);
	rp_aiq_free(&two.a);
	return 0;
}
