// SPDX-License-Identifier: MIT
/*
 * A snapshot over HTTP (fetch.h). The server answers one request and closes, with a
 * Content-Length, so the client sends one GET with "Connection: close", reads to EOF
 * (at most RP_FETCH_MAX bytes of body plus a head), and checks that the length said
 * is the length that came: a connection cut mid-body is an error, not a shorter
 * snapshot. The response is untrusted: the parser (rp_http_response) works on
 * lengths, never on NUL termination, and its fuzz target is tests/fuzz/fuzz_http.c.
 * No TLS: over networks one does not trust, tunnel (ssh -L) or front it with a proxy.
 */
#include <errno.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "fetch.h"

#define HEAD_MAX 16384u /* bytes of a response head */

bool rp_fetch_is_url(const char *s)
{
	return strncmp(s, "http://", 7) == 0 || strncmp(s, "https://", 8) == 0;
}

/* The line @p[0..n) as a header @name: its value (blanks trimmed), or NULL. */
static const char *hvalue(const char *p, size_t n, const char *name, size_t *vlen)
{
	size_t nl = strlen(name);
	const char *v, *end = p + n;

	if (n <= nl || p[nl] != ':' || strncasecmp(p, name, nl) != 0)
		return NULL;
	for (v = p + nl + 1; v < end && (*v == ' ' || *v == '\t'); v++)
		;
	while (end > v && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
		end--;
	*vlen = (size_t)(end - v);
	return v;
}

static int bad(char why[RP_WHY_MAX], const char *what)
{
	snprintf(why, RP_WHY_MAX, "malformed HTTP response: %s", what);
	return -EPROTO;
}

/* Content-Length @v[0..n): digits only, no overflow. */
static int parse_length(const char *v, size_t n, uint64_t *out)
{
	uint64_t x = 0;

	if (n == 0 || n > 19)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (v[i] < '0' || v[i] > '9')
			return -1;
		x = x * 10 + (uint64_t)(v[i] - '0');
	}
	*out = x;
	return 0;
}

int rp_http_response(const char *buf, size_t len, int *status, size_t *body, size_t *body_len,
		     char why[RP_WHY_MAX])
{
	const char *p = buf, *end = NULL, *eol;
	uint64_t clen = UINT64_MAX;
	size_t vlen, lim = len < HEAD_MAX ? len : HEAD_MAX;

	for (size_t i = 0; i + 3 < lim && end == NULL; i++)
		if (memcmp(buf + i, "\r\n\r\n", 4) == 0)
			end = buf + i + 2; /* the last header line's end */
	if (end == NULL)
		return bad(why, len < HEAD_MAX ? "no end of head" : "head too long");
	if (end - buf < 14 || memcmp(buf, "HTTP/1.", 7) != 0 || buf[8] != ' ' ||
	    buf[9] < '1' || buf[9] > '5' || buf[10] < '0' || buf[10] > '9' || buf[11] < '0' ||
	    buf[11] > '9' || (buf[12] != ' ' && buf[12] != '\r'))
		return bad(why, "status line");
	*status = (buf[9] - '0') * 100 + (buf[10] - '0') * 10 + (buf[11] - '0');
	for (p = (const char *)memchr(buf, '\n', (size_t)(end - buf)) + 1; p < end; p = eol + 1) {
		const char *v;

		eol = memchr(p, '\n', (size_t)(end - p));
		if (eol == NULL)
			return bad(why, "header line");
		if ((v = hvalue(p, (size_t)(eol - p), "Content-Length", &vlen)) != NULL &&
		    (clen != UINT64_MAX || parse_length(v, vlen, &clen) != 0))
			return bad(why, "Content-Length");
		if ((v = hvalue(p, (size_t)(eol - p), "Transfer-Encoding", &vlen)) != NULL &&
		    !(vlen == 8 && strncasecmp(v, "identity", 8) == 0))
			return bad(why, "Transfer-Encoding (chunked bodies are not read)");
	}
	*body = (size_t)(end + 2 - buf);
	*body_len = len - *body;
	if (clen != UINT64_MAX && clen != *body_len) {
		snprintf(why, RP_WHY_MAX, "HTTP body of %zu bytes, Content-Length %llu (cut?)",
			 *body_len, (unsigned long long)clen);
		return -EPROTO;
	}
	return 0;
}

/* "http://HOST[:PORT]/PATH" into its parts; [V6] hosts too. */
static int split_url(const char *url, char *host, size_t hn, char *port, size_t pn,
		     const char **path, char why[RP_WHY_MAX])
{
	const char *h = url + 7, *hend, *slash;

	if (strncmp(url, "https://", 8) == 0) {
		snprintf(why, RP_WHY_MAX, "%.60s: https is not supported (use an ssh tunnel or a "
			 "proxy, docs/fleet.md)", url);
		return -EPROTONOSUPPORT;
	}
	if (strncmp(url, "http://", 7) != 0)
		goto bad_url;
	slash = strchr(h, '/');
	*path = slash ? slash : "/";
	hend = slash ? slash : h + strlen(h);
	if (*h == '[') {
		const char *rb = memchr(h, ']', (size_t)(hend - h));

		if (rb == NULL || (size_t)(rb - h - 1) >= hn)
			goto bad_url;
		memcpy(host, h + 1, (size_t)(rb - h - 1));
		host[rb - h - 1] = '\0';
		h = rb + 1;
	} else {
		const char *colon = memchr(h, ':', (size_t)(hend - h));
		const char *e = colon ? colon : hend;

		if (e == h || (size_t)(e - h) >= hn)
			goto bad_url;
		memcpy(host, h, (size_t)(e - h));
		host[e - h] = '\0';
		h = e;
	}
	if (*h == ':' && h + 1 < hend && (size_t)(hend - h - 1) < pn) {
		memcpy(port, h + 1, (size_t)(hend - h - 1));
		port[hend - h - 1] = '\0';
	} else if (h == hend) {
		snprintf(port, pn, "80");
	} else {
		goto bad_url;
	}
	return 0;
bad_url:
	snprintf(why, RP_WHY_MAX, "%.80s: not http://HOST[:PORT]/PATH", url);
	return -EINVAL;
}

static int dial(const char *host, const char *port, char why[RP_WHY_MAX])
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai, *a;
	struct timeval tv = { .tv_sec = RP_FETCH_TIMEOUT_S };
	int fd = -1, err = getaddrinfo(host, port, &hints, &ai);

	if (err != 0) {
		snprintf(why, RP_WHY_MAX, "%.60s:%.8s: %s", host, port, gai_strerror(err));
		return -EHOSTUNREACH;
	}
	for (a = ai; a != NULL && fd < 0; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
		if (fd < 0)
			continue;
		/* SO_SNDTIMEO bounds connect() too (Linux) */
		if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0 ||
		    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
		    connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
			err = -errno;
			close(fd);
			fd = -1;
		}
	}
	freeaddrinfo(ai);
	if (fd < 0)
		snprintf(why, RP_WHY_MAX, "%.60s:%.8s: %s", host, port, strerror(-err));
	return fd < 0 ? err : fd;
}

static int send_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EPIPE;
		p += w, n -= (size_t)w;
	}
	return 0;
}

/* To EOF into @m, at most @cap bytes. */
static int recv_all(int fd, struct rp_membuf *m, size_t cap)
{
	char buf[65536];

	for (;;) {
		ssize_t r = recv(fd, buf, sizeof(buf), 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		if (r == 0)
			return 0;
		if (m->len + (size_t)r > cap)
			return -EFBIG;
		if (rp_membuf_sink(m, buf, (size_t)r) != 0)
			return -ENOMEM;
	}
}

int rp_fetch_snapshot(const char *url, const char *token, struct rp_membuf *out,
		      char why[RP_WHY_MAX])
{
	char host[256], port[16], req[1024];
	struct rp_membuf m = { 0 };
	const char *path;
	size_t body, blen;
	int fd, n, err, status;

	memset(out, 0, sizeof(*out));
	if ((err = split_url(url, host, sizeof(host), port, sizeof(port), &path, why)) != 0)
		return err;
	n = snprintf(req, sizeof(req),
		     "GET %.512s HTTP/1.1\r\nHost: %s%s%s:%s\r\nAccept: application/vnd.msgpack\r\n"
		     "%s%.256s%sConnection: close\r\n\r\n",
		     path, strchr(host, ':') ? "[" : "", host, strchr(host, ':') ? "]" : "", port,
		     token ? "Authorization: Bearer " : "", token ? token : "", token ? "\r\n" : "");
	if (n < 0 || (size_t)n >= sizeof(req)) {
		snprintf(why, RP_WHY_MAX, "%.80s: URL too long", url);
		return -EINVAL;
	}
	if ((fd = dial(host, port, why)) < 0)
		return fd;
	err = send_all(fd, req, (size_t)n);
	if (err == 0)
		err = recv_all(fd, &m, RP_FETCH_MAX + HEAD_MAX);
	close(fd);
	if (err != 0) {
		snprintf(why, RP_WHY_MAX, "%.80s: %s", url,
			 err == -EFBIG ? "reply over 1 GiB" : strerror(-err));
		rp_membuf_free(&m);
		return err;
	}
	err = rp_http_response(m.data ? m.data : "", m.len, &status, &body, &blen, why);
	if (err == 0 && status != 200) {
		snprintf(why, RP_WHY_MAX, "%.80s: HTTP %d%s", url, status,
			 status == 401 ? " (a token is needed: --http-token-file; or it is wrong)"
			 : status == 403 ? " (the engine has no --http-token-file: loopback only)"
					 : "");
		err = -EACCES;
	}
	if (err != 0) {
		rp_membuf_free(&m);
		return err;
	}
	memmove(m.data, m.data + body, blen);
	m.len = blen;
	*out = m;
	return 0;
}

int rp_fetch_token(const char *path, char *token, size_t n, char why[RP_WHY_MAX])
{
	FILE *f = fopen(path, "re");
	size_t got;

	if (f == NULL) {
		snprintf(why, RP_WHY_MAX, "--http-token-file %.80s: %s", path, strerror(errno));
		return -errno;
	}
	got = fread(token, 1, n - 1, f);
	fclose(f);
	token[got] = '\0';
	token[strcspn(token, "\r\n")] = '\0';
	got = strlen(token);
	for (size_t i = 0; i < got; i++)
		if ((unsigned char)token[i] <= ' ' || token[i] == 0x7f)
			got = 0;
	if (got == 0 || got > 256) {
		snprintf(why, RP_WHY_MAX, "--http-token-file %.40s: the first line must be the token",
			 path);
		return -EINVAL;
	}
	return 0;
}
