/* SPDX-License-Identifier: MIT */
/*
 * The ringprof CLI's commands and the helpers they share.
 */
#ifndef RP_TOOLS_CLI_H
#define RP_TOOLS_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "engine.h"

int rp_cmd_run(int argc, char **argv);

/* `ringprof top` (tools/top/top.c): the live terminal view. @return the exit status. */
int rp_cmd_top(int argc, char **argv);

/* One line on stderr, "ringprof: ..."; returns @status for `return die(...)`. */
int rp_cli_error(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * rp_cli_number() - @arg as a whole decimal number in [@min, @max] into *@v: digits
 * only (no sign, no space, no suffix, no overflow). Else one line naming the option
 * and the accepted range ("--tick-ms -5: a whole number from 1 to 60000").
 * @return 0, or 2 (the exit status of a bad command line).
 */
int rp_cli_number(const char *opt, const char *arg, uint64_t min, uint64_t max, uint64_t *v);

/*
 * rp_cli_bad_option() - getopt_long() answered '?' in command @cmd (opterr is 0):
 * one line naming the option (argv[optind - 1]) with a hint, no usage dump.
 * @return 2.
 */
int rp_cli_bad_option(const char *cmd, char **argv);

/* The session: --session, else $RINGPROF_SESSION, else "default"; validated. */
const char *rp_cli_session(const char *opt);

/* Engine caps as options: --max-names N and friends. @return true if @opt was one;
 * *@err is then 0, or -EINVAL with the error said on stderr (one line). */
bool rp_cli_cap_option(struct rp_engine_cfg *cfg, const char *opt, const char *value,
		       int *err);
/* Their getopt_long entries (all 'c'), for the commands' option tables. */
#define RP_CLI_CAP_OPTIONS                                                                   \
	{ "max-names", 1, NULL, 'c' }, { "max-tracks", 1, NULL, 'c' },                      \
	{ "max-depth", 1, NULL, 'c' }, { "max-cct-nodes", 1, NULL, 'c' },                   \
	{ "max-sources", 1, NULL, 'c' }, { "max-sketch-names", 1, NULL, 'c' },              \
	{ "max-window-names", 1, NULL, 'c' }, { "max-counters", 1, NULL, 'c' },             \
	{ "topk", 1, NULL, 'c' }, { "max-window-level", 1, NULL, 'c' },                     \
	{ "subwindows", 1, NULL, 'c' }, { "windows", 1, NULL, 'c' },                        \
	{ "recorder-spans", 1, NULL, 'c' }, { "recorder-samples", 1, NULL, 'c' },           \
	{ "device-spans", 1, NULL, 'c' }, { "device-events", 1, NULL, 'c' }
#define RP_CLI_CAP_USAGE                                                                   \
	"  --max-names N --max-tracks N --max-depth N --max-cct-nodes N --max-sources N\n"  \
	"  --max-sketch-names N --max-window-names N --max-counters N --topk N\n"          \
	"  --max-window-level N\n"                                                           \
	"             engine caps, each 1 to 67108864 (defaults 65536, 16384, 256,\n"        \
	"             262144, 1024, 4096, 256, 1024, 10, 255)\n"                             \
	"  --windows L,L,...  rolling windows on the event clock (default 10s,1m,5m; units\n"\
	"             ns us ms s m h; none: no windows); --subwindows N per window (10)\n"\
	"  --recorder-spans N --recorder-samples N\n"                                     \
	"             the flight recorder (defaults 65536, 16384)\n"                      \
	"  --device-spans N --device-events N\n"                                          \
	"             spans and launches + kernels the device analysis keeps (262144 each)\n"

/* --windows 10s,1m,5m (or "none") into @cfg. @return 0 or -EINVAL. */
int rp_cli_windows(struct rp_engine_cfg *cfg, const char *value);

/* rp_engine_cfg_check() as one line on stderr. @return 0 or 2 (the exit status). */
int rp_cli_check_caps(const struct rp_engine_cfg *cfg);

/*
 * The engine marker: "/ringprof.<session>.engine" holds the engine's pid, then the
 * snapshot path, then why its last snapshot write failed (if one did); the engine
 * holds a POSIX write lock on it for its whole life. rp_cli_read_marker() answers 0
 * only when the marker is ours (our uid) and its pid is the process the kernel says
 * holds that lock, with our uid; else -ENOENT (none), -ESRCH (stale: nobody holds the
 * lock), -EPERM (another user's), -ESTALE (the pid is not the holder), -EINVAL
 * (malformed). rp_cli_marker_strerror() says which.
 */
int rp_cli_read_marker(const char *session, int32_t *pid, char *snap_path, size_t n);
const char *rp_cli_marker_strerror(int err);

/*
 * rp_cli_marker_failure() - the engine's failed snapshot writes since it started
 * (*@count) and why the last one failed (@why, "path: reason (errno N)"), as it
 * wrote them after the path in its marker; 0 and "" when none. Read the marker with
 * rp_cli_read_marker() first: this one trusts it. @return 0 or -errno.
 */
int rp_cli_marker_failure(const char *session, unsigned *count, char *why, size_t n);

/* The pid holding @fd's record lock (F_GETLK), 0 if none, or -errno. */
pid_t rp_cli_marker_holder(int fd);

#endif
