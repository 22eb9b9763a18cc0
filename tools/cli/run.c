// SPDX-License-Identifier: MIT
/*
 * `ringprof run`: the engine in the foreground. One loop (engine/ingest/loop.c: io_uring,
 * or poll(2) where io_uring is refused) serves
 *   - the drain tick: merge every ring up to now - delay, every --tick-ms;
 *   - the doorbell: when a tick finds nothing, producers are told we sleep and a
 *     futex wait is armed on each one's doorbell word; a producer whose ring gets
 *     1/8 full wakes us before the next tick;
 *   - signals through a signalfd: SIGUSR1 writes a snapshot at once, the backlog
 *     left unmerged and counted in it (a pending signal stops a long drain between
 *     two slices, and starts none); SIGINT/SIGTERM drain everything, write a final snapshot and exit 0;
 *   - inotify on /dev/shm for new segments;
 *   - producers' pidfds, so a death is handled at once;
 *   - snapshot writes (a snapshot is whole or absent at its name): a live one is
 *     created, written and renamed at once, in this thread, then fsynced off it (not
 *     on tmpfs); the final one is fsynced before its rename (docs/live.md);
 *   - the live socket <snapshot dir>/ringprof-<session>.sock (mode 0600; `ringprof
 *     top`) and, with --prometheus, an HTTP /metrics listener (tools/server/serve.c);
 *   - with --otlp, the OTLP/HTTP receiver (tools/server/otlp_http.c): its spans wait in
 *     the reorder buffer (engine/ingest/otlp.c) until now - --otlp-horizon-ms, and each
 *     drain feeds the engine what is due.
 * The engine announces itself in /dev/shm/ringprof.<session>.engine (its pid, then
 * the snapshot path, then why its last snapshot write failed) and holds a write lock
 * on it while it runs: one consumer per session, enforced by the kernel
 * (lock_marker()). Producers check the lock at exit and `ringprof snapshot` signals
 * only its holder (docs/operations.md).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "loop.h"
#include "otlp.h"
#include "otlp_http.h"
#include "serve.h"
#include "snapshot.h"
#include "sources.h"

#define MAX_PIDFDS 1024
#define AUTO_SNAPSHOT_UNLINKS 256
/* Slices (RP_SOURCES_SLICE records) merged when SIGUSR1 comes, before the report: what
 * was due since the last drain, when the engine keeps up; a backlog stays for later
 * (header.unmerged_records says how much), so the snapshot answers in milliseconds.
 * A backlog of more than that is not caught up by 4 slices: then none (the report is
 * a cut at the last slice boundary), the snapshot being as incomplete either way and
 * a slice, under saturation, as much CPU as the report (docs/performance.md). */
#define SNAPSHOT_SLICES 4
/* Live snapshots renamed whose fsync is still running, at most; one more waits for
 * one of them (d->again). The loop has 4 write slots: one stays for the final one. */
#define SNAPSHOT_SYNCS 3
/* The flight recorder of the live engine (--recorder-spans; `analyze` keeps the
 * engine's 65536): most of a snapshot's bytes and of its fsync, chosen by what a
 * snapshot costs (docs/performance.md, Snapshots). */
#define RUN_RECORDER_SPANS 8192

struct daemon {
	struct rp_loop *loop;
	struct rp_engine *e;
	struct rp_sources ss;
	const char *session;
	char snap_path[PATH_MAX];
	char marker[96];
	int marker_fd;			/* holds the session's lock; -1: none */
	ino_t marker_ino;
	uint64_t tick_ns, delay_ns;
	int sfd, ifd;
	struct pidfd_watch {
		int fd, watch;
	} pidfds[MAX_PIDFDS];
	unsigned n_pidfds;
	struct rp_membuf snap;	/* the snapshot being written */
	struct rp_snap_cache *snap_cache; /* the recorder's spans as last encoded; NULL:
					     none (each snapshot encodes them all) */
	bool writing, again, exiting;	/* writing: the final snapshot, fsync first */
	unsigned syncing;		/* live snapshots renamed, their fsync running */
	unsigned snapshots;
	unsigned snap_failures;		/* writes that failed, told in the marker */
	uint64_t snap_started;
	uint64_t snap_signal;		/* when SIGUSR1 was read for it; 0: not asked so */
	uint64_t snap_cpu_ns;		/* its report and encoding, thread CPU time */
	uint64_t snap_unmerged;		/* records it left for the next one */
	uint64_t processed;
	uint64_t ticks;
	bool quiet;
	struct rp_serve *srv;		/* the live socket and /metrics; NULL: none */
	struct rp_serve_opts srv_opts;
	char sock_path[PATH_MAX];
	struct rp_otlp *otlp;		/* the OTLP reorder buffer; NULL: no --otlp */
	struct rp_otlp_http *otlp_http;
	struct rp_otlp_http_opts otlp_opts;
	uint64_t otlp_horizon_ns;
	int offcpu;			/* enum rp_offcpu_mode (--offcpu) */
	unsigned offcpu_threads;	/* --offcpu-threads */
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void log_line(void *ctx, const char *line)
{
	struct daemon *d = ctx;

	if (!d->quiet)
		fprintf(stderr, "ringprof: %s\n", line);
}

static void arm_doorbells(struct daemon *d);

/* Every drain takes all the rings hold (sources.h) and leaves the doorbells armed: a
 * producer whose ring gets 1/8 full wakes us at once, whatever the tick. At most
 * @slices slices are merged (sources.h), everything when @watermark is UINT64_MAX. */
/* Whether the signalfd has a signal to read: then on_signal() runs in this loop turn
 * or the next (it reads until EAGAIN), so skipping a drain for it never stalls the
 * engine (sigpending() could: what it says is not always what the signalfd holds). */
static bool signal_readable(const struct daemon *d)
{
	struct pollfd p = { .fd = d->sfd, .events = POLLIN };

	return d->sfd >= 0 && poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
}

/* A drain that is not final waits while one of our signals does: the snapshot it asks
 * for is cut at the last slice boundary, not one slice (or one per doorbell reaped
 * in the same loop turn) later. */
static void drain_some(struct daemon *d, uint64_t watermark, unsigned slices)
{
	rp_sources_wake(&d->ss);
	if (watermark == UINT64_MAX || !signal_readable(d))
		d->processed += rp_sources_drain_some(&d->ss, watermark, slices);
	/* OTLP spans: what the horizon has passed; everything at exit */
	if (d->otlp != NULL) {
		uint64_t now = mono_ns();
		rp_otlp_advance(d->otlp, watermark == UINT64_MAX ? UINT64_MAX
					 : now > d->otlp_horizon_ns ? now - d->otlp_horizon_ns : 0);
	}
	if (!d->exiting)
		arm_doorbells(d);
}

static void drain(struct daemon *d, uint64_t watermark)
{
	drain_some(d, watermark, 64);
}

/* ss.interrupt: the drain stops at this slice boundary, back to the loop, when one
 * of our signals waits in the signalfd (it stays pending until read). A live
 * snapshot's write has no steps for drains to delay (it is renamed at once). */
static bool signal_waits(void *ctx)
{
	sigset_t set;

	(void)ctx;
	if (sigpending(&set) != 0)
		return false;
	return sigismember(&set, SIGUSR1) == 1 || sigismember(&set, SIGINT) == 1 ||
	       sigismember(&set, SIGTERM) == 1;
}

static void on_bell(void *ctx, int res);
static struct daemon *the_daemon; /* for on_bell and on_pidfd */

/* Wait on every producer's doorbell not already waited on. The word's value is read
 * (pin) before consumer_sleeping is set, so a ring in between is never missed. */
static void arm_doorbells(struct daemon *d)
{
	struct rp_live *pinned[64];
	uint32_t *words[64], values[64];
	uint32_t n = 0;

	for (uint32_t i = 0; i < d->ss.n_live && n < 64; i++) {
		pinned[n] = rp_sources_pin(&d->ss, i, &words[n], &values[n]);
		n += pinned[n] != NULL;
	}
	rp_sources_arm(&d->ss);
	for (uint32_t k = 0; k < n; k++)
		if (rp_loop_futex_wait(d->loop, words[k], values[k], 4 * d->tick_ns, on_bell,
				       pinned[k]) != 0)
			rp_sources_unpin(&d->ss, pinned[k]);
}

static void on_bell(void *ctx, int res)
{
	struct daemon *d = the_daemon;

	rp_sources_unpin(&d->ss, ctx);
	if (res == 0 && !d->exiting) /* a producer rang: drain now, not at the tick */
		drain(d, mono_ns() - d->delay_ns);
}

static void write_snapshot(struct daemon *d);

static void on_tick(void *ctx, int res)
{
	struct daemon *d = ctx;
	uint64_t now = mono_ns();

	(void)res;
	if (d->exiting) /* the final snapshot is taken: what we read now is in none */
		return;
	/* Segments seen while still being created give no further inotify event;
	 * and a full rescan now and then covers an overflowed inotify queue. */
	if (d->ss.pending > 0 || ++d->ticks % 100 == 0)
		rp_sources_scan(&d->ss);
	drain(d, now - d->delay_ns);
	rp_sources_watch_drops(&d->ss, now, 5000000000ull); /* first at once, then every 5 s */
	/* Finished segments wait for a snapshot to be unlinked (the restart gap):
	 * past this many, one is written without being asked. */
	if (d->ss.n_unlinks >= AUTO_SNAPSHOT_UNLINKS && !d->writing)
		write_snapshot(d);
	if (d->srv != NULL)
		rp_serve_tick(d->srv);
	if (d->otlp_http != NULL)
		rp_otlp_http_tick(d->otlp_http);
}

/* A report for the live socket and /metrics: a snapshot's, but as of now (what the
 * drain has merged), so the rolling windows move with the wall clock and empty when
 * traffic stops. */
static int live_report(void *ctx, struct rp_report *out)
{
	struct daemon *d = ctx;

	int err;

	rp_sources_update(&d->ss);
	err = rp_engine_report_at(d->e, mono_ns() - d->delay_ns, out);
	out->unmerged_records = rp_sources_unmerged(&d->ss);
	return err;
}

static void otlp_metrics(void *ctx, FILE *m)
{
	struct daemon *d = ctx;

	if (d->otlp_http != NULL)
		rp_otlp_http_metrics(d->otlp_http, m);
}

/* --otlp: the reorder buffer (engine time is CLOCK_MONOTONIC: span times, in unix
 * ns, are moved by the offset between the clocks now) and its listener. */
static int start_otlp(struct daemon *d)
{
	struct timespec rt, mt;
	struct rp_otlp_cfg cfg = { .horizon_ns = d->otlp_horizon_ns };
	char why[RP_WHY_MAX];
	int err;

	if (d->otlp_opts.addr == NULL)
		return 0;
	clock_gettime(CLOCK_REALTIME, &rt);
	clock_gettime(CLOCK_MONOTONIC, &mt);
	cfg.clock_offset = (int64_t)(rt.tv_sec - mt.tv_sec) * 1000000000 +
			   (rt.tv_nsec - mt.tv_nsec);
	if (rp_otlp_open(d->e, &cfg, &d->otlp) != 0)
		return rp_cli_error(-ENOMEM, "otlp: out of memory");
	d->otlp_horizon_ns = rp_otlp_horizon_ns(d->otlp);
	err = rp_otlp_http_open(d->loop, &d->otlp_opts, d->otlp, &d->otlp_http, why);
	if (err)
		return rp_cli_error(err, "%s", why);
	if (why[0] != '\0')
		fprintf(stderr, "ringprof: %s\n", why);
	printf("ringprof: OTLP/HTTP traces at http://%s/v1/traces (reorder horizon %llu ms)\n",
	       d->otlp_opts.addr, (unsigned long long)(d->otlp_horizon_ns / 1000000));
	return 0;
}

static int start_serving(struct daemon *d)
{
	char why[RP_WHY_MAX];
	int err;

	if ((err = start_otlp(d)) != 0)
		return err;
	d->srv_opts.extra_metrics = otlp_metrics;
	d->srv_opts.extra_ctx = d;
	if (d->srv_opts.unix_path == NULL && d->srv_opts.http_addr == NULL)
		return 0;
	err = rp_serve_open(d->loop, &d->srv_opts, live_report, d, &d->srv, why);
	if (err)
		return rp_cli_error(err, "%s", why);
	if (why[0] != '\0')
		fprintf(stderr, "ringprof: %s\n", why);
	if (d->srv_opts.unix_path)
		printf("ringprof: live socket %s (ringprof top)\n", d->srv_opts.unix_path);
	if (d->srv_opts.http_addr)
		printf("ringprof: Prometheus metrics at http://%s/metrics\n", d->srv_opts.http_addr);
	return 0;
}

static void write_snapshot(struct daemon *d);

/*
 * Why the last snapshot write failed, for `ringprof snapshot` to print (it finds no
 * new file, and only we know why): after the path in the marker, "failures <n>:
 * <path>: <strerror> (errno <e>)", NUL-terminated; <n> counts failed writes since we
 * started, so the asker tells a failure of its own request from an older one. A
 * failure to update the marker is only logged: the snapshot's failure is.
 */
static void note_failure(struct daemon *d, int err)
{
	char line[PATH_MAX + 128];
	off_t at = (off_t)(sizeof(struct rp_wire_engine) + strlen(d->snap_path) + 1);
	int n;

	n = snprintf(line, sizeof(line), "failures %u: %s: %s (errno %d)", ++d->snap_failures,
		     d->snap_path, strerror(-err), -err);
	if (n < 0 || (size_t)n >= sizeof(line))
		n = (int)sizeof(line) - 1;
	line[n] = '\0';
	if (d->marker_fd >= 0 && pwrite(d->marker_fd, line, (size_t)n + 1, at) != n + 1)
		rp_cli_error(0, "/dev/shm%s: cannot record the snapshot failure: %s", d->marker,
			     strerror(errno));
}

/* The line a written snapshot gets: its size, the wall time from the report to the
 * file at its name, the report's CPU, what it left unmerged and, asked by SIGUSR1,
 * how long after the signal the report began (the slices merged first, scheduling). */
static void snapshot_said(const struct daemon *d)
{
	char cut[48] = "";

	if (d->quiet)
		return;
	if (d->snap_signal != 0)
		snprintf(cut, sizeof(cut), "; cut %.1f ms after the signal",
			 (double)(d->snap_started - d->snap_signal) / 1e6);
	fprintf(stderr, "ringprof: snapshot %u written to %s (%zu bytes, %.1f ms; report "
		"and encode %.1f ms CPU, %" PRIu64 " records unmerged%s)\n",
		d->snapshots, d->snap_path, d->snap.len,
		(double)(mono_ns() - d->snap_started) / 1e6, (double)d->snap_cpu_ns / 1e6,
		d->snap_unmerged, cut);
}

static void snapshot_failed(struct daemon *d, const char *what, int err)
{
	rp_cli_error(0, "snapshot %s: %s%s", d->snap_path, what, strerror(-err));
	note_failure(d, err);
}

/* The next snapshot, if one was asked while this one was busy. */
static void snapshot_next(struct daemon *d)
{
	if (d->again) {
		d->again = false;
		write_snapshot(d);
	} else if (d->exiting && !d->writing) {
		rp_loop_stop(d->loop);
	}
}

/* The final snapshot: fsynced, then renamed. */
static void on_written(void *ctx, int res)
{
	struct daemon *d = ctx;

	d->writing = false;
	/* ok: what it holds is safe, a successor counts only what follows */
	rp_sources_snapshot_written(&d->ss, res >= 0);
	if (res < 0)
		snapshot_failed(d, "", res);
	else
		snapshot_said(d);
	snapshot_next(d);
}

/* A live snapshot's tail: at its name since write_snapshot(); now fsynced and closed. */
static void on_synced(void *ctx, int res)
{
	struct daemon *d = ctx;

	d->syncing--;
	if (res < 0) /* the file is there, but may not outlive a crash of the machine */
		snapshot_failed(d, "fsync: ", res);
	snapshot_next(d);
}

/* CPU time of this thread: what a snapshot's report and encoding cost, whatever else
 * runs on the machine. */
static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * Report, encode, write. A live snapshot is at its name when this returns (its fsync
 * follows, on_synced): what it holds is then in a file, so the sources learn it at
 * once. The final one (exiting) waits for its fsync before the rename: it is the last
 * word, and nothing follows to replace it.
 */
static void write_snapshot(struct daemon *d)
{
	struct rp_report r;
	uint64_t cpu0;
	int err;

	if (d->writing || (!d->exiting && d->syncing >= SNAPSHOT_SYNCS)) { /* right after */
		d->again = true;
		return;
	}
	d->snap_started = mono_ns();
	cpu0 = thread_cpu_ns();
	rp_sources_update(&d->ss);
	d->snap.len = 0;
	err = rp_engine_report(d->e, &r);
	r.unmerged_records = d->snap_unmerged = rp_sources_unmerged(&d->ss);
	if (err == 0)
		rp_sources_snapshot_taken(&d->ss);
	if (err == 0)
		err = rp_snapshot_encode_cached(&r, d->snap_cache, rp_membuf_sink, &d->snap);
	rp_report_free(&r);
	d->snap_cpu_ns = thread_cpu_ns() - cpu0;
	if (err == 0 && d->exiting)
		err = rp_loop_write_file(d->loop, d->snap_path, d->snap.data, d->snap.len,
					 on_written, d);
	else if (err == 0)
		err = rp_loop_write_file_flags(d->loop, d->snap_path, d->snap.data, d->snap.len,
					       RP_LOOP_WRITE_NOW, on_synced, d);
	if (err) {
		rp_sources_snapshot_written(&d->ss, false);
		snapshot_failed(d, "", err);
		d->snap_signal = 0;
		if (d->exiting)
			rp_loop_stop(d->loop);
		return;
	}
	d->snapshots++;
	if (d->exiting) {
		d->writing = true;
	} else {
		d->syncing++;
		rp_sources_snapshot_written(&d->ss, true);
		snapshot_said(d);
	}
	d->snap_signal = 0;
}

static void on_signal(void *ctx, int res)
{
	struct daemon *d = ctx;
	struct signalfd_siginfo si;

	(void)res;
	while (read(d->sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (si.ssi_signo == SIGUSR1) {
			bool behind;

			if (d->snap_signal == 0)
				d->snap_signal = mono_ns();
			/* Segments whose inotify event is still queued behind this signal
			 * (an engine resumed after SIGSTOP) belong in this snapshot. */
			rp_sources_scan(&d->ss);
			behind = rp_sources_unmerged(&d->ss) >
				 (uint64_t)SNAPSHOT_SLICES * RP_SOURCES_SLICE;
			if (!behind)
				drain_some(d, mono_ns() - d->delay_ns, SNAPSHOT_SLICES);
			write_snapshot(d);
		} else if (!d->exiting) {
			if (!d->quiet)
				fprintf(stderr, "ringprof: %s: final snapshot\n",
					strsignal((int)si.ssi_signo));
			d->exiting = true;
			rp_sources_scan(&d->ss);
			drain(d, UINT64_MAX);
			write_snapshot(d);
		}
	}
}

static void on_inotify(void *ctx, int res)
{
	struct daemon *d = ctx;
	char buf[4096];

	(void)res;
	while (read(d->ifd, buf, sizeof(buf)) > 0)
		;
	rp_sources_scan(&d->ss);
}

static void on_pidfd(void *ctx, int res)
{
	(void)ctx;
	(void)res;
	if (the_daemon->exiting) /* the final snapshot is taken: read nothing more */
		return;
	drain(the_daemon, mono_ns() - the_daemon->delay_ns); /* finishes the dead one */
}

static void pidfd_added(void *ctx, int fd)
{
	struct daemon *d = ctx;
	int id;

	if (d->n_pidfds == MAX_PIDFDS)
		return; /* the tick notices deaths too, just later */
	id = rp_loop_watch(d->loop, fd, on_pidfd, d);
	if (id >= 0)
		d->pidfds[d->n_pidfds++] = (struct pidfd_watch){ fd, id };
}

static void pidfd_removed(void *ctx, int fd)
{
	struct daemon *d = ctx;

	for (unsigned i = 0; i < d->n_pidfds; i++)
		if (d->pidfds[i].fd == fd) {
			rp_loop_unwatch(d->loop, d->pidfds[i].watch);
			d->pidfds[i] = d->pidfds[--d->n_pidfds];
			return;
		}
}

/*
 * The marker, and the one-consumer rule: the engine holds a POSIX write lock on
 * /dev/shm/ringprof.<session>.engine for its whole life (the kernel drops it when the
 * process ends, however it ends). An engine that cannot take the lock refuses and
 * touches nothing; one that takes it owns the file, whatever pid a dead engine left
 * in it. The lock is on the inode, so after locking we check that the name still
 * leads to it (an engine stopping unlinks it while still holding the lock).
 * Nothing else in this process may open and close the marker: closing any fd of a
 * file drops the process's POSIX locks on it.
 */
static int lock_marker(struct daemon *d)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	char path[PATH_MAX];
	struct stat st, now;
	int fd;

	snprintf(d->marker, sizeof(d->marker), RP_WIRE_ENGINE_FMT, d->session);
	snprintf(path, sizeof(path), "/dev/shm%s", d->marker);
	for (int tries = 0; tries < 8; tries++) {
		fd = shm_open(d->marker, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0)
			return rp_cli_error(-errno, "%s: %s", path, strerror(errno));
		if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
			close(fd);
			return rp_cli_error(-EPERM, "%s: owned by uid %u, not us (%u): session "
					    "\"%s\" is taken by another user; pick another",
					    path, (unsigned)st.st_uid, (unsigned)geteuid(),
					    d->session);
		}
		if (fcntl(fd, F_SETLK, &fl) < 0) {
			int err = errno;
			pid_t holder = rp_cli_marker_holder(fd);

			close(fd);
			if (err == EAGAIN || err == EACCES)
				return rp_cli_error(-EEXIST, "an engine already runs for session "
						    "\"%s\" (pid %d holds the lock on %s)",
						    d->session, (int)holder, path);
			return rp_cli_error(-err, "%s: lock: %s", path, strerror(err));
		}
		if (stat(path, &now) == 0 && now.st_ino == st.st_ino && now.st_dev == st.st_dev) {
			d->marker_fd = fd;
			d->marker_ino = st.st_ino;
			return 0;
		}
		close(fd); /* unlinked by the engine that held it: take the new one */
	}
	return rp_cli_error(-EAGAIN, "%s: keeps being replaced", path);
}

static int write_marker(struct daemon *d)
{
	struct rp_wire_engine m = { .magic = RP_WIRE_ENGINE_MAGIC, .pid = (int32_t)getpid() };
	size_t len = strlen(d->snap_path) + 1;
	int err;

	if ((err = lock_marker(d)) != 0)
		return err;
	if (ftruncate(d->marker_fd, 0) < 0 ||
	    pwrite(d->marker_fd, &m, sizeof(m), 0) != (ssize_t)sizeof(m) ||
	    pwrite(d->marker_fd, d->snap_path, len, sizeof(m)) != (ssize_t)len)
		return rp_cli_error(-EIO, "/dev/shm%s: cannot write: %s", d->marker,
				    strerror(errno));
	return 0;
}

/* Unlinks the marker only if it is still ours: we hold the lock, and the name
 * still leads to our inode. */
static void drop_marker(struct daemon *d)
{
	char path[PATH_MAX];
	struct stat now;

	if (d->marker_fd < 0)
		return;
	snprintf(path, sizeof(path), "/dev/shm%s", d->marker);
	if (stat(path, &now) == 0 && now.st_ino == d->marker_ino)
		shm_unlink(d->marker);
	close(d->marker_fd); /* and with it the lock */
	d->marker_fd = -1;
}

/* SIGUSR1, SIGINT, SIGTERM: blocked before the marker names us (a `ringprof
 * snapshot` in between would end us with SIGUSR1's default action), taken from a
 * signalfd once the loop runs. */
static void block_signals(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGUSR1);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGTERM);
	sigprocmask(SIG_BLOCK, set, NULL);
}

static int open_fds(struct daemon *d)
{
	sigset_t set;

	block_signals(&set);
	d->sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	d->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (d->sfd < 0 || d->ifd < 0)
		return rp_cli_error(-errno, "signalfd/inotify: %s", strerror(errno));
	if (inotify_add_watch(d->ifd, d->ss.shm_dir, IN_CREATE | IN_MOVED_TO) < 0)
		return rp_cli_error(-errno, "inotify %s: %s", d->ss.shm_dir, strerror(errno));
	return 0;
}

static int start(struct daemon *d, bool force_poll)
{
	struct rp_loop_opts lo = { .force_poll = force_poll };
	char why[RP_WHY_MAX] = "";
	int err;

	err = rp_loop_open(&lo, &d->loop, why);
	if (err)
		return rp_cli_error(err, "event loop: %s", why);
	if (why[0] != '\0')
		fprintf(stderr, "ringprof: %s\n", why);
	if ((err = open_fds(d)) != 0)
		return err;
	if (rp_loop_watch(d->loop, d->sfd, on_signal, d) < 0 ||
	    rp_loop_watch(d->loop, d->ifd, on_inotify, d) < 0 ||
	    rp_loop_timer(d->loop, d->tick_ns, on_tick, d) < 0)
		return rp_cli_error(-EIO, "event loop: cannot watch");
	d->ss.defer_unlink = true; /* a name goes once a snapshot holds its records */
	d->ss.log = log_line;
	d->ss.log_ctx = d;
	d->ss.pidfd_added = pidfd_added;
	d->ss.pidfd_removed = pidfd_removed;
	d->ss.hook_ctx = d;
	d->ss.interrupt = signal_waits;
	d->snap_cache = rp_snap_cache_new(); /* NULL (no memory): encoded whole each time */
	if (rp_sources_offcpu(&d->ss, d->offcpu, d->offcpu_threads) != 0)
		return rp_cli_error(-EPERM, "--offcpu on: the kernel refused (see above)");
	rp_sources_scan(&d->ss);
	printf("ringprof: engine for session \"%s\", pid %d, %s loop; snapshots go to %s\n",
	       d->session, (int)getpid(), rp_loop_backend(d->loop), d->snap_path);
	err = start_serving(d);
	fflush(stdout);
	return err;
}

static const char usage[] =
	"usage: ringprof run [--session S] [--snapshot-dir D] [--tick-ms N] [--delay-ms N]\n"
	"                    [--poll] [--quiet] [caps]\n"
	"The engine in the foreground: drains the session's producers, keeps the analyses,\n"
	"writes snapshots and serves the live socket (ringprof top) and /metrics.\n"
	"  --session S       the producers' RINGPROF_SESSION (default $RINGPROF_SESSION or\n"
	"                    \"default\")\n"
	"  --snapshot-dir D  where ringprof-<session>.msgpack goes (default /tmp/ringprof)\n"
	"  --tick-ms N       drain tick (1 to 10000, default 10)\n"
	"  --delay-ms N      merge delay: records newer than this wait (0 to 600000,\n"
	"                    default 20)\n"
	"  --poll            use poll(2) even where io_uring works\n"
	"  --quiet           no progress lines on stderr\n"
	"  --step-category C spans of category C are steps (default \"step\"; \"\": none)\n"
	"  --step-name P     spans whose name starts with P are steps too\n"
	"  --async-expire-ms N|auto|off  an async request open across a producer's drop\n"
	"                    (its END may be lost) is closed as lost after N ms idle\n"
	"                    (default auto: max(100, 4 x the longest silence of a request\n"
	"                    that then went on))\n"
	"  --offcpu auto|on|off  off-CPU time per function from the producers' context\n"
	"                    switches (perf_event_open; default auto: where the kernel\n"
	"                    allows it; on: fail where it does not)\n"
	"  --offcpu-threads N  producer threads watched at once (1 to 65536, default 256)\n";

/* The listeners: the live socket, /metrics and /snapshot, OTLP (a string of its own:
 * C99 promises string literals of 4095 bytes only). */
static const char usage_serve[] =
	"  --no-socket       no live socket (D/ringprof-<session>.sock, for ringprof top)\n"
	"  --prometheus H:P  serve Prometheus /metrics on H:P (loopback only, e.g.\n"
	"                    127.0.0.1:9464, unless --prometheus-any)\n"
	"  --http-token-file F  GET /snapshot on the --prometheus listener needs\n"
	"                    \"Authorization: Bearer <F's first line>\" (and the listener may\n"
	"                    then take a non-loopback address); without it, /snapshot\n"
	"                    answers loopback peers only\n"
	"  --prometheus-window W  the rolling window (10s, 1m, 5m) of the duration\n"
	"                    summaries in /metrics (default: all time)\n"
	"  --metrics-names RE  only span names matching RE (POSIX extended regex) get\n"
	"                    per-name series in /metrics (ringprof_series_omitted counts\n"
	"                    the rest)\n"
	"  --metrics-top N   then only the N names with the most cumulative time (1 to\n"
	"                    4294967295)\n"
	"  --max-clients N   live socket connections at once (1 to 4096, default 16)\n"
	"  --max-http-clients N  /metrics connections at once, a pool of their own\n"
	"                    (1 to 4096, default: --max-clients)\n"
	"  --client-idle-ms N  close a connection that makes no progress for N ms\n"
	"                    (1 to 86400000, default 10000)\n"
	"  --client-request-ms N  close a connection whose request is not whole N ms\n"
	"                    after it began (HTTP: after the connect; 1 to 86400000,\n"
	"                    default 3000)\n"
	"  --otlp H[:P]      take OpenTelemetry spans over OTLP/HTTP on H:P (port 4318 by\n"
	"                    default; loopback only unless --otlp-any; docs/otlp.md)\n"
	"  --otlp-horizon-ms N  hold spans N ms for those that come late (1 to 86400000, default\n"
	"                    15000)\n"
	"  --otlp-category-attr K  the span attribute K names the category\n"
	"  --otlp-max-body N  bytes of a request body, before and after gunzip (1024 to\n"
	"                    1073741824, default 16 MiB)\n"
	"  --otlp-max-clients N  OTLP connections at once (1 to 4096, default 16)\n";

static const char usage_caps[] =
	RP_CLI_CAP_USAGE
	"(run keeps 8192 recorder spans by default: a snapshot's cost)\n"
	"SIGUSR1 writes a snapshot at once, the backlog left for the next one (ringprof\n"
	"snapshot does the same); SIGINT/SIGTERM a final one, everything merged.\n";

/* --async-expire-ms: N ms (> 0), "auto" (0 in the config) or "off" (never). */
static int parse_expire(const char *s, uint64_t *ns)
{
	char *end;
	unsigned long long v;

	if (strcmp(s, "auto") == 0 || strcmp(s, "off") == 0) {
		*ns = s[0] == 'a' ? 0 : RP_EXPIRE_NEVER;
		return 0;
	}
	errno = 0;
	v = strtoull(s, &end, 10);
	if (s[0] < '0' || s[0] > '9' || errno || *end || v == 0 || v > UINT64_MAX / 1000000u)
		return -EINVAL;
	*ns = v * 1000000u;
	return 0;
}

static int parse(int argc, char **argv, struct daemon *d, struct rp_engine_cfg *cfg,
		 const char **dir, bool *force_poll)
{
	static const struct option opts[] = {
		{ "session", 1, NULL, 's' }, { "snapshot-dir", 1, NULL, 'd' },
		{ "tick-ms", 1, NULL, 't' }, { "delay-ms", 1, NULL, 'D' },
		{ "poll", 0, NULL, 'p' },    { "quiet", 0, NULL, 'q' },
		{ "help", 0, NULL, 'h' },    RP_CLI_CAP_OPTIONS,
		{ "no-socket", 0, NULL, 'N' },	{ "prometheus", 1, NULL, 'P' },
		{ "prometheus-any", 0, NULL, 'A' }, { "prometheus-window", 1, NULL, 'W' },
		{ "max-clients", 1, NULL, 'M' }, { "client-idle-ms", 1, NULL, 'I' },
		{ "max-http-clients", 1, NULL, 'H' }, { "client-request-ms", 1, NULL, 'R' },
		{ "step-category", 1, NULL, 'S' }, { "step-name", 1, NULL, 'X' }, /* export */
		{ "async-expire-ms", 1, NULL, 'E' },
		{ "offcpu", 1, NULL, 'O' }, { "offcpu-threads", 1, NULL, 'T' },
		{ "otlp", 1, NULL, 'o' }, { "otlp-any", 0, NULL, 'y' },
		{ "otlp-horizon-ms", 1, NULL, 'Y' }, { "otlp-category-attr", 1, NULL, 'K' },
		{ "otlp-max-body", 1, NULL, 'B' }, { "otlp-max-clients", 1, NULL, 'L' },
		{ "http-token-file", 1, NULL, 1000 },
		{ "metrics-names", 1, NULL, 'n' }, { "metrics-top", 1, NULL, 1001 },
		{ NULL, 0, NULL, 0 }
	};
	const char *session = NULL;
	int c, idx, err = 0;
	uint64_t v;

	while ((c = getopt_long(argc, argv, "", opts, &idx)) != -1) {
		switch (c) {
		case 's': session = optarg; break;
		case 'd': *dir = optarg; break;
		case 't':
			if (rp_cli_number("--tick-ms", optarg, 1, 10000, &v))
				return 2;
			d->tick_ns = v * 1000000u;
			break;
		case 'D':
			if (rp_cli_number("--delay-ms", optarg, 0, 600000, &v))
				return 2;
			d->delay_ns = v * 1000000u;
			break;
		case 'p': *force_poll = true; break;
		case 'S': cfg->step_category = optarg; break;
		case 'X': cfg->step_name = optarg; break;
		case 'q': d->quiet = true; break;
		case 'N': d->sock_path[0] = '-'; break;
		case 'P': d->srv_opts.http_addr = optarg; break;
		case 'A': d->srv_opts.http_any = true; break;
		case 1000: d->srv_opts.http_token_file = optarg; break;
		case 'n': d->srv_opts.metrics_names = optarg; break;
		case 1001:
			if (rp_cli_number("--metrics-top", optarg, 1, UINT32_MAX, &v))
				return 2;
			d->srv_opts.metrics_top = (uint32_t)v;
			break;
		case 'W':
			d->srv_opts.prom_window = optarg;
			if (strlen(optarg) == 0 || strlen(optarg) > 15 ||
			    strspn(optarg, "0123456789abcdefghijklmnopqrstuvwxyz") != strlen(optarg))
				return rp_cli_error(2, "--prometheus-window %s: a window name like 1m",
						    optarg);
			break;
		case 'I': /* a day at most: beyond it a stuck client is never closed */
			if (rp_cli_number("--client-idle-ms", optarg, 1, 86400000, &v))
				return 2;
			d->srv_opts.idle_ns = v * 1000000u;
			break;
		case 'R':
			if (rp_cli_number("--client-request-ms", optarg, 1, 86400000, &v))
				return 2;
			d->srv_opts.request_ns = v * 1000000u;
			break;
		case 'H':
			if (rp_cli_number("--max-http-clients", optarg, 1, 4096, &v))
				return 2;
			d->srv_opts.max_http_clients = (unsigned)v;
			break;
		case 'M':
			if (rp_cli_number("--max-clients", optarg, 1, 4096, &v))
				return 2;
			d->srv_opts.max_clients = (unsigned)v;
			break;
		case 'E':
			if (parse_expire(optarg, &cfg->async_expire_ns) != 0)
				return rp_cli_error(2, "--async-expire-ms %s: N > 0, auto or off",
						    optarg);
			break;
		case 'O':
			if (strcmp(optarg, "auto") == 0)
				d->offcpu = RP_OFFCPU_MODE_AUTO;
			else if (strcmp(optarg, "on") == 0)
				d->offcpu = RP_OFFCPU_MODE_ON;
			else if (strcmp(optarg, "off") == 0)
				d->offcpu = RP_OFFCPU_MODE_OFF;
			else
				return rp_cli_error(2, "--offcpu %s: auto, on or off", optarg);
			break;
		case 'T':
			if (rp_cli_number("--offcpu-threads", optarg, 1, 65536, &v))
				return 2;
			d->offcpu_threads = (unsigned)v;
			break;
		case 'o': d->otlp_opts.addr = optarg; break;
		case 'y': d->otlp_opts.any = true; break;
		case 'K': d->otlp_opts.decode.category_attr = optarg; break;
		case 'Y':
			if (rp_cli_number("--otlp-horizon-ms", optarg, 1, 86400000, &v))
				return 2;
			d->otlp_horizon_ns = v * 1000000u;
			break;
		case 'B':
			if (rp_cli_number("--otlp-max-body", optarg, 1024, 1u << 30, &v))
				return 2;
			d->otlp_opts.max_body = v;
			break;
		case 'L':
			if (rp_cli_number("--otlp-max-clients", optarg, 1, 4096, &v))
				return 2;
			d->otlp_opts.max_clients = (unsigned)v;
			break;
		case 'h':
			fputs(usage, stdout);
			fputs(usage_serve, stdout);
			fputs(usage_caps, stdout);
			exit(0);
		case 'c':
			if (!rp_cli_cap_option(cfg, opts[idx].name, optarg, &err) || err)
				return 2; /* said */
			break;
		default: return rp_cli_bad_option("run", argv);
		}
	}
	if (optind != argc)
		return rp_cli_error(2, "run: %s: unexpected argument (try `ringprof help run`)",
				    argv[optind]);
	if (rp_cli_check_caps(cfg) != 0)
		return 2;
	d->session = rp_cli_session(session);
	return d->session ? 0 : 2;
}

static void stop(struct daemon *d)
{
	rp_loop_close(d->loop);
	rp_serve_close(d->srv); /* after the loop: nothing in flight refers to it */
	rp_otlp_http_close(d->otlp_http);
	rp_otlp_close(d->otlp);
	rp_sources_free(&d->ss);
	rp_engine_close(d->e);
	rp_membuf_free(&d->snap);
	rp_snap_cache_free(d->snap_cache);
	drop_marker(d);
	if (d->sfd >= 0)
		close(d->sfd);
	if (d->ifd >= 0)
		close(d->ifd);
}

/* The snapshot directory: ours, or shared but sticky (like /tmp), where another
 * user cannot replace our files; the temporary files are created exclusively
 * (engine/ingest/loop.c), so a planted name fails a write, never redirects it. */
static int check_dir(const char *dir)
{
	struct stat st;

	if (stat(dir, &st) < 0)
		return rp_cli_error(1, "%s: %s", dir, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return rp_cli_error(1, "%s: not a directory", dir);
	if (st.st_uid != geteuid() && st.st_uid != 0)
		return rp_cli_error(1, "%s: owned by uid %u, not us (%u): it could replace our "
				    "snapshots; pick another --snapshot-dir", dir,
				    (unsigned)st.st_uid, (unsigned)geteuid());
	if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0)
		return rp_cli_error(1, "%s: writable by others and not sticky (mode %04o): pick "
				    "another --snapshot-dir", dir, (unsigned)(st.st_mode & 07777));
	return 0;
}

/* A predecessor killed mid-write left its temporary file beside the snapshot; with
 * the session's lock held, no other engine writes there. Said even with --quiet:
 * the space was gone until now. */
static void clean_temps(struct daemon *d)
{
	uint64_t bytes;
	int n = rp_loop_clean_temps(d->snap_path, &bytes);

	if (n > 0)
		fprintf(stderr, "ringprof: removed %d temporary snapshot file%s of dead "
			"writers (%llu bytes)\n", n, n == 1 ? "" : "s", (unsigned long long)bytes);
	else if (n < 0)
		rp_cli_error(0, "%s: cannot look for stale temporary files: %s", d->snap_path,
			     strerror(-n));
}

int rp_cmd_run(int argc, char **argv)
{
	static struct daemon d = { .tick_ns = 10000000, .delay_ns = 20000000, .sfd = -1,
				   .ifd = -1, .marker_fd = -1, .offcpu = RP_OFFCPU_MODE_AUTO,
				   .offcpu_threads = RP_OFFCPU_THREADS };
	struct rp_engine_cfg cfg;
	const char *dir = "/tmp/ringprof";
	bool force_poll = false;
	sigset_t blocked;
	int err;

	rp_engine_cfg_default(&cfg);
	cfg.recorder_spans = RUN_RECORDER_SPANS;
	if ((err = parse(argc, argv, &d, &cfg, &dir, &force_poll)) != 0)
		return err;
	the_daemon = &d;
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return rp_cli_error(1, "%s: %s", dir, strerror(errno));
	if ((err = check_dir(dir)) != 0)
		return err;
	snprintf(d.snap_path, sizeof(d.snap_path), "%s/ringprof-%s.msgpack", dir, d.session);
	if (d.sock_path[0] != '-') {
		snprintf(d.sock_path, sizeof(d.sock_path), "%s/ringprof-%s.sock", dir, d.session);
		d.srv_opts.unix_path = d.sock_path;
	}
	if (rp_engine_open(&cfg, &d.e) != 0 || rp_sources_init(&d.ss, d.e, d.session) != 0)
		return rp_cli_error(1, "out of memory");
	block_signals(&blocked);
	err = write_marker(&d);
	if (err == 0)
		clean_temps(&d);
	if (err == 0)
		err = start(&d, force_poll);
	if (err == 0)
		err = rp_loop_run(d.loop);
	stop(&d);
	return err ? 1 : 0;
}
