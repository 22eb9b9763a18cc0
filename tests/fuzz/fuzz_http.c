// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the HTTP response parser of `ringprof snapshot --url` and
 * `ringprof merge URL` (tools/cli/fetch.c, rp_http_response): the response comes from
 * the network, so any bytes must be refused with a reason or accepted with a body
 * that lies inside them, of the length a Content-Length said when there was one.
 * Seeds: tests/fuzz/seeds/http/.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fetch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char why[RP_WHY_MAX], *copy = malloc(size ? size : 1); /* exact size: ASan sees overreads */
	size_t body, blen;
	int status;

	if (copy == NULL)
		return 0;
	memcpy(copy, data, size);
	why[0] = '\0';
	if (rp_http_response(copy, size, &status, &body, &blen, why) == 0) {
		if (body > size || blen != size - body || status < 100 || status > 599)
			abort();
	} else if (why[0] == '\0') {
		abort(); /* a refusal says why */
	}
	free(copy);
	return 0;
}
