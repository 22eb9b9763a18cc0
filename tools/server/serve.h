/* SPDX-License-Identifier: MIT */
/*
 * The engine's live endpoints, served from its event loop (engine/ingest/loop.h):
 *
 *  - a unix stream socket, mode 0600, for `ringprof top` and scripts. A client sends
 *    one request line at a time: "snapshot" answers a 4-byte big-endian length and
 *    a MessagePack snapshot of a fresh report (docs/snapshot.md); "metrics" answers
 *    the same frame around the Prometheus text. Anything else (or a line longer than
 *    RP_SERVE_REQUEST_MAX) is answered "error: <why>\n" and the connection closed; a
 *    reply frame never starts with "e" (replies are capped below 1 GiB), so a client
 *    tells them apart by the first byte. Peers of another uid (SO_PEERCRED) are
 *    refused.
 *  - optionally an HTTP/1.1 listener for Prometheus: GET /metrics answers 200 with the
 *    text exposition (render_prom.c); GET /snapshot a fresh snapshot, the same
 *    MessagePack as a SIGUSR1 file (application/vnd.msgpack), behind a bearer token
 *    read from a file (http_token_file; compared in constant time; 401 otherwise) or,
 *    with no token, to loopback peers only (403); other paths 404, other methods 405,
 *    malformed or oversized requests 400/431; every response closes the connection.
 *
 * The loop never waits for a client: each one has one operation in flight (a recv
 * into its bounded request buffer or a send of its reply), a reply is a shared,
 * reference-counted buffer (never a copy per client), clients are capped, the unix
 * socket and HTTP each in a pool of its own (past the cap a new connection is told
 * "busy" and closed at once, counted), one that makes no progress for idle_ns (a
 * request not sent, a reply not read) is shut down, counted, and so is one whose
 * request is not whole request_ns after it began (trickling bytes is progress, but
 * does not move that deadline). Reports
 * cost the engine time, so one is built at most every cache_ns and shared by every
 * request in that time.
 */
#ifndef RP_TOOLS_SERVE_H
#define RP_TOOLS_SERVE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include "loop.h"
#include "report.h"

#define RP_SERVE_REQUEST_MAX 256u	/* bytes of a unix request line, '\n' included */
#define RP_SERVE_HTTP_MAX    8192u	/* bytes of an HTTP request head */
#define RP_SERVE_REPLY_MAX   (1u << 30) /* a reply frame's length stays below this */

struct rp_serve;

/* Builds a fresh report into @out (freed by the server). @return 0 or -errno. */
typedef int (*rp_serve_report_fn)(void *ctx, struct rp_report *out);

struct rp_serve_opts {
	const char *unix_path;	 /* the socket's path; NULL: none */
	const char *http_addr;	 /* "127.0.0.1:9464", "[::1]:9464"; NULL: none */
	bool http_any;		 /* allow a non-loopback address (with a warning) */
	const char *prom_window; /* the window of /metrics' duration summary; NULL: all */
	const char *metrics_names; /* POSIX ERE: only matching span names get per-name
				      series in /metrics; NULL: all */
	uint32_t metrics_top;	 /* then only the top N names by cumulative time; 0: all */
	unsigned max_clients;	 /* unix connections at once; 0 = 16 */
	unsigned max_http_clients; /* HTTP connections at once, a pool of their own;
				    0 = max_clients */
	uint64_t idle_ns;	 /* no progress for this long: closed; 0 = 10 s */
	uint64_t request_ns;	 /* a request not whole this long after it began (HTTP:
				    after the connect) is closed; 0 = 3 s */
	uint64_t cache_ns;	 /* a report is reused for this long; 0 = 200 ms */
	/* More Prometheus text after the server's own (the OTLP receiver's); NULL: none */
	void (*extra_metrics)(void *ctx, FILE *m);
	void *extra_ctx;
	const char *http_token_file; /* GET /snapshot needs "Authorization: Bearer <the
					file's first line>"; it then also lets the listener
					take a non-loopback address. NULL: /snapshot from
					loopback peers only */
};

struct rp_serve_stats {
	uint64_t accepted;     /* connections taken */
	uint64_t refused_cap;  /* closed at once: max_clients were connected */
	uint64_t refused_uid;  /* closed at once: another uid */
	uint64_t requests;     /* answered with a report or metrics */
	uint64_t bad_requests; /* answered with an error */
	uint64_t timeouts;     /* shut down: no progress, or a request past its deadline */
	uint64_t reports;      /* reports built */
	uint64_t errors;       /* failed accepts, reports or sends */
	uint64_t unauthorized; /* /snapshot refused: no or a wrong token (401), or a
				  non-loopback peer with no token configured (403); also
				  in bad_requests */
	unsigned clients;      /* connected now */
};

/**
 * rp_serve_open() - listen as @o says and serve from @loop.
 * @why: what went wrong on failure (a path, an address and the reason); a warning
 *	 on success (non-loopback HTTP), else empty.
 * @return 0 or -errno.
 */
int rp_serve_open(struct rp_loop *loop, const struct rp_serve_opts *o, rp_serve_report_fn fn,
		  void *ctx, struct rp_serve **out, char why[RP_WHY_MAX]);

/** rp_serve_tick() - idle timeouts and re-arming; call it from a loop timer. */
void rp_serve_tick(struct rp_serve *s);

void rp_serve_stats(const struct rp_serve *s, struct rp_serve_stats *out);

/** rp_serve_parse_addr() - "HOST:PORT" or "[V6]:PORT" into @ss; @loopback says whether
 * it is one (also for the OTLP listener, otlp_http.h). 0 or -EINVAL. */
int rp_serve_parse_addr(const char *spec, struct sockaddr_storage *ss, socklen_t *len,
			bool *loopback);

/**
 * rp_serve_close() - close every connection, remove the socket file, free. Call it
 * after rp_loop_close (the loop may still refer to the buffers until then). NULL ok.
 */
void rp_serve_close(struct rp_serve *s);

#endif
