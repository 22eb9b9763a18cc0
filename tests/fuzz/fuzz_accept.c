// SPDX-License-Identifier: MIT
/*
 * fuzz_accept: /metrics content negotiation (tools/server/negotiate.c) on arbitrary
 * request heads. The input's first line is the path (NUL-terminated, as serve.c's
 * sscanf leaves it), the rest the header lines, in a buffer of exactly their size so
 * that ASan sees any read past them. The answer must be one of the three formats.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "negotiate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nl = memchr(data, '\n', size);
	size_t plen = nl ? (size_t)(nl - data) : size, hlen = nl ? size - plen - 1 : 0;
	char *path = malloc(plen + 1), *head = malloc(hlen ? hlen : 1);

	if (path == NULL || head == NULL) {
		free(path);
		free(head);
		return 0;
	}
	memcpy(path, data, plen);
	path[plen] = '\0';
	if (hlen)
		memcpy(head, nl + 1, hlen);
	if (rp_metrics_format(path, head, hlen) >= RP_FMT_NONE)
		abort();
	free(path);
	free(head);
	return 0;
}
