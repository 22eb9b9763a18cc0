// SPDX-License-Identifier: MIT
/*
 * test_http: the listeners' one HTTP core (tools/server/http.c) against a hostile local
 * client, on a real loopback socket. Each test runs the core on its own loop in a thread
 * (with the argument "poll": the poll(2) backend) behind a tiny router: GET answers
 * "METHOD PATH", POST /echo answers its body, refusals answer their status. The client
 * is this thread; the expected bytes are built here, independently of the core. No test
 * asserts a time: deadlines are checked by what happens (a connection ends, another is
 * served meanwhile), with generous hang guards only.
 */
#include "support.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "http.h"
#include "loop.h"

#define HEAD_MAX 1024u
#define MAX_BODY 4096u
#define SLOTS	 4u
#define GUARD_MS 20000 /* a hang guard, not a bound: nothing waits that long when right */

static bool use_poll;

static struct {
	struct rp_loop *loop;
	struct rp_http *http;
	pthread_t thread;
	int port, stop_pipe[2];
	struct rp_http_stats st; /* read after the thread is joined */
} srv;

/* --- the server side (runs on the loop thread) --- */

static bool on_head(void *ctx, struct rp_http_conn *c, struct rp_http_req *r)
{
	char body[RP_HTTP_METHOD_MAX + RP_HTTP_PATH_MAX + 2];
	int n;

	(void)ctx;
	if (strcmp(r->method, "POST") == 0 && strcmp(r->path, "/echo") == 0)
		return true;
	n = snprintf(body, sizeof(body), "%s %s", r->method, r->path);
	rp_http_answer(c, "200 OK", NULL, "text/plain", body, (size_t)n, false);
	return false;
}

static void on_body(void *ctx, struct rp_http_conn *c, struct rp_http_req *r,
		    const unsigned char *b, size_t n)
{
	(void)ctx;
	(void)r;
	rp_http_answer(c, "200 OK", NULL, "text/plain", b, n, false);
}

static void on_refuse(void *ctx, struct rp_http_conn *c, const struct rp_http_req *r, int status,
		      const char *why)
{
	(void)ctx;
	(void)r;
	rp_http_answer(c, rp_http_reason(status), NULL, "text/plain", why, strlen(why), true);
}

static void on_tick(void *ctx, int res)
{
	(void)ctx;
	(void)res;
	rp_http_tick(srv.http);
}

static void on_stop(void *ctx, int res)
{
	(void)ctx;
	(void)res;
	rp_loop_stop(srv.loop);
}

static void *loop_main(void *arg)
{
	(void)arg;
	rp_loop_run(srv.loop);
	return NULL;
}

static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
			   "Connection: close\r\n\r\n";

static void srv_start(uint64_t idle_ms, uint64_t request_ms)
{
	static const struct rp_http_handler hd = {
		.head = on_head, .body = on_body, .refuse = on_refuse,
	};
	struct rp_http_opts o = {
		.head_max = HEAD_MAX, .max_body = MAX_BODY, .max_clients = SLOTS,
		.idle_ns = idle_ms * 1000000ull, .request_ns = request_ms * 1000000ull,
		.busy = busy,
	};
	struct rp_loop_opts lo = { .force_poll = use_poll };
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in *a = (struct sockaddr_in *)&ss;
	socklen_t len = sizeof(*a);
	char why[RP_WHY_MAX];
	int fd;

	memset(&srv, 0, sizeof(srv));
	assert_int_equal(rp_loop_open(&lo, &srv.loop, why), 0);
	a->sin_family = AF_INET;
	a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = rp_http_listen_tcp(&ss, sizeof(*a), 64);
	assert_true(fd >= 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)a, &len), 0);
	srv.port = ntohs(a->sin_port);
	assert_int_equal(rp_http_open(srv.loop, fd, &o, &hd, NULL, &srv.http), 0);
	assert_true(rp_loop_timer(srv.loop, 20000000ull, on_tick, NULL) >= 0);
	assert_int_equal(pipe(srv.stop_pipe), 0);
	assert_true(rp_loop_watch(srv.loop, srv.stop_pipe[0], on_stop, NULL) >= 0);
	assert_int_equal(pthread_create(&srv.thread, NULL, loop_main, NULL), 0);
}

/* Stop the loop (a byte down the pipe it watches), then read the core's counters. */
static void srv_stop(void)
{
	assert_int_equal(write(srv.stop_pipe[1], "x", 1), 1);
	assert_int_equal(pthread_join(srv.thread, NULL), 0);
	rp_http_stats(srv.http, &srv.st);
	rp_loop_close(srv.loop);
	rp_http_close(srv.http);
	close(srv.stop_pipe[0]);
	close(srv.stop_pipe[1]);
}

/* --- the client side --- */

static int connect_srv(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)srv.port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

static void send_all(int fd, const void *p, size_t n)
{
	for (size_t off = 0; off < n;) {
		ssize_t k = send(fd, (const char *)p + off, n - off, MSG_NOSIGNAL);

		assert_true(k > 0);
		off += (size_t)k;
	}
}

/* Exactly @n bytes into @buf; false if the connection ended first. */
static bool recv_n(int fd, char *buf, size_t n)
{
	for (size_t got = 0; got < n;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t k;

		assert_int_equal(poll(&p, 1, GUARD_MS), 1);
		k = recv(fd, buf + got, n - got, 0);
		if (k <= 0)
			return false;
		got += (size_t)k;
	}
	return true;
}

/* Everything until the peer closes (or resets), NUL-terminated; its length. */
static size_t recv_to_close(int fd, char *buf, size_t cap)
{
	size_t got = 0;

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t k;

		assert_int_equal(poll(&p, 1, GUARD_MS), 1);
		k = recv(fd, buf + got, cap - 1 - got, 0);
		if (k <= 0)
			break;
		got += (size_t)k;
		assert_true(got < cap - 1);
	}
	buf[got] = '\0';
	return got;
}

/* The answer the core must give to a GET, or to POST /echo with @body. */
static size_t expected(char *out, size_t cap, const char *body, bool close)
{
	return (size_t)snprintf(out, cap,
				"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: "
				"%zu\r\nConnection: %s\r\n\r\n%s",
				strlen(body), close ? "close" : "keep-alive", body);
}

/* Read one answer of exactly the bytes @want. */
static void expect_answer(int fd, const char *want, size_t n)
{
	char got[2048];

	assert_true(n < sizeof(got));
	assert_true(recv_n(fd, got, n));
	got[n] = '\0';
	assert_string_equal(got, want);
}

/* A keep-alive conversation: a Content-Length body, a chunked body (with an extension
 * and a trailer), a GET; its answers, in order. */
static const char convo[] =
	"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello world"
	"POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
	"5;a=b\r\nchunk\r\n7\r\ned body\r\n0\r\nX-Trailer: t\r\n\r\n"
	"GET /metrics?x=1 HTTP/1.1\r\nAccept: */*\r\n\r\n";

static size_t convo_answers(char *out, size_t cap)
{
	size_t n = expected(out, cap, "hello world", false);

	n += expected(out + n, cap - n, "chunked body", false);
	n += expected(out + n, cap - n, "GET /metrics?x=1", false);
	return n;
}

/* Every split point of the conversation: the first part, a pause, the rest; and once
 * one byte per send. The answers never change. */
static void test_http_split_at_every_byte(void **state)
{
	char want[2048];
	size_t wn = convo_answers(want, sizeof(want)), n = sizeof(convo) - 1;
	int fd;

	(void)state;
	srv_start(60000, 60000);
	fd = connect_srv();
	for (size_t k = 1; k < n; k++) {
		send_all(fd, convo, k);
		rp_test_sleep_ms(1); /* most splits then reach the core apart */
		send_all(fd, convo + k, n - k);
		expect_answer(fd, want, wn);
	}
	for (size_t i = 0; i < n; i++)
		send_all(fd, convo + i, 1);
	expect_answer(fd, want, wn);
	close(fd);
	srv_stop();
	assert_int_equal(srv.st.accepted, 1);
	assert_int_equal(srv.st.bad_head + srv.st.bad_body + srv.st.head_too_large, 0);
	assert_int_equal(srv.st.timeouts, 0);
}

/* 100 conversations in one send: 300 answers, in order, on one connection. */
static void test_http_pipelined(void **state)
{
	static char req[100 * sizeof(convo)];
	char want[2048];
	size_t wn = convo_answers(want, sizeof(want)), n = 0;
	int fd;

	(void)state;
	srv_start(60000, 60000);
	for (int i = 0; i < 100; i++) {
		memcpy(req + n, convo, sizeof(convo) - 1);
		n += sizeof(convo) - 1;
	}
	fd = connect_srv();
	send_all(fd, req, n);
	for (int i = 0; i < 100; i++)
		expect_answer(fd, want, wn);
	/* then a request that closes: HTTP/1.0 without keep-alive */
	send_all(fd, "GET /last HTTP/1.0\r\n\r\n", 22);
	{
		char got[512], exp[512];

		expected(exp, sizeof(exp), "GET /last", true);
		recv_to_close(fd, got, sizeof(got));
		assert_string_equal(got, exp);
	}
	close(fd);
	srv_stop();
	assert_int_equal(srv.st.accepted, 1);
}

/* An answer before the body was read (GET with a body): said "close", then closed,
 * so that the body is never taken for the next request. */
static void test_http_unread_body_closes(void **state)
{
	static const char req[] = "GET /a HTTP/1.1\r\nContent-Length: 40\r\n\r\n"
				  "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n\r\n";
	char got[512], exp[512];
	int fd;

	(void)state;
	srv_start(60000, 60000);
	fd = connect_srv();
	send_all(fd, req, sizeof(req) - 1);
	expected(exp, sizeof(exp), "GET /a", true);
	recv_to_close(fd, got, sizeof(got));
	assert_string_equal(got, exp);
	close(fd);
	srv_stop();
}

/* One request on a new connection; the status of the answer, the connection then read
 * to its end. */
static int status_of(const char *req, size_t n)
{
	char got[4096];
	int fd = connect_srv(), code = 0;

	send_all(fd, req, n);
	recv_to_close(fd, got, sizeof(got));
	close(fd);
	if (sscanf(got, "HTTP/1.1 %d", &code) != 1)
		fail_msg("no answer to %.60s: \"%.80s\"", req, got);
	return code;
}

#define POST_CHUNKED "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"

/* Framing that lenient parsers read two ways, and sizes that overflow: each refused
 * with its status, counted, and the connection closed. Each request ends where the
 * refusal comes (no unread bytes: a close would then reset the answer away). */
static void test_http_bad_framing(void **state)
{
	static const struct {
		const char *req;
		int status;
	} cases[] = {
		{ POST_CHUNKED "fffffffffffffffff\r\n", 413 }, /* 17 digits: past 64 bits */
		{ POST_CHUNKED "ffffffffffffffff\r\n", 413 },
		{ POST_CHUNKED "1001\r\n", 413 }, /* MAX_BODY + 1 */
		{ POST_CHUNKED "0x10\r\n", 400 },
		{ POST_CHUNKED "-1\r\n", 400 },
		{ POST_CHUNKED "+10\r\n", 400 },
		{ POST_CHUNKED " 10\r\n", 400 },
		{ POST_CHUNKED "\r\n", 400 },
		{ POST_CHUNKED "5\r\nhelloX\r\n", 400 }, /* no CRLF after the data */
		{ POST_CHUNKED "1;" "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
			       "xxxxxxxxxxxxxxxxxxxxxx", 400 }, /* a size line of 80 bytes */
		{ "POST /echo HTTP/1.1\r\nContent-Length: +5\r\n\r\n", 400 },
		{ "POST /echo HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400 },
		{ "POST /echo HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n", 400 },
		{ "POST /echo HTTP/1.1\r\nContent-Length: 0x5\r\n\r\n", 400 },
		{ "POST /echo HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n", 400 },
		{ "POST /echo HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", 400 },
		{ "POST /echo HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
		  400 },
		{ "POST /echo HTTP/1.1\r\nContent-Length: 4097\r\n\r\n", 413 },
		{ "POST /echo HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 415 },
		{ "GET /a HTTP/1.1\r\n folded: x\r\n\r\n", 400 },
		{ "GET /a HTTP/1.1\r\nBad Name: x\r\n\r\n", 400 },
		{ "GET /a HTTP/1.1\r\nX: a\x01z\r\n\r\n", 400 },
		{ "GET /a HTTP/1.1\r\nnocolon\r\n\r\n", 400 },
		{ "GET  /a HTTP/1.1\r\n\r\n", 400 },
		{ "GET /a HTTP/2.0\r\n\r\n", 400 },
		{ "GET a HTTP/1.1\r\n\r\n", 400 },
		{ "get /a HTTP/1.1\r\n\r\n", 400 },
	};
	uint64_t want400 = 0, want413 = 0, want415 = 0;

	(void)state;
	srv_start(60000, 60000);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int got = status_of(cases[i].req, strlen(cases[i].req));

		if (got != cases[i].status)
			fail_msg("case %zu (%.50s): %d, not %d", i, cases[i].req, got,
				 cases[i].status);
		want400 += cases[i].status == 400;
		want413 += cases[i].status == 413;
		want415 += cases[i].status == 415;
	}
	/* a trailer of 133 lines of 60 bytes: past the 8192 bytes a trailer may have */
	{
		static char req[sizeof(POST_CHUNKED) + 3 + 133 * 62];
		size_t n = (size_t)sprintf(req, POST_CHUNKED "0\r\n");

		for (int i = 0; i < 133; i++)
			n += (size_t)sprintf(req + n, "X-%058d\r\n", i);
		assert_int_equal(status_of(req, n), 400);
		want400++;
	}
	srv_stop();
	assert_int_equal(srv.st.bad_head + srv.st.bad_body, want400);
	assert_int_equal(srv.st.body_too_large, want413);
	assert_int_equal(srv.st.unsupported_te, want415);
	assert_int_equal(srv.st.errors, 0);
}

/* A head of HEAD_MAX bytes without its end: 431, counted. A client that pushes 4 MiB of
 * header at it is cut off, and the core serves the next one. */
static void test_http_huge_headers(void **state)
{
	static char big[4 << 20];
	char got[512], exp[512];
	int fd;

	(void)state;
	srv_start(60000, 60000);
	memcpy(big, "GET /a HTTP/1.1\r\nX: ", 20);
	memset(big + 20, 'a', sizeof(big) - 20);
	assert_int_equal(status_of(big, HEAD_MAX), 431);
	fd = connect_srv();
	for (size_t off = 0; off < sizeof(big);) { /* until the core closes on us */
		ssize_t k = send(fd, big + off, sizeof(big) - off, MSG_NOSIGNAL);

		if (k <= 0)
			break;
		off += (size_t)k;
	}
	{
		struct pollfd p = { .fd = fd, .events = POLLIN };
		char sink[4096];

		assert_int_equal(poll(&p, 1, GUARD_MS), 1);
		while (recv(fd, sink, sizeof(sink), 0) > 0)
			;
	}
	close(fd);
	fd = connect_srv();
	send_all(fd, "GET /b HTTP/1.1\r\nConnection: close\r\n\r\n", 39);
	expected(exp, sizeof(exp), "GET /b", true);
	recv_to_close(fd, got, sizeof(got));
	assert_string_equal(got, exp);
	close(fd);
	srv_stop();
	assert_int_equal(srv.st.head_too_large, 2);
}

/* GET @path on a new connection once a slot is free (a cut connection's slot is freed
 * just after its peer sees the end): the answer must be the 200. */
static void get_when_free(const char *path)
{
	char req[128], body[128], got[512], exp[512];
	uint64_t t0 = rp_test_now_ms();
	int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nConnection: close\r\n\r\n", path);

	snprintf(body, sizeof(body), "GET %s", path);
	expected(exp, sizeof(exp), body, true);
	for (;;) {
		int fd = connect_srv();

		send_all(fd, req, (size_t)n);
		recv_to_close(fd, got, sizeof(got));
		close(fd);
		if (strcmp(got, busy) != 0)
			break;
		if (rp_test_now_ms() - t0 > GUARD_MS)
			fail_msg("no slot free after %d ms", GUARD_MS);
		rp_test_sleep_ms(20);
	}
	assert_string_equal(got, exp);
}

/*
 * Slowloris: connections that send a byte every 50 ms and never finish (never idle, so
 * only the request deadline can end them): two in their head, one in its body; and one
 * that sends nothing (the idle timeout ends it). All four slots taken, every one of them
 * is cut and counted as a timeout, and the core serves again.
 */
static void test_http_slowloris(void **state)
{
	static const char *const start[SLOTS - 1] = {
		"GET /a HTTP/1.1\r\nX-Long: ",
		"GET /b HTTP/1.1\r\nX-Long: ",
		"POST /echo HTTP/1.1\r\nContent-Length: 4000\r\n\r\n",
	};
	int fds[SLOTS - 1], quiet, open_n = SLOTS - 1;
	bool open[SLOTS - 1];
	uint64_t t0 = rp_test_now_ms();
	char got[64];

	(void)state;
	/* idle 1 s, request deadline 2 s: a client thread descheduled for longer than the
	 * idle time on a loaded machine would be cut before it sends */
	srv_start(1000, 2000);
	for (unsigned i = 0; i < SLOTS - 1; i++) {
		fds[i] = connect_srv();
		open[i] = true;
		send_all(fds[i], start[i], strlen(start[i]));
	}
	quiet = connect_srv();
	while (open_n > 0) {
		if (rp_test_now_ms() - t0 > GUARD_MS)
			fail_msg("slow connections still open after %d ms", GUARD_MS);
		for (unsigned i = 0; i < SLOTS - 1; i++) {
			char ch;

			if (!open[i])
				continue;
			if (recv(fds[i], &ch, 1, MSG_DONTWAIT) == 0 ||
			    send(fds[i], "a", 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
				open[i] = false; /* cut by the core */
				open_n--;
				close(fds[i]);
			}
		}
		rp_test_sleep_ms(50);
	}
	assert_int_equal(recv_to_close(quiet, got, sizeof(got)), 0); /* cut, unanswered */
	close(quiet);
	get_when_free("/after");
	srv_stop();
	assert_int_equal(srv.st.timeouts, SLOTS);
}

/* While slow connections trickle, another one is answered at once: the loop is not held
 * by them (it would be answered only after they are cut otherwise; we check the order
 * of events, not a time). */
static void test_http_slowloris_does_not_block(void **state)
{
	int slow = -1, fd;
	char got[512], exp[512];
	struct pollfd p;

	(void)state;
	srv_start(60000, 60000); /* nothing is cut during this test */
	slow = connect_srv();
	send_all(slow, "GET /slow HTTP/1.1\r\n", 20);
	fd = connect_srv();
	send_all(fd, "GET /fast HTTP/1.1\r\nConnection: close\r\n\r\n", 42);
	expected(exp, sizeof(exp), "GET /fast", true);
	recv_to_close(fd, got, sizeof(got));
	assert_string_equal(got, exp);
	close(fd);
	/* the slow one is still open, unanswered */
	p = (struct pollfd){ .fd = slow, .events = POLLIN };
	assert_int_equal(poll(&p, 1, 0), 0);
	send_all(slow, "\r\n", 2);
	expected(exp, sizeof(exp), "GET /slow", false);
	expect_answer(slow, exp, strlen(exp));
	close(slow);
	srv_stop();
	assert_int_equal(srv.st.timeouts, 0);
}

/*
 * 10000 connections against 4 slots: the 4 held ones keep being served, every other one
 * is told 503 and closed at once, and every refusal is counted (no more, no less).
 */
static void test_http_connection_flood(void **state)
{
	enum { FLOOD = 10000, BATCH = 32 };
	int held[SLOTS], batch[BATCH];
	char got[512], exp[512];
	uint64_t refused = 0;

	(void)state;
	srv_start(60000, 60000);
	expected(exp, sizeof(exp), "GET /held", false);
	for (unsigned i = 0; i < SLOTS; i++) { /* answered: surely in a slot */
		held[i] = connect_srv();
		send_all(held[i], "GET /held HTTP/1.1\r\n\r\n", 22);
		expect_answer(held[i], exp, strlen(exp));
	}
	for (int done = 0; done < FLOOD; done += BATCH) {
		for (int i = 0; i < BATCH; i++)
			batch[i] = connect_srv();
		for (int i = 0; i < BATCH; i++) {
			recv_to_close(batch[i], got, sizeof(got));
			assert_string_equal(got, busy);
			close(batch[i]);
			refused++;
		}
	}
	for (unsigned i = 0; i < SLOTS; i++) { /* the held ones still work */
		send_all(held[i], "GET /held HTTP/1.1\r\n\r\n", 22);
		expect_answer(held[i], exp, strlen(exp));
		close(held[i]);
	}
	srv_stop();
	assert_int_equal(srv.st.accepted, SLOTS);
	assert_int_equal(srv.st.refused_cap, refused);
	assert_int_equal(srv.st.errors, 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_http_split_at_every_byte),
		cmocka_unit_test(test_http_pipelined),
		cmocka_unit_test(test_http_unread_body_closes),
		cmocka_unit_test(test_http_bad_framing),
		cmocka_unit_test(test_http_huge_headers),
		cmocka_unit_test(test_http_slowloris),
		cmocka_unit_test(test_http_slowloris_does_not_block),
		cmocka_unit_test(test_http_connection_flood),
	};

	use_poll = argc > 1 && strcmp(argv[1], "poll") == 0;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
