// SPDX-License-Identifier: MIT
/*
 * test_promtool: the Prometheus exposition as Prometheus itself judges it. The
 * oracle is the real `promtool check metrics` (Debian's prometheus package; the
 * test is skipped, exit 77, where promtool is missing) and the summary convention
 * that rate() relies on: _count and _sum never fall.
 *
 * One scenario, end to end: `ringprof run --prometheus-window 10s` under the demo
 * (200 requests/s for 13 s); /metrics is scraped at 2, 7 and 12 s (three scrapes 5 s
 * apart under load): every scrape passes promtool, and every _bucket, _count and _sum
 * series of a scrape is in the next one with a value at least as large (histogram and
 * summary). Then traffic stops:
 * 11 s later the 10 s window has emptied (every window quantile NaN, the wall clock
 * moved on without events) while _count and _sum keep their totals. Last, the final
 * snapshot through `ringprof report --format prom` passes promtool too.
 */
#include "support.h"

#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

static char bin_dir[600], dir[40], session[80];
static int port;

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sleep_until(uint64_t t0, unsigned ms)
{
	while (now_ms() < t0 + ms) {
		struct timespec ts = { .tv_nsec = 20 * 1000000 };

		nanosleep(&ts, NULL);
	}
}

/* GET /metrics: the body (malloc'ed), after a 200 status line. */
static char *scrape(void)
{
	static const char req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	struct timeval tv = { .tv_sec = 10 };
	size_t cap = 1 << 22, len = 0;
	char *buf = malloc(cap), *body;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ssize_t n;

	assert_non_null(buf);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	assert_int_equal(send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL), (ssize_t)sizeof(req) - 1);
	while (len + 1 < cap && (n = recv(fd, buf + len, cap - 1 - len, 0)) > 0)
		len += (size_t)n;
	close(fd);
	buf[len] = '\0';
	assert_true(strncmp(buf, "HTTP/1.1 200", 12) == 0);
	body = strstr(buf, "\r\n\r\n");
	assert_non_null(body);
	body = strdup(body + 4);
	free(buf);
	return body;
}

/* promtool's verdict on @text: its exit status (0: clean), problems on stderr. */
static int promtool(const char *text, const char *what)
{
	char path[80];
	FILE *f;
	int rc;

	snprintf(path, sizeof(path), "%s/%s.prom", dir, what);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
	rc = rp_test_sh(NULL, NULL, "promtool check metrics < %s 1>&2", path);
	if (rc != 0)
		fprintf(stderr, "promtool check metrics on %s: exit %d\n", what, rc);
	return rc;
}

struct series {
	char key[512]; /* metric name and labels */
	double v;
};

/* The samples of ringprof_span_duration_@suffix ("instance_seconds": the quantiles). */
static unsigned parse(const char *text, struct series **out, const char *suffix)
{
	size_t m = strlen("ringprof_span_duration_"), k = strlen(suffix);
	struct series *v = NULL;
	unsigned n = 0, cap = 0;

	for (const char *line = text; *line;) {
		const char *end = strchrnul(line, '\n'), *sp = end;

		while (sp > line && *sp != ' ')
			sp--;
		if (strncmp(line, "ringprof_span_duration_", m) == 0 &&
		    strncmp(line + m, suffix, k) == 0 && line[m + k] == '{') {
			assert_true((size_t)(sp - line) < sizeof(v->key));
			if (n == cap) {
				cap = cap ? cap * 2 : 64;
				v = realloc(v, cap * sizeof(*v));
				assert_non_null(v);
			}
			memcpy(v[n].key, line, (size_t)(sp - line));
			v[n].key[sp - line] = '\0';
			v[n].v = strtod(sp + 1, NULL);
			n++;
		}
		line = *end ? end + 1 : end;
	}
	*out = v;
	return n;
}

/* Every histogram _bucket/_count/_sum series of @a is in @b with a value >= its value in
 * @a, and the summary's _count/_sum too. */
static void assert_non_decreasing(const char *a, const char *b)
{
	static const char *const sfx[5] = { "seconds_count", "seconds_sum", "seconds_bucket",
					    "instance_seconds_count", "instance_seconds_sum" };

	for (int k = 0; k < 5; k++) {
		struct series *x, *y;
		unsigned nx = parse(a, &x, sfx[k]), ny = parse(b, &y, sfx[k]);

		assert_true(nx > 0);
		for (unsigned i = 0; i < nx; i++) {
			unsigned j = 0;

			while (j < ny && strcmp(x[i].key, y[j].key) != 0)
				j++;
			if (j == ny || y[j].v < x[i].v)
				fail_msg("%s: %g then %s", x[i].key, x[i].v,
					 j == ny ? "missing" : "smaller");
		}
		free(x);
		free(y);
	}
}

static double sample(const char *text, const char *key)
{
	struct series *v;
	unsigned n = parse(text, &v, "seconds_count");
	double r = -1;

	for (unsigned i = 0; i < n; i++)
		if (strcmp(v[i].key, key) == 0)
			r = v[i].v;
	free(v);
	return r;
}

static pid_t spawn(char *const argv[])
{
	pid_t p = fork();

	if (p == 0) {
		setenv("RINGPROF_SESSION", session, 1);
		execv(argv[0], argv);
		_exit(127);
	}
	assert_true(p > 0);
	return p;
}

static void test_promtool_live_and_report(void **state)
{
	char eng[700], demo[700], addr[40], sock[200];
	char *eargv[] = { eng,	 "run",	    "--session",    session, "--snapshot-dir",
			  dir,	 "--quiet", "--prometheus", addr,    "--prometheus-window",
			  "10s", NULL };
	char *dargv[] = { demo, "--duration", "13", "--rate", "200", "--quiet", NULL };
	char *s[4], *text = NULL;
	struct series *q;
	unsigned nq, nan_q = 0;
	pid_t e, d;
	uint64_t t0;
	struct stat st;
	int status;

	(void)state;
	snprintf(eng, sizeof(eng), "%s/ringprof", bin_dir);
	snprintf(demo, sizeof(demo), "%s/ringprof-demo", bin_dir);
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
	snprintf(sock, sizeof(sock), "%s/ringprof-%s.sock", dir, session);
	e = spawn(eargv);
	for (t0 = now_ms(); stat(sock, &st) != 0; sleep_until(now_ms(), 20))
		assert_true(now_ms() < t0 + 10000);
	t0 = now_ms();
	d = spawn(dargv);
	for (int i = 0; i < 3; i++) {
		sleep_until(t0, 2000 + 5000 * (unsigned)i);
		s[i] = scrape();
		assert_int_equal(promtool(s[i], i == 0 ? "live0" : i == 1 ? "live1" : "live2"), 0);
		if (i > 0)
			assert_non_decreasing(s[i - 1], s[i]);
	}
	/* Traffic: the requests counted between the first and the last scrape. */
	assert_true(sample(s[2], "ringprof_span_duration_seconds_count{name=\"request\","
				 "category=\"REQUEST\"}") >
		    sample(s[0], "ringprof_span_duration_seconds_count{name=\"request\","
				 "category=\"REQUEST\"}") +
			    500);
	assert_int_equal(waitpid(d, &status, 0), d);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* 11 s without traffic: the 10 s window is empty, the totals stay. */
	sleep_until(now_ms(), 11000);
	s[3] = scrape();
	assert_int_equal(promtool(s[3], "idle"), 0);
	assert_non_decreasing(s[2], s[3]);
	nq = parse(s[3], &q, "instance_seconds");
	assert_true(nq > 0);
	for (unsigned i = 0; i < nq; i++)
		nan_q += isnan(q[i].v);
	assert_int_equal(nan_q, nq);
	free(q);
	/* The final snapshot through `ringprof report --format prom`. */
	kill(e, SIGINT);
	assert_int_equal(waitpid(e, &status, 0), e);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(rp_test_sh(&text, NULL, "%s report %s/ringprof-%s.msgpack --format prom",
				    eng, dir, session),
			 0);
	assert_int_equal(promtool(text, "report"), 0);
	assert_non_null(strstr(text, "ringprof_span_duration_seconds_count{name=\"request\""));
	free(text);
	for (int i = 0; i < 4; i++)
		free(s[i]);
}

int main(void)
{
	const char *b = getenv("RP_BIN_DIR"), *s = getenv("RINGPROF_SESSION");
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_promtool_live_and_report),
	};
	char cmd[200];
	int rc;

	if (rp_test_sh(NULL, NULL, "command -v promtool >/dev/null") != 0) {
		fprintf(stderr, "promtool not found (Debian: prometheus): skipped\n");
		return 77;
	}
	if (b == NULL) {
		fprintf(stderr, "RP_BIN_DIR is not set (run through ctest)\n");
		return 1;
	}
	snprintf(bin_dir, sizeof(bin_dir), "%s", b);
	snprintf(session, sizeof(session), "%s", s ? s : "t_test_promtool");
	snprintf(dir, sizeof(dir), "/tmp/rp_test_promtool.XXXXXX");
	if (mkdtemp(dir) == NULL || (port = rp_test_free_port()) < 0)
		return 1;
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		return 1;
	return rc;
}
