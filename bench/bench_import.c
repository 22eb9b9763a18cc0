// SPDX-License-Identifier: MIT
/*
 * bench_import: how fast the trace importers read, against the floor of getting the
 * bytes at all, measured in the same run.
 *
 * For each file given (a Chrome trace with --chrome, an agent-toolkit trace with
 * --nat; plain or gzip), the best of --runs runs (the machine may be shared: the
 * best run is the one least disturbed) of:
 *   read        the file read in 1 MiB blocks, or inflated through zlib for .gz:
 *               the baseline, what any reader pays before parsing;
 *   chrome      rp_chrome_read() with a callback that only counts (the reader);
 *               rp_import_chrome() into an engine (reader, importer, engine);
 *   nat         rp_import_nat() into the toolkit analysis only (as `analyze --format
 *               aiq`: reader and request building), then rp_aiq_finish() and the
 *               rendering of its result (to /dev/null) each timed on their own;
 *               rp_import_nat() into an engine only (as `analyze --format json`).
 * Rates are in MB/s (10^6 bytes) of JSON text, decompressed, so plain and gzip
 * figures compare; the page cache is warm after the first run. With --cpu, the
 * times are the process's CPU time (all threads), not wall-clock time: steadier
 * on a shared machine, and what the second thread costs. With --json, one JSON
 * object.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zlib.h>

#include "aiq.h"
#include "engine.h"
#include "import_chrome.h"
#include "import_nat.h"
#include "render.h"
#include "trace_chrome.h"

struct opts {
	const char *chrome, *nat;
	unsigned runs;
	bool json;
};

static clockid_t clock_id = CLOCK_MONOTONIC; /* --cpu: CLOCK_PROCESS_CPUTIME_ID */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(clock_id, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what, const char *why)
{
	fprintf(stderr, "bench_import: %s: %s\n", what, why);
	exit(1);
}

/* The baseline: the JSON text's bytes, read (plain) or inflated (gzip); its size. */
static double read_floor(const char *path, uint64_t *text)
{
	static char buf[1 << 20];
	double t0 = now_s();
	gzFile gz = gzopen(path, "rb");
	int n;

	if (gz == NULL)
		die(path, strerror(errno));
	gzbuffer(gz, 1 << 20);
	*text = 0;
	while ((n = gzread(gz, buf, sizeof(buf))) > 0)
		*text += (uint64_t)n;
	if (n < 0)
		die(path, "read error");
	gzclose(gz);
	return now_s() - t0;
}

static int count_ev(void *ctx, const struct rp_chrome_ev *ev)
{
	(void)ev;
	(*(uint64_t *)ctx)++;
	return 0;
}

static double chrome_reader(const char *path)
{
	char why[RP_WHY_MAX];
	uint64_t n = 0;
	double t0 = now_s();

	if (rp_chrome_read(path, count_ev, NULL, &n, NULL, why) != 0)
		die(path, why);
	return now_s() - t0;
}

static struct rp_engine *engine(void)
{
	struct rp_engine_cfg cfg;
	struct rp_engine *e;

	rp_engine_cfg_default(&cfg);
	if (rp_engine_open(&cfg, &e) != 0)
		die("engine", "cannot open");
	return e;
}

static double chrome_import(const char *path)
{
	struct rp_engine *e = engine();
	char why[RP_WHY_MAX];
	double t0 = now_s(), t;

	if (rp_import_chrome(e, path, NULL, NULL, why) != 0)
		die(path, why);
	t = now_s() - t0;
	rp_engine_close(e);
	return t;
}

/* Into the toolkit analysis: import, finish and render timed apart (@t[3]). */
static void nat_aiq(const char *path, double t[3])
{
	char why[RP_WHY_MAX];
	struct rp_aiq a;
	FILE *null = fopen("/dev/null", "w");
	double t0 = now_s();

	if (null == NULL || rp_aiq_init(&a, 0) != 0)
		die(path, "setup");
	if (rp_import_nat(NULL, &a, NULL, path, NULL, NULL, NULL, why) != 0)
		die(path, why);
	t[0] = now_s() - t0;
	t0 = now_s();
	if (rp_aiq_finish(&a) != 0)
		die(path, "out of memory");
	t[1] = now_s() - t0;
	t0 = now_s();
	rp_render_aiq_json(&a, null);
	fflush(null);
	t[2] = now_s() - t0;
	fclose(null);
	rp_aiq_free(&a);
}

static double nat_engine(const char *path)
{
	struct rp_engine *e = engine();
	char why[RP_WHY_MAX];
	double t0 = now_s(), t;

	if (rp_import_nat(e, NULL, NULL, path, NULL, NULL, NULL, why) != 0)
		die(path, why);
	t = now_s() - t0;
	rp_engine_close(e);
	return t;
}

static double min_d(double a, double b)
{
	return a < b ? a : b;
}

static void parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{ "chrome", 1, NULL, 'c' }, { "nat", 1, NULL, 'n' }, { "runs", 1, NULL, 'r' },
		{ "json", 0, NULL, 'j' },   { "cpu", 0, NULL, 'u' }, { NULL, 0, NULL, 0 },
	};
	int c;

	*o = (struct opts){ .runs = 3 };
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'c': o->chrome = optarg; break;
		case 'n': o->nat = optarg; break;
		case 'r': o->runs = (unsigned)atoi(optarg) > 0 ? (unsigned)atoi(optarg) : 1; break;
		case 'j': o->json = true; break;
		case 'u': clock_id = CLOCK_PROCESS_CPUTIME_ID; break;
		default:
			fputs("usage: bench_import [--chrome TRACE] [--nat TRACE] [--runs N] "
			      "[--cpu] "
			      "[--json]\n",
			      stderr);
			exit(2);
		}
	}
	if (o->chrome == NULL && o->nat == NULL)
		die("usage", "give --chrome TRACE and/or --nat TRACE");
}

int main(int argc, char **argv)
{
	struct opts o;
	double c_floor = 1e9, c_read = 1e9, c_imp = 1e9, n_floor = 1e9, n_eng = 1e9;
	double n_aiq[3] = { 1e9, 1e9, 1e9 }, t[3];
	uint64_t c_text = 0, n_text = 0;
	const char *sep = "";

	parse_opts(argc, argv, &o);
	for (unsigned r = 0; r < o.runs; r++) {
		if (o.chrome != NULL) {
			c_floor = min_d(c_floor, read_floor(o.chrome, &c_text));
			c_read = min_d(c_read, chrome_reader(o.chrome));
			c_imp = min_d(c_imp, chrome_import(o.chrome));
		}
		if (o.nat != NULL) {
			n_floor = min_d(n_floor, read_floor(o.nat, &n_text));
			nat_aiq(o.nat, t);
			for (int i = 0; i < 3; i++)
				n_aiq[i] = min_d(n_aiq[i], t[i]);
			n_eng = min_d(n_eng, nat_engine(o.nat));
		}
	}
	if (o.json) {
		fputs("{", stdout);
		if (o.chrome != NULL) {
			printf("\"chrome_text_bytes\": %llu, \"chrome_floor_mb_per_s\": %.0f, "
			       "\"chrome_read_mb_per_s\": %.0f, \"chrome_import_mb_per_s\": %.0f",
			       (unsigned long long)c_text, c_text / c_floor / 1e6,
			       c_text / c_read / 1e6, c_text / c_imp / 1e6);
			sep = ", ";
		}
		if (o.nat != NULL)
			printf("%s\"nat_text_bytes\": %llu, \"nat_floor_mb_per_s\": %.0f, "
			       "\"nat_aiq_mb_per_s\": %.0f, \"nat_engine_mb_per_s\": %.0f, "
			       "\"aiq_import_s\": %.3f, \"aiq_finish_s\": %.3f, \"aiq_render_s\": "
			       "%.3f",
			       sep, (unsigned long long)n_text, n_text / n_floor / 1e6,
			       n_text / n_aiq[0] / 1e6, n_text / n_eng / 1e6, n_aiq[0], n_aiq[1],
			       n_aiq[2]);
		puts("}");
		return 0;
	}
	printf("bench_import: best of %u runs; MB/s of JSON text (decompressed)\n", o.runs);
	printf("%-46s %10s %10s %9s\n", "figure", "seconds", "MB/s", "vs read");
	if (o.chrome != NULL) {
		printf("%s (%.1f MB of JSON)\n", o.chrome, c_text / 1e6);
		printf("%-46s %10.3f %10.0f %9.2f\n", "  read (baseline)", c_floor,
		       c_text / c_floor / 1e6, 1.0);
		printf("%-46s %10.3f %10.0f %9.2f\n", "  rp_chrome_read (reader alone)", c_read,
		       c_text / c_read / 1e6, c_floor / c_read);
		printf("%-46s %10.3f %10.0f %9.2f\n", "  rp_import_chrome (reader + engine)", c_imp,
		       c_text / c_imp / 1e6, c_floor / c_imp);
	}
	if (o.nat != NULL) {
		printf("%s (%.1f MB of JSON)\n", o.nat, n_text / 1e6);
		printf("%-46s %10.3f %10.0f %9.2f\n", "  read (baseline)", n_floor,
		       n_text / n_floor / 1e6, 1.0);
		printf("%-46s %10.3f %10.0f %9.2f\n", "  rp_import_nat into the toolkit analysis",
		       n_aiq[0], n_text / n_aiq[0] / 1e6, n_floor / n_aiq[0]);
		printf("%-46s %10.3f\n", "    + rp_aiq_finish", n_aiq[1]);
		printf("%-46s %10.3f\n", "    + its JSON rendered (to /dev/null)", n_aiq[2]);
		printf("%-46s %10.3f %10.0f %9.2f\n", "  rp_import_nat into an engine", n_eng,
		       n_text / n_eng / 1e6, n_floor / n_eng);
	}
	return 0;
}
