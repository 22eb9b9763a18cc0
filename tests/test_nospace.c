// SPDX-License-Identifier: MIT
/*
 * A full /dev/shm never kills the host (issue 20, part 1). The binary re-executes
 * itself in a private mount namespace (unshare -m; -rm when not root) over a fresh
 * 64 MB tmpfs on /dev/shm (Docker's default size), and skips (77, with a message)
 * where that is not permitted. In there:
 *  - 8 threads flood their rings in a /dev/shm with room for only a few rings: the
 *    host exits 0 (no SIGBUS at the first touch of a ring page), the threads without
 *    a ring are counted (nospace_dropped, rings_nospace: the oracle is the claim
 *    arithmetic), events read + dropped == emitted, and stderr says it once;
 *  - 20 runs of the 4-thread demo with no engine, then a 24-thread flood, then the
 *    demo again: every run exits 0, and at most RINGPROF_KEEP_MAX segments stay;
 *  - a real engine (`ringprof run`) and an 8-thread flood in a /dev/shm with room
 *    for one ring: events + dropped == emitted in its snapshot, the no-space
 *    counters in the source's row (json) and said in the text report.
 *  - a real engine whose snapshot directory (in /dev/shm) fills up: `ringprof
 *    snapshot` tells ENOSPC and the path, no temporary file stays, the last
 *    snapshot stays whole, and the next one is written once there is room.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <yajl/yajl_tree.h>

#include "support.h"

#define THREADS	8u
#define FLOOD	300000u		/* records per thread: 2.3 rings' worth */
#define RETRY	1024u		/* a thread with no ring claims again every 1024 events */

static char demo[600], bin[600];

/* Bytes free in /dev/shm. */
static uint64_t shm_free(void)
{
	struct statvfs v;

	assert_int_equal(statvfs("/dev/shm", &v), 0);
	return (uint64_t)v.f_bavail * v.f_frsize;
}

/* Takes all of /dev/shm's room but @leave bytes, in one file; its name in @path. */
static void fill_shm(char path[64], uint64_t leave)
{
	uint64_t take = shm_free() - leave;
	int fd;

	snprintf(path, 64, "/dev/shm/rp_test_filler");
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(fallocate(fd, 0, 0, (off_t)take), 0);
	close(fd);
}

static uint32_t flood_id;

static void *flood(void *arg)
{
	(void)arg;
	for (unsigned i = 0; i < FLOOD; i++)
		rp_instant(flood_id);
	return NULL;
}

struct flood_result {
	uint64_t events, dropped, nospace_dropped, rings_nospace, claimed;
};

/* The host: THREADS flooding threads, then its own rings read in process. Runs in a
 * child; the numbers go up @fd. */
static int flood_host(int fd)
{
	struct flood_result res = { 0 };
	struct rp_event ev[256];
	pthread_t th[THREADS];
	struct rp_segment *s;
	struct rp_wire_header *h;
	char why[RP_WHY_MAX];
	unsigned got;

	setenv("RINGPROF_SESSION", "t_nospace_flood", 1);
	if (rp_init() != 0 || (h = rp_segment_header()) == NULL)
		return 3;
	flood_id = rp_intern("flood", "", NULL, 0);
	for (unsigned i = 0; i < THREADS; i++)
		if (pthread_create(&th[i], NULL, flood, NULL) != 0)
			return 4;
	for (unsigned i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	if (rp_segment_attach(h, h->segment_size, &s, why) != 0)
		return 5;
	for (uint32_t r = 0; r < s->v.ring_count; r++)
		while ((got = rp_segment_drain(s, r, ev, 256, NULL)) > 0)
			res.events += got;
	res.dropped = rp_dropped();
	res.nospace_dropped = h->nospace_dropped;
	res.rings_nospace = h->rings_nospace;
	res.claimed = h->rings_claimed;
	rp_segment_close(s);
	return write(fd, &res, sizeof(res)) == (ssize_t)sizeof(res) ? 0 : 6;
}

static void test_nospace_flooding_threads_exit_cleanly(void **state)
{
	char filler[64], *err;
	struct flood_result res;
	size_t len;
	uint64_t no_ring;
	int p[2], st;
	pid_t pid;

	(void)state;
	/* Room for the segment's reserved pages (1.7 MB) and 3 rings of 4 MB. */
	fill_shm(filler, UINT64_C(14) << 20);
	assert_int_equal(pipe(p), 0);
	pid = fork();
	if (pid == 0) {
		signal(SIGBUS, SIG_DFL); /* as in a host: not cmocka's handler */
		if (freopen("/tmp/rp_test_nospace.err", "w", stderr) == NULL)
			_exit(126);
		close(p[0]);
		exit(flood_host(p[1]));
	}
	close(p[1]);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	unlink(filler);
	if (!WIFEXITED(st))
		fail_msg("the host died of signal %d", WTERMSIG(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	assert_int_equal(read(p[0], &res, sizeof(res)), sizeof(res));
	close(p[0]);
	print_message("    %u x %u emitted: %llu read, %llu dropped (%llu for want of room, "
		      "%llu claims refused, %llu rings)\n", THREADS, FLOOD,
		      (unsigned long long)res.events, (unsigned long long)res.dropped,
		      (unsigned long long)res.nospace_dropped,
		      (unsigned long long)res.rings_nospace, (unsigned long long)res.claimed);
	assert_int_equal(res.events + res.dropped, (uint64_t)THREADS * FLOOD);
	/* The oracle: a thread without a ring drops all its events, and claims at its
	 * first event and every RETRY after. */
	assert_true(res.claimed >= 1 && res.claimed < THREADS);
	no_ring = THREADS - res.claimed;
	assert_int_equal(res.nospace_dropped, no_ring * FLOOD);
	assert_int_equal(res.rings_nospace, no_ring * ((FLOOD + RETRY - 1) / RETRY));
	err = rp_test_slurp("/tmp/rp_test_nospace.err", &len);
	unlink("/tmp/rp_test_nospace.err");
	assert_non_null(strstr(err, "no room in /dev/shm"));
	assert_non_null(strstr(err, "RINGPROF_RING_EVENTS"));
	assert_int_equal(strchr(err, '\n') - err + 1, (long)len); /* one line */
	free(err);
}

/* Segments of @session left in /dev/shm. */
static unsigned segments(const char *session)
{
	char prefix[64];
	unsigned n = 0;
	DIR *d = opendir("/dev/shm");

	assert_non_null(d);
	snprintf(prefix, sizeof(prefix), "ringprof.%s.", session);
	for (struct dirent *de; (de = readdir(d)) != NULL;)
		n += strncmp(de->d_name, prefix, strlen(prefix)) == 0;
	closedir(d);
	return n;
}

static void test_nospace_repeated_runs_without_engine(void **state)
{
	const char *sess = "t_nospace_rep";
	int rc;

	(void)state;
	for (int i = 1; i <= 20; i++) {
		rc = rp_test_sh(NULL, NULL, "RINGPROF_SESSION=%s RINGPROF_NO_ENGINE= %s --quiet "
				"--threads 4 --duration 0.2 --rate 300 --time-scale 0.05 "
				">/dev/null 2>&1", sess, demo);
		if (rc != 0)
			fail_msg("run %d of the demo exited %d (%u segments left)", i, rc,
				 segments(sess));
	}
	assert_true(segments(sess) <= 8); /* RINGPROF_KEEP_MAX's default */
	print_message("    20 runs: %u segments kept, %llu KB of /dev/shm free\n",
		      segments(sess), (unsigned long long)(shm_free() >> 10));
	/* A flood that wants more than /dev/shm has, then the small run again. */
	assert_int_equal(rp_test_sh(NULL, NULL, "RINGPROF_SESSION=%s RINGPROF_NO_ENGINE= %s "
				    "--quiet --threads 24 --no-sleep --duration 0.5 >/dev/null "
				    "2>&1", sess, demo), 0);
	assert_int_equal(rp_test_sh(NULL, NULL, "RINGPROF_SESSION=%s RINGPROF_NO_ENGINE= %s "
				    "--quiet --threads 4 --duration 0.2 --rate 300 "
				    "--time-scale 0.05 >/dev/null 2>&1", sess, demo), 0);
	assert_true(segments(sess) <= 8);
	rp_test_sh(NULL, NULL, "rm -f /dev/shm/ringprof.%s.*", sess);
}

static uint64_t json_u64(yajl_val v, const char *key)
{
	const char *path[] = { key, NULL };
	yajl_val x = yajl_tree_get(v, path, yajl_t_number);

	assert_non_null(x);
	return strtoull(YAJL_GET_NUMBER(x), NULL, 10);
}

static void test_nospace_engine_counts_every_event(void **state)
{
	const char *sess = "t_nospace_eng";
	const char *spath[] = { "sources", NULL };
	char dir[64] = "/tmp/rp_nospace_XXXXXX", filler[64], *out, *path, *json, err[256];
	struct timespec ms = { 0, 10000000 };
	unsigned long long emitted = 0;
	uint64_t events = 0, dropped = 0, nospace = 0, claims = 0;
	yajl_val root, src;
	pid_t eng;
	int st;

	(void)state;
	assert_non_null(mkdtemp(dir));
	eng = fork();
	if (eng == 0) {
		execl(bin, "ringprof", "run", "--session", sess, "--snapshot-dir", dir, "--quiet",
		      (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 500 && rp_test_sh(NULL, NULL, "%s snapshot --session %s "
					      ">/dev/null 2>&1", bin, sess) != 0; i++)
		nanosleep(&ms, NULL);
	fill_shm(filler, UINT64_C(6) << 20); /* the segment's 1.7 MB and one ring */
	assert_int_equal(rp_test_sh(&out, NULL, "RINGPROF_SESSION=%s RINGPROF_NO_ENGINE= %s "
				    "--quiet --threads 8 --no-sleep --duration 0.5", sess, demo), 0);
	unlink(filler);
	assert_int_equal(sscanf(out, "emitted: %llu", &emitted), 1);
	free(out);
	assert_int_equal(rp_test_sh(&path, NULL, "%s snapshot --timeout-ms 60000 --session %s",
				    bin, sess), 0);
	path[strcspn(path, "\n")] = '\0';
	assert_int_equal(rp_test_sh(&json, NULL, "%s report %s --format json", bin, path), 0);
	root = yajl_tree_parse(json, err, sizeof(err));
	assert_non_null(root);
	src = yajl_tree_get(root, spath, yajl_t_array);
	for (size_t i = 0; i < YAJL_GET_ARRAY(src)->len; i++) {
		yajl_val s = YAJL_GET_ARRAY(src)->values[i];

		events += json_u64(s, "events");
		dropped += json_u64(s, "dropped");
		nospace += json_u64(s, "nospace_dropped");
		claims += json_u64(s, "rings_nospace");
	}
	print_message("    emitted %llu: events %llu, dropped %llu (%llu for want of room, %llu "
		      "claims refused)\n", emitted, (unsigned long long)events,
		      (unsigned long long)dropped, (unsigned long long)nospace,
		      (unsigned long long)claims);
	assert_int_equal(events + dropped, emitted);
	assert_true(claims > 0 && nospace > 0 && nospace <= dropped);
	assert_int_equal(rp_test_sh(&out, NULL, "%s report %s", bin, path), 0);
	assert_non_null(strstr(out, "no room in /dev/shm:"));
	free(out);
	yajl_tree_free(root);
	free(json);
	free(path);
	kill(eng, SIGTERM);
	assert_int_equal(waitpid(eng, &st, 0), eng);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	rp_test_sh(NULL, NULL, "rm -rf %s", dir);
}

/* Entries of @dir. */
static unsigned dir_entries(const char *dir)
{
	unsigned n = 0;
	DIR *d = opendir(dir);

	assert_non_null(d);
	for (struct dirent *de; (de = readdir(d)) != NULL;)
		n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
	closedir(d);
	return n;
}

/* Snapshots into a full file system (this /dev/shm: a live snapshot is written and
 * renamed at once, then nothing to fsync): `ringprof snapshot` says the engine's
 * reason (ENOSPC and the path), no temporary file stays, the last good snapshot is
 * still whole at its name, and once there is room again the engine writes again. */
static void test_nospace_snapshot_write_fails_told(void **state)
{
	const char *sess = "t_nospace_snap";
	char dir[64] = "/dev/shm/rp_nospace_snapXXXXXX", filler[64], want[300], *out = NULL;
	char *path = NULL;
	pid_t eng;
	int rc;

	(void)state;
	assert_non_null(mkdtemp(dir));
	eng = rp_test_engine_spawn(bin, sess, dir, NULL, NULL, "--quiet", "--no-socket",
				   (char *)NULL);
	assert_int_equal(rp_test_engine_wait(sess, eng, NULL), -1);
	assert_int_equal(rp_test_sh(&path, NULL, "%s snapshot --timeout-ms 60000 --session %s",
				    bin, sess), 0);
	path[strcspn(path, "\n")] = '\0';
	assert_int_equal(dir_entries(dir), 1);
	fill_shm(filler, 0);
	rc = rp_test_sh(&out, NULL, "%s snapshot --session %s --timeout-ms 60000 2>&1", bin,
			sess);
	print_message("    %s", out);
	assert_int_equal(rc, 1);
	snprintf(want, sizeof(want), "could not write its snapshot: %s/ringprof-%s.msgpack: %s "
		 "(errno %d)", dir, sess, strerror(ENOSPC), ENOSPC);
	if (strstr(out, want) == NULL)
		fail_msg("no \"%s\" in: %s", want, out);
	free(out);
	assert_int_equal(dir_entries(dir), 1); /* no temporary file left */
	assert_int_equal(rp_test_sh(NULL, NULL, "%s report %s >/dev/null", bin, path), 0);
	unlink(filler);
	assert_int_equal(rp_test_sh(NULL, NULL, "%s snapshot --timeout-ms 60000 --session %s "
				    ">/dev/null", bin, sess), 0);
	assert_int_equal(rp_test_engine_stop(eng), 0);
	free(path);
	rp_test_sh(NULL, NULL, "rm -rf %s", dir);
}

/* Re-executes this binary in a private mount namespace over a 64 MB tmpfs. */
static int enter_namespace(char **argv)
{
	const char *un = geteuid() == 0 ? "-m" : "-rm";
	char probe[128];

	snprintf(probe, sizeof(probe), "unshare %s sh -c 'mount -t tmpfs -o size=4k tmpfs "
		 "/dev/shm' >/dev/null 2>&1", un);
	if (system(probe) != 0) {
		printf("skipped: no private mount namespace with its own /dev/shm here "
		       "(unshare %s, mount -t tmpfs: not permitted)\n", un);
		return 77;
	}
	setenv("RP_NOSPACE_INNER", "1", 1);
	execlp("unshare", "unshare", un, "sh", "-c",
	       "mount -t tmpfs -o size=64m tmpfs /dev/shm || exit 77; exec \"$0\"", argv[0],
	       (char *)NULL);
	perror("unshare");
	return 77;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nospace_flooding_threads_exit_cleanly),
		cmocka_unit_test(test_nospace_repeated_runs_without_engine),
		cmocka_unit_test(test_nospace_engine_counts_every_event),
		cmocka_unit_test(test_nospace_snapshot_write_fails_told),
	};
	const char *b = getenv("RP_BIN_DIR");

	(void)argc;
	if (getenv("RP_NOSPACE_INNER") == NULL)
		return enter_namespace(argv);
	snprintf(demo, sizeof(demo), "%s/ringprof-demo", b ? b : "../tools");
	snprintf(bin, sizeof(bin), "%s/ringprof", b ? b : "../tools");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
