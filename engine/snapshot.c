// SPDX-License-Identifier: MIT
/* Stub: being written. */
#include <errno.h>
#include "snapshot.h"
int rp_snapshot_encode(const struct rp_report *r, rp_sink_fn s, void *c) { (void)r; (void)s; (void)c; return -ENOSYS; }
