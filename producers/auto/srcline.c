// SPDX-License-Identifier: MIT
/*
 * Source lines through libdwfl (see srcline.h). One Dwfl session for the process,
 * reporting the objects the dynamic loader has loaded (dl_iterate_phdr), each at
 * the load bias the loader gives; an address outside every reported module (a
 * library dlopen()ed since) reports them again, once per such miss.
 * Not /proc/self/maps: libdwfl takes a file's consecutive mappings there for one
 * module placed at the first, and a read-only mapping of the same file made to read
 * it (symtab.c's, libelf's own) that lands just below the loaded image moves that
 * module's start, so every address in it missed its line, or met another one.
 * The session is never freed: the file names it returns stay valid for the cache.
 * Debug info is looked up the standard way (the object itself, then .gnu_debuglink
 * and build-id files under /usr/lib/debug).
 */
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include "srcline.h"

/* Appends @n bytes of @s to out[*len] if they fit (then true). */
static bool put(char *out, size_t size, size_t *len, const char *s, size_t n)
{
	if (*len + n >= size)
		return false;
	memcpy(out + *len, s, n);
	*len += n;
	out[*len] = '\0';
	return true;
}

/* One component of @p ([@c, @c + @n)) onto the path in @out: "." is nothing, ".."
 * takes the last component off when there is one to take (at the root: nothing). */
static bool component(char *out, size_t size, size_t *len, size_t root, const char *c, size_t n)
{
	if (n == 0 || (n == 1 && c[0] == '.'))
		return true;
	if (n == 2 && c[0] == '.' && c[1] == '.') {
		char *slash = *len > root ? memrchr(out + root, '/', *len - root) : NULL;
		const char *last = slash ? slash + 1 : out + root;

		if (*len > root && strcmp(last, "..") != 0) {
			*len = slash ? (size_t)(slash - out) : root;
			out[*len] = '\0';
			return true;
		}
		if (root == 1) /* "/..": the root */
			return true;
	}
	return (*len == root || put(out, size, len, "/", 1)) && put(out, size, len, c, n);
}

int rp_srcline_path(char *out, size_t size, const char *dir, const char *path)
{
	const char *parts[2] = { dir, path };
	size_t len = 0, root;

	if (size == 0)
		return -ENAMETOOLONG;
	out[0] = '\0';
	if (path[0] == '/' || dir == NULL || dir[0] != '/')
		parts[0] = NULL; /* absolute already, or nothing to make it so */
	root = (parts[0] ? parts[0] : path)[0] == '/';
	if (root && !put(out, size, &len, "/", 1))
		return -ENAMETOOLONG;
	for (int i = 0; i < 2; i++) {
		for (const char *c = parts[i]; c != NULL && *c;) {
			size_t n = strcspn(c, "/");

			if (!component(out, size, &len, root, c, n))
				return -ENAMETOOLONG;
			c += n + (c[n] == '/');
		}
	}
	if (len == 0 && !put(out, size, &len, ".", 1))
		return -ENAMETOOLONG;
	return 0;
}

#ifdef RP_AUTO_DWARF
#include <dwarf.h>
#include <elfutils/libdwfl.h>

static char *debuginfo_path;
static const Dwfl_Callbacks callbacks = {
	.find_elf = dwfl_linux_proc_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
	.debuginfo_path = &debuginfo_path,
};
static Dwfl *dwfl;
static bool failed;

/*
 * One loaded object: the executable (no name: its file is /proc/self/exe), a
 * library by its path; the vDSO and anything else without a file is left out. Its
 * range is where the loader put its segments (the first one's page as libdwfl
 * aligns it, for the same bias); the file is opened on the first lookup in it, as
 * a module of /proc/self/maps would be, so no descriptor is held per object.
 */
static int report_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	const char *path = info->dlpi_name;
	GElf_Addr lo = 0, hi = 0;
	bool first = true;
	unsigned *n = arg;

	(void)size;
	if (path == NULL || path[0] == '\0')
		path = *n == 0 ? "/proc/self/exe" : NULL;
	(*n)++;
	if (path == NULL || path[0] != '/')
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type != PT_LOAD)
			continue;
		if (first)
			lo = ph->p_vaddr & -(ph->p_align ? ph->p_align : 1);
		first = false;
		if (ph->p_vaddr + ph->p_memsz > hi)
			hi = ph->p_vaddr + ph->p_memsz;
	}
	if (!first && hi > lo) /* a module that cannot be reported is no module */
		dwfl_report_module(dwfl, path, info->dlpi_addr + lo, info->dlpi_addr + hi);
	return 0;
}

static bool report_maps(void)
{
	unsigned n = 0;

	dwfl_report_begin(dwfl);
	dl_iterate_phdr(report_object, &n);
	return dwfl_report_end(dwfl, NULL, NULL) == 0;
}

/* The module holding @addr, the session begun on first use; NULL if none. */
static Dwfl_Module *module_of(uintptr_t addr)
{
	Dwfl_Module *m;

	if (failed)
		return NULL;
	if (!dwfl) {
		dwfl = dwfl_begin(&callbacks);
		if (!dwfl || !report_maps()) {
			failed = true;
			return NULL;
		}
	}
	m = dwfl_addrmodule(dwfl, (Dwarf_Addr)addr);
	if (!m && report_maps())
		m = dwfl_addrmodule(dwfl, (Dwarf_Addr)addr);
	return m;
}

void rp_srcline_preload(void)
{
	module_of(0);
}

const char *rp_srcline_name(uintptr_t addr)
{
	Dwfl_Module *m = module_of(addr);

	return m ? dwfl_module_addrname(m, (GElf_Addr)addr) : NULL;
}

/* The compilation directory of the unit @l belongs to, or NULL. */
static const char *comp_dir(Dwfl_Line *l)
{
	Dwarf_Die *cu = dwfl_linecu(l);
	Dwarf_Attribute a;

	return cu && dwarf_attr(cu, DW_AT_comp_dir, &a) ? dwarf_formstring(&a) : NULL;
}

int rp_srcline(uintptr_t addr, const char **file, uint32_t *line)
{
	static char norm[PATH_MAX]; /* callers are serialised (srcline.h) */
	Dwfl_Module *m = module_of(addr);
	Dwfl_Line *l;
	const char *src;
	int lineno = 0;

	if (!m || !(l = dwfl_module_getsrc(m, (Dwarf_Addr)addr)))
		return -ENOENT;
	src = dwfl_lineinfo(l, NULL, &lineno, NULL, NULL, NULL);
	if (!src || lineno <= 0)
		return -ENOENT;
	/* One spelling per file: a static inline function of a header is one copy per
	 * unit that includes it, each named by that unit's spelling of the path ("x.h",
	 * "./x.h", "/src/inc/../x.h"), and would be one row per spelling. */
	*file = rp_srcline_path(norm, sizeof(norm), comp_dir(l), src) == 0 ? norm : src;
	*line = (uint32_t)lineno;
	return 0;
}

#else

void rp_srcline_preload(void)
{
}

const char *rp_srcline_name(uintptr_t addr)
{
	(void)addr;
	return NULL;
}

int rp_srcline(uintptr_t addr, const char **file, uint32_t *line)
{
	(void)addr;
	(void)file;
	(void)line;
	return -ENOTSUP;
}

#endif
