// SPDX-License-Identifier: MIT
/*
 * Helpers the CLI's commands share: errors, the session, cap options, the marker.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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
	};
	char *end;
	unsigned long v;

	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
		if (strcmp(opt, caps[i].name) != 0)
			continue;
		errno = 0;
		v = strtoul(value, &end, 10);
		*err = (errno || *end || v < 1 || v > (1ul << 26)) ? -EINVAL : 0;
		if (*err == 0)
			*(uint32_t *)((char *)cfg + caps[i].off) = (uint32_t)v;
		return true;
	}
	return false;
}

int rp_cli_read_marker(const char *session, int32_t *pid, char *snap_path, size_t n)
{
	char name[96], buf[sizeof(struct rp_wire_engine) + 4096];
	struct rp_wire_engine m;
	ssize_t got;
	int fd;

	snprintf(name, sizeof(name), RP_WIRE_ENGINE_FMT, session);
	fd = shm_open(name, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	got = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (got < (ssize_t)sizeof(m))
		return -EINVAL;
	buf[got] = '\0';
	memcpy(&m, buf, sizeof(m));
	if (m.magic != RP_WIRE_ENGINE_MAGIC || m.pid <= 0)
		return -EINVAL;
	if (kill(m.pid, 0) < 0 && errno == ESRCH)
		return -ESRCH;
	*pid = m.pid;
	snprintf(snap_path, n, "%s", buf + sizeof(m));
	return 0;
}
