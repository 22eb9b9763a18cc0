// SPDX-License-Identifier: MIT
/*
 * bench_snapshot: how long `ringprof run` takes to answer SIGUSR1 with a snapshot, end
 * to end: from the signal to the renamed file (the engine writes a temporary name and
 * renames it; an inotify watch on the directory sees the rename), under two loads:
 *   demo       ringprof-demo at --rate requests/s (default 2,000; Poisson arrivals);
 *   saturated  two ringprof-demo --no-sleep processes (arrivals as fast as their
 *              queues take them): the engine is behind, a backlog waits in the rings.
 * Each load: an engine of its own, --warmup-s for the flight recorder to fill, then
 * --snapshots snapshots one after the other, --gap-ms apart. Printed per load and
 * engine: p50/p90/p99/max of the latency in ms, the last file's size, and the median
 * CPU time (thread CPU, ms) the engine spent building and encoding one report, as its
 * stderr line says (an engine that does not say it: "-"), with the records it had not
 * merged, the wall time from its report to the file at its name, and how long after
 * reading the signal its report began (engines that say it). --baseline BIN measures another ringprof binary (an older build) in the same
 * run, one load after the other, for a before/after; --recorder-spans N runs the
 * engines with that flight recorder size. Where the wall time went, per snapshot,
 * from the kernel's /proc/<pid>/task/<tid>/schedstat read before the signal and
 * after the rename: the engine thread's CPU time and its time waiting in a run queue
 * (runnable, not running: behind the producers and everything else), and this
 * program's own run-queue wait (the rename seen late); printed as medians and for
 * the snapshots at or above the p99 (their mean); --each prints every snapshot, in
 * the order asked, with the engine's line on it.
 * Wall-clock figures of a shared machine are noisy: they are printed, never judged.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <ringprof/wire.h>

#include "bench_support.h"

#ifndef RINGPROF_BIN
#define RINGPROF_BIN "ringprof"
#endif
#ifndef DEMO_BIN
#define DEMO_BIN "ringprof-demo"
#endif

#define MAX_SNAPS 10000

struct opts {
	const char *bin, *baseline, *demo;
	const char *recorder_spans;	/* --recorder-spans for the engine; NULL: its default */
	unsigned snapshots, gap_ms, rate;
	double warmup_s;
	bool json, each;
};

/* One snapshot: signal to rename, and what the schedstats say of that interval (ms;
 * < 0: no schedstat). */
struct sample {
	double lat, cpu, wait, own_wait;
};

struct result {
	const char *load, *engine;
	unsigned n;		/* snapshots answered */
	double p50, p90, p99, max; /* ms, signal to rename */
	long long size;		/* bytes of the last file */
	double cpu_ms;		/* median report + encode CPU ms; < 0: not said */
	double unmerged;	/* median records not merged at the snapshot; < 0: not said */
	double write_ms;	/* median ms from the report to the file at its name (a
				   live snapshot's fsync follows), as the engine says it;
				   < 0: not said */
	double cut_ms;		/* median ms from reading SIGUSR1 to the report; < 0: not
				   said */
	/* the engine thread's CPU and run-queue wait, ours, between the signal and the
	   rename (ms): medians, and the mean of the snapshots at or above the p99;
	   < 0: no schedstat */
	double cpu50, wait50, own50, cpu_tail, wait_tail, own_tail;
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int cmp_sample(const void *a, const void *b)
{
	return cmp_double(&((const struct sample *)a)->lat, &((const struct sample *)b)->lat);
}

/* A thread's schedstat: ns on a CPU, ns waiting in a run queue; false when the
 * kernel keeps none (CONFIG_SCHEDSTATS off, or the thread is gone). */
static bool schedstat(const char *path, uint64_t *cpu, uint64_t *wait)
{
	FILE *f = fopen(path, "r");
	unsigned long long c = 0, w = 0;
	bool ok;

	if (f == NULL)
		return false;
	ok = fscanf(f, "%llu %llu", &c, &w) == 2;
	fclose(f);
	*cpu = c;
	*wait = w;
	return ok;
}

/* The nearest-rank percentile of the sorted v[0..n). */
static double pct(const double *v, unsigned n, double p)
{
	unsigned k;

	if (n == 0)
		return 0;
	k = (unsigned)(p / 100.0 * n + 0.999999);
	return v[k == 0 ? 0 : k > n ? n - 1 : k - 1];
}

static pid_t spawn(const char *const argv[], const char *session, const char *err_path)
{
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);
		int err = err_path ? open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600) : null;

		dup2(null, 1);
		dup2(err >= 0 ? err : null, 2);
		setenv("RINGPROF_SESSION", session, 1);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	return pid;
}

/* The engine's lines "... (report and encode X ms CPU, N records unmerged)": medians. */
static void engine_figures(const char *log, struct result *res)
{
	static double cpu[MAX_SNAPS], unm[MAX_SNAPS], wr[MAX_SNAPS], cut[MAX_SNAPS];
	char line[1024];
	unsigned n = 0, nc = 0;
	FILE *f = fopen(log, "r");

	res->cpu_ms = res->unmerged = res->write_ms = res->cut_ms = -1;
	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL && n < MAX_SNAPS) {
		const char *p = strstr(line, "report and encode ");
		const char *w = strstr(line, " bytes, ");
		const char *k = strstr(line, "; cut ");
		double c, u, ms;

		if (p != NULL && w != NULL &&
		    sscanf(p, "report and encode %lf ms CPU, %lf", &c, &u) == 2 &&
		    sscanf(w, " bytes, %lf ms", &ms) == 1) {
			cpu[n] = c;
			unm[n] = u;
			wr[n++] = ms;
			if (k != NULL && sscanf(k, "; cut %lf", &cut[nc]) == 1)
				nc++;
		}
	}
	fclose(f);
	if (n == 0)
		return;
	qsort(cpu, n, sizeof(*cpu), cmp_double);
	qsort(unm, n, sizeof(*unm), cmp_double);
	qsort(wr, n, sizeof(*wr), cmp_double);
	res->write_ms = pct(wr, n, 50);
	res->cpu_ms = pct(cpu, n, 50);
	res->unmerged = pct(unm, n, 50);
	if (nc > 0) {
		qsort(cut, nc, sizeof(*cut), cmp_double);
		res->cut_ms = pct(cut, nc, 50);
	}
}

/* Waits for @name to be renamed into the watched directory; false after 60 s or when
 * the engine @eng is gone (it refused its options, say: its log has why). */
static bool wait_rename(int ifd, const char *name, pid_t *eng)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	uint64_t until = now_ns() + 60000000000ull;

	for (;;) {
		struct pollfd p = { .fd = ifd, .events = POLLIN };
		ssize_t len;

		if (now_ns() > until)
			return false;
		if (waitpid(*eng, NULL, WNOHANG) == *eng) {
			*eng = -1; /* reaped: never signalled again */
			return false;
		}
		if (poll(&p, 1, 1000) <= 0)
			continue;
		len = read(ifd, buf, sizeof(buf));
		for (char *q = buf; len > 0 && q < buf + len;) {
			const struct inotify_event *ev = (const struct inotify_event *)q;

			if (ev->len > 0 && strcmp(ev->name, name) == 0)
				return true;
			q += sizeof(*ev) + ev->len;
		}
	}
}

/* The schedstat medians, and the means over the snapshots at or above the p99
 * (@s sorted by latency): -1 where a snapshot had none. */
static void sched_figures(const struct sample *s, unsigned n, struct result *res)
{
	static double c[MAX_SNAPS], w[MAX_SNAPS], ow[MAX_SNAPS];
	unsigned tail = n - (n ? (unsigned)(0.99 * n + 0.999999) - 1 : 0), i;
	bool ok = n > 0;

	for (i = 0; i < n; i++)
		ok = ok && s[i].cpu >= 0;
	res->cpu50 = res->wait50 = res->own50 = -1;
	res->cpu_tail = res->wait_tail = res->own_tail = -1;
	if (!ok)
		return;
	for (i = 0; i < n; i++)
		c[i] = s[i].cpu, w[i] = s[i].wait, ow[i] = s[i].own_wait;
	qsort(c, n, sizeof(*c), cmp_double);
	qsort(w, n, sizeof(*w), cmp_double);
	qsort(ow, n, sizeof(*ow), cmp_double);
	res->cpu50 = pct(c, n, 50);
	res->wait50 = pct(w, n, 50);
	res->own50 = pct(ow, n, 50);
	res->cpu_tail = res->wait_tail = res->own_tail = 0;
	for (i = n - tail; i < n; i++) {
		res->cpu_tail += s[i].cpu / tail;
		res->wait_tail += s[i].wait / tail;
		res->own_tail += s[i].own_wait / tail;
	}
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* --each: every snapshot in the order it was asked for, with the engine's own line on
 * it (its report and encode CPU, what it left unmerged, its write and its cut). */
static void each_lines(const char *log, const struct sample *smp, unsigned n,
		       const char *load, const char *engine)
{
	char line[1024];
	FILE *f = fopen(log, "r");

	for (unsigned i = 0; i < n; i++) {
		const char *e = "";

		while (f != NULL && fgets(line, sizeof(line), f) != NULL)
			if (strstr(line, "report and encode ") != NULL) {
				line[strcspn(line, "\n")] = '\0';
				e = line;
				break;
			}
		fprintf(stderr, "%s %s #%u: %.2f ms, engine cpu %.2f wait %.2f, own wait %.2f%s%s\n",
			load, engine, i, smp[i].lat, smp[i].cpu, smp[i].wait, smp[i].own_wait,
			*e ? "; " : "", e);
	}
	if (f != NULL)
		fclose(f);
}

static int run_load(const struct opts *o, const char *bin, bool saturated, struct result *res)
{
	static unsigned seq;
	static struct sample smp[MAX_SNAPS];
	static double v[MAX_SNAPS];
	char session[48], dir[] = "/tmp/bench_snapshot_XXXXXX", log[96], base[96], path[160];
	char rate[32], eng_stat[64], own_stat[64];
	pid_t eng, prod[2] = { -1, -1 };
	struct stat st;
	int ifd, status;

	if (mkdtemp(dir) == NULL)
		return -errno;
	snprintf(session, sizeof(session), "bs%d_%u", (int)getpid(), seq++);
	snprintf(log, sizeof(log), "%s/engine.log", dir);
	snprintf(base, sizeof(base), "ringprof-%s.msgpack", session);
	snprintf(path, sizeof(path), "%s/%s", dir, base);
	snprintf(rate, sizeof(rate), "%u", o->rate);
	{
		const char *argv[] = { bin, "run", "--session", session, "--snapshot-dir", dir,
				       "--no-socket", o->recorder_spans ? "--recorder-spans" : NULL,
				       o->recorder_spans, NULL };

		eng = spawn(argv, session, log);
	}
	if (eng <= 0) /* never kill(-1, ...) */
		return -EAGAIN;
	for (int i = 0; i < 5000 && !engine_up(session); i++)
		usleep(1000);
	if (saturated) {
		const char *argv[] = { o->demo, "--no-sleep", "--duration", "0", "--threads", "2",
				       "--quiet", NULL };

		prod[0] = spawn(argv, session, NULL);
		prod[1] = spawn(argv, session, NULL);
	} else {
		const char *argv[] = { o->demo, "--rate", rate, "--duration", "0", "--quiet", NULL };

		prod[0] = spawn(argv, session, NULL);
	}
	sleep_ms((unsigned)(o->warmup_s * 1000));
	ifd = inotify_init1(IN_CLOEXEC);
	if (ifd < 0 || inotify_add_watch(ifd, dir, IN_MOVED_TO) < 0)
		return -errno;
	/* the engine's loop runs in its main thread */
	snprintf(eng_stat, sizeof(eng_stat), "/proc/%d/task/%d/schedstat", (int)eng, (int)eng);
	snprintf(own_stat, sizeof(own_stat), "/proc/thread-self/schedstat");
	res->n = 0;
	for (unsigned i = 0; i < o->snapshots && i < MAX_SNAPS; i++) {
		uint64_t c0 = 0, w0 = 0, c1 = 0, w1 = 0, oc0, ow0 = 0, oc1, ow1 = 0, t0;
		bool ok = schedstat(eng_stat, &c0, &w0) && schedstat(own_stat, &oc0, &ow0);
		struct sample *x = &smp[res->n];

		t0 = now_ns();
		kill(eng, SIGUSR1);
		if (!wait_rename(ifd, base, &eng)) {
			fprintf(stderr, "bench_snapshot: no snapshot within 60 s, or no engine\n");
			break;
		}
		x->lat = (double)(now_ns() - t0) / 1e6;
		ok = ok && schedstat(eng_stat, &c1, &w1) && schedstat(own_stat, &oc1, &ow1);
		x->cpu = ok ? (double)(c1 - c0) / 1e6 : -1;
		x->wait = ok ? (double)(w1 - w0) / 1e6 : -1;
		x->own_wait = ok ? (double)(ow1 - ow0) / 1e6 : -1;
		(void)oc1;
		res->n++;
		sleep_ms(o->gap_ms);
	}
	close(ifd);
	res->size = stat(path, &st) == 0 ? (long long)st.st_size : -1;
	for (int k = 0; k < 2; k++)
		if (prod[k] > 0) {
			kill(prod[k], SIGTERM);
			waitpid(prod[k], &status, 0);
		}
	if (eng > 0) {
		kill(eng, SIGTERM);
		waitpid(eng, &status, 0);
	}
	if (o->each)
		each_lines(log, smp, res->n, saturated ? "saturated" : "demo",
			   bin == o->bin ? "this" : "baseline");
	qsort(smp, res->n, sizeof(*smp), cmp_sample);
	for (unsigned i = 0; i < res->n; i++)
		v[i] = smp[i].lat;
	res->p50 = pct(v, res->n, 50);
	res->p90 = pct(v, res->n, 90);
	res->p99 = pct(v, res->n, 99);
	res->max = res->n ? v[res->n - 1] : 0;
	sched_figures(smp, res->n, res);
	res->load = saturated ? "saturated" : "demo";
	res->engine = bin == o->bin ? "this" : "baseline";
	engine_figures(log, res);
	unlink(log);
	unlink(path);
	rmdir(dir);
	return 0;
}

static void print(const struct opts *o, const struct result *r, unsigned n)
{
	if (o->json) {
		printf("{\"bench\":\"snapshot\",\"snapshots\":%u,\"gap_ms\":%u,\"rate\":%u,"
		       "\"runs\":[", o->snapshots, o->gap_ms, o->rate);
		for (unsigned i = 0; i < n; i++) {
			printf("%s{\"load\":\"%s\",\"engine\":\"%s\",\"n\":%u,\"p50_ms\":%.2f,"
			       "\"p90_ms\":%.2f,\"p99_ms\":%.2f,\"max_ms\":%.2f,\"bytes\":%lld,",
			       i ? "," : "", r[i].load, r[i].engine, r[i].n, r[i].p50, r[i].p90,
			       r[i].p99, r[i].max, r[i].size);
			if (r[i].cpu_ms < 0)
				printf("\"encode_cpu_ms\":null,\"unmerged\":null}");
			else
				printf("\"encode_cpu_ms\":%.2f,\"engine_ms\":%.2f,\"unmerged\":%.0f,",
				       r[i].cpu_ms, r[i].write_ms, r[i].unmerged);
			if (r[i].cut_ms < 0)
				printf("\"cut_ms\":null,");
			else
				printf("\"cut_ms\":%.2f,", r[i].cut_ms);
			if (r[i].cpu50 < 0)
				printf("\"sched\":null}");
			else
				printf("\"sched\":{\"cpu_ms\":%.2f,\"wait_ms\":%.2f,"
				       "\"own_wait_ms\":%.2f,\"p99_cpu_ms\":%.2f,"
				       "\"p99_wait_ms\":%.2f,\"p99_own_wait_ms\":%.2f}}",
				       r[i].cpu50, r[i].wait50, r[i].own50, r[i].cpu_tail,
				       r[i].wait_tail, r[i].own_tail);
		}
		printf("]}\n");
		return;
	}
	printf("%-10s %-9s %5s %8s %8s %8s %8s %10s %8s %9s %10s %7s %s\n", "load", "engine",
	       "n", "p50_ms", "p90_ms", "p99_ms", "max_ms", "bytes", "cpu_ms", "engine_ms",
	       "unmerged", "cut_ms", " sched: cpu/wait/own (median | p99 tail)");
	for (unsigned i = 0; i < n; i++) {
		printf("%-10s %-9s %5u %8.2f %8.2f %8.2f %8.2f %10lld ", r[i].load, r[i].engine,
		       r[i].n, r[i].p50, r[i].p90, r[i].p99, r[i].max, r[i].size);
		if (r[i].cpu_ms < 0)
			printf("%8s %9s %10s ", "-", "-", "-");
		else
			printf("%8.2f %9.2f %10.0f ", r[i].cpu_ms, r[i].write_ms, r[i].unmerged);
		if (r[i].cut_ms < 0)
			printf("%7s ", "-");
		else
			printf("%7.2f ", r[i].cut_ms);
		if (r[i].cpu50 < 0)
			printf(" -\n");
		else
			printf(" %.1f/%.1f/%.1f | %.1f/%.1f/%.1f\n", r[i].cpu50, r[i].wait50,
			       r[i].own50, r[i].cpu_tail, r[i].wait_tail, r[i].own_tail);
	}
	printf("(signal to renamed file, wall time of a shared machine: one run each; cpu_ms: "
	       "median thread CPU of report + encode, engine_ms: median wall time from the "
	       "report to the file at its name, unmerged: median records left for the next "
	       "snapshot, cut_ms: median wall time from reading the signal to the report, as "
	       "the engine says them; sched: from signal to rename, the engine thread's CPU "
	       "ms, its run-queue wait ms and ours, medians | means of the snapshots at or "
	       "above the p99, from /proc schedstat)\n");
}

static void usage(void)
{
	fprintf(stderr,
		"usage: bench_snapshot [--snapshots N] [--gap-ms MS] [--warmup-s S] [--rate R]\n"
		"                      [--only demo|saturated] [--baseline RINGPROF_BIN]\n"
		"                      [--recorder-spans N] [--json] [--each]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct opts o = { .bin = RINGPROF_BIN, .demo = DEMO_BIN, .snapshots = 40, .gap_ms = 100,
			  .rate = 2000, .warmup_s = 3 };
	static const struct option lo[] = {
		{ "snapshots", 1, NULL, 'n' }, { "gap-ms", 1, NULL, 'g' },
		{ "warmup-s", 1, NULL, 'w' },  { "rate", 1, NULL, 'r' },
		{ "baseline", 1, NULL, 'b' },  { "only", 1, NULL, 'o' },
		{ "json", 0, NULL, 'j' },      { "recorder-spans", 1, NULL, 's' },
		{ "each", 0, NULL, 'e' },
		{ NULL, 0, NULL, 0 },
	};
	struct result res[4];
	const char *only = NULL;
	unsigned n = 0;
	int c;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'n': o.snapshots = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'g': o.gap_ms = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'w': o.warmup_s = strtod(optarg, NULL); break;
		case 'r': o.rate = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'b': o.baseline = optarg; break;
		case 'o': only = optarg; break;
		case 'j': o.json = true; break;
		case 'e': o.each = true; break;
		case 's': o.recorder_spans = optarg; break;
		default: usage();
		}
	}
	if (o.snapshots == 0 || o.snapshots > MAX_SNAPS || o.rate == 0)
		usage();
	signal(SIGPIPE, SIG_IGN);
	for (int sat = 0; sat < 2; sat++) {
		if (only != NULL && strcmp(only, sat ? "saturated" : "demo") != 0)
			continue;
		if (run_load(&o, o.bin, sat, &res[n]) == 0)
			n++;
		if (o.baseline != NULL && run_load(&o, o.baseline, sat, &res[n]) == 0)
			n++;
	}
	print(&o, res, n);
	return 0;
}
