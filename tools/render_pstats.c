// SPDX-License-Identifier: MIT
/* Stub: being written. */
#include <errno.h>
#include "render.h"
int rp_render_pstats(const struct rp_report *r, FILE *o) { (void)r; (void)o; return -ENOSYS; }
