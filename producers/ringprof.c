// SPDX-License-Identifier: MIT
/*
 * libringprof: the producer's slow paths.
 *
 * The fast path (ringprof.h) only ever touches this thread's ring. Everything that
 * may block, allocate or make a syscall is here, and runs once per process (creating
 * the segment), once per thread (claiming a ring), once per name (interning), or
 * when a consumer has said it sleeps (the doorbell).
 *
 * Process state lives in one static struct `proc`, guarded by `lock` for the slow
 * paths that change it; `proc.hdr` is published with release order so that a
 * thread that sees it sees a complete segment.
 *
 * fork(): the child keeps the parent's mapping only until its own segment exists;
 * the child's segment starts with a copy of the parent's name table, so ids cached
 * by the program before fork() stay valid in the child.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <ringprof/ringprof.h>

#include "clock.h"
#include "layout.h"
#include "ring_ck.h"
#include "shadow.h"
#include "summary.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef FALLOC_FL_KEEP_SIZE
#define FALLOC_FL_KEEP_SIZE 0x01
#endif
#ifndef FALLOC_FL_PUNCH_HOLE
#define FALLOC_FL_PUNCH_HOLE 0x02
#endif

__thread struct rp_thread rp_thread_state __attribute__((tls_model("initial-exec")));
uint32_t rp_clock_source;

/* This thread has no ring because /dev/shm had no room for one: its drops are
 * nospace_dropped too, until a claim succeeds. */
static __thread uint8_t nospace __attribute__((tls_model("initial-exec")));

enum proc_state { PROC_NEW, PROC_ON, PROC_OFF };

static struct {
	pthread_mutex_t lock;
	pthread_once_t once;
	pthread_key_t key;		/* its destructor retires a thread's ring */
	uint32_t state;			/* enum proc_state; atomic */
	struct rp_wire_header *hdr;	/* our segment, published with release */
	struct rp_layout lay;		/* private copy of the layout */
	struct rp_wire_name *names;	/* private mirror of the name table */
	uint32_t *index;		/* open addressing: slot -> id, 0 = empty */
	uint32_t index_mask;
	uint32_t nnames;		/* entries in the mirror (shared names_used copy) */
	uint64_t arena_used;		/* private copy of the shared arena_used */
	struct rp_wire_clock clk;	/* private copy of the header's clock */
	struct rp_wire_header *inherited; /* after fork: the parent's segment */
	bool shut;
	char path[96];
	int fd;				/* the segment's file: pages are reserved with
					   fallocate at claim time (reserve()); -1 none */
	bool names_frozen;		/* exit released the name table's free pages */
	struct rp_clock_cfg clock;
	uint64_t summary_ns;		/* RINGPROF_SUMMARY_NS (docs/summaries.md) */
	uint64_t fine_ns;		/* fine names' threshold: RINGPROF_SUMMARY_NS if
					   set, else RP_FINE_DEFAULT_NS */
	uint32_t exit_wait_ms;
	uint32_t keep_max;		/* RINGPROF_KEEP_MAX: kept segments per session */
	bool keep;
	bool discard;			/* RINGPROF_NO_ENGINE=discard */
	uint64_t undrained_ns;		/* RINGPROF_NO_ENGINE_WARN_S; 0: never said */
	uint64_t created_ns;		/* CLOCK_MONOTONIC when our segment was made */
} proc = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.once = PTHREAD_ONCE_INIT,
	.fd = -1,
};

/* One line on stderr, once per process, so the host program is told but not
 * flooded. */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	static int said;
	va_list ap;

	if (__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
		return;
	va_start(ap, fmt);
	fputs("ringprof: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputs("\n", stderr);
	va_end(ap);
}

static uint64_t env_u64(const char *name, uint64_t def, uint64_t lo, uint64_t hi)
{
	const char *s = getenv(name);
	char *end;
	unsigned long long v;

	if (s == NULL || *s == '\0')
		return def;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end != '\0' || v < lo || v > hi) {
		say("%s=%s is not a number in [%" PRIu64 ", %" PRIu64 "]; using %" PRIu64,
		    name, s, lo, hi, def);
		return def;
	}
	return v;
}

static uint32_t pow2_ceil(uint32_t v)
{
	uint32_t p = 1;

	while (p < v)
		p <<= 1;
	return p;
}

/*
 * A larger default name arena, defined by ringprof-auto when it is in the process
 * (weak: absent, the address is NULL): demangled C++ names average ~160 bytes and
 * each entry stores its file path too, so 1 MiB held ~3,600 of the 16,384 entries.
 */
extern const uint64_t rp_auto_name_bytes __attribute__((weak, visibility("default")));

/* The segment's geometry from the environment; false when RINGPROF=0. */
static bool read_config(struct rp_layout_cfg *cfg, char *session)
{
	const char *s = getenv("RINGPROF");
	const char *sess = getenv("RINGPROF_SESSION");

	if (s != NULL && strcmp(s, "0") == 0)
		return false;
	if (sess == NULL || *sess == '\0')
		sess = "default";
	if (!rp_wire_session_valid(sess)) {
		say("RINGPROF_SESSION must be 1-31 of [A-Za-z0-9_-]; using \"default\"");
		sess = "default";
	}
	strcpy(session, sess);
	cfg->ring_count = (uint32_t)env_u64("RINGPROF_RINGS", 64, 1, RP_WIRE_MAX_RINGS);
	cfg->ring_capacity = (uint32_t)env_u64("RINGPROF_RING_EVENTS", 131072,
					       RP_WIRE_MIN_RING_CAP, RP_WIRE_MAX_RING_CAP);
	if (cfg->ring_capacity & (cfg->ring_capacity - 1)) {
		say("RINGPROF_RING_EVENTS=%u is not a power of two; using %u",
		    cfg->ring_capacity, pow2_ceil(cfg->ring_capacity));
		cfg->ring_capacity = pow2_ceil(cfg->ring_capacity);
	}
	cfg->name_capacity = (uint32_t)env_u64("RINGPROF_NAMES", 16384, 2, RP_WIRE_MAX_NAMES);
	cfg->arena_size = env_u64("RINGPROF_NAME_BYTES",
				  &rp_auto_name_bytes ? rp_auto_name_bytes : 1u << 20, 64,
				  RP_WIRE_MAX_ARENA);
	proc.exit_wait_ms = (uint32_t)env_u64("RINGPROF_EXIT_WAIT_MS", 250, 0, 600000);
	proc.keep = env_u64("RINGPROF_KEEP", 0, 0, 1) == 1;
	proc.keep_max = (uint32_t)env_u64("RINGPROF_KEEP_MAX", 8, 0, 4096);
	s = getenv("RINGPROF_NO_ENGINE");
	proc.discard = s != NULL && strcmp(s, "discard") == 0;
	/* No engine on purpose (discard), or asked for silence: nothing to say. */
	s = getenv("RINGPROF_QUIET");
	proc.undrained_ns = env_u64("RINGPROF_NO_ENGINE_WARN_S", 10, 0, 86400) * 1000000000u;
	if (proc.discard || (s != NULL && strcmp(s, "1") == 0))
		proc.undrained_ns = 0;
	s = getenv("RINGPROF_CLOCK");
	proc.clock.want_tsc = !(s != NULL && strcmp(s, "monotonic") == 0);
	proc.clock.calib_us = (uint32_t)env_u64("RINGPROF_CALIBRATE_US", 2000, 100, 1000000);
	proc.summary_ns = env_u64("RINGPROF_SUMMARY_NS", rp_summary_default_ns, 0, UINT32_MAX);
	s = getenv("RINGPROF_SUMMARY_NS");
	proc.fine_ns = (s != NULL && *s != '\0') || rp_summary_default_ns ? proc.summary_ns
									  : RP_FINE_DEFAULT_NS;
	return true;
}

/* shm_open a fresh "/ringprof.<session>.<pid>.<n>": the lowest n not taken (an
 * exec()'d image keeps its pid, and its predecessor's segment may be undrained). */
static int create_shm(const char *session, int *fd_out)
{
	for (int n = 0; n < 64; n++) {
		snprintf(proc.path, sizeof(proc.path), RP_WIRE_NAME_FMT ".%d", session,
			 (int)getpid(), n);
		int fd = shm_open(proc.path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd >= 0) {
			*fd_out = fd;
			return 0;
		}
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

static void fill_header(struct rp_wire_header *h, const struct rp_layout *l,
			const char *session, const struct rp_wire_clock *clk)
{
	struct timespec rt;

	clock_gettime(CLOCK_REALTIME, &rt);
	h->version_major = RP_WIRE_VERSION_MAJOR;
	h->version_minor = RP_WIRE_VERSION_MINOR;
	h->header_size = sizeof(*h);
	h->event_size = sizeof(struct rp_event);
	h->pid = (int32_t)getpid();
	h->created_realtime_ns = (uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec;
	h->clock = *clk;
	snprintf(h->session, sizeof(h->session), "%s", session);
	rp_layout_store(l, h);
	h->state = RP_SEG_LIVE;
	for (uint32_t i = 0; i < l->ring_count; i++) {
		struct rp_wire_ring *r = rp_layout_ring(l, h, i);
		ck_ring_init(rp_ring_ck(r), l->ring_capacity);
	}
}

/*
 * Allocates the file's pages in [off, off + len) now, so that no later store to them
 * can fault: a tmpfs page is otherwise allocated at its first touch, and with
 * /dev/shm full that touch is a SIGBUS in the host. tmpfs undoes the pages a failed
 * fallocate allocated, so a refusal leaves nothing charged. EINTR (a signal during a
 * large allocation) is retried; a file system without fallocate (not tmpfs) leaves
 * the pages to their first touch, as before. @return 0 or -errno.
 */
static int reserve(int fd, uint64_t off, uint64_t len)
{
	for (int i = 0; i < 16; i++) {
		if (fallocate(fd, 0, (off_t)off, (off_t)len) == 0)
			return 0;
		if (errno == EOPNOTSUPP)
			return 0;
		if (errno != EINTR)
			return -errno;
	}
	return -EINTR;
}

/* Gives back the file's whole pages inside [off, off + len) (they read as zeros). */
static void release(int fd, uint64_t off, uint64_t len)
{
	uint64_t lo = (off + 4095) & ~UINT64_C(4095), hi = (off + len) & ~UINT64_C(4095);

	if (hi > lo)
		fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)lo,
			  (off_t)(hi - lo));
}

/* Sizes the file, reserves what is written without a claim (the header and ring
 * descriptors, the name table and arena; the rings' pages come with their claims),
 * maps it. */
static int map_segment(int fd, const struct rp_layout *l, struct rp_wire_header **out)
{
	void *p;
	int err;

	if (ftruncate(fd, (off_t)l->segment_size) < 0)
		return -errno;
	if ((err = reserve(fd, 0, l->ring_data_offset)) != 0 ||
	    (err = reserve(fd, l->name_table_offset, l->segment_size - l->name_table_offset)) != 0)
		return err;
	p = mmap(NULL, l->segment_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	*out = p;
	return 0;
}

static uint32_t key_hash(const char *name, const char *cat, const char *file, uint32_t line)
{
	uint32_t h = 2166136261u; /* FNV-1a over the four fields, separated */

	for (const char *s = name; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	h = (h ^ 0xffu) * 16777619u;
	for (const char *s = cat; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	h = (h ^ 0xfeu) * 16777619u;
	for (const char *s = file; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	h = (h ^ line) * 16777619u;
	return h ? h : 1;
}

static char *arena(struct rp_wire_header *h)
{
	return (char *)h + proc.lay.name_arena_offset;
}

/* Copies s into the arena; false when it does not fit. Caller holds the lock. */
static bool arena_put(const char *s, uint32_t *off, uint32_t *len)
{
	size_t n = strlen(s);
	uint64_t used = proc.arena_used;

	if (n > UINT32_MAX / 2 || used + n + 1 > proc.lay.name_arena_size)
		return false;
	memcpy(arena(proc.hdr) + used, s, n + 1);
	*off = (uint32_t)used;
	*len = (uint32_t)n;
	proc.arena_used = used + n + 1;
	/* Before the entries that use these bytes are published (publish_name). */
	__atomic_store_n(&proc.hdr->arena_used, proc.arena_used, __ATOMIC_RELAXED);
	return true;
}

/* Publishes entry `id` (already in the mirror) to the shared table. */
static void publish_name(uint32_t id)
{
	struct rp_wire_name *w = rp_layout_name(&proc.lay, proc.hdr, id);

	*w = proc.names[id];
	w->ready = 0;
	/* The entry's fields before `ready`, `ready` before names_used: a reader that
	 * acquires either sees a complete entry. */
	__atomic_store_n(&w->ready, 1, __ATOMIC_RELEASE);
	if (id >= proc.nnames)
		proc.nnames = id + 1;
	__atomic_store_n(&proc.hdr->names_used, proc.nnames, __ATOMIC_RELAXED);
}

static bool same_key(const struct rp_wire_name *e, const char *name, const char *cat,
		     const char *file, uint32_t line)
{
	const char *a = arena(proc.hdr);

	return e->line == line && e->name_len == strlen(name) && e->cat_len == strlen(cat) &&
	       e->file_len == strlen(file) && memcmp(a + e->name_off, name, e->name_len) == 0 &&
	       memcmp(a + e->cat_off, cat, e->cat_len) == 0 &&
	       memcmp(a + e->file_off, file, e->file_len) == 0;
}

static int alloc_index(uint32_t name_capacity)
{
	uint32_t slots = pow2_ceil(name_capacity * 2);

	proc.names = calloc(name_capacity, sizeof(*proc.names));
	proc.index = calloc(slots, sizeof(*proc.index));
	if (proc.names == NULL || proc.index == NULL) {
		free(proc.names);
		free(proc.index);
		proc.names = NULL;
		proc.index = NULL;
		return -ENOMEM;
	}
	proc.index_mask = slots - 1;
	return 0;
}

static void index_insert(uint32_t hash, uint32_t id)
{
	uint32_t i = hash & proc.index_mask;

	while (proc.index[i] != 0)
		i = (i + 1) & proc.index_mask;
	proc.index[i] = id;
}

/* Id 0 is "[overflow]", so a reader can always name an event. */
static void put_overflow_name(void)
{
	struct rp_wire_name *e = &proc.names[0];

	arena_put("[overflow]", &e->name_off, &e->name_len);
	arena_put("", &e->cat_off, &e->cat_len);
	e->file_off = e->cat_off;
	e->hash = 0;
	publish_name(0);
}

/* After fork(): copy the parent's arena and table into our fresh segment; the mirror
 * and index were inherited by fork() and stay as they are. */
static void copy_inherited_names(void)
{
	struct rp_wire_header *p = proc.inherited;
	uint32_t n = proc.nnames;

	/* Only the bytes and entries this process had at fork(): the parent may have
	 * appended since, and its later ids mean nothing here. */
	memcpy(arena(proc.hdr), (char *)p + proc.lay.name_arena_offset, proc.arena_used);
	proc.hdr->arena_used = proc.arena_used;
	for (uint32_t id = 0; id < n; id++)
		publish_name(id);
	munmap(p, proc.lay.segment_size);
	proc.inherited = NULL;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts); /* the vDSO: no system call */
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * A producer whose session no engine drains (a typo in RINGPROF_SESSION, or no
 * `ringprof run`) records for nobody and leaves its segment in /dev/shm: said once,
 * RINGPROF_NO_ENGINE_WARN_S seconds after the segment was made, if no engine has
 * attached by then (consumer_pid, written by an engine when it attaches). Checked
 * on slow paths only: a ring claimed, a ring found full, the exit. One write(2) of
 * a stack buffer: no lock and no allocation, since the caller may be a signal
 * handler that interrupted a stdio call.
 */
static void check_undrained(struct rp_wire_header *h)
{
	static int said; /* a flag only: it orders nothing */
	char line[384];
	int n;

	if (proc.undrained_ns == 0 || __atomic_load_n(&said, __ATOMIC_RELAXED) ||
	    __atomic_load_n(&h->consumer_pid, __ATOMIC_RELAXED) != 0 ||
	    mono_ns() - proc.created_ns < proc.undrained_ns)
		return;
	if (__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
		return;
	n = snprintf(line, sizeof(line),
		     "ringprof: no engine has drained session \"%s\" in %llu s (segment "
		     "/dev/shm%s): start one with `ringprof run --session %s`, or set "
		     "RINGPROF_SESSION to a running engine's session (RINGPROF_QUIET=1: not "
		     "said)\n", h->session, (unsigned long long)(proc.undrained_ns / 1000000000u),
		     proc.path, h->session);
	if (n > 0 && write(STDERR_FILENO, line, (size_t)n < sizeof(line) ? (size_t)n :
			   sizeof(line) - 1) < 0)
		return; /* nobody to tell */
}

static int create_segment(void)
{
	struct rp_layout_cfg cfg;
	struct rp_wire_clock clk;
	struct rp_wire_header *h = NULL;
	char session[RP_WIRE_SESSION_MAX];
	int fd = -1, err;

	if (!read_config(&cfg, session))
		return 1;
	if (proc.inherited != NULL) /* a fork child keeps the parent's geometry */
		rp_layout_cfg_from(&proc.lay, &cfg);
	err = rp_layout_compute(&cfg, &proc.lay);
	if (err)
		return err;
	if (proc.names == NULL && (err = alloc_index(cfg.name_capacity)) != 0)
		return err;
	if (proc.inherited != NULL)
		clk = proc.clk; /* the parent's conversion: parent and child agree exactly */
	else
		rp_clock_calibrate(&proc.clock, &clk);
	proc.clk = clk;
	if (proc.fd >= 0) { /* a fork child: the parent's file is not ours to reserve in */
		close(proc.fd);
		proc.fd = -1;
	}
	if (rp_shadow_alloc(cfg.ring_count) != 0)
		say("no memory for the span shadows; nesting does not heal after longjmp");
	if (rp_sum_alloc(cfg.ring_count, proc.summary_ns, proc.fine_ns, &proc.clk) != 0)
		say("no memory for summaries (RINGPROF_SUMMARY_NS); every call is a span");
	if ((err = create_shm(session, &fd)) != 0)
		return err;
	err = map_segment(fd, &proc.lay, &h);
	if (err) {
		close(fd);
		shm_unlink(proc.path);
		return err;
	}
	proc.fd = fd; /* kept (close-on-exec) for the rings' reservations */
	proc.created_ns = mono_ns();
	fill_header(h, &proc.lay, session, &clk);
	proc.hdr = h;
	if (proc.inherited != NULL)
		copy_inherited_names();
	else
		put_overflow_name();
	/* Everything above before the magic: a consumer that sees the magic sees a
	 * complete header and layout. */
	__atomic_store_n(&h->magic, RP_WIRE_MAGIC, __ATOMIC_RELEASE);
	rp_clock_source = clk.source;
	return 0;
}

static void retire_thread(void *arg);
static void on_fork_prepare(void);
static void on_fork_parent(void);
static void on_fork_child(void);

static void init_once(void)
{
	pthread_key_create(&proc.key, retire_thread);
	pthread_atfork(on_fork_prepare, on_fork_parent, on_fork_child);
	atexit(rp_shutdown);
}

int rp_init(void)
{
	int err = 0;

	switch (__atomic_load_n(&proc.state, __ATOMIC_ACQUIRE)) { /* pairs with the release below */
	case PROC_ON:
		return 0;
	case PROC_OFF:
		return 1;
	}
	pthread_once(&proc.once, init_once);
	pthread_mutex_lock(&proc.lock);
	if (proc.state == PROC_NEW) {
		err = create_segment();
		if (err == -ENOSPC || err == -ENOMEM)
			say("cannot create the shared-memory segment %s: /dev/shm is full; recording "
			    "is off (see docs/operations.md, /dev/shm space)", proc.path);
		else if (err < 0)
			say("cannot create the shared-memory segment %s: %s; recording is off",
			    proc.path, strerror(-err));
		if (err != 0)
			rp_clock_source = RP_CLOCK_MONOTONIC;
		/* Release: the segment before the state that says it exists; pairs with
		 * the acquire loads of proc.state. */
		__atomic_store_n(&proc.state, err == 0 ? PROC_ON : PROC_OFF, __ATOMIC_RELEASE);
	} else {
		err = proc.state == PROC_ON ? 0 : 1;
	}
	pthread_mutex_unlock(&proc.lock);
	return err;
}

uint32_t rp_intern(const char *name, const char *category, const char *file, uint32_t line)
{
	uint32_t h, i, id = RP_NAME_OVERFLOW;

	if (rp_init() != 0)
		return RP_NAME_OVERFLOW;
	name = (name && *name) ? name : "?";
	category = category ? category : "";
	file = file ? file : "";
	h = key_hash(name, category, file, line);
	pthread_mutex_lock(&proc.lock);
	for (i = h & proc.index_mask; proc.index[i] != 0; i = (i + 1) & proc.index_mask) {
		struct rp_wire_name *e = &proc.names[proc.index[i]];
		if (e->hash == h && same_key(e, name, category, file, line)) {
			id = proc.index[i];
			goto out;
		}
	}
	id = proc.nnames;
	if (id >= proc.lay.name_capacity || proc.names_frozen)
		goto full;
	struct rp_wire_name *e = &proc.names[id];
	uint64_t mark = proc.arena_used;
	*e = (struct rp_wire_name){ .hash = h, .line = line };
	if (!arena_put(name, &e->name_off, &e->name_len) ||
	    !arena_put(category, &e->cat_off, &e->cat_len) ||
	    !arena_put(file, &e->file_off, &e->file_len)) {
		proc.arena_used = mark; /* unpublished bytes; nothing refers to them */
		goto full;
	}
	index_insert(h, id);
	publish_name(id);
	goto out;
full:
	id = RP_NAME_OVERFLOW;
	__atomic_fetch_add(&proc.hdr->names_dropped, 1, __ATOMIC_RELAXED);
out:
	pthread_mutex_unlock(&proc.lock);
	return id;
}

static bool ring_drained(const struct rp_wire_ring *r)
{
	/* Acquire on c_head: the consumer's reads of the slots are done. */
	return __atomic_load_n(&r->ring.c_head, __ATOMIC_ACQUIRE) ==
	       __atomic_load_n(&r->ring.p_tail, __ATOMIC_RELAXED);
}

/* Records a retired ring can still take (its owner is gone: only the consumer moves
 * it, and only towards more room); 0 when full or when c_head is implausible. */
static uint32_t ring_room(const struct rp_wire_ring *r)
{
	uint32_t mask = proc.lay.ring_capacity - 1;
	uint32_t used = __atomic_load_n(&r->ring.p_tail, __ATOMIC_RELAXED) -
			__atomic_load_n(&r->ring.c_head, __ATOMIC_ACQUIRE);

	return used < mask ? mask - used : 0;
}

/*
 * Claims a ring: a free one, or a retired one the consumer has drained (as 1.1 did);
 * failing those, the retired ring with the most room, undrained (*over: a take-over,
 * whose records start with an owner mark, setup_thread()), so that thread churn
 * loses nothing while an engine lags or none runs. *prev: the state it had.
 * @return its index, or -1 if every ring is owned or full.
 */
static int claim_ring(struct rp_wire_header *h, uint32_t *prev, bool *over)
{
	for (int pass = 0; pass < 4; pass++) {
		uint32_t best_room = 0;
		int best = -1;

		for (uint32_t i = 0; i < proc.lay.ring_count; i++) {
			struct rp_wire_ring *r = rp_layout_ring(&proc.lay, h, i);
			uint32_t st = __atomic_load_n(&r->state, __ATOMIC_RELAXED), room;

			if (st == RP_RING_ACTIVE)
				continue;
			if (st == RP_RING_FREE || ring_drained(r)) {
				/* Acquire: the previous owner's stores and the consumer's
				 * c_head before we take over the ring. */
				if (__atomic_compare_exchange_n(&r->state, &st, RP_RING_ACTIVE,
								false, __ATOMIC_ACQUIRE,
								__ATOMIC_RELAXED)) {
					*prev = st;
					*over = false;
					return (int)i;
				}
				continue;
			}
			if ((room = ring_room(r)) > best_room) {
				best_room = room;
				best = (int)i;
			}
		}
		if (best < 0)
			return -1;
		struct rp_wire_ring *r = rp_layout_ring(&proc.lay, h, (uint32_t)best);
		uint32_t st = RP_RING_RETIRED;

		/* Acquire, as above: the dead owner's records and lost_at_retire. */
		if (!__atomic_compare_exchange_n(&r->state, &st, RP_RING_ACTIVE, false,
						 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			continue; /* another thread took it: look again */
		if (ring_room(r) > 0) { /* room only grows while retired; an ABA could not */
			*prev = RP_RING_RETIRED;
			*over = true;
			return best;
		}
		__atomic_store_n(&r->state, RP_RING_RETIRED, __ATOMIC_RELEASE);
	}
	return -1;
}

/* The ring's pages, allocated before its first record can touch them (reserve()). */
static int reserve_ring(uint32_t idx)
{
	uint64_t bytes = (uint64_t)proc.lay.ring_capacity * sizeof(struct rp_event);

	return reserve(proc.fd, proc.lay.ring_data_offset + (uint64_t)idx * bytes, bytes);
}

/*
 * A take-over: the ring still holds its dead owner's unread records, so the new
 * owner says in band where its own begin (RP_EV_THREAD, wire.h), and publishes it
 * before the new generation: a consumer that reads the new `gen` finds the mark in
 * the ring (or has read it already).
 */
static void put_owner_mark(struct rp_wire_ring *r, struct rp_event *slots, struct rp_thread *t,
			   uint32_t gen, int32_t tid, bool tsc)
{
	/* Written by the dead owner before its RETIRED (release); our claim acquired. */
	uint8_t lost = __atomic_load_n(&r->lost_at_retire, __ATOMIC_RELAXED) ? RP_THREAD_PREV_LOST
									      : 0;

	slots[t->tail & t->mask] = (struct rp_event){ .ts = rp_clock_read(tsc),
						      .kind = RP_EV_THREAD,
						      .flags = lost,
						      .track = gen,
						      .arg = (uint32_t)tid };
	t->tail++;
	/* Release: the mark before the index that publishes it (and both before the
	 * generation, stored with release after this). */
	__atomic_store_n(&r->ring.p_tail, t->tail, __ATOMIC_RELEASE);
}

static void setup_thread(struct rp_thread *t, struct rp_wire_header *h, int idx, bool over)
{
	struct rp_wire_ring *r = rp_layout_ring(&proc.lay, h, (uint32_t)idx);
	struct rp_event *slots = rp_layout_slots(&proc.lay, h, (uint32_t)idx);
	int32_t tid = (int32_t)syscall(SYS_gettid);
	uint32_t gen = r->gen + 1; /* ours alone since the claim */

	t->tail = __atomic_load_n(&r->ring.p_tail, __ATOMIC_RELAXED);
	t->head = __atomic_load_n(&r->ring.c_head, __ATOMIC_RELAXED);
	t->mask = proc.lay.ring_capacity - 1;
	/* 1.4: where our records start (the mark's slot after a take-over), stored
	 * before the generation (release, below) as the owner fields are */
	__atomic_store_n(&r->claim_tail, t->tail, __ATOMIC_RELAXED);
	if (over)
		put_owner_mark(r, slots, t, gen, tid, rp_clock_source == RP_CLOCK_TSC);
	r->tid = tid;
	r->lost_at_retire = 0;
	r->claimed_ticks = rp_clock_read(rp_clock_source == RP_CLOCK_TSC);
	/* The owner fields before the generation: a consumer that sees a new `gen`
	 * (after it read p_tail) sees who owns the ring. */
	__atomic_store_n(&r->gen, gen, __ATOMIC_RELEASE);
	__atomic_fetch_add(&h->rings_claimed, 1, __ATOMIC_RELAXED);
	t->ring = r;
	t->hdr = h;
	t->tsc = rp_clock_source == RP_CLOCK_TSC;
	/* Map the ring's pages now, not on the first lap of the fast path. They are
	 * allocated already (reserve_ring()), so this cannot fail for want of room. */
	madvise((void *)((uintptr_t)slots & ~(uintptr_t)4095),
		(size_t)proc.lay.ring_capacity * sizeof(struct rp_event) + 4096,
		MADV_POPULATE_WRITE);
	rp_shadow_attach(t, (uint32_t)idx);
	rp_sum_attach(t, (uint32_t)idx, &proc.clk);
	t->slots = slots;
	pthread_setspecific(proc.key, t);
}

bool rp_sum_fine_attach(struct rp_thread *t)
{
	struct rp_wire_ring *r0;
	bool on;

	if (t->off) { /* RINGPROF=0: never */
		t->nofine = 1;
		return false;
	}
	/* No ring yet: this BEGIN is a span (rp_slot() claims one), the next tries. */
	if (t->slots == NULL || t->sum != NULL || !rp_enter(t))
		return t->sum != NULL;
	r0 = rp_layout_ring(&proc.lay, t->hdr, 0);
	on = rp_sum_fine_on(t, (uint32_t)(t->ring - r0), &proc.clk);
	if (on) /* summaries' records take rp_emit_slow() */
		rp_fast_off(t);
	rp_leave(t);
	return on;
}

/* Said once per process: a full /dev/shm is the operator's to fix. */
static void say_nospace(int err)
{
	static int said;

	if (__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
		return;
	fprintf(stderr, "ringprof: no room in /dev/shm for a thread's ring (%u KB: %s); its "
			"events are dropped and counted (nospace_dropped). Free space, or use "
			"smaller or fewer rings (RINGPROF_RING_EVENTS, RINGPROF_RINGS); with no "
			"engine running, exited programs' segments stay there for one (at most "
			"RINGPROF_KEEP_MAX=%u per session; docs/operations.md)\n",
		(unsigned)((uint64_t)proc.lay.ring_capacity * sizeof(struct rp_event) >> 10),
		strerror(-err), proc.keep_max);
}

/* An event of this thread not recorded for want of a ring. */
static void drop_noring(struct rp_wire_header *h)
{
	__atomic_fetch_add(&h->noring_dropped, 1, __ATOMIC_RELAXED);
	if (nospace)
		__atomic_fetch_add(&h->nospace_dropped, 1, __ATOMIC_RELAXED);
}

bool rp_thread_attach(struct rp_thread *t)
{
	struct rp_wire_header *h;
	uint32_t prev;
	bool over;
	int idx, err;

	rp_shadow_none(t); /* until a ring is claimed: nothing to heal with */
	if (rp_init() != 0) {
		t->off = 1;
		return false;
	}
	h = proc.hdr;
	if (t->exited) { /* recording from a destructor after the ring was retired */
		__atomic_fetch_add(&h->noring_dropped, 1, __ATOMIC_RELAXED);
		return false;
	}
	if (t->noring_retry != 0) {
		t->lost = RP_SPAN_AFTER_DROP;
		t->noring_retry--;
		drop_noring(h);
		return false;
	}
	idx = claim_ring(h, &prev, &over);
	nospace = 0;
	if (idx >= 0 && (err = reserve_ring((uint32_t)idx)) != 0) {
		/* No room for its pages: undo the claim (nothing was written), no ring. */
		struct rp_wire_ring *r = rp_layout_ring(&proc.lay, h, (uint32_t)idx);

		__atomic_store_n(&r->state, prev, __ATOMIC_RELEASE);
		__atomic_fetch_add(&h->rings_nospace, 1, __ATOMIC_RELAXED);
		nospace = 1;
		say_nospace(err);
		idx = -1;
	}
	if (idx < 0) {
		/* Every ring is owned, or no room: drop, and look again only every 1024
		 * events. */
		t->noring_retry = 1023;
		t->lost = RP_SPAN_AFTER_DROP;
		drop_noring(h);
		return false;
	}
	setup_thread(t, h, idx, over);
	check_undrained(h);
	return true;
}

bool rp_ring_refresh(struct rp_thread *t)
{
	/* Re-read the consumer index. Acquire pairs with the consumer's release
	 * store of c_head: its copies of the slots we are about to reuse are done. */
	t->head = __atomic_load_n(&t->ring->ring.c_head, __ATOMIC_ACQUIRE);
	if (t->tail - t->head < t->mask)
		return true;
	/* Single writer: a plain read-modify-write, stored atomically for readers. */
	__atomic_store_n(&t->ring->dropped, t->ring->dropped + 1, __ATOMIC_RELAXED);
	t->lost = RP_SPAN_AFTER_DROP;
	check_undrained(t->hdr); /* full: maybe nobody drains it */
	return false;
}

/*
 * t->lim (ringprof.h, rp_emit_full): 0 while the fast path must not run (no ring,
 * summaries on; t->lim_span, span records', also while a drop mark is due); else
 * how far past the consumer index, read again now, the fast path may fill the ring
 * before this looks again: to the doorbell's point (1/RP_DOORBELL_FRACTION full)
 * when the ring is below it, then every 1/RECHECK_FRACTION of the ring (the
 * doorbell of a consumer that went to sleep meanwhile), and never further than
 * full (mask: rp_slot()'s test).
 */
#define RECHECK_FRACTION 64u

/* x86: the inline fast path reads only the TSC (ringprof.h, rp_emit_full), so a
 * thread with another clock writes out of line (emit_mono). Whatever RP_NO_RDTSC
 * says: code built with it keeps its own test of t->tsc, and finds stop at tail. */
#if defined(__x86_64__) || defined(__i386__)
#define MONO_OUT_OF_LINE 1
#endif

static void ring_limit(struct rp_thread *t)
{
	uint32_t bell = (t->mask + 1) / RP_DOORBELL_FRACTION, fill, lim, stop, lap;
	uint32_t every = (t->mask + 1) / RECHECK_FRACTION ? (t->mask + 1) / RECHECK_FRACTION : 1u;

	rp_fast_off(t);
	if (t->slots == NULL || t->sum != NULL)
		return;
	/* Acquire, as in rp_ring_refresh(): the consumer's copies of the slots the
	 * fast path will reuse are done. */
	t->head = __atomic_load_n(&t->ring->ring.c_head, __ATOMIC_ACQUIRE);
	fill = t->tail - t->head;
	if (fill >= t->mask)
		return; /* full: every record looks again (and is counted dropped) */
	if (fill < bell)
		lim = bell;
	else /* rp_commit() tested the doorbell for the record just written */
		lim = fill + every;
	t->lim = lim < t->mask ? lim : t->mask;
	t->lim_span = t->lost ? 0 : t->lim; /* the next span record carries the mark */
	/* The fast path's indices: no further than lim, nor past this lap's end (its
	 * slot is base + tail there); the index wraps with the lap, mod 2^32. Below
	 * the doorbell's point, one short of it: the record that fills the ring to it
	 * comes here and rings (rp_commit), however recent head is (a lap's end reads
	 * it again; lim, for code built with older headers, rings one record later
	 * than the head it was computed from). */
	stop = t->head + (fill < bell ? bell - 1u : t->lim);
	lap = (t->tail | t->mask) + 1u;
	if ((int32_t)(stop - lap) > 0)
		stop = lap;
	t->base = (uintptr_t)t->slots - (uintptr_t)(t->tail & ~t->mask) * sizeof(struct rp_event);
#ifdef MONO_OUT_OF_LINE
	/* stop stays at tail; mstop, at tail for every other thread, lets the inline
	 * call (or emit_mono) write the records with the library's clock */
	if (!t->tsc) {
		t->mstop = stop;
		t->mstop_span = t->lost ? t->tail : stop;
		return;
	}
#endif
	t->stop = stop;
	t->stop_span = t->lost ? t->tail : stop;
}

#ifdef MONO_OUT_OF_LINE
/*
 * rp_emit_full()'s fast path for a thread whose clock is not the TSC: on x86 the
 * inline path reads only the TSC, so ring_limit() keeps such a thread's stop at
 * tail and its records come here, with the limits it would have had (t->mstop),
 * and stay out of line. The same stores as the inline path, in the same order.
 */
static void emit_mono(struct rp_thread *t, bool now, uint64_t ts, uint8_t kind, uint8_t flags,
		      uint32_t name, uint64_t track, uint64_t arg, int heal, uintptr_t frame,
		      uintptr_t probe, uint32_t obj)
{
	uint32_t tail = t->tail;
	struct rp_event *e = (struct rp_event *)(t->base + (uintptr_t)tail * sizeof(*e));
	uint16_t depth = 0;

	if (kind == RP_EV_BEGIN || kind == RP_EV_END) {
		depth = rp_span_step(t, kind, name, heal, frame, probe, obj);
		/* No drop mark due here (t->mstop_span would be tail). */
		flags = (uint8_t)((flags & ~RP_SPAN_AFTER_DROP) | RP_SPAN_DEPTH);
	}
	*e = (struct rp_event){ .ts = now ? rp_clock_monotonic() : ts, .name = name,
				.kind = kind, .flags = flags, .depth = depth, .track = track,
				.arg = arg };
	t->tail = tail + 1;
	t->stop = t->stop_span = tail + 1; /* the next record comes here too */
	/* Release: the record's stores before the index that publishes it. */
	__atomic_store_n(&t->ring->ring.p_tail, tail + 1, __ATOMIC_RELEASE);
}
#endif

/*
 * Every record rp_emit_full()'s fast path does not take (t->lim): the thread's first
 * (claiming its ring), a full ring, a drop mark due, summaries on, the doorbell's
 * point. Called with t->busy set. The general path, as the fast path was before it
 * had t->lim, then t->lim for the next records.
 */
void rp_emit_slow(struct rp_thread *t, bool now, uint64_t ts, uint8_t kind, uint8_t flags,
		  uint32_t name, uint64_t track, uint64_t arg, int heal, uintptr_t frame,
		  uintptr_t probe, uint32_t obj)
{
	struct rp_event *e;
	uint16_t depth = 0;

#ifdef MONO_OUT_OF_LINE
	if ((int32_t)(t->tail - (kind == RP_EV_BEGIN || kind == RP_EV_END ? t->mstop_span
									      : t->mstop)) < 0) {
		emit_mono(t, now, ts, kind, flags, name, track, arg, heal, frame, probe, obj);
		return;
	}
#endif
	e = rp_slot(t); /* first: a thread attaching gets its shadow here */

	if (t->sum != NULL) { /* pending BEGINs, summaries: summary.c */
		rp_sum_record(t, e, now, ts, kind, flags, name, track, arg, heal, frame, probe,
			      obj);
	} else {
		if (kind == RP_EV_BEGIN || kind == RP_EV_END)
			depth = rp_span_step(t, kind, name, heal, frame, probe, obj);
		if (e != NULL)
			rp_record(t, e, now ? rp_clock_read(t->tsc) : ts, kind, flags, name, track,
				  arg, depth);
	}
	ring_limit(t);
}

static void futex_wake(uint32_t *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

void rp_doorbell_check(struct rp_thread *t)
{
	struct rp_wire_header *h = t->hdr;

	/* Acquire, as everywhere t->head is read: the fast path reuses slots up to it. */
	t->head = __atomic_load_n(&t->ring->ring.c_head, __ATOMIC_ACQUIRE);
	if (t->tail - t->head < (t->mask + 1) / RP_DOORBELL_FRACTION)
		return;
	/* Only the producer that clears the flag rings: one wake per sleep. The
	 * exchange is a full barrier, ordering our p_tail store before the bump. */
	if (__atomic_exchange_n(&h->consumer_sleeping, 0, __ATOMIC_SEQ_CST) == 0)
		return;
	__atomic_fetch_add(&h->doorbell, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&h->doorbell_rings, 1, __ATOMIC_RELAXED);
	futex_wake(&h->doorbell);
}

/*
 * A recording call found t->busy set (ringprof.h, rp_enter). Normally a signal
 * handler recorded on a thread that was inside a recording call: the record is
 * counted, nothing else touched (false). Handlers nest, so an atomic add. Before the
 * thread has a ring the header's noring count takes it. But a call at or above the
 * holder's stack pointer, on the thread's own stack, cannot be a handler running
 * over it: a handler left the holder by siglongjmp. Then this call takes over
 * (true): what the holder left half done is at worst one unpublished record
 * (rp_commit stores the private index first) or one level's shadow.
 */
bool rp_reentrant(struct rp_thread *t, uintptr_t sp)
{
	struct rp_wire_ring *r = __atomic_load_n(&t->ring, __ATOMIC_RELAXED);
	struct rp_wire_header *h;

	if (sp >= __atomic_load_n(&t->busy, __ATOMIC_RELAXED) && rp_shadow_on_stack(t, sp)) {
		/* The holder may have left a drop mark due with t->stop still set: the
		 * next record takes the slow path, which sets it again. */
		rp_fast_off(t);
		return true;
	}
	if (r != NULL) {
		__atomic_fetch_add(&r->reentrant, 1, __ATOMIC_RELAXED);
		return false;
	}
	h = rp_segment_header();
	if (h != NULL && !t->off)
		__atomic_fetch_add(&h->noring_dropped, 1, __ATOMIC_RELAXED);
	return false;
}

/* pthread key destructor: the thread is exiting. */
static void retire_thread(void *arg)
{
	struct rp_thread *t = arg;

	if (t == NULL || t->ring == NULL)
		return;
	/* A signal handler recording meanwhile is counted, not run (ringprof.h). */
	__atomic_store_n(&t->busy, rp_stack_pointer(), __ATOMIC_RELAXED);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	rp_sum_exit(t); /* what it folded, before the ring goes */
	/* A reader closing this thread's stack must know whether its last records
	 * were lost (then the open spans are, rather than cut at exit). */
	__atomic_store_n(&t->ring->lost_at_retire, t->lost ? 1u : 0u, __ATOMIC_RELAXED);
	/* Release: every record this thread published before the state change. */
	__atomic_store_n(&t->ring->state, RP_RING_RETIRED, __ATOMIC_RELEASE);
	rp_fast_off(t);
	t->slots = NULL;
	t->ring = NULL;
	t->exited = 1; /* later events (other TLS destructors) are dropped, counted */
	rp_shadow_detach(t);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	__atomic_store_n(&t->busy, 0, __ATOMIC_RELAXED);
}

/* An engine runs when someone holds the marker's lock (run.c takes it for the
 * engine's life); the pid written in the file may be stale, the lock cannot be. */
static bool engine_running(const char *session)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	char path[96];
	int fd, rc;

	snprintf(path, sizeof(path), RP_WIRE_ENGINE_FMT, session);
	fd = shm_open(path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return false;
	rc = fcntl(fd, F_GETLK, &fl);
	close(fd);
	return rc == 0 && fl.l_type != F_UNLCK;
}

/* The last consumer wrote a snapshot holding everything it read (snap_head, a
 * consumer-written word): nobody will ever need to count a restart gap here. */
static bool all_snapshotted(struct rp_wire_header *h)
{
	for (uint32_t i = 0; i < proc.lay.ring_count; i++) {
		struct rp_wire_ring *r = rp_layout_ring(&proc.lay, h, i);

		if (__atomic_load_n(&r->snap_head, __ATOMIC_RELAXED) !=
		    __atomic_load_n(&r->ring.c_head, __ATOMIC_ACQUIRE))
			return false;
	}
	return true;
}

static bool all_drained(struct rp_wire_header *h)
{
	for (uint32_t i = 0; i < proc.lay.ring_count; i++)
		if (!ring_drained(rp_layout_ring(&proc.lay, h, i)))
			return false;
	return true;
}

static void wait_for_drain(struct rp_wire_header *h)
{
	struct timespec tick = { 0, 1000000 };

	for (uint32_t ms = 0; ms < proc.exit_wait_ms && !all_drained(h); ms++) {
		if (__atomic_exchange_n(&h->consumer_sleeping, 0, __ATOMIC_SEQ_CST)) {
			__atomic_fetch_add(&h->doorbell, 1, __ATOMIC_RELAXED);
			futex_wake(&h->doorbell);
		}
		nanosleep(&tick, NULL);
	}
}

/*
 * No engine runs and the segment stays for one: give back every page that holds no
 * unread record, so that what an engine-less program leaves in /dev/shm is what it
 * recorded, not the size of its rings. Only rings whose owner is gone are touched,
 * each held (ACTIVE) meanwhile so that no thread takes it over between our look and
 * the punch (a taker reserves its pages again before writing); a live thread's ring
 * is left as it is (it may still write). The name table and arena keep their used
 * part; a name interned after this is answered with id 0 (names_dropped).
 */
static void release_unused(struct rp_wire_header *h)
{
	uint64_t bytes = (uint64_t)proc.lay.ring_capacity * sizeof(struct rp_event);
	uint32_t mask = proc.lay.ring_capacity - 1;

	for (uint32_t i = 0; i < proc.lay.ring_count; i++) {
		struct rp_wire_ring *r = rp_layout_ring(&proc.lay, h, i);
		uint64_t base = proc.lay.ring_data_offset + (uint64_t)i * bytes, a, b;
		uint32_t st = RP_RING_RETIRED, tail, head;

		/* Acquire: the owner's records before we look at the indices. */
		if (!__atomic_compare_exchange_n(&r->state, &st, RP_RING_ACTIVE, false,
						 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			continue;
		tail = __atomic_load_n(&r->ring.p_tail, __ATOMIC_RELAXED);
		head = __atomic_load_n(&r->ring.c_head, __ATOMIC_ACQUIRE);
		a = (uint64_t)(head & mask) * sizeof(struct rp_event);
		b = (uint64_t)(tail & mask) * sizeof(struct rp_event);
		if (tail == head) {
			release(proc.fd, base, bytes);
		} else if (tail - head <= mask) { /* else c_head is implausible: keep all */
			if (a < b) { /* unread: [a, b) */
				release(proc.fd, base, a);
				release(proc.fd, base + b, bytes - b);
			} else { /* unread: [a, end) and [0, b) */
				release(proc.fd, base + b, a - b);
			}
		}
		/* Release: the punch before another thread may claim the ring. */
		__atomic_store_n(&r->state, RP_RING_RETIRED, __ATOMIC_RELEASE);
	}
	pthread_mutex_lock(&proc.lock); /* rp_intern() writes the table under it */
	proc.names_frozen = true;
	release(proc.fd, proc.lay.name_table_offset + (uint64_t)proc.nnames * sizeof(struct rp_wire_name),
		(uint64_t)(proc.lay.name_capacity - proc.nnames) * sizeof(struct rp_wire_name));
	release(proc.fd, proc.lay.name_arena_offset + proc.arena_used,
		proc.lay.name_arena_size - proc.arena_used);
	pthread_mutex_unlock(&proc.lock);
}

/* A segment of the session kept in /dev/shm by a producer that is gone. */
struct kept {
	char name[80];
	uint64_t created;	/* CLOCK_REALTIME ns, from its header */
};

static int kept_cmp(const void *x, const void *y)
{
	const struct kept *a = x, *b = y;

	return a->created < b->created ? -1 : a->created > b->created;
}

/* @name (in /dev/shm) is a segment of a producer that is gone, of our uid, with a
 * header: its creation time in *created. */
static bool kept_segment(DIR *d, const char *name, const char *rest, uint64_t *created)
{
	struct rp_wire_header hd;
	struct stat st;
	char *end;
	long pid = strtol(rest, &end, 10);
	int fd;
	bool ok;

	if (*end != '.' || pid <= 0 || pid > INT32_MAX || pid == (long)getpid())
		return false;
	if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) /* alive, or not ours to judge */
		return false;
	fd = openat(dirfd(d), name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return false;
	ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
	     pread(fd, &hd, sizeof(hd), 0) == (ssize_t)sizeof(hd) && hd.magic == RP_WIRE_MAGIC;
	close(fd);
	*created = hd.created_realtime_ns;
	return ok;
}

/*
 * With no engine running, at most RINGPROF_KEEP_MAX segments of the session stay in
 * /dev/shm waiting for one: ours, which is about to stay, and those of this uid whose
 * producer is gone; the oldest beyond the cap are removed, unread records and all,
 * and said. A live producer's segment is never touched, nor another user's, nor one
 * without a valid header (the engine judges those).
 */
static void cap_kept(const char *session)
{
	char prefix[64], name[96];
	struct kept *k = NULL;
	uint32_t n = 0, cap = 0, removed = 0, keep = proc.keep_max - 1;
	DIR *d = opendir("/dev/shm");

	if (d == NULL)
		return;
	snprintf(prefix, sizeof(prefix), RP_WIRE_NAME_PREFIX "%s.", session);
	for (struct dirent *de; (de = readdir(d)) != NULL;) {
		uint64_t created;

		if (strncmp(de->d_name, prefix, strlen(prefix)) != 0 ||
		    strlen(de->d_name) >= sizeof(k->name) || strcmp(de->d_name, proc.path + 1) == 0 ||
		    !kept_segment(d, de->d_name, de->d_name + strlen(prefix), &created))
			continue;
		if (n == cap) {
			struct kept *p = cap < 65536 ? realloc(k, (cap ? cap * 2 : 16) * sizeof(*k))
						     : NULL;
			if (p == NULL)
				break;
			k = p;
			cap = cap ? cap * 2 : 16;
		}
		snprintf(k[n].name, sizeof(k[n].name), "%s", de->d_name);
		k[n++].created = created;
	}
	closedir(d);
	if (n > keep)
		qsort(k, n, sizeof(*k), kept_cmp);
	for (uint32_t i = 0; n - i > keep; i++) {
		snprintf(name, sizeof(name), "/%s", k[i].name);
		removed += shm_unlink(name) == 0;
	}
	if (removed > 0)
		fprintf(stderr, "ringprof: removed the %u oldest segments of session %s that no "
				"engine read (RINGPROF_KEEP_MAX=%u; docs/operations.md)\n",
			removed, session, proc.keep_max);
	free(k);
}

/* The exiting thread's summaries are written (the others' are at their exit). */
static void exit_summaries(void)
{
	struct rp_thread *t = &rp_thread_state;

	if (t->sum == NULL || t->ring == NULL || !rp_enter(t))
		return;
	rp_sum_flush_all(t, rp_clock_read(t->tsc));
	rp_leave(t);
}

uint64_t rp_summary_default_ns;

void rp_shutdown(void)
{
	struct rp_wire_header *h;
	int32_t consumer;
	bool running;

	if (__atomic_load_n(&proc.state, __ATOMIC_ACQUIRE) != PROC_ON)
		return;
	pthread_mutex_lock(&proc.lock);
	h = proc.hdr;
	if (proc.shut || h == NULL) {
		pthread_mutex_unlock(&proc.lock);
		return;
	}
	proc.shut = true;
	pthread_mutex_unlock(&proc.lock);
	check_undrained(h);
	exit_summaries();
	h->exit_ticks = rp_clock_read(rp_clock_source == RP_CLOCK_TSC);
	/* Release: everything recorded so far before the state says exited. */
	__atomic_store_n(&h->state, RP_SEG_EXITED, __ATOMIC_RELEASE);
	/* The unlink rule: give a running engine the chance to drain what is left;
	 * with none running nobody could, so do not keep the host waiting. Then the
	 * segment stays for the engine to remove if an engine ever read it (it
	 * removes it once a snapshot holds its records; should it die first, its
	 * successor counts what it read from the rings as the restart gap) or if it
	 * holds records nobody has read (the engine, this one when it catches up or
	 * the next one, drains it). Only a segment no other process ever consumed,
	 * and empty, is ours to remove. */
	running = engine_running(h->session);
	if (!all_drained(h) && running)
		wait_for_drain(h);
	consumer = __atomic_load_n(&h->consumer_pid, __ATOMIC_RELAXED);
	if (proc.keep)
		return;
	if (all_drained(h) && (consumer == 0 || consumer == getpid() || all_snapshotted(h))) {
		shm_unlink(proc.path); /* (a consumer in this process goes with it) */
	} else if (!running && (proc.discard || proc.keep_max == 0)) {
		shm_unlink(proc.path); /* asked for: no engine, nothing kept */
	} else if (!running) {
		/* Kept for an engine that does not run: only what it needs, and a bounded
		 * number of such segments, so repeated runs cannot fill /dev/shm. With
		 * no consumer alive either, this thread is done too (what it records
		 * from here on is counted as dropped), so its ring is given back with
		 * the others'. */
		if (rp_thread_state.hdr == h &&
		    (consumer == 0 || (kill(consumer, 0) < 0 && errno == ESRCH)))
			retire_thread(&rp_thread_state);
		release_unused(h);
		cap_kept(h->session);
	}
}

const char *rp_segment_path(void)
{
	return __atomic_load_n(&proc.state, __ATOMIC_ACQUIRE) == PROC_ON ? proc.path : NULL;
}

struct rp_wire_header *rp_segment_header(void)
{
	return __atomic_load_n(&proc.state, __ATOMIC_ACQUIRE) == PROC_ON ? proc.hdr : NULL;
}

uint64_t rp_dropped(void)
{
	struct rp_wire_header *h = rp_segment_header();
	uint64_t n;

	if (h == NULL)
		return 0;
	n = __atomic_load_n(&h->noring_dropped, __ATOMIC_RELAXED);
	for (uint32_t i = 0; i < proc.lay.ring_count; i++) {
		const struct rp_wire_ring *r = rp_layout_ring(&proc.lay, h, i);

		n += __atomic_load_n(&r->dropped, __ATOMIC_RELAXED) +
		     __atomic_load_n(&r->reentrant, __ATOMIC_RELAXED);
	}
	return n;
}

const struct rp_wire_clock *rp_clock(void)
{
	return __atomic_load_n(&proc.state, __ATOMIC_ACQUIRE) == PROC_ON ? &proc.hdr->clock : NULL;
}

static void on_fork_prepare(void)
{
	pthread_mutex_lock(&proc.lock);
}

static void on_fork_parent(void)
{
	pthread_mutex_unlock(&proc.lock);
}

/* The child has one thread, this one, and the parent's mapping: stop writing into
 * it at once; the child's own segment is made on its first event or rp_init(). */
static void on_fork_child(void)
{
	pthread_mutex_init(&proc.lock, NULL);
	memset(&rp_thread_state, 0, sizeof(rp_thread_state));
	nospace = 0;
	if (proc.state == PROC_ON) {
		proc.inherited = proc.hdr;
		proc.hdr = NULL;
		proc.shut = false;
		proc.state = PROC_NEW;
	}
}
