// SPDX-License-Identifier: MIT
/*
 * libFuzzer target over rp_chrome_parse(): any bytes, plain or gzip, must come
 * back as 0 or -EINVAL (-ENOMEM aside) without a crash, a leak or undefined
 * behaviour, with a why of the documented shape, and every event handed over
 * must keep the reader's promises: strings NUL-terminated within
 * RP_CHROME_STR_MAX, a value only on 'C' events, an id only with has_id. A second
 * pass stops at the first event, which must end the parse with the callback's
 * value. Seeds: tests/fuzz/seeds/chrome/ (run by tests/fuzz/run.sh).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trace_chrome.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define STOP_RC 5

static void check_str(const char *s)
{
	if (s == NULL || strnlen(s, RP_CHROME_STR_MAX) == RP_CHROME_STR_MAX)
		abort();
}

static void check_event(const struct rp_chrome_ev *e)
{
	check_str(e->name);
	check_str(e->cat);
	check_str(e->pid);
	check_str(e->tid);
	check_str(e->id);
	check_str(e->value_name);
	if (e->has_value && e->ph != 'C')
		abort();
	if ((!e->has_id && e->id[0] != '\0') || (!e->has_value && e->value_name[0] != '\0'))
		abort();
	if ((!e->has_ts && e->ts_ns != 0) || (!e->has_dur && e->dur_ns != 0))
		abort();
}

static int count(void *ctx, const struct rp_chrome_ev *e)
{
	check_event(e);
	(*(uint64_t *)ctx)++;
	return 0;
}

static int stop_first(void *ctx, const struct rp_chrome_ev *e)
{
	(void)ctx;
	check_event(e);
	return STOP_RC;
}

static void check_why(int rc, const char why[RP_WHY_MAX])
{
	if (strnlen(why, RP_WHY_MAX) == RP_WHY_MAX)
		abort();
	if (rc == -EINVAL && strncmp(why, "buffer: byte ", 13) != 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rp_chrome_stats st;
	char why[RP_WHY_MAX];
	uint64_t seen = 0;
	int rc = rp_chrome_parse(data, size, count, &seen, &st, why);

	if (rc != 0 && rc != -EINVAL && rc != -ENOMEM)
		abort();
	check_why(rc, why);
	if (seen != st.events || st.bytes > size)
		abort();
	if (seen == 0)
		return 0;
	/* Parsing is deterministic: the same first event comes, and its value ends it. */
	rc = rp_chrome_parse(data, size, stop_first, NULL, &st, why);
	if (rc != STOP_RC || st.events != 1)
		abort();
	return 0;
}
