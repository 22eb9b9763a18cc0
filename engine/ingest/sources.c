// SPDX-License-Identifier: MIT
/*
 * Live sources; see sources.h for discovery, merge and end-of-life rules.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <ringprof/ringprof.h> /* rp_ticks_to_ns */

#include "sources.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

#define SEEN_MAX 4096u

/* One record copied out of a ring, its time in ns, with its ring's owner then. */
struct rp_bev {
	struct rp_event ev;
	uint32_t gen;
	uint32_t pad;
};

/*
 * A ring's records, taken out of the producer's ring as soon as the engine runs and
 * kept here until the merge watermark passes them: the merge delay costs engine
 * memory, not producer ring space. Circular, a power of two, grown by doubling up
 * to the caps (sources.h).
 */
struct rp_rbuf {
	struct rp_bev *ev;
	uint32_t res;		/* records reserved at ev (the most cap may reach) */
	uint32_t cap, head, n;
	uint32_t hwm;		/* most records held at once */
	uint32_t marks;		/* owner marks (RP_EV_THREAD) among the n: counted as
				   they come and go, so a snapshot does not scan a
				   backlog for them (buffered_marks()) */
	uint32_t gen_now;	/* the ring's owner generation at the last copy */
	uint32_t cur;		/* generation of the next record taken from the ring:
				   gen_now, or (1.2) as the owner marks in it say */
	uint32_t state;		/* and its state (enum rp_ring_state) */
	uint32_t trk;		/* generation of the engine's open track; 0 none */
	uint32_t hint;		/* its engine track slot, found last (engine.h) */
	uint64_t dropped_now;	/* the producer's drop count of the ring, last copy */
	uint64_t dropped_rec;	/* ... as of the newest record copied */
	bool retire_lost;	/* a retired owner said it lost its last records */
	bool short_copy;	/* the last copy left records in the ring (full) */
	/* Records after the buffer's, read in place in the ring by the merge. */
	uint32_t avail;		/* published and not yet read, as of the last copy */
	uint32_t taken;		/* read and processed, released at the merge's end */
	uint32_t taken_marks;	/* the owner marks among them (1.2) */
	bool look_ok;		/* look holds the next of them (copied once) */
	bool mark_lost;		/* the next span record comes after a resync */
	struct rp_bev look;
	/* Off-CPU (offcpu.h): the owner watched (its generation and state then), and
	 * its intervals. */
	uint32_t off_gen, off_state;
	struct rp_offcpu_ring off;
	/* Summaries (docs/summaries.md): the owner whose threshold raises were last
	 * read (its generation) and how many it had. */
	uint32_t sum_gen, sum_raised;
};

struct rp_live {
	struct rp_segment *seg;
	uint32_t src;		/* engine source */
	int pidfd;		/* -1 if none could be had */
	uint32_t *names;	/* producer name id -> engine id; RP_NONE unresolved */
	uint32_t n_names;
	struct rp_rbuf *buf;	/* per ring */
	uint64_t last_ts;	/* newest event time, ns */
	uint64_t forced;	/* merges forced past the watermark by a full buffer */
	uint64_t dropped_seen;	/* producer drops as of the last drop report */
	uint64_t dropped_said;	/* ... and as of the last line about them */
	uint64_t dropped_eng;	/* ... as of the last rp_engine_source_dropped() */
	uint64_t sum_raised_said; /* summary thresholds raised, as last said */
	uint64_t sum_raised_gone; /* ... by the rings' previous owners, as last read */
	uint32_t sum_ns;	/* the highest summary threshold in force, last read */
	bool marks;		/* wire 1.2: owner marks (RP_EV_THREAD) give the generation
				   of the records after them */
	bool dead;		/* the process went without marking its segment EXITED */
	bool ended;		/* the process is gone (died or exited): drain all it
				   left, whatever the watermark, then finish */
	bool pinned;		/* a doorbell wait holds its futex word */
	bool mark_drop;		/* notice_drops(): its drop count moved */
	bool finished;		/* gone from live[], kept mapped for the wait */
	uint32_t *snap;		/* per ring: our head when the pending snapshot was taken */
	uint32_t *snap_mk;	/* ... and the owner marks before that head (1.2) */
	bool snap_taken;
	struct rp_live *next_zombie;
};

struct rp_heap_item {
	uint64_t ts;
	uint32_t live, ring;
};

static void say(struct rp_sources *ss, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(struct rp_sources *ss, const char *fmt, ...)
{
	char line[256];
	va_list ap;

	if (ss->log == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	ss->log(ss->log_ctx, line);
}

int rp_sources_offcpu(struct rp_sources *ss, int mode, uint32_t max_threads)
{
	char why[192];
	int err = rp_offcpu_init(&ss->off, mode, max_threads, &ss->e->offcpu, why, sizeof(why));

	if (why[0])
		say(ss, "%s", why);
	return err;
}

int rp_sources_init(struct rp_sources *ss, struct rp_engine *e, const char *session)
{
	memset(ss, 0, sizeof(*ss));
	ss->e = e;
	snprintf(ss->session, sizeof(ss->session), "%s", session);
	snprintf(ss->shm_dir, sizeof(ss->shm_dir), "/dev/shm");
	ss->max_live = e->cfg.max_sources;
	ss->buf_ring_max = RP_SOURCES_RING_BUFFER;
	ss->buf_budget = RP_SOURCES_BUFFER_BUDGET;
	ss->live = calloc(ss->max_live, sizeof(*ss->live));
	return ss->live ? 0 : -ENOMEM;
}

/*
 * Buffers are mapped, not malloc'd: each reserves the address space of its largest
 * size (buf_ring_max records) at once and grows inside it (grow()): growing never
 * copies the backlog into new pages, whose first touch can cost more than the copy
 * (a hypervisor's shadow page tables: docs/performance.md, Snapshots). Only pages
 * written are memory; an emptied burst's pages go back to the system (release()),
 * so the engine's resident memory follows the backlog, not its peak (malloc may
 * keep a large freed chunk).
 */
static struct rp_bev *bev_alloc(uint32_t cap)
{
	void *p = mmap(NULL, (size_t)cap * sizeof(struct rp_bev), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static void bev_free(struct rp_bev *ev, uint32_t cap)
{
	if (ev != NULL)
		munmap(ev, (size_t)cap * sizeof(*ev));
}

static void live_free(struct rp_sources *ss, struct rp_live *l)
{
	if (l->pidfd >= 0)
		close(l->pidfd);
	for (uint32_t r = 0; l->buf != NULL && r < l->seg->v.ring_count; r++) {
		ss->buf_events -= l->buf[r].cap;
		bev_free(l->buf[r].ev, l->buf[r].res);
		rp_offcpu_ring_close(&ss->off, &l->buf[r].off);
	}
	rp_segment_close(l->seg);
	free(l->names);
	free(l->buf);
	free(l->snap);
	free(l->snap_mk);
	free(l);
}

void rp_sources_free(struct rp_sources *ss)
{
	for (uint32_t i = 0; i < ss->n_live; i++)
		live_free(ss, ss->live[i]);
	while (ss->zombies != NULL) {
		struct rp_live *z = ss->zombies;
		ss->zombies = z->next_zombie;
		live_free(ss, z);
	}
	while (ss->unlinks != NULL) { /* not unlinked: no snapshot holds them */
		struct rp_unlink *u = ss->unlinks;
		ss->unlinks = u->next;
		free(u);
	}
	for (uint32_t i = 0; i < ss->n_seen; i++)
		free(ss->seen[i]);
	free(ss->seen);
	for (uint32_t i = 0; i < ss->n_refused_live; i++)
		free(ss->refused_live[i]);
	free(ss->refused_live);
	free(ss->live);
	free(ss->heap);
	memset(ss, 0, sizeof(*ss));
}

static bool seen(const struct rp_sources *ss, const char *name)
{
	for (uint32_t i = 0; i < ss->n_live; i++)
		if (strcmp(ss->live[i]->seg->name, name) == 0)
			return true;
	for (uint32_t i = 0; i < ss->n_seen; i++)
		if (strcmp(ss->seen[i], name) == 0)
			return true;
	/* finished, waiting for a snapshot to be unlinked: never attached again, even
	 * past the seen list's cap (its gap would be counted twice) */
	for (const struct rp_unlink *u = ss->unlinks; u != NULL; u = u->next)
		if (strcmp(u->name, name) == 0)
			return true;
	return false;
}

/* Remember a name not to look at again (refused, or finished and unlinked). */
static void remember(struct rp_sources *ss, const char *name)
{
	if (ss->n_seen == ss->cap_seen) {
		uint32_t cap = ss->cap_seen ? ss->cap_seen * 2 : 16;
		char **p;
		if (cap > SEEN_MAX)
			return;
		p = realloc(ss->seen, cap * sizeof(*p));
		if (p == NULL)
			return;
		ss->seen = p;
		ss->cap_seen = cap;
	}
	ss->seen[ss->n_seen] = strdup(name);
	if (ss->seen[ss->n_seen] != NULL)
		ss->n_seen++;
}

static struct rp_live *live_new(struct rp_segment *seg)
{
	struct rp_live *l = calloc(1, sizeof(*l));
	uint32_t rings = seg->v.ring_count;

	if (l == NULL)
		return NULL;
	l->seg = seg;
	l->marks = seg->v.version_minor >= 2;
	l->buf = calloc(rings, sizeof(*l->buf));
	l->snap = calloc(rings, sizeof(*l->snap));
	l->snap_mk = calloc(rings, sizeof(*l->snap_mk));
	l->pidfd = (int)syscall(SYS_pidfd_open, seg->v.pid, 0);
	/* No such process: a producer that died before we came (a stale segment). */
	l->ended = l->pidfd < 0 && errno == ESRCH;
	l->dead = l->ended && ((const struct rp_wire_header *)seg->base)->state != RP_SEG_EXITED;
	if (l->buf == NULL || l->snap == NULL || l->snap_mk == NULL) {
		if (l->pidfd >= 0)
			close(l->pidfd);
		free(l->buf);
		free(l->snap);
		free(l->snap_mk);
		free(l);
		return NULL;
	}
	for (uint32_t r = 0; r < rings; r++)
		rp_offcpu_ring_init(&l->buf[r].off);
	return l;
}

static struct rp_wire_ring *wring(const struct rp_live *l, uint32_t r)
{
	return (struct rp_wire_ring *)((char *)l->seg->base + l->seg->v.ring_desc_offset) + r;
}

/*
 * The restart gap: records a previous engine took from the rings (c_head moved)
 * after the last snapshot it wrote (snap_head) are in no report, if it died; they
 * are counted as restart_gap on this source. snap_head moves at each snapshot we
 * write (rp_sources_snapshot_written()).
 *
 * Both words are in shared memory, so a ring's pair is checked before it counts.
 * The ring's capacity is no bound: an engine reads a ring over and over between two
 * snapshots (they are written only on request and at exit), so a true gap may be
 * many times the ring. What a consumer's own indices do bound:
 *   - c_head is at most capacity - 1 behind p_tail; else it is not a consumer index
 *     and the first drain counts it as a resync and skips to p_tail;
 *   - snap_head is a past value of c_head: c_head - snap_head, in serial-number
 *     arithmetic (mod 2^32), is below 2^31. A snap_head ahead of c_head (a stale word
 *     or a hostile one) is counted as a resync of that ring, never as a gap.
 * 1.2: owner marks are records but no events: the marks consumed since that snapshot
 * (marks_read - snap_marks, consumer-written too) are not in the gap; more marks than
 * records is no consumer's pair either.
 * docs/operations.md, "Engine restarts and the restart gap".
 */
static uint64_t ring_gap(struct rp_live *l, uint32_t r)
{
	const struct rp_wire_ring *w = wring(l, r);
	uint32_t head = l->seg->rings[r].head; /* c_head, read at open */
	uint32_t tail = __atomic_load_n(&w->ring.p_tail, __ATOMIC_RELAXED);
	uint32_t snap = __atomic_load_n(&w->snap_head, __ATOMIC_RELAXED);

	if (tail - head > l->seg->v.ring_capacity - 1)
		return 0; /* the drain's resync counts it */
	if (head - snap >= UINT32_C(1) << 31) {
		l->seg->rings[r].resyncs++;
		return UINT64_MAX;
	}
	if (l->marks) { /* owner marks are no events: not in the gap (1.2) */
		uint32_t marks = l->seg->rings[r].marks - l->seg->rings[r].snap_marks;

		if (marks > head - snap) { /* more marks than records: no consumer's */
			l->seg->rings[r].resyncs++;
			return UINT64_MAX;
		}
		return (uint64_t)(head - snap) - marks;
	}
	return head - snap;
}

static void restart_gap(struct rp_sources *ss, struct rp_live *l)
{
	uint64_t gap = 0, bad = 0;

	/* snap_head stays until a snapshot of ours holds this count: if we die
	 * first, our successor counts our part and the dead one's together. */
	for (uint32_t r = 0; r < l->seg->v.ring_count; r++) {
		uint64_t g = ring_gap(l, r);

		if (g == UINT64_MAX)
			bad++;
		else
			gap += g;
	}
	if (bad)
		say(ss, "%s: %" PRIu64 " rings' snap_head ahead of c_head; counted as resyncs, "
			"not as a restart gap", l->seg->name, bad);
	if (gap == 0)
		return;
	ss->e->src[l->src].counts.anomalies[RP_ANOM_RESTART_GAP] += gap;
	ss->restart_gap += gap;
	say(ss, "%s: %" PRIu64 " records read by a previous engine are in none of its "
		"snapshots (restart_gap)", l->seg->name, gap);
}

/* Owner marks among the records a ring's buffer holds (taken out of the ring, not
 * yet in any report): a snapshot's marks are those consumed, less these. */
static uint32_t buffered_marks(const struct rp_rbuf *b)
{
	return b->marks;
}

void rp_sources_snapshot_taken(struct rp_sources *ss)
{
	for (struct rp_unlink *u = ss->unlinks; u != NULL; u = u->next)
		u->covered = true;
	for (uint32_t i = 0; i < ss->n_live; i++) {
		struct rp_live *l = ss->live[i];

		/* What the snapshot holds: the records taken from the ring, less those
		 * still waiting in its buffer (eager draining takes them early). */
		for (uint32_t r = 0; r < l->seg->v.ring_count; r++) {
			l->snap[r] = l->seg->rings[r].head - l->buf[r].n;
			l->snap_mk[r] = l->seg->rings[r].marks - buffered_marks(&l->buf[r]);
		}
		l->snap_taken = true;
	}
}

void rp_sources_snapshot_written(struct rp_sources *ss, bool ok)
{
	if (!ok) { /* nothing published, nothing unlinked; sources may finish again */
		for (struct rp_unlink *u = ss->unlinks; u != NULL; u = u->next)
			u->covered = false;
		for (uint32_t i = 0; i < ss->n_live; i++)
			ss->live[i]->snap_taken = false;
		return;
	}
	for (struct rp_unlink **p = &ss->unlinks; *p != NULL;) {
		struct rp_unlink *u = *p;

		if (!u->covered) {
			p = &u->next;
			continue;
		}
		shm_unlink(u->name);
		*p = u->next;
		free(u);
		ss->n_unlinks--;
	}
	for (uint32_t i = 0; i < ss->n_live; i++) {
		struct rp_live *l = ss->live[i];

		for (uint32_t r = 0; l->snap_taken && r < l->seg->v.ring_count; r++) {
			if (l->marks) /* zero padding in older descriptors: not ours to write */
				__atomic_store_n(&wring(l, r)->snap_marks, l->snap_mk[r],
						 __ATOMIC_RELAXED);
			__atomic_store_n(&wring(l, r)->snap_head, l->snap[r], __ATOMIC_RELAXED);
		}
		l->snap_taken = false;
	}
}

/* The pid in "/ringprof.<session>.<pid>.<n>" no longer runs, and the file is ours. */
static bool creator_gone(const struct rp_sources *ss, const char *name)
{
	const char *p = name + 1 + strlen(RP_WIRE_NAME_PREFIX) + strlen(ss->session) + 1;
	char path[300];
	struct stat st;
	long pid;

	if (strlen(name) <= (size_t)(p - name))
		return false;
	pid = strtol(p, NULL, 10);
	snprintf(path, sizeof(path), "%s%s", ss->shm_dir, name);
	return pid > 0 && kill((pid_t)pid, 0) < 0 && errno == ESRCH && stat(path, &st) == 0 &&
	       st.st_uid == geteuid();
}

/* The pid in "/ringprof.<session>.<pid>.<n>" no longer runs (whoever owns the file). */
static bool producer_gone(const struct rp_sources *ss, const char *name)
{
	const char *p = name + 1 + strlen(RP_WIRE_NAME_PREFIX) + strlen(ss->session) + 1;
	char *end;
	long pid;

	if (strlen(name) <= (size_t)(p - name))
		return false;
	pid = strtol(p, &end, 10);
	return *end == '.' && pid > 0 && pid <= INT32_MAX && kill((pid_t)pid, 0) < 0 &&
	       errno == ESRCH;
}

/*
 * A refused segment (another uid, a malformed header, another ABI major) is nobody's
 * to read, and takes /dev/shm space that producers need: it is removed once its
 * producer is gone, and counted; while that lives it is looked at again at each scan
 * (true: keep it on that list). Another uid's file in a sticky /dev/shm can only be
 * removed by its owner or root: then it stays, and is looked at no more.
 */
static bool reap_refused(struct rp_sources *ss, const char *name)
{
	if (!producer_gone(ss, name))
		return true;
	if (shm_unlink(name) == 0) {
		ss->refused_removed++;
		say(ss, "%s: refused, and its producer is gone: removed", name);
	}
	return false;
}

/* Refused segments whose producer was alive: removed once it is gone. */
static void reap_refused_live(struct rp_sources *ss)
{
	for (uint32_t i = ss->n_refused_live; i-- > 0;) {
		if (reap_refused(ss, ss->refused_live[i]))
			continue;
		free(ss->refused_live[i]);
		ss->refused_live[i] = ss->refused_live[--ss->n_refused_live];
	}
}

static void refused_live_add(struct rp_sources *ss, const char *name)
{
	char **p, *dup;

	if (ss->n_refused_live >= SEEN_MAX ||
	    (p = realloc(ss->refused_live, (ss->n_refused_live + 1) * sizeof(*p))) == NULL)
		return;
	ss->refused_live = p;
	if ((dup = strdup(name)) != NULL)
		ss->refused_live[ss->n_refused_live++] = dup;
}

static int attach(struct rp_sources *ss, const char *name)
{
	char why[RP_WHY_MAX];
	struct rp_segment *seg;
	struct rp_live *l;
	int err, src;

	err = rp_segment_open(name, &seg, why);
	if (err == -EAGAIN && creator_gone(ss, name)) {
		/* Killed while creating it: nothing was recorded, and nobody else
		 * will ever remove it (the name's owner is our uid, checked). */
		say(ss, "%s: its producer died while creating it; removed", name);
		shm_unlink(name);
		remember(ss, name);
		return 0;
	}
	if (err == -EAGAIN)
		ss->pending++; /* still being created: the next scan takes it */
	if (err == -EAGAIN || err == -ENOENT)
		return 0;
	if (err) {
		ss->refused++;
		say(ss, "refused %s", why);
		remember(ss, name);
		if ((err == -EACCES || err == -EINVAL || err == -EPROTONOSUPPORT) &&
		    reap_refused(ss, name))
			refused_live_add(ss, name);
		/* A row of its own, so reports show it (it has no events). */
		src = rp_engine_add_source(ss->e, name, 0, RP_SRC_REFUSED);
		if (src >= 0)
			rp_engine_finish_source(ss->e, (uint32_t)src);
		return 0;
	}
	src = ss->n_live < ss->max_live ? rp_engine_add_source(ss->e, name, seg->v.pid, 0)
					: -ENOSPC;
	if (src < 0 || (l = live_new(seg)) == NULL) {
		ss->refused++;
		say(ss, "refused %s: source cap (%u) reached", name, ss->e->cfg.max_sources);
		rp_segment_close(seg);
		remember(ss, name);
		return 0;
	}
	l->src = (uint32_t)src;
	restart_gap(ss, l);
	__atomic_store_n(&((struct rp_wire_header *)seg->base)->consumer_pid, (int32_t)getpid(),
			 __ATOMIC_RELAXED);
	ss->live[ss->n_live++] = l;
	ss->attached++;
	if (l->pidfd >= 0 && ss->pidfd_added)
		ss->pidfd_added(ss->hook_ctx, l->pidfd);
	say(ss, "attached %s (pid %d%s)", name, seg->v.pid, l->dead ? ", not running" : "");
	return 1;
}

int rp_sources_scan(struct rp_sources *ss)
{
	char prefix[64], name[300];
	DIR *d = opendir(ss->shm_dir);
	int n = 0;

	if (d == NULL)
		return -errno;
	reap_refused_live(ss);
	ss->pending = 0;
	snprintf(prefix, sizeof(prefix), RP_WIRE_NAME_PREFIX "%s.", ss->session);
	for (struct dirent *de; (de = readdir(d)) != NULL;) {
		const char *rest = de->d_name + strlen(prefix);

		if (strncmp(de->d_name, prefix, strlen(prefix)) != 0 ||
		    strcmp(rest, "engine") == 0)
			continue;
		snprintf(name, sizeof(name), "/%s", de->d_name);
		if (!seen(ss, name))
			n += attach(ss, name);
	}
	closedir(d);
	return n;
}

/* The engine id of producer name `id` the first time: grow the map, resolve. */
static uint32_t map_name_slow(struct rp_sources *ss, struct rp_live *l, uint32_t id)
{
	struct rp_name nm;

	if (id >= l->seg->v.name_capacity)
		return RP_NONE;
	if (id >= l->n_names) {
		uint32_t n = l->n_names ? l->n_names : 64;
		while (n <= id)
			n *= 2;
		if (n > l->seg->v.name_capacity)
			n = l->seg->v.name_capacity;
		uint32_t *p = realloc(l->names, n * sizeof(*p));
		if (p == NULL)
			return RP_NONE;
		memset(p + l->n_names, 0xff, (n - l->n_names) * sizeof(*p));
		l->names = p;
		l->n_names = n;
	}
	if (l->names[id] == RP_NONE && rp_segment_name(l->seg, id, &nm) == 0)
		l->names[id] = rp_engine_name(ss->e, l->src, nm.name, nm.category, nm.file,
					      nm.line);
	return l->names[id];
}

/* The engine id of producer name `id`, resolved once; RP_NONE if invalid. */
static inline uint32_t map_name(struct rp_sources *ss, struct rp_live *l, uint32_t id)
{
	if (__builtin_expect(id < l->n_names && l->names[id] != RP_NONE, 1))
		return l->names[id];
	return map_name_slow(ss, l, id);
}

static uint64_t thread_id(uint32_t ring, uint32_t gen)
{
	return (uint64_t)ring << 32 | gen;
}

/* Off-CPU intervals of @ring due before a record at @ts (UINT64_MAX: all) go to the
 * thread's innermost span, or its source's idle time (offcpu.h). */
__attribute__((noinline, cold)) static void offcpu_due(struct rp_sources *ss, struct rp_live *l,
							uint32_t ring, uint64_t ts)
{
	struct rp_rbuf *b = &l->buf[ring];
	uint64_t ns;

	/* trk 0 (generations start at 1): no track, nothing open, idle time */
	while (rp_offcpu_ring_pop(&ss->off, &b->off, ts, &ns))
		rp_engine_offcpu(ss->e, l->src, thread_id(ring, b->trk), ns, &b->hint);
}

/* The ring's engine track ends; @lost: records were lost after the newest one we
 * have, so the open spans may have ended unseen: lost, not truncated (counted, not in
 * the statistics). @all: its thread is gone (retired, or its process ended): the
 * off-CPU intervals still pending came after its last record, so its open spans take
 * them first. At an owner change they wait for the next owner's records (nothing open
 * there yet). */
static void close_track_as(struct rp_sources *ss, struct rp_live *l, uint32_t ring, bool lost,
			   bool all)
{
	struct rp_rbuf *b = &l->buf[ring];

	if (all && b->off.n > 0)
		offcpu_due(ss, l, ring, UINT64_MAX);
	if (b->trk != 0)
		rp_engine_close_thread(ss->e, l->src, thread_id(ring, b->trk), l->last_ts,
				       lost ? RP_ANOM_DROP_LOST : RP_ANOM_KIND_COUNT);
	b->trk = 0;
}

/* The ring's engine track ends: its owner changed, or retired and all is processed
 * (@all: close_track_as()). */
static void close_track(struct rp_sources *ss, struct rp_live *l, uint32_t ring, bool all)
{
	struct rp_rbuf *b = &l->buf[ring];

	close_track_as(ss, l, ring,
		       b->state == RP_RING_RETIRED ? b->retire_lost : b->dropped_now > b->dropped_rec,
		       all);
}

/* Names the thread track (@ring, @gen) by its OS thread id, for exports. */
static void label_track(struct rp_sources *ss, struct rp_live *l, uint32_t ring, uint32_t gen,
			int32_t tid)
{
	char pid[16], t[16];

	snprintf(pid, sizeof(pid), "%d", (int)l->seg->v.pid);
	snprintf(t, sizeof(t), "%d", (int)tid);
	rp_recorder_label(&ss->e->rec, l->src, thread_id(ring, gen), pid, t);
}

/* 1.2: a new owner took the ring over undrained (wire.h, RP_EV_THREAD): the previous
 * owner's track ends here, lost or truncated as the mark says, and the new one's
 * begins. The mark is not an event of either. */
static void owner_mark(struct rp_sources *ss, struct rp_live *l, uint32_t ring,
		       const struct rp_bev *b)
{
	close_track_as(ss, l, ring, (b->ev.flags & RP_THREAD_PREV_LOST) != 0, false);
	l->buf[ring].trk = b->gen;
	if ((int64_t)b->ev.arg > 0 && b->ev.arg <= INT32_MAX)
		label_track(ss, l, ring, b->gen, (int32_t)b->ev.arg);
}

/* One record, ours (a buffer's or the copy of one in place): its name is mapped in it. */
static inline __attribute__((always_inline)) void process(struct rp_sources *ss, struct rp_live *l,
							uint32_t ring, struct rp_bev *b)
{
	if (__builtin_expect(b->gen != l->buf[ring].trk, 0)) { /* a new owner's first record */
		if (b->ev.kind == RP_EV_THREAD && l->marks) { /* (a mark's gen is new) */
			owner_mark(ss, l, ring, b);
			return;
		}
		close_track(ss, l, ring, false);
		l->buf[ring].trk = b->gen;
	}
	/* Its thread was switched out before it: that time goes first (offcpu.h). */
	if (__builtin_expect(rp_offcpu_ring_due(&l->buf[ring].off, b->ev.ts), 0))
		offcpu_due(ss, l, ring, b->ev.ts);
	b->ev.name = map_name(ss, l, b->ev.name);
	if (b->ev.ts > l->last_ts)
		l->last_ts = b->ev.ts;
	rp_engine_event_at(ss->e, l->src, thread_id(ring, b->gen), &b->ev, &l->buf[ring].hint);
}

/*
 * @b's capacity to @cap (a larger power of two, within its reservation), in place:
 * the records keep their order from b->head, so the part of a wrapped backlog that
 * sits at one end moves (the smaller one: half the backlog at most) to where the
 * larger mask puts it.
 */
static void grow(struct rp_rbuf *b, uint32_t cap)
{
	uint32_t end = b->head + b->n;

	if (end > b->cap) { /* wrapped: [head, cap) then [0, end - cap) */
		uint32_t a = b->cap - b->head, w = end - b->cap;

		if (w <= a) { /* the front after the old end */
			memcpy(b->ev + b->cap, b->ev, (size_t)w * sizeof(*b->ev));
		} else { /* the back to the new end */
			memcpy(b->ev + cap - a, b->ev + b->head, (size_t)a * sizeof(*b->ev));
			b->head = cap - a;
		}
	}
	b->cap = cap;
}

/* Room for @n more records in @b, growing it within the caps; @return the room. */
static uint32_t buf_room(struct rp_sources *ss, struct rp_rbuf *b, uint32_t n)
{
	uint32_t cap = b->cap ? b->cap : 1024;

	if (b->cap - b->n >= n)
		return n;
	while (cap - b->n < n && cap < ss->buf_ring_max)
		cap *= 2;
	if (cap > ss->buf_ring_max)
		cap = ss->buf_ring_max;
	if (b->ev == NULL && cap > b->cap) {
		b->res = ss->buf_ring_max;
		/* (strict overcommit charges address space: then what is asked now) */
		if ((b->ev = bev_alloc(b->res)) == NULL)
			b->res = (b->ev = bev_alloc(cap)) != NULL ? cap : 0;
	}
	if (cap > b->cap && cap <= b->res && ss->buf_events - b->cap + cap <= ss->buf_budget) {
		ss->buf_events += cap - b->cap;
		grow(b, cap);
	}
	return b->cap - b->n < n ? b->cap - b->n : n;
}

/* An empty buffer larger than RP_SOURCES_KEEP records shrinks to that: the pages
 * above go back to the system (written again, they come back zeroed). */
static void release(struct rp_sources *ss, struct rp_rbuf *b)
{
	size_t keep = (size_t)RP_SOURCES_KEEP * sizeof(*b->ev);

	(void)madvise((char *)b->ev + keep, (size_t)b->cap * sizeof(*b->ev) - keep,
		      MADV_DONTNEED);
	ss->buf_events -= b->cap - RP_SOURCES_KEEP;
	b->cap = RP_SOURCES_KEEP;
	b->head = 0;
}

/*
 * A ring at risk of filling: its owner lives and a quarter of it is taken (the
 * doorbell rings at an eighth). Only such a ring is emptied into its buffer at once;
 * the merge reads the others' records in place, so that a record crosses memory once.
 */
static bool at_risk(const struct rp_live *l, const struct rp_ring_info *info, uint32_t n)
{
	return info->state != RP_RING_RETIRED && n >= l->seg->v.ring_capacity / 4;
}

/* Releases to the producer the records of @ring processed in place. */
static void release_taken(struct rp_live *l, uint32_t ring)
{
	if (l->buf[ring].taken > 0) {
		rp_segment_consume_marks(l->seg, ring, l->buf[ring].taken,
					 l->buf[ring].taken_marks);
		l->buf[ring].taken = 0;
		l->buf[ring].taken_marks = 0;
	}
}

/* A record out of shared memory: copied once, times in ns, a mark after a resync. */
static inline void take(struct rp_live *l, struct rp_rbuf *b, const struct rp_event *src,
			struct rp_bev *d)
{
	d->ev = *src;
	d->ev.ts = rp_ticks_to_ns(&l->seg->v.clock, d->ev.ts);
	/* Lengths in ticks (1.2, docs/summaries.md): a producer-measured self time and
	 * a summary's figures. */
	if (__builtin_expect(d->ev.kind == RP_EV_END && (d->ev.flags & RP_SPAN_SELF), 0)) {
		d->ev.arg = rp_ticks_len_ns(&l->seg->v.clock, d->ev.arg);
	} else if (__builtin_expect(d->ev.kind == RP_EV_SUMMARY_DATA, 0) &&
		   (d->ev.flags == RP_SUMDATA_TIMES || d->ev.flags == RP_SUMDATA_RANGE)) {
		d->ev.track = rp_ticks_len_ns(&l->seg->v.clock, d->ev.track);
		d->ev.arg = rp_ticks_len_ns(&l->seg->v.clock, d->ev.arg);
	} else if (__builtin_expect(d->ev.kind == RP_EV_SUMMARY_DATA, 0) &&
		   d->ev.flags == RP_SUMDATA_HIST) { /* a length, and a count */
		d->ev.track = rp_ticks_len_ns(&l->seg->v.clock, d->ev.track);
	}
	if (__builtin_expect(d->ev.kind == RP_EV_THREAD, 0) && l->marks)
		b->cur = (uint32_t)d->ev.track; /* the mark and what follows: the new owner's */
	d->gen = b->cur;
	if (__builtin_expect(b->mark_lost, 0) &&
	    (d->ev.kind == RP_EV_BEGIN || d->ev.kind == RP_EV_END) &&
	    (d->ev.flags & RP_SPAN_DEPTH)) {
		d->ev.flags |= RP_SPAN_AFTER_DROP;
		b->mark_lost = false;
	}
}

/*
 * Off-CPU: the ring's owner is watched from its claim to its retirement; its switch
 * records are read right after the ring's producer index (offcpu.h), so every record
 * read from this index on finds the switches before it already read.
 */
/*
 * The producer's converted clock minus CLOCK_MONOTONIC now (offcpu.h), for a TSC
 * clock: one TSC read between two CLOCK_MONOTONIC reads, converted by the segment's
 * calibration. 0 for a CLOCK_MONOTONIC producer, and where the difference is
 * implausible (over a second: a calibration in shared memory is the producer's word).
 */
static int64_t clock_skew(const struct rp_wire_clock *c)
{
#if defined(__x86_64__) || defined(__i386__)
	struct timespec a, b;
	uint64_t tsc, mid;
	int64_t d;

	if (c->source != RP_CLOCK_TSC)
		return 0;
	clock_gettime(CLOCK_MONOTONIC, &a);
	tsc = __builtin_ia32_rdtsc();
	clock_gettime(CLOCK_MONOTONIC, &b);
	mid = ((uint64_t)a.tv_sec * 1000000000u + (uint64_t)a.tv_nsec) / 2 +
	      ((uint64_t)b.tv_sec * 1000000000u + (uint64_t)b.tv_nsec) / 2;
	d = (int64_t)(rp_ticks_to_ns(c, tsc) - mid);
	return d > -1000000000 && d < 1000000000 ? d : 0;
#else
	(void)c;
	return 0;
#endif
}

static void offcpu_read(struct rp_sources *ss, struct rp_live *l, struct rp_rbuf *b,
			const struct rp_ring_info *info)
{
	if (info->gen != b->off_gen || info->state != b->off_state) {
		b->off_gen = info->gen;
		b->off_state = info->state;
		rp_offcpu_ring_owner(&ss->off, &b->off,
				     info->state == RP_RING_ACTIVE ? info->tid : 0);
	}
	if (b->off.fd >= 0)
		b->off.skew = clock_skew(&l->seg->v.clock);
	rp_offcpu_ring_read(&ss->off, &b->off);
}

/* The first owner mark among the @n records of run @e in the ring, or NULL (the
 * records are below the producer index read with acquire: published). */
static const struct rp_event *mark_in(const struct rp_event *e, uint32_t n)
{
	uint32_t k = rp_segment_find_mark(e, n);

	return k < n ? e + k : NULL;
}

/*
 * Looks at one ring: a ring at risk (or @all) has its records taken into its buffer
 * and released at once; the others' stay, read in place by the merge after the
 * buffer's (b->avail). A ring the producer's index made us skip (a resync) lost
 * records: the next span record is marked as after a drop, so the stack re-aligns
 * there as it does for the producer's own drops.
 */
/*
 * 1.2: the generation of the ring's next record, when the descriptor's (@gen, read
 * after the producer index) is not the one we follow: a new owner either claimed the
 * ring drained (every record in it is then @gen's: 1.1's rule) or took it over
 * undrained, and then its mark is in the ring, published before the generation, so a
 * second look at the index (after an acquire of the generation) finds it: the records
 * before the first mark are the generation before it.
 */
static uint32_t first_gen(struct rp_sources *ss, struct rp_live *l, uint32_t ring, uint32_t gen)
{
	const struct rp_wire_ring *r =
		(const struct rp_wire_ring *)((const char *)l->seg->base + l->seg->v.ring_desc_offset) +
		ring;
	const uint32_t cap = l->seg->v.ring_capacity, head = l->seg->rings[ring].head,
		       h = head & (cap - 1);
	const struct rp_event *slots = rp_segment_peek(l->seg, ring, 0) - h, *e;
	uint32_t n;

	__atomic_load_n(&r->gen, __ATOMIC_ACQUIRE); /* pairs with the producer's release */
	n = __atomic_load_n(&r->ring.p_tail, __ATOMIC_ACQUIRE) - head;
	if (n > cap - 1)
		return gen; /* implausible: the next avail resyncs */
	/*
	 * 1.4: the claim's own word says where its records start, so the backlog needs
	 * no search when the head is at or past it. Read after the acquire of gen, it is
	 * @gen's claim's (records from it on are @gen's: the caller takes none of a later
	 * owner's, counted from a p_tail read before @gen) or a later claim's still being
	 * made (then at p_tail: no record from it on). At it, the record there is the
	 * claim's mark after a take-over, whatever comes after. A word that says the
	 * head is before it (by at most a ring) leaves the search to find the mark; a
	 * producer's false word misplaces only its own records' owner.
	 */
	if (l->seg->v.version_minor >= 4) {
		uint32_t before = __atomic_load_n(&r->claim_tail, __ATOMIC_RELAXED) - head;

		if (before == 0 && n > 0 && slots[h].kind == RP_EV_THREAD)
			return (uint32_t)__atomic_load_n(&slots[h].track, __ATOMIC_RELAXED) - 1;
		if (before == 0 || before > cap)
			return gen;
	}
	ss->mark_scans++;
	/* A whole backlog at an engine's attach: read as two contiguous runs at most
	 * (the ring wraps once). */
	e = mark_in(slots + h, cap - h < n ? cap - h : n);
	if (e == NULL && n > cap - h)
		e = mark_in(slots, n - (cap - h));
	return e != NULL ? (uint32_t)__atomic_load_n(&e->track, __ATOMIC_RELAXED) - 1 : gen;
}

/* The first @n records of @ring into @b's free room: the indexes and the bases in
 * locals, so that take()'s stores do not make the compiler load them again for
 * every record. @return the owner marks among them, counted as they pass (the
 * release then reads none of them again). */
static uint32_t copy_run(struct rp_live *l, struct rp_rbuf *b, uint32_t ring, uint32_t n)
{
	const uint32_t smask = l->seg->v.ring_capacity - 1, dmask = b->cap - 1;
	const uint32_t sh = l->seg->rings[ring].head, dh = b->head + b->n;
	const struct rp_event *slots = rp_segment_peek(l->seg, ring, 0) - (sh & smask);
	struct rp_bev *ev = b->ev;
	uint32_t m = 0;

	for (uint32_t k = 0; k < n; k++) {
		struct rp_bev *d = &ev[(dh + k) & dmask];

		take(l, b, &slots[(sh + k) & smask], d);
		m += d->ev.kind == RP_EV_THREAD;
	}
	return m;
}

/* Whether the copies of this drain stop here: a drain that is not final asks
 * ss->interrupt every RP_SOURCES_COPY_ASK records copied, and before a buffer grows
 * (@grow); once it said yes, the drain copies no more. */
static bool copy_held(struct rp_sources *ss, bool grow)
{
	if (ss->copy_held || !ss->copy_asks || ss->interrupt == NULL)
		return ss->copy_held;
	if (!grow && ss->copy_since_ask < RP_SOURCES_COPY_ASK)
		return false;
	ss->copy_since_ask = 0;
	ss->copy_held = ss->interrupt(ss->hook_ctx);
	return ss->copy_held;
}

static void copy_ring(struct rp_sources *ss, struct rp_live *l, uint32_t ring, bool all)
{
	struct rp_rbuf *b = &l->buf[ring];
	struct rp_ring_info info;
	uint64_t resyncs = l->seg->rings[ring].resyncs;
	uint32_t n, got, run, marks;

	release_taken(l, ring); /* none: every merge releases what it read in place */
	n = rp_segment_avail(l->seg, ring, &info);
	if (l->seg->rings[ring].resyncs != resyncs)
		b->mark_lost = true;
	if (ss->off.on)
		offcpu_read(ss, l, b, &info);
	/* A new owner: exports name its track by the OS thread id (once per claim). */
	if (info.gen != b->gen_now && info.tid > 0)
		label_track(ss, l, ring, info.gen, info.tid);
	b->gen_now = info.gen;
	/* (an owner mark taken as the look-ahead moved `cur` past the record at the
	 * head, which is read again below: back before it) */
	if (b->look_ok && b->look.ev.kind == RP_EV_THREAD && l->marks)
		b->cur = b->look.gen - 1;
	if (!l->marks)
		b->cur = info.gen;
	else if (info.gen != b->cur)
		b->cur = first_gen(ss, l, ring, info.gen);
	b->state = info.state;
	b->short_copy = false;
	b->avail = 0;
	/* The look-ahead is read again (it may be copied now), with its resync mark:
	 * a mark the producer set itself comes back the same. */
	if (b->look_ok && (b->look.ev.flags & RP_SPAN_AFTER_DROP))
		b->mark_lost = true;
	b->look_ok = false;
	b->dropped_now = info.dropped; /* read after the producer index (segment.c) */
	b->retire_lost = info.lost_at_retire;
	if (n == 0)
		return;
	b->dropped_rec = info.dropped;
	if (!all && !at_risk(l, &info, n)) {
		b->avail = n;
		return;
	}
	/* In runs of RP_SOURCES_COPY_ASK records at most, each asked first whether a
	 * snapshot waits (and before a buffer grows): then the rest stays in the ring,
	 * read in place, as a ring not at risk is. */
	for (got = 0; got < n; got += run) {
		uint32_t want = n - got < RP_SOURCES_COPY_ASK ? n - got : RP_SOURCES_COPY_ASK;

		if (copy_held(ss, b->cap - b->n < want))
			break;
		run = buf_room(ss, b, want);
		marks = copy_run(l, b, ring, run);
		b->marks += marks;
		if (run > 0)
			rp_segment_consume_marks(l->seg, ring, run, marks);
		b->n += run;
		ss->copy_since_ask += run;
		if (run < want) { /* full: the caps */
			got += run;
			b->short_copy = true;
			break;
		}
	}
	b->avail = n - got; /* what did not fit or wait: read in place */
	if (b->n > b->hwm)
		b->hwm = b->n;
}

/* The ring's next record: its buffer's first, else the next in place. */
static inline struct rp_bev *next_rec(struct rp_live *l, struct rp_rbuf *b, uint32_t ring)
{
	if (b->n > 0)
		return &b->ev[b->head];
	if (!b->look_ok) {
		take(l, b, rp_segment_peek(l->seg, ring, b->taken), &b->look);
		b->look_ok = true;
	}
	return &b->look;
}

static bool has_next(const struct rp_rbuf *b)
{
	return b->n > 0 || b->avail > 0;
}

/* Every ring of every source: at risk, into its buffer. @return the latest time a
 * full buffer forces the merge to (the middle of the fullest one), or 0. */
static uint64_t copy_all(struct rp_sources *ss)
{
	uint64_t force = 0;

	for (uint32_t i = 0; i < ss->n_live; i++) {
		struct rp_live *l = ss->live[i];

		for (uint32_t r = 0; r < l->seg->v.ring_count; r++) {
			struct rp_rbuf *b = &l->buf[r];
			uint64_t mid;

			copy_ring(ss, l, r, false);
			if (!b->short_copy)
				continue;
			l->forced++;
			mid = b->ev[(b->head + b->n / 2) & (b->cap - 1)].ev.ts;
			force = mid > force ? mid : force;
		}
	}
	return force;
}

static void heap_push(struct rp_heap_item *h, uint32_t *n, struct rp_heap_item it)
{
	uint32_t i = (*n)++;

	while (i > 0 && h[(i - 1) / 2].ts > it.ts) {
		h[i] = h[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h[i] = it;
}

static struct rp_heap_item heap_pop(struct rp_heap_item *h, uint32_t *n)
{
	struct rp_heap_item top = h[0], last = h[--(*n)];
	uint32_t i = 0;

	for (;;) {
		uint32_t c = 2 * i + 1;
		if (c >= *n)
			break;
		if (c + 1 < *n && h[c + 1].ts < h[c].ts)
			c++;
		if (last.ts <= h[c].ts)
			break;
		h[i] = h[c];
		i = c;
	}
	if (*n > 0)
		h[i] = last;
	return top;
}

static bool heap_room(struct rp_sources *ss, uint32_t need)
{
	if (need <= ss->heap_cap)
		return true;
	struct rp_heap_item *h = realloc(ss->heap, need * sizeof(*h));
	if (h == NULL)
		return false;
	ss->heap = h;
	ss->heap_cap = need;
	return true;
}

/* The ring of @it into the heap if it has a record due (its time: it.ts). */
static void push_if_due(struct rp_sources *ss, uint32_t *n, struct rp_heap_item it,
			uint64_t watermark)
{
	struct rp_live *l = ss->live[it.live];
	struct rp_rbuf *b = &l->buf[it.ring];

	if (!has_next(b))
		return;
	it.ts = next_rec(l, b, it.ring)->ev.ts;
	if (it.ts <= watermark || l->ended)
		heap_push(ss->heap, n, it);
}

/* Loads every ring's next record due (its buffer's, else in place) into the heap. */
static uint32_t fill_heap(struct rp_sources *ss, uint64_t watermark)
{
	uint32_t n = 0, need = 0;

	for (uint32_t i = 0; i < ss->n_live; i++)
		need += ss->live[i]->seg->v.ring_count;
	if (!heap_room(ss, need))
		return 0;
	for (uint32_t i = 0; i < ss->n_live; i++) {
		struct rp_live *l = ss->live[i];

		for (uint32_t r = 0; r < l->seg->v.ring_count; r++)
			push_if_due(ss, &n, (struct rp_heap_item){ 0, i, r }, watermark);
	}
	return n;
}

/* A ring read in place by the merge, from b->look on. */
struct rp_cursor {
	struct rp_live *l;
	struct rp_rbuf *b;
	const struct rp_event *slots; /* the ring's slots, indexed by h & mask */
	uint32_t ring, mask, h, k;    /* h: the index of b->look when we began; k: read */
	uint32_t marks;		      /* owner marks among the k */
};

static inline void cursor_start(struct rp_cursor *c, struct rp_live *l, uint32_t ring)
{
	c->l = l;
	c->b = &l->buf[ring];
	c->ring = ring;
	c->mask = l->seg->v.ring_capacity - 1;
	c->h = l->seg->rings[ring].head + c->b->taken;
	c->slots = rp_segment_peek(l->seg, ring, c->b->taken) - (c->h & c->mask);
	c->k = 0;
	c->marks = 0;
}

/* The next record after the c->k read, into b->look. */
static inline void cursor_take(struct rp_cursor *c)
{
	take(c->l, c->b, &c->slots[(c->h + c->k) & c->mask], &c->b->look);
}

/* The records read are b->taken: released at the merge's end, or now if many (a
 * long run: room for the producer now). */
static void cursor_finish(struct rp_cursor *c)
{
	c->b->taken += c->k;
	c->b->taken_marks += c->marks;
	if (c->b->taken >= RP_SOURCES_SLICE)
		release_taken(c->l, c->ring);
}

/*
 * A run of records gathered for rp_engine_run_lanes(): times in ns, names mapped,
 * each of its ring's current track; of one ring (lane 0), or of the two rings
 * merge_two() interleaves (which[]). Small: it stays in L1.
 */
#define RUN_MAX 64u
struct rp_run {
	uint32_t n;
	bool two;			/* which[] says each record's ring */
	struct rp_live *l[RP_RUN_LANES];
	uint32_t ring[RP_RUN_LANES];
	struct rp_event ev[RUN_MAX];
	uint8_t which[RUN_MAX];
};

static void run_start(struct rp_run *run, struct rp_live *l, uint32_t ring)
{
	run->n = 0;
	run->two = false;
	run->l[0] = run->l[1] = l;
	run->ring[0] = run->ring[1] = ring;
}

/* The run so far to the engine, in one call. */
static void run_flush(struct rp_sources *ss, struct rp_run *run)
{
	struct rp_run_lane lane[RP_RUN_LANES];

	if (run->n == 0)
		return;
	if (!run->two) {
		struct rp_rbuf *b = &run->l[0]->buf[run->ring[0]];

		rp_engine_run(ss->e, run->l[0]->src, thread_id(run->ring[0], b->trk), run->ev,
			      run->n, &b->hint);
		run->n = 0;
		return;
	}
	for (uint32_t w = 0; w < RP_RUN_LANES; w++) {
		struct rp_rbuf *b = &run->l[w]->buf[run->ring[w]];

		lane[w] = (struct rp_run_lane){ .src = run->l[w]->src,
						.thread = thread_id(run->ring[w], b->trk),
						.hint = &b->hint };
	}
	rp_engine_run_lanes(ss->e, lane, run->ev, run->which, run->n);
	run->n = 0;
}

/*
 * Record @x of lane @w's ring joins the run when process() would do nothing for it
 * but map its name and hand it on: its track's (no new owner, not a mark), no
 * off-CPU time due before it, its name already mapped. @return false: flush, then
 * process() it.
 */
static inline bool run_add(struct rp_sources *ss, struct rp_run *run, uint32_t w,
			   const struct rp_bev *x)
{
	struct rp_live *l = run->l[w];
	struct rp_rbuf *b = &l->buf[run->ring[w]];
	uint32_t id = x->ev.name;

	if (__builtin_expect(x->gen != b->trk || x->ev.kind == RP_EV_THREAD ||
			     rp_offcpu_ring_due(&b->off, x->ev.ts) || id >= l->n_names ||
			     l->names[id] == RP_NONE, 0))
		return false;
	run->ev[run->n] = x->ev;
	run->ev[run->n].name = l->names[id];
	run->which[run->n] = (uint8_t)w;
	if (x->ev.ts > l->last_ts)
		l->last_ts = x->ev.ts;
	if (++run->n == RUN_MAX)
		run_flush(ss, run);
	return true;
}

/*
 * The tight loop of merge_in_place(): after b->look, the ring's next records go to
 * the engine straight from their slots (rp_engine_run_ring()) while each is a record
 * of the ring's current track that take() and process() would only convert, map and
 * hand on (no owner change, no resync mark pending, no off-CPU time due before it,
 * its name mapped), due and not later than @others, @max at most. The first record
 * that is not stays in the ring, for cursor_take() and the general path. @return
 * false: the ring has no more records in place (b->look is then empty).
 */
static bool run_plain(struct rp_sources *ss, struct rp_live *l, struct rp_cursor *c,
		      struct rp_run *run, uint64_t due, uint64_t others, uint32_t max)
{
	struct rp_rbuf *b = c->b;
	struct rp_ring_slice sl = {
		.slots = c->slots, .mask = c->mask, .h = c->h + c->k,
		.n = b->avail < max ? b->avail : max,
		.clock = &l->seg->v.clock, .names = l->names, .n_names = l->n_names,
		.lim = due < others ? due : others, .last_ts = l->last_ts,
		.tail_ts = b->off.last_ts,
	};
	uint32_t k;

	if (b->mark_lost || b->cur != b->trk)
		return true;
	run_flush(ss, run); /* (the look, if it joined a run, goes first) */
	sl.lim = sl.lim < b->off.next ? sl.lim : b->off.next;
	k = rp_engine_run_ring(ss->e, l->src, thread_id(c->ring, b->trk), &sl, &b->hint);
	c->k += k;
	b->avail -= k;
	l->last_ts = sl.last_ts;
	b->off.last_ts = sl.tail_ts; /* as rp_offcpu_ring_due() leaves it */
	if (b->avail == 0) {
		b->look_ok = false;
		return false;
	}
	return true;
}

/*
 * The records of ring @ring read in place, from b->look on, while they are due and
 * not later than @others (the oldest of every other ring), @max (>= 1) at most;
 * @return how many. The next one, if any, is left copied in b->look, and *again
 * says the ring goes back into the heap. One ring's records keep their order, so
 * they go to the engine in runs (rp_engine_run()): the plain ones gathered by
 * run_plain(), the rest through process(), each ending the run before it.
 */
static uint32_t merge_in_place(struct rp_sources *ss, struct rp_live *l, uint32_t ring,
			       uint64_t watermark, uint64_t others, uint32_t max, bool *again)
{
	struct rp_rbuf *b = &l->buf[ring];
	uint64_t due = l->ended ? UINT64_MAX : watermark;
	struct rp_cursor c;
	struct rp_run run;

	run_start(&run, l, ring);
	cursor_start(&c, l, ring);
	*again = false;
	for (;;) {
		if (!run_add(ss, &run, 0, &b->look)) {
			run_flush(ss, &run);
			c.marks += b->look.ev.kind == RP_EV_THREAD;
			process(ss, l, ring, &b->look);
		}
		c.k++;
		if (--b->avail == 0) {
			b->look_ok = false;
			break;
		}
		if (!run_plain(ss, l, &c, &run, due, others, max - c.k))
			break;
		cursor_take(&c);
		if (b->look.ev.ts > watermark && !l->ended)
			break;
		if (b->look.ev.ts > others || c.k >= max) {
			*again = true;
			break;
		}
	}
	run_flush(ss, &run);
	cursor_finish(&c);
	return c.k;
}

/*
 * Two rings read in place, both with a record due in b->look: the older of the two
 * looks each time, picked by index, not by a branch. Two busy threads' records
 * interleave at random, so the heap's "is this ring still the oldest" test at the
 * end of each run mispredicts at nearly every record; here nothing depends on the
 * order but data. Ends, with the next record (if any) left in each look, when one
 * ring has no more records in place, its next is not yet due, or @max are done.
 * Equal times may come from either ring (as from the heap).
 */
static uint64_t merge_two(struct rp_sources *ss, struct rp_cursor c[2], uint64_t watermark,
			  uint64_t max)
{
	uint64_t done = 0;
	struct rp_run run;

	run_start(&run, c[0].l, c[0].ring);
	run.two = true;
	run.l[1] = c[1].l;
	run.ring[1] = c[1].ring;
	for (;;) {
		uint32_t w = c[1].b->look.ev.ts < c[0].b->look.ev.ts;
		struct rp_cursor *x = &c[w];
		struct rp_rbuf *b = x->b;

		if (!run_add(ss, &run, w, &b->look)) {
			run_flush(ss, &run);
			x->marks += b->look.ev.kind == RP_EV_THREAD;
			process(ss, x->l, x->ring, &b->look);
		}
		x->k++;
		done++;
		if (__builtin_expect(--b->avail == 0, 0)) {
			b->look_ok = false;
			break;
		}
		cursor_take(x);
		/* The pick waits for this record's time (no branch to run ahead on),
		 * so the ring is fetched ahead: 16 records, 512 bytes. */
		__builtin_prefetch(&x->slots[(x->h + x->k + 16) & x->mask]);
		if (__builtin_expect((b->look.ev.ts > watermark && !x->l->ended) || done >= max, 0))
			break;
	}
	run_flush(ss, &run);
	cursor_finish(&c[0]);
	cursor_finish(&c[1]);
	return done;
}

/*
 * Pops the ring with the oldest record, then keeps taking that ring's records (its
 * buffer's, then those in place) while they are not later than the oldest of every
 * other one (the heap's top): one heap operation per interleaving, not per record.
 * Equal times may come from either.
 */
static uint64_t merge(struct rp_sources *ss, uint64_t watermark, uint64_t max)
{
	uint32_t n = fill_heap(ss, watermark);
	uint64_t done = 0;
	struct rp_run run;

	while (n > 0 && done < max) {
		struct rp_heap_item it = heap_pop(ss->heap, &n);
		struct rp_live *l = ss->live[it.live];
		struct rp_rbuf *b = &l->buf[it.ring];
		uint64_t others = n > 0 ? ss->heap[0].ts : UINT64_MAX;
		uint64_t stop = done + RP_SOURCES_RUN; /* this ring's run, at most */
		bool again;

		if (n == 1 && b->n == 0 && ss->live[ss->heap[0].live]->buf[ss->heap[0].ring].n == 0) {
			struct rp_heap_item o = heap_pop(ss->heap, &n);
			struct rp_cursor c[2];

			cursor_start(&c[0], l, it.ring);
			cursor_start(&c[1], ss->live[o.live], o.ring);
			done += merge_two(ss, c, watermark, max - done);
			push_if_due(ss, &n, it, watermark);
			push_if_due(ss, &n, o, watermark);
			continue;
		}
		/* the buffer's records go to the engine in runs too (run_add()) */
		run_start(&run, l, it.ring);
		for (;;) {
			if (b->n == 0) { /* due and leading, in b->look */
				run_flush(ss, &run);
				done += merge_in_place(ss, l, it.ring, watermark, others,
						       (uint32_t)(stop - done), &again);
				if (again) {
					it.ts = b->look.ev.ts;
					heap_push(ss->heap, &n, it);
				}
				break;
			}
			/* (before process(), which may rewrite the record) */
			b->marks -= b->ev[b->head].ev.kind == RP_EV_THREAD;
			if (!run_add(ss, &run, 0, &b->ev[b->head])) {
				run_flush(ss, &run);
				process(ss, l, it.ring, &b->ev[b->head]);
			}
			done++;
			b->head = (b->head + 1) & (b->cap - 1);
			if (--b->n == 0 && b->avail == 0)
				break;
			it.ts = next_rec(l, b, it.ring)->ev.ts;
			if (it.ts > watermark && !l->ended)
				break;
			if (it.ts > others || done >= stop) {
				heap_push(ss->heap, &n, it);
				break;
			}
		}
		run_flush(ss, &run);
	}
	for (uint32_t i = 0; i < ss->n_live; i++)
		for (uint32_t r = 0; r < ss->live[i]->seg->v.ring_count; r++)
			release_taken(ss->live[i], r);
	return done;
}

/* What the merge left in the rings (not yet due) goes into the buffers: between
 * drains the rings are empty, as the doorbells and the sleep expect. */
static void evacuate(struct rp_sources *ss)
{
	for (uint32_t i = 0; i < ss->n_live; i++) {
		struct rp_live *l = ss->live[i];

		for (uint32_t r = 0; r < l->seg->v.ring_count; r++)
			copy_ring(ss, l, r, true);
	}
}

/* A ring whose records are all processed ends its engine track when its owner
 * changed or retired (a retired ring gets no more records of that owner). */
static void end_tracks(struct rp_sources *ss)
{
	for (uint32_t i = 0; i < ss->n_live; i++) {
		struct rp_live *l = ss->live[i];

		for (uint32_t r = 0; r < l->seg->v.ring_count; r++) {
			struct rp_rbuf *b = &l->buf[r];

			/* (1.2: the generation of the next record, not the descriptor's:
			 * a new owner's mark may not be read yet) */
			if (b->trk != 0 && b->n == 0 &&
			    ((l->marks ? b->cur : b->gen_now) != b->trk ||
			     (b->state == RP_RING_RETIRED &&
			      rp_segment_ring_pending(l->seg, r) == 0)))
				close_track(ss, l, r, (l->marks ? b->cur : b->gen_now) == b->trk);
			if (b->n == 0 && b->cap > RP_SOURCES_KEEP)
				/* a burst's pages go back once empty: memory follows
				 * the backlog, not its peak */
				release(ss, b);
		}
	}
}

static bool pid_gone(const struct rp_live *l)
{
	struct pollfd p = { .fd = l->pidfd, .events = POLLIN };

	if (l->pidfd >= 0)
		return poll(&p, 1, 0) == 1;
	return kill(l->seg->v.pid, 0) < 0 && errno == ESRCH;
}

/* Nothing left in the producer's rings (@bufs: nor in our buffers). */
static bool drained(const struct rp_live *l, bool bufs)
{
	for (uint32_t r = 0; r < l->seg->v.ring_count; r++)
		if (rp_segment_ring_pending(l->seg, r) != 0 || (bufs && l->buf[r].n != 0))
			return false;
	return true;
}

/*
 * The producer's summary thresholds (wire.h rp_wire_ring, docs/summaries.md): the
 * highest in force on its rings, and how many times its threads raised theirs. A
 * ring's count restarts at each claim, so the counts of previous owners are kept
 * (raises an owner made after its count was last read, before a new claim, are not:
 * a lower bound then, which polling at every drain keeps rare). @return the raises.
 */
static uint64_t sum_poll(struct rp_live *l)
{
	uint64_t raised = l->sum_raised_gone;
	uint32_t top = 0;

	for (uint32_t r = 0; r < l->seg->v.ring_count; r++) {
		const struct rp_wire_ring *d = wring(l, r);
		struct rp_rbuf *b = &l->buf[r];
		uint32_t gen = __atomic_load_n(&d->gen, __ATOMIC_RELAXED);
		uint32_t n = __atomic_load_n(&d->summary_raised, __ATOMIC_RELAXED);
		uint32_t t = __atomic_load_n(&d->summary_ns, __ATOMIC_RELAXED);

		if (gen != b->sum_gen) { /* a new owner: the last one's raises stay */
			l->sum_raised_gone += b->sum_raised;
			raised += b->sum_raised;
			b->sum_gen = gen;
			b->sum_raised = 0;
		}
		if (n > b->sum_raised)
			b->sum_raised = n;
		raised += b->sum_raised;
		top = t > top ? t : top;
	}
	if (top > 0)
		l->sum_ns = top;
	return raised;
}

static void update_one(struct rp_sources *ss, struct rp_live *l)
{
	const struct rp_wire_header *h = l->seg->base;
	struct rp_report_source *rep = &ss->e->src[l->src].rep;
	const struct rp_wire_ring *rings =
		(const struct rp_wire_ring *)((const char *)l->seg->base + l->seg->v.ring_desc_offset);
	uint64_t dropped = __atomic_load_n(&h->noring_dropped, __ATOMIC_RELAXED), resyncs = 0;
	uint64_t reentrant = 0;

	for (uint32_t r = 0; r < l->seg->v.ring_count; r++) {
		/* reentrant (1.2; zero padding before): records of signal handlers that
		 * interrupted a recording call, dropped whole (spans stay aligned) */
		reentrant += __atomic_load_n(&rings[r].reentrant, __ATOMIC_RELAXED);
		dropped += __atomic_load_n(&rings[r].dropped, __ATOMIC_RELAXED);
		resyncs += l->seg->rings[r].resyncs;
	}
	rep->dropped = dropped + reentrant;
	rep->reentrant = reentrant;
	rep->resyncs = resyncs;
	rep->ring_capacity = l->seg->v.ring_capacity;
	rep->forced = l->forced;
	for (uint32_t r = 0; r < l->seg->v.ring_count; r++) {
		uint32_t hwm = l->seg->rings[r].hwm;

		rep->ring_hwm = hwm > rep->ring_hwm ? hwm : rep->ring_hwm;
		rep->buffer_hwm = l->buf[r].hwm > rep->buffer_hwm ? l->buf[r].hwm : rep->buffer_hwm;
	}
	rep->names_dropped = __atomic_load_n(&h->names_dropped, __ATOMIC_RELAXED);
	/* For display only; clamped to the validated geometry (the producer writes them). */
	rep->name_capacity = l->seg->v.name_capacity;
	rep->name_bytes = l->seg->v.name_arena_size;
	rep->names_used = __atomic_load_n(&h->names_used, __ATOMIC_RELAXED);
	rep->names_used = rep->names_used < rep->name_capacity ? rep->names_used
							     : rep->name_capacity;
	rep->name_bytes_used = __atomic_load_n(&h->arena_used, __ATOMIC_RELAXED);
	rep->name_bytes_used = rep->name_bytes_used < rep->name_bytes ? rep->name_bytes_used
								      : rep->name_bytes;
	rep->summary_raised = sum_poll(l);
	rep->summary_ns = l->sum_ns;
	if (l->marks) { /* 1.2 counters; zero in older headers' reserved words */
		rep->nospace_dropped = __atomic_load_n(&h->nospace_dropped, __ATOMIC_RELAXED);
		rep->rings_nospace = __atomic_load_n(&h->rings_nospace, __ATOMIC_RELAXED);
	}
	if (__atomic_load_n(&h->state, __ATOMIC_ACQUIRE) == RP_SEG_EXITED)
		rep->flags |= RP_SRC_EXITED;
	if (l->dead)
		rep->flags |= RP_SRC_DEAD;
}

void rp_sources_update(struct rp_sources *ss)
{
	for (uint32_t i = 0; i < ss->n_live; i++)
		update_one(ss, ss->live[i]);
}

/* A finished segment's name goes now, or (defer_unlink) once a snapshot that holds
 * its records is written: until then an engine after us, should we die, finds it
 * and counts what we read of it as the restart gap. */
static void unlink_later(struct rp_sources *ss, const char *name)
{
	struct rp_unlink *u;

	if (!ss->defer_unlink || (u = malloc(sizeof(*u) + strlen(name) + 1)) == NULL) {
		shm_unlink(name);
		return;
	}
	u->covered = false;
	memcpy(u->name, name, strlen(name) + 1);
	u->next = ss->unlinks;
	ss->unlinks = u;
	ss->n_unlinks++;
}

/* A finished segment waiting for its unlink keeps only what a successor needs to
 * count the restart gap (the header and ring descriptors): the ring data and names,
 * most of its memory, go back to the system now (MADV_REMOVE frees tmpfs pages). */
static void release_pages(const struct rp_segment *seg)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t lo = ((uintptr_t)seg->base + seg->v.ring_data_offset + page - 1) & ~(page - 1);
	uintptr_t hi = ((uintptr_t)seg->base + seg->size) & ~(page - 1);

	if (hi > lo)
		madvise((void *)lo, hi - lo, MADV_REMOVE);
}

/* Finishes a source: counters, open spans, the name, the mapping. */
static void finish(struct rp_sources *ss, uint32_t i)
{
	struct rp_live *l = ss->live[i];

	update_one(ss, l);
	for (uint32_t r = 0; r < l->seg->v.ring_count; r++) { /* thread tracks first */
		struct rp_ring_info info;

		rp_segment_avail(l->seg, r, &info);
		l->buf[r].dropped_now = info.dropped;
		l->buf[r].state = info.state;
		l->buf[r].retire_lost = info.lost_at_retire;
		rp_offcpu_ring_read(&ss->off, &l->buf[r].off);
		close_track(ss, l, r, true);
	}
	if (ss->defer_unlink)
		release_pages(l->seg);
	rp_engine_close_source(ss->e, l->src, l->last_ts, RP_ANOM_KIND_COUNT);
	rp_engine_finish_source(ss->e, l->src);
	say(ss, "%s: pid %d %s", l->seg->name, l->seg->v.pid, l->dead ? "died" : "exited");
	unlink_later(ss, l->seg->name);
	remember(ss, l->seg->name);
	if (l->pidfd >= 0 && ss->pidfd_removed)
		ss->pidfd_removed(ss->hook_ctx, l->pidfd);
	ss->live[i] = ss->live[--ss->n_live];
	if (l->pinned) { /* a futex wait still holds its word: unmap at unpin */
		l->finished = true;
		l->next_zombie = ss->zombies;
		ss->zombies = l;
		return;
	}
	live_free(ss, l);
}

/* @return how many sources were found dead just now (to be drained). */
static int check_ends(struct rp_sources *ss)
{
	int newly_dead = 0;

	for (uint32_t i = ss->n_live; i-- > 0;) {
		struct rp_live *l = ss->live[i];
		const struct rp_wire_header *h = l->seg->base;
		bool exited = __atomic_load_n(&h->state, __ATOMIC_ACQUIRE) == RP_SEG_EXITED;

		/* Its file shrank under us (segment.c caught the SIGBUS): what is left
		 * reads as zeros, so the source ends here, as a death, undrained. */
		if (rp_segment_truncated(l->seg)) {
			say(ss, "%s: the segment file shrank while attached; its unread "
				"records are lost", l->seg->name);
			ss->truncated++;
			l->ended = l->dead = true;
			finish(ss, i);
			continue;
		}
		/* An EXITED mark is not the end: the producer's other threads may still
		 * write until the process is gone, so only its pidfd ends a source. */
		if (!l->ended && pid_gone(l)) {
			l->ended = true;
			l->dead = !exited;
			newly_dead++; /* drain once more before finishing */
			continue;
		}
		/* Not while a snapshot that holds it is being written: that write
		 * moves its snap_head, which needs it live (else its successor would
		 * count a gap that is in the snapshot). */
		if (l->ended && drained(l, true) && !l->snap_taken)
			finish(ss, i);
	}
	return newly_dead;
}

static uint64_t producer_drops(const struct rp_live *l);

/*
 * A source whose producer lost records since the last drain: the engine is told,
 * with the time now (read after the counters, so every record a counted drop
 * refused was due before it), that its async requests open before then may have
 * lost their END (engine.h: rp_engine_source_dropped(), the async expiry).
 */
static void notice_drops(struct rp_sources *ss)
{
	struct timespec now;
	bool moved = false;

	for (uint32_t i = 0; i < ss->n_live; i++) {
		struct rp_live *l = ss->live[i];
		uint64_t d = producer_drops(l);

		l->mark_drop = d > l->dropped_eng;
		moved |= l->mark_drop;
		l->dropped_eng = d;
	}
	if (!moved)
		return;
	clock_gettime(CLOCK_MONOTONIC, &now);
	for (uint32_t i = 0; i < ss->n_live; i++)
		if (ss->live[i]->mark_drop)
			rp_engine_source_dropped(ss->e, ss->live[i]->src,
						 (uint64_t)now.tv_sec * 1000000000u +
							 (uint64_t)now.tv_nsec);
}

/*
 * Summaries (docs/summaries.md): a producer thread inside a call whose BEGIN it has
 * not written yet (it may still fold) publishes that call's start (pending_ticks,
 * producer-written, untrusted). Its BEGIN will come with that time, behind records
 * of other rings the merge may have passed: the watermark waits for it, for at most
 * RP_SOURCES_PENDING_HOLD_NS (a thread blocked inside a short-looking call would hold
 * every other one back; past that its records come late, and are counted so).
 */
#define RP_SOURCES_PENDING_HOLD_NS (UINT64_C(1000) * 1000 * 1000)

static uint64_t pending_floor(struct rp_sources *ss, uint64_t watermark)
{
	if (watermark == UINT64_MAX)
		return watermark; /* a final drain: everything */
	for (uint32_t i = 0; i < ss->n_live; i++) {
		struct rp_live *l = ss->live[i];

		for (uint32_t r = 0; r < l->seg->v.ring_count; r++) {
			const struct rp_wire_ring *d = wring(l, r);
			uint64_t p = __atomic_load_n(&d->pending_ticks, __ATOMIC_RELAXED), ns;

			if (p == 0 || __atomic_load_n(&d->state, __ATOMIC_RELAXED) != RP_RING_ACTIVE)
				continue;
			ns = rp_ticks_to_ns(&l->seg->v.clock, p);
			if (ns < watermark && watermark - ns <= RP_SOURCES_PENDING_HOLD_NS)
				watermark = ns;
		}
	}
	return watermark;
}

/* A producer that raised its threshold for a full ring says so once per raise. */
static void notice_summaries(struct rp_sources *ss)
{
	for (uint32_t i = 0; i < ss->n_live; i++) {
		struct rp_live *l = ss->live[i];
		uint64_t raised = sum_poll(l);
		uint32_t threads = 0;

		if (raised <= l->sum_raised_said)
			continue;
		for (uint32_t r = 0; r < l->seg->v.ring_count; r++)
			threads += l->buf[r].sum_raised > 0;
		say(ss, "%s: summary threshold raised to %u ns on %u threads (rings more "
			"than half full at a flush; RINGPROF_SUMMARY_NS, RINGPROF_RING_EVENTS)",
		    l->seg->name, l->sum_ns, threads);
		l->sum_raised_said = raised;
	}
}

uint64_t rp_sources_touch(struct rp_sources *ss)
{
	const uint32_t per_page = 4096 / sizeof(struct rp_event);
	uint64_t pages = 0;

	for (uint32_t i = 0; i < ss->n_live; i++) {
		struct rp_segment *s = ss->live[i]->seg;

		for (uint32_t r = 0; r < s->v.ring_count; r++) {
			uint32_t n = rp_segment_ring_pending(s, r);

			for (uint32_t k = 0; k < n; k += per_page, pages++)
				(void)*(const volatile uint8_t *)rp_segment_peek(s, r, k);
			if (n != 0) /* the last page, where records straddle a page */
				(void)*(const volatile uint8_t *)rp_segment_peek(s, r, n - 1);
		}
	}
	return pages;
}

/*
 * Copy, then merge a slice, and again until nothing is due: the rings are emptied
 * every RP_SOURCES_SLICE records processed, so a long backlog in the analysis never
 * keeps a producer's ring waiting. A full buffer that left records in a ring makes
 * that slice merge past the watermark, to the middle of the buffer (a few records
 * may then come late), instead of letting the ring fill.
 */
uint64_t rp_sources_drain(struct rp_sources *ss, uint64_t watermark)
{
	return rp_sources_drain_some(ss, watermark, 64);
}

/* Whether the drain stops after this slice: the cap, or ss->interrupt (asked only
 * when another slice would follow: one call per RP_SOURCES_SLICE records at most). */
static bool slice_stop(struct rp_sources *ss, unsigned *slices, unsigned max_slices)
{
	if (++*slices >= max_slices)
		return true;
	return ss->interrupt != NULL && ss->interrupt(ss->hook_ctx);
}

uint64_t rp_sources_drain_some(struct rp_sources *ss, uint64_t watermark, unsigned max_slices)
{
	uint64_t n = 0, got, force;
	unsigned slices = 0;

	notice_drops(ss);
	notice_summaries(ss);
	ss->copy_asks = watermark != UINT64_MAX;
	ss->copy_held = false;
	watermark = pending_floor(ss, watermark);
	do {
		/* At most max_slices slices a call (but everything for a final drain): an
		 * engine slower than its producers still returns to its loop and is
		 * called again. */
		do {
			force = copy_all(ss);
			got = merge(ss, force > watermark ? force : watermark, RP_SOURCES_SLICE);
			n += got;
			/* A slice can overshoot (by one ring's run at most):
			 * `>=`, or a final drain would stop with records left. */
		} while ((got >= RP_SOURCES_SLICE ||
			  (got > 0 && (force != 0 || watermark == UINT64_MAX))) &&
			 (watermark == UINT64_MAX || !slice_stop(ss, &slices, max_slices)));
		evacuate(ss);
		end_tracks(ss);
	} while (check_ends(ss) > 0);
	rp_engine_expire(ss->e, ss->e->t_merged);
	return n;
}

uint64_t rp_sources_unmerged(const struct rp_sources *ss)
{
	uint64_t n = 0;

	for (uint32_t i = 0; i < ss->n_live; i++) {
		const struct rp_live *l = ss->live[i];

		/* (pending is bounded by the ring's capacity: the producer's head is
		 * untrusted, rp_segment_ring_pending() clamps it) */
		for (uint32_t r = 0; r < l->seg->v.ring_count; r++)
			n += (uint64_t)rp_segment_ring_pending(l->seg, r) + l->buf[r].n;
	}
	return n;
}

bool rp_sources_sleep_prepare(struct rp_sources *ss)
{
	for (uint32_t i = 0; i < ss->n_live; i++)
		__atomic_exchange_n(&((struct rp_wire_header *)ss->live[i]->seg->base)
					     ->consumer_sleeping,
				    1, __ATOMIC_SEQ_CST);
	for (uint32_t i = 0; i < ss->n_live; i++)
		if (!drained(ss->live[i], false)) {
			rp_sources_wake(ss);
			return true;
		}
	return false;
}

void rp_sources_arm(struct rp_sources *ss)
{
	for (uint32_t i = 0; i < ss->n_live; i++)
		__atomic_exchange_n(&((struct rp_wire_header *)ss->live[i]->seg->base)
					     ->consumer_sleeping,
				    1, __ATOMIC_SEQ_CST);
}

static uint64_t producer_drops(const struct rp_live *l)
{
	const struct rp_wire_header *h = l->seg->base;
	const struct rp_wire_ring *rings =
		(const struct rp_wire_ring *)((const char *)l->seg->base + l->seg->v.ring_desc_offset);
	uint64_t n = __atomic_load_n(&h->noring_dropped, __ATOMIC_RELAXED);

	for (uint32_t r = 0; r < l->seg->v.ring_count; r++)
		n += __atomic_load_n(&rings[r].dropped, __ATOMIC_RELAXED) +
		     __atomic_load_n(&rings[r].reentrant, __ATOMIC_RELAXED);
	return n;
}

uint64_t rp_sources_watch_drops(struct rp_sources *ss, uint64_t now_ns, uint64_t every_ns)
{
	uint64_t total = 0;

	for (uint32_t i = 0; i < ss->n_live; i++) {
		struct rp_live *l = ss->live[i];
		uint64_t d = producer_drops(l);

		if (d <= l->dropped_seen)
			continue;
		total += d - l->dropped_seen;
		if (l->dropped_said == 0 && l->dropped_seen == 0) {
			say(ss, "%s (pid %d) is losing records: %llu dropped so far (rings of %u "
				"full; see docs/live.md, sizing)",
			    l->seg->name, l->seg->v.pid, (unsigned long long)d,
			    l->seg->v.ring_capacity);
			ss->drops_said_at = now_ns;
			l->dropped_said = d;
		} else if (now_ns - ss->drops_said_at >= every_ns) {
			say(ss, "%s (pid %d): %llu more records dropped, %llu in all",
			    l->seg->name, l->seg->v.pid, (unsigned long long)(d - l->dropped_said),
			    (unsigned long long)d);
			l->dropped_said = d;
		}
		l->dropped_seen = d;
	}
	if (total > 0 && now_ns - ss->drops_said_at >= every_ns)
		ss->drops_said_at = now_ns;
	return total;
}

void rp_sources_wake(struct rp_sources *ss)
{
	for (uint32_t i = 0; i < ss->n_live; i++)
		__atomic_store_n(&((struct rp_wire_header *)ss->live[i]->seg->base)
					  ->consumer_sleeping,
				 0, __ATOMIC_RELAXED);
}

struct rp_live *rp_sources_pin(struct rp_sources *ss, uint32_t i, uint32_t **word,
			       uint32_t *value)
{
	struct rp_live *l = ss->live[i];
	struct rp_wire_header *h = l->seg->base;

	if (l->pinned)
		return NULL;
	l->pinned = true;
	*word = &h->doorbell;
	*value = __atomic_load_n(&h->doorbell, __ATOMIC_ACQUIRE);
	return l;
}

void rp_sources_unpin(struct rp_sources *ss, struct rp_live *l)
{
	l->pinned = false;
	if (!l->finished)
		return;
	for (struct rp_live **p = &ss->zombies; *p != NULL; p = &(*p)->next_zombie)
		if (*p == l) {
			*p = l->next_zombie;
			break;
		}
	live_free(ss, l);
}
