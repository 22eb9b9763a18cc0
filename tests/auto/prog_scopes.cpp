// SPDX-License-Identifier: MIT
/*
 * ringprof.hpp's RAII scopes, left every way a block can be left: test_auto runs
 * this under a live engine and checks every caller/callee edge and call count.
 *
 *	prog_scopes A B T
 *	top():  A x mid(B); 1 x thrower() (a scope unwound by an exception);
 *		1 x "block" (a ringprof::Scope in a nested block)
 *	mid(b): leaf(i) for i = 0..b-1, leaving the loop by break at the last one;
 *	leaf(i): returns early for odd i, at the end for even i
 *	main runs top() once and on T threads once each; an AsyncScope per top() is
 *	moved to, and ended on, the thread that joins it; a counter sample per top().
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <ringprof/ringprof.hpp>

static int a_mid, b_leaf;
static __thread volatile int sink; /* per thread: the threads share nothing */

static void leaf(int i)
{
	RINGPROF_SCOPE("leaf", "CXX");
	if (i % 2)
		return;
	sink += i;
}

static void mid(int b)
{
	RINGPROF_SCOPE("mid", "CXX");
	for (int i = 0;; i++) {
		leaf(i);
		if (i == b - 1)
			break;
	}
}

static void thrower()
{
	RINGPROF_SCOPE("thrower", "CXX");
	throw 42;
}

static ringprof::AsyncScope top(uint64_t track)
{
	RINGPROF_SCOPE("top", "CXX");
	ringprof::AsyncScope req(RINGPROF_ID("request", "CXX"), track, 1);
	for (int i = 0; i < a_mid; i++)
		mid(b_leaf);
	try {
		thrower();
	} catch (int) {
		sink += 1;
	}
	{
		ringprof::Scope s(RINGPROF_ID("block", "CXX"));
		RINGPROF_COUNTER("depth", "CXX", a_mid);
	}
	return req; // moved out: ends in the caller
}

static void *worker(void *arg)
{
	ringprof::AsyncScope *out = static_cast<ringprof::AsyncScope *>(arg);
	*out = top(reinterpret_cast<uintptr_t>(arg));
	return nullptr;
}

int main(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	a_mid = atoi(argv[1]);
	b_leaf = atoi(argv[2]);
	int t = atoi(argv[3]);
	if (t < 0 || t > 32 || b_leaf < 1)
		return 2;
	{
		ringprof::AsyncScope mine = top(0);
	}
	pthread_t th[32];
	ringprof::AsyncScope *reqs[32];
	for (int i = 0; i < t; i++) {
		reqs[i] = new ringprof::AsyncScope(); // records nothing until assigned
		if (pthread_create(&th[i], nullptr, worker, reqs[i]) != 0)
			return 1;
	}
	for (int i = 0; i < t; i++) {
		pthread_join(th[i], nullptr);
		delete reqs[i]; // the request ends here, on the main thread
	}
	return 0;
}
