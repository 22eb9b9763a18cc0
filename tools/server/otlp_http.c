// SPDX-License-Identifier: MIT
/*
 * The OTLP/HTTP receiver (otlp_http.h): the OTLP answers, decompression and routing
 * around the decoder and reorder buffer of engine/ingest/otlp.c, on the HTTP core
 * (http.h: connections, framing, keep-alive, caps and timeouts).
 *
 * A whole body is gunzipped if need be, decoded and fed to the receiver at once, on
 * the loop: no body is held between loop turns beyond its connection's buffer.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

#include "http.h"
#include "otlp_http.h"
#include "serve.h"

#define MAX_BODY_DEFAULT    (16u << 20)
#define MAX_CLIENTS_DEFAULT 16u
#define IDLE_DEFAULT_NS	    30000000000ull
#define REQUEST_DEFAULT_NS  10000000000ull

/* rp_http_req.user: what the head said of the body */
#define U_JSON 1u
#define U_GZIP 2u

struct rp_otlp_http {
	struct rp_loop *loop;
	struct rp_otlp_http_opts o;
	struct rp_otlp *rx;
	struct rp_http *srv;
	struct rp_otlp_http_stats st;
};

/* --- answers --- */

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
static void answer_status(struct rp_http_conn *c, const struct rp_http_req *r, const char *status,
			  const char *msg, bool close_after)
{
	unsigned char pb[RP_WHY_MAX + 16];
	char js[RP_WHY_MAX * 6 + 64], esc[RP_WHY_MAX * 6 + 1];
	size_t n = strlen(msg) < RP_WHY_MAX ? strlen(msg) : RP_WHY_MAX - 1, k = 0;

	if (r->user & U_JSON) {
		char m[RP_WHY_MAX];
		snprintf(m, sizeof(m), "%.*s", (int)n, msg);
		json_escape(m, esc);
		snprintf(js, sizeof(js), "{\"code\":3,\"message\":\"%s\"}", esc);
		rp_http_answer(c, status, NULL, "application/json", js, strlen(js), close_after);
		return;
	}
	pb[k++] = 0x08; /* code */
	pb[k++] = 3;
	pb[k++] = 0x12; /* message */
	k += put_varint(pb + k, n);
	memcpy(pb + k, msg, n);
	rp_http_answer(c, status, NULL, "application/x-protobuf", pb, k + n, close_after);
}

/* 200: an ExportTraceServiceResponse, with partial_success if spans were rejected. */
static void answer_ok(struct rp_otlp_http *h, struct rp_http_conn *c, const struct rp_http_req *r,
		      uint64_t rejected, const char *why)
{
	unsigned char pb[RP_WHY_MAX + 40], inner[RP_WHY_MAX + 20];
	char js[RP_WHY_MAX * 6 + 96], esc[RP_WHY_MAX * 6 + 1];
	size_t k = 0, n = 0, wl = strlen(why);

	h->st.requests++;
	if (r->user & U_JSON) {
		if (rejected == 0) {
			rp_http_answer(c, "200 OK", NULL, "application/json", "{}", 2, false);
			return;
		}
		json_escape(why, esc);
		snprintf(js, sizeof(js),
			 "{\"partialSuccess\":{\"rejectedSpans\":\"%" PRIu64
			 "\",\"errorMessage\":\"%s\"}}",
			 rejected, esc);
		rp_http_answer(c, "200 OK", NULL, "application/json", js, strlen(js), false);
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
	rp_http_answer(c, "200 OK", NULL, "application/x-protobuf", pb, k, false);
}

static void answer_plain(struct rp_otlp_http *h, struct rp_http_conn *c, const char *status)
{
	h->st.other++;
	rp_http_answer(c, status, NULL, "text/plain", status, strlen(status), true);
}

/* --- the body --- */

static int gunzip(const struct rp_otlp_http *h, const unsigned char *in, size_t in_len,
		  unsigned char **out, size_t *len)
{
	size_t cap = in_len * 4 + 1024, max = h->o.max_body;
	z_stream z = { 0 };
	unsigned char *b;
	int r;

	if (cap > max)
		cap = max;
	if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
		return -ENOMEM;
	b = malloc(cap + 1);
	z.next_in = (unsigned char *)in;
	z.avail_in = (uInt)in_len;
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
static void on_body(void *ctx, struct rp_http_conn *c, struct rp_http_req *r,
		    const unsigned char *body, size_t blen)
{
	struct rp_otlp_http *h = ctx;
	struct rp_otlp_decode_stats ds = { 0 };
	unsigned char *plain = NULL;
	const unsigned char *in = body;
	size_t len = blen;
	char why[RP_WHY_MAX] = "";
	int err = 0;

	h->st.bytes += blen;
	if ((r->user & U_GZIP) && (err = gunzip(h, body, blen, &plain, &len)) != 0) {
		if (err == -EFBIG) {
			h->st.too_large++;
			answer_status(c, r, "413 Payload Too Large",
				      "body above --otlp-max-body once decompressed", true);
		} else if (err == -EINVAL) {
			h->st.bad++;
			answer_status(c, r, "400 Bad Request", "malformed gzip body", false);
		} else {
			h->st.errors++;
			answer_status(c, r, "500 Internal Server Error", "out of memory", true);
		}
		return;
	}
	if (plain != NULL)
		in = plain;
	if (len > 0)
		err = (r->user & U_JSON) ? rp_otlp_decode_json(in, len, &h->o.decode, rp_otlp_add,
							       h->rx, &ds, why)
					 : rp_otlp_decode_pb(in, len, &h->o.decode, rp_otlp_add,
							     h->rx, &ds, why);
	free(plain);
	h->st.spans += ds.spans;
	h->st.rejected += ds.rejected;
	if (err == -EINVAL) {
		h->st.bad++;
		answer_status(c, r, "400 Bad Request", why, false);
	} else if (err != 0) {
		h->st.errors++;
		answer_status(c, r, "500 Internal Server Error", "out of memory", true);
	} else {
		answer_ok(h, c, r, ds.rejected,
			  ds.rejected ? "spans rejected: bad ids or times, past the "
					"per-request cap, or the receiver full (ringprof_otlp_*)"
				      : "");
	}
}

/* --- the head --- */

/* The routes and the media types; true: read the body. */
static bool on_head(void *ctx, struct rp_http_conn *c, struct rp_http_req *r)
{
	struct rp_otlp_http *h = ctx;
	const char *v;
	size_t n;

	if (strcmp(r->path, "/v1/traces") != 0 && strncmp(r->path, "/v1/traces?", 11) != 0) {
		answer_plain(h, c, "404 Not Found");
		return false;
	}
	if (strcmp(r->method, "POST") != 0) {
		answer_plain(h, c, "405 Method Not Allowed");
		return false;
	}
	v = rp_http_header(r->head, r->head_len, "Content-Type", &n);
	if (v != NULL && n >= 16 && strncasecmp(v, "application/json", 16) == 0)
		r->user |= U_JSON;
	else if (v == NULL || n < 22 || strncasecmp(v, "application/x-protobuf", 22) != 0)
		goto unsupported;
	v = rp_http_header(r->head, r->head_len, "Content-Encoding", &n);
	if (v != NULL && n == 4 && strncasecmp(v, "gzip", 4) == 0)
		r->user |= U_GZIP;
	else if (v != NULL && !(n == 8 && strncasecmp(v, "identity", 8) == 0))
		goto unsupported;
	if (!r->chunked && !r->has_len && !r->te_other) {
		h->st.bad++; /* 411 in spirit; OTLP clients always frame their bodies */
		answer_status(c, r, "400 Bad Request", "malformed HTTP request", true);
		return false;
	}
	return true;
unsupported:
	h->st.unsupported++;
	answer_status(c, r, "415 Unsupported Media Type",
		      "application/x-protobuf or application/json, identity or gzip", true);
	return false;
}

/* What the core refused (http.h), answered as OTLP answers and counted. */
static void on_refuse(void *ctx, struct rp_http_conn *c, const struct rp_http_req *r, int status,
		      const char *why)
{
	struct rp_otlp_http *h = ctx;

	switch (status) {
	case 413:
		h->st.too_large++;
		answer_status(c, r, "413 Payload Too Large", "body above --otlp-max-body", true);
		break;
	case 415:
		h->st.unsupported++;
		answer_status(c, r, "415 Unsupported Media Type",
			      "application/x-protobuf or application/json, identity or gzip",
			      true);
		break;
	case 431:
		answer_plain(h, c, rp_http_reason(431));
		break;
	default:
		h->st.bad++;
		answer_status(c, r, "400 Bad Request", why, true);
	}
}

void rp_otlp_http_tick(struct rp_otlp_http *h)
{
	rp_http_tick(h->srv);
}

static const struct rp_http_handler handler = {
	.head = on_head, .body = on_body, .refuse = on_refuse,
};

int rp_otlp_http_open(struct rp_loop *loop, const struct rp_otlp_http_opts *o, struct rp_otlp *rx,
		      struct rp_otlp_http **out, char why[RP_WHY_MAX])
{
	struct rp_otlp_http *h = calloc(1, sizeof(*h));
	struct sockaddr_storage ss;
	char spec[128];
	struct rp_http_opts ho;
	socklen_t len;
	bool loopback;
	int fd, err;

	why[0] = '\0';
	*out = NULL;
	if (h == NULL)
		return -ENOMEM;
	h->loop = loop;
	h->o = *o;
	h->rx = rx;
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
	ho = (struct rp_http_opts){
		.head_max = RP_SERVE_HTTP_MAX,
		.max_body = h->o.max_body,
		.max_clients = h->o.max_clients,
		.idle_ns = h->o.idle_ns,
		.request_ns = h->o.request_ns,
		.busy = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
			"Connection: close\r\n\r\n",
	};
	fd = rp_http_listen_tcp(&ss, len, 64);
	err = fd < 0 ? fd : rp_http_open(loop, fd, &ho, &handler, h, &h->srv);
	if (err != 0) {
		snprintf(why, RP_WHY_MAX, "--otlp %.60s: %s", spec, strerror(-err));
		rp_otlp_http_close(h);
		return err;
	}
	if (!loopback)
		snprintf(why, RP_WHY_MAX,
			 "warning: OTLP on %.60s takes spans from the network, unauthenticated",
			 spec);
	*out = h;
	return 0;
}

/* The receiver's counters, and the core's for its connections (http.h). */
void rp_otlp_http_stats(const struct rp_otlp_http *h, struct rp_otlp_http_stats *out)
{
	struct rp_http_stats hs = { 0 };

	if (h->srv != NULL)
		rp_http_stats(h->srv, &hs);
	*out = h->st;
	out->accepted = hs.accepted;
	out->refused_cap = hs.refused_cap;
	out->timeouts = hs.timeouts;
	out->errors += hs.errors;
}

void rp_otlp_http_metrics(const struct rp_otlp_http *h, FILE *m)
{
	struct rp_otlp_http_stats st;
	struct rp_otlp_stats rs;

	rp_otlp_http_stats(h, &st);
	const struct {
		const char *name, *help;
		uint64_t v;
	} c[] = {
		{ "requests", "OTLP requests answered 200.", st.requests },
		{ "bad_requests", "OTLP requests answered 400 (malformed).", st.bad },
		{ "too_large", "OTLP requests answered 413 (--otlp-max-body).", st.too_large },
		{ "unsupported", "OTLP requests answered 415.", st.unsupported },
		{ "other", "Requests answered 404, 405 or 431.", st.other },
		{ "refused_cap", "OTLP connections refused: max clients.", st.refused_cap },
		{ "timeouts", "OTLP connections shut down for making no progress.",
		  st.timeouts },
		{ "bytes", "OTLP body bytes received, as sent.", st.bytes },
		{ "spans", "Spans decoded and taken.", st.spans },
		{ "rejected", "Spans rejected (partial success).", st.rejected },
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
	rp_http_close(h->srv);
	free(h);
}
