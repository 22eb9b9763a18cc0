// SPDX-License-Identifier: MIT
/*
 * libFuzzer target over the Chrome reader's whole-event path (trace_chrome.c,
 * "events read by structure"): every input, plain or gzip, read three ways, as
 * shipped, with rp_chrome_events_off (jfast token by token) and with rp_jfast_off
 * (yajl alone, the reference), must give the same return value, error text with
 * its byte offset, counters and events, field for field. A fourth pass stops at
 * the first event and must get the callback's value back from every path. The
 * 16-byte classifiers the whole-event path reads with (jfast.h) must agree with
 * their portable versions on every 16 bytes of the input.
 * Seeds: tests/fuzz/seeds/chrome/ (run by tests/fuzz/run.sh).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../jsupport.h"
#include "jfast.h"
#include "trace_chrome.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define STOP_RC 7

/* rp_test_chrome_digest(), with the strings' bound checked. */
static int digest(void *ctx, const struct rp_chrome_ev *e)
{
	const char *s[] = { e->name, e->cat, e->pid, e->tid, e->id, e->value_name };

	for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++)
		if (strnlen(s[i], RP_CHROME_STR_MAX) == RP_CHROME_STR_MAX)
			abort();
	return rp_test_chrome_digest(ctx, e);
}

static int stop_first(void *ctx, const struct rp_chrome_ev *e)
{
	(void)e;
	(*(uint64_t *)ctx)++;
	return STOP_RC;
}

/* Way 0: as shipped; 1: jfast alone; 2: yajl alone. */
static void set_way(int way)
{
	rp_chrome_events_off = way == 1;
	rp_jfast_off = way == 2;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rp_chrome_stats st[3];
	char why[3][RP_WHY_MAX];
	uint64_t h[3] = { 0, 0, 0 }, seen;
	int rc[3];

	for (size_t i = 0; i + 16 <= size; i++)
		if (rp_jfast_special16(data + i) != rp_jfast_special16_port(data + i) ||
		    rp_jfast_nondigit16(data + i) != rp_jfast_nondigit16_port(data + i))
			abort();
	for (int k = 0; k < 3; k++) {
		set_way(k);
		rc[k] = rp_chrome_parse(data, size, digest, &h[k], &st[k], why[k]);
	}
	set_way(0);
	if (rc[0] == -ENOMEM || rc[1] == -ENOMEM || rc[2] == -ENOMEM)
		return 0;
	for (int k = 1; k < 3; k++)
		if (rc[0] != rc[k] || strcmp(why[0], why[k]) != 0 || h[0] != h[k] ||
		    memcmp(&st[0], &st[k], sizeof(st[0])) != 0)
			abort();
	if (st[0].events == 0)
		return 0;
	for (int k = 0; k < 3; k++) {
		set_way(k);
		seen = 0;
		rc[k] = rp_chrome_parse(data, size, stop_first, &seen, &st[k], why[k]);
		if (rc[k] != STOP_RC || seen != 1 || st[k].events != 1)
			abort();
	}
	set_way(0);
	return 0;
}
