// SPDX-License-Identifier: MIT
/*
 * ringprof-auto: whole-program tracing for code built with -finstrument-functions.
 *
 * gcc and clang call __cyg_profile_func_enter(fn, site) at the entry of every
 * instrumented function and __cyg_profile_func_exit(fn, site) at its exit (returns
 * and exception unwinding alike). Each becomes a BEGIN/END of the function's name
 * on the thread's ring (rp_sum_begin/rp_sum_end: a call shorter than the summary
 * threshold folds into a per-thread summary instead, docs/summaries.md), so the
 * per-call cost is that of the two events, or of the fold, plus a lookup of fn in
 * an address cache.
 *
 * The cache maps a function address to its name id: an open-addressed table of
 * (address, value) slots, CACHE_SIZE of them, probed linearly at most PROBES slots
 * from the address's hash. Readers take no lock: they load a slot's key and value
 * and use the value when it is ready. A miss resolves the address once (symtab.c:
 * the ELF symbol tables, static functions included, a compiler's copies of a
 * function, "f.constprop.0", named as the function; C++ names demangled with the
 * process's own __cxa_demangle, found at run time so C programs need no libstdc++,
 * or libstdc++.so.6 loaded on the first mangled name when the program has none),
 * finds its source file and line in the DWARF line tables when there are any
 * (srcline.c; else the object's path and line 0), interns (name, "FUNCTION", file,
 * line) and publishes the id: the slot is
 * claimed with a compare-and-swap on its key, then the value stored. Two threads
 * that miss at once both resolve; rp_intern gives both the same id. When all PROBES
 * slots are taken by other addresses, the function is recorded under one shared name,
 * "[ringprof-auto: address cache full]", and counted (rp_auto_cache_full()), so the
 * cap shows in every report instead of hiding calls.
 *
 * A runtime filter, read once from the environment, decides per address at resolve
 * time, so a filtered-out function costs the lookup and one branch per call:
 * RINGPROF_AUTO_EXCLUDE and RINGPROF_AUTO_INCLUDE hold comma-separated fnmatch(3)
 * patterns (include first: when set, only matching names). A pattern matches a
 * function when it matches its demangled name or its qualified name: the demangled
 * name without a leading return type and the parameter list after it, template
 * arguments kept ("void std::__adjust_heap<It, long>(It, long)" is also
 * "std::__adjust_heap<It, long>", which 'std::*' matches; 'ns::f' matches
 * "ns::f(int)").
 *
 * The lookup's time is not its caller's: a constructor (before main) creates the
 * segment and reads the symbol tables of the objects loaded then, so a miss is a
 * binary search, the demangling and the DWARF line lookup; and each miss records its
 * own span, "[ringprof-auto: resolve]", from before the lookup to after it, so the
 * function that made the call is charged none of it (its self time is what it did)
 * and the total the lookups cost is one row of the report.
 *
 * Resolving calls libc (dladdr, malloc, fnmatch) and the library's slow paths; an
 * instrumented function reached from there (a user's malloc, say) would re-enter
 * the hooks: a per-thread flag makes such nested misses record nothing.
 */
#include <dlfcn.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ringprof/ringprof.h>

#include "srcline.h"
#include "symtab.h"

#define CACHE_BITS	16
#define CACHE_SIZE	(1u << CACHE_BITS)
#define PROBES		32
#define V_READY		(1u << 31)	/* the value is set */
#define V_SKIP		(1u << 30)	/* filtered out: record nothing */
#define V_ID		(V_SKIP - 1)	/* the name id */
#define NO_INSTR	__attribute__((no_instrument_function))
#define PATTERNS	32

struct slot {
	uintptr_t key;	/* function address; 0 = free */
	uint32_t val;	/* V_READY | id, or V_READY | V_SKIP; 0 while being filled */
};

static struct slot cache[CACHE_SIZE];
static uint64_t cache_full;	/* lookups that found no slot (counted, shown as a name) */
static pthread_mutex_t resolve_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t first_miss_once = PTHREAD_ONCE_INIT;
static __thread uint8_t resolving __attribute__((tls_model("initial-exec")));
static uint32_t resolve_id;	/* "[ringprof-auto: resolve]"; 0 before the constructor */

/* The filter, from the environment on the first resolve (under resolve_lock). */
static struct {
	bool read;
	char *buf[2];
	const char *pat[2][PATTERNS];	/* [0] include, [1] exclude */
	unsigned n[2];
} filter;

typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);
static demangle_fn demangler;
static bool demangler_looked;

NO_INSTR static inline uint32_t hash_addr(uintptr_t a)
{
	return (uint32_t)(((uint64_t)a * UINT64_C(0x9e3779b97f4a7c15)) >> (64 - CACHE_BITS));
}

NO_INSTR static void split_patterns(const char *env, int which)
{
	char *s = getenv(env) ? strdup(getenv(env)) : NULL, *save = NULL;

	filter.buf[which] = s;
	for (char *p = s ? strtok_r(s, ",", &save) : NULL; p && filter.n[which] < PATTERNS;
	     p = strtok_r(NULL, ",", &save))
		filter.pat[which][filter.n[which]++] = p;
}

NO_INSTR static bool matches_any(const char *name, int which)
{
	for (unsigned i = 0; i < filter.n[which]; i++)
		if (fnmatch(filter.pat[which][i], name, 0) == 0)
			return true;
	return false;
}

/* At "operator" the keyword (not "operators" or "my_operator")? */
NO_INSTR static bool at_operator(const char *name, size_t i)
{
	char c;

	if (strncmp(name + i, "operator", 8) != 0 || (i > 0 && name[i - 1] != ':' &&
						       name[i - 1] != ' '))
		return false;
	c = name[i + 8]; /* within the string: the 8 bytes before it are not its NUL */
	return !(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		 (c >= '0' && c <= '9'));
}

/*
 * The qualified function name inside the demangled @name, as [*start, *start + len):
 * it starts after the last space outside brackets before the parameter list (what
 * precedes it is the return type) and ends at that list, the first '(' outside
 * brackets other than "(anonymous namespace)". An operator's symbol ("operator<",
 * "operator()", "operator new") is part of the name, and a space after "operator"
 * starts no new one. A name with no parameter list (C) is all qualified name.
 */
NO_INSTR static size_t qualified(const char *name, const char **start)
{
	static const char anon[] = "(anonymous namespace)";
	size_t i = 0, from = 0;
	int depth = 0;
	bool op = false;

	while (name[i]) {
		char c = name[i];
		if (depth == 0 && !op && at_operator(name, i)) {
			op = true; /* its symbol: skipped, brackets and all */
			i += 8;
			if (strncmp(name + i, "()", 2) == 0)
				i += 2;
			while (name[i] && strchr("<>=!+-*/%^&|~,[]", name[i]))
				i++;
			continue;
		}
		if (c == '(' && depth == 0) {
			if (strncmp(name + i, anon, sizeof(anon) - 1) != 0)
				break;
			i += sizeof(anon) - 1;
			continue;
		}
		if (c == '<' || c == '(' || c == '[' || c == '{')
			depth++;
		else if ((c == '>' || c == ')' || c == ']' || c == '}') && depth > 0)
			depth--;
		else if (c == ' ' && depth == 0 && !op)
			from = i + 1;
		i++;
	}
	*start = name + from;
	return i - from;
}

NO_INSTR static bool wanted(const char *name)
{
	const char *q;
	size_t len = qualified(name, &q);
	char *qual = NULL;

	if (!filter.read) {
		split_patterns("RINGPROF_AUTO_INCLUDE", 0);
		split_patterns("RINGPROF_AUTO_EXCLUDE", 1);
		filter.read = true;
	}
	if (!filter.n[0] && !filter.n[1])
		return true;
	if (len > 0 && (q != name || name[len] != '\0'))
		qual = strndup(q, len); /* no memory: the full name alone */
	bool in = !filter.n[0] || matches_any(name, 0) || (qual && matches_any(qual, 0));
	bool out = in && (matches_any(name, 1) || (qual && matches_any(qual, 1)));
	free(qual);
	return in && !out;
}

/* A C++ name demangled (malloc'ed), or NULL: not mangled, or no C++ runtime here. */
NO_INSTR static char *demangle(const char *name)
{
	int status = -1;

	if (strncmp(name, "_Z", 2) != 0)
		return NULL;
	if (!demangler_looked) {
		/* The program's own C++ runtime; else (C++ code that never needed the
		 * library, so it is not loaded) the system's, loaded once, kept. */
		void *lib, *sym = dlsym(RTLD_DEFAULT, "__cxa_demangle");
		if (!sym && (lib = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_LOCAL)))
			sym = dlsym(lib, "__cxa_demangle");
		*(void **)&demangler = sym;
		demangler_looked = true;
	}
	if (!demangler)
		return NULL;
	char *d = demangler(name, NULL, NULL, &status);
	if (status != 0) {
		free(d);
		return NULL;
	}
	return d;
}

/* The cache value for @fn: its name resolved, filtered and interned. Serialised. */
NO_INSTR static uint32_t resolve(uintptr_t fn)
{
	struct rp_sym sym;
	char hex[2 + 16 + 1], *dm, *base;
	const char *name, *file;
	uint32_t v, line = 0;

	if (rp_symtab_lookup(fn, &sym) != 0 && !sym.name)
		sym.name = rp_srcline_name(fn); /* a stripped object's debug file */
	if (rp_srcline(fn, &file, &line) != 0) { /* no line info: the object, line 0 */
		file = sym.object;
		line = 0;
	}
	/* A compiler's copy ("f.constprop.0", "f.llvm.42") is its source function. */
	base = sym.name && sym.name[rp_symtab_base_len(sym.name)] ?
		strndup(sym.name, rp_symtab_base_len(sym.name)) : NULL;
	if (base) /* no memory: the symbol's own name */
		sym.name = base;
	dm = sym.name ? demangle(sym.name) : NULL;
	name = dm ? dm : sym.name;
	if (!name) {
		snprintf(hex, sizeof(hex), "0x%lx", (unsigned long)fn);
		name = hex;
	}
	if (!wanted(name))
		v = V_READY | V_SKIP;
	else
		v = V_READY | (rp_intern(name, "FUNCTION", file, line) & V_ID);
	free(dm);
	free(base);
	return v;
}

/* The id everything beyond the cache's reach is recorded under. */
NO_INSTR static uint32_t overflow_value(void)
{
	static uint32_t v;
	uint32_t cur = __atomic_load_n(&v, __ATOMIC_RELAXED);

	if (cur == 0) {
		cur = V_READY | (rp_intern("[ringprof-auto: address cache full]", "FUNCTION",
					   NULL, 0) & V_ID);
		__atomic_store_n(&v, cur, __ATOMIC_RELAXED);
	}
	return cur;
}

/* Claim a slot for @fn within its probe window and publish @v there. */
NO_INSTR static bool publish(uintptr_t fn, uint32_t v)
{
	uint32_t h = hash_addr(fn);

	for (unsigned i = 0; i < PROBES; i++) {
		struct slot *s = &cache[(h + i) & (CACHE_SIZE - 1)];
		uintptr_t k = __atomic_load_n(&s->key, __ATOMIC_RELAXED);
		if (k == 0 && __atomic_compare_exchange_n(&s->key, &k, fn, false,
							  __ATOMIC_RELAXED, __ATOMIC_RELAXED))
			k = fn;
		if (k == fn) {
			__atomic_store_n(&s->val, v, __ATOMIC_RELAXED);
			return true;
		}
	}
	return false;
}

static void first_miss(void);

/* True when @fn has, or may still get, a slot in its probe window. */
NO_INSTR static bool has_room(uintptr_t fn)
{
	uint32_t h = hash_addr(fn);

	for (unsigned i = 0; i < PROBES; i++) {
		uintptr_t k = __atomic_load_n(&cache[(h + i) & (CACHE_SIZE - 1)].key,
					      __ATOMIC_RELAXED);
		if (k == 0 || k == fn)
			return true;
	}
	return false;
}

NO_INSTR static __attribute__((noinline)) uint32_t miss(uintptr_t fn)
{
	uint32_t v;

	if (resolving) /* re-entered from the resolver itself */
		return V_READY | V_SKIP;
	if (!has_room(fn)) { /* no resolving (and its lock) on every call past the cap */
		__atomic_fetch_add(&cache_full, 1, __ATOMIC_RELAXED);
		return overflow_value();
	}
	resolving = 1;
	pthread_once(&first_miss_once, first_miss);
	uint64_t t0 = rp_now(); /* before the lock: waiting for another resolve counts */
	pthread_mutex_lock(&resolve_lock);
	v = resolve(fn);
	pthread_mutex_unlock(&resolve_lock);
	if (!publish(fn, v)) {
		__atomic_fetch_add(&cache_full, 1, __ATOMIC_RELAXED);
		v = (v & V_SKIP) ? v : overflow_value();
	}
	resolving = 0;
	/* The lookup as a span of its own, a child of the caller (before @fn's BEGIN,
	 * or inside @fn on an exit that missed); stamped after the fact, like a span
	 * replayed from elsewhere. */
	uint32_t rid = __atomic_load_n(&resolve_id, __ATOMIC_RELAXED);
	if (rid != 0) {
		rp_emit_at(t0, RP_EV_BEGIN, 0, rid, 0, 0);
		rp_emit(RP_EV_END, 0, rid, 0, 0);
	}
	return v;
}

/* The cache value for @fn; the fast path is one hash, one or two loads. */
NO_INSTR static inline uint32_t lookup(uintptr_t fn)
{
	uint32_t h = hash_addr(fn);

	for (unsigned i = 0; i < PROBES; i++) {
		const struct slot *s = &cache[(h + i) & (CACHE_SIZE - 1)];
		uintptr_t k = __atomic_load_n(&s->key, __ATOMIC_RELAXED);
		if (RP_LIKELY(k == fn)) {
			uint32_t v = __atomic_load_n(&s->val, __ATOMIC_RELAXED);
			return RP_LIKELY(v != 0) ? v : miss(fn);
		}
		if (k == 0)
			break;
	}
	return miss(fn);
}

RP_API NO_INSTR void __cyg_profile_func_enter(void *fn, void *site);
RP_API NO_INSTR void __cyg_profile_func_exit(void *fn, void *site);

/*
 * The hooks' own CFA is the instrumented function's stack pointer at the call:
 * strictly lower in anything it calls. An entry from a shallower one pops the levels
 * of functions left by longjmp (ringprof.h). An entry at the very frame of an open
 * level from the same hook call site (the return address) pops it too: that function
 * was entered again at the same depth, so the open call is gone. A function inlined
 * into its caller (itself included, as gcc does with recursive ones) calls the hook
 * from the caller's frame but at another site: kept.
 * The exit hook heals by name only (the function it names is on the shadow): gcc -O2
 * may call it after the epilogue freed the frame (80-112 bytes above the entry's CFA
 * in std::sort's helpers), so its CFA says nothing about the levels above it.
 */
void __cyg_profile_func_enter(void *fn, void *site)
{
	uint32_t v = lookup((uintptr_t)fn);
	uintptr_t frame = (uintptr_t)__builtin_dwarf_cfa();
	uint32_t at = (uint32_t)(uintptr_t)__builtin_return_address(0) | 1u;

	(void)site;
	if (RP_LIKELY(!(v & V_SKIP)))
		rp_sum_begin(v & V_ID, frame, at);
}

void __cyg_profile_func_exit(void *fn, void *site)
{
	uint32_t v = lookup((uintptr_t)fn);
	uintptr_t frame = (uintptr_t)__builtin_dwarf_cfa();

	(void)site;
	if (RP_LIKELY(!(v & V_SKIP)))
		rp_sum_end(v & V_ID, frame);
}

/*
 * Summaries on by default (docs/summaries.md): calls shorter than 10 us fold into
 * per-thread summaries. A native program makes 50-100 M calls/s per thread and one
 * engine core takes 20-35 M events/s; calls of 10 us and more are at most 100 k/s
 * per thread (200 k events/s), so even a few dozen threads stay inside what the
 * engine takes, while anything long enough to matter alone stays a span (slowest
 * lists, recorder). Before the library reads its environment (a constructor that
 * runs before any instrumented code can): RINGPROF_SUMMARY_NS still overrides it.
 */
NO_INSTR __attribute__((constructor(101))) static void auto_defaults(void)
{
	rp_summary_default_ns = 10000;
}

/*
 * The name arena's default with ringprof-auto in the process (ringprof.c reads it,
 * weakly): 8 MiB, 512 bytes for each of the 16,384 default entries, for demangled
 * C++ names (~160 bytes on average) and their source paths. Its pages are reserved
 * when the segment is created: about 1.7 ms and 7 MiB of /dev/shm more than 1 MiB.
 */
RP_API const uint64_t rp_auto_name_bytes;
const uint64_t rp_auto_name_bytes = UINT64_C(8) << 20;

/** rp_auto_cache_full() - calls recorded under the shared overflow name so far. */
RP_API NO_INSTR uint64_t rp_auto_cache_full(void);
uint64_t rp_auto_cache_full(void)
{
	return __atomic_load_n(&cache_full, __ATOMIC_RELAXED);
}

/*
 * A fork while another thread resolves must not leave the child's lock held: the
 * prepare handler takes resolve_lock, and must take it before the library's own
 * prepare handler takes its name-table lock (resolve() holds the first while it
 * interns, under the second). Prepare handlers run in reverse order of
 * registration, so these are registered on the first miss, after rp_init()
 * registered the library's.
 */
NO_INSTR static void fork_prepare(void)
{
	pthread_mutex_lock(&resolve_lock);
}

NO_INSTR static void fork_release(void)
{
	pthread_mutex_unlock(&resolve_lock);
}

NO_INSTR static void first_miss(void)
{
	rp_init();
	pthread_atfork(fork_prepare, fork_release, fork_release);
}

/*
 * Before main (and before the constructors of the program's own objects, which load
 * after this library): the segment, its clock and the symbol tables, none of which
 * a first call should pay for. Recording off (RINGPROF=0): nothing read.
 */
NO_INSTR __attribute__((constructor)) static void auto_init(void)
{
	resolving = 1;
	pthread_once(&first_miss_once, first_miss);
	if (rp_segment_path() != NULL) {
		pthread_mutex_lock(&resolve_lock);
		rp_symtab_preload();
		rp_srcline_preload();
		pthread_mutex_unlock(&resolve_lock);
		__atomic_store_n(&resolve_id, rp_intern("[ringprof-auto: resolve]", "FUNCTION",
							NULL, 0) & V_ID, __ATOMIC_RELAXED);
	}
	resolving = 0;
}
