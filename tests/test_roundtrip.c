// SPDX-License-Identifier: MIT
/*
 * Snapshots lose nothing a renderer shows, end to end through the built binaries
 * (RP_BIN_DIR): `ringprof analyze TRACE --format F` gives the same bytes as
 * `ringprof analyze TRACE --format msgpack -o S` followed by `ringprof report S
 * --format F`, for every format (for msgpack: the snapshot re-encoded byte for
 * byte), on a generated Kineto-like trace with steps,
 * launches, kernels, memcpys, counters and two CPU threads (so the step statistics,
 * the flight recorder with its pid/tid labels and counter samples, and the device
 * analysis all reach the outputs), with a flight recorder small enough to wrap, with
 * the export options (--steps, --from/--to), and on the torch sample of the test
 * data. The outputs are also checked against the generator's own counts, so an
 * empty section on both sides cannot pass.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support.h"

#define NSTEPS 12

static char bin[600], dir[256];

static uint64_t rng = 42;

static uint64_t rnd(void) /* xorshift64* */
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545f4914f6cdd1dull;
}

static int64_t range(int64_t a, int64_t b)
{
	return a + (int64_t)(rnd() % (uint64_t)(b - a + 1));
}

/* What the generator wrote, to check the outputs against. */
static struct {
	unsigned launches, kernels, memcpys, counters, spans;
} gen;

#define run rp_test_sh

static void span(FILE *f, const char *cat, const char *name, int pid, int tid, int64_t ts,
		 int64_t dur, long long corr)
{
	fprintf(f,
		",\n{\"ph\": \"X\", \"cat\": \"%s\", \"name\": \"%s\", \"pid\": %d, \"tid\": %d, "
		"\"ts\": %" PRId64 ".500, \"dur\": %" PRId64 ".000, \"args\": {",
		cat, name, pid, tid, ts, dur);
	if (corr)
		fprintf(f, "\"External id\": 7, \"correlation\": %lld", corr);
	fputs("}}", f);
	gen.spans++;
}

/* Steps of python frame > aten op > launch (a kernel or a memcpy on the device some
 * microseconds later), some CPU-only ops (the queue drains: idle time), a counter
 * per step, a dataloader thread. */
static void write_trace(const char *path)
{
	FILE *f = fopen(path, "w");
	int64_t t = 1000, dev_free = 0;
	long long corr = 100;

	assert_non_null(f);
	memset(&gen, 0, sizeof(gen));
	fputs("{\"schemaVersion\": 1, \"traceEvents\": [\n"
	      "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 4242, \"args\": {\"name\": "
	      "\"trainer\"}}",
	      f);
	for (int st = 0; st < NSTEPS; st++) {
		int64_t s0 = t;
		char name[48];
		int n = (int)range(3, 8);

		t += 1;
		for (int i = 0; i < n; i++) {
			int64_t a = t, e;
			bool launch = rnd() % 4 != 0, memcpy = launch && rnd() % 5 == 0;

			e = a + range(2, 5);
			if (launch) {
				int64_t ks = e + range(2, 6), kd = range(3, 40);

				corr++;
				span(f, "cuda_runtime",
				     memcpy ? "cudaMemcpyAsync" : "cudaLaunchKernel", 4242, 1, e,
				     range(1, 4), corr);
				gen.launches += !memcpy;
				if (ks < dev_free)
					ks = dev_free;
				span(f, memcpy ? "gpu_memcpy" : "kernel",
				     memcpy	 ? "Memcpy HtoD (Pageable -> Device)"
				     : rnd() % 2 ? "void gemm_kernel<float>"
						 : "elementwise_kernel",
				     0, 7, ks, kd, corr);
				dev_free = ks + kd;
				gen.kernels += !memcpy;
				gen.memcpys += memcpy;
				e += 5;
			} else {
				e += range(10, 60);
			}
			span(f, "cpu_op", launch ? "aten::mm" : "aten::relu", 4242, 1, a + 1,
			     e - a - 1, 0);
			snprintf(name, sizeof(name), "model.py(%d): forward", (int)range(10, 13));
			span(f, "python_function", name, 4242, 1, a, e - a + 1, 0);
			t = e + 2;
		}
		snprintf(name, sizeof(name), "ProfilerStep#%d", st);
		span(f, "step", name, 4242, 1, s0, t - s0 + 1, 0);
		fprintf(f,
			",\n{\"ph\": \"C\", \"name\": \"gpu_mem\", \"pid\": 4242, \"tid\": 1, "
			"\"ts\": %" PRId64 ", \"args\": {\"bytes\": %d}}",
			t, (int)range(1000, 9000));
		gen.counters++;
		t += range(5, 50);
	}
	for (int64_t u = 1003; u < t; u += range(50, 300)) {
		int64_t d = range(10, 40);

		span(f, "cpu_op", "DataLoader::next", 4242, 2, u, d, 0);
		span(f, "python_function", "data.py(88): __getitem__", 4242, 2, u + 2, d - 4, 0);
	}
	fputs("\n]}\n", f);
	fclose(f);
}

/* analyze TRACE --format F @opts == report SNAP --format F @opts, SNAP written by
 * analyze TRACE --format msgpack @aopts. Returns the output (the caller frees). */
static char *same_both_ways(const char *trace, const char *format, const char *aopts,
			    const char *opts)
{
	char snap[512], *direct, *via, *err;
	size_t n1, n2, ne;

	snprintf(snap, sizeof(snap), "%s/snap.msgpack", dir);
	unlink(snap);
	assert_int_equal(run(&err, &ne, "%s analyze %s --format msgpack %s -o %s 2>&1", bin, trace,
			     aopts, snap),
			 0);
	free(err);
	/* msgpack: each analyze has its own created_realtime_ns, so the snapshot itself
	 * is the direct output, and re-encoding it must give it back byte for byte. */
	if (strcmp(format, "msgpack") == 0)
		assert_int_equal(run(&direct, &n1, "cat %s", snap), 0);
	else
		assert_int_equal(run(&direct, &n1, "%s analyze %s --format %s %s %s", bin, trace,
				     format, aopts, opts),
				 0);
	assert_int_equal(run(&via, &n2, "%s report %s --format %s %s", bin, snap, format, opts), 0);
	print_message("  %s %s %s: %zu bytes\n", format, aopts, opts, n1);
	if (n1 != n2 || memcmp(direct, via, n1) != 0) {
		size_t i = 0;

		while (i < n1 && i < n2 && direct[i] == via[i])
			i++;
		fail_msg("%s: analyze gives %zu bytes, report of the snapshot %zu; first "
			 "difference at byte %zu: \"%.80s\" vs \"%.80s\"",
			 format, n1, n2, i, direct + i, via + i);
	}
	free(via);
	return direct;
}

static bool has(const char *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool has(const char *s, const char *fmt, ...)
{
	char want[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(want, sizeof(want), fmt, ap);
	va_end(ap);
	if (strstr(s, want) == NULL)
		print_message("  missing: %s\n", want);
	return strstr(s, want) != NULL;
}

static unsigned count(const char *s, const char *needle)
{
	unsigned n = 0;

	for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

static int setup(void **state)
{
	const char *b = getenv("RP_BIN_DIR");

	(void)state;
	if (b == NULL)
		return 0;
	snprintf(bin, sizeof(bin), "%s/ringprof", b);
	snprintf(dir, sizeof(dir), "/tmp/rp_roundtrip_XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[512];

	(void)state;
	if (dir[0] == '\0')
		return 0;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* Every format, both ways, on the generated trace; and what they show is what the
 * generator wrote. */
static void test_roundtrip_generated(void **state)
{
	static const char *const formats[] = { "text", "json",	 "pstats", "folded",
					       "prom", "chrome", "gantt",  "msgpack" };
	char trace[512];

	(void)state;
	if (bin[0] == '\0')
		skip();
	snprintf(trace, sizeof(trace), "%s/trace.json", dir);
	write_trace(trace);
	for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
		char *out = same_both_ways(trace, formats[i], "", "");

		if (strcmp(formats[i], "json") == 0) {
			assert_true(has(out, "\"launches\":%u,\"kernels\":%u,\"other_device\":%u",
					gen.launches, gen.kernels, gen.memcpys));
			assert_true(has(out, "\"spans_seen\":%u,\"spans_kept\":%u", gen.spans,
					gen.spans));
			assert_true(has(out, "\"samples_seen\":%u,\"samples_kept\":%u",
					gen.counters, gen.counters));
			assert_true(has(out, "\"count\":%d", NSTEPS));
		}
		if (strcmp(formats[i], "chrome") == 0) /* every span, with its thread */
			assert_int_equal(count(out, "\"ph\":\"X\""), gen.spans);
		free(out);
	}
}

/* A recorder that wrapped, and the export options, both ways. */
static void test_roundtrip_wrapped_and_ranges(void **state)
{
	char trace[512], *out;

	(void)state;
	if (bin[0] == '\0')
		skip();
	snprintf(trace, sizeof(trace), "%s/trace.json", dir);
	write_trace(trace);
	out = same_both_ways(trace, "json", "--recorder-spans 40 --recorder-samples 5", "");
	assert_true(has(out, "\"spans_seen\":%u,\"spans_kept\":40,\"recorder_wrapped\":%u",
			gen.spans, gen.spans - 40));
	assert_true(has(out, "\"samples_seen\":%u,\"samples_kept\":5", gen.counters));
	free(out);
	out = same_both_ways(trace, "chrome", "--recorder-spans 40", "");
	assert_int_equal(count(out, "\"ph\":\"X\""), 40);
	free(out);
	free(same_both_ways(trace, "gantt", "--recorder-spans 40", ""));
	free(same_both_ways(trace, "chrome", "", "--steps 2:4"));
	free(same_both_ways(trace, "gantt", "", "--steps 0:0"));
	free(same_both_ways(trace, "chrome", "", "--from 1500000 --to 3000000"));
	free(same_both_ways(trace, "text", "", "--limit 5"));
}

/* The torch sample of the test data, both ways. */
static void test_roundtrip_torch_sample(void **state)
{
	const char *data = getenv("RP_TESTDATA");
	char trace[512];
	struct stat st;

	(void)state;
	if (bin[0] == '\0' || data == NULL)
		skip();
	snprintf(trace, sizeof(trace), "%s/torch/cpu_legacy_trace.json", data);
	if (stat(trace, &st) != 0)
		skip();
	free(same_both_ways(trace, "json", "", ""));
	free(same_both_ways(trace, "text", "", ""));
	free(same_both_ways(trace, "chrome", "", ""));
	free(same_both_ways(trace, "gantt", "", ""));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip_generated),
		cmocka_unit_test(test_roundtrip_wrapped_and_ranges),
		cmocka_unit_test(test_roundtrip_torch_sample),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
