// SPDX-License-Identifier: MIT
/*
 * Content negotiation of /metrics (negotiate.h). The request head is untrusted: every
 * read stays inside [head, head + len) (no NUL is assumed), a media range longer than
 * 255 bytes is ignored, and a q that does not parse reads as 0 (not acceptable).
 * tests/fuzz/fuzz_accept.c runs it on arbitrary bytes.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "negotiate.h"

/* One media range of an Accept header, [s, e): the format it names (RP_FMT_NONE: none we
 * serve) and its q (1 when not given). */
static enum rp_metrics_format media_range(const char *s, const char *e, double *q)
{
	char r[256], *p, *o = r;
	enum rp_metrics_format k = RP_FMT_NONE;

	if ((size_t)(e - s) >= sizeof(r))
		return RP_FMT_NONE;
	/* Types and parameter names are case-insensitive; blanks around ';' and '=' go. */
	for (; s < e; s++)
		if (*s != ' ' && *s != '\t')
			*o++ = (char)(*s >= 'A' && *s <= 'Z' ? *s - 'A' + 'a' : *s);
	*o = '\0';
	if (strncmp(r, "application/vnd.google.protobuf;", 32) == 0 &&
	    strstr(r, ";proto=io.prometheus.client.metricfamily") != NULL &&
	    strstr(r, ";encoding=delimited") != NULL)
		k = RP_FMT_PROTOBUF;
	else if (strncmp(r, "application/openmetrics-text", 28) == 0 &&
		 (r[28] == '\0' || r[28] == ';'))
		k = RP_FMT_OPENMETRICS;
	else if (strncmp(r, "text/plain", 10) == 0 || strncmp(r, "text/*", 6) == 0 ||
		 strncmp(r, "*/*", 3) == 0)
		k = RP_FMT_TEXT;
	p = strstr(r, ";q=");
	*q = p ? strtod(p + 3, NULL) : 1;
	return k;
}

enum rp_metrics_format rp_metrics_format(const char *path, const char *head, size_t len)
{
	const char *end = head + len;
	enum rp_metrics_format best = RP_FMT_TEXT;
	const char *f = strstr(path, "format=");
	double best_q = 0;

	if (f != NULL && strncmp(f + 7, "protobuf", 8) == 0)
		return RP_FMT_PROTOBUF;
	if (f != NULL)
		return strncmp(f + 7, "openmetrics", 11) == 0 ? RP_FMT_OPENMETRICS : RP_FMT_TEXT;
	for (const char *l = head; l < end;) {
		const char *eol = memchr(l, '\n', (size_t)(end - l));

		if (eol == NULL)
			eol = end;
		if (eol - l > 7 && strncasecmp(l, "accept:", 7) == 0) {
			for (const char *s = l + 7; s < eol;) {
				const char *c = memchr(s, ',', (size_t)(eol - s));
				const char *e = c ? c : eol;
				double q;
				enum rp_metrics_format k;

				if (e > s && e[-1] == '\r')
					e--;
				k = media_range(s, e, &q);
				if (k != RP_FMT_NONE && q > 0 &&
				    (q > best_q || (q == best_q && k > best))) {
					best = k;
					best_q = q;
				}
				s = c ? c + 1 : eol;
			}
		}
		l = eol + 1;
	}
	return best;
}
