// SPDX-License-Identifier: MIT
/*
 * The live endpoints (serve.h): a unix socket speaking one request line per reply,
 * and a minimal HTTP/1.1 server for Prometheus, both on the engine's loop.
 *
 * Each connection is a small state machine with exactly one loop operation in
 * flight: RECV (into its bounded request buffer) until a whole request is there, then
 * SEND of the reply until all of it is sent, then RECV again (unix) or close (HTTP,
 * errors). Closing happens only in a callback, when nothing is in flight, so a
 * buffer is never freed under the kernel; a timeout shuts the socket down, which
 * ends the pending operation and so reaches that callback. Replies are blobs with a
 * reference count: the cache holds one, each client sending it holds one.
 */
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <regex.h>
#include <time.h>
#include <unistd.h>

#include "negotiate.h"
#include "render.h"
#include "serve.h"
#include "snapshot.h"

#define MAX_CLIENTS_DEFAULT 16u
#define IDLE_DEFAULT_NS	    10000000000ull
#define REQUEST_DEFAULT_NS  3000000000ull
#define CACHE_DEFAULT_NS    200000000ull

/* A reply, shared by every client sending it. */
struct blob {
	unsigned refs;
	size_t len;
	char *data;
};

/* /metrics over HTTP comes in three formats (negotiated: metrics_kind()), each cached;
 * GET /snapshot has its own. */
enum cache_kind {
	C_SNAPSHOT,
	C_METRICS_FRAME,
	C_METRICS_HTTP,
	C_METRICS_OM,
	C_METRICS_PB,
	C_SNAPSHOT_HTTP,
	C_KINDS
};

#define TOKEN_MAX 256u /* bytes of the bearer token */

static const char *const content_type[C_KINDS] = {
	[C_METRICS_HTTP] = "text/plain; version=0.0.4; charset=utf-8",
	[C_METRICS_OM] = "application/openmetrics-text; version=1.0.0; charset=utf-8",
	[C_METRICS_PB] = "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; "
			 "encoding=delimited",
};

struct listener {
	struct rp_serve *s;
	int fd;
	bool http;
	bool armed; /* an accept is in flight */
};

struct client {
	struct rp_serve *s;
	int fd; /* -1: the slot is free */
	bool http;
	bool close_after; /* close once this reply is sent */
	bool loopback;	  /* HTTP: the peer's address is a loopback one */
	bool shut;	  /* shut down for a timeout: the pending op ends soon */
	uint64_t last;	  /* CLOCK_MONOTONIC ns of the last progress */
	uint64_t req_start; /* when the request now awaited began; 0: none yet */
	size_t rlen;
	char *rbuf; /* RP_SERVE_HTTP_MAX bytes */
	struct blob *out;
	size_t sent;
};

struct rp_serve {
	struct rp_loop *loop;
	struct rp_serve_opts o;
	rp_serve_report_fn fn;
	void *ctx;
	struct listener ls[2]; /* unix, http; fd -1 when not used */
	struct client *clients; /* max_clients unix slots, then max_http_clients */
	unsigned n_clients;
	struct blob *cache[C_KINDS];
	uint64_t built[C_KINDS];
	struct rp_serve_stats st;
	char unix_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char prom_window[32];
	char token[TOKEN_MAX + 1]; /* GET /snapshot's bearer token; "" = none */
	size_t token_len;
	regex_t names_re; /* o.metrics_names, compiled (has_re) */
	bool has_re;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* --- replies --- */

static struct blob *blob_new(char *data, size_t len)
{
	struct blob *b = malloc(sizeof(*b));

	if (b == NULL) {
		free(data);
		return NULL;
	}
	*b = (struct blob){ .refs = 1, .len = len, .data = data };
	return b;
}

static struct blob *blob_str(const char *s)
{
	char *d = strdup(s);

	return d ? blob_new(d, strlen(s)) : NULL;
}

static void blob_put(struct blob *b)
{
	if (b != NULL && --b->refs == 0) {
		free(b->data);
		free(b);
	}
}

static void put_be32(char *p, uint32_t v)
{
	p[0] = (char)(v >> 24);
	p[1] = (char)(v >> 16);
	p[2] = (char)(v >> 8);
	p[3] = (char)v;
}

/* A framed snapshot of @r: 4-byte length, then the MessagePack. */
static struct blob *make_snapshot(const struct rp_report *r)
{
	struct rp_membuf m = { 0 };
	int err = rp_membuf_sink(&m, "\0\0\0\0", 4);

	if (err == 0)
		err = rp_snapshot_encode(r, rp_membuf_sink, &m);
	if (err != 0 || m.len - 4 >= RP_SERVE_REPLY_MAX) {
		rp_membuf_free(&m);
		return NULL;
	}
	put_be32(m.data, (uint32_t)(m.len - 4));
	return blob_new(m.data, m.len);
}

/* The server's own counters, after the report's: every cap hit counted (serve.h). */
static void serve_metrics(const struct rp_serve *s, FILE *m)
{
	const struct {
		const char *name, *help;
		uint64_t v;
	} c[] = {
		{ "accepted", "Connections taken.", s->st.accepted },
		{ "refused_cap", "Connections closed at once: max clients connected.",
		  s->st.refused_cap },
		{ "refused_uid", "Socket peers of another uid, closed at once.",
		  s->st.refused_uid },
		{ "requests", "Requests answered with a report.", s->st.requests },
		{ "bad_requests", "Requests answered with an error.", s->st.bad_requests },
		{ "timeouts", "Connections shut down for making no progress.", s->st.timeouts },
		{ "reports", "Reports built for the live endpoints.", s->st.reports },
		{ "errors", "Failed accepts, reports or sends.", s->st.errors },
		{ "unauthorized", "GET /snapshot refused: no or a wrong token, or a "
				  "non-loopback peer with no token set (of bad_requests).",
		  s->st.unauthorized },
	};

	for (unsigned i = 0; i < sizeof(c) / sizeof(c[0]); i++)
		fprintf(m,
			"# HELP ringprof_serve_%s_total %s\n# TYPE ringprof_serve_%s_total "
			"counter\n"
			"ringprof_serve_%s_total %" PRIu64 "\n",
			c[i].name, c[i].help, c[i].name, c[i].name, c[i].v);
	fprintf(m,
		"# HELP ringprof_serve_clients Live connections now.\n"
		"# TYPE ringprof_serve_clients gauge\nringprof_serve_clients %u\n",
		s->st.clients);
	if (s->o.extra_metrics)
		s->o.extra_metrics(s->o.extra_ctx, m);
}

/* @text (the Prometheus text) in @kind's format: itself, or a new buffer in *@conv. */
static int convert(const struct rp_report *r, enum cache_kind kind, char *text, size_t len,
		   char **conv, size_t *conv_len)
{
	FILE *m;
	int err;

	if (kind != C_METRICS_OM && kind != C_METRICS_PB)
		return 0;
	m = open_memstream(conv, conv_len);
	if (m == NULL)
		return -ENOMEM;
	err = kind == C_METRICS_OM ? rp_render_prom_openmetrics(text, len, m)
				   : rp_render_prom_protobuf(r, text, len, m);
	if (fclose(m) != 0 && err == 0)
		err = -EIO;
	return err;
}

/* The metrics of @r, framed (unix: the text) or as an HTTP response in @kind's format. */
static struct blob *make_metrics(struct rp_serve *s, const struct rp_report *r,
				 enum cache_kind kind)
{
	char *text = NULL, *conv = NULL, *data = NULL, head[256];
	size_t len = 0, conv_len = 0, hlen;
	FILE *m = open_memstream(&text, &len);
	int err;

	if (m == NULL)
		return NULL;
	err = rp_render_prom_select(r, m, s->prom_window[0] ? s->prom_window : NULL,
				    &(struct rp_prom_select){
					    .names = s->has_re ? &s->names_re : NULL,
					    .top = s->o.metrics_top,
				    });
	if (err == 0)
		serve_metrics(s, m);
	if (fclose(m) != 0 || err != 0 ||
	    convert(r, kind, text, len, &conv, &conv_len) != 0) {
		free(text);
		free(conv);
		return NULL;
	}
	if (conv != NULL) {
		free(text);
		text = conv;
		len = conv_len;
	}
	if (len >= RP_SERVE_REPLY_MAX) {
		free(text);
		return NULL;
	}
	if (kind != C_METRICS_FRAME)
		hlen = (size_t)snprintf(head, sizeof(head),
					"HTTP/1.1 200 OK\r\n"
					"Content-Type: %s\r\n"
					"Content-Length: %zu\r\nConnection: close\r\n\r\n",
					content_type[kind], len);
	else {
		put_be32(head, (uint32_t)len);
		hlen = 4;
	}
	data = malloc(hlen + len);
	if (data != NULL) {
		memcpy(data, head, hlen);
		memcpy(data + hlen, text, len);
	}
	free(text);
	return data ? blob_new(data, hlen + len) : NULL;
}

/* GET /snapshot's reply: the snapshot's MessagePack, as a SIGUSR1 file holds it. */
static struct blob *make_http_snapshot(const struct rp_report *r)
{
	struct rp_membuf m = { 0 };
	char head[160];
	int hlen, err;

	err = rp_snapshot_encode(r, rp_membuf_sink, &m);
	if (err != 0 || m.len >= RP_SERVE_REPLY_MAX) {
		rp_membuf_free(&m);
		return NULL;
	}
	hlen = snprintf(head, sizeof(head),
			"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.msgpack\r\n"
			"Content-Length: %zu\r\nConnection: close\r\n\r\n", m.len);
	if (rp_membuf_sink(&m, head, (size_t)hlen) != 0) { /* room, then move the body */
		rp_membuf_free(&m);
		return NULL;
	}
	memmove(m.data + hlen, m.data, m.len - (size_t)hlen);
	memcpy(m.data, head, (size_t)hlen);
	return blob_new(m.data, m.len);
}

/* The cached reply of @kind, fresh within cache_ns; a new reference, or NULL. */
static struct blob *reply_get(struct rp_serve *s, enum cache_kind kind)
{
	uint64_t now = now_ns();
	struct rp_report r;
	struct blob *b;

	if (s->cache[kind] == NULL || now - s->built[kind] >= s->o.cache_ns) {
		memset(&r, 0, sizeof(r));
		s->st.reports++;
		if (s->fn(s->ctx, &r) != 0)
			b = NULL;
		else if (kind == C_SNAPSHOT)
			b = make_snapshot(&r);
		else if (kind == C_SNAPSHOT_HTTP)
			b = make_http_snapshot(&r);
		else
			b = make_metrics(s, &r, kind);
		rp_report_free(&r);
		if (b == NULL) {
			s->st.errors++;
			return NULL;
		}
		blob_put(s->cache[kind]);
		s->cache[kind] = b;
		s->built[kind] = now;
	}
	s->cache[kind]->refs++;
	return s->cache[kind];
}

/* --- connections --- */

static void client_recv(struct client *c);
static void client_send(struct client *c);

static void client_close(struct client *c)
{
	close(c->fd);
	c->fd = -1;
	blob_put(c->out);
	c->out = NULL;
	c->s->st.clients--;
}

/* Answer @b (a new reference; NULL: "error: out of memory"), then maybe close. */
static void reply(struct client *c, struct blob *b, bool close_after)
{
	c->out = b;
	c->sent = 0;
	c->close_after = close_after;
	/* The idle clock restarts here: the time we took to build the reply is ours, not
	 * the client's (a slow build let the tick shut a client whose reply was queued). */
	c->last = now_ns();
	if (b == NULL) {
		c->s->st.errors++;
		c->out = blob_str(c->http ? "HTTP/1.1 500 Internal Server Error\r\n"
					    "Content-Length: 0\r\nConnection: close\r\n\r\n"
					  : "error: cannot build the report\n");
		c->close_after = true;
		if (c->out == NULL) {
			client_close(c);
			return;
		}
	}
	client_send(c);
}

static void reply_error(struct client *c, const char *text)
{
	c->s->st.bad_requests++;
	reply(c, blob_str(text), true);
}

static void http_status(struct client *c, const char *status)
{
	char buf[160];

	snprintf(buf, sizeof(buf),
		 "HTTP/1.1 %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
		 "Connection: close\r\n\r\n%s\n",
		 status, strlen(status) + 1, status);
	reply_error(c, buf);
}

/* --- GET /snapshot: a bearer token, or loopback peers only --- */

/* Equal in time independent of where they differ (the length is not secret). */
static bool token_eq(const char *a, size_t alen, const char *b, size_t blen)
{
	unsigned char d = alen != blen;

	for (size_t i = 0; i < alen && i < blen; i++)
		d |= (unsigned char)(a[i] ^ b[i]);
	return d == 0;
}

/* The value of header @name (case-insensitive) in the head's lines @h[0..n); its
 * length in *@len, trailing blanks cut. NULL if absent. */
static const char *header_value(const char *h, size_t n, const char *name, size_t *len)
{
	size_t nl = strlen(name);

	for (const char *p = h, *end = h + n; p < end;) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		size_t ll = (size_t)((eol ? eol : end) - p);

		if (ll > nl && p[nl] == ':' && strncasecmp(p, name, nl) == 0) {
			const char *v = p + nl + 1;

			while (v < p + ll && (*v == ' ' || *v == '\t'))
				v++;
			*len = (size_t)(p + ll - v);
			while (*len > 0 && (v[*len - 1] == '\r' || v[*len - 1] == ' ' ||
					    v[*len - 1] == '\t'))
				(*len)--;
			return v;
		}
		p += ll + 1;
	}
	return NULL;
}

static void http_unauthorized(struct client *c)
{
	c->s->st.unauthorized++;
	reply_error(c, "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer realm=\"ringprof\""
		       "\r\nContent-Type: text/plain\r\nContent-Length: 17\r\n"
		       "Connection: close\r\n\r\n401 Unauthorized\n");
}

/* @h[0..n): the header lines after the request line. */
static void snapshot_request(struct client *c, const char *h, size_t n)
{
	const struct rp_serve *s = c->s;
	const char *v;
	size_t len = 0;

	if (s->token_len == 0 && !c->loopback) {
		c->s->st.unauthorized++;
		http_status(c, "403 Forbidden");
		return;
	}
	if (s->token_len > 0) {
		v = header_value(h, n, "Authorization", &len);
		if (v == NULL || len < 7 || strncasecmp(v, "Bearer ", 7) != 0 ||
		    !token_eq(v + 7, len - 7, s->token, s->token_len)) {
			http_unauthorized(c);
			return;
		}
	}
	c->s->st.requests++;
	reply(c, reply_get(c->s, C_SNAPSHOT_HTTP), true);
}

/* The token: the file's first line, 1 to TOKEN_MAX printable bytes. */
static int read_token(struct rp_serve *s, const char *path, char why[RP_WHY_MAX])
{
	FILE *f = fopen(path, "re");
	char buf[TOKEN_MAX + 2];
	size_t n;

	if (f == NULL) {
		snprintf(why, RP_WHY_MAX, "--http-token-file %.80s: %s", path, strerror(errno));
		return -errno;
	}
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	n = strcspn(buf, "\r\n");
	buf[n] = '\0';
	for (size_t i = 0; i < n; i++)
		if (buf[i] <= ' ' || buf[i] == 0x7f)
			n = 0;
	if (n == 0 || n > TOKEN_MAX) {
		snprintf(why, RP_WHY_MAX,
			 "--http-token-file %.40s: the first line must be the token, 1 to %u "
			 "printable bytes without blanks", path, TOKEN_MAX);
		return -EINVAL;
	}
	memcpy(s->token, buf, n + 1);
	s->token_len = n;
	return 0;
}

/* Whether the peer of HTTP connection @fd has a loopback address. */
static bool peer_loopback(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getpeername(fd, (struct sockaddr *)&ss, &len) != 0)
		return false;
	if (ss.ss_family == AF_INET)
		return (ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr) >> 24) == 127;
	if (ss.ss_family == AF_INET6) {
		const struct in6_addr *a = &((struct sockaddr_in6 *)&ss)->sin6_addr;

		return memcmp(a, &in6addr_loopback, sizeof(*a)) == 0 ||
		       (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
	}
	return false;
}

/* The cache kind of the /metrics format a request asks for (negotiate.h). */
static enum cache_kind metrics_kind(const char *path, const char *head, size_t len)
{
	switch (rp_metrics_format(path, head, len)) {
	case RP_FMT_PROTOBUF:
		return C_METRICS_PB;
	case RP_FMT_OPENMETRICS:
		return C_METRICS_OM;
	default:
		return C_METRICS_HTTP;
	}
}

/* A whole request head is in rbuf[0..end): answer it. */
static void http_request(struct client *c, size_t end)
{
	char method[16], path[256], version[16];
	char *line = c->rbuf, *eol = memchr(c->rbuf, '\n', end);
	bool nul = memchr(c->rbuf, '\0', end) != NULL;

	*eol = '\0';
	if (eol > line && eol[-1] == '\r')
		eol[-1] = '\0';
	if (nul || sscanf(line, "%15[A-Z] %255[^ ] %15s", method, path, version) != 3 ||
	    strncmp(version, "HTTP/1.", 7) != 0 || path[0] != '/') {
		http_status(c, "400 Bad Request");
		return;
	}
	if (strcmp(method, "GET") != 0) {
		http_status(c, "405 Method Not Allowed");
		return;
	}
	if (strcmp(path, "/snapshot") == 0) {
		snapshot_request(c, eol + 1, end - (size_t)(eol + 1 - c->rbuf));
		return;
	}
	if (strcmp(path, "/metrics") != 0 && strncmp(path, "/metrics?", 9) != 0) {
		http_status(c, "404 Not Found");
		return;
	}
	c->s->st.requests++;
	reply(c, reply_get(c->s, metrics_kind(path, eol + 1, (size_t)(c->rbuf + end - eol - 1))),
	      true);
}

/* A request line is in rbuf[0..nl]: answer it, keep what follows for later. */
static void unix_request(struct client *c, char *nl)
{
	size_t len = (size_t)(nl - c->rbuf); /* < RP_SERVE_REQUEST_MAX: rlen is capped */
	char line[RP_SERVE_REQUEST_MAX];

	memcpy(line, c->rbuf, len);
	line[len] = '\0';
	c->rlen -= len + 1;
	memmove(c->rbuf, nl + 1, c->rlen);
	if (len > 0 && line[len - 1] == '\r')
		line[--len] = '\0';
	if (memchr(line, '\0', len) != NULL) {
		reply_error(c, "error: NUL byte in the request\n");
	} else if (strcmp(line, "snapshot") == 0) {
		c->s->st.requests++;
		reply(c, reply_get(c->s, C_SNAPSHOT), false);
	} else if (strcmp(line, "metrics") == 0) {
		c->s->st.requests++;
		reply(c, reply_get(c->s, C_METRICS_FRAME), false);
	} else {
		reply_error(c, "error: unknown request (use \"snapshot\" or \"metrics\")\n");
	}
}

/* Answer the request in rbuf if it is whole; else read more. */
static void client_process(struct client *c)
{
	size_t cap = c->http ? RP_SERVE_HTTP_MAX : RP_SERVE_REQUEST_MAX;
	char *nl;
	size_t end;

	if (c->http) {
		end = rp_http_head_end(c->rbuf, c->rlen);
		if (end > 0)
			http_request(c, end);
		else if (c->rlen == cap)
			http_status(c, "431 Request Header Fields Too Large");
		else
			client_recv(c);
		return;
	}
	nl = memchr(c->rbuf, '\n', c->rlen);
	if (nl != NULL)
		unix_request(c, nl);
	else if (c->rlen == cap)
		reply_error(c, "error: request too long\n");
	else
		client_recv(c);
}

static void on_recv(void *ctx, int res)
{
	struct client *c = ctx;

	if (res <= 0 || c->shut) {
		client_close(c);
		return;
	}
	c->rlen += (size_t)res;
	c->last = now_ns();
	if (c->req_start == 0)
		c->req_start = c->last; /* unix: the request's first byte */
	client_process(c);
}

static void client_recv(struct client *c)
{
	size_t cap = c->http ? RP_SERVE_HTTP_MAX : RP_SERVE_REQUEST_MAX;

	if (rp_loop_recv(c->s->loop, c->fd, c->rbuf + c->rlen, cap - c->rlen, on_recv, c) < 0) {
		c->s->st.errors++;
		client_close(c);
	}
}

static void on_sent(void *ctx, int res)
{
	struct client *c = ctx;

	if (res <= 0 || c->shut) {
		if (res < 0 && !c->shut)
			c->s->st.errors++;
		client_close(c);
		return;
	}
	c->sent += (size_t)res;
	c->last = now_ns();
	if (c->sent < c->out->len) {
		client_send(c);
		return;
	}
	blob_put(c->out);
	c->out = NULL;
	c->req_start = c->rlen > 0 ? c->last : 0; /* the next request's clock */
	if (c->close_after)
		client_close(c);
	else
		client_process(c); /* a request sent meanwhile, or read the next one */
}

static void client_send(struct client *c)
{
	if (rp_loop_send(c->s->loop, c->fd, c->out->data + c->sent, c->out->len - c->sent, on_sent,
			 c) < 0) {
		c->s->st.errors++;
		client_close(c);
	}
}

/* --- listeners --- */

static void arm(struct listener *ls);

static bool same_uid(int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.uid == geteuid();
}

/* A free slot of the listener's own pool: HTTP clients cannot take the local
 * socket's slots (`ringprof top` stays served when /metrics is flooded). */
static struct client *client_slot(struct rp_serve *s, bool http)
{
	unsigned lo = http ? s->o.max_clients : 0;
	unsigned hi = http ? s->n_clients : s->o.max_clients;

	for (unsigned i = lo; i < hi; i++)
		if (s->clients[i].fd < 0)
			return &s->clients[i];
	return NULL;
}

/* Past the cap: say so before closing, so that a client can tell "busy" from "gone"
 * (one non-blocking send into an empty socket buffer; lost if it does not fit). */
static void refuse_busy(int fd, bool http, unsigned cap)
{
	static const char busy_http[] = "HTTP/1.1 503 Service Unavailable\r\n"
					"Content-Length: 0\r\nConnection: close\r\n\r\n";
	char msg[200], sink[512];
	int n;

	/* What the peer already sent, read away: TCP resets a connection closed with
	 * unread data, and the reset could overtake our answer. */
	for (int i = 0; i < 4 && recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0; i++)
		;
	if (http)
		n = snprintf(msg, sizeof(msg), "%s", busy_http);
	else
		n = snprintf(msg, sizeof(msg),
			     "error: busy: %u clients connected (--max-clients)\n", cap);
	if (n > 0 && send(fd, msg, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		(void)0; /* best effort: the close says the rest */
	close(fd);
}

static void on_accept(void *ctx, int res)
{
	struct listener *ls = ctx;
	struct rp_serve *s = ls->s;
	struct client *c;

	ls->armed = false;
	if (res < 0) {
		s->st.errors++; /* EMFILE and friends: the next tick tries again */
		return;
	}
	arm(ls);
	if (!ls->http && !same_uid(res)) {
		s->st.refused_uid++;
		close(res);
		return;
	}
	c = client_slot(s, ls->http);
	if (c == NULL) {
		s->st.refused_cap++;
		refuse_busy(res, ls->http, ls->http ? s->o.max_http_clients : s->o.max_clients);
		return;
	}
	s->st.accepted++;
	s->st.clients++;
	c->fd = res;
	c->http = ls->http;
	c->loopback = ls->http && peer_loopback(res);
	c->shut = false;
	c->rlen = 0;
	c->out = NULL;
	c->last = now_ns();
	c->req_start = c->http ? c->last : 0; /* HTTP: one request, due from the connect */
	client_recv(c);
}

static void arm(struct listener *ls)
{
	if (ls->fd < 0 || ls->armed)
		return;
	if (rp_loop_accept(ls->s->loop, ls->fd, on_accept, ls) >= 0)
		ls->armed = true;
	else
		ls->s->st.errors++;
}

void rp_serve_tick(struct rp_serve *s)
{
	uint64_t now = now_ns();

	for (unsigned i = 0; i < s->n_clients; i++) {
		struct client *c = &s->clients[i];
		/* A request must be whole within request_ns: trickled bytes are progress
		 * for the idle timeout, but not for this deadline. */
		bool late = c->out == NULL && c->req_start != 0 &&
			    now - c->req_start > s->o.request_ns;

		if (c->fd >= 0 && !c->shut && (late || now - c->last > s->o.idle_ns)) {
			c->shut = true;
			s->st.timeouts++;
			shutdown(c->fd, SHUT_RDWR); /* the pending operation ends */
		}
	}
	arm(&s->ls[0]);
	arm(&s->ls[1]);
}

/* --- opening --- */

/* Refuse a directory another user could swap the socket in: as for the snapshots
 * (docs/operations.md), ours or root's, and not writable by others unless sticky
 * (like /tmp: there only the socket's owner may remove or rename it). */
static int check_dir(const char *path, char why[RP_WHY_MAX])
{
	char dir[PATH_MAX];
	char *slash;
	struct stat st;

	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash == NULL)
		snprintf(dir, sizeof(dir), ".");
	else
		slash[slash == dir ? 1 : 0] = '\0';
	if (stat(dir, &st) < 0) {
		snprintf(why, RP_WHY_MAX, "%.100s: %s", dir, strerror(errno));
		return -errno;
	}
	if ((st.st_uid != geteuid() && st.st_uid != 0) ||
	    ((st.st_mode & 022) != 0 && (st.st_mode & S_ISVTX) == 0)) {
		snprintf(why, RP_WHY_MAX, "%.80s: not ours or root's, or shared and not sticky "
			 "(owner %u, mode %04o)", dir, (unsigned)st.st_uid,
			 (unsigned)(st.st_mode & 07777));
		return -EPERM;
	}
	return 0;
}

static int listen_unix(struct rp_serve *s, const char *path, char why[RP_WHY_MAX])
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct stat st;
	mode_t old;
	int fd, err;

	if (strlen(path) >= sizeof(a.sun_path)) {
		snprintf(why, RP_WHY_MAX, "%.100s: path too long for a unix socket", path);
		return -ENAMETOOLONG;
	}
	if ((err = check_dir(path, why)) != 0)
		return err;
	if (lstat(path, &st) == 0 && !S_ISSOCK(st.st_mode)) {
		snprintf(why, RP_WHY_MAX, "%.100s: exists and is not a socket", path);
		return -EEXIST;
	}
	unlink(path); /* a stale one: the engine marker says no other engine runs */
	memcpy(a.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		goto err;
	old = umask(0177); /* born 0600: no moment where another user may connect */
	err = bind(fd, (struct sockaddr *)&a, sizeof(a));
	umask(old);
	if (err < 0 || chmod(path, 0600) < 0 || listen(fd, 16) < 0)
		goto err;
	snprintf(s->unix_path, sizeof(s->unix_path), "%s", path);
	s->ls[0].fd = fd;
	return 0;
err:
	err = -errno;
	snprintf(why, RP_WHY_MAX, "%.100s: %s", path, strerror(errno));
	if (fd >= 0)
		close(fd);
	return err;
}

int rp_serve_parse_addr(const char *spec, struct sockaddr_storage *ss, socklen_t *len,
			bool *loopback)
{
	char host[64];
	const char *colon = strrchr(spec, ':');
	char *end;
	unsigned long port;
	size_t hl;

	if (colon == NULL || (hl = (size_t)(colon - spec)) == 0 || hl >= sizeof(host))
		return -EINVAL;
	port = strtoul(colon + 1, &end, 10);
	if (colon[1] == '\0' || *end != '\0' || port > 65535)
		return -EINVAL;
	memcpy(host, spec, hl);
	host[hl] = '\0';
	memset(ss, 0, sizeof(*ss));
	if (host[0] == '[' && host[hl - 1] == ']') {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;

		host[hl - 1] = '\0';
		a->sin6_family = AF_INET6;
		a->sin6_port = htons((uint16_t)port);
		if (inet_pton(AF_INET6, host + 1, &a->sin6_addr) != 1)
			return -EINVAL;
		*loopback = memcmp(&a->sin6_addr, &in6addr_loopback, sizeof(in6addr_loopback)) == 0;
		*len = sizeof(*a);
		return 0;
	}
	struct sockaddr_in *a = (struct sockaddr_in *)ss;

	a->sin_family = AF_INET;
	a->sin_port = htons((uint16_t)port);
	if (strcmp(host, "localhost") == 0)
		snprintf(host, sizeof(host), "127.0.0.1");
	if (inet_pton(AF_INET, host, &a->sin_addr) != 1)
		return -EINVAL;
	*loopback = (ntohl(a->sin_addr.s_addr) >> 24) == 127;
	*len = sizeof(*a);
	return 0;
}

static int listen_http(struct rp_serve *s, const char *spec, char why[RP_WHY_MAX])
{
	struct sockaddr_storage ss;
	socklen_t len;
	bool loopback;
	int fd, one = 1, err;

	if (rp_serve_parse_addr(spec, &ss, &len, &loopback) != 0) {
		snprintf(why, RP_WHY_MAX, "--prometheus %.60s: not HOST:PORT (127.0.0.1:9464)",
			 spec);
		return -EINVAL;
	}
	if (!loopback && !s->o.http_any && s->token_len == 0) {
		snprintf(
			why, RP_WHY_MAX,
			"--prometheus %.40s: not a loopback address (add --prometheus-any to serve "
			"the network)",
			spec);
		return -EPERM;
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 16) < 0) {
		err = -errno;
		snprintf(why, RP_WHY_MAX, "--prometheus %.60s: %s", spec, strerror(errno));
		if (fd >= 0)
			close(fd);
		return err;
	}
	s->ls[1].fd = fd;
	if (!loopback)
		snprintf(why, RP_WHY_MAX,
			 "warning: /metrics on %.60s is reachable from the network, unauthenticated%s",
			 spec, s->token_len ? " (/snapshot needs the token)" : "");
	return 0;
}

static int alloc_clients(struct rp_serve *s)
{
	s->n_clients = s->o.max_clients + s->o.max_http_clients;
	s->clients = calloc(s->n_clients, sizeof(*s->clients));
	if (s->clients == NULL)
		return -ENOMEM;
	for (unsigned i = 0; i < s->n_clients; i++) {
		s->clients[i] = (struct client){ .s = s, .fd = -1 };
		s->clients[i].rbuf = malloc(RP_SERVE_HTTP_MAX);
		if (s->clients[i].rbuf == NULL)
			return -ENOMEM;
	}
	return 0;
}

int rp_serve_open(struct rp_loop *loop, const struct rp_serve_opts *o, rp_serve_report_fn fn,
		  void *ctx, struct rp_serve **out, char why[RP_WHY_MAX])
{
	struct rp_serve *s = calloc(1, sizeof(*s));
	int err = -ENOMEM;

	why[0] = '\0';
	*out = NULL;
	if (s == NULL)
		return err;
	s->loop = loop;
	s->o = *o;
	s->fn = fn;
	s->ctx = ctx;
	s->o.max_clients = o->max_clients ? o->max_clients : MAX_CLIENTS_DEFAULT;
	s->o.max_http_clients = o->max_http_clients ? o->max_http_clients : s->o.max_clients;
	s->o.idle_ns = o->idle_ns ? o->idle_ns : IDLE_DEFAULT_NS;
	s->o.request_ns = o->request_ns ? o->request_ns : REQUEST_DEFAULT_NS;
	s->o.cache_ns = o->cache_ns ? o->cache_ns : CACHE_DEFAULT_NS;
	snprintf(s->prom_window, sizeof(s->prom_window), "%s",
		 o->prom_window ? o->prom_window : "");
	if (o->metrics_names != NULL) {
		if (regcomp(&s->names_re, o->metrics_names, REG_EXTENDED | REG_NOSUB) != 0) {
			snprintf(why, RP_WHY_MAX, "--metrics-names %.60s: not a regular expression",
				 o->metrics_names);
			err = -EINVAL;
			goto err_close;
		}
		s->has_re = true;
	}
	for (int i = 0; i < 2; i++)
		s->ls[i] = (struct listener){ .s = s, .fd = -1, .http = i == 1 };
	if (alloc_clients(s) != 0) {
		snprintf(why, RP_WHY_MAX, "serve: out of memory");
		goto err_close;
	}
	if (o->http_token_file && (err = read_token(s, o->http_token_file, why)) != 0)
		goto err_close;
	if (o->unix_path && (err = listen_unix(s, o->unix_path, why)) != 0)
		goto err_close;
	if (o->http_addr && (err = listen_http(s, o->http_addr, why)) != 0)
		goto err_close;
	arm(&s->ls[0]);
	arm(&s->ls[1]);
	*out = s;
	return 0;
err_close:
	rp_serve_close(s);
	return err;
}

void rp_serve_stats(const struct rp_serve *s, struct rp_serve_stats *out)
{
	*out = s->st;
}

void rp_serve_close(struct rp_serve *s)
{
	if (s == NULL)
		return;
	for (unsigned i = 0; s->clients != NULL && i < s->n_clients; i++) {
		if (s->clients[i].fd >= 0)
			client_close(&s->clients[i]);
		free(s->clients[i].rbuf);
	}
	free(s->clients);
	for (int i = 0; i < 2; i++)
		if (s->ls[i].fd >= 0)
			close(s->ls[i].fd);
	if (s->unix_path[0])
		unlink(s->unix_path);
	for (int k = 0; k < C_KINDS; k++)
		blob_put(s->cache[k]);
	if (s->has_re)
		regfree(&s->names_re);
	free(s);
}
