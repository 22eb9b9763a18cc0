// SPDX-License-Identifier: MIT
/*
 * test_prom_fleet: fleet percentiles through a real Prometheus server. Two engines
 * (`ringprof run --prometheus`) each take a demo load (400 requests/s for 10 s, 8 workers),
 * one at --time-scale 1, the other at 2 (different latencies); a Prometheus (Debian's, /usr/bin/prometheus, temp config and
 * data dir, 1 s scrape interval) scrapes both. Once the loads have ended and it counts
 * every call the engines count, its HTTP API answers
 *	histogram_quantile(q, sum by (le) (ringprof_span_duration_seconds_bucket{name=N}))
 * over the cumulative buckets, for q = 0.5 and 0.99 and N = decode_step and prefill. The
 * oracle is independent of /metrics: the two engines' final snapshots merged
 * (`ringprof merge A B`, sketches added bucket by bucket) and their JSON report's p50_ns
 * and p99_ns for N. Each answer must lie within 3% of it (the classic layout's
 * interpolation error and the sketch's 1%: render_prom.c). Skipped (77) without
 * prometheus. About 20 s.
 */
#include "support.h"

#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char bin_dir[600], dir[40];
static double promql_seen[2][2][2]; /* [form][name][quantile] */

/* The two forms of the fleet quantile: job "ringprof" negotiates protobuf (native
 * histograms), job "classic" asks for the text (?format=text): classic buckets. */
static const char *const forms[2] = { "native", "classic" };

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

static pid_t spawn(const char *session, char *const argv[], const char *log)
{
	pid_t p = fork();

	if (p == 0) {
		if (log != NULL && freopen(log, "w", stdout) == NULL)
			_exit(126);
		if (log != NULL && freopen(log, "a", stderr) == NULL)
			_exit(126);
		if (session != NULL)
			setenv("RINGPROF_SESSION", session, 1);
		execv(argv[0], argv);
		_exit(127);
	}
	assert_true(p > 0);
	return p;
}

static void wait_ok(pid_t p)
{
	int status;

	assert_int_equal(waitpid(p, &status, 0), p);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* The value of the instant query @query from Prometheus's API; -1: none. */
static double prom_value(int port, const char *query)
{
	char *out = NULL, *v;
	double r = -1;

	if (rp_test_sh(&out, NULL,
		       "curl -sf http://127.0.0.1:%d/api/v1/query --data-urlencode 'query=%s'",
		       port, query) == 0 &&
	    (v = strstr(out, "\"value\":[")) != NULL && (v = strchr(v, ',')) != NULL && v[1] == '"')
		r = strtod(v + 2, NULL);
	free(out);
	return r;
}

/* histogram_quantile(@q) of @name over both engines in @form, from Prometheus's API; -1:
 * none. */
static double promql(int port, int form, const char *q, const char *name)
{
	char query[200];

	if (form)
		snprintf(query, sizeof(query),
			 "histogram_quantile(%s, sum by (le) "
			 "(ringprof_span_duration_seconds_bucket{job=\"classic\",name=\"%s\"}))",
			 q, name);
	else
		snprintf(query, sizeof(query),
			 "histogram_quantile(%s, "
			 "sum(ringprof_span_duration_seconds{job=\"ringprof\",name=\"%s\"}))",
			 q, name);
	return prom_value(port, query);
}

/* The completed calls of @name over both engines in @form, as Prometheus has them. */
static double prom_count(int port, int form, const char *name)
{
	char query[200];

	if (form)
		snprintf(query, sizeof(query),
			 "sum(ringprof_span_duration_seconds_count{job=\"classic\",name=\"%s\"})",
			 name);
	else
		snprintf(query, sizeof(query),
			 "histogram_count(sum(ringprof_span_duration_seconds{job=\"ringprof\","
			 "name=\"%s\"}))",
			 name);
	return prom_value(port, query);
}

/* The calls of @name in a snapshot taken now of the engine of @session. */
static double calls_now(const char *eng, const char *session, const char *name)
{
	char *path = NULL, *json = NULL, pat[128];
	const char *f, *k;
	double n;

	assert_int_equal(rp_test_sh(&path, NULL, "%s snapshot --session %s --timeout-ms 60000", eng,
				    session), 0);
	path[strcspn(path, "\n")] = '\0';
	assert_int_equal(rp_test_sh(&json, NULL, "%s report %s --format json", eng, path), 0);
	snprintf(pat, sizeof(pat), "\"name\":\"%s\",\"category\"", name);
	f = strstr(json, pat);
	assert_non_null(f);
	k = strstr(f, "\"calls\":");
	assert_non_null(k);
	n = strtod(k + strlen("\"calls\":"), NULL);
	free(json);
	free(path);
	return n;
}

/* @key ("p50_ns") of function @name in the JSON report @json, in seconds. */
static double truth(const char *json, const char *name, const char *key)
{
	char pat[128];
	const char *f, *k;

	snprintf(pat, sizeof(pat), "\"name\":\"%s\",\"category\"", name);
	f = strstr(json, pat);
	assert_non_null(f);
	snprintf(pat, sizeof(pat), "\"%s\":", key);
	k = strstr(f, pat);
	assert_non_null(k);
	return strtod(k + strlen(pat), NULL) * 1e-9;
}

static void test_prom_fleet_quantiles(void **state)
{
	static const char *const names[2] = { "decode_step", "prefill" };
	static const char *const qs[2] = { "0.5", "0.99" };
	static const char *const keys[2] = { "p50_ns", "p99_ns" };
	char eng[700], demo[700], addr[2][40], sess[2][40], sock[200], cfg[80], data[80], log[80];
	char arg_cfg[120], arg_data[120], arg_web[60];
	int eport[2], pport;
	pid_t e[2], d[2], p;
	char *json = NULL;
	FILE *f;

	(void)state;
	snprintf(eng, sizeof(eng), "%s/ringprof", bin_dir);
	snprintf(demo, sizeof(demo), "%s/ringprof-demo", bin_dir);
	for (int i = 0; i < 2; i++) {
		char *eargv[] = { eng, "run",	  "--session",	  sess[i], "--snapshot-dir",
				  dir, "--quiet", "--prometheus", addr[i], NULL };

		eport[i] = rp_test_free_port();
		assert_true(eport[i] > 0);
		snprintf(sess[i], sizeof(sess[i]), "t_prom_fleet%d_%d", i, (int)getpid());
		snprintf(addr[i], sizeof(addr[i]), "127.0.0.1:%d", eport[i]);
		e[i] = spawn(NULL, eargv, NULL);
	}
	do
		pport = rp_test_free_port();
	while (pport == eport[0] || pport == eport[1]);
	snprintf(cfg, sizeof(cfg), "%s/prometheus.yml", dir);
	snprintf(data, sizeof(data), "%s/data", dir);
	snprintf(log, sizeof(log), "%s/prometheus.log", dir);
	f = fopen(cfg, "w");
	assert_non_null(f);
	fprintf(f,
		"global: {scrape_interval: 1s, scrape_timeout: 1s}\n"
		"scrape_configs:\n"
		"  - job_name: ringprof\n"
		"    static_configs: [{targets: ['%s', '%s']}]\n"
		"  - job_name: classic\n"
		"    params: {format: [text]}\n"
		"    static_configs: [{targets: ['%s', '%s']}]\n",
		addr[0], addr[1], addr[0], addr[1]);
	assert_int_equal(fclose(f), 0);
	snprintf(arg_cfg, sizeof(arg_cfg), "--config.file=%s", cfg);
	snprintf(arg_data, sizeof(arg_data), "--storage.tsdb.path=%s", data);
	snprintf(arg_web, sizeof(arg_web), "--web.listen-address=127.0.0.1:%d", pport);
	{
		char prom[] = "/usr/bin/prometheus";
		char feat[] = "--enable-feature=native-histograms";
		char *pargv[] = { prom, arg_cfg, arg_data, arg_web, feat, NULL };

		p = spawn(NULL, pargv, log);
	}
	for (int i = 0; i < 2; i++) {
		snprintf(sock, sizeof(sock), "%s/ringprof-%s.sock", dir, sess[i]);
		assert_int_equal(rp_test_engine_wait(sess[i], e[i], sock), -1);
	}
	for (int i = 0; i < 2; i++) {
		char *dargv[] = { demo,		 "--duration",	 "10",		"--rate",
				  "400",	 "--threads",	 "8",		"--seed",
				  i ? "2" : "1", "--time-scale", i ? "2" : "1", "--quiet",
				  NULL };

		d[i] = spawn(sess[i], dargv, "/dev/null");
	}
	for (int i = 0; i < 2; i++)
		wait_ok(d[i]);
	/* Every span is ended and drained (a producer's exit waits for it). Prometheus
	 * has it all once its count of each name's calls, over both engines, is the
	 * engines' own: not after a pause, as a scrape can come late or time out (then
	 * the target's series go stale) on a loaded machine. The quantiles are read
	 * between two reads of that count. Up to 60 s: a hang, not a slow machine. */
	for (int n = 0; n < 2; n++) {
		double want = calls_now(eng, sess[0], names[n]) + calls_now(eng, sess[1], names[n]);

		assert_true(want > 0);
		for (int m = 0; m < 2; m++)
			for (int t = 0;; t++, sleep_ms(500)) {
				double got = prom_count(pport, m, names[n]);

				for (int k = 0; k < 2 && got == want; k++)
					promql_seen[m][n][k] = promql(pport, m, qs[k], names[n]);
				if (got == want && prom_count(pport, m, names[n]) == want)
					break;
				if (t == 120)
					fail_msg("%s %s: Prometheus counts %.0f calls, the engines %.0f",
						 forms[m], names[n], got, want);
			}
		for (int m = 0; m < 2; m++)
			for (int k = 0; k < 2; k++)
				assert_true(promql_seen[m][n][k] > 0);
	}
	kill(p, SIGTERM);
	for (int i = 0; i < 2; i++) {
		kill(e[i], SIGINT);
		wait_ok(e[i]);
	}
	waitpid(p, NULL, 0);
	assert_int_equal(
		rp_test_sh(NULL, NULL,
			   "%s merge %s/ringprof-%s.msgpack %s/ringprof-%s.msgpack -o %s/m.msgpack",
			   eng, dir, sess[0], dir, sess[1], dir),
		0);
	assert_int_equal(rp_test_sh(&json, NULL, "%s report %s/m.msgpack --format json", eng, dir),
			 0);
	for (int m = 0; m < 2; m++)
		for (int n = 0; n < 2; n++)
			for (int k = 0; k < 2; k++) {
				double t = truth(json, names[n], keys[k]), v = promql_seen[m][n][k];
				double err = (v - t) / t;

				printf("%-7s %-12s %s: PromQL %.6f s, merged snapshot %.6f s, "
				       "%+.2f%%\n",
				       forms[m], names[n], qs[k], v, t, 100 * err);
				assert_true(t > 0);
				assert_true(err < 0.03 && err > -0.03);
			}
	free(json);
}

int main(void)
{
	const char *b = getenv("RP_BIN_DIR");
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_prom_fleet_quantiles),
	};
	char cmd[80];
	int rc;

	if (access("/usr/bin/prometheus", X_OK) != 0 ||
	    rp_test_sh(NULL, NULL, "command -v curl >/dev/null") != 0) {
		fprintf(stderr,
			"prometheus or curl not found (Debian: prometheus, curl): skipped\n");
		return 77;
	}
	if (b == NULL) {
		fprintf(stderr, "RP_BIN_DIR is not set (run through ctest)\n");
		return 1;
	}
	snprintf(bin_dir, sizeof(bin_dir), "%s", b);
	snprintf(dir, sizeof(dir), "/tmp/rp_test_prom_fleet.XXXXXX");
	if (mkdtemp(dir) == NULL)
		return 1;
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		return 1;
	return rc;
}
