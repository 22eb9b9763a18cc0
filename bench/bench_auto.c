// SPDX-License-Identifier: MIT
/*
 * bench_auto: what whole-program tracing costs per call, ringprof-auto next to
 * uftrace, on one deterministic call tree (bench/auto/workload.c: recursion, many
 * small functions, a few long ones) built three ways:
 *
 *	plain		-O2, no instrumentation: the baseline
 *	ringprof	-O2 -finstrument-functions, linked with ringprof-auto, run while a
 *			`ringprof run` engine of this benchmark's own session drains it;
 *			every call a span (RINGPROF_SUMMARY_NS=0); one ring large enough
 *			for a whole run (RINGPROF_RING_EVENTS), so the figure is
 *			recording's, not a consumer's keeping up
 *	summarized	the same build at ringprof-auto's defaults: calls under 10 us
 *			folded into summaries at the source (docs/summaries.md)
 *	uftrace		-O2 -pg, run under `uftrace record` (Debian's uftrace; skipped,
 *			figures null, when it is not installed)
 *
 * The workload times its call tree itself, in its thread's CPU time
 * (CLOCK_THREAD_CPUTIME_ID: robust on a loaded machine, and without the tracers'
 * own threads and processes, the engine included), so process start and a
 * tracer's setup and exit are not in the figures. Calls are counted
 * from the workload's model here (run + fib calls + 2 per small + long ones).
 * Each build runs --runs times, interleaved; medians are reported:
 *
 *	plain_ns_per_call	plain time / calls
 *	ringprof_ns_per_call	(ringprof time - plain time) / calls: overhead per call
 *	uftrace_ns_per_call	(uftrace time - plain time) / calls
 *	uftrace_vs_ringprof	uftrace_ns_per_call / ringprof_ns_per_call
 *	clock_floor_ns_per_call	two clock reads and two 32-byte stores, timed here:
 *				what stamping an entry and an exit costs any tracer
 *	summarized_ns_per_call	(summarized time - plain time) / calls
 *	{ringprof,summarized}_events_per_call	records written into the rings / calls
 *	{ringprof,summarized}_engine_cpu_ns_per_mcall	the engine's CPU time (its
 *				process clock, over the run and its drain) per million calls
 *
 * in thread CPU time (the headline) and, under "wall", in CLOCK_MONOTONIC time of
 * the same stretch (the slowdown the program sees, tracers' other threads competing
 * for the CPUs included; noisy on a shared machine).
 *
 * ringprof's dropped events (full rings) are printed too: a figure with drops is a
 * figure of the drop path, not of recording. Nothing is pinned; on a shared machine
 * the figures move from run to run, their ratio much less.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_RUNS 51

struct opts {
	int runs, fib, lng;
	long small;
	bool json;
};

struct sample {
	double cpu_ns, wall_ns;
	unsigned long long dropped, sent;
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static uint64_t fib_calls(int n)
{
	return n < 2 ? 1 : 1 + fib_calls(n - 1) + fib_calls(n - 2);
}

/* Runs the shell command @cmd; its "cpu_ns wall_ns dropped" line. */
static int run_one(const char *cmd, struct sample *out)
{
	char line[256] = "";
	unsigned long long ns = 0, wall = 0, dropped = 0, sent = 0;
	FILE *p = popen(cmd, "r");
	bool got = false;

	if (!p)
		return -errno;
	while (fgets(line, sizeof(line), p))
		if (sscanf(line, "%llu %llu %llu %llu", &ns, &wall, &dropped, &sent) >= 3)
			got = true;
	if (pclose(p) != 0 || !got) {
		fprintf(stderr, "bench_auto: `%s` failed\n", cmd);
		return -EIO;
	}
	out->cpu_ns = (double)ns;
	out->wall_ns = (double)wall;
	out->dropped = dropped;
	out->sent = sent;
	return 0;
}

static uint64_t cpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * The floor of any tracer that stamps a call's entry and exit: per call, two clock
 * reads (rdtsc, ringprof's clock on x86; clock_gettime elsewhere) and two 32-byte
 * records stored into a thread-owned array, in this thread's CPU time.
 */
static volatile uint64_t floor_sink;

static double clock_floor_ns(uint64_t calls)
{
	static struct rec { uint64_t ts, a, b, c; } rec[1 << 12];
	uint64_t t0 = cpu_now();

	for (uint64_t i = 0; i < calls; i++) {
		for (int k = 0; k < 2; k++) {
#if defined(__x86_64__) || defined(__i386__)
			uint64_t ts = __builtin_ia32_rdtsc();
#else
			uint64_t ts = cpu_now();
#endif
			rec[(2 * i + k) & ((1 << 12) - 1)] = (struct rec){ ts, i, 0, 0 };
		}
		__asm__ volatile("" ::: "memory");
	}
	floor_sink = rec[calls & ((1 << 12) - 1)].ts;
	return (double)(cpu_now() - t0) / (double)calls;
}

static pid_t start_engine(const char *session, const char *dir)
{
	char marker[128];
	struct timespec ms = { 0, 10000000 };
	pid_t pid = fork();

	if (pid == 0) {
		if (!freopen("/dev/null", "w", stderr) || !freopen("/dev/null", "w", stdout))
			_exit(126);
		execl(RINGPROF_BIN, "ringprof", "run", "--session", session, "--snapshot-dir", dir,
		      "--quiet", (char *)NULL);
		_exit(127);
	}
	snprintf(marker, sizeof(marker), "/dev/shm/ringprof.%s.engine", session);
	for (int i = 0; i < 500 && access(marker, F_OK) != 0; i++)
		nanosleep(&ms, NULL);
	return access(marker, F_OK) == 0 ? pid : -1;
}

static bool have_uftrace(void)
{
	return system("command -v uftrace >/dev/null 2>&1") == 0;
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option longs[] = {
		{ "runs", required_argument, NULL, 'r' }, { "fib", required_argument, NULL, 'f' },
		{ "small", required_argument, NULL, 's' }, { "long", required_argument, NULL, 'l' },
		{ "json", no_argument, NULL, 'j' },	   { NULL, 0, NULL, 0 }
	};
	int ch;

	*o = (struct opts){ .runs = 5, .fib = 22, .small = 400000, .lng = 3 };
	while ((ch = getopt_long(argc, argv, "", longs, NULL)) != -1) {
		switch (ch) {
		case 'r': o->runs = atoi(optarg); break;
		case 'f': o->fib = atoi(optarg); break;
		case 's': o->small = atol(optarg); break;
		case 'l': o->lng = atoi(optarg); break;
		case 'j': o->json = true; break;
		default: return -1;
		}
	}
	if (o->runs < 1 || o->runs > MAX_RUNS || o->fib < 0 || o->fib > 35 || o->small < 0 ||
	    o->lng < 0 || optind != argc)
		return -1;
	return 0;
}

enum { PLAIN, RP, UF, SUM, BUILDS };

static const char *const build_names[BUILDS] = { "plain", "ringprof", "uftrace", "summarized" };

/* Per-call figures of one measure (cpu or wall) from the medians. */
struct figures {
	double plain, rp, uf, ratio, sum;
};

/* The engine process's CPU time so far (ns); 0 if it cannot be read. */
static double engine_cpu(pid_t eng)
{
	struct timespec ts;
	clockid_t c;

	if (clock_getcpuclockid(eng, &c) != 0 || clock_gettime(c, &ts) != 0)
		return 0;
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static struct figures per_call(double (*v)[MAX_RUNS], int runs, uint64_t calls, bool uftrace)
{
	struct figures f;
	double p = median(v[PLAIN], runs);

	f.plain = p / (double)calls;
	f.rp = (median(v[RP], runs) - p) / (double)calls;
	f.uf = uftrace ? (median(v[UF], runs) - p) / (double)calls : 0;
	f.ratio = f.rp > 0 ? f.uf / f.rp : 0;
	f.sum = (median(v[SUM], runs) - p) / (double)calls;
	return f;
}

/* Records sent and engine CPU, per build (RP, SUM): medians over the runs. */
struct side {
	double events_per_call[BUILDS], engine_ns_per_mcall[BUILDS];
	unsigned long long dropped[BUILDS];
};

static void print_json(const struct opts *o, uint64_t calls, double floor_ns,
		       unsigned long long dropped, bool uftrace, const struct figures *c,
		       const struct figures *w, const struct side *sd)
{
	printf("{\"summarized_ns_per_call\": %.3f, \"summarized_dropped\": %llu, "
	       "\"ringprof_events_per_call\": %.4f, \"summarized_events_per_call\": %.6f, "
	       "\"ringprof_engine_cpu_ns_per_mcall\": %.0f, "
	       "\"summarized_engine_cpu_ns_per_mcall\": %.0f, "
	       "\"wall_summarized_ns_per_call\": %.3f,\n ",
	       c->sum, sd->dropped[SUM], sd->events_per_call[RP], sd->events_per_call[SUM],
	       sd->engine_ns_per_mcall[RP], sd->engine_ns_per_mcall[SUM], w->sum);
	printf("\"calls\": %llu, \"runs\": %d, \"clock\": \"thread_cpu\", "
	       "\"plain_ns_per_call\": %.3f, \"ringprof_ns_per_call\": %.3f, "
	       "\"clock_floor_ns_per_call\": %.3f, \"ringprof_dropped\": %llu, ",
	       (unsigned long long)calls, o->runs, c->plain, c->rp, floor_ns, dropped);
	if (uftrace)
		printf("\"uftrace_ns_per_call\": %.3f, \"uftrace_vs_ringprof\": %.2f, ", c->uf,
		       c->ratio);
	else
		printf("\"uftrace_ns_per_call\": null, \"uftrace_vs_ringprof\": null, ");
	printf("\"wall\": {\"plain_ns_per_call\": %.3f, \"ringprof_ns_per_call\": %.3f, ",
	       w->plain, w->rp);
	if (uftrace)
		printf("\"uftrace_ns_per_call\": %.3f, \"uftrace_vs_ringprof\": %.2f}}\n", w->uf,
		       w->ratio);
	else
		printf("\"uftrace_ns_per_call\": null, \"uftrace_vs_ringprof\": null}}\n");
}

static void print_table(const struct opts *o, uint64_t calls, double floor_ns,
			unsigned long long dropped, bool uftrace, const struct figures *c,
			const struct figures *w, const struct side *sd)
{
	printf("bench_auto: %llu calls per run, medians of %d runs; ns per call\n",
	       (unsigned long long)calls, o->runs);
	printf("%-34s %10s %10s\n", "figure", "thread-cpu", "wall");
	printf("%-34s %10.3f %10.3f\n", "plain (the call tree itself)", c->plain, w->plain);
	printf("%-34s %10.3f %10.3f\n", "ringprof-auto, above plain", c->rp, w->rp);
	if (uftrace) {
		printf("%-34s %10.3f %10.3f\n", "uftrace record, above plain", c->uf, w->uf);
		printf("%-34s %10.2f %10.2f\n", "uftrace / ringprof", c->ratio, w->ratio);
	} else {
		printf("%-34s %10s %10s\n", "uftrace record", "-", "-");
	}
	printf("%-34s %10.3f %10s\n", "floor: 2 x (clock + 32B store)", floor_ns, "-");
	printf("ringprof dropped %llu events%s\n", dropped, uftrace ? "" : "; uftrace not installed");
	printf("%-34s %10.3f %10.3f\n", "summarized, above plain", c->sum, w->sum);
	printf("%-34s %10s %10s\n", "", "every call", "summarized");
	printf("%-34s %10.4f %10.6f\n", "records sent per call", sd->events_per_call[RP],
	       sd->events_per_call[SUM]);
	printf("%-34s %10.0f %10.0f\n", "engine CPU ns per million calls",
	       sd->engine_ns_per_mcall[RP], sd->engine_ns_per_mcall[SUM]);
	printf("summarized dropped %llu events\n", sd->dropped[SUM]);
}

int main(int argc, char **argv)
{
	static double cpu[BUILDS][MAX_RUNS], wall[BUILDS][MAX_RUNS], sent[BUILDS][MAX_RUNS],
		eng_ns[BUILDS][MAX_RUNS];
	struct side sd = { 0 };
	char session[64], dir[] = "/tmp/bench_auto_XXXXXX", cmd[1024], args[96], rm[64];
	unsigned long long dropped = 0;
	struct figures c, w;
	struct opts o;
	struct sample s = { 0, 0, 0, 0 };
	bool uftrace;
	pid_t eng;
	int err = 0;

	if (parse_opts(argc, argv, &o) != 0) {
		fprintf(stderr, "usage: bench_auto [--runs R] [--fib F] [--small S] [--long L] "
				"[--json]\n");
		return 2;
	}
	uint64_t calls = 1 + fib_calls(o.fib) + 2 * (uint64_t)o.small + (uint64_t)o.lng;
	/* One ring that holds a whole run (two events a call), as bench_producer's do:
	 * the figure is the cost of recording, not of a consumer keeping up. */
	uint64_t ring = 4;
	while (ring < 2 * calls + 64)
		ring *= 2;
	if (ring > (1u << 24)) {
		fprintf(stderr, "bench_auto: %llu calls do not fit a ring; use fewer\n",
			(unsigned long long)calls);
		return 2;
	}
	if (!mkdtemp(dir))
		return 1;
	snprintf(rm, sizeof(rm), "rm -rf %s", dir);
	snprintf(args, sizeof(args), "%d %ld %d", o.fib, o.small, o.lng);
	snprintf(session, sizeof(session), "bench_auto_%d", (int)getpid());
	uftrace = have_uftrace();
	eng = start_engine(session, dir);
	if (eng < 0) {
		fprintf(stderr, "bench_auto: the engine did not start\n");
		return 1;
	}
	for (int r = 0; r < o.runs && !err; r++) {
		for (int b = 0; b < BUILDS && !err; b++) {
			if (b == PLAIN)
				snprintf(cmd, sizeof(cmd), "exec %s %s", WORKLOAD_PLAIN, args);
			else if (b == RP || b == SUM)
				snprintf(cmd, sizeof(cmd),
					 "RINGPROF_SESSION=%s RINGPROF_RINGS=2 %s"
					 "RINGPROF_RING_EVENTS=%llu exec %s %s",
					 session, b == RP ? "RINGPROF_SUMMARY_NS=0 " : "",
					 (unsigned long long)ring, WORKLOAD_RP, args);
			else if (uftrace)
				snprintf(cmd, sizeof(cmd), "exec uftrace record -d %s/uftrace.data %s %s",
					 dir, WORKLOAD_PG, args);
			else
				continue;
			double e0 = engine_cpu(eng);
			if ((err = run_one(cmd, &s)) != 0) {
				fprintf(stderr, "bench_auto: the %s build failed\n", build_names[b]);
				break;
			}
			cpu[b][r] = s.cpu_ns;
			wall[b][r] = s.wall_ns;
			sent[b][r] = (double)s.sent;
			eng_ns[b][r] = engine_cpu(eng) - e0;
			if (b == RP)
				dropped += s.dropped;
			if (b == SUM)
				sd.dropped[SUM] += s.dropped;
		}
	}
	kill(eng, SIGTERM);
	waitpid(eng, NULL, 0);
	if (system(rm) != 0)
		fprintf(stderr, "bench_auto: could not remove %s\n", dir);
	if (err)
		return 1;
	c = per_call(cpu, o.runs, calls, uftrace);
	w = per_call(wall, o.runs, calls, uftrace);
	double floor_ns = clock_floor_ns(calls);
	for (int b = RP; b < BUILDS; b += SUM - RP) {
		sd.events_per_call[b] = median(sent[b], o.runs) / (double)calls;
		sd.engine_ns_per_mcall[b] = median(eng_ns[b], o.runs) / ((double)calls / 1e6);
	}
	if (o.json)
		print_json(&o, calls, floor_ns, dropped, uftrace, &c, &w, &sd);
	else
		print_table(&o, calls, floor_ns, dropped, uftrace, &c, &w, &sd);
	return 0;
}
