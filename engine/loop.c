// SPDX-License-Identifier: MIT
/* Stub: being written. */
#include <errno.h>
#include "loop.h"
int rp_loop_open(const struct rp_loop_opts *o, struct rp_loop **out, char w[RP_WHY_MAX]) { (void)o; (void)out; (void)w; return -ENOSYS; }
