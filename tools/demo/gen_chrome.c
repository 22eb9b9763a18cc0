// SPDX-License-Identifier: MIT
/*
 * gen_chrome: writes a Chrome trace in the shape torch.profiler exports (the object
 * form with "traceEvents", µs timestamps with three decimals, args on every event)
 * of a given number of events, for benchmarks of the Chrome importer: per training
 * step on each CPU thread a ProfilerStep span with nested aten operators (X
 * events), cudaLaunchKernel runtime calls with a correlation id and the kernel they
 * launch on a GPU stream (cat "kernel", the same correlation, plus torch's flow
 * events s/f), a memory counter (C), B/E user annotations, instants and, first,
 * the process and thread names (M). Deterministic for a given --seed.
 *
 * usage: gen_chrome EVENTS [--seed N] [--threads N] > trace.json
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 7;
static unsigned long events;
static unsigned long long target;
static unsigned long ext_id = 1, corr = 1;

static uint32_t rnd(uint32_t n)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(rng >> 33) % n;
}

static void sep(void)
{
	fputs(events++ ? ",\n  " : "\n  ", stdout);
}

static void op(int tid, const char *name, double ts, double dur)
{
	sep();
	printf("{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"%s\", \"pid\": 1234, \"tid\": %d, "
	       "\"ts\": %.3f, \"dur\": %.3f, \"args\": {\"External id\": %lu, \"Record function "
	       "id\": 0, \"Ev Idx\": %lu, \"Sequence number\": %u, \"Fwd thread id\": 0}}",
	       name, tid, ts, dur, ext_id, events, rnd(100000));
	ext_id++;
}

/* A runtime launch on @tid at @ts and its kernel on the GPU stream, with the flow. */
static void launch(int tid, const char *kernel, double ts, double gpu_ts)
{
	double kdur = 2 + rnd(4000) / 10.0;

	sep();
	printf("{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", "
	       "\"pid\": "
	       "1234, \"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, \"args\": {\"External id\": %lu, "
	       "\"cbid\": 211, \"correlation\": %lu}}",
	       tid, ts, 4 + rnd(50) / 10.0, ext_id, corr);
	sep();
	printf("{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"%s\", \"pid\": 0, \"tid\": 7, "
	       "\"ts\": %.3f, \"dur\": %.3f, \"args\": {\"External id\": %lu, \"queued\": 0, "
	       "\"device\": 0, \"context\": 1, \"stream\": 7, \"correlation\": %lu, \"registers "
	       "per thread\": %u, \"shared memory\": 0, \"blocks per SM\": %.6f, \"warps per "
	       "SM\": %.6f, \"grid\": [%u, 1, 1], \"block\": [128, 1, 1], \"est. achieved "
	       "occupancy %%\": %u}}",
	       kernel, gpu_ts, kdur, ext_id, corr, 16 + rnd(64), rnd(1000) / 250.0,
	       rnd(1000) / 31.0, 1 + rnd(4096), rnd(100));
	sep();
	printf("{\"ph\": \"s\", \"id\": %lu, \"pid\": 1234, \"tid\": %d, \"ts\": %.3f, \"cat\": "
	       "\"ac2g\", \"name\": \"ac2g\"}",
	       corr, tid, ts);
	sep();
	printf("{\"ph\": \"f\", \"id\": %lu, \"pid\": 0, \"tid\": 7, \"ts\": %.3f, \"cat\": "
	       "\"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"}",
	       corr, gpu_ts);
	corr++;
	ext_id++;
}

static const char usage[] =
	"usage: gen_chrome EVENTS [--seed N] [--threads N] > trace.json\n"
	"Writes a torch-shaped Chrome trace of about EVENTS events on stdout, on N CPU\n"
	"threads (1 to 1024, default 2).\n";

/* A whole decimal number: digits only. */
static bool number(const char *s, unsigned long long *v)
{
	char *end;

	errno = 0;
	*v = strtoull(s, &end, 10);
	return *s >= '0' && *s <= '9' && *end == '\0' && errno == 0;
}

static int bad(const char *what, const char *arg)
{
	fprintf(stderr, "gen_chrome: %s %s: not valid (try gen_chrome --help)\n", what, arg);
	return 2;
}

int main(int argc, char **argv)
{
	static const char *const ops[] = { "aten::linear",  "aten::addmm",	"aten::relu",
					   "aten::softmax", "aten::layer_norm", "aten::matmul",
					   "aten::conv2d",  "aten::add_" };
	static const char *const kernels[] = {
		"void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>",
		"ampere_sgemm_128x64_tn",
		"void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4>(Params)",
		("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, "
		 "float>"),
	};
	int threads = 2;

	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			fputs(usage, stdout);
			return 0;
		}
	if (argc < 2 || !number(argv[1], &target))
		return bad("EVENTS", argc < 2 ? "" : argv[1]);
	for (int i = 2; i < argc; i += 2) {
		unsigned long long v;

		if (i + 1 == argc || !number(argv[i + 1], &v))
			return bad(argv[i], i + 1 < argc ? argv[i + 1] : "");
		if (strcmp(argv[i], "--seed") == 0)
			rng = v;
		else if (strcmp(argv[i], "--threads") == 0 && v >= 1 && v <= 1024)
			threads = (int)v;
		else
			return bad(argv[i], argv[i + 1]);
	}
	fputs("{\n\"schemaVersion\": 1,\n\"deviceProperties\": [{\"id\": 0, \"name\": \"NVIDIA "
	      "A100-SXM4-80GB\", \"totalGlobalMem\": 85097971712}],\n\"traceEvents\": [",
	      stdout);
	sep();
	printf("{\"name\": \"process_name\", \"ph\": \"M\", \"ts\": 0, \"pid\": 1234, \"tid\": 0, "
	       "\"args\": {\"name\": \"python3\"}}");
	for (int t = 0; t < threads; t++) {
		sep();
		printf("{\"name\": \"thread_name\", \"ph\": \"M\", \"ts\": 0, \"pid\": 1234, "
		       "\"tid\": "
		       "%d, \"args\": {\"name\": \"thread %d (python3)\"}}",
		       100 + t, 100 + t);
	}
	double gpu = 1700000000000.0;
	for (int step = 0; events < target; step++) {
		for (int t = 0; t < threads && events < target; t++) {
			int tid = 100 + t, n = 4 + (int)rnd(12);
			double ts = 1700000000000.0 + step * 5000.0 + t * 7.0 + rnd(100) / 1000.0;
			double end = ts + 20.0 + n * 60.0;
			char step_name[32];

			snprintf(step_name, sizeof(step_name), "ProfilerStep#%d", step);
			op(tid, step_name, ts, end - ts);
			sep();
			printf("{\"ph\": \"B\", \"cat\": \"user_annotation\", \"name\": "
			       "\"forward\", "
			       "\"pid\": 1234, \"tid\": %d, \"ts\": %.3f}",
			       tid, ts + 1.0);
			for (int k = 0; k < n; k++) {
				double o = ts + 5.0 + k * 60.0;
				op(tid, ops[rnd(8)], o, 50.0 + rnd(900) / 100.0);
				if (rnd(3) != 0) {
					gpu = gpu > o + 10.0 ? gpu + 1.0 : o + 10.0;
					launch(tid, kernels[rnd(4)], o + 3.0, gpu);
				}
			}
			sep();
			printf("{\"ph\": \"E\", \"cat\": \"user_annotation\", \"name\": "
			       "\"forward\", "
			       "\"pid\": 1234, \"tid\": %d, \"ts\": %.3f}",
			       tid, end - 1.0);
			sep();
			printf("{\"ph\": \"C\", \"name\": \"[memory]\", \"pid\": 1234, \"tid\": "
			       "%d, "
			       "\"ts\": %.3f, \"args\": {\"Total Allocated\": %u, \"Total "
			       "Reserved\": "
			       "%u}}",
			       tid, end, 1000000 + rnd(1000000), 4000000);
			sep();
			printf("{\"ph\": \"i\", \"s\": \"t\", \"name\": \"step\", \"pid\": 1234, "
			       "\"tid\": "
			       "%d, \"ts\": %.3f}",
			       tid, end);
		}
	}
	fputs("\n],\n\"traceName\": \"gen_chrome\",\n\"displayTimeUnit\": \"ms\"\n}\n", stdout);
	fprintf(stderr, "gen_chrome: %lu events\n", events);
	return 0;
}
