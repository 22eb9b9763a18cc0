// SPDX-License-Identifier: MIT
/*
 * A user's C file: every inline function of the public header, instantiated, so the
 * header check (check.sh) compiles all of them under each standard and compiler.
 */
#include <ringprof/ringprof.h>

int rp_header_use(void);

int rp_header_use(void)
{
	uint32_t id = rp_intern("use", "C", __FILE__, __LINE__);
	const struct rp_wire_clock *c = rp_clock();

	rp_begin(id);
	rp_end(id);
	rp_instant(id);
	rp_counter(id, -1);
	rp_async_begin(id, 1, 2);
	rp_async_end(id, 1, 2);
	rp_async_begin(id, 1, 3);
	rp_async_end_error(id, 1, 3);
	rp_child_begin(id, 5, 0, 1);
	rp_child_end_error(id, 5, 1);
	rp_begin(id);
	rp_end_error(id);
	rp_link(id, RP_LINK_LAUNCH, 0, 7);
	rp_emit_at(rp_now(), RP_EV_INSTANT, 0, id, 0, 0);
	{
		RP_SCOPE(id);
	}
	{
		RP_SCOPE_NAMED("named", "C");
	}
	rp_begin_fine(id);
	rp_end_fine(id);
	{
		RP_SCOPE_FINE(id);
	}
	{
		RP_SCOPE_FINE_NAMED("fine", "C");
	}
	return (c ? (int)rp_ticks_to_ns(c, rp_now()) : 0) & 0;
}
