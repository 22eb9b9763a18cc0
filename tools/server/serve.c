// SPDX-License-Identifier: MIT
/*
 * The live endpoints (serve.h): a unix socket speaking one request line per reply,
 * and a minimal HTTP/1.1 server for Prometheus, both on the engine's loop through the
 * one HTTP core (http.h: connections, caps, timeouts, parsing, partial writes); this
 * file keeps the routing, the reports and the token. Replies are blobs with a
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

#include "http.h"
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

struct rp_serve {
	struct rp_loop *loop;
	struct rp_serve_opts o;
	rp_serve_report_fn fn;
	void *ctx;
	struct rp_http *ls[2]; /* unix (line mode), HTTP; NULL when not used */
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
	struct rp_serve_stats st;

	rp_serve_stats(s, &st);
	const struct {
		const char *name, *help;
		uint64_t v;
	} c[] = {
		{ "accepted", "Connections taken.", st.accepted },
		{ "refused_cap", "Connections closed at once: max clients connected.",
		  st.refused_cap },
		{ "refused_uid", "Socket peers of another uid, closed at once.",
		  st.refused_uid },
		{ "requests", "Requests answered with a report.", st.requests },
		{ "bad_requests", "Requests answered with an error.", st.bad_requests },
		{ "timeouts", "Connections shut down for making no progress.", st.timeouts },
		{ "reports", "Reports built for the live endpoints.", st.reports },
		{ "errors", "Failed accepts, reports or sends.", st.errors },
		{ "unauthorized", "GET /snapshot refused: no or a wrong token, or a "
				  "non-loopback peer with no token set (of bad_requests).",
		  st.unauthorized },
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
		st.clients);
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

/* --- answers --- */

static void blob_release(void *b)
{
	blob_put(b);
}

/* Answer @b (a new reference; NULL: an error that the report could not be built),
 * then maybe close. */
static void reply(struct rp_http_conn *c, struct blob *b, bool http, bool close_after)
{
	static const char fail_http[] = "HTTP/1.1 500 Internal Server Error\r\n"
					"Content-Length: 0\r\nConnection: close\r\n\r\n";
	static const char fail_unix[] = "error: cannot build the report\n";

	if (b == NULL) {
		if (http)
			rp_http_send(c, fail_http, sizeof(fail_http) - 1, NULL, NULL, true);
		else
			rp_http_send(c, fail_unix, sizeof(fail_unix) - 1, NULL, NULL, true);
		return;
	}
	rp_http_send(c, b->data, b->len, blob_release, b, close_after);
}

static void reply_error(struct rp_serve *s, struct rp_http_conn *c, const char *text)
{
	s->st.bad_requests++;
	rp_http_send(c, text, strlen(text), NULL, NULL, true);
}

static void http_status(struct rp_serve *s, struct rp_http_conn *c, const char *status)
{
	char body[64];
	int n = snprintf(body, sizeof(body), "%s\n", status);

	s->st.bad_requests++;
	rp_http_answer(c, status, NULL, "text/plain", body, (size_t)n, true);
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

static void http_unauthorized(struct rp_serve *s, struct rp_http_conn *c)
{
	static const char body[] = "401 Unauthorized\n";

	s->st.unauthorized++;
	s->st.bad_requests++;
	rp_http_answer(c, "401 Unauthorized", "WWW-Authenticate: Bearer realm=\"ringprof\"\r\n",
		       "text/plain", body, sizeof(body) - 1, true);
}

static void snapshot_request(struct rp_serve *s, struct rp_http_conn *c,
			     const struct rp_http_req *r)
{
	const char *v;
	size_t len = 0;

	if (s->token_len == 0 && !rp_http_conn_loopback(c)) {
		s->st.unauthorized++;
		http_status(s, c, "403 Forbidden");
		return;
	}
	if (s->token_len > 0) {
		v = rp_http_header(r->head, r->head_len, "Authorization", &len);
		if (v == NULL || len < 7 || strncasecmp(v, "Bearer ", 7) != 0 ||
		    !token_eq(v + 7, len - 7, s->token, s->token_len)) {
			http_unauthorized(s, c);
			return;
		}
	}
	s->st.requests++;
	reply(c, reply_get(s, C_SNAPSHOT_HTTP), true, true);
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

/* The HTTP listener's routes: a whole head (no body is ever read: each answer closes). */
static bool http_head(void *ctx, struct rp_http_conn *c, struct rp_http_req *r)
{
	struct rp_serve *s = ctx;

	if (strcmp(r->method, "GET") != 0) {
		http_status(s, c, "405 Method Not Allowed");
	} else if (strcmp(r->path, "/snapshot") == 0) {
		snapshot_request(s, c, r);
	} else if (strcmp(r->path, "/metrics") != 0 && strncmp(r->path, "/metrics?", 9) != 0) {
		http_status(s, c, "404 Not Found");
	} else {
		s->st.requests++;
		reply(c, reply_get(s, metrics_kind(r->path, r->head, r->head_len)), true, true);
	}
	return false;
}

static void http_refuse(void *ctx, struct rp_http_conn *c, const struct rp_http_req *r,
			int status, const char *why)
{
	(void)r;
	(void)why;
	http_status(ctx, c, rp_http_reason(status));
}

/* The unix socket's request lines; the connection stays for the next. */
static void unix_line(void *ctx, struct rp_http_conn *c, const char *line, size_t len)
{
	struct rp_serve *s = ctx;

	if (memchr(line, '\0', len) != NULL) {
		reply_error(s, c, "error: NUL byte in the request\n");
	} else if (strcmp(line, "snapshot") == 0) {
		s->st.requests++;
		reply(c, reply_get(s, C_SNAPSHOT), false, false);
	} else if (strcmp(line, "metrics") == 0) {
		s->st.requests++;
		reply(c, reply_get(s, C_METRICS_FRAME), false, false);
	} else {
		reply_error(s, c, "error: unknown request (use \"snapshot\" or \"metrics\")\n");
	}
}

static void unix_refuse(void *ctx, struct rp_http_conn *c, const struct rp_http_req *r,
			int status, const char *why)
{
	(void)r;
	(void)status;
	(void)why; /* a line too long: the only refusal of line mode */
	reply_error(ctx, c, "error: request too long\n");
}

/* Peers of another uid are refused (serve.h). */
static bool same_uid(void *ctx, int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	(void)ctx;
	return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.uid == geteuid();
}

void rp_serve_tick(struct rp_serve *s)
{
	for (int i = 0; i < 2; i++)
		if (s->ls[i] != NULL)
			rp_http_tick(s->ls[i]);
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

/* Serve the listening @fd (0: the unix socket's lines, 1: HTTP) through the core. */
static int serve_fd(struct rp_serve *s, int i, int fd)
{
	static const struct rp_http_handler unix_hd = {
		.line = unix_line, .refuse = unix_refuse, .admit = same_uid,
	};
	static const struct rp_http_handler http_hd = { .head = http_head, .refuse = http_refuse };
	static const char busy_http[] = "HTTP/1.1 503 Service Unavailable\r\n"
					"Content-Length: 0\r\nConnection: close\r\n\r\n";
	char busy_unix[128];
	struct rp_http_opts o = {
		.lines = i == 0,
		.head_max = i == 0 ? RP_SERVE_REQUEST_MAX : RP_SERVE_HTTP_MAX,
		.max_clients = i == 0 ? s->o.max_clients : s->o.max_http_clients,
		.idle_ns = s->o.idle_ns,
		.request_ns = s->o.request_ns,
		.deadline_from_connect = i == 1, /* HTTP: one request, due from the connect */
		.busy = busy_http,
	};

	if (i == 0) {
		snprintf(busy_unix, sizeof(busy_unix),
			 "error: busy: %u clients connected (--max-clients)\n", o.max_clients);
		o.busy = busy_unix;
	}
	return rp_http_open(s->loop, fd, &o, i == 0 ? &unix_hd : &http_hd, s, &s->ls[i]);
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
	if ((err = serve_fd(s, 0, fd)) != 0)
		snprintf(why, RP_WHY_MAX, "%.100s: %s", path, strerror(-err));
	return err;
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
	int fd, err;

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
	fd = rp_http_listen_tcp(&ss, len, 16);
	if (fd < 0 || (err = serve_fd(s, 1, fd)) != 0) {
		err = fd < 0 ? fd : err;
		snprintf(why, RP_WHY_MAX, "--prometheus %.60s: %s", spec, strerror(-err));
		return err;
	}
	if (!loopback)
		snprintf(why, RP_WHY_MAX,
			 "warning: /metrics on %.60s is reachable from the network, unauthenticated%s",
			 spec, s->token_len ? " (/snapshot needs the token)" : "");
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
	if (o->http_token_file && (err = read_token(s, o->http_token_file, why)) != 0)
		goto err_close;
	if (o->unix_path && (err = listen_unix(s, o->unix_path, why)) != 0)
		goto err_close;
	if (o->http_addr && (err = listen_http(s, o->http_addr, why)) != 0)
		goto err_close;
	*out = s;
	return 0;
err_close:
	rp_serve_close(s);
	return err;
}

/* The server's own counters, and its two listeners' (http.h). */
void rp_serve_stats(const struct rp_serve *s, struct rp_serve_stats *out)
{
	struct rp_http_stats hs;

	*out = s->st;
	for (int i = 0; i < 2; i++) {
		if (s->ls[i] == NULL)
			continue;
		rp_http_stats(s->ls[i], &hs);
		out->accepted += hs.accepted;
		out->refused_cap += hs.refused_cap;
		out->refused_uid += hs.refused_peer;
		out->timeouts += hs.timeouts;
		out->errors += hs.errors;
		out->clients += hs.clients;
	}
}

void rp_serve_close(struct rp_serve *s)
{
	if (s == NULL)
		return;
	for (int i = 0; i < 2; i++)
		rp_http_close(s->ls[i]);
	if (s->unix_path[0])
		unlink(s->unix_path);
	for (int k = 0; k < C_KINDS; k++)
		blob_put(s->cache[k]);
	if (s->has_re)
		regfree(&s->names_re);
	free(s);
}
