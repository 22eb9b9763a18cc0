/* SPDX-License-Identifier: MIT */
/*
 * Function names from the ELF symbol tables of the loaded objects, for ringprof-auto:
 * the executable and every shared library, static (local) functions included, which
 * dladdr() alone does not see (it reads only the dynamic symbol table). Slow path
 * only: called once per function address, under the caller's lock.
 */
#ifndef RP_AUTO_SYMTAB_H
#define RP_AUTO_SYMTAB_H

#include <stddef.h>
#include <stdint.h>

struct rp_sym {
	const char *name;	/* the raw (mangled) symbol name; NULL: unknown */
	const char *object;	/* path of the object the address is in; NULL: unknown */
	uintptr_t start;	/* run-time address of the symbol */
};

/*
 * rp_symtab_lookup() - the function symbol containing @addr.
 * The strings live as long as the process (the object's symbol table is mapped
 * once and kept). Not thread-safe: the caller serialises.
 * @return 0, or -ENOENT when no object or no symbol covers @addr (fields as known).
 */
int rp_symtab_lookup(uintptr_t addr, struct rp_sym *out);

/*
 * rp_symtab_preload() - read the symbol tables of every object loaded now, so that
 * a lookup in them is a binary search (objects loaded later are read on their first
 * lookup). Not thread-safe: the caller serialises.
 */
void rp_symtab_preload(void);

/*
 * rp_symtab_base_len() - the length of @name without the suffixes compilers give the
 * copies they make of one source function: gcc's ".constprop.N", ".isra.N",
 * ".part.N", ".cold", ".lto_priv.N", ".localalias", LLVM's ".llvm.N",
 * ".specialized.N", ".__uniq.N" (and several of them, as "f.constprop.0.isra.0").
 * Any other dot is kept: no such copy, so nothing to fold.
 */
size_t rp_symtab_base_len(const char *name);

#endif
