/* SPDX-License-Identifier: MIT */
/*
 * The one HTTP/1.1 core of the engine's listeners (serve.c: /metrics, /snapshot and the
 * unix socket's request lines; otlp_http.c: POST /v1/traces). Each listener keeps its
 * routing and its answers; everything that faces the socket is here, once: accepting
 * into a connection table with a cap (past it a "busy" text and a close, counted), one
 * loop operation in flight per connection (never a blocking call), reads into a bounded
 * head buffer, a strict parse of the request line and header lines, bodies by
 * Content-Length or chunked into a buffer capped at max_body, keep-alive and pipelining,
 * an idle timeout and a request deadline, and answers sent through partial writes.
 *
 * A handler is called once per request and must answer it (rp_http_send, rp_http_answer)
 * before it returns; a request the core refuses (malformed, too large) goes to the
 * refuse handler, which answers in the listener's own way, and the connection closes
 * after that answer (the framing is lost). Memory is bounded by max_clients x
 * (head_max + max_body).
 */
#ifndef RP_TOOLS_HTTP_H
#define RP_TOOLS_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "loop.h"

#define RP_HTTP_METHOD_MAX 16u	/* bytes of a method, its NUL included */
#define RP_HTTP_PATH_MAX   256u /* bytes of a request target, its NUL included */
#define RP_HTTP_CHUNK_LINE 80u	/* bytes of a chunk-size line (with its extensions) */

struct rp_http;
struct rp_http_conn;

/* A parsed request head. head/head_len are valid only during the head handler. */
struct rp_http_req {
	char method[RP_HTTP_METHOD_MAX];
	char path[RP_HTTP_PATH_MAX];
	const char *head; /* the header lines after the request line, the blank one too */
	size_t head_len;
	bool keep;	  /* the client keeps the connection (HTTP/1.1, or Connection:) */
	bool has_len;	  /* Content-Length given (in len) */
	bool chunked;	  /* Transfer-Encoding: chunked */
	bool te_other;	  /* another Transfer-Encoding: not read (415) */
	uint64_t len;
	unsigned user;	  /* the listener's own flags for this request */
};

/* A body being read, by Content-Length (left) or chunk by chunk, into data (<= max). */
struct rp_http_body {
	unsigned char *data;
	size_t len, cap, max;
	uint64_t left;	/* bytes still due: of the body, or of this chunk */
	bool chunked;
	unsigned char ch; /* where in the chunked framing (http.c) */
	char line[RP_HTTP_CHUNK_LINE];
	size_t line_len;
	size_t trailer; /* bytes of trailer lines so far, capped */
};

struct rp_http_handler {
	/* A whole head: answer now (its body, if any, is then not read and the connection
	 * closes after the answer), or return true to have the body read. */
	bool (*head)(void *ctx, struct rp_http_conn *c, struct rp_http_req *r);
	/* The whole body of a request the head handler accepted. */
	void (*body)(void *ctx, struct rp_http_conn *c, struct rp_http_req *r,
		     const unsigned char *b, size_t n);
	/* Line mode: one request line, its '\n' (and a '\r' before it) cut, NUL-terminated
	 * at @len (it may hold NULs before: the listener judges). */
	void (*line)(void *ctx, struct rp_http_conn *c, const char *line, size_t len);
	/* The core refuses a request: @status 400, 413, 415 or 431 (line mode: 431, a line
	 * too long), @why a short reason. The connection closes after the answer. */
	void (*refuse)(void *ctx, struct rp_http_conn *c, const struct rp_http_req *r,
		       int status, const char *why);
	/* Optional: false closes a new connection at once (counted in refused_peer). */
	bool (*admit)(void *ctx, int fd);
};

struct rp_http_opts {
	bool lines;	      /* one request per '\n'-ended line instead of HTTP */
	size_t head_max;      /* bytes of a head (a line), its end included */
	size_t max_body;      /* bytes of a body; a larger one is refused 413 */
	unsigned max_clients; /* connections at once */
	uint64_t idle_ns;     /* no progress for this long: shut down */
	uint64_t request_ns;  /* a request not whole this long after it began: shut down */
	bool deadline_from_connect; /* the first request began at the connect, not its
				       first byte */
	const char *busy;     /* sent past the cap before the close (copied) */
};

struct rp_http_stats {
	uint64_t accepted;	 /* connections taken */
	uint64_t refused_cap;	 /* closed at once: max_clients connected */
	uint64_t refused_peer;	 /* closed at once: admit said no */
	uint64_t timeouts;	 /* shut down: idle, or a request past its deadline */
	uint64_t errors;	 /* failed accepts, sends, allocations */
	uint64_t bad_head;	 /* refused 400: a malformed request line or header */
	uint64_t bad_body;	 /* refused 400: bad chunked framing, or both framings */
	uint64_t head_too_large; /* refused 431: a head (a line) above head_max */
	uint64_t body_too_large; /* refused 413: a body above max_body */
	uint64_t unsupported_te; /* refused 415: a transfer coding other than chunked */
	unsigned clients;	 /* connected now */
};

/* rp_http_listen_tcp() - a non-blocking listening socket on @ss. @return it or -errno. */
int rp_http_listen_tcp(const struct sockaddr_storage *ss, socklen_t len, int backlog);

/**
 * rp_http_open() - serve the listening, non-blocking @fd (now owned) from @loop.
 * @return 0 or -errno.
 */
int rp_http_open(struct rp_loop *loop, int fd, const struct rp_http_opts *o,
		 const struct rp_http_handler *hd, void *ctx, struct rp_http **out);
/* Timeouts and re-arming the accept: from a loop timer. */
void rp_http_tick(struct rp_http *h);
void rp_http_stats(const struct rp_http *h, struct rp_http_stats *out);
/* After rp_loop_close (buffers may be in the kernel until then). NULL ok. */
void rp_http_close(struct rp_http *h);

/* The peer of @c is a loopback address (127/8, ::1, ::ffff:127/104). */
bool rp_http_conn_loopback(const struct rp_http_conn *c);

/*
 * rp_http_send() - send @data[0..@len) and then call @release(@ref) (with NULL, the
 * core copies the data first); then close if @close_after, else take the next request.
 */
void rp_http_send(struct rp_http_conn *c, const void *data, size_t len, void (*release)(void *),
		  void *ref, bool close_after);
/*
 * rp_http_answer() - "HTTP/1.1 @status", @headers (each "Name: value\r\n"; NULL: none),
 * Content-Type @type (NULL: none), Content-Length and Connection, then @body. The
 * connection closes after it if @close_after, if the client did not keep it, or after
 * a refusal.
 */
void rp_http_answer(struct rp_http_conn *c, const char *status, const char *headers,
		    const char *type, const void *body, size_t len, bool close_after);
/* "400 Bad Request" for 400, and so on for the statuses the core refuses with. */
const char *rp_http_reason(int status);

/* --- the parser, on its own (the fuzzer drives it: tests/fuzz/fuzz_http_request.c) --- */

/* The end of a head in @b[0..@n): just after its "\r\n\r\n" or "\n\n"; 0: not yet. */
size_t rp_http_head_end(const char *b, size_t n);
/* Parse the head @b[0..@end) (@end from rp_http_head_end) into @r. 0 or -EINVAL. */
int rp_http_parse_head(const char *b, size_t end, struct rp_http_req *r);
/* The value of header @name (case-insensitive, the first one) in @r's head, blanks
 * around it cut, its length in *@len; NULL if absent. */
const char *rp_http_header(const char *head, size_t head_len, const char *name, size_t *len);
/* Whether the comma-separated value [@v, @v + @n) holds the token @tok. */
bool rp_http_has_token(const char *v, size_t n, const char *tok);

/* Start reading @r's body into @b (emptied, its buffer kept), at most @max bytes. */
void rp_http_body_start(struct rp_http_body *b, const struct rp_http_req *r, size_t max);
/*
 * rp_http_body_take() - take body bytes from @in[0..@n); *@used says how many were.
 * @return 1 whole (what follows is the next request), 0 more needed, -EINVAL bad
 * chunked framing, -EFBIG above max, -ENOMEM.
 */
int rp_http_body_take(struct rp_http_body *b, const char *in, size_t n, size_t *used);
void rp_http_body_free(struct rp_http_body *b);

#endif
