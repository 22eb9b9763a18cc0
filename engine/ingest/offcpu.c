// SPDX-License-Identifier: MIT
/*
 * Off-CPU time from context-switch records; see offcpu.h for the rules. The perf
 * ring is read as the kernel documents (perf_event_open(2)): data_head with an
 * acquire, the records between data_tail and it (copied out when they wrap), then
 * data_tail with a release, which hands their room back to the kernel.
 */
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "offcpu.h"

/* A switch record's body with sample_id_all and PERF_SAMPLE_TID | PERF_SAMPLE_TIME. */
struct sample_id {
	uint32_t pid, tid;
	uint64_t time;
};

static int perf_open(pid_t tid)
{
	struct perf_event_attr a;

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_DUMMY;
	a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
	a.sample_id_all = 1;
	a.context_switch = 1;
	a.use_clockid = 1;
	a.clockid = CLOCK_MONOTONIC; /* the producers' event clock (rp_ticks_to_ns) */
	/* perf_event_paranoid 2 allows user-space measurement only; the switch records
	 * come all the same. */
	a.exclude_kernel = 1;
	a.exclude_hv = 1;
	return (int)syscall(SYS_perf_event_open, &a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

static size_t map_len(const struct rp_offcpu *o)
{
	return (1 + RP_OFFCPU_PAGES) * o->page;
}

int rp_offcpu_init(struct rp_offcpu *o, int mode, uint32_t max_threads,
		   struct rp_report_offcpu *rep, char *why, size_t n)
{
	int fd, err;

	memset(o, 0, sizeof(*o));
	o->mode = mode;
	o->max_threads = max_threads;
	o->rep = rep;
	o->page = (size_t)sysconf(_SC_PAGESIZE);
	why[0] = '\0';
	if (mode == RP_OFFCPU_MODE_OFF)
		return 0;
	fd = perf_open(0);
	if (fd < 0) {
		FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "r");
		int paranoid = 0;

		err = -errno;
		if (f == NULL || fscanf(f, "%d", &paranoid) != 1)
			paranoid = 0;
		if (f != NULL)
			fclose(f);
		snprintf(why, n,
			 "off-cpu time: not measured, perf_event_open refused (%s; "
			 "perf_event_paranoid %d: 2 or less lets a user watch their own threads)",
			 strerror(-err), paranoid);
		rep->state = RP_OFFCPU_REFUSED;
		return mode == RP_OFFCPU_MODE_ON ? err : 0;
	}
	close(fd);
	o->on = true;
	rep->state = RP_OFFCPU_ON;
	return 0;
}

void rp_offcpu_ring_init(struct rp_offcpu_ring *w)
{
	memset(w, 0, sizeof(*w));
	w->fd = -1;
	w->next = UINT64_MAX;
}

static void close_fd(struct rp_offcpu *o, struct rp_offcpu_ring *w)
{
	if (w->fd < 0)
		return;
	rp_offcpu_ring_read(o, w); /* its last switches */
	munmap(w->map, map_len(o));
	close(w->fd);
	w->fd = -1;
	w->map = NULL;
	w->tid = 0;
	o->open--;
	o->rep->threads = o->open;
	w->out = 0; /* switched out at the end: it exited, or will come back unwatched */
}

void rp_offcpu_ring_owner(struct rp_offcpu *o, struct rp_offcpu_ring *w, pid_t tid)
{
	void *map;
	int fd;

	close_fd(o, w);
	w->tid = tid;
	if (!o->on || tid <= 0)
		return;
	if (o->open >= o->max_threads) {
		o->rep->refused++;
		return;
	}
	fd = perf_open(tid);
	if (fd < 0) { /* gone already, or refused (another uid, the mlock limit) */
		o->rep->refused++;
		return;
	}
	map = mmap(NULL, map_len(o), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		close(fd);
		o->rep->refused++;
		return;
	}
	w->fd = fd;
	w->map = map;
	w->out = 0;
	w->fresh = true;
	o->open++;
	o->rep->threads = o->open;
	o->rep->watched++;
}

void rp_offcpu_ring_close(struct rp_offcpu *o, struct rp_offcpu_ring *w)
{
	close_fd(o, w);
	free(w->q);
	rp_offcpu_ring_init(w);
}

/* Room for one more interval: the queue doubles up to RP_OFFCPU_PENDING_MAX. */
static bool room(struct rp_offcpu_ring *w)
{
	uint32_t cap = w->cap ? 2 * w->cap : RP_OFFCPU_PENDING;
	struct rp_offcpu_iv *q;

	if (w->n < w->cap)
		return true;
	if (cap > RP_OFFCPU_PENDING_MAX || (q = malloc(cap * sizeof(*q))) == NULL)
		return false;
	for (uint32_t k = 0; k < w->n; k++) /* unwrapped into the new one */
		q[k] = w->q[(w->head + k) % w->cap];
	free(w->q);
	w->q = q;
	w->cap = cap;
	w->head = 0;
	return true;
}

/* Appends [out, in]; a full queue leaves it out (offcpu.h). */
static void push(struct rp_offcpu *o, struct rp_offcpu_ring *w, uint64_t out, uint64_t in)
{
	if (in < w->last_ts) /* a record after it was processed already */
		o->rep->late++;
	if (!room(w)) {
		o->rep->overflow++;
		o->rep->overflow_ns += in - out;
		return;
	}
	w->q[(w->head + w->n) % w->cap] = (struct rp_offcpu_iv){ .out = out, .in = in };
	if (w->n++ == 0)
		w->next = in;
}

void rp_offcpu_switch(struct rp_offcpu *o, struct rp_offcpu_ring *w, bool out, uint64_t t)
{
	bool fresh = w->fresh;

	w->fresh = false;
	if (!out && w->out == 0 && fresh) /* it was out before the watch began */
		return;
	if (out) {
		if (w->out) /* its switch-in was lost */
			o->rep->unpaired++;
		w->out = t ? t : 1;
		return;
	}
	if (w->out == 0 || t < w->out) { /* its switch-out was lost */
		o->rep->unpaired++;
		w->out = 0;
		return;
	}
	push(o, w, w->out, t);
	w->out = 0;
}

bool rp_offcpu_ring_pop(struct rp_offcpu *o, struct rp_offcpu_ring *w, uint64_t ts, uint64_t *ns)
{
	struct rp_offcpu_iv *iv;

	(void)o;
	if (w->n == 0 || (ts != UINT64_MAX && w->q[w->head].in >= ts))
		return false;
	iv = &w->q[w->head];
	*ns = iv->in - iv->out;
	w->head = (w->head + 1) % w->cap;
	w->n--;
	w->next = w->n ? w->q[w->head].in : UINT64_MAX;
	if (w->n == 0 && (w->fd < 0 || w->cap > RP_OFFCPU_PENDING)) {
		/* memory follows the backlog: a grown queue goes once empty, and an
		 * unwatched ring's at once */
		free(w->q);
		w->q = NULL;
		w->cap = 0;
		w->head = 0;
	}
	return true;
}

/* One record out of the perf ring (@len bytes, complete). */
static void record(struct rp_offcpu *o, struct rp_offcpu_ring *w, const unsigned char *rec,
		   size_t len)
{
	struct perf_event_header h;
	struct sample_id id;
	uint64_t lost[2];

	memcpy(&h, rec, sizeof(h));
	if (h.type == PERF_RECORD_LOST && len >= sizeof(h) + sizeof(lost)) {
		memcpy(lost, rec + sizeof(h), sizeof(lost));
		o->rep->lost += lost[1];
		if (w->out) { /* the pair of this switch-out may be among them */
			w->out = 0;
			o->rep->unpaired++;
		}
		return;
	}
	if (h.type != PERF_RECORD_SWITCH || len < sizeof(h) + sizeof(id))
		return;
	memcpy(&id, rec + sizeof(h), sizeof(id));
	if ((pid_t)id.tid != w->tid)
		return;
	rp_offcpu_switch(o, w, (h.misc & PERF_RECORD_MISC_SWITCH_OUT) != 0,
			 id.time + (uint64_t)w->skew); /* onto the records' clock */
}

void rp_offcpu_ring_read(struct rp_offcpu *o, struct rp_offcpu_ring *w)
{
	struct perf_event_mmap_page *pg = w->map;
	const unsigned char *data;
	unsigned char buf[256];
	uint64_t head, tail, size;

	if (w->fd < 0)
		return;
	data = (const unsigned char *)w->map + o->page;
	size = (uint64_t)RP_OFFCPU_PAGES * o->page;
	/* acquire: the records before head are written (the kernel's release) */
	head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE);
	tail = pg->data_tail; /* ours alone */
	while (tail + sizeof(struct perf_event_header) <= head) {
		struct perf_event_header h;
		uint64_t at = tail % size;

		for (size_t k = 0; k < sizeof(h); k++)
			((unsigned char *)&h)[k] = data[(at + k) % size];
		if (h.size < sizeof(h) || tail + h.size > head)
			break; /* malformed: drop the rest (the kernel's own ring) */
		if (h.size <= sizeof(buf)) {
			for (size_t k = 0; k < h.size; k++)
				buf[k] = data[(at + k) % size];
			record(o, w, buf, h.size);
		}
		tail += h.size;
	}
	tail = head; /* what was malformed is skipped too */
	/* release: our reads of the records are done before the kernel reuses them */
	__atomic_store_n(&pg->data_tail, tail, __ATOMIC_RELEASE);
}
