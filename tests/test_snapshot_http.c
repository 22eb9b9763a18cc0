// SPDX-License-Identifier: MIT
/*
 * test_snapshot_http: snapshots fetched over HTTP (docs/fleet.md). The group setup
 * spawns `ringprof run` (RP_BIN_DIR) on this test's session with a Prometheus
 * listener on a free loopback port and --http-token-file, and a second engine (another
 * session, no producers) with no token listening on every address (--prometheus-any).
 * This process is the producer, so the calls a snapshot must hold are known. Checked:
 * the token accepted, and refused (none, wrong, a prefix, another scheme) with 401; the
 * fetched snapshot is what a SIGUSR1 file holds (the same encoder's bytes, the same
 * figures); `ringprof snapshot --url` writes it; `ringprof merge` of two URLs; and with
 * no token, /snapshot answers loopback peers only (403 to another address of this
 * machine; skipped when it has none).
 */
#include "support.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "snapshot.h"

#define TOKEN "s3cr3t-t0ken-for-the-fleet"

static char bin[600], dir[40], session[40], token_file[80];
static pid_t engine, engine_b;
static int port, port_b;
static uint32_t id_alpha, id_beta;
static unsigned n_alpha, n_beta;

static void emit(unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		rp_begin(id_alpha);
		rp_begin(id_beta);
		rp_end(id_beta);
		rp_end(id_alpha);
	}
	n_alpha += n;
	n_beta += n;
}

/* An HTTP exchange with @addr:@p; the whole response (malloc'ed), *@len its length. */
static char *http_at(in_addr_t addr, int p, const char *req, size_t *len)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)p) };
	struct timeval tv = { .tv_sec = 10 };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	size_t cap = 1 << 24, n = 0;
	char *buf = malloc(cap);
	ssize_t got;

	assert_non_null(buf);
	a.sin_addr.s_addr = addr;
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	assert_int_equal(send(fd, req, strlen(req), MSG_NOSIGNAL), (ssize_t)strlen(req));
	while (n + 1 < cap && (got = recv(fd, buf + n, cap - 1 - n, 0)) > 0)
		n += (size_t)got;
	buf[n] = '\0';
	close(fd);
	*len = n;
	return buf;
}

static char *http(const char *req, size_t *len)
{
	return http_at(htonl(INADDR_LOOPBACK), port, req, len);
}

/* GET /snapshot with the header line @auth ("" for none): the status code. */
static int get_status(const char *auth)
{
	char req[512], *r;
	size_t len;
	int st;

	snprintf(req, sizeof(req), "GET /snapshot HTTP/1.1\r\nHost: x\r\n%s\r\n", auth);
	r = http(req, &len);
	assert_true(len > 12);
	st = atoi(r + 9);
	free(r);
	return st;
}

/* The body of a 200 reply @r of @len bytes; *@blen its length. */
static const char *body_of(const char *r, size_t len, size_t *blen)
{
	const char *e = strstr(r, "\r\n\r\n");

	assert_non_null(e);
	assert_memory_equal(r, "HTTP/1.1 200 OK", 15);
	assert_non_null(strstr(r, "Content-Type: application/vnd.msgpack"));
	*blen = len - (size_t)(e + 4 - r);
	return e + 4;
}

static const struct rp_report_fn *fn_named(const struct rp_report *r, const char *name)
{
	for (uint32_t i = 0; i < r->n_fns; i++)
		if (strcmp(r->fns[i].name, name) == 0)
			return &r->fns[i];
	return NULL;
}

static bool caught_up(const struct rp_report *r)
{
	const struct rp_report_fn *a = fn_named(r, "alpha"), *b = fn_named(r, "beta");

	return a && b && a->calls == n_alpha && b->calls == n_beta;
}

/* A fetched snapshot holding every call made so far. */
static void fetch_caught_up(struct rp_report *r)
{
	const char *auth = "Authorization: Bearer " TOKEN "\r\n";
	uint64_t end = rp_test_now_ms() + 20000;
	char req[256], why[RP_WHY_MAX], *raw;
	const char *b;
	size_t len, blen;

	snprintf(req, sizeof(req), "GET /snapshot HTTP/1.1\r\nHost: x\r\n%s\r\n", auth);
	for (;;) {
		raw = http(req, &len);
		b = body_of(raw, len, &blen);
		if (rp_snapshot_decode(b, blen, r, why) != 0)
			fail_msg("decode: %s", why);
		free(raw);
		if (caught_up(r))
			return;
		assert_true(rp_test_now_ms() < end);
		rp_report_free(r);
		rp_test_sleep_ms(50);
	}
}

static pid_t spawn(const char *sess, const char *addr, const char *tok, bool any)
{
	return rp_test_engine_spawn(bin, sess, dir, NULL, NULL, "--quiet", "--prometheus", addr,
				    any ? "--prometheus-any" : "--quiet",
				    tok ? "--http-token-file" : "--quiet", tok ? tok : "--quiet",
				    (char *)NULL);
}

/* Until the engine of @sess runs and serves (its socket is there). */
static int wait_sock(const char *sess, pid_t pid)
{
	char path[200];

	snprintf(path, sizeof(path), "%s/ringprof-%s.sock", dir, sess);
	return rp_test_engine_wait(sess, pid, path) == -1 ? 0 : -1;
}

static int setup(void **state)
{
	const char *b = getenv("RP_BIN_DIR"), *s = getenv("RINGPROF_SESSION");
	char addr[64], addr_b[64], sess_b[48];
	FILE *f;

	(void)state;
	if (b == NULL) {
		fprintf(stderr, "RP_BIN_DIR is not set (run through ctest)\n");
		return -1;
	}
	snprintf(bin, sizeof(bin), "%s/ringprof", b);
	snprintf(session, sizeof(session), "%s", s ? s : "t_test_snapshot_http");
	snprintf(sess_b, sizeof(sess_b), "%.30s_b", session);
	snprintf(dir, sizeof(dir), "/tmp/rp_test_shttp.XXXXXX");
	if (mkdtemp(dir) == NULL)
		return -1;
	snprintf(token_file, sizeof(token_file), "%s/token", dir);
	f = fopen(token_file, "w");
	if (f == NULL || fputs(TOKEN "\n", f) < 0 || fclose(f) != 0)
		return -1;
	port = rp_test_free_port();
	port_b = rp_test_free_port();
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
	snprintf(addr_b, sizeof(addr_b), "0.0.0.0:%d", port_b);
	id_alpha = rp_intern("alpha", "A", "test_snapshot_http.c", 1);
	id_beta = rp_intern("beta", "B", "test_snapshot_http.c", 2);
	engine = spawn(session, addr, token_file, false);
	engine_b = spawn(sess_b, addr_b, NULL, true);
	if (wait_sock(session, engine) != 0 || wait_sock(sess_b, engine_b) != 0)
		return -1;
	return 0;
}

static int teardown(void **state)
{
	int st = 0, st_b = 0;
	char cmd[100];

	(void)state;
	if (engine > 0)
		kill(engine, SIGTERM), waitpid(engine, &st, 0);
	if (engine_b > 0)
		kill(engine_b, SIGTERM), waitpid(engine_b, &st_b, 0);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		return -1;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 && WIFEXITED(st_b) &&
			       WEXITSTATUS(st_b) == 0
		       ? 0
		       : -1;
}

/* The token opens /snapshot; none, a wrong one, a prefix of it or another scheme: 401. */
static void test_snapshot_http_token(void **state)
{
	char *r;
	size_t len;

	(void)state;
	emit(10);
	assert_int_equal(get_status("Authorization: Bearer " TOKEN "\r\n"), 200);
	assert_int_equal(get_status("authorization:   bearer " TOKEN "  \r\n"), 200);
	assert_int_equal(get_status(""), 401);
	assert_int_equal(get_status("Authorization: Bearer wrong-token-of-same-len!!\r\n"), 401);
	assert_int_equal(get_status("Authorization: Bearer s3cr3t\r\n"), 401);
	assert_int_equal(get_status("Authorization: Bearer " TOKEN "x\r\n"), 401);
	assert_int_equal(get_status("Authorization: Basic " TOKEN "\r\n"), 401);
	r = http("GET /snapshot HTTP/1.1\r\n\r\n", &len);
	assert_non_null(strstr(r, "WWW-Authenticate: Bearer"));
	free(r);
	/* /metrics is as it was: no token needed */
	r = http("GET /metrics HTTP/1.1\r\n\r\n", &len);
	assert_memory_equal(r, "HTTP/1.1 200 OK", 15);
	/* the six refusals above, counted */
	assert_non_null(strstr(r, "\nringprof_serve_unauthorized_total 6\n"));
	free(r);
}

/* Re-encoded by this encoder, @b[0..n) comes out byte for byte: this schema, no more. */
static void assert_this_schema(const char *b, size_t n)
{
	struct rp_membuf m = { 0 };
	char why[RP_WHY_MAX];
	struct rp_report r;

	assert_int_equal(rp_snapshot_decode(b, n, &r, why), 0);
	assert_int_equal(r.version_major, RP_REPORT_VERSION_MAJOR);
	assert_int_equal(r.version_minor, RP_REPORT_VERSION_MINOR);
	assert_int_equal(rp_snapshot_encode(&r, rp_membuf_sink, &m), 0);
	assert_int_equal(m.len, n);
	assert_memory_equal(m.data, b, n);
	rp_membuf_free(&m);
	rp_report_free(&r);
}

/* GET /snapshot is the SIGUSR1 file's schema and figures. */
static void test_snapshot_http_equals_sigusr1(void **state)
{
	char path[200], why[RP_WHY_MAX], req[256], *raw, *file;
	struct rp_report r, f;
	struct stat before = { 0 }, now;
	uint64_t end;
	size_t len, blen, flen;
	const char *b;

	(void)state;
	emit(25);
	fetch_caught_up(&r);
	snprintf(path, sizeof(path), "%s/ringprof-%s.msgpack", dir, session);
	stat(path, &before);
	assert_int_equal(kill(engine, SIGUSR1), 0);
	for (end = rp_test_now_ms() + 10000;; rp_test_sleep_ms(20)) {
		if (stat(path, &now) == 0 && (now.st_mtim.tv_nsec != before.st_mtim.tv_nsec ||
					      now.st_mtim.tv_sec != before.st_mtim.tv_sec ||
					      now.st_ino != before.st_ino))
			break;
		assert_true(rp_test_now_ms() < end);
	}
	file = rp_test_slurp(path, &flen);
	if (rp_snapshot_decode(file, flen, &f, why) != 0)
		fail_msg("%s: %s", path, why);
	assert_true(caught_up(&f));
	assert_this_schema(file, flen);
	snprintf(req, sizeof(req),
		 "GET /snapshot HTTP/1.1\r\nAuthorization: Bearer " TOKEN "\r\n\r\n");
	raw = http(req, &len);
	b = body_of(raw, len, &blen);
	assert_this_schema(b, blen);
	assert_int_equal(r.n_fns, f.n_fns);
	assert_int_equal(r.n_windows, f.n_windows);
	assert_int_equal(r.caps.max_names, f.caps.max_names);
	assert_string_equal(r.sources[0].host, f.sources[0].host);
	assert_string_equal(r.sources[0].boot_id, f.sources[0].boot_id);
	assert_true(r.sources[0].host[0] != '\0' && r.sources[0].anchor_realtime_ns != 0);
	free(raw);
	free(file);
	rp_report_free(&r);
	rp_report_free(&f);
}

/* `ringprof snapshot --url` to a file, and `ringprof merge` of two URLs. */
static void test_snapshot_http_cli_fetch_and_merge(void **state)
{
	char out[200], merged[200], why[RP_WHY_MAX], *err_text;
	struct rp_report r, m;
	int st;

	(void)state;
	emit(5);
	fetch_caught_up(&r);
	rp_report_free(&r);
	snprintf(out, sizeof(out), "%s/fetched.msgpack", dir);
	snprintf(merged, sizeof(merged), "%s/merged.msgpack", dir);
	st = rp_test_sh(NULL, NULL,
			"%s snapshot --url http://127.0.0.1:%d/snapshot --http-token-file %s -o %s",
			bin, port, token_file, out);
	assert_int_equal(st, 0);
	assert_int_equal(rp_snapshot_read_file(out, &r, why), 0);
	assert_true(caught_up(&r));
	rp_report_free(&r);
	/* no token: refused, said so, nothing written */
	st = rp_test_sh(&err_text, NULL,
			"%s snapshot --url http://127.0.0.1:%d/snapshot -o %s.no 2>&1", bin, port,
			out);
	assert_int_equal(st, 1);
	assert_non_null(strstr(err_text, "HTTP 401"));
	free(err_text);
	st = rp_test_sh(&err_text, NULL,
			"%s merge --http-token-file %s http://127.0.0.1:%d/snapshot "
			"http://127.0.0.1:%d/snapshot -o %s 2>&1",
			bin, token_file, port, port, merged);
	assert_int_equal(st, 0);
	assert_non_null(strstr(err_text, "same host and boot")); /* one clock: no shift */
	free(err_text);
	assert_int_equal(rp_snapshot_read_file(merged, &m, why), 0);
	assert_int_equal(fn_named(&m, "alpha")->calls, 2 * n_alpha);
	assert_int_equal(m.n_sources % 2, 0);
	/* the text report names the host under each source */
	assert_int_equal(rp_test_sh(&err_text, NULL, "%s report %s --format text", bin, merged), 0);
	snprintf(out, sizeof(out), "    host %s  boot %.8s", m.sources[0].host, m.sources[0].boot_id);
	assert_non_null(strstr(err_text, out));
	free(err_text);
	rp_report_free(&m);
}

/* A non-loopback address of this machine, or 0. */
static in_addr_t other_address(void)
{
	struct ifaddrs *ifa, *i;
	in_addr_t a = 0;

	if (getifaddrs(&ifa) != 0)
		return 0;
	for (i = ifa; i != NULL && a == 0; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
		    (ntohl(((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr) >> 24) != 127)
			a = ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
	freeifaddrs(ifa);
	return a;
}

/* No token: loopback peers get /snapshot, others 403. */
static void test_snapshot_http_no_token_loopback_only(void **state)
{
	in_addr_t other = other_address();
	const char *req = "GET /snapshot HTTP/1.1\r\n\r\n";
	char *r;
	size_t len;

	(void)state;
	r = http_at(htonl(INADDR_LOOPBACK), port_b, req, &len);
	assert_memory_equal(r, "HTTP/1.1 200 OK", 15);
	free(r);
	if (other == 0) {
		print_message("  no non-loopback IPv4 address here: the 403 is not tested\n");
		skip();
	}
	r = http_at(other, port_b, req, &len);
	assert_memory_equal(r, "HTTP/1.1 403 Forbidden", 22);
	free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_snapshot_http_token),
		cmocka_unit_test(test_snapshot_http_equals_sigusr1),
		cmocka_unit_test(test_snapshot_http_cli_fetch_and_merge),
		cmocka_unit_test(test_snapshot_http_no_token_loopback_only),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
