/* SPDX-License-Identifier: MIT */
/*
 * Two sweeps in the same state: every field, and the change points their history
 * holds (test_sweep's group steps against the general ones, test_analyses' sweeps
 * against standalone ones fed the same events). Include after cmocka.h.
 */
#ifndef RP_TEST_SWEEPCHECK_H
#define RP_TEST_SWEEPCHECK_H

#include "sweep.h"

static inline void assert_sweep_state_equal(const struct rp_sweep *x, const struct rp_sweep *y)
{
	assert_int_equal(x->n_alloc, y->n_alloc);
	assert_int_equal(x->max_level, y->max_level);
	assert_memory_equal(x->ns, y->ns, x->n_alloc * sizeof(*x->ns)); /* the same form */
	for (uint32_t c = 0; c < x->n_alloc; c++)
		assert_int_equal(rp_sweep_ns(x, c), rp_sweep_ns(y, c));
	assert_int_equal(x->level, y->level);
	assert_int_equal(x->level_before, y->level_before);
	assert_int_equal(x->first_t, y->first_t);
	assert_int_equal(x->last_t, y->last_t);
	assert_int_equal(x->excess_hi, y->excess_hi);
	assert_int_equal(x->excess_lo, y->excess_lo);
	assert_int_equal(x->hist_seq, y->hist_seq);
	assert_int_equal(x->hist_cap, y->hist_cap);
	assert_int_equal(x->n_fast, y->n_fast);
	assert_int_equal(x->opened, y->opened);
	assert_int_equal(x->over_cap_ns, y->over_cap_ns);
	assert_int_equal(x->unmatched, y->unmatched);
	assert_int_equal(x->backwards, y->backwards);
	assert_int_equal(x->hist_misses, y->hist_misses);
	assert_int_equal(x->nomem, y->nomem);
	for (uint64_t q = 0; q < rp_sweep_hist_n(x); q++) {
		uint32_t i = (uint32_t)(x->hist_seq - 1 - q) & x->hist_mask;

		assert_int_equal(x->hist_t[i], y->hist_t[i]);
		assert_int_equal(x->hist_level[i], y->hist_level[i]);
	}
}

#endif
