// SPDX-License-Identifier: MIT
/*
 * Helpers the CLI's commands share: errors, the session, cap options, the marker.
 */
#include <errno.h>
#include <getopt.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ringprof/wire.h>

#include "cli.h"

int rp_cli_error(int status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("ringprof: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	return status;
}

int rp_cli_number(const char *opt, const char *arg, uint64_t min, uint64_t max, uint64_t *v)
{
	char *end;
	unsigned long long n;

	errno = 0;
	n = strtoull(arg, &end, 10);
	/* strtoull() takes a sign and leading space ("-5" wraps to a huge number) */
	if (arg[0] < '0' || arg[0] > '9' || *end != '\0' || errno || n < min || n > max)
		return rp_cli_error(2, "%s %s: a whole number from %llu to %llu", opt, arg,
				    (unsigned long long)min, (unsigned long long)max);
	*v = n;
	return 0;
}

int rp_cli_bad_option(const char *cmd, char **argv)
{
	const char *arg = optind > 0 ? argv[optind - 1] : "?";
	const char *eq = strchr(arg, '=');
	int len = eq ? (int)(eq - arg) : (int)strlen(arg);

	/* glibc: optopt is 0 for an unknown long option, the option's value for a known
	 * one missing its argument, the letter for a short one (maybe in a cluster) */
	if (strncmp(arg, "--", 2) == 0 && optopt != 0)
		return rp_cli_error(2, "%s: %.*s needs a value (try `ringprof help %s`)", cmd, len,
				    arg, cmd);
	if (strncmp(arg, "--", 2) == 0)
		return rp_cli_error(2, "%s: %.*s: unknown option (try `ringprof help %s`)", cmd,
				    len, arg, cmd);
	return rp_cli_error(2, "%s: -%c: unknown option or missing value (try `ringprof help "
			    "%s`)", cmd, optopt ? optopt : '?', cmd);
}

const char *rp_cli_session(const char *opt)
{
	const char *s = opt ? opt : getenv("RINGPROF_SESSION");

	if (s == NULL || *s == '\0')
		s = "default";
	if (!rp_wire_session_valid(s)) {
		rp_cli_error(0, "session \"%s\": need 1-31 of [A-Za-z0-9_-]", s);
		return NULL;
	}
	return s;
}

bool rp_cli_cap_option(struct rp_engine_cfg *cfg, const char *opt, const char *value,
		       int *err)
{
	static const struct {
		const char *name;
		size_t off;
	} caps[] = {
		{ "max-names", offsetof(struct rp_engine_cfg, max_names) },
		{ "max-tracks", offsetof(struct rp_engine_cfg, max_tracks) },
		{ "max-depth", offsetof(struct rp_engine_cfg, max_depth) },
		{ "max-cct-nodes", offsetof(struct rp_engine_cfg, max_cct_nodes) },
		{ "max-sources", offsetof(struct rp_engine_cfg, max_sources) },
		{ "max-sketch-names", offsetof(struct rp_engine_cfg, max_sketch_names) },
		{ "recorder-spans", offsetof(struct rp_engine_cfg, recorder_spans) }, /* export */
		{ "recorder-samples", offsetof(struct rp_engine_cfg, recorder_samples) },
		{ "max-window-names", offsetof(struct rp_engine_cfg, max_window_names) },
		{ "max-counters", offsetof(struct rp_engine_cfg, max_counters) },
		{ "topk", offsetof(struct rp_engine_cfg, topk) },
		{ "max-window-level", offsetof(struct rp_engine_cfg, max_window_level) },
		{ "subwindows", offsetof(struct rp_engine_cfg, subwindows) },
		{ "device-spans", offsetof(struct rp_engine_cfg, dev.max_spans) },
		{ "device-events", offsetof(struct rp_engine_cfg, dev.max_events) },
	};
	char flag[32];
	uint64_t v = 0; /* set by rp_cli_number() before use; gcc -O3 cannot see it */

	snprintf(flag, sizeof(flag), "--%s", opt);
	if (strcmp(opt, "windows") == 0) {
		*err = rp_cli_windows(cfg, value);
		if (*err)
			rp_cli_error(2, "--windows %s: lengths like 10s,1m,5m (units ns us ms s m "
				     "h; at most %d), or none", value, RP_WINDOW_MAX);
		return true;
	}

	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
		if (strcmp(opt, caps[i].name) != 0)
			continue;
		*err = rp_cli_number(flag, value, 1, 1u << 26, &v) ? -EINVAL : 0;
		if (*err == 0)
			*(uint32_t *)((char *)cfg + caps[i].off) = (uint32_t)v;
		return true;
	}
	return false;
}

/* One length: a number and a unit (ns, us, ms, s, m, h). 0 if malformed. */
static uint64_t parse_length(const char *s, const char **rest)
{
	static const struct {
		const char *sfx;
		uint64_t mult;
	} u[] = { { "ns", 1 }, { "us", 1000 }, { "ms", 1000000 }, { "s", 1000000000ull },
		  { "m", 60000000000ull }, { "h", 3600000000000ull } };
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || v == 0)
		return 0;
	for (size_t i = 0; i < sizeof(u) / sizeof(u[0]); i++) {
		size_t n = strlen(u[i].sfx);

		if (strncmp(end, u[i].sfx, n) == 0 && (end[n] == ',' || end[n] == '\0') &&
		    v <= UINT64_MAX / u[i].mult) {
			*rest = end + n;
			return v * u[i].mult;
		}
	}
	return 0;
}

int rp_cli_windows(struct rp_engine_cfg *cfg, const char *value)
{
	const char *p = value;
	uint32_t n = 0;

	if (strcmp(value, "none") == 0) {
		cfg->n_windows = 0;
		return 0;
	}
	while (*p) {
		uint64_t len = parse_length(p, &p);

		if (len == 0 || n == RP_WINDOW_MAX)
			return -EINVAL;
		cfg->window_ns[n++] = len;
		if (*p == ',')
			p++;
	}
	if (n == 0)
		return -EINVAL;
	cfg->n_windows = n;
	return 0;
}

int rp_cli_check_caps(const struct rp_engine_cfg *cfg)
{
	char why[160];

	if (rp_engine_cfg_check(cfg, why, sizeof(why)) != 0)
		return rp_cli_error(2, "%s", why);
	return 0;
}

/* Who holds the marker's record lock, as the kernel says (not as the file says):
 * its pid, 0 if nobody, or -errno. */
pid_t rp_cli_marker_holder(int fd)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };

	if (fcntl(fd, F_GETLK, &fl) < 0)
		return -errno;
	return fl.l_type == F_UNLCK ? 0 : fl.l_pid;
}

/* The effective uid of @pid from /proc, or -1 if it cannot be read. */
static long proc_euid(pid_t pid)
{
	char path[64], line[256];
	long uid = -1, real;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "Uid: %ld %ld", &real, &uid) == 2)
			break;
	fclose(f);
	return uid;
}

int rp_cli_read_marker(const char *session, int32_t *pid, char *snap_path, size_t n)
{
	char name[96], buf[sizeof(struct rp_wire_engine) + 4096];
	struct rp_wire_engine m;
	struct stat st;
	ssize_t got;
	pid_t holder;
	int fd;

	snprintf(name, sizeof(name), RP_WIRE_ENGINE_FMT, session);
	fd = shm_open(name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW, 0);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	if (st.st_uid != geteuid()) { /* another user's: nothing we would signal */
		close(fd);
		return -EPERM;
	}
	got = read(fd, buf, sizeof(buf) - 1);
	holder = rp_cli_marker_holder(fd);
	close(fd);
	if (got < (ssize_t)sizeof(m))
		return holder > 0 ? -EINVAL : -ESRCH;
	buf[got] = '\0';
	memcpy(&m, buf, sizeof(m));
	if (m.magic != RP_WIRE_ENGINE_MAGIC || m.pid <= 0)
		return -EINVAL;
	/* Only the lock holder is the engine: a pid in a file left by a dead engine
	 * may name any process by now. */
	if (holder <= 0)
		return -ESRCH;
	if (holder != m.pid || proc_euid(holder) != (long)geteuid())
		return -ESTALE;
	*pid = m.pid;
	snprintf(snap_path, n, "%s", buf + sizeof(m));
	return 0;
}

int rp_cli_marker_failure(const char *session, unsigned *count, char *why, size_t n)
{
	char name[96], buf[sizeof(struct rp_wire_engine) + 2 * PATH_MAX + 256];
	const char *path, *tail, *end;
	ssize_t got;
	int fd;

	*count = 0;
	why[0] = '\0';
	snprintf(name, sizeof(name), RP_WIRE_ENGINE_FMT, session);
	fd = shm_open(name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW, 0);
	if (fd < 0)
		return -errno;
	got = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (got < (ssize_t)sizeof(struct rp_wire_engine))
		return 0;
	buf[got] = '\0';
	end = buf + got;
	path = buf + sizeof(struct rp_wire_engine);
	tail = path + strlen(path) + 1;
	/* "failures <n>: <why>", whole only with its NUL (a write may be under way) */
	if (tail >= end || memchr(tail, '\0', (size_t)(end - tail)) == NULL ||
	    sscanf(tail, "failures %u: ", count) != 1 || strchr(tail, ':') == NULL)
		return 0;
	snprintf(why, n, "%s", strchr(tail, ':') + 2);
	return 0;
}

const char *rp_cli_marker_strerror(int err)
{
	switch (err) {
	case -ENOENT: return "no engine runs (no marker)";
	case -ESRCH: return "no engine runs (the marker is stale: nobody holds its lock)";
	case -EPERM: return "the marker belongs to another user: not ours to signal";
	case -ESTALE: return "the marker's pid is not the engine holding its lock";
	case -EINVAL: return "the marker is malformed";
	default: return strerror(-err);
	}
}
