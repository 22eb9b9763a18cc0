/* SPDX-License-Identifier: MIT */
/*
 * Source file and line of a code address, from the DWARF line tables of the loaded
 * objects (elfutils' libdwfl), for ringprof-auto. Built only when libdw was found
 * (RP_AUTO_DWARF); otherwise every lookup says -ENOTSUP. Slow path: once per
 * function address, under the caller's lock.
 */
#ifndef RP_AUTO_SRCLINE_H
#define RP_AUTO_SRCLINE_H

#include <stddef.h>
#include <stdint.h>

/*
 * rp_srcline() - where the code at @addr comes from.
 * @file: set to the source path, one spelling per file (rp_srcline_path() of it and
 *	  its unit's compilation directory); owned by the library, valid until the
 *	  next call (callers are serialised)
 * @line: set to its line
 * @return 0, -ENOENT (no line information covers @addr: no -g, stripped, or
 *	   debug info elsewhere), or -ENOTSUP (built without libdw).
 */
int rp_srcline(uintptr_t addr, const char **file, uint32_t *line);

/*
 * rp_srcline_name() - the symbol at @addr as libdwfl finds it, separate debug files
 * included: for stripped objects whose own tables do not name it. NULL if none.
 */
const char *rp_srcline_name(uintptr_t addr);

/*
 * rp_srcline_path() - @path made absolute with @dir (when it is relative and @dir
 * absolute) and written without "." components, empty ones nor "dir/.." pairs
 * (lexically: symbolic links are not followed), into @out of @size bytes.
 * @return 0, or -ENAMETOOLONG (@out holds nothing to use).
 */
int rp_srcline_path(char *out, size_t size, const char *dir, const char *path);

/* rp_srcline_preload() - begin the session and report the objects loaded now. */
void rp_srcline_preload(void);

#endif
