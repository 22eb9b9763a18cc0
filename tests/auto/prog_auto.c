// SPDX-License-Identifier: MIT
/*
 * A program with a known call tree, built with -finstrument-functions and linked
 * with ringprof-auto (no ringprof call in it): test_auto runs it under a live engine
 * and checks the call count of every function against its own model of this tree.
 *
 *	prog_auto N K M P T F
 *	run_tree():  fib(N) (recursive, static), K x leaf_small() (static),
 *		     M x shlib_fn() (in libautolib.so; calls its static shlib_helper()),
 *		     1 x cxx_entry() (C++; P x demo::ns::work(int))
 *	main runs run_tree() once, T threads (worker()) once each, and with F=1 a
 *	forked child once more (it exits from inside main).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int shlib_fn(int x);
int cxx_entry(int p);

static int n_fib, k_leaf, m_shlib, p_cxx;
static __thread volatile int sink; /* per thread: the threads share nothing */

static int fib(int n)
{
	return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

static __attribute__((noinline)) void leaf_small(int i)
{
	sink += i;
}

static void run_tree(void)
{
	sink += fib(n_fib);
	for (int i = 0; i < k_leaf; i++)
		leaf_small(i);
	for (int i = 0; i < m_shlib; i++)
		sink += shlib_fn(i);
	sink += cxx_entry(p_cxx);
}

static void *worker(void *arg)
{
	(void)arg;
	run_tree();
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th[64];
	int t, f;

	if (argc != 7) {
		fprintf(stderr, "usage: prog_auto N K M P T F\n");
		return 2;
	}
	n_fib = atoi(argv[1]);
	k_leaf = atoi(argv[2]);
	m_shlib = atoi(argv[3]);
	p_cxx = atoi(argv[4]);
	t = atoi(argv[5]);
	f = atoi(argv[6]);
	if (t < 0 || t > 64)
		return 2;
	run_tree();
	for (int i = 0; i < t; i++)
		if (pthread_create(&th[i], NULL, worker, NULL) != 0)
			return 1;
	for (int i = 0; i < t; i++)
		pthread_join(th[i], NULL);
	if (f) {
		pid_t pid = fork();
		if (pid == 0) {
			run_tree();
			exit(0);
		}
		int st;
		if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
		    WEXITSTATUS(st) != 0)
			return 1;
	}
	return 0;
}
