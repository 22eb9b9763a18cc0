// SPDX-License-Identifier: MIT
/*
 * A user's C++ file: the C header through the C++ one, every wrapper instantiated.
 * check.sh compiles it with each standard, with and without exceptions and RTTI.
 */
#include <ringprof/ringprof.hpp>

int rp_header_use_cxx();

int rp_header_use_cxx()
{
	RINGPROF_SCOPE("outer", "CXX");
	{
		ringprof::Scope s(ringprof::intern("inner", "CXX", __FILE__, __LINE__));
		s.error();
		RINGPROF_COUNTER("queue", "CXX", 3);
	}
	ringprof::AsyncScope a(RINGPROF_ID("request", "CXX"), 1, 2);
	ringprof::AsyncScope b(static_cast<ringprof::AsyncScope &&>(a));
	b.error();
	b.end();
	RINGPROF_ASYNC_SCOPE("req2", "CXX", 3, 4);
	ringprof::Counter c("tokens", "CXX");
	c.set(5);
	ringprof::instant(c.id());
	{
		RP_SCOPE_NAMED("c-macro", "CXX");
	}
	{
		RINGPROF_FINE_SCOPE("fine", "CXX");
		ringprof::FineScope f(c.id());
	}
	return 0;
}
