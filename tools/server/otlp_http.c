// SPDX-License-Identifier: MIT
/*
 * The OTLP/HTTP receiver (otlp_http.h): HTTP/1.1 framing, decompression and the
 * OTLP answers around the decoder and reorder buffer of engine/ingest/otlp.c.
 *
 * Each connection reads into its head buffer; once a whole head is there it is
 * parsed, and the body is taken from the same buffer as it comes (by Content-Length
 * or chunk by chunk) into a body buffer that grows up to max_body. A whole body is
 * gunzipped if need be, decoded and fed to the receiver at once, on the loop: no
 * body is held between loop turns beyond its connection's buffer. What follows a
 * body in the head buffer is the next request (pipelining) and waits for the answer
 * to be sent.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "negotiate.h"
#include "otlp_http.h"
#include "serve.h"

#define MAX_BODY_DEFAULT    (16u << 20)
#define MAX_CLIENTS_DEFAULT 16u
#define IDLE_DEFAULT_NS	    30000000000ull
#define REQUEST_DEFAULT_NS  10000000000ull
#define BODY_KEEP	    (1u << 20) /* a body buffer above this is freed after its request */

enum state { S_HEAD, S_BODY, S_SEND };
enum chunk { CH_SIZE, CH_DATA, CH_DATA_END, CH_TRAILER };

struct oclient {
	struct rp_otlp_http *h;
	int fd; /* -1: free */
	enum state state;
	bool shut, close_after;
	uint64_t last, req_start;
	char *rbuf; /* RP_SERVE_HTTP_MAX */
	size_t rlen;
	/* the request */
	bool json, gzip, chunked, keep;
	uint64_t left; /* body bytes still due (Content-Length) or of this chunk */
	enum chunk ch;
	char line[80];
	size_t line_len;
	unsigned char *body;
	size_t blen, bcap;
	/* the answer */
	char *out;
	size_t out_len, sent;
};

struct rp_otlp_http {
	struct rp_loop *loop;
	struct rp_otlp_http_opts o;
	struct rp_otlp *rx;
	int fd;
	bool armed;
	struct oclient *c;
	struct rp_otlp_http_stats st;
	unsigned clients;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void client_recv(struct oclient *c);
static void client_process(struct oclient *c);

static void client_close(struct oclient *c)
{
	close(c->fd);
	c->fd = -1;
	free(c->out);
	c->out = NULL;
	free(c->body);
	c->body = NULL;
	c->bcap = c->blen = 0;
	c->h->clients--;
}

/* --- answers --- */

static void on_sent(void *ctx, int res)
{
	struct oclient *c = ctx;

	if (res <= 0 || c->shut) {
		if (res < 0 && !c->shut)
			c->h->st.errors++;
		client_close(c);
		return;
	}
	c->sent += (size_t)res;
	c->last = now_ns();
	if (c->sent < c->out_len) {
		if (rp_loop_send(c->h->loop, c->fd, c->out + c->sent, c->out_len - c->sent, on_sent,
				 c) < 0) {
			c->h->st.errors++;
			client_close(c);
		}
		return;
	}
	free(c->out);
	c->out = NULL;
	if (c->close_after) {
		client_close(c);
		return;
	}
	c->state = S_HEAD;
	c->req_start = c->rlen > 0 ? c->last : 0;
	client_process(c); /* a pipelined request, or read the next one */
}

/* Send @status with @body (@type), then keep the connection or close it. */
static void answer(struct oclient *c, const char *status, const char *type, const void *body,
		   size_t len, bool close_after)
{
	char head[256];
	int hl;

	c->close_after = close_after || !c->keep;
	hl = snprintf(head, sizeof(head),
		      "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
		      "Connection: %s\r\n\r\n",
		      status, type, len, c->close_after ? "close" : "keep-alive");
	c->out = malloc((size_t)hl + len + 1);
	if (c->out == NULL) {
		c->h->st.errors++;
		client_close(c);
		return;
	}
	memcpy(c->out, head, (size_t)hl);
	if (len)
		memcpy(c->out + hl, body, len);
	c->out_len = (size_t)hl + len;
	c->sent = 0;
	c->state = S_SEND;
	if (rp_loop_send(c->h->loop, c->fd, c->out, c->out_len, on_sent, c) < 0) {
		c->h->st.errors++;
		client_close(c);
	}
}

static size_t put_varint(unsigned char *p, uint64_t v)
{
	size_t n = 0;

	do {
		p[n++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
	return n;
}

/* @s as a JSON string's contents into @out (cap >= 6 * strlen + 1). */
static void json_escape(const char *s, char *out)
{
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\') {
			*out++ = '\\';
			*out++ = (char)ch;
		} else if (ch < 0x20) {
			out += sprintf(out, "\\u%04x", ch);
		} else {
			*out++ = (char)ch;
		}
	}
	*out = '\0';
}

/* An error with a google.rpc.Status body (code 3 = INVALID_ARGUMENT) in the request's
 * encoding, as OTLP/HTTP answers failures. */
static void answer_status(struct oclient *c, const char *status, const char *msg, bool close_after)
{
	unsigned char pb[RP_WHY_MAX + 16];
	char js[RP_WHY_MAX * 6 + 64], esc[RP_WHY_MAX * 6 + 1];
	size_t n = strlen(msg) < RP_WHY_MAX ? strlen(msg) : RP_WHY_MAX - 1, k = 0;

	if (c->json) {
		char m[RP_WHY_MAX];
		snprintf(m, sizeof(m), "%.*s", (int)n, msg);
		json_escape(m, esc);
		snprintf(js, sizeof(js), "{\"code\":3,\"message\":\"%s\"}", esc);
		answer(c, status, "application/json", js, strlen(js), close_after);
		return;
	}
	pb[k++] = 0x08; /* code */
	pb[k++] = 3;
	pb[k++] = 0x12; /* message */
	k += put_varint(pb + k, n);
	memcpy(pb + k, msg, n);
	answer(c, status, "application/x-protobuf", pb, k + n, close_after);
}

/* 200: an ExportTraceServiceResponse, with partial_success if spans were rejected. */
static void answer_ok(struct oclient *c, uint64_t rejected, const char *why)
{
	unsigned char pb[RP_WHY_MAX + 40], inner[RP_WHY_MAX + 20];
	char js[RP_WHY_MAX * 6 + 96], esc[RP_WHY_MAX * 6 + 1];
	size_t k = 0, n = 0, wl = strlen(why);

	c->h->st.requests++;
	if (c->json) {
		if (rejected == 0) {
			answer(c, "200 OK", "application/json", "{}", 2, false);
			return;
		}
		json_escape(why, esc);
		snprintf(js, sizeof(js),
			 "{\"partialSuccess\":{\"rejectedSpans\":\"%" PRIu64
			 "\",\"errorMessage\":\"%s\"}}",
			 rejected, esc);
		answer(c, "200 OK", "application/json", js, strlen(js), false);
		return;
	}
	if (rejected > 0) {
		inner[n++] = 0x08;
		n += put_varint(inner + n, rejected);
		inner[n++] = 0x12;
		n += put_varint(inner + n, wl);
		memcpy(inner + n, why, wl);
		n += wl;
		pb[k++] = 0x0a;
		k += put_varint(pb + k, n);
		memcpy(pb + k, inner, n);
		k += n;
	}
	answer(c, "200 OK", "application/x-protobuf", pb, k, false);
}

static void answer_plain(struct oclient *c, const char *status)
{
	c->h->st.other++;
	answer(c, status, "text/plain", status, strlen(status), true);
}

/* --- the body --- */

static int gunzip(struct oclient *c, unsigned char **out, size_t *len)
{
	size_t cap = c->blen * 4 + 1024, max = c->h->o.max_body;
	z_stream z = { 0 };
	unsigned char *b;
	int r;

	if (cap > max)
		cap = max;
	if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
		return -ENOMEM;
	b = malloc(cap + 1);
	z.next_in = c->body;
	z.avail_in = (uInt)c->blen;
	for (;;) {
		if (b == NULL) {
			inflateEnd(&z);
			return -ENOMEM;
		}
		z.next_out = b + z.total_out;
		z.avail_out = (uInt)(cap - z.total_out);
		r = inflate(&z, Z_NO_FLUSH);
		if (r == Z_STREAM_END)
			break;
		if (r != Z_OK && r != Z_BUF_ERROR) {
			free(b);
			inflateEnd(&z);
			return -EINVAL;
		}
		if (z.avail_out > 0) { /* input ended before the stream did */
			free(b);
			inflateEnd(&z);
			return -EINVAL;
		}
		if (cap >= max) {
			free(b);
			inflateEnd(&z);
			return -EFBIG;
		}
		cap = cap * 2 < max ? cap * 2 : max;
		unsigned char *nb = realloc(b, cap + 1);
		if (nb == NULL)
			free(b);
		b = nb;
	}
	*len = z.total_out;
	inflateEnd(&z);
	*out = b;
	return 0;
}

/* A whole body: decode, feed, answer. */
static void handle_body(struct oclient *c)
{
	struct rp_otlp_decode_stats ds = { 0 };
	unsigned char *plain = c->body;
	size_t len = c->blen;
	char why[RP_WHY_MAX] = "";
	int err = 0;

	c->h->st.bytes += c->blen;
	if (c->gzip && (err = gunzip(c, &plain, &len)) != 0) {
		if (err == -EFBIG) {
			c->h->st.too_large++;
			answer_status(c, "413 Payload Too Large",
				      "body above --otlp-max-body "
				      "once decompressed",
				      true);
		} else if (err == -EINVAL) {
			c->h->st.bad++;
			answer_status(c, "400 Bad Request", "malformed gzip body", false);
		} else {
			c->h->st.errors++;
			answer_status(c, "500 Internal Server Error", "out of memory", true);
		}
		return;
	}
	if (len > 0)
		err = c->json ? rp_otlp_decode_json(plain, len, &c->h->o.decode, rp_otlp_add,
						    c->h->rx, &ds, why)
			      : rp_otlp_decode_pb(plain, len, &c->h->o.decode, rp_otlp_add,
						  c->h->rx, &ds, why);
	if (plain != c->body)
		free(plain);
	c->h->st.spans += ds.spans;
	c->h->st.rejected += ds.rejected;
	if (c->bcap > BODY_KEEP) {
		free(c->body);
		c->body = NULL;
		c->bcap = 0;
	}
	c->blen = 0;
	if (err == -EINVAL) {
		c->h->st.bad++;
		answer_status(c, "400 Bad Request", why, false);
	} else if (err != 0) {
		c->h->st.errors++;
		answer_status(c, "500 Internal Server Error", "out of memory", true);
	} else {
		answer_ok(c, ds.rejected,
			  ds.rejected ? "spans rejected: bad ids or times, past the "
					"per-request cap, or the receiver full (ringprof_otlp_*)"
				      : "");
	}
}

static bool body_put(struct oclient *c, const char *p, size_t n)
{
	if (c->blen + n > c->h->o.max_body)
		return false;
	if (c->blen + n > c->bcap) {
		size_t cap = c->bcap ? c->bcap : 65536;
		unsigned char *b;

		while (cap < c->blen + n)
			cap *= 2;
		if (cap > c->h->o.max_body)
			cap = c->h->o.max_body;
		b = realloc(c->body, cap);
		if (b == NULL)
			return false;
		c->body = b;
		c->bcap = cap;
	}
	memcpy(c->body + c->blen, p, n);
	c->blen += n;
	return true;
}

/* A line of the chunked framing, gathered in c->line; 1: whole, 0: more, -1: too long. */
static int chunk_line(struct oclient *c, size_t *i)
{
	while (*i < c->rlen) {
		char ch = c->rbuf[(*i)++];
		if (ch == '\n') {
			if (c->line_len > 0 && c->line[c->line_len - 1] == '\r')
				c->line_len--;
			c->line[c->line_len] = '\0';
			c->line_len = 0;
			return 1;
		}
		if (c->line_len + 1 >= sizeof(c->line))
			return -1;
		c->line[c->line_len++] = ch;
	}
	return 0;
}

/* Take body bytes from rbuf: 1 whole, 0 more needed, -EINVAL bad framing, -EFBIG. */
static int body_take(struct oclient *c)
{
	size_t i = 0;
	int r = 0;

	while (r == 0 && i < c->rlen) {
		size_t n = c->rlen - i;

		if (!c->chunked || c->ch == CH_DATA) {
			if (n > c->left)
				n = (size_t)c->left;
			if (!body_put(c, c->rbuf + i, n)) {
				r = -EFBIG;
				break;
			}
			i += n;
			c->left -= n;
			if (c->left == 0)
				r = c->chunked ? (c->ch = CH_DATA_END, 0) : 1;
			continue;
		}
		int l = chunk_line(c, &i);
		char *end;
		unsigned long long sz;

		if (l < 0) {
			r = -EINVAL;
		} else if (l == 0) {
			break;
		} else if (c->ch == CH_SIZE) {
			errno = 0;
			sz = strtoull(c->line, &end, 16);
			if (end == c->line || errno || (*end && *end != ';' && *end != ' '))
				r = -EINVAL;
			else if (sz > c->h->o.max_body - c->blen)
				r = -EFBIG;
			else if (sz == 0)
				c->ch = CH_TRAILER;
			else
				c->ch = CH_DATA, c->left = sz;
		} else if (c->ch == CH_DATA_END) {
			if (c->line[0] != '\0')
				r = -EINVAL;
			c->ch = CH_SIZE;
		} else if (c->line[0] == '\0') { /* the trailer's end */
			r = 1;
		}
	}
	if (!c->chunked && c->left == 0)
		r = r < 0 ? r : 1;
	c->rlen -= i;
	memmove(c->rbuf, c->rbuf + i, c->rlen);
	return r;
}

/* --- the head --- */

static bool has_token(const char *v, const char *tok)
{
	size_t n = strlen(tok);

	for (const char *p = v; *p; p++)
		if (strncasecmp(p, tok, n) == 0 && (p == v || !isalnum((unsigned char)p[-1])) &&
		    !isalnum((unsigned char)p[n]))
			return true;
	return false;
}

/* Parse the head in rbuf[0..end); false if it was answered (an error). */
static bool parse_head(struct oclient *c, size_t end)
{
	char method[16], path[256], version[16];
	bool has_len = false, ctype = false, v11;
	char *p = c->rbuf, *eol;

	c->json = c->gzip = c->chunked = false;
	c->left = 0;
	c->ch = CH_SIZE;
	c->line_len = 0;
	c->blen = 0;
	c->keep = true;
	if (memchr(c->rbuf, '\0', end) != NULL)
		goto bad;
	c->rbuf[end - 1] = '\0';
	eol = strchr(p, '\n');
	*eol = '\0';
	if (sscanf(p, "%15[A-Z] %255[^ \r] %15[^ \r]", method, path, version) != 3 ||
	    strncmp(version, "HTTP/1.", 7) != 0)
		goto bad;
	v11 = strcmp(version, "HTTP/1.0") != 0;
	c->keep = v11;
	for (p = eol + 1; *p; p = eol + 1) {
		char *colon, *v;

		eol = strchr(p, '\n');
		if (eol == NULL)
			eol = p + strlen(p) - 1;
		*eol = '\0';
		if (eol > p && eol[-1] == '\r')
			eol[-1] = '\0';
		if (*p == '\0')
			break;
		colon = strchr(p, ':');
		if (colon == NULL)
			goto bad;
		*colon = '\0';
		for (v = colon + 1; *v == ' ' || *v == '\t'; v++)
			;
		if (strcasecmp(p, "Content-Length") == 0) {
			char *e;
			errno = 0;
			c->left = strtoull(v, &e, 10);
			if (e == v || errno || (*e && *e != ' '))
				goto bad;
			has_len = true;
		} else if (strcasecmp(p, "Transfer-Encoding") == 0) {
			if (!has_token(v, "chunked"))
				goto unsupported;
			c->chunked = true;
		} else if (strcasecmp(p, "Content-Type") == 0) {
			ctype = true;
			if (strncasecmp(v, "application/json", 16) == 0)
				c->json = true;
			else if (strncasecmp(v, "application/x-protobuf", 22) != 0)
				goto unsupported;
		} else if (strcasecmp(p, "Content-Encoding") == 0) {
			if (strcasecmp(v, "gzip") == 0)
				c->gzip = true;
			else if (strcasecmp(v, "identity") != 0)
				goto unsupported;
		} else if (strcasecmp(p, "Connection") == 0) {
			if (has_token(v, "close"))
				c->keep = false;
			else if (has_token(v, "keep-alive"))
				c->keep = true;
		}
	}
	if (strcmp(path, "/v1/traces") != 0 && strncmp(path, "/v1/traces?", 11) != 0) {
		answer_plain(c, "404 Not Found");
		return false;
	}
	if (strcmp(method, "POST") != 0) {
		answer_plain(c, "405 Method Not Allowed");
		return false;
	}
	if (!ctype)
		goto unsupported;
	if (c->chunked && has_len)
		goto bad; /* RFC 9112: a request smuggling shape */
	if (!c->chunked && !has_len)
		goto bad; /* 411 in spirit; OTLP clients always frame their bodies */
	if (!c->chunked && c->left > c->h->o.max_body) {
		c->h->st.too_large++;
		answer_status(c, "413 Payload Too Large", "body above --otlp-max-body", true);
		return false;
	}
	return true;
bad:
	c->h->st.bad++;
	answer_status(c, "400 Bad Request", "malformed HTTP request", true);
	return false;
unsupported:
	c->h->st.unsupported++;
	answer_status(c, "415 Unsupported Media Type",
		      "application/x-protobuf or application/json, identity or gzip", true);
	return false;
}

static void client_process(struct oclient *c)
{
	size_t end;
	int r;

	if (c->state == S_HEAD) {
		end = rp_http_head_end(c->rbuf, c->rlen);
		if (end == 0) {
			if (c->rlen == RP_SERVE_HTTP_MAX)
				answer_plain(c, "431 Request Header Fields Too Large");
			else
				client_recv(c);
			return;
		}
		if (!parse_head(c, end))
			return;
		c->rlen -= end;
		memmove(c->rbuf, c->rbuf + end, c->rlen);
		c->state = S_BODY;
	}
	r = body_take(c);
	if (r == 0) {
		client_recv(c);
	} else if (r == -EFBIG) {
		c->h->st.too_large++;
		answer_status(c, "413 Payload Too Large", "body above --otlp-max-body", true);
	} else if (r < 0) {
		c->h->st.bad++;
		answer_status(c, "400 Bad Request", "malformed chunked body", true);
	} else {
		handle_body(c);
	}
}

static void on_recv(void *ctx, int res)
{
	struct oclient *c = ctx;

	if (res <= 0 || c->shut) {
		client_close(c);
		return;
	}
	c->rlen += (size_t)res;
	c->last = now_ns();
	if (c->req_start == 0)
		c->req_start = c->last;
	client_process(c);
}

static void client_recv(struct oclient *c)
{
	if (rp_loop_recv(c->h->loop, c->fd, c->rbuf + c->rlen, RP_SERVE_HTTP_MAX - c->rlen, on_recv,
			 c) < 0) {
		c->h->st.errors++;
		client_close(c);
	}
}

/* --- the listener --- */

static void arm(struct rp_otlp_http *h);

static void on_accept(void *ctx, int res)
{
	struct rp_otlp_http *h = ctx;
	struct oclient *c = NULL;

	h->armed = false;
	if (res < 0) {
		h->st.errors++;
		return;
	}
	arm(h);
	for (unsigned i = 0; i < h->o.max_clients && c == NULL; i++)
		if (h->c[i].fd < 0)
			c = &h->c[i];
	if (c == NULL) {
		static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\n"
					   "Content-Length: 0\r\nConnection: close\r\n\r\n";
		h->st.refused_cap++;
		if (send(res, busy, sizeof(busy) - 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
			(void)0; /* best effort: the close says the rest */
		close(res);
		return;
	}
	h->st.accepted++;
	h->clients++;
	c->fd = res;
	c->state = S_HEAD;
	c->shut = false;
	c->rlen = 0;
	c->out = NULL;
	c->last = now_ns();
	c->req_start = 0;
	client_recv(c);
}

static void arm(struct rp_otlp_http *h)
{
	if (h->fd < 0 || h->armed)
		return;
	if (rp_loop_accept(h->loop, h->fd, on_accept, h) >= 0)
		h->armed = true;
	else
		h->st.errors++;
}

void rp_otlp_http_tick(struct rp_otlp_http *h)
{
	uint64_t now = now_ns();

	for (unsigned i = 0; i < h->o.max_clients; i++) {
		struct oclient *c = &h->c[i];
		bool late = c->state != S_SEND && c->req_start != 0 &&
			    now - c->req_start > h->o.request_ns;

		if (c->fd >= 0 && !c->shut && (late || now - c->last > h->o.idle_ns)) {
			c->shut = true;
			h->st.timeouts++;
			shutdown(c->fd, SHUT_RDWR);
		}
	}
	arm(h);
}

int rp_otlp_http_open(struct rp_loop *loop, const struct rp_otlp_http_opts *o, struct rp_otlp *rx,
		      struct rp_otlp_http **out, char why[RP_WHY_MAX])
{
	struct rp_otlp_http *h = calloc(1, sizeof(*h));
	struct sockaddr_storage ss;
	char spec[128];
	socklen_t len;
	bool loopback;
	int one = 1, err;

	why[0] = '\0';
	*out = NULL;
	if (h == NULL)
		return -ENOMEM;
	h->loop = loop;
	h->o = *o;
	h->rx = rx;
	h->fd = -1;
	h->o.max_body = o->max_body ? o->max_body : MAX_BODY_DEFAULT;
	h->o.max_clients = o->max_clients ? o->max_clients : MAX_CLIENTS_DEFAULT;
	h->o.idle_ns = o->idle_ns ? o->idle_ns : IDLE_DEFAULT_NS;
	h->o.request_ns = o->request_ns ? o->request_ns : REQUEST_DEFAULT_NS;
	/* a host alone: the OTLP/HTTP port */
	if (strrchr(o->addr, ':') == NULL ||
	    (o->addr[0] == '[' && o->addr[strlen(o->addr) - 1] == ']'))
		snprintf(spec, sizeof(spec), "%.100s:%d", o->addr, RP_OTLP_PORT);
	else
		snprintf(spec, sizeof(spec), "%.120s", o->addr);
	if (rp_serve_parse_addr(spec, &ss, &len, &loopback) != 0) {
		snprintf(why, RP_WHY_MAX, "--otlp %.60s: not HOST:PORT (127.0.0.1:4318)", o->addr);
		rp_otlp_http_close(h);
		return -EINVAL;
	}
	if (!loopback && !o->any) {
		snprintf(why, RP_WHY_MAX,
			 "--otlp %.40s: not a loopback address (add --otlp-any to take spans from "
			 "the network)",
			 o->addr);
		rp_otlp_http_close(h);
		return -EPERM;
	}
	h->c = calloc(h->o.max_clients, sizeof(*h->c));
	for (unsigned i = 0; h->c && i < h->o.max_clients; i++)
		h->c[i] = (struct oclient){ .h = h, .fd = -1 };
	for (unsigned i = 0; h->c && i < h->o.max_clients; i++) {
		if ((h->c[i].rbuf = malloc(RP_SERVE_HTTP_MAX)) == NULL) {
			rp_otlp_http_close(h);
			return -ENOMEM;
		}
	}
	if (h->c == NULL) {
		rp_otlp_http_close(h);
		return -ENOMEM;
	}
	h->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (h->fd < 0 || setsockopt(h->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(h->fd, (struct sockaddr *)&ss, len) < 0 || listen(h->fd, 64) < 0) {
		err = -errno;
		snprintf(why, RP_WHY_MAX, "--otlp %.60s: %s", spec, strerror(errno));
		rp_otlp_http_close(h);
		return err;
	}
	if (!loopback)
		snprintf(why, RP_WHY_MAX,
			 "warning: OTLP on %.60s takes spans from the network, unauthenticated",
			 spec);
	arm(h);
	*out = h;
	return 0;
}

void rp_otlp_http_stats(const struct rp_otlp_http *h, struct rp_otlp_http_stats *out)
{
	*out = h->st;
}

void rp_otlp_http_metrics(const struct rp_otlp_http *h, FILE *m)
{
	struct rp_otlp_stats rs;
	const struct {
		const char *name, *help;
		uint64_t v;
	} c[] = {
		{ "requests", "OTLP requests answered 200.", h->st.requests },
		{ "bad_requests", "OTLP requests answered 400 (malformed).", h->st.bad },
		{ "too_large", "OTLP requests answered 413 (--otlp-max-body).", h->st.too_large },
		{ "unsupported", "OTLP requests answered 415.", h->st.unsupported },
		{ "other", "Requests answered 404, 405 or 431.", h->st.other },
		{ "refused_cap", "OTLP connections refused: max clients.", h->st.refused_cap },
		{ "timeouts", "OTLP connections shut down for making no progress.",
		  h->st.timeouts },
		{ "bytes", "OTLP body bytes received, as sent.", h->st.bytes },
		{ "spans", "Spans decoded and taken.", h->st.spans },
		{ "rejected", "Spans rejected (partial success).", h->st.rejected },
		{ "late",
		  "Spans that came after the reorder horizon passed their start: "
		  "not analysed.",
		  0 },
		{ "bad_spans", "Spans with an end before their start or before the clock.", 0 },
		{ "pending_capped", "Spans refused: the reorder buffer full.", 0 },
		{ "traces_capped", "Spans fed as a request of their own: open traces full.", 0 },
		{ "sources_capped", "Spans refused: no source row for their service.", 0 },
	};
	unsigned n = sizeof(c) / sizeof(c[0]);
	uint64_t v[sizeof(c) / sizeof(c[0])];

	rp_otlp_stats(h->rx, &rs);
	for (unsigned i = 0; i < n; i++)
		v[i] = c[i].v;
	v[n - 5] = rs.late;
	v[n - 4] = rs.bad;
	v[n - 3] = rs.pending_capped;
	v[n - 2] = rs.traces_capped;
	v[n - 1] = rs.sources_capped;
	for (unsigned i = 0; i < n; i++)
		fprintf(m,
			"# HELP ringprof_otlp_%s_total %s\n# TYPE ringprof_otlp_%s_total counter\n"
			"ringprof_otlp_%s_total %" PRIu64 "\n",
			c[i].name, c[i].help, c[i].name, c[i].name, v[i]);
	fprintf(m,
		"# HELP ringprof_otlp_pending_spans Spans held for the reorder horizon.\n"
		"# TYPE ringprof_otlp_pending_spans gauge\nringprof_otlp_pending_spans %u\n"
		"# HELP ringprof_otlp_open_traces Traces with spans open in the engine.\n"
		"# TYPE ringprof_otlp_open_traces gauge\nringprof_otlp_open_traces %u\n",
		rs.pending, rs.traces);
}

void rp_otlp_http_close(struct rp_otlp_http *h)
{
	if (h == NULL)
		return;
	for (unsigned i = 0; h->c && i < h->o.max_clients; i++) {
		if (h->c[i].fd >= 0)
			client_close(&h->c[i]);
		free(h->c[i].rbuf);
	}
	free(h->c);
	if (h->fd >= 0)
		close(h->fd);
	free(h);
}
