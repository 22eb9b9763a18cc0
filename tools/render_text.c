// SPDX-License-Identifier: MIT
/* Stub: being written. */
#include <errno.h>
#include "render.h"
int rp_render_text(const struct rp_report *r, FILE *o, unsigned l) { (void)r; (void)o; (void)l; return -ENOSYS; }
