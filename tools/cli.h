/* SPDX-License-Identifier: MIT */
/*
 * The ringprof CLI's commands and the helpers they share.
 */
#ifndef RP_TOOLS_CLI_H
#define RP_TOOLS_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "engine.h"

int rp_cmd_run(int argc, char **argv);

/* `ringprof top` (tools/top.c): the live terminal view. @return the exit status. */
int rp_cmd_top(int argc, char **argv);

/* One line on stderr, "ringprof: ..."; returns @status for `return die(...)`. */
int rp_cli_error(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The session: --session, else $RINGPROF_SESSION, else "default"; validated. */
const char *rp_cli_session(const char *opt);

/* Engine caps as options: --max-names N and friends. @return true if @opt was one. */
bool rp_cli_cap_option(struct rp_engine_cfg *cfg, const char *opt, const char *value,
		       int *err);
#define RP_CLI_CAP_USAGE                                                                   \
	"  --max-names N --max-tracks N --max-depth N --max-cct-nodes N --max-sources N\n"  \
	"  --max-sketch-names N\n"                                                          \
	"             engine caps (defaults 65536, 16384, 256, 262144, 1024, 4096)\n"  \
	"  --recorder-spans N --recorder-samples N\n"                                     \
	"             the flight recorder (defaults 65536, 16384)\n"

/* The engine marker: "/ringprof.<session>.engine" + the snapshot path after it. */
int rp_cli_read_marker(const char *session, int32_t *pid, char *snap_path, size_t n);

#endif
