// SPDX-License-Identifier: MIT
/*
 * RINGPROF=0 (set by ctest, and here): every call is a no-op that creates nothing,
 * interns nothing and records nothing; the thread marks itself off after its first
 * call so later calls stop at two loads.
 */
#include <dirent.h>
#include <string.h>
#include <time.h>

#include "support.h"

static unsigned own_segments(void)
{
	char prefix[64];
	unsigned n = 0;
	DIR *d = opendir("/dev/shm");

	snprintf(prefix, sizeof(prefix), "ringprof.%s.%d.", getenv("RINGPROF_SESSION"),
		 (int)getpid());
	for (struct dirent *e; d && (e = readdir(d)) != NULL;)
		n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
	if (d)
		closedir(d);
	return n;
}

static void test_disabled_everything_is_a_noop(void **state)
{
	(void)state;
	assert_int_equal(rp_init(), 1);
	assert_int_equal(rp_intern("x", "y", "z", 1), RP_NAME_OVERFLOW);
	for (int i = 0; i < 1000000; i++) {
		rp_begin(1);
		rp_end(1);
	}
	rp_counter(1, 5);
	rp_async_begin(1, 2, 3);
	rp_async_end(1, 2, 3);
	rp_link(1, RP_LINK_LAUNCH, 0, 9);
	rp_instant(1);
	{
		RP_SCOPE_NAMED("scoped", "FUNCTION");
	}
	assert_int_equal(rp_thread_state.off, 1);
	assert_null(rp_thread_state.slots);
	assert_null(rp_segment_path());
	assert_null(rp_clock());
	assert_int_equal(own_segments(), 0);
	rp_shutdown();
}

static void test_disabled_now_is_monotonic_ns(void **state)
{
	struct timespec a, b;

	(void)state;
	clock_gettime(CLOCK_MONOTONIC, &a);
	uint64_t t = rp_now();
	clock_gettime(CLOCK_MONOTONIC, &b);
	assert_int_equal(rp_clock_source, RP_CLOCK_MONOTONIC);
	assert_true(t >= (uint64_t)a.tv_sec * 1000000000u + (uint64_t)a.tv_nsec);
	assert_true(t <= (uint64_t)b.tv_sec * 1000000000u + (uint64_t)b.tv_nsec);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_disabled_everything_is_a_noop),
		cmocka_unit_test(test_disabled_now_is_monotonic_ns),
	};

	setenv("RINGPROF", "0", 1);
	if (getenv("RINGPROF_SESSION") == NULL)
		setenv("RINGPROF_SESSION", "t_disabled", 1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
