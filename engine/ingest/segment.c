// SPDX-License-Identifier: MIT
/*
 * Consumer view of a producer segment: validation, ring draining, name lookup and
 * the consumer side of the doorbell. See segment.h for the trust rules.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <linux/futex.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "segment.h"

static int fail(char why[RP_WHY_MAX], int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int fail(char why[RP_WHY_MAX], int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, RP_WHY_MAX, fmt, ap);
	va_end(ap);
	return err;
}

/* [off, off + len) lies in [lo, size) and starts 64-byte aligned; no overflow. */
static bool region_ok(uint64_t off, uint64_t len, uint64_t lo, uint64_t size)
{
	return off % RP_WIRE_CACHELINE == 0 && off >= lo && off <= size && len <= size - off;
}

static int check_identity(const struct rp_wire_header *h, size_t size, char *why)
{
	if (h->magic == 0)
		return fail(why, -EAGAIN, "segment not initialised yet (magic is 0)");
	if (h->magic != RP_WIRE_MAGIC)
		return fail(why, -EINVAL, "bad magic 0x%016" PRIx64, h->magic);
	if (h->version_major != RP_WIRE_VERSION_MAJOR)
		return fail(why, -EPROTONOSUPPORT, "ABI major version %u; this reader speaks %u",
			    h->version_major, RP_WIRE_VERSION_MAJOR);
	if (h->header_size < sizeof(*h) || h->header_size % RP_WIRE_CACHELINE)
		return fail(why, -EINVAL, "header_size %u (need >= %zu, 64-byte multiple)",
			    h->header_size, sizeof(*h));
	if (h->segment_size != size)
		return fail(why, -EINVAL, "segment_size %" PRIu64 " but the mapping is %zu bytes",
			    h->segment_size, size);
	if (h->event_size != sizeof(struct rp_event))
		return fail(why, -EINVAL, "event_size %u (need %zu)", h->event_size,
			    sizeof(struct rp_event));
	if (h->pid <= 0)
		return fail(why, -EINVAL, "pid %d", h->pid);
	if (!rp_wire_session_valid(h->session))
		return fail(why, -EINVAL, "session is not 1-31 of [A-Za-z0-9_-]");
	if (h->state != RP_SEG_LIVE && h->state != RP_SEG_EXITED)
		return fail(why, -EINVAL, "state %u", h->state);
	return 0;
}

static int check_counts(const struct rp_wire_header *h, char *why)
{
	uint32_t cap = h->ring_capacity;

	if (h->ring_count == 0 || h->ring_count > RP_WIRE_MAX_RINGS)
		return fail(why, -EINVAL, "ring_count %u (need 1..%u)", h->ring_count,
			    RP_WIRE_MAX_RINGS);
	if (cap < RP_WIRE_MIN_RING_CAP || cap > RP_WIRE_MAX_RING_CAP || (cap & (cap - 1)))
		return fail(why, -EINVAL, "ring_capacity %u (need a power of two in %u..%u)",
			    cap, RP_WIRE_MIN_RING_CAP, RP_WIRE_MAX_RING_CAP);
	if (h->ring_desc_size != sizeof(struct rp_wire_ring))
		return fail(why, -EINVAL, "ring_desc_size %u (need %zu)", h->ring_desc_size,
			    sizeof(struct rp_wire_ring));
	if (h->name_capacity == 0 || h->name_capacity > RP_WIRE_MAX_NAMES)
		return fail(why, -EINVAL, "name_capacity %u (need 1..%u)", h->name_capacity,
			    RP_WIRE_MAX_NAMES);
	if (h->name_entry_size != sizeof(struct rp_wire_name))
		return fail(why, -EINVAL, "name_entry_size %u (need %zu)", h->name_entry_size,
			    sizeof(struct rp_wire_name));
	if (h->name_arena_size == 0 || h->name_arena_size > RP_WIRE_MAX_ARENA)
		return fail(why, -EINVAL, "name_arena_size %" PRIu64, h->name_arena_size);
	return 0;
}

/* Regions in file order, each inside the mapping, after the one before it. */
static int check_regions(const struct rp_wire_header *h, char *why)
{
	uint64_t size = h->segment_size;
	uint64_t descs = (uint64_t)h->ring_count * sizeof(struct rp_wire_ring);
	uint64_t data = (uint64_t)h->ring_count * h->ring_capacity * sizeof(struct rp_event);
	uint64_t table = (uint64_t)h->name_capacity * sizeof(struct rp_wire_name);

	if (!region_ok(h->ring_desc_offset, descs, h->header_size, size))
		return fail(why, -EINVAL, "ring_desc_offset %" PRIu64 " out of the mapping",
			    h->ring_desc_offset);
	if (!region_ok(h->ring_data_offset, data, h->ring_desc_offset + descs, size))
		return fail(why, -EINVAL, "ring_data_offset %" PRIu64 " out of the mapping",
			    h->ring_data_offset);
	if (!region_ok(h->name_table_offset, table, h->ring_data_offset + data, size))
		return fail(why, -EINVAL, "name_table_offset %" PRIu64 " out of the mapping",
			    h->name_table_offset);
	if (!region_ok(h->name_arena_offset, h->name_arena_size, h->name_table_offset + table,
		       size))
		return fail(why, -EINVAL, "name_arena_offset %" PRIu64 " out of the mapping",
			    h->name_arena_offset);
	return 0;
}

static int check_clock(const struct rp_wire_clock *c, char *why)
{
	if (c->source != RP_CLOCK_TSC && c->source != RP_CLOCK_MONOTONIC)
		return fail(why, -EINVAL, "clock source %u", c->source);
	if (c->shift > 63 || c->mult == 0)
		return fail(why, -EINVAL, "clock mult %" PRIu64 " shift %u", c->mult, c->shift);
	if (c->source == RP_CLOCK_MONOTONIC && (c->mult != 1 || c->shift != 0))
		return fail(why, -EINVAL, "monotonic clock with mult %" PRIu64 " shift %u",
			    c->mult, c->shift);
	return 0;
}

int rp_segment_validate(const void *base, size_t size, struct rp_segment_view *out,
			char why[RP_WHY_MAX])
{
	struct rp_wire_header h;
	int err;

	if (base == NULL || size < sizeof(h))
		return fail(why, -EINVAL, "mapping of %zu bytes is smaller than the header", size);
	/* Acquire on the magic, which the producer stores last (release): the
	 * identity lines after it. Only those lines are copied: the rest of the
	 * header changes while the producer runs. */
	memset(&h, 0, sizeof(h));
	h.magic = __atomic_load_n((const uint64_t *)base, __ATOMIC_ACQUIRE);
	memcpy((char *)&h + sizeof(h.magic), (const char *)base + sizeof(h.magic),
	       offsetof(struct rp_wire_header, state) - sizeof(h.magic));
	/* By address, not member access: a caller's buffer need not be 64-aligned. */
	h.state = __atomic_load_n((const uint32_t *)((const char *)base +
						     offsetof(struct rp_wire_header, state)),
				  __ATOMIC_RELAXED);
	if ((err = check_identity(&h, size, why)) || (err = check_counts(&h, why)) ||
	    (err = check_regions(&h, why)) || (err = check_clock(&h.clock, why)))
		return err;
	*out = (struct rp_segment_view){
		.ring_count = h.ring_count,
		.ring_capacity = h.ring_capacity,
		.name_capacity = h.name_capacity,
		.pid = h.pid,
		.version_minor = h.version_minor,
		.segment_size = h.segment_size,
		.ring_desc_offset = h.ring_desc_offset,
		.ring_data_offset = h.ring_data_offset,
		.name_table_offset = h.name_table_offset,
		.name_arena_offset = h.name_arena_offset,
		.name_arena_size = h.name_arena_size,
		.created_realtime_ns = h.created_realtime_ns,
		.clock = h.clock,
	};
	memcpy(out->session, h.session, sizeof(out->session));
	return 0;
}

/*
 * Shrinking segments. Anyone of our uid may truncate a segment file while we have
 * it mapped; a read past the new end raises SIGBUS, which would end the engine and
 * every live analysis with it. The handler puts anonymous zero pages over the
 * mapping from the faulting page to its end and marks the segment: the faulting
 * read is retried and sees zeros (no records, no names), and the sources code
 * finishes the segment as truncated (rp_segment_truncated()). A SIGBUS outside
 * every segment mapping gets the previous disposition back, and so its default.
 * The table is fixed (no allocation in the handler); a segment that finds it full
 * is refused.
 */
#define GUARD_MAX 4096u

static struct guard {
	uintptr_t base;			/* 0: free */
	size_t size;
	volatile sig_atomic_t hit;
} guards[GUARD_MAX];
static uint32_t guards_used;		/* slots [0, guards_used) may be taken */
static struct sigaction old_bus;
static uintptr_t page_mask;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	uintptr_t a = (uintptr_t)si->si_addr;
	uint32_t n = __atomic_load_n(&guards_used, __ATOMIC_ACQUIRE);

	(void)sig;
	(void)uc;
	for (uint32_t i = 0; i < n; i++) {
		uintptr_t b = __atomic_load_n(&guards[i].base, __ATOMIC_ACQUIRE);
		if (b == 0 || a < b || a >= b + guards[i].size)
			continue;
		uintptr_t page = a & page_mask;
		if (mmap((void *)page, b + guards[i].size - page, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED) {
			guards[i].hit = 1;
			return;
		}
	}
	sigaction(SIGBUS, &old_bus, NULL); /* not ours: the fault recurs, as before */
}

static void guard_install(void)
{
	static bool installed;
	struct sigaction sa = { .sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO | SA_NODEFER };

	if (installed)
		return;
	installed = true;
	page_mask = ~((uintptr_t)sysconf(_SC_PAGESIZE) - 1);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, &old_bus);
}

static int guard_add(void *base, size_t size)
{
	guard_install();
	for (uint32_t i = 0; i < GUARD_MAX; i++) {
		if (guards[i].base != 0)
			continue;
		guards[i].size = size;
		guards[i].hit = 0;
		__atomic_store_n(&guards[i].base, (uintptr_t)base, __ATOMIC_RELEASE);
		if (i >= guards_used)
			__atomic_store_n(&guards_used, i + 1, __ATOMIC_RELEASE);
		return 0;
	}
	return -EMFILE;
}

static struct guard *guard_of(const void *base)
{
	for (uint32_t i = 0; i < guards_used; i++)
		if (guards[i].base == (uintptr_t)base)
			return &guards[i];
	return NULL;
}

bool rp_segment_truncated(const struct rp_segment *s)
{
	const struct guard *g = s->name[0] != '\0' ? guard_of(s->base) : NULL;

	return g != NULL && g->hit;
}

static struct rp_wire_ring *ring_desc(const struct rp_segment *s, uint32_t i)
{
	return (struct rp_wire_ring *)((char *)s->base + s->v.ring_desc_offset) + i;
}

int rp_segment_attach(void *base, size_t size, struct rp_segment **out, char why[RP_WHY_MAX])
{
	struct rp_segment *s;
	int err;

	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return fail(why, -ENOMEM, "out of memory");
	err = rp_segment_validate(base, size, &s->v, why);
	if (err)
		goto err_free;
	s->rings = calloc(s->v.ring_count, sizeof(*s->rings));
	if (s->rings == NULL) {
		err = fail(why, -ENOMEM, "out of memory");
		goto err_free;
	}
	s->base = base;
	s->size = size;
	/* Start where the previous consumer stopped; an implausible index is fixed at
	 * the first drain. */
	for (uint32_t i = 0; i < s->v.ring_count; i++) {
		uint32_t hwm = __atomic_load_n(&ring_desc(s, i)->hwm, __ATOMIC_RELAXED);

		s->rings[i].head = __atomic_load_n(&ring_desc(s, i)->ring.c_head, __ATOMIC_RELAXED);
		if (s->v.version_minor >= 2) { /* consumer words: zero padding before */
			s->rings[i].marks = __atomic_load_n(&ring_desc(s, i)->marks_read,
							    __ATOMIC_RELAXED);
			s->rings[i].snap_marks = __atomic_load_n(&ring_desc(s, i)->snap_marks,
								 __ATOMIC_RELAXED);
		}
		/* an earlier consumer's mark, kept (a display figure: only clamped) */
		s->rings[i].hwm = hwm < s->v.ring_capacity ? hwm : s->v.ring_capacity - 1;
	}
	*out = s;
	return 0;
err_free:
	free(s);
	return err;
}

int rp_segment_open(const char *name, struct rp_segment **out, char why[RP_WHY_MAX])
{
	struct stat st;
	void *base;
	int fd, err;

	fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
	if (fd < 0)
		return fail(why, -errno, "%s: %s", name, strerror(errno));
	if (fstat(fd, &st) < 0) {
		err = fail(why, -errno, "%s: fstat: %s", name, strerror(errno));
		goto err_close;
	}
	if (st.st_uid != geteuid()) {
		err = fail(why, -EACCES, "%s: owned by uid %u, not ours (%u)", name,
			   (unsigned)st.st_uid, (unsigned)geteuid());
		goto err_close;
	}
	if (st.st_size < (off_t)sizeof(struct rp_wire_header)) {
		/* A producer between shm_open and ftruncate: not refused, retried. */
		err = fail(why, -EAGAIN, "%s: size %lld: still being created", name,
			   (long long)st.st_size);
		goto err_close;
	}
	if ((uint64_t)st.st_size > RP_WIRE_MAX_SEGMENT) {
		err = fail(why, -EINVAL, "%s: size %lld is not a segment's", name,
			   (long long)st.st_size);
		goto err_close;
	}
	base = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED) {
		err = fail(why, -errno, "%s: mmap: %s", name, strerror(errno));
		goto err_close;
	}
	close(fd);
	if (guard_add(base, (size_t)st.st_size) != 0) {
		munmap(base, (size_t)st.st_size);
		return fail(why, -EMFILE, "%s: %u segments mapped already", name, GUARD_MAX);
	}
	err = rp_segment_attach(base, (size_t)st.st_size, out, why);
	if (err) { /* the header's complaint, with the segment it is about */
		char what[RP_WHY_MAX];

		memcpy(what, why, RP_WHY_MAX);
		fail(why, err, "%s: %s", name, what);
		goto err_unguard;
	}
	snprintf((*out)->name, sizeof((*out)->name), "%s", name);
	return 0;
err_unguard:
	__atomic_store_n(&guard_of(base)->base, 0, __ATOMIC_RELEASE);
	munmap(base, (size_t)st.st_size);
	return err;
err_close:
	close(fd);
	return err;
}

void rp_segment_close(struct rp_segment *s)
{
	if (s == NULL)
		return;
	if (s->name[0] != '\0') {
		struct guard *g = guard_of(s->base);

		if (g != NULL) /* before the unmap: the address may be reused at once */
			__atomic_store_n(&g->base, 0, __ATOMIC_RELEASE);
		munmap(s->base, s->size);
	}
	free(s->rings);
	free(s);
}

static void read_info(const struct rp_wire_ring *r, struct rp_ring_info *info)
{
	uint32_t st = __atomic_load_n(&r->state, __ATOMIC_RELAXED);

	info->state = st <= RP_RING_RETIRED ? st : UINT32_MAX;
	info->gen = __atomic_load_n(&r->gen, __ATOMIC_RELAXED);
	info->tid = __atomic_load_n((const uint32_t *)&r->tid, __ATOMIC_RELAXED);
	info->dropped = __atomic_load_n(&r->dropped, __ATOMIC_RELAXED);
	info->lost_at_retire = __atomic_load_n(&r->lost_at_retire, __ATOMIC_RELAXED) != 0;
}

uint32_t rp_segment_avail(struct rp_segment *s, uint32_t ring, struct rp_ring_info *info)
{
	struct rp_wire_ring *r = ring_desc(s, ring);
	struct rp_ring_cursor *c = &s->rings[ring];
	uint32_t tail, n;

	/* Acquire: the records up to tail, and the owner fields the producer wrote
	 * before them, after the index. Pairs with the producer's release store. */
	tail = __atomic_load_n(&r->ring.p_tail, __ATOMIC_ACQUIRE);
	if (info != NULL)
		read_info(r, info);
	c->gen = __atomic_load_n(&r->gen, __ATOMIC_RELAXED);
	n = tail - c->head;
	if (n > s->v.ring_capacity - 1) {
		/* More than the ring can hold: not a producer index. Skip to it. */
		c->resyncs++;
		c->head = tail;
		__atomic_store_n(&r->ring.c_head, tail, __ATOMIC_RELEASE);
		return 0;
	}
	if (n > c->hwm) { /* rare: written only when it grows */
		c->hwm = n;
		__atomic_store_n(&r->hwm, n, __ATOMIC_RELAXED);
	}
	return n;
}

/* Marks among @n records of run @e, in two counts that do not wait on each other. */
static uint32_t count_marks_run(const struct rp_event *e, uint32_t n)
{
	uint32_t m0 = 0, m1 = 0, k;

	for (k = 0; k + 2 <= n; k += 2) {
		m0 += e[k].kind == RP_EV_THREAD;
		m1 += e[k + 1].kind == RP_EV_THREAD;
	}
	if (k < n)
		m0 += e[k].kind == RP_EV_THREAD;
	return m0 + m1;
}

/*
 * 1.2: the owner marks among records [c->head, c->head + n), still in the ring (the
 * producer reuses no slot before c_head passes it). A successor engine subtracts the
 * marks a dead engine read after its last snapshot from the restart gap, which
 * counts events: marks are none.
 * Read once more here for a caller that did not count them (rp_segment_consume_marks):
 * as at most two contiguous runs (the ring wraps once), no index arithmetic per record.
 */
static uint32_t count_marks(const struct rp_segment *s, uint32_t ring, uint32_t n)
{
	uint32_t h = s->rings[ring].head & (s->v.ring_capacity - 1);
	const struct rp_event *slots = rp_segment_peek(s, ring, 0) - h;
	uint32_t first = s->v.ring_capacity - h < n ? s->v.ring_capacity - h : n;

	return count_marks_run(slots + h, first) + count_marks_run(slots, n - first);
}

void rp_segment_consume_marks(struct rp_segment *s, uint32_t ring, uint32_t n, uint32_t marks)
{
	struct rp_ring_cursor *c = &s->rings[ring];

	/* Before c_head: an engine killed between the two stores leaves the count ahead
	 * by this batch's marks, never behind (docs/operations.md). */
	if (s->v.version_minor >= 2 && marks != 0) {
		c->marks += marks;
		__atomic_store_n(&ring_desc(s, ring)->marks_read, c->marks, __ATOMIC_RELAXED);
	}
	c->head += n;
	c->received += n;
	/* Release: our reads of the slots complete before the producer may reuse them. */
	__atomic_store_n(&ring_desc(s, ring)->ring.c_head, c->head, __ATOMIC_RELEASE);
}

void rp_segment_consume(struct rp_segment *s, uint32_t ring, uint32_t n)
{
	rp_segment_consume_marks(s, ring, n, s->v.version_minor >= 2 ? count_marks(s, ring, n) : 0);
}

/* Whether one of the four records at @e is an owner mark: a compare and a branch
 * each, as a mark is rare (no count built per record). */
static inline bool any_mark4(const struct rp_event *e)
{
	return e[0].kind == RP_EV_THREAD || e[1].kind == RP_EV_THREAD ||
	       e[2].kind == RP_EV_THREAD || e[3].kind == RP_EV_THREAD;
}

uint32_t rp_segment_find_mark(const struct rp_event *e, uint32_t n)
{
	const struct rp_event *p = e, *const end16 = e + (n & ~15u), *const end = e + n;

	/* Sixteen records per pass (a pointer walk: no index arithmetic per pass), then
	 * the exact one among them, or the tail. */
	for (; p < end16; p += 16)
		if (any_mark4(p) || any_mark4(p + 4) || any_mark4(p + 8) || any_mark4(p + 12))
			break;
	for (; p < end; p++)
		if (p->kind == RP_EV_THREAD)
			break;
	return (uint32_t)(p - e);
}

/* The marks among eight copied records that hold one: out of line, so that the copy
 * loop's compares read each copied kind once, in place. */
__attribute__((noinline, cold)) static uint32_t count_marks8(const struct rp_event *e)
{
	return count_marks_run(e, 8);
}

/* Copies @n records of the run @e out, eight at a time (inline: a memcpy call of a
 * whole run may take a string instruction that costs per byte), and counts the owner
 * marks among the copies (what the caller releases is what it got), built only for
 * the eight that hold one. */
static uint32_t copy_out(struct rp_event *out, const struct rp_event *e, uint32_t n)
{
	const struct rp_event *const end8 = e + (n & ~7u), *const end = e + n;
	uint32_t m = 0;

	for (; e < end8; e += 8, out += 8) {
		memcpy(out, e, 8 * sizeof(*e));
		if (any_mark4(out) || any_mark4(out + 4))
			m += count_marks8(out);
	}
	for (; e < end; e++, out++) {
		*out = *e;
		m += out->kind == RP_EV_THREAD;
	}
	return m;
}

unsigned rp_segment_drain(struct rp_segment *s, uint32_t ring, struct rp_event *out,
			  unsigned max, struct rp_ring_info *info)
{
	uint32_t n = rp_segment_avail(s, ring, info), h, first, m;
	const struct rp_event *slots;

	if (n > max)
		n = max;
	if (n == 0)
		return 0;
	/* at most two contiguous runs: the ring wraps once */
	h = s->rings[ring].head & (s->v.ring_capacity - 1);
	slots = rp_segment_peek(s, ring, 0) - h;
	first = s->v.ring_capacity - h < n ? s->v.ring_capacity - h : n;
	m = copy_out(out, slots + h, first);
	m += copy_out(out + first, slots, n - first);
	rp_segment_consume_marks(s, ring, n, m);
	return n;
}

uint32_t rp_segment_ring_pending(const struct rp_segment *s, uint32_t ring)
{
	uint32_t n = __atomic_load_n(&ring_desc(s, ring)->ring.p_tail, __ATOMIC_RELAXED) - s->rings[ring].head;

	return n <= s->v.ring_capacity - 1 ? n : 0;
}

/* Copies arena[off, off + len) as a string into dst (cut to cap - 1). */
static bool copy_str(const struct rp_segment *s, uint32_t off, uint32_t len, char *dst,
		     size_t cap)
{
	const char *arena = (const char *)s->base + s->v.name_arena_offset;
	size_t n = len < cap ? len : cap - 1;

	if ((uint64_t)off + len > s->v.name_arena_size)
		return false;
	memcpy(dst, arena + off, n);
	dst[n] = '\0';
	return true;
}

int rp_segment_name(const struct rp_segment *s, uint32_t id, struct rp_name *out)
{
	const struct rp_wire_name *w;
	struct rp_wire_name e;

	if (id >= s->v.name_capacity)
		return -ENOENT;
	w = (const struct rp_wire_name *)((const char *)s->base + s->v.name_table_offset) + id;
	/* Acquire: the entry's fields were written before `ready` (release). */
	if (__atomic_load_n(&w->ready, __ATOMIC_ACQUIRE) != 1)
		return -ENOENT;
	memcpy(&e, w, sizeof(e));
	if (!copy_str(s, e.name_off, e.name_len, out->name, sizeof(out->name)) ||
	    !copy_str(s, e.cat_off, e.cat_len, out->category, sizeof(out->category)) ||
	    !copy_str(s, e.file_off, e.file_len, out->file, sizeof(out->file)))
		return -EINVAL;
	out->line = e.line;
	return 0;
}

int rp_segment_sleep(struct rp_segment *s, uint64_t timeout_ns)
{
	struct rp_wire_header *h = s->base;
	struct timespec ts = { (time_t)(timeout_ns / 1000000000u),
			       (long)(timeout_ns % 1000000000u) };
	uint32_t bell = __atomic_load_n(&h->doorbell, __ATOMIC_RELAXED);

	/* A full barrier (seq_cst exchange): the flag is visible before we look at
	 * the rings again. The producer does not fence between its p_tail store and
	 * its load of the flag, so a wake-up can still be missed; that costs one
	 * timed wait, which is why the wait always has a timeout. */
	__atomic_exchange_n(&h->consumer_sleeping, 1, __ATOMIC_SEQ_CST);
	for (uint32_t i = 0; i < s->v.ring_count; i++) {
		if (rp_segment_ring_pending(s, i) != 0) {
			__atomic_store_n(&h->consumer_sleeping, 0, __ATOMIC_RELAXED);
			return 0;
		}
	}
	if (syscall(SYS_futex, &h->doorbell, FUTEX_WAIT, bell, &ts, NULL, 0) == 0 ||
	    errno == EAGAIN) {
		__atomic_store_n(&h->consumer_sleeping, 0, __ATOMIC_RELAXED);
		return __atomic_load_n(&h->doorbell, __ATOMIC_RELAXED) != bell;
	}
	__atomic_store_n(&h->consumer_sleeping, 0, __ATOMIC_RELAXED);
	return 0;
}
