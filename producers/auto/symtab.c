// SPDX-License-Identifier: MIT
/*
 * ELF symbol tables of the loaded objects (see symtab.h).
 *
 * dladdr1(RTLD_DL_LINKMAP) says which object an address is in and its load bias;
 * the object's file (/proc/self/exe for the executable) is mapped read-only once,
 * its .symtab (or, stripped, its .dynsym) read into a sorted array of function
 * symbols, and the mapping kept so that names can point into its string table.
 * Every offset and size read from the file is checked against the file's size
 * before use: a truncated or odd file gives "no symbol", never a bad read.
 *
 * A function the compiler copied (a clone specialised for constant arguments, the
 * split-off part of a partially inlined one, an LTO-promoted static) has a symbol of
 * its own, "f.constprop.0", "f.llvm.1234"; rp_symtab_base_len() tells the source
 * function's name inside it, so that every copy is one row of the report, as the
 * user wrote it.
 */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "symtab.h"

#define MAX_OBJECTS 512

struct fsym {
	uintptr_t value;	/* link-time address */
	uint64_t size;
	uint32_t name;		/* offset in the string table */
};

struct object {
	const struct link_map *lm;
	uintptr_t bias;
	const char *path;	/* l_name, or "/proc/self/exe" */
	struct fsym *syms;
	size_t n;
	const char *strtab;
	size_t strsz;
};

static struct object objects[MAX_OBJECTS];
static unsigned n_objects;

static int cmp_fsym(const void *a, const void *b)
{
	const struct fsym *x = a, *y = b;

	return x->value < y->value ? -1 : x->value > y->value;
}

static bool in_file(uint64_t off, uint64_t len, size_t size)
{
	return off <= size && len <= size - off;
}

/* The symbol and string table sections to use: .symtab, else .dynsym. */
static const Elf64_Shdr *pick_symtab(const unsigned char *f, size_t size, const Elf64_Ehdr *eh,
				     const Elf64_Shdr **str)
{
	const Elf64_Shdr *sh = (const Elf64_Shdr *)(f + eh->e_shoff), *best = NULL;

	for (unsigned i = 0; i < eh->e_shnum; i++) {
		if (sh[i].sh_type == SHT_SYMTAB || (sh[i].sh_type == SHT_DYNSYM && !best))
			best = &sh[i];
	}
	if (!best || best->sh_link >= eh->e_shnum || best->sh_entsize != sizeof(Elf64_Sym) ||
	    !in_file(best->sh_offset, best->sh_size, size))
		return NULL;
	*str = &sh[best->sh_link];
	/* Every name must end inside the table: its last byte is a NUL. */
	if (!in_file((*str)->sh_offset, (*str)->sh_size, size) || (*str)->sh_size == 0 ||
	    f[(*str)->sh_offset + (*str)->sh_size - 1] != '\0')
		return NULL;
	return best;
}

static void load_symbols(struct object *o, const unsigned char *f, size_t size)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)f;
	const Elf64_Shdr *symsh, *strsh;

	if (size < sizeof(*eh) || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_shentsize != sizeof(Elf64_Shdr) ||
	    !in_file(eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr), size))
		return;
	symsh = pick_symtab(f, size, eh, &strsh);
	if (!symsh)
		return;
	const Elf64_Sym *s = (const Elf64_Sym *)(f + symsh->sh_offset);
	size_t n = symsh->sh_size / sizeof(Elf64_Sym), k = 0;
	o->syms = malloc((n ? n : 1) * sizeof(*o->syms));
	if (!o->syms)
		return;
	for (size_t i = 0; i < n; i++) {
		unsigned type = ELF64_ST_TYPE(s[i].st_info);
		if ((type != STT_FUNC && type != STT_GNU_IFUNC) || s[i].st_shndx == SHN_UNDEF ||
		    s[i].st_value == 0 || s[i].st_name >= strsh->sh_size)
			continue;
		o->syms[k++] = (struct fsym){ s[i].st_value, s[i].st_size, s[i].st_name };
	}
	qsort(o->syms, k, sizeof(*o->syms), cmp_fsym);
	o->n = k;
	o->strtab = (const char *)f + strsh->sh_offset;
	o->strsz = strsh->sh_size;
}

static struct object *object_of(const struct link_map *lm)
{
	struct object *o;
	struct stat st;
	int fd;

	for (unsigned i = 0; i < n_objects; i++)
		if (objects[i].lm == lm)
			return &objects[i];
	if (n_objects == MAX_OBJECTS)
		return NULL;
	o = &objects[n_objects++];
	o->lm = lm;
	o->bias = lm->l_addr;
	o->path = lm->l_name && lm->l_name[0] ? lm->l_name : "/proc/self/exe";
	fd = open(o->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return o;
	if (fstat(fd, &st) == 0 && st.st_size > 0) {
		void *f = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (f != MAP_FAILED)
			load_symbols(o, f, (size_t)st.st_size);
	}
	close(fd);
	if (strcmp(o->path, "/proc/self/exe") == 0) {
		/* A name users recognise: the executable's real path. */
		char buf[4096];
		ssize_t len = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
		if (len > 0) {
			char *path;
			buf[len] = '\0';
			path = strdup(buf);
			if (path)
				o->path = path;
		}
	}
	return o;
}

/* The last symbol starting at or before @rel that covers it (size 0: its start). */
static const struct fsym *find(const struct object *o, uintptr_t rel)
{
	size_t lo = 0, hi = o->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (o->syms[mid].value <= rel)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	const struct fsym *s = &o->syms[lo - 1];
	return rel < s->value + (s->size ? s->size : 1) ? s : NULL;
}

/* A compiler's copy suffix: the word, and whether a number (".N") must follow it. */
static const struct {
	const char *word;
	bool numbered;
} copy_suffixes[] = {
	{ "constprop", true }, { "isra", true }, { "part", true }, { "lto_priv", true },
	{ "llvm", true }, { "specialized", true }, { "__uniq", true }, { "cold", false },
	{ "localalias", false },
};

/* At @dot, is there one copy suffix that ends the name at @end? */
static bool copy_suffix(const char *dot, const char *end)
{
	for (size_t i = 0; i < sizeof(copy_suffixes) / sizeof(copy_suffixes[0]); i++) {
		size_t w = strlen(copy_suffixes[i].word);
		const char *p = dot + 1 + w;

		if ((size_t)(end - dot - 1) < w || strncmp(dot + 1, copy_suffixes[i].word, w) != 0)
			continue;
		if (p == end) /* ".cold" alone; ".cold.N" too (below) */
			return !copy_suffixes[i].numbered;
		if (*p != '.' || p + 1 == end)
			continue;
		for (p++; p < end && *p >= '0' && *p <= '9'; p++)
			;
		if (p == end)
			return true;
	}
	return false;
}

size_t rp_symtab_base_len(const char *name)
{
	const char *end = name + strlen(name);

	for (;;) {
		/* The suffix starts at one of the last two dots: ".cold", ".isra.0". */
		const char *dot = NULL, *prev = NULL;

		for (const char *p = name + 1; p < end; p++)
			if (*p == '.') {
				prev = dot;
				dot = p;
			}
		if (dot && copy_suffix(dot, end))
			end = dot;
		else if (prev && copy_suffix(prev, end))
			end = prev;
		else
			return (size_t)(end - name);
	}
}

void rp_symtab_preload(void)
{
	struct link_map *lm = NULL;
	void *self = dlopen(NULL, RTLD_NOW | RTLD_NOLOAD);

	if (!self)
		return;
	if (dlinfo(self, RTLD_DI_LINKMAP, &lm) == 0)
		for (; lm; lm = lm->l_next)
			object_of(lm);
	dlclose(self);
}

int rp_symtab_lookup(uintptr_t addr, struct rp_sym *out)
{
	struct link_map *lm = NULL;
	const struct fsym *s;
	struct object *o;
	Dl_info info;

	*out = (struct rp_sym){ NULL, NULL, addr };
	if (!dladdr1((void *)addr, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm)
		return -ENOENT;
	o = object_of(lm);
	if (o) {
		out->object = o->path;
		s = find(o, addr - o->bias);
		if (s) {
			out->name = o->strtab + s->name;
			out->start = s->value + o->bias;
			return 0;
		}
	}
	if (info.dli_sname) { /* the dynamic symbol table knew it after all */
		out->name = info.dli_sname;
		out->start = (uintptr_t)info.dli_saddr;
		return 0;
	}
	return -ENOENT;
}
