// SPDX-License-Identifier: MIT
/*
 * The HTTP core (http.h): connections, framing and answers for both listeners.
 *
 * Each connection is a small state machine with exactly one loop operation in flight:
 * HEAD (a recv into its bounded head buffer until a whole head, or line, is there),
 * BODY (recvs until the body is whole; what it reads beyond is the next request), SEND
 * (the answer, through partial writes), then HEAD again or a close. Closing happens
 * only in a callback, when nothing is in flight, so a buffer is never freed under the
 * kernel; a timeout shuts the socket down, which ends the pending operation and so
 * reaches that callback. The parser is strict where lenience lets two readers of one
 * request disagree (request smuggling): digits only in Content-Length and chunk sizes,
 * no "0x", no sign, no line folding, no control bytes, one framing at a time.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "http.h"

#define BODY_KEEP (1u << 20) /* a body buffer above this is freed after its request */
#define BUSY_MAX  200u
#define TRAILER_MAX 8192u /* bytes of a chunked body's trailer lines */

enum state { S_HEAD, S_BODY, S_SEND };
enum chunk { CH_SIZE, CH_DATA, CH_DATA_END, CH_TRAILER };

struct rp_http_conn {
	struct rp_http *h;
	int fd; /* -1: the slot is free */
	enum state state;
	bool shut;	  /* shut down for a timeout: the pending op ends soon */
	bool close_after; /* close once this answer is sent */
	bool must_close;  /* refused, or a body left unread: close after the answer */
	bool loopback;
	uint64_t last;	    /* CLOCK_MONOTONIC ns of the last progress */
	uint64_t req_start; /* when the request now awaited began; 0: none yet */
	char *rbuf;	    /* head_max bytes */
	size_t rlen;
	struct rp_http_req req;
	struct rp_http_body body;
	const char *out;
	size_t out_len, sent;
	void (*release)(void *);
	void *ref;
};

struct rp_http {
	struct rp_loop *loop;
	struct rp_http_opts o;
	struct rp_http_handler hd;
	void *ctx;
	int fd;
	bool armed; /* an accept is in flight */
	struct rp_http_conn *c;
	struct rp_http_stats st;
	char busy[BUSY_MAX];
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* --- the parser --- */

size_t rp_http_head_end(const char *b, size_t n)
{
	for (size_t i = 0; i + 1 < n; i++) {
		if (b[i] == '\n' && b[i + 1] == '\n')
			return i + 2;
		if (i + 3 < n && memcmp(b + i, "\r\n\r\n", 4) == 0)
			return i + 4;
	}
	return 0;
}

/* RFC 9110 tchar: what a method or a header name is made of. */
static bool is_tchar(unsigned char ch)
{
	return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	       (ch != '\0' && strchr("!#$%&'*+-.^_`|~", ch) != NULL);
}

static bool is_blank(char ch)
{
	return ch == ' ' || ch == '\t';
}

bool rp_http_has_token(const char *v, size_t n, const char *tok)
{
	size_t tl = strlen(tok);

	for (size_t i = 0; i < n;) {
		size_t s, e;

		while (i < n && (is_blank(v[i]) || v[i] == ','))
			i++;
		s = i;
		while (i < n && v[i] != ',')
			i++;
		e = i;
		while (e > s && is_blank(v[e - 1]))
			e--;
		if (e - s == tl && strncasecmp(v + s, tok, tl) == 0)
			return true;
	}
	return false;
}

/* The line [p, eol) without its '\r'; false if it holds a control byte (HTAB aside). */
static bool line_clean(const char *p, const char **eol)
{
	if (*eol > p && (*eol)[-1] == '\r')
		(*eol)--;
	for (const char *q = p; q < *eol; q++)
		if (((unsigned char)*q < 0x20 && *q != '\t') || *q == 0x7f)
			return false;
	return true;
}

/* "METHOD SP target SP HTTP/1.x": exactly that. */
static int parse_request_line(const char *p, const char *eol, struct rp_http_req *r)
{
	const char *sp1 = memchr(p, ' ', (size_t)(eol - p)), *sp2, *v;
	size_t ml, pl;

	if (sp1 == NULL || (ml = (size_t)(sp1 - p)) == 0 || ml >= RP_HTTP_METHOD_MAX)
		return -EINVAL;
	for (size_t i = 0; i < ml; i++)
		if (p[i] < 'A' || p[i] > 'Z')
			return -EINVAL;
	sp2 = memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1));
	if (sp2 == NULL || (pl = (size_t)(sp2 - sp1 - 1)) == 0 || pl >= RP_HTTP_PATH_MAX ||
	    sp1[1] != '/')
		return -EINVAL;
	v = sp2 + 1;
	if (eol - v != 8 || memcmp(v, "HTTP/1.", 7) != 0 || v[7] < '0' || v[7] > '9')
		return -EINVAL;
	memcpy(r->method, p, ml);
	r->method[ml] = '\0';
	memcpy(r->path, sp1 + 1, pl);
	r->path[pl] = '\0';
	r->keep = v[7] != '0'; /* HTTP/1.1 keeps by default, 1.0 does not */
	return 0;
}

/* 1*DIGIT, at most 19 of them (no sign, no blank inside: lenience here smuggles). */
static int parse_length(const char *v, size_t n, uint64_t *out)
{
	uint64_t x = 0;

	if (n == 0 || n > 19)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (v[i] < '0' || v[i] > '9')
			return -EINVAL;
		x = x * 10 + (uint64_t)(v[i] - '0');
	}
	*out = x;
	return 0;
}

/* One header line [p, eol) (its '\r' cut): the framing and Connection headers. */
static int parse_header(const char *p, const char *eol, struct rp_http_req *r)
{
	const char *colon = memchr(p, ':', (size_t)(eol - p)), *v;
	size_t nl, vl;
	uint64_t len;

	if (colon == NULL || colon == p)
		return -EINVAL;
	for (const char *q = p; q < colon; q++) /* also refuses obsolete line folding */
		if (!is_tchar((unsigned char)*q))
			return -EINVAL;
	nl = (size_t)(colon - p);
	for (v = colon + 1; v < eol && is_blank(*v); v++)
		;
	for (vl = (size_t)(eol - v); vl > 0 && is_blank(v[vl - 1]); vl--)
		;
	if (nl == 14 && strncasecmp(p, "Content-Length", 14) == 0) {
		if (parse_length(v, vl, &len) != 0 || (r->has_len && len != r->len))
			return -EINVAL;
		r->has_len = true;
		r->len = len;
	} else if (nl == 17 && strncasecmp(p, "Transfer-Encoding", 17) == 0) {
		if (rp_http_has_token(v, vl, "chunked"))
			r->chunked = true;
		else
			r->te_other = true;
	} else if (nl == 10 && strncasecmp(p, "Connection", 10) == 0) {
		if (rp_http_has_token(v, vl, "close"))
			r->keep = false;
		else if (rp_http_has_token(v, vl, "keep-alive"))
			r->keep = true;
	}
	return 0;
}

int rp_http_parse_head(const char *b, size_t end, struct rp_http_req *r)
{
	const char *p = b, *lim = b + end, *nl, *eol;

	*r = (struct rp_http_req){ 0 };
	if (end == 0 || memchr(b, '\0', end) != NULL)
		return -EINVAL;
	for (bool first = true;; first = false) {
		nl = memchr(p, '\n', (size_t)(lim - p));
		if (nl == NULL)
			return -EINVAL; /* not a head that rp_http_head_end found */
		eol = nl;
		if (!line_clean(p, &eol))
			return -EINVAL;
		if (first) {
			if (parse_request_line(p, eol, r) != 0)
				return -EINVAL;
			r->head = nl + 1;
			r->head_len = (size_t)(lim - nl - 1);
		} else if (eol == p) {
			return nl + 1 == lim ? 0 : -EINVAL; /* the blank line ends the head */
		} else if (parse_header(p, eol, r) != 0) {
			return -EINVAL;
		}
		p = nl + 1;
	}
}

const char *rp_http_header(const char *head, size_t head_len, const char *name, size_t *len)
{
	size_t nl = strlen(name);

	for (const char *p = head, *end = head + head_len; p < end;) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		size_t ll = (size_t)((eol ? eol : end) - p);

		if (ll > nl && p[nl] == ':' && strncasecmp(p, name, nl) == 0) {
			const char *v = p + nl + 1;

			while (v < p + ll && is_blank(*v))
				v++;
			*len = (size_t)(p + ll - v);
			while (*len > 0 && (v[*len - 1] == '\r' || is_blank(v[*len - 1])))
				(*len)--;
			return v;
		}
		p += ll + 1;
	}
	return NULL;
}

/* --- bodies --- */

void rp_http_body_start(struct rp_http_body *b, const struct rp_http_req *r, size_t max)
{
	b->len = 0;
	b->max = max;
	b->chunked = r->chunked;
	b->left = r->chunked ? 0 : r->len;
	b->ch = CH_SIZE;
	b->line_len = 0;
	b->trailer = 0;
}

void rp_http_body_free(struct rp_http_body *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

static int body_put(struct rp_http_body *b, const char *p, size_t n)
{
	if (n > b->max - b->len)
		return -EFBIG;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 65536;
		unsigned char *d;

		while (cap < b->len + n)
			cap *= 2;
		if (cap > b->max)
			cap = b->max;
		d = realloc(b->data, cap);
		if (d == NULL)
			return -ENOMEM;
		b->data = d;
		b->cap = cap;
	}
	memcpy(b->data + b->len, p, n);
	b->len += n;
	return 0;
}

/* A line of the chunked framing, gathered in b->line; 1: whole, 0: more, -1: too long. */
static int chunk_line(struct rp_http_body *b, const char *in, size_t n, size_t *i)
{
	while (*i < n) {
		char ch = in[(*i)++];

		if (ch == '\n') {
			if (b->line_len > 0 && b->line[b->line_len - 1] == '\r')
				b->line_len--;
			b->line[b->line_len] = '\0';
			return 1;
		}
		if (b->line_len + 1 >= sizeof(b->line))
			return -1;
		b->line[b->line_len++] = ch;
	}
	return 0;
}

static int hex_digit(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	ch = (char)(ch | 0x20);
	return ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

/* "1*HEXDIG [BWS] [; ext]": the size, -EINVAL, or -EFBIG above what is left of max. */
static int chunk_size(const struct rp_http_body *b, uint64_t *out)
{
	const char *p = b->line;
	uint64_t v = 0;
	bool big = false;
	int d;

	if (hex_digit(*p) < 0)
		return -EINVAL;
	for (; (d = hex_digit(*p)) >= 0; p++) {
		if (v >> 56)
			big = true; /* saturate: no wrap can make it look small */
		else
			v = v << 4 | (uint64_t)d;
	}
	while (is_blank(*p))
		p++;
	if (*p != '\0' && *p != ';')
		return -EINVAL;
	if (big || v > b->max - b->len)
		return -EFBIG;
	*out = v;
	return 0;
}

/* One framing line of a chunked body: 1 whole, 0 go on, < 0 an error. */
static int chunk_step(struct rp_http_body *b)
{
	uint64_t sz;
	int err;

	switch (b->ch) {
	case CH_SIZE:
		if ((err = chunk_size(b, &sz)) != 0)
			return err;
		b->ch = sz ? CH_DATA : CH_TRAILER;
		b->left = sz;
		return 0;
	case CH_DATA_END:
		b->ch = CH_SIZE;
		return b->line[0] == '\0' ? 0 : -EINVAL;
	default: /* trailer lines until a blank one, capped like a head */
		if (b->line[0] == '\0')
			return 1;
		b->trailer += b->line_len + 2;
		return b->trailer > TRAILER_MAX ? -EINVAL : 0;
	}
}

int rp_http_body_take(struct rp_http_body *b, const char *in, size_t n, size_t *used)
{
	size_t i = 0;
	int r = 0;

	if (!b->chunked && b->left == 0) {
		*used = 0;
		return 1;
	}
	while (r == 0 && i < n) {
		if (!b->chunked || b->ch == CH_DATA) {
			size_t k = n - i < b->left ? n - i : (size_t)b->left;

			if ((r = body_put(b, in + i, k)) != 0)
				break;
			i += k;
			b->left -= k;
			if (b->left == 0)
				r = b->chunked ? (b->ch = CH_DATA_END, 0) : 1;
			continue;
		}
		r = chunk_line(b, in, n, &i);
		if (r == 0)
			break;
		if (r < 0) {
			r = -EINVAL;
			break;
		}
		r = chunk_step(b);
		b->line_len = 0;
	}
	*used = i;
	return r;
}

/* --- connections --- */

static void conn_recv(struct rp_http_conn *c);
static void conn_process(struct rp_http_conn *c);

static void conn_release_out(struct rp_http_conn *c)
{
	if (c->release != NULL)
		c->release(c->ref);
	c->release = NULL;
	c->out = NULL;
}

static void conn_close(struct rp_http_conn *c)
{
	close(c->fd);
	c->fd = -1;
	conn_release_out(c);
	rp_http_body_free(&c->body);
	c->h->st.clients--;
}

static void conn_fail(struct rp_http_conn *c)
{
	c->h->st.errors++;
	conn_close(c);
}

static void on_sent(void *ctx, int res)
{
	struct rp_http_conn *c = ctx;

	if (res <= 0 || c->shut) {
		if (res < 0 && !c->shut)
			c->h->st.errors++;
		conn_close(c);
		return;
	}
	c->sent += (size_t)res;
	c->last = now_ns();
	if (c->sent < c->out_len) {
		if (rp_loop_send(c->h->loop, c->fd, c->out + c->sent, c->out_len - c->sent, on_sent,
				 c) < 0)
			conn_fail(c);
		return;
	}
	conn_release_out(c);
	if (c->close_after) {
		conn_close(c);
		return;
	}
	c->state = S_HEAD;
	c->req_start = c->rlen > 0 ? c->last : 0; /* the next request's clock */
	conn_process(c); /* a pipelined request, or read the next one */
}

void rp_http_send(struct rp_http_conn *c, const void *data, size_t len, void (*release)(void *),
		  void *ref, bool close_after)
{
	if (release == NULL) {
		char *copy = malloc(len ? len : 1);

		if (copy == NULL) {
			conn_fail(c);
			return;
		}
		memcpy(copy, data, len);
		data = copy;
		release = free;
		ref = copy;
	}
	c->out = data;
	c->out_len = len;
	c->sent = 0;
	/* The idle clock restarts here: the time the engine took to build the answer is
	 * its own, not the client's (a slow build let the tick shut a client whose answer
	 * was queued: test_serve under TSan). */
	c->last = now_ns();
	c->release = release;
	c->ref = ref;
	c->close_after = close_after || c->must_close;
	c->state = S_SEND;
	if (rp_loop_send(c->h->loop, c->fd, c->out, c->out_len, on_sent, c) < 0)
		conn_fail(c);
}

void rp_http_answer(struct rp_http_conn *c, const char *status, const char *headers,
		    const char *type, const void *body, size_t len, bool close_after)
{
	bool close = close_after || c->must_close || !c->req.keep;
	char *out = NULL;
	size_t n = 0;
	FILE *m = open_memstream(&out, &n);

	if (m == NULL) {
		conn_fail(c);
		return;
	}
	fprintf(m, "HTTP/1.1 %s\r\n%s", status, headers ? headers : "");
	if (type != NULL)
		fprintf(m, "Content-Type: %s\r\n", type);
	fprintf(m, "Content-Length: %zu\r\nConnection: %s\r\n\r\n", len,
		close ? "close" : "keep-alive");
	if (len > 0)
		fwrite(body, 1, len, m);
	if (fclose(m) != 0) {
		free(out);
		conn_fail(c);
		return;
	}
	rp_http_send(c, out, n, free, out, close);
}

const char *rp_http_reason(int status)
{
	switch (status) {
	case 400:
		return "400 Bad Request";
	case 413:
		return "413 Payload Too Large";
	case 415:
		return "415 Unsupported Media Type";
	case 431:
		return "431 Request Header Fields Too Large";
	default:
		return "500 Internal Server Error";
	}
}

bool rp_http_conn_loopback(const struct rp_http_conn *c)
{
	return c->loopback;
}

/* The handler was to answer: if it did not, the request cannot be left hanging. */
static void after_handler(struct rp_http_conn *c)
{
	if (c->fd >= 0 && c->state != S_SEND)
		conn_fail(c);
}

static void refuse(struct rp_http_conn *c, int status, uint64_t *counter, const char *why)
{
	(*counter)++;
	c->must_close = true;
	c->h->hd.refuse(c->h->ctx, c, &c->req, status, why);
	after_handler(c);
}

/* Drop @n bytes from the front of the head buffer. */
static void consume(struct rp_http_conn *c, size_t n)
{
	c->rlen -= n;
	memmove(c->rbuf, c->rbuf + n, c->rlen);
}

static void line_process(struct rp_http_conn *c)
{
	char *nl = memchr(c->rbuf, '\n', c->rlen);
	size_t len;

	if (nl == NULL) {
		if (c->rlen == c->h->o.head_max)
			refuse(c, 431, &c->h->st.head_too_large, "request too long");
		else
			conn_recv(c);
		return;
	}
	len = (size_t)(nl - c->rbuf);
	*nl = '\0';
	if (len > 0 && c->rbuf[len - 1] == '\r')
		c->rbuf[--len] = '\0';
	c->req = (struct rp_http_req){ .keep = true };
	c->h->hd.line(c->h->ctx, c, c->rbuf, len);
	consume(c, (size_t)(nl + 1 - c->rbuf)); /* the answer is on its way: keep what follows */
	after_handler(c);
}

/* A whole head is in rbuf[0..end): parse it, route it, start its body. */
static void head_process(struct rp_http_conn *c, size_t end)
{
	struct rp_http_stats *st = &c->h->st;
	struct rp_http_req *r = &c->req;

	if (rp_http_parse_head(c->rbuf, end, r) != 0) {
		refuse(c, 400, &st->bad_head, "malformed HTTP request");
		return;
	}
	/* An answer given now leaves the body unread: it would be read as the next
	 * request, so that answer closes. */
	c->must_close = r->chunked || r->te_other || (r->has_len && r->len > 0);
	if (!c->h->hd.head(c->h->ctx, c, r)) {
		consume(c, end);
		after_handler(c);
		return;
	}
	c->must_close = false;
	consume(c, end);
	if (r->te_other)
		refuse(c, 415, &st->unsupported_te, "unsupported transfer coding");
	else if (r->chunked && r->has_len)
		refuse(c, 400, &st->bad_body, "both Content-Length and chunked"); /* RFC 9112 */
	else if (r->has_len && r->len > c->h->o.max_body)
		refuse(c, 413, &st->body_too_large, "body too large");
	else {
		rp_http_body_start(&c->body, r, c->h->o.max_body);
		c->state = S_BODY;
		conn_process(c);
	}
}

static void body_process(struct rp_http_conn *c)
{
	struct rp_http_stats *st = &c->h->st;
	size_t used;
	int r = rp_http_body_take(&c->body, c->rbuf, c->rlen, &used);

	consume(c, used);
	if (r == 0) {
		conn_recv(c);
	} else if (r == -EFBIG) {
		refuse(c, 413, &st->body_too_large, "body too large");
	} else if (r == -EINVAL) {
		refuse(c, 400, &st->bad_body, "malformed chunked body");
	} else if (r < 0) {
		conn_fail(c);
	} else {
		c->h->hd.body(c->h->ctx, c, &c->req, c->body.data, c->body.len);
		if (c->fd >= 0 && c->body.cap > BODY_KEEP)
			rp_http_body_free(&c->body);
		after_handler(c);
	}
}

/* Answer what rbuf holds if it is whole; else read more. */
static void conn_process(struct rp_http_conn *c)
{
	size_t end;

	if (c->state == S_BODY) {
		body_process(c);
		return;
	}
	c->must_close = false;
	if (c->h->o.lines) {
		line_process(c);
		return;
	}
	end = rp_http_head_end(c->rbuf, c->rlen);
	if (end > 0)
		head_process(c, end);
	else if (c->rlen == c->h->o.head_max)
		refuse(c, 431, &c->h->st.head_too_large, "request head too large");
	else
		conn_recv(c);
}

static void on_recv(void *ctx, int res)
{
	struct rp_http_conn *c = ctx;

	if (res <= 0 || c->shut) {
		conn_close(c);
		return;
	}
	c->rlen += (size_t)res;
	c->last = now_ns();
	if (c->req_start == 0)
		c->req_start = c->last; /* the request's first byte */
	conn_process(c);
}

static void conn_recv(struct rp_http_conn *c)
{
	if (rp_loop_recv(c->h->loop, c->fd, c->rbuf + c->rlen, c->h->o.head_max - c->rlen,
			 on_recv, c) < 0)
		conn_fail(c);
}

/* --- the listener --- */

static void arm(struct rp_http *h);

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

/* Past the cap: say so before closing, so that a client can tell "busy" from "gone"
 * (one non-blocking send into an empty socket buffer; lost if it does not fit). */
static void refuse_busy(struct rp_http *h, int fd)
{
	char sink[512];

	/* What the peer already sent, read away: TCP resets a connection closed with
	 * unread data, and the reset could overtake our answer. */
	for (int i = 0; i < 4 && recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0; i++)
		;
	if (h->busy[0] && send(fd, h->busy, strlen(h->busy), MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		(void)0; /* best effort: the close says the rest */
	close(fd);
}

static struct rp_http_conn *free_slot(struct rp_http *h)
{
	for (unsigned i = 0; i < h->o.max_clients; i++)
		if (h->c[i].fd < 0)
			return &h->c[i];
	return NULL;
}

static void on_accept(void *ctx, int res)
{
	struct rp_http *h = ctx;
	struct rp_http_conn *c;

	h->armed = false;
	if (res < 0) {
		h->st.errors++; /* EMFILE and friends: the next tick tries again */
		return;
	}
	arm(h);
	if (h->hd.admit != NULL && !h->hd.admit(h->ctx, res)) {
		h->st.refused_peer++;
		close(res);
		return;
	}
	c = free_slot(h);
	if (c == NULL) {
		h->st.refused_cap++;
		refuse_busy(h, res);
		return;
	}
	h->st.accepted++;
	h->st.clients++;
	c->fd = res;
	c->state = S_HEAD;
	c->shut = false;
	c->rlen = 0;
	c->out = NULL;
	c->release = NULL;
	c->loopback = peer_loopback(res);
	c->last = now_ns();
	c->req_start = h->o.deadline_from_connect ? c->last : 0;
	conn_recv(c);
}

static void arm(struct rp_http *h)
{
	if (h->fd < 0 || h->armed)
		return;
	if (rp_loop_accept(h->loop, h->fd, on_accept, h) >= 0)
		h->armed = true;
	else
		h->st.errors++;
}

void rp_http_tick(struct rp_http *h)
{
	uint64_t now = now_ns();

	for (unsigned i = 0; i < h->o.max_clients; i++) {
		struct rp_http_conn *c = &h->c[i];
		/* A request must be whole within request_ns: trickled bytes are progress
		 * for the idle timeout, but not for this deadline. */
		bool late = c->state != S_SEND && c->req_start != 0 &&
			    now - c->req_start > h->o.request_ns;

		if (c->fd >= 0 && !c->shut && (late || now - c->last > h->o.idle_ns)) {
			c->shut = true;
			h->st.timeouts++;
			shutdown(c->fd, SHUT_RDWR); /* the pending operation ends */
		}
	}
	arm(h);
}

int rp_http_listen_tcp(const struct sockaddr_storage *ss, socklen_t len, int backlog)
{
	int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;
	int err;

	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (const struct sockaddr *)ss, len) < 0 || listen(fd, backlog) < 0) {
		err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

int rp_http_open(struct rp_loop *loop, int fd, const struct rp_http_opts *o,
		 const struct rp_http_handler *hd, void *ctx, struct rp_http **out)
{
	struct rp_http *h = calloc(1, sizeof(*h));

	*out = NULL;
	if (h == NULL) {
		close(fd);
		return -ENOMEM;
	}
	*h = (struct rp_http){ .loop = loop, .o = *o, .hd = *hd, .ctx = ctx, .fd = fd };
	snprintf(h->busy, sizeof(h->busy), "%s", o->busy ? o->busy : "");
	h->c = calloc(o->max_clients, sizeof(*h->c));
	for (unsigned i = 0; h->c != NULL && i < o->max_clients; i++)
		h->c[i] = (struct rp_http_conn){ .h = h, .fd = -1 };
	for (unsigned i = 0; h->c != NULL && i < o->max_clients; i++) {
		if ((h->c[i].rbuf = malloc(o->head_max)) == NULL) {
			rp_http_close(h);
			return -ENOMEM;
		}
	}
	if (h->c == NULL) {
		rp_http_close(h);
		return -ENOMEM;
	}
	arm(h);
	*out = h;
	return 0;
}

void rp_http_stats(const struct rp_http *h, struct rp_http_stats *out)
{
	*out = h->st;
}

void rp_http_close(struct rp_http *h)
{
	if (h == NULL)
		return;
	for (unsigned i = 0; h->c != NULL && i < h->o.max_clients; i++) {
		if (h->c[i].fd >= 0)
			conn_close(&h->c[i]);
		free(h->c[i].rbuf);
	}
	free(h->c);
	if (h->fd >= 0)
		close(h->fd);
	free(h);
}
