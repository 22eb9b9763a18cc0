// SPDX-License-Identifier: MIT
/*
 * rp_srcline_path() (producers/auto/srcline.c): ringprof-auto names a function's file
 * one way whatever its unit spelled it. The oracle is realpath(3) on a real tree of
 * directories made here (no symbolic links in it, so the file system's resolution is
 * the lexical one): random spellings of paths to its files, with ".", "..", empty
 * components, relative to a directory or not, each normalized as realpath says; and
 * the edges realpath cannot say (paths that do not exist, leading "..", the root).
 *
 * rp_srcline() (with libdw): a library's lines found where the loader put it while
 * a read-only mapping of the same file lies just below its image (symtab.c reads
 * .symtab so; /proc/self/maps then shows the file's mappings in a row, which read
 * as one module placed at the copy). The oracle is the library's source: the line
 * of the function's declarator, or of its brace.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#ifdef RP_AUTO_DWARF
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>
#endif

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

#ifdef RP_AUTO_DWARF
/* tests/auto/autolib.c is built with -finstrument-functions: its hooks, here. */
void __cyg_profile_func_enter(void *fn, void *site)
{
	(void)fn;
	(void)site;
}

void __cyg_profile_func_exit(void *fn, void *site)
{
	(void)fn;
	(void)site;
}

/* The lowest address the object named @arg (its path) is mapped at, set in @arg. */
struct image {
	const char *path;
	uintptr_t low;
};

static int find_image(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct image *im = arg;
	uintptr_t low = UINTPTR_MAX;

	(void)size;
	if (!info->dlpi_name || strcmp(info->dlpi_name, im->path) != 0)
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_LOAD &&
		    info->dlpi_addr + info->dlpi_phdr[i].p_vaddr < low)
			low = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
	im->low = low & ~(uintptr_t)(sysconf(_SC_PAGESIZE) - 1);
	return 1;
}

/* True when no file is mapped in [@from, @to) (/proc/self/maps). */
static bool no_file_between(uintptr_t from, uintptr_t to)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[1024];
	bool clear = true;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		int off = 0;

		if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %n", &lo, &hi, &off) >= 2 && off > 0 &&
		    line[off] == '/' && lo < to && hi > from)
			clear = false;
	}
	fclose(f);
	return clear;
}

static void expect_shlib_fn(uintptr_t fn, uint32_t want)
{
	const char *file = NULL;
	uint32_t line = 0;

	assert_int_equal(rp_srcline(fn, &file, &line), 0);
	assert_non_null(strstr(file, "/auto/autolib.c"));
	assert_string_equal(strstr(file, "/auto/autolib.c"), "/auto/autolib.c");
	print_message("    shlib_fn: %s:%u (declarator at %u)\n", file, line, want);
	assert_true(line == want || line == want + 1);
}

static void test_srcline_library_beside_its_copy(void **state)
{
	const long page = sysconf(_SC_PAGESIZE);
	struct image im = { RP_TEST_AUTOLIB, 0 };
	uint32_t want = rp_test_line_of(RP_TEST_SRCDIR "/auto/autolib.c", "int shlib_fn(int x)\n");
	void *lib, *sym, *copy = MAP_FAILED, *heap;
	uintptr_t fn, len = 0;
	struct stat st;
	int fd;

	(void)state;
	assert_true(want > 0);
	/* Loaded last, the library lies below every other object, free space below it. */
	lib = dlopen(RP_TEST_AUTOLIB, RTLD_NOW | RTLD_LOCAL);
	assert_non_null(lib);
	sym = dlsym(lib, "shlib_fn");
	assert_non_null(sym);
	fn = (uintptr_t)sym;
	assert_int_equal(dl_iterate_phdr(find_image, &im), 1);
	fd = open(RP_TEST_AUTOLIB, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	len = ((uintptr_t)st.st_size + (uintptr_t)page - 1) & ~(uintptr_t)(page - 1);
	/* The whole file mapped one to 64 pages below the image, nothing in between. */
	for (int gap = 1; gap <= 64 && copy == MAP_FAILED; gap++) {
		uintptr_t at = im.low - (uintptr_t)gap * (uintptr_t)page - len;

		copy = mmap((void *)at, len, PROT_READ, MAP_PRIVATE | MAP_FIXED_NOREPLACE, fd, 0);
		if (copy != MAP_FAILED && (copy != (void *)at || !no_file_between(at + len, im.low))) {
			munmap(copy, len);
			copy = MAP_FAILED;
		}
	}
	close(fd);
	if (copy == MAP_FAILED) {
		print_message("no free pages below the library: nothing to test\n");
		dlclose(lib);
		skip();
	}
	/* The session's first report sees the copy ... */
	expect_shlib_fn(fn, want);
	/* ... and so does a report again, after an address outside every object. */
	heap = malloc(64);
	assert_non_null(heap);
	assert_int_equal(rp_srcline((uintptr_t)heap, &(const char *){ NULL }, &(uint32_t){ 0 }),
			 -ENOENT);
	free(heap);
	expect_shlib_fn(fn, want);
	munmap(copy, len);
	/* The library stays loaded: the session's module may hold its file. */
}
#endif

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_srcline_path_as_realpath),
		cmocka_unit_test(test_srcline_path_edges),
#ifdef RP_AUTO_DWARF
		cmocka_unit_test(test_srcline_library_beside_its_copy),
#endif
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
