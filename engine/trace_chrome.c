// SPDX-License-Identifier: MIT
/* Stub: being written. */
#include <errno.h>
#include "trace_chrome.h"
int rp_chrome_read(const char *p, rp_chrome_fn f, rp_chrome_progress_fn g, void *c, struct rp_chrome_stats *s, char w[RP_WHY_MAX]) { (void)p; (void)f; (void)g; (void)c; (void)s; (void)w; return -ENOSYS; }
int rp_chrome_parse(const void *b, size_t n, rp_chrome_fn f, void *c, struct rp_chrome_stats *s, char w[RP_WHY_MAX]) { (void)b; (void)n; (void)f; (void)c; (void)s; (void)w; return -ENOSYS; }
