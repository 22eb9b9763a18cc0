// SPDX-License-Identifier: MIT
/*
 * The OTLP receiver's throughput in spans per second (docs/otlp.md):
 *  - in process, on one core: decode (protobuf, then JSON), reorder buffer and engine,
 *    the horizon advanced after every request as a live engine's drain does;
 *  - over HTTP: a real `ringprof run --otlp` (one engine thread) and one keep-alive
 *    client sending protobuf requests back to back, each answer awaited, until the
 *    engine has fed them all to its analyses and exited.
 * Requests hold 100 spans: 20 traces of a root and 4 children (2 of them siblings at
 * once), times increasing as a steady load would. Prints figures, never pass/fail.
 *   bench_otlp [--requests N] [--json]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"
#include "otlp.h"

#define SPANS_PER_REQ 100

struct buf {
	uint8_t *b;
	size_t n, cap;
};

static void put(struct buf *w, const void *p, size_t n)
{
	if (w->n + n > w->cap) {
		w->cap = (w->n + n) * 2;
		w->b = realloc(w->b, w->cap);
		if (w->b == NULL)
			abort();
	}
	memcpy(w->b + w->n, p, n);
	w->n += n;
}

static void varint(struct buf *w, uint64_t v)
{
	uint8_t t[10];
	size_t n = 0;

	do {
		t[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
	put(w, t, n);
}

static void field_bytes(struct buf *w, uint32_t f, const void *p, size_t n)
{
	varint(w, (uint64_t)f << 3 | 2);
	varint(w, n);
	put(w, p, n);
}

static void field_fixed64(struct buf *w, uint32_t f, uint64_t v)
{
	varint(w, (uint64_t)f << 3 | 1);
	put(w, &v, 8); /* little-endian host */
}

struct span {
	uint8_t trace[16], id[8], parent[8];
	bool has_parent;
	const char *name;
	int kind;
	uint64_t start, end;
};

static uint64_t g_t0 = 1700000000000000000ull; /* HTTP: a minute ahead of now, none late */

/* Request @r's spans: 20 traces from t = r ms on. */
static void spans_of(uint64_t r, struct span *s)
{
	static const char *const kids[] = { "llm", "tool", "db", "tokenize" };
	uint64_t t0 = g_t0 + r * 1000000;

	for (int t = 0; t < 20; t++) {
		uint64_t rs = t0 + (uint64_t)t * 50000, re = rs + 900000;
		struct span *root = &s[t * 5];

		memset(root, 0, sizeof(*root));
		memcpy(root->trace, &r, 8);
		root->trace[8] = (uint8_t)t;
		root->trace[15] = 1;
		root->id[7] = 1;
		root->name = "request";
		root->kind = 2;
		root->start = rs;
		root->end = re;
		for (int k = 0; k < 4; k++) {
			struct span *c = &s[t * 5 + 1 + k];

			*c = *root;
			c->id[7] = (uint8_t)(2 + k);
			memcpy(c->parent, root->id, 8);
			c->has_parent = true;
			c->name = kids[k];
			c->kind = 3;
			c->start = rs + 100000 + (uint64_t)(k < 2 ? 0 : k) * 200000;
			c->end = c->start + 150000;
		}
	}
}

static void pb_request(uint64_t r, struct buf *out)
{
	struct span s[SPANS_PER_REQ];
	struct buf spans = { 0 }, one = { 0 }, rs = { 0 }, res = { 0 }, kv = { 0 }, v = { 0 };

	spans_of(r, s);
	for (int i = 0; i < SPANS_PER_REQ; i++) {
		one.n = 0;
		field_bytes(&one, 1, s[i].trace, 16);
		field_bytes(&one, 2, s[i].id, 8);
		if (s[i].has_parent)
			field_bytes(&one, 4, s[i].parent, 8);
		field_bytes(&one, 5, s[i].name, strlen(s[i].name));
		varint(&one, 6 << 3);
		varint(&one, (uint64_t)s[i].kind);
		field_fixed64(&one, 7, s[i].start);
		field_fixed64(&one, 8, s[i].end);
		field_bytes(&spans, 2, one.b, one.n);
	}
	field_bytes(&v, 1, "bench", 5);
	field_bytes(&kv, 1, "service.name", 12);
	field_bytes(&kv, 2, v.b, v.n);
	field_bytes(&res, 1, kv.b, kv.n);
	field_bytes(&rs, 1, res.b, res.n);
	field_bytes(&rs, 2, spans.b, spans.n);
	out->n = 0;
	field_bytes(out, 1, rs.b, rs.n);
	free(spans.b);
	free(one.b);
	free(rs.b);
	free(res.b);
	free(kv.b);
	free(v.b);
}

static void json_request(uint64_t r, struct buf *out)
{
	struct span s[SPANS_PER_REQ];
	char tmp[512];
	int n;

	spans_of(r, s);
	out->n = 0;
	n = snprintf(tmp, sizeof(tmp),
		     "{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":"
		     "\"service.name\",\"value\":{\"stringValue\":\"bench\"}}]},\"scopeSpans\":"
		     "[{\"spans\":[");
	put(out, tmp, (size_t)n);
	for (int i = 0; i < SPANS_PER_REQ; i++) {
		char hex[3][40];

		for (int k = 0; k < 16; k++)
			sprintf(hex[0] + 2 * k, "%02x", s[i].trace[k]);
		for (int k = 0; k < 8; k++) {
			sprintf(hex[1] + 2 * k, "%02x", s[i].id[k]);
			sprintf(hex[2] + 2 * k, "%02x", s[i].parent[k]);
		}
		n = snprintf(tmp, sizeof(tmp),
			     "%s{\"traceId\":\"%s\",\"spanId\":\"%s\",\"parentSpanId\":\"%s\","
			     "\"name\":\"%s\",\"kind\":%d,\"startTimeUnixNano\":\"%" PRIu64
			     "\",\"endTimeUnixNano\":\"%" PRIu64 "\"}",
			     i ? "," : "", hex[0], hex[1], s[i].has_parent ? hex[2] : "", s[i].name,
			     s[i].kind, s[i].start, s[i].end);
		put(out, tmp, (size_t)n);
	}
	put(out, "]}]}]}", 6);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Decode, reorder, engine: spans per second on this core. */
static double inproc(bool json, unsigned n)
{
	struct rp_otlp_cfg cfg = { .horizon_ns = 5000000 };
	struct rp_otlp_decode_stats ds;
	struct buf *reqs = calloc(n, sizeof(*reqs));
	struct rp_engine *e;
	struct rp_otlp *o;
	char why[RP_WHY_MAX];
	double t;

	for (unsigned r = 0; r < n; r++)
		json ? json_request(r, &reqs[r]) : pb_request(r, &reqs[r]);
	if (rp_engine_open(NULL, &e) != 0 || rp_otlp_open(e, &cfg, &o) != 0)
		abort();
	t = now_s();
	for (unsigned r = 0; r < n; r++) {
		int err = json ? rp_otlp_decode_json(reqs[r].b, reqs[r].n, NULL, rp_otlp_add, o,
						     &ds, why)
			       : rp_otlp_decode_pb(reqs[r].b, reqs[r].n, NULL, rp_otlp_add, o, &ds,
						   why);
		if (err != 0 || ds.rejected)
			abort();
		rp_otlp_advance(o, g_t0 + (uint64_t)r * 1000000 - 5000000);
	}
	rp_otlp_finish(o);
	t = now_s() - t;
	rp_otlp_close(o);
	rp_engine_close(e);
	for (unsigned r = 0; r < n; r++)
		free(reqs[r].b);
	free(reqs);
	return (double)n * SPANS_PER_REQ / t;
}

static int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), p = -1;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		p = ntohs(a.sin_port);
	close(fd);
	return p;
}

/* One keep-alive client against a live engine: spans per second. */
static double over_http(unsigned n)
{
	char addr[64], dir[] = "/tmp/rp_bench_otlp.XXXXXX", head[256], ans[4096];
	struct sockaddr_in a = { .sin_family = AF_INET };
	struct buf req = { 0 };
	int port = free_port(), fd = -1;
	pid_t eng;
	double t;

	struct timespec now;

	if (mkdtemp(dir) == NULL)
		return -1;
	clock_gettime(CLOCK_REALTIME, &now);
	g_t0 = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec + 60000000000ull;
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
	eng = fork();
	if (eng == 0) {
		execl(RINGPROF_BIN, "ringprof", "run", "--session", "bench_otlp", "--snapshot-dir",
		      dir, "--quiet", "--no-socket", "--otlp", addr, "--otlp-horizon-ms", "1000",
		      (char *)NULL);
		_exit(127);
	}
	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	for (int i = 0; i < 500; i++, usleep(10000)) {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
			break;
		close(fd);
		fd = -1;
	}
	t = now_s();
	for (unsigned r = 0; fd >= 0 && r < n; r++) {
		size_t hl;
		ssize_t k;

		pb_request(r, &req);
		put(&req, head, sizeof(head)); /* room for the head in front */
		req.n -= sizeof(head);
		hl = (size_t)snprintf(head, sizeof(head),
				      "POST /v1/traces HTTP/1.1\r\nHost: b\r\n"
				      "Content-Type: application/x-protobuf\r\n"
				      "Content-Length: %zu\r\n\r\n",
				      req.n);
		/* head and body in one send, as SDKs do (two: Nagle meets delayed ACKs) */
		memmove(req.b + hl, req.b, req.n);
		memcpy(req.b, head, hl);
		if (send(fd, req.b, req.n + hl, MSG_NOSIGNAL) != (ssize_t)(req.n + hl) ||
		    (k = recv(fd, ans, sizeof(ans), 0)) <= 0 || strncmp(ans, "HTTP/1.1 200", 12)) {
			fprintf(stderr, "bench_otlp: request %u failed\n", r);
			t = -1;
			break;
		}
	}
	/* the spans are a minute ahead: SIGTERM feeds them all to the engine, then a
	 * final snapshot is written; the clock stops when the engine has exited */
	if (fd >= 0)
		close(fd);
	kill(eng, SIGTERM);
	waitpid(eng, NULL, 0);
	if (t > 0)
		t = now_s() - t;
	snprintf(head, sizeof(head), "rm -rf %s", dir);
	if (system(head) != 0)
		(void)0;
	free(req.b);
	return t > 0 ? (double)n * SPANS_PER_REQ / t : -1;
}

int main(int argc, char **argv)
{
	unsigned n = 2000;
	bool json = false;
	double pb, js, http;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			json = true;
		else if (strcmp(argv[i], "--requests") == 0 && i + 1 < argc)
			n = (unsigned)strtoul(argv[++i], NULL, 10);
	}
	pb = inproc(false, n);
	js = inproc(true, n);
	http = over_http(n);
	if (json)
		printf("{\"spans\":%u,\"inproc_pb_spans_per_s\":%.0f,\"inproc_json_spans_per_s\":%."
		       "0f,"
		       "\"http_pb_spans_per_s\":%.0f}\n",
		       n * SPANS_PER_REQ, pb, js, http);
	else
		printf("spans %u (requests of %d)\n"
		       "in process, protobuf   %12.0f spans/s\n"
		       "in process, JSON       %12.0f spans/s\n"
		       "HTTP, protobuf, 1 conn %12.0f spans/s (engine: one thread)\n",
		       n * SPANS_PER_REQ, SPANS_PER_REQ, pb, js, http);
	return 0;
}
