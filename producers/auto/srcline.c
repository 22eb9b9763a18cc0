// SPDX-License-Identifier: MIT
/*
 * Source lines through libdwfl (see srcline.h). One Dwfl session for the process,
 * reporting the modules in /proc/self/maps; an address outside every reported
 * module (a library dlopen()ed since) reports the maps again, once per such miss.
 * The session is never freed: the file names it returns stay valid for the cache.
 * Debug info is looked up the standard way (the object itself, then .gnu_debuglink
 * and build-id files under /usr/lib/debug).
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <unistd.h>

#include "srcline.h"

#ifdef RP_AUTO_DWARF
#include <elfutils/libdwfl.h>

static char *debuginfo_path;
static const Dwfl_Callbacks callbacks = {
	.find_elf = dwfl_linux_proc_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
	.debuginfo_path = &debuginfo_path,
};
static Dwfl *dwfl;
static bool failed;

static bool report_maps(void)
{
	dwfl_report_begin(dwfl);
	if (dwfl_linux_proc_report(dwfl, getpid()) != 0) {
		dwfl_report_end(dwfl, NULL, NULL);
		return false;
	}
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

int rp_srcline(uintptr_t addr, const char **file, uint32_t *line)
{
	Dwfl_Module *m = module_of(addr);
	Dwfl_Line *l;
	const char *src;
	int lineno = 0;

	if (!m || !(l = dwfl_module_getsrc(m, (Dwarf_Addr)addr)))
		return -ENOENT;
	src = dwfl_lineinfo(l, NULL, &lineno, NULL, NULL, NULL);
	if (!src || lineno <= 0)
		return -ENOENT;
	*file = src;
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
