// SPDX-License-Identifier: MIT
/*
 * rp_srcline_path() (producers/auto/srcline.c): ringprof-auto names a function's file
 * one way whatever its unit spelled it. The oracle is realpath(3) on a real tree of
 * directories made here (no symbolic links in it, so the file system's resolution is
 * the lexical one): random spellings of paths to its files, with ".", "..", empty
 * components, relative to a directory or not, each normalized as realpath says; and
 * the edges realpath cannot say (paths that do not exist, leading "..", the root).
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "support.h"
#include "../producers/auto/srcline.h"

#define WALKS 20000

static char base[PATH_MAX - 64]; /* room for the tree below it */

/* base/d0..d2/d0..d2, each with a file "f.h" */
static void make_tree(void)
{
	char tmp[] = "/tmp/rp_srcline_XXXXXX", real[PATH_MAX], p[PATH_MAX];

	assert_non_null(mkdtemp(tmp));
	assert_non_null(realpath(tmp, real));
	assert_true(strlen(real) < sizeof(base));
	strcpy(base, real);
	for (int i = -1; i < 3; i++)
		for (int j = -1; j < 3; j++) {
			if (i < 0 && j >= 0)
				continue;
			if (i < 0)
				snprintf(p, sizeof(p), "%s", base);
			else if (j < 0)
				snprintf(p, sizeof(p), "%s/d%d", base, i);
			else
				snprintf(p, sizeof(p), "%s/d%d/d%d", base, i, j);
			if (i >= 0)
				assert_int_equal(mkdir(p, 0700), 0);
			strcat(p, "/f.h");
			rp_test_write_file(p, "x", 1);
		}
}

/* A random spelling of a path from the tree's top to one of its f.h: steps into a
 * child, ".", "..", "" (a doubled slash), never above the top. */
static void spell(char *out, size_t size, unsigned *seed)
{
	int depth = 0;

	out[0] = '\0';
	for (int n = rand_r(seed) % 9; n > 0; n--) {
		int k = rand_r(seed) % 5;
		char step[8];

		if (k <= 1 && depth < 2) {
			snprintf(step, sizeof(step), "d%d/", rand_r(seed) % 3);
			depth++;
		} else if (k == 2) {
			snprintf(step, sizeof(step), "./");
		} else if (k == 3 && depth > 0) {
			snprintf(step, sizeof(step), "../");
			depth--;
		} else if (out[0] != '\0') { /* not first: that would be the root */
			snprintf(step, sizeof(step), "/");
		} else {
			snprintf(step, sizeof(step), "./");
		}
		assert_true(strlen(out) + strlen(step) < size);
		strcat(out, step);
	}
	assert_true(strlen(out) + 4 < size);
	strcat(out, "f.h");
}

static void test_srcline_path_as_realpath(void **state)
{
	char rel[256], abs[PATH_MAX + 256], want[PATH_MAX], got[PATH_MAX];
	unsigned seed = 21;

	(void)state;
	make_tree();
	for (int i = 0; i < WALKS; i++) {
		spell(rel, sizeof(rel), &seed);
		snprintf(abs, sizeof(abs), "%s/%s", base, rel);
		assert_non_null(realpath(abs, want));
		/* absolute, no directory to join */
		assert_int_equal(rp_srcline_path(got, sizeof(got), NULL, abs), 0);
		if (strcmp(got, want) != 0)
			print_message("    %s -> %s, realpath %s\n", abs, got, want);
		assert_string_equal(got, want);
		/* relative, joined to the unit's directory (itself spelled loosely) */
		snprintf(abs, sizeof(abs), "%s/./d0/..//", base);
		assert_int_equal(rp_srcline_path(got, sizeof(got), abs, rel), 0);
		assert_string_equal(got, want);
		/* an absolute path ignores the directory */
		snprintf(abs, sizeof(abs), "%s/%s", base, rel);
		assert_int_equal(rp_srcline_path(got, sizeof(got), "/elsewhere", abs), 0);
		assert_string_equal(got, want);
	}
	snprintf(abs, sizeof(abs), "rm -rf %s", base);
	assert_int_equal(system(abs), 0);
}

static void test_srcline_path_edges(void **state)
{
	static const char *const cases[][3] = {
		/* dir, path, normalized */
		{ NULL, "x.h", "x.h" },
		{ NULL, "./x.h", "x.h" },
		{ NULL, "a/../x.h", "x.h" },
		{ NULL, "../x.h", "../x.h" },
		{ NULL, "a/../../b/./x.h", "../b/x.h" },
		{ NULL, "../../x.h", "../../x.h" },
		{ "rel/dir", "x.h", "x.h" }, /* a relative directory says nothing */
		{ "/src", "x.h", "/src/x.h" },
		{ "/src", "../../../x.h", "/x.h" }, /* above the root: the root */
		{ NULL, "/..", "/" },
		{ NULL, "//a//b/", "/a/b" },
		{ NULL, ".", "." },
		{ NULL, "a/..", "." },
	};
	char out[64], tiny[6];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(rp_srcline_path(out, sizeof(out), cases[i][0], cases[i][1]), 0);
		assert_string_equal(out, cases[i][2]);
	}
	/* no room: said, never a truncated path */
	assert_int_equal(rp_srcline_path(tiny, sizeof(tiny), NULL, "/abc/def"), -ENAMETOOLONG);
	assert_int_equal(rp_srcline_path(tiny, sizeof(tiny), NULL, "/abcd"), 0);
	assert_string_equal(tiny, "/abcd");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_srcline_path_as_realpath),
		cmocka_unit_test(test_srcline_path_edges),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
