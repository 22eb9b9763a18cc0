// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the request parser of the engine's HTTP core (tools/server/http.c),
 * under both listeners (/metrics, /snapshot and OTLP): the input is a stream of
 * pipelined requests from a hostile client. Each head is parsed as the core parses it
 * (found within RP_SERVE_HTTP_MAX bytes), and each body is read twice: all at once and
 * one byte per call, as a client that splits its request at every byte makes the core
 * read it. Both must agree (the same outcome, the same bytes, the same end), every
 * parsed field must lie within its bounds, and a body never exceeds its cap.
 * Seeds: tests/fuzz/seeds/http_request/.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"

#define HEAD_MAX 8192u	/* RP_SERVE_HTTP_MAX */
#define BODY_MAX 65536u /* small: the cap is reached often */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_req(const struct rp_http_req *r, const char *b, size_t end)
{
	size_t ml = strnlen(r->method, sizeof(r->method)), pl = strnlen(r->path, sizeof(r->path));

	if (ml == 0 || ml == sizeof(r->method) || pl == 0 || pl == sizeof(r->path))
		abort();
	for (size_t i = 0; i < ml; i++)
		if (r->method[i] < 'A' || r->method[i] > 'Z')
			abort();
	if (r->path[0] != '/' || strchr(r->path, ' ') != NULL)
		abort();
	if (r->head < b || r->head + r->head_len != b + end)
		abort();
}

/* The body of @r from @in[0..@n), twice; 1 and the bytes it used, or <= 0. */
static int read_body(const struct rp_http_req *r, const char *in, size_t n, size_t *used)
{
	struct rp_http_body a = { 0 }, b = { 0 };
	size_t ua = 0, ub = 0, k;
	int ra, rb = 0;

	rp_http_body_start(&a, r, BODY_MAX);
	rp_http_body_start(&b, r, BODY_MAX);
	ra = rp_http_body_take(&a, in, n, &ua);
	if (n == 0) /* nothing to split: one empty call, as the core makes none */
		rb = rp_http_body_take(&b, in, 0, &ub);
	for (size_t i = 0; i < n && rb == 0; i++) {
		rb = rp_http_body_take(&b, in + i, 1, &k);
		if (k > 1 || (rb == 0 && k != 1))
			abort(); /* "0: more needed" means everything given was taken */
		ub += k;
	}
	if (ra != rb || ra > 1 || (ra < 0 && ra != -EINVAL && ra != -EFBIG && ra != -ENOMEM))
		abort();
	if (a.len > BODY_MAX || b.len > BODY_MAX || ua > n)
		abort();
	if (ra == 1 && (ua != ub || a.len != b.len || (a.len && memcmp(a.data, b.data, a.len))))
		abort();
	if (ra == 1 && !r->chunked && a.len != r->len)
		abort(); /* a Content-Length body is exactly that long */
	if (ra == 0 && ua != n)
		abort();
	rp_http_body_free(&a);
	rp_http_body_free(&b);
	*used = ua;
	return ra;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *copy = malloc(size ? size : 1); /* exact size: ASan sees overreads */
	const char *p = copy;
	size_t n = size;

	if (copy == NULL)
		return 0;
	memcpy(copy, data, size);
	for (;;) {
		struct rp_http_req r;
		size_t end = rp_http_head_end(p, n < HEAD_MAX ? n : HEAD_MAX), used = 0;
		int rc;

		if (end == 0 || end > n)
			break;
		rc = rp_http_parse_head(p, end, &r);
		if (rc != 0) {
			if (rc != -EINVAL)
				abort();
			break;
		}
		check_req(&r, p, end);
		if (r.te_other || (r.chunked && r.has_len) || (r.has_len && r.len > BODY_MAX))
			break; /* the core refuses these before reading */
		if (read_body(&r, p + end, n - end, &used) != 1)
			break;
		p += end + used;
		n -= end + used;
	}
	free(copy);
	return 0;
}
