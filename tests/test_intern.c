// SPDX-License-Identifier: MIT
/*
 * Name interning: one id per (name, category, file, line), the same from every
 * thread and in fork children; every id resolves, through the consumer's bounded
 * reader, to exactly the strings interned; a full table or arena answers id 0
 * ("[overflow]") and counts it.
 *
 * Run with no argument: table of 64 entries. Run with "arena": a 512-byte arena.
 */
#include <pthread.h>
#include <string.h>
#include <sys/wait.h>

#include "support.h"

#define NAMES 64u
#define THREADS 8
#define PER_THREAD 40u

static struct rp_segment *seg;

static void expect_name(uint32_t id, const char *name, const char *cat, const char *file,
			uint32_t line)
{
	struct rp_name n;

	assert_int_equal(rp_segment_name(seg, id, &n), 0);
	assert_string_equal(n.name, name);
	assert_string_equal(n.category, cat);
	assert_string_equal(n.file, file);
	assert_int_equal(n.line, line);
}

static void test_intern_dedup_by_full_key(void **state)
{
	uint32_t a, b, c, d, e, f;

	(void)state;
	a = rp_intern("decode", "LLM", "srv.c", 10);
	b = rp_intern("decode", "LLM", "srv.c", 10);
	c = rp_intern("decode", "TOOL", "srv.c", 10);
	d = rp_intern("decode", "LLM", "srv.c", 11);
	e = rp_intern("decode", "LLM", NULL, 0);
	f = rp_intern("decode", NULL, NULL, 0);
	assert_true(a >= 1);
	assert_int_equal(a, b);
	assert_true(a != c && a != d && a != e && c != d && e != f);
	assert_int_equal(rp_intern(NULL, "", "", 0), rp_intern("?", NULL, NULL, 0));
	expect_name(a, "decode", "LLM", "srv.c", 10);
	expect_name(c, "decode", "TOOL", "srv.c", 10);
	expect_name(e, "decode", "LLM", "", 0);
	expect_name(f, "decode", "", "", 0);
	expect_name(RP_NAME_OVERFLOW, "[overflow]", "", "", 0);
}

static uint32_t thread_ids[THREADS][PER_THREAD];

static void *intern_many(void *arg)
{
	unsigned t = (unsigned)(uintptr_t)arg;
	char name[32];

	/* Every thread interns the same names, each starting at a different one. */
	for (unsigned k = 0; k < PER_THREAD; k++) {
		unsigned i = (k + t * 7) % PER_THREAD;
		snprintf(name, sizeof(name), "op%u", i);
		thread_ids[t][i] = rp_intern(name, "FUNCTION", __FILE__, i);
	}
	return NULL;
}

static void test_intern_same_ids_across_threads(void **state)
{
	pthread_t th[THREADS];
	uint32_t used0 = rp_test_hdr(seg)->names_used;
	char name[32];

	(void)state;
	for (uintptr_t t = 0; t < THREADS; t++)
		assert_int_equal(pthread_create(&th[t], NULL, intern_many, (void *)t), 0);
	for (unsigned t = 0; t < THREADS; t++)
		assert_int_equal(pthread_join(th[t], NULL), 0);
	for (unsigned i = 0; i < PER_THREAD; i++) {
		assert_true(thread_ids[0][i] >= 1);
		for (unsigned t = 1; t < THREADS; t++)
			assert_int_equal(thread_ids[t][i], thread_ids[0][i]);
		snprintf(name, sizeof(name), "op%u", i);
		expect_name(thread_ids[0][i], name, "FUNCTION", __FILE__, i);
	}
	assert_int_equal(rp_test_hdr(seg)->names_used, used0 + PER_THREAD);
}

/* A child keeps the ids its parent interned (programs cache them), in its own
 * segment; names interned after fork() are each process's own. */
static void test_intern_ids_survive_fork(void **state)
{
	uint32_t before = rp_intern("prefill", "LLM", NULL, 0);
	int status;
	pid_t pid;

	(void)state;
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char why[RP_WHY_MAX];
		struct rp_segment *c;
		struct rp_name n;
		uint32_t fresh = rp_intern("child-only", "TOOL", NULL, 0);

		if (rp_intern("prefill", "LLM", NULL, 0) != before || fresh == 0)
			_exit(1);
		if (rp_segment_open(rp_segment_path(), &c, why) != 0 || c->v.pid != getpid())
			_exit(2);
		if (rp_segment_name(c, before, &n) != 0 || strcmp(n.name, "prefill") != 0)
			_exit(3);
		if (rp_segment_name(c, fresh, &n) != 0 || strcmp(n.name, "child-only") != 0)
			_exit(4);
		if (rp_segment_name(c, thread_ids[0][3], &n) != 0 || strcmp(n.name, "op3") != 0)
			_exit(5);
		rp_shutdown(); /* _exit() skips atexit: unlink the child's segment here */
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	/* The parent's table did not see the child's name. */
	assert_int_equal(rp_intern("prefill", "LLM", NULL, 0), before);
	expect_name(before, "prefill", "LLM", "", 0);
}

/* Last: fills the table. */
static void test_intern_full_table_gives_overflow_id(void **state)
{
	uint32_t used = rp_test_hdr(seg)->names_used, id;
	uint64_t dropped0 = rp_test_hdr(seg)->names_dropped;
	char name[32];

	(void)state;
	for (uint32_t i = used; i < NAMES; i++) {
		snprintf(name, sizeof(name), "fill%u", i);
		assert_int_equal(rp_intern(name, "X", NULL, 0), i);
	}
	for (unsigned i = 0; i < 10; i++) {
		snprintf(name, sizeof(name), "late%u", i);
		assert_int_equal(rp_intern(name, "X", NULL, 0), RP_NAME_OVERFLOW);
	}
	assert_int_equal(rp_test_hdr(seg)->names_dropped - dropped0, 10);
	assert_int_equal(rp_test_hdr(seg)->names_used, NAMES);
	/* A scope's cached id 0 is kept: the full table is not asked again. */
	for (int i = 0; i < 3; i++) {
		RP_SCOPE_NAMED("never-fits", "X");
	}
	assert_int_equal(rp_test_hdr(seg)->names_dropped - dropped0, 11);
	/* Existing names still resolve to their ids. */
	id = rp_intern("fill63", "X", NULL, 0);
	assert_int_equal(id, 63);
	expect_name(id, "fill63", "X", "", 0);
}

/* A 512-byte arena: names fit until their bytes do not, then id 0, counted, and no
 * partial entry is published. */
static void test_intern_full_arena_gives_overflow_id(void **state)
{
	char name[100];
	uint32_t id, last = 0, n = 0;
	uint64_t used;

	(void)state;
	memset(name, 'a', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	for (unsigned i = 0; i < 10; i++) {
		name[0] = (char)('A' + i);
		id = rp_intern(name, "C", NULL, 0);
		if (id == 0)
			break;
		last = id;
		n++;
	}
	/* "[overflow]" and "" take 12 bytes; each name takes 100 + "C" 2 + "" 1. */
	assert_int_equal(n, (512 - 12) / 103);
	used = rp_test_hdr(seg)->arena_used;
	assert_int_equal(used, 12 + n * 103);
	assert_int_equal(rp_test_hdr(seg)->names_used, last + 1);
	assert_true(rp_test_hdr(seg)->names_dropped >= 1);
	/* A short name still fits in what is left. */
	id = rp_intern("s", "", NULL, 0);
	assert_int_equal(id, last + 1);
	expect_name(id, "s", "", "", 0);
}

static int setup(void **state)
{
	(void)state;
	seg = rp_test_open_self();
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	rp_segment_close(seg);
	return 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest table[] = {
		cmocka_unit_test(test_intern_dedup_by_full_key),
		cmocka_unit_test(test_intern_same_ids_across_threads),
		cmocka_unit_test(test_intern_ids_survive_fork),
		cmocka_unit_test(test_intern_full_table_gives_overflow_id),
	};
	const struct CMUnitTest arena[] = {
		cmocka_unit_test(test_intern_full_arena_gives_overflow_id),
	};

	setenv("RINGPROF_RING_EVENTS", "64", 1);
	setenv("RINGPROF_RINGS", "2", 1);
	if (argc > 1 && strcmp(argv[1], "arena") == 0) {
		setenv("RINGPROF_NAME_BYTES", "512", 1);
		return cmocka_run_group_tests(arena, setup, teardown);
	}
	setenv("RINGPROF_NAMES", "64", 1);
	return cmocka_run_group_tests(table, setup, teardown);
}
