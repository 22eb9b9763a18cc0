// SPDX-License-Identifier: MIT
/*
 * libFuzzer target over rp_chrome_parse(): any bytes, plain or gzip, must come
 * back as 0 or -EINVAL (-ENOMEM aside) without a crash, a leak or undefined
 * behaviour, with a why of the documented shape, and every event handed over
 * must keep the reader's promises: strings NUL-terminated within
 * RP_CHROME_STR_MAX, a value only on 'C' events, an id only with has_id. A second
 * pass stops at the first event, which must end the parse with the callback's
 * value. A third pass reads with the fast path off (yajl alone, the reference):
 * the same return, error text, counters and events. Seeds: tests/fuzz/seeds/chrome/
 * (run by tests/fuzz/run.sh). rp_jfast_strtod() is checked against strtod too.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../jsupport.h"
#include "jfast.h"
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

/* Every field of every event, in order, as one hash. */
static int digest(void *ctx, const struct rp_chrome_ev *e)
{
	check_event(e);
	return rp_test_chrome_digest(ctx, e);
}

/* The fast path and yajl alone see the same. */
static void check_same(const uint8_t *data, size_t size)
{
	struct rp_chrome_stats st[2];
	char why[2][RP_WHY_MAX];
	uint64_t h[2] = { 0, 0 };
	int rc[2];

	for (int k = 0; k < 2; k++) {
		rp_jfast_off = k == 1;
		rc[k] = rp_chrome_parse(data, size, digest, &h[k], &st[k], why[k]);
	}
	rp_jfast_off = false;
	if (rc[0] == -ENOMEM || rc[1] == -ENOMEM)
		return;
	if (rc[0] != rc[1] || strcmp(why[0], why[1]) != 0 || h[0] != h[1] ||
	    memcmp(&st[0], &st[1], sizeof(st[0])) != 0)
		abort();
}

/*
 * rp_jfast_strtod() against strtod, bit for bit, on a JSON number made from the
 * input's first bytes (sign, up to 20 digits, a point, an exponent in +-40): the
 * readers' times and values go through it on the fast path and yajl alone alike,
 * so check_same() cannot see it.
 */
static void check_strtod(const uint8_t *data, size_t size)
{
	char s[64];
	size_t n = 0, k = 0, nd;
	double a, b;

	if (size < 3)
		return;
	if (data[0] & 1)
		s[n++] = '-';
	nd = 1 + data[1] % 20;
	if (nd > size - 3) /* a digit per input byte: none, no number */
		nd = size - 3;
	if (nd == 0)
		return;
	for (k = 0; k < nd; k++) {
		if (k == 1 && (data[2] & 1))
			s[n++] = '.';
		s[n++] = (char)('0' + (k == 0 && nd > 1 && !(data[2] & 1) ? 1 + data[3 + k] % 9
									  : data[3 + k] % 10));
	}
	if (data[2] & 2)
		n += (size_t)snprintf(s + n, sizeof(s) - n, "e%d", (int)(data[2] >> 2) % 41 - 20);
	s[n] = '\0';
	a = rp_jfast_strtod(s);
	b = strtod(s, NULL);
	if (memcmp(&a, &b, sizeof(a)) != 0)
		abort();
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
	check_same(data, size);
	check_strtod(data, size);
	if (seen == 0)
		return 0;
	/* Parsing is deterministic: the same first event comes, and its value ends it. */
	rc = rp_chrome_parse(data, size, stop_first, NULL, &st, why);
	if (rc != STOP_RC || st.events != 1)
		abort();
	return 0;
}
