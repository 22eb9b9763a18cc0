/* SPDX-License-Identifier: MIT */
/*
 * The OTLP/HTTP receiver of `ringprof run --otlp` (docs/otlp.md): POST /v1/traces on
 * the engine's loop, as the OpenTelemetry SDKs and the Collector send it.
 *
 * HTTP/1.1 with keep-alive (and pipelining), bodies by Content-Length or chunked,
 * Content-Encoding gzip (or identity), Content-Type application/x-protobuf or
 * application/json. Answers as the OTLP specification says: 200 with an
 * ExportTraceServiceResponse in the request's encoding (its partial_success when
 * spans were rejected), 400 with a google.rpc.Status for a malformed body, 413 for
 * a body (compressed or not) above max_body, 415 for another content type or
 * encoding, 404/405 for other paths and methods, 431 for a head above
 * RP_SERVE_HTTP_MAX. Every answer is counted.
 *
 * On the HTTP core (http.h), as serve.c: one loop operation in flight per connection,
 * connections capped (a new one past the cap gets 503 and is closed), a connection
 * idle for idle_ns or whose request is not whole request_ns after its first byte is
 * shut down; a connection's body buffer grows to max_body at most, so memory is
 * bounded by max_clients x (max_body x 2 + RP_SERVE_HTTP_MAX).
 */
#ifndef RP_TOOLS_OTLP_HTTP_H
#define RP_TOOLS_OTLP_HTTP_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "loop.h"
#include "otlp.h"

#define RP_OTLP_PORT 4318

struct rp_otlp_http;

struct rp_otlp_http_opts {
	const char *addr;     /* "127.0.0.1:4318", "[::1]:4318"; a host alone: port 4318 */
	bool any;	      /* allow a non-loopback address */
	size_t max_body;      /* bytes of a body, before and after gunzip (0: 16 MiB) */
	unsigned max_clients; /* 0: 16 */
	uint64_t idle_ns;     /* 0: 30 s (SDKs keep connections between batches) */
	uint64_t request_ns;  /* 0: 10 s */
	struct rp_otlp_decode_opts decode;
};

struct rp_otlp_http_stats {
	uint64_t accepted, refused_cap, timeouts, errors;
	uint64_t requests;    /* answered 200 */
	uint64_t bad;	      /* 400: malformed body or request */
	uint64_t too_large;   /* 413 */
	uint64_t unsupported; /* 415 */
	uint64_t other;	      /* 404, 405, 431 */
	uint64_t spans;	      /* taken */
	uint64_t rejected;    /* rejected (partial success) */
	uint64_t bytes;	      /* body bytes received, as sent */
};

/**
 * rp_otlp_http_open() - listen on @o->addr, hand spans to @rx.
 * @why: on failure the reason; on success a warning (non-loopback) or empty.
 */
int rp_otlp_http_open(struct rp_loop *loop, const struct rp_otlp_http_opts *o, struct rp_otlp *rx,
		      struct rp_otlp_http **out, char why[RP_WHY_MAX]);
/* Timeouts and re-arming: from a loop timer. */
void rp_otlp_http_tick(struct rp_otlp_http *h);
void rp_otlp_http_stats(const struct rp_otlp_http *h, struct rp_otlp_http_stats *out);
/* The receiver's and the listener's counters as Prometheus text. */
void rp_otlp_http_metrics(const struct rp_otlp_http *h, FILE *m);
/* After rp_loop_close (as rp_serve_close). NULL ok. */
void rp_otlp_http_close(struct rp_otlp_http *h);

#endif
