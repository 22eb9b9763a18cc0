// SPDX-License-Identifier: MIT
/*
 * bench_device: the device idle-time analysis on a synthetic Kineto trace.
 *
 * Writes a Chrome trace (object form, like torch.profiler with Kineto) of --ops
 * operators: each a python frame > aten op > cudaLaunchKernel on a CPU thread, its
 * kernel on a GPU stream linked by args.correlation, in bursts that build a queue
 * and drain it. Then, timed (median of --runs): the import and report with the
 * device analysis switched off (its caps at 0: the baseline) and on. Prints events/s
 * of both, the ratio, and the time of the report (the analysis itself). With the
 * path of another trace as argument, times that file instead; with -w FILE, only
 * writes the trace there (put -o first).
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"
#include "import_chrome.h"

#define MAX_RUNS 21

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t rng = 88172645463325252ull;

static uint64_t rnd(uint64_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng % n;
}

/* Returns the number of trace events written. */
static uint64_t write_trace(const char *path, uint64_t ops)
{
	FILE *f = fopen(path, "w");
	uint64_t t = 1000, gpu = 0, n = 0;

	if (f == NULL) {
		perror(path);
		exit(1);
	}
	fputs("{\"traceEvents\": [\n", f);
	for (uint64_t i = 0; i < ops; i++) {
		bool burst = (i / 64) % 3 == 0;
		uint64_t l = t + 2 + rnd(3), ld = 3 + rnd(5), k, kd = burst ? 20 + rnd(40) : 1 + rnd(20);
		uint64_t at_end = l + ld + 1, py_end = at_end + rnd(2);

		k = l + 2 + rnd(4);
		if (k < gpu)
			k = gpu;
		gpu = k + kd;
		fprintf(f,
			"%s{\"ph\":\"X\",\"cat\":\"python_function\",\"name\":\"model.py(%d): forward\","
			"\"pid\":1,\"tid\":1,\"ts\":%" PRIu64 ",\"dur\":%" PRIu64 ",\"args\":{}},\n"
			"{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::mm\",\"pid\":1,\"tid\":1,"
			"\"ts\":%" PRIu64 ",\"dur\":%" PRIu64 ",\"args\":{\"External id\":%" PRIu64 "}},\n"
			"{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":1,"
			"\"tid\":1,\"ts\":%" PRIu64 ",\"dur\":%" PRIu64 ",\"args\":{\"correlation\":%" PRIu64
			"}},\n{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"void gemm<float>\",\"pid\":0,"
			"\"tid\":7,\"ts\":%" PRIu64 ",\"dur\":%" PRIu64 ",\"args\":{\"correlation\":%" PRIu64
			"}}",
			i ? ",\n" : "", (int)(10 + i % 50), t, py_end - t, t + 1, at_end - t - 1, i, l, ld,
			i + 1, k, kd, i + 1);
		n += 4;
		t = py_end + (burst ? rnd(2) : 1 + rnd(30));
		if (i % 1000 == 999) /* a CPU-only stretch: the queue drains */
			t += 500;
	}
	fputs("\n]}\n", f);
	fclose(f);
	return n;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* One import + report; the times of both, ns. */
static void run(const char *path, bool device, uint64_t *imp_ns, uint64_t *rep_ns,
		struct rp_report_device *keep)
{
	struct rp_engine_cfg cfg;
	struct rp_engine *e;
	struct rp_report r;
	char why[RP_WHY_MAX];
	uint64_t t0, t1, t2;

	rp_engine_cfg_default(&cfg);
	if (!device)
		cfg.dev.max_spans = cfg.dev.max_events = 0;
	else
		cfg.dev.max_spans = cfg.dev.max_events = 1u << 24;
	if (rp_engine_open(&cfg, &e) != 0)
		exit(1);
	t0 = now_ns();
	if (rp_import_chrome(e, path, NULL, NULL, why) != 0) {
		fprintf(stderr, "%s\n", why);
		exit(1);
	}
	t1 = now_ns();
	if (rp_engine_report(e, &r) != 0)
		exit(1);
	t2 = now_ns();
	*imp_ns = t1 - t0;
	*rep_ns = t2 - t1;
	if (keep) {
		rp_report_device_free(keep);
		*keep = r.device;
		memset(&r.device, 0, sizeof(r.device));
	}
	rp_report_free(&r);
	rp_engine_close(e);
}

int main(int argc, char **argv)
{
	uint64_t ops = 250000, runs = 3, events;
	char path[] = "/tmp/rp_bench_device_XXXXXX";
	const char *trace = path;
	uint64_t off_i[MAX_RUNS], off_r[MAX_RUNS], on_i[MAX_RUNS], on_r[MAX_RUNS];
	struct rp_report_device d = { 0 };
	int c;

	while ((c = getopt(argc, argv, "o:r:w:")) != -1) {
		if (c == 'w') { /* only write the trace there */
			printf("%" PRIu64 " events\n", write_trace(optarg, ops));
			return 0;
		}
		if (c == 'o')
			ops = strtoull(optarg, NULL, 10);
		else if (c == 'r')
			runs = strtoull(optarg, NULL, 10);
	}
	if (runs < 1 || runs > MAX_RUNS)
		runs = 3;
	if (optind < argc) {
		trace = argv[optind];
		events = 0;
	} else {
		int fd = mkstemp(path);
		if (fd < 0)
			return 1;
		close(fd);
		events = write_trace(path, ops);
	}
	for (uint64_t i = 0; i < runs; i++) {
		run(trace, false, &off_i[i], &off_r[i], NULL);
		run(trace, true, &on_i[i], &on_r[i], &d);
	}
	qsort(off_i, runs, 8, cmp_u64), qsort(off_r, runs, 8, cmp_u64);
	qsort(on_i, runs, 8, cmp_u64), qsort(on_r, runs, 8, cmp_u64);
	uint64_t off = off_i[runs / 2] + off_r[runs / 2], on = on_i[runs / 2] + on_r[runs / 2];
	printf("trace            %s\n", trace);
	if (events)
		printf("trace events     %" PRIu64 "\n", events);
	printf("spans            %" PRIu64 "  launches %" PRIu64 "  kernels %" PRIu64
	       "  max depth %u  idle intervals %" PRIu64 "  phases %" PRIu64
	       "  candidates %" PRIu64 "\n",
	       d.spans, d.launches, d.kernels, d.max_queue_depth, d.n_idle_total,
	       d.n_phases_total, d.candidates);
	printf("device off       import+report %8.1f ms", off / 1e6);
	if (events)
		printf("  %8.2f M events/s", events / (off / 1e9) / 1e6);
	printf("\ndevice on        import+report %8.1f ms", on / 1e6);
	if (events)
		printf("  %8.2f M events/s", events / (on / 1e9) / 1e6);
	printf("\nreport (device)  %8.1f ms (off: %.1f ms)\nratio on/off     %.3f\n",
	       on_r[runs / 2] / 1e6, off_r[runs / 2] / 1e6, (double)on / (double)off);
	rp_report_device_free(&d);
	if (trace == path)
		unlink(path);
	return 0;
}
