/* SPDX-License-Identifier: MIT */
/*
 * A report through a snapshot, as a file would carry it: encoded, then decoded. For
 * tests that check a merge of two engines' snapshots (include after cmocka.h).
 */
#ifndef RP_TEST_SNAPSHOT_UTIL_H
#define RP_TEST_SNAPSHOT_UTIL_H

#include "snapshot.h"

static inline void rp_test_through_snapshot(const struct rp_report *in, struct rp_report *out)
{
	struct rp_membuf m = { 0 };
	char why[RP_WHY_MAX];

	assert_int_equal(rp_snapshot_encode(in, rp_membuf_sink, &m), 0);
	assert_int_equal(rp_snapshot_decode(m.data, m.len, out, why), 0);
	rp_membuf_free(&m);
}

#endif
