// SPDX-License-Identifier: MIT
/*
 * test_serve: the engine's live endpoints end to end. The group setup spawns
 * `ringprof run` (RP_BIN_DIR) on this test's session with a private snapshot
 * directory, a Prometheus listener on a free loopback port, 4 client slots and a
 * 400 ms idle timeout (with the argument "poll": on its poll(2) backend); this process is the
 * producer, so every figure it asks for is known exactly: the snapshot from the socket, /metrics
 * and `ringprof top --once` must show the calls it made. Then the hostile side: malformed,
 * oversized and pipelined requests, a client that never reads (the engine keeps draining and
 * answering others), the client cap, the idle timeout, the socket's mode 0600 and
 * the HTTP errors. A peer of another uid cannot be made without root tricks:
 * not tested here.
 */
#include "support.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#include "snapshot.h"

static char bin[600], dir[40], sock_path[100], session[40];
static pid_t engine;
static bool use_poll; /* argv[1] == "poll": the engine runs its poll(2) backend */
static int port;
static uint32_t id_alpha, id_beta;
static unsigned n_alpha, n_beta; /* calls made so far */

/* alpha calls beta twice, @n times. */
static void emit(unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		rp_begin(id_alpha);
		rp_begin(id_beta);
		rp_end(id_beta);
		rp_begin(id_beta);
		rp_end(id_beta);
		rp_end(id_alpha);
	}
	n_alpha += n;
	n_beta += 2 * n;
}

/* --- clients --- */

static int connect_unix(void)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = 10 };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	memcpy(a.sun_path, sock_path, sizeof(sock_path));
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)); /* a hang becomes a failure */
	return fd;
}

static void send_all(int fd, const void *buf, size_t len)
{
	assert_int_equal(send(fd, buf, len, MSG_NOSIGNAL), (ssize_t)len);
}

/* Read exactly @len bytes; @return false on EOF or error first. */
static bool recv_all(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len > 0) {
		ssize_t n = recv(fd, p, len, 0);

		if (n <= 0)
			return false;
		p += n;
		len -= (size_t)n;
	}
	return true;
}

/* Everything until the peer closes (at most @cap - 1 bytes), NUL-terminated. */
static size_t recv_until_close(int fd, char *buf, size_t cap)
{
	size_t len = 0;
	ssize_t n;

	while (len + 1 < cap && (n = recv(fd, buf + len, cap - 1 - len, 0)) > 0)
		len += (size_t)n;
	buf[len] = '\0';
	return len;
}

/* One framed reply into a malloc'ed buffer; *@len its length. */
static char *recv_frame(int fd, size_t *len)
{
	unsigned char h[4];
	char *body;

	assert_true(recv_all(fd, h, 4));
	assert_int_not_equal(h[0], 'e');
	*len = (size_t)h[0] << 24 | (size_t)h[1] << 16 | (size_t)h[2] << 8 | h[3];
	body = malloc(*len + 1);
	assert_non_null(body);
	assert_true(recv_all(fd, body, *len));
	body[*len] = '\0';
	return body;
}

static void decode(const char *body, size_t len, struct rp_report *r)
{
	char why[RP_WHY_MAX];

	if (rp_snapshot_decode(body, len, r, why) != 0)
		fail_msg("decode: %s", why);
}

static void fetch(struct rp_report *r)
{
	int fd = connect_unix();
	size_t len;
	char *body;

	send_all(fd, "snapshot\n", 9);
	body = recv_frame(fd, &len);
	decode(body, len, r);
	free(body);
	close(fd);
}

/* fetch() once the engine has let go of closed clients: it frees a client's slot when
 * the operation the close ended completes, a moment after the peer sees the close, and
 * until then a new connection past the cap is told it is busy and closed. */
static void fetch_when_free(struct rp_report *r)
{
	for (int i = 0; i < 100; i++) {
		int fd = connect_unix();
		unsigned char h[4];
		char rest[128];
		size_t len;
		char *body;

		/* a refused connection may already be closed: a failed send is no error */
		if (send(fd, "snapshot\n", 9, MSG_NOSIGNAL) != 9 || !recv_all(fd, h, 4)) {
			close(fd);
			rp_test_sleep_ms(50);
			continue;
		}
		if (h[0] == 'e') { /* still full: only "busy" may be said */
			recv_until_close(fd, rest, sizeof(rest));
			assert_memory_equal(h, "erro", 4);
			assert_true(strncmp(rest, "r: busy: ", 9) == 0);
			close(fd);
			rp_test_sleep_ms(50);
			continue;
		}
		len = (size_t)h[0] << 24 | (size_t)h[1] << 16 | (size_t)h[2] << 8 | h[3];
		body = malloc(len + 1);
		assert_non_null(body);
		assert_true(recv_all(fd, body, len));
		decode(body, len, r);
		free(body);
		close(fd);
		return;
	}
	fail_msg("the engine kept refusing connections");
}

static const struct rp_report_fn *fn_named(const struct rp_report *r, const char *name)
{
	for (uint32_t i = 0; i < r->n_fns; i++)
		if (strcmp(r->fns[i].name, name) == 0)
			return &r->fns[i];
	return NULL;
}

/* Until the engine has every call made so far (it caches a report 200 ms). */
static void fetch_caught_up(struct rp_report *r)
{
	uint64_t end = rp_test_now_ms() + 20000;

	for (;;) {
		const struct rp_report_fn *a, *b;

		fetch(r);
		a = fn_named(r, "alpha");
		b = fn_named(r, "beta");
		if (a && b && a->calls == n_alpha && b->calls == n_beta)
			return;
		assert_true(rp_test_now_ms() < end);
		rp_report_free(r);
		rp_test_sleep_ms(50);
	}
}

static int connect_http(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	struct timeval tv = { .tv_sec = 10 };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

/* An HTTP exchange: the whole response in a malloc'ed string. */
static char *http(const char *request, size_t len)
{
	int fd = connect_http();
	char *buf = malloc(1 << 22);

	assert_non_null(buf);
	send_all(fd, request, len);
	recv_until_close(fd, buf, 1 << 22);
	close(fd);
	return buf;
}

/* --- the engine --- */

static int setup(void **state)
{
	const char *b = getenv("RP_BIN_DIR"), *s = getenv("RINGPROF_SESSION");
	char addr[64];

	(void)state;
	if (b == NULL) {
		fprintf(stderr, "RP_BIN_DIR is not set (run through ctest)\n");
		return -1;
	}
	snprintf(bin, sizeof(bin), "%s/ringprof", b);
	snprintf(session, sizeof(session), "%s", s ? s : "t_test_serve");
	snprintf(dir, sizeof(dir), "/tmp/rp_test_serve.XXXXXX");
	if (mkdtemp(dir) == NULL)
		return -1;
	snprintf(sock_path, sizeof(sock_path), "%s/ringprof-%s.sock", dir, session);
	port = rp_test_free_port();
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
	id_alpha = rp_intern("alpha", "A", "test_serve.c", 1);
	id_beta = rp_intern("beta", "B", "test_serve.c", 2);
	engine = rp_test_engine_spawn(bin, session, dir, NULL, NULL, "--quiet", "--prometheus", addr,
				      "--max-clients", "4", "--client-idle-ms", "400",
				      "--client-request-ms", "1000", "--step-name", "beta",
				      use_poll ? "--poll" : "--quiet", (char *)NULL);
	return rp_test_engine_wait(session, engine, sock_path) == -1 ? 0 : -1;
}

static int teardown(void **state)
{
	int st = 0;

	(void)state;
	if (engine > 0) {
		kill(engine, SIGTERM);
		waitpid(engine, &st, 0);
	}
	char cmd[400];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		return -1;
	/* The engine exits 0 and removes its socket. */
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* --- tests --- */

static void test_serve_snapshot_matches_producer(void **state)
{
	struct rp_report r;
	const struct rp_report_fn *a, *b;

	(void)state;
	emit(50);
	fetch_caught_up(&r);
	a = fn_named(&r, "alpha");
	b = fn_named(&r, "beta");
	assert_int_equal(a->calls, 50);
	assert_int_equal(b->calls, 100);
	assert_string_equal(a->category, "A");
	/* Every record this process wrote: 2 per call, none lost. */
	assert_int_equal(r.events + r.dropped, 2ull * (n_alpha + n_beta));
	assert_true(a->cum_ns >= b->cum_ns); /* beta runs inside alpha */
	rp_report_free(&r);
}

static void test_serve_socket_mode(void **state)
{
	struct stat st;

	(void)state;
	assert_int_equal(stat(sock_path, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(st.st_uid, geteuid());
}

static void expect_error(const char *req, size_t len, const char *prefix)
{
	int fd = connect_unix();
	char buf[512];

	send_all(fd, req, len);
	recv_until_close(fd, buf, sizeof(buf)); /* the engine answers, then closes */
	if (strncmp(buf, prefix, strlen(prefix)) != 0)
		fail_msg("answer \"%s\", expected \"%s...\"", buf, prefix);
	close(fd);
}

static void test_serve_bad_requests(void **state)
{
	char big[300];
	struct rp_report r;

	(void)state;
	expect_error("bogus\n", 6, "error: unknown request");
	expect_error("snapshot 1m extra\n", 18, "error: unknown request");
	expect_error("snap\0shot\n", 10, "error: NUL byte");
	memset(big, 'x', sizeof(big));
	expect_error(big, sizeof(big), "error: request too long");
	/* Still serving. */
	fetch(&r);
	assert_non_null(fn_named(&r, "alpha"));
	rp_report_free(&r);
}

static void test_serve_pipelined(void **state)
{
	int fd = connect_unix();
	struct rp_report r1, r2;
	size_t l1, l2;
	char *b1, *b2;

	(void)state;
	send_all(fd, "snapshot\r\nmetrics\nsnapshot\n", 27);
	b1 = recv_frame(fd, &l1);
	free(recv_frame(fd, &l2)); /* metrics: checked through HTTP below */
	b2 = recv_frame(fd, &l2);
	decode(b1, l1, &r1);
	decode(b2, l2, &r2);
	assert_true(r2.events >= r1.events);
	free(b1);
	free(b2);
	rp_report_free(&r1);
	rp_report_free(&r2);
	close(fd);
}

/*
 * A client asks and asks and never reads: its replies fill the socket; the engine
 * must still drain the producer and answer everyone else, then drop it at the idle
 * timeout (400 ms).
 */
static void test_serve_stalled_client(void **state)
{
	int stalled = connect_unix(), sent = 0, frames = 0;
	struct rp_report r;
	unsigned char h[4];

	(void)state;
	/* 4000 replies of a few KB each: far more than a unix socket buffers. */
	for (int i = 0; i < 4000; i++)
		if (send(stalled, "snapshot\n", 9, MSG_NOSIGNAL | MSG_DONTWAIT) == 9)
			sent++;
	assert_true(sent > 0);
	emit(30);
	fetch_caught_up(&r); /* counted while the other client stalls */
	assert_int_equal(fn_named(&r, "alpha")->calls, n_alpha);
	rp_report_free(&r);
	/* The engine shuts the stalled one down: reading ends, not hangs, before all
	 * the replies it asked for arrived. */
	rp_test_sleep_ms(1500);
	while (recv_all(stalled, h, 4)) {
		size_t len = (size_t)h[0] << 24 | (size_t)h[1] << 16 | (size_t)h[2] << 8 | h[3];
		char *body = malloc(len);

		assert_non_null(body);
		if (recv_all(stalled, body, len))
			frames++;
		free(body);
	}
	assert_true(frames < sent);
	close(stalled);
}

/* Past --max-clients 4, a new connection is told it is busy and closed at once; the
 * idle ones are closed after 400 ms; then the slots are free again. What a loaded
 * machine changes is when the engine sees things: an earlier test's client may still
 * hold its slot (freed a moment after the peer sees the close: one of our four is
 * told busy), or the first of our four may already be closed idle when the fifth
 * comes (the fifth gets a slot and is closed idle, told nothing). Such an attempt
 * is told by what came and tried again, up to 10 times; a cap that does not hold
 * fails every one. */
static void test_serve_client_cap_and_idle(void **state)
{
	static const char busy[] = "error: busy: 4 clients connected (--max-clients)\n";
	struct rp_report r;
	int attempt;

	(void)state;
	for (attempt = 0; attempt < 10; attempt++) {
		int fds[4], extra, told = 0;
		char got[128];
		bool extra_busy;

		rp_test_sleep_ms(500); /* earlier connections are gone, mostly */
		for (int i = 0; i < 4; i++)
			fds[i] = connect_unix();
		rp_test_sleep_ms(100);
		extra = connect_unix();
		recv_until_close(extra, got, sizeof(got)); /* told why, then closed */
		close(extra);
		extra_busy = got[0] != '\0';
		if (extra_busy)
			assert_string_equal(got, busy);
		for (int i = 0; i < 4; i++) { /* idle: closed, nothing said; or told busy */
			struct pollfd p = { .fd = fds[i], .events = POLLIN };

			assert_int_equal(poll(&p, 1, 10000), 1);
			recv_until_close(fds[i], got, sizeof(got));
			if (got[0] != '\0') {
				assert_string_equal(got, busy);
				told++;
			}
			close(fds[i]);
		}
		if (extra_busy && told == 0)
			break;
		print_message("    attempt %d: %d of the first four told busy, the fifth %s\n",
			      attempt + 1, told, extra_busy ? "too" : "served");
	}
	assert_true(attempt < 10);
	fetch_when_free(&r); /* the cap has room again */
	rp_report_free(&r);
}

/* issue 10, repro 5: HTTP clients that trickle a header line now and then (never
 * idle, never done) neither take the local socket's slots (its own pool) nor keep
 * /metrics from being served past the request deadline (1 s here). */
static void test_serve_trickling_clients_lock_nobody_out(void **state)
{
	static const char get[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
	int slow[4];
	struct rp_report r;
	uint64_t t0 = rp_test_now_ms();
	bool fetched = false;
	char *resp;

	(void)state;
	rp_test_sleep_ms(500); /* earlier tests' connections are gone */
	for (int i = 0; i < 4; i++) {
		slow[i] = connect_http();
		send_all(slow[i], "GET /metrics HTTP/1.1\r\n", 23);
	}
	while (rp_test_now_ms() - t0 < 1600) {
		for (int i = 0; i < 4; i++) /* progress every 100 ms: never idle */
			send(slow[i], "X: y\r\n", 6, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (!fetched && rp_test_now_ms() - t0 > 200) {
			fetch(&r); /* the unix socket is served meanwhile */
			rp_report_free(&r);
			fetched = true;
		}
		rp_test_sleep_ms(100);
	}
	for (int i = 0; i < 4; i++) { /* cut at the deadline, answered or not */
		char buf[256];
		struct pollfd p = { .fd = slow[i], .events = POLLIN };

		assert_int_equal(poll(&p, 1, 5000), 1);
		recv_until_close(slow[i], buf, sizeof(buf));
		close(slow[i]);
	}
	resp = http(get, sizeof(get) - 1);
	assert_true(strncmp(resp, "HTTP/1.1 200 OK\r\n", 17) == 0);
	free(resp);
}

/* The value of the sample line that starts with @prefix ("name{labels} "). */
static double metric(const char *text, const char *prefix)
{
	const char *p = text;
	size_t n = strlen(prefix);

	while ((p = strstr(p, prefix)) != NULL) {
		if (p == text || p[-1] == '\n')
			return strtod(p + n, NULL);
		p += n;
	}
	fail_msg("no sample %s", prefix);
	return 0;
}

static void test_serve_http_metrics(void **state)
{
	static const char get[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
	struct rp_report r;
	char *resp, *body;

	(void)state;
	emit(7);
	fetch_caught_up(&r);
	rp_test_sleep_ms(250); /* the next report is built fresh, with the same figures */
	resp = http(get, sizeof(get) - 1);
	assert_true(strncmp(resp, "HTTP/1.1 200 OK\r\n", 17) == 0);
	assert_non_null(strstr(resp, "Content-Type: text/plain; version=0.0.4"));
	assert_non_null(strstr(resp, "Connection: close\r\n"));
	body = strstr(resp, "\r\n\r\n") + 4;
	assert_int_equal(strtoull(strstr(resp, "Content-Length: ") + 16, NULL, 10), strlen(body));
	assert_true(metric(body, "ringprof_events_total ") == (double)r.events);
	/* The server's own counters: the earlier tests' cap refusal and bad requests. */
	assert_true(metric(body, "ringprof_serve_refused_cap_total ") >= 1);
	assert_true(metric(body, "ringprof_serve_bad_requests_total ") >= 4);
	assert_true(metric(body, "ringprof_serve_timeouts_total ") >= 1);
	assert_true(metric(body, "ringprof_serve_clients ") >= 1);
	assert_true(metric(body, "ringprof_dropped_total ") == (double)r.dropped);
	assert_true(metric(body, "ringprof_span_duration_seconds_count{name=\"alpha\","
				 "category=\"A\"} ") == n_alpha);
	assert_true(metric(body, "ringprof_span_calls_total{name=\"beta\",category=\"B\"} ") ==
		    n_beta);
	assert_true(metric(body,
			   "ringprof_span_duration_seconds_sum{name=\"beta\","
			   "category=\"B\"} ") == (double)fn_named(&r, "beta")->total_ns / 1e9);
	free(resp);
	rp_report_free(&r);
}

static void test_serve_http_errors(void **state)
{
	char *resp, big[9000];

	(void)state;
	resp = http("GET /nope HTTP/1.1\r\n\r\n", 22);
	assert_true(strncmp(resp, "HTTP/1.1 404 ", 13) == 0);
	free(resp);
	resp = http("complete garbage\r\n\r\n", 20);
	assert_true(strncmp(resp, "HTTP/1.1 400 ", 13) == 0);
	free(resp);
	resp = http("POST /metrics HTTP/1.1\r\n\r\n", 26);
	assert_true(strncmp(resp, "HTTP/1.1 405 ", 13) == 0);
	free(resp);
	memcpy(big, "GET /metrics HTTP/1.1\r\nX: ", 26);
	memset(big + 26, 'a', sizeof(big) - 26);
	resp = http(big, sizeof(big));
	assert_true(strncmp(resp, "HTTP/1.1 431 ", 13) == 0);
	free(resp);
}

static void test_serve_top_once(void **state)
{
	char cmd[1024], out[16384], line[64];
	struct rp_report r;
	size_t len;
	FILE *p;

	(void)state;
	emit(3);
	fetch_caught_up(&r);
	rp_test_sleep_ms(250);
	snprintf(cmd, sizeof(cmd), "%s top --session %s --dir %s --once --sort calls", bin, session,
		 dir);
	p = popen(cmd, "r");
	assert_non_null(p);
	len = fread(out, 1, sizeof(out) - 1, p);
	out[len] = '\0';
	assert_int_equal(pclose(p), 0);
	snprintf(line, sizeof(line), "events %" PRIu64 " over", r.events);
	assert_non_null(strstr(out, line));
	assert_non_null(strstr(out, "sort calls"));
	/* Rows: calls first; beta (2 per alpha) sorts above alpha. */
	snprintf(line, sizeof(line), "%10u ", n_beta);
	assert_non_null(strstr(out, line));
	assert_true(strstr(out, "  beta [B]") < strstr(out, "  alpha [A]"));
	snprintf(line, sizeof(line), "\n%10u ", n_alpha);
	assert_true(strstr(out, line) < strstr(out, "  alpha [A]"));
	/* beta is a step (--step-name beta), of phase B (its category): all its calls */
	snprintf(line, sizeof(line), "\nsteps %-10s n %-8u p50", "B", n_beta);
	assert_non_null(strstr(out, line));
	rp_report_free(&r);
	/* No engine: one line and exit 1. */
	snprintf(cmd, sizeof(cmd), "%s top --session %s --dir /nonexistent --once 2>&1", bin,
		 session);
	p = popen(cmd, "r");
	len = fread(out, 1, sizeof(out) - 1, p);
	out[len] = '\0';
	assert_int_equal(WEXITSTATUS(pclose(p)), 1);
	assert_non_null(strstr(out, "no engine answers"));
}

/* Names from a producer reach the terminal escaped (issue 20): no ESC, BEL, C1 control
 * or ill-formed byte of a name in top's frame, but its escaped text. */
static void test_serve_top_escapes_names(void **state)
{
	uint32_t evil = rp_intern("ev\x1b[2J\xff\xc2\x9b", "c\x07", "test_serve.c", 3);
	char cmd[1024], out[16384];
	struct rp_report r;
	size_t len;
	FILE *p;

	(void)state;
	rp_begin(evil);
	rp_end(evil);
	emit(1); /* alpha, beta after it: caught up means evil is in too */
	fetch_caught_up(&r);
	rp_report_free(&r);
	snprintf(cmd, sizeof(cmd), "%s top --session %s --dir %s --once --filter ev", bin, session,
		 dir);
	p = popen(cmd, "r");
	assert_non_null(p);
	len = fread(out, 1, sizeof(out) - 1, p);
	out[len] = '\0';
	assert_int_equal(pclose(p), 0);
	for (size_t i = 0; i < len; i++)
		if (((unsigned char)out[i] < 0x20 && out[i] != '\n') ||
		    (unsigned char)out[i] == 0xff ||
		    (i + 1 < len && memcmp(out + i, "\xc2\x9b", 2) == 0))
			fail_msg("byte 0x%02x at %zu of top's frame:\n%s", (unsigned char)out[i], i,
				 out);
	if (strstr(out, "ev\\x1b[2J\xef\xbf\xbd\\xc2\\x9b [c\\x07]") == NULL)
		fail_msg("no escaped name in:\n%s", out);
}

static void test_serve_non_loopback_refused(void **state)
{
	char cmd[1024], out[1024];
	size_t len;
	FILE *p;

	(void)state;
	snprintf(cmd, sizeof(cmd),
		 "%s run --session %s_x --snapshot-dir %s --no-socket "
		 "--prometheus 0.0.0.0:%d 2>&1",
		 bin, session, dir, port);
	p = popen(cmd, "r");
	len = fread(out, 1, sizeof(out) - 1, p);
	out[len] = '\0';
	assert_int_not_equal(WEXITSTATUS(pclose(p)), 0);
	assert_non_null(strstr(out, "not a loopback address"));
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_serve_snapshot_matches_producer),
		cmocka_unit_test(test_serve_socket_mode),
		cmocka_unit_test(test_serve_bad_requests),
		cmocka_unit_test(test_serve_pipelined),
		cmocka_unit_test(test_serve_stalled_client),
		cmocka_unit_test(test_serve_client_cap_and_idle),
		cmocka_unit_test(test_serve_trickling_clients_lock_nobody_out),
		cmocka_unit_test(test_serve_http_metrics),
		cmocka_unit_test(test_serve_http_errors),
		cmocka_unit_test(test_serve_top_once),
		cmocka_unit_test(test_serve_top_escapes_names),
		cmocka_unit_test(test_serve_non_loopback_refused),
	};

	use_poll = argc > 1 && strcmp(argv[1], "poll") == 0;
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests_name(use_poll ? "serve on poll(2)" : "serve on io_uring",
					   tests, setup, teardown);
}
