/* SPDX-License-Identifier: MIT */
/*
 * `ringprof snapshot --url` and `ringprof merge URL...`: a snapshot fetched from an
 * engine's GET /snapshot (tools/server/serve.h) with a small HTTP/1.1 client (plain
 * http://, one request per connection, the whole body in memory, capped).
 */
#ifndef RP_TOOLS_FETCH_H
#define RP_TOOLS_FETCH_H

#include <stdbool.h>
#include <stddef.h>

#include "snapshot.h"

#define RP_FETCH_MAX	   (1u << 30) /* body bytes taken at most (the server's cap) */
#define RP_FETCH_TIMEOUT_S 30	      /* connect, and each send or receive */

/* Whether @s names a URL (http:// or https://) rather than a file. */
bool rp_fetch_is_url(const char *s);

/**
 * rp_http_response() - parse a whole HTTP/1.x response @buf[0..len) (the server closed
 * the connection after it): *@status, and the body at *@body, *@body_len bytes. A
 * Content-Length must match what came; chunked bodies are refused.
 * @return 0, or -EPROTO (malformed, truncated) with @why saying what.
 */
int rp_http_response(const char *buf, size_t len, int *status, size_t *body, size_t *body_len,
		     char why[RP_WHY_MAX]);

/**
 * rp_fetch_snapshot() - GET @url ("http://HOST[:PORT]/snapshot"), with
 * "Authorization: Bearer @token" unless @token is NULL; the body (MessagePack, not
 * decoded here) into @out. @return 0 or -errno with @why.
 */
int rp_fetch_snapshot(const char *url, const char *token, struct rp_membuf *out,
		      char why[RP_WHY_MAX]);

/* The token: @path's first line (1 to 256 printable bytes). @return 0 or -errno. */
int rp_fetch_token(const char *path, char *token, size_t n, char why[RP_WHY_MAX]);

#endif
