// SPDX-License-Identifier: MIT
/*
 * The CLI end to end, through the built binaries (RP_BIN_DIR): analyze renders the
 * same figures as the in-process engine, in JSON and in a pstats file that Python's
 * pstats loads with the same totals; bad input gives one line and a non-zero exit;
 * and the live path: `ringprof run` + `ringprof-demo` + `ringprof snapshot`, whose
 * json report accounts for every event the demo emitted (events + dropped), a
 * producer killed mid-span, and an engine killed and restarted.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <yajl/yajl_tree.h>

#include "import_chrome.h"
#include "support.h"

static char bindir[512], bin[600], tmpdir[256], torch[512];

/* Children still running: killed by teardown when a test fails half-way, so they
 * do not hold ctest's output pipes open. */
static pid_t children[16];
static unsigned n_children;

static pid_t track(pid_t pid)
{
	if (pid > 0 && n_children < 16)
		children[n_children++] = pid;
	return pid;
}

/* A shell command: its stdout in *out (malloc'ed, may be NULL); exit status. */
#define run(out, ...) rp_test_sh(out, NULL, __VA_ARGS__)

static uint64_t json_u64(yajl_val v, const char *key)
{
	const char *path[] = { key, NULL };
	yajl_val x = yajl_tree_get(v, path, yajl_t_number);

	assert_non_null(x);
	return strtoull(YAJL_GET_NUMBER(x), NULL, 10);
}

static void test_cli_analyze_json_matches_engine(void **state)
{
	char *out, why[RP_WHY_MAX], err[256];
	struct rp_engine *e;
	struct rp_report r;
	yajl_val root, fns;
	const char *fpath[] = { "functions", NULL };
	uint64_t self = 0, calls = 0;

	(void)state;
	assert_int_equal(run(&out, "%s analyze %s --format json", bin, torch), 0);
	root = yajl_tree_parse(out, err, sizeof(err));
	assert_non_null(root);
	assert_int_equal(rp_engine_open(NULL, &e), 0);
	assert_int_equal(rp_import_chrome(e, torch, NULL, NULL, why), 0);
	assert_int_equal(rp_engine_report(e, &r), 0);
	assert_int_equal(json_u64(root, "events"), r.events);
	fns = yajl_tree_get(root, fpath, yajl_t_array);
	assert_non_null(fns);
	assert_int_equal(YAJL_GET_ARRAY(fns)->len, r.n_fns);
	for (size_t i = 0; i < YAJL_GET_ARRAY(fns)->len; i++) {
		self += json_u64(YAJL_GET_ARRAY(fns)->values[i], "self_ns");
		calls += json_u64(YAJL_GET_ARRAY(fns)->values[i], "calls");
	}
	for (uint32_t i = 0; i < r.n_fns; i++) {
		self -= r.fns[i].self_ns;
		calls -= r.fns[i].calls;
	}
	assert_int_equal(self, 0);
	assert_int_equal(calls, 0);
	rp_report_free(&r);
	rp_engine_close(e);
	yajl_tree_free(root);
	free(out);
}

static void test_cli_pstats_loads_in_python(void **state)
{
	char *out, prof[512];
	double tt, want_tt = 0;
	unsigned long long nc, pc, want_nc = 0, want_pc = 0;
	char why[RP_WHY_MAX];
	struct rp_engine *e;
	struct rp_report r;

	(void)state;
	if (access("/usr/bin/python3", X_OK) != 0)
		skip();
	snprintf(prof, sizeof(prof), "%s/torch.prof", tmpdir);
	assert_int_equal(run(NULL, "%s analyze %s --format pstats -o %s", bin, torch,
			     prof), 0);
	assert_int_equal(run(&out, "/usr/bin/python3 -c \"import pstats; s = pstats.Stats('%s');"
				   " print(s.total_calls, s.prim_calls, repr(s.total_tt))\"",
			     prof), 0);
	assert_int_equal(sscanf(out, "%llu %llu %lf", &nc, &pc, &tt), 3);
	assert_int_equal(rp_engine_open(NULL, &e), 0);
	assert_int_equal(rp_import_chrome(e, torch, NULL, NULL, why), 0);
	assert_int_equal(rp_engine_report(e, &r), 0);
	for (uint32_t i = 0; i < r.n_fns; i++) {
		want_nc += r.fns[i].calls;
		want_pc += r.fns[i].primitive_calls;
		want_tt += (double)r.fns[i].self_ns / 1e9;
	}
	assert_int_equal(nc, want_nc);
	assert_int_equal(pc, want_pc);
	assert_true(tt > want_tt * (1 - 1e-9) && tt < want_tt * (1 + 1e-9));
	rp_report_free(&r);
	rp_engine_close(e);
	free(out);
}

static void test_cli_errors_are_one_line(void **state)
{
	char *out;

	(void)state;
	assert_int_equal(run(&out, "%s analyze /nonexistent.json 2>&1", bin), 1);
	assert_non_null(strstr(out, "ringprof: /nonexistent.json"));
	assert_int_equal(strchr(out, '\n') - out + 1, (long)strlen(out));
	free(out);
	assert_int_equal(run(NULL, "%s analyze %s --format xml 2>/dev/null", bin,
			     torch), 2);
	assert_int_equal(run(NULL, "%s report /etc/hostname 2>/dev/null", bin), 1);
	/* a pstats file (ours) is called one, not "JSON (a trace?)" */
	assert_int_equal(run(&out, "%s analyze %s --format pstats -o %s/p.pstats && %s report "
			     "%s/p.pstats 2>&1", bin, torch, tmpdir, bin, tmpdir), 1);
	assert_non_null(strstr(out, "p.pstats: not a snapshot: it is a Python pstats file"));
	assert_int_equal(strchr(out, '\n') - out + 1, (long)strlen(out));
	free(out);
	assert_int_equal(run(NULL, "%s frobnicate 2>/dev/null", bin), 2);
	assert_int_equal(run(NULL, "%s snapshot --session nobody_here 2>/dev/null",
			     bin), 1);
}

/* --- manners: version, help, bad command lines --- */

static const char *const commands[] = { "run",	   "top",      "snapshot", "report",
					"analyze", "merge",    "segments", "probe" };

/* One line, ending in a newline. */
static void assert_one_line(const char *out)
{
	assert_non_null(strchr(out, '\n'));
	assert_int_equal(strchr(out, '\n') - out + 1, (long)strlen(out));
}

/*
 * -o FILE: written whole (the same bytes as stdout) over an existing file, no temporary
 * file left; a destination that cannot be opened or written is named in one line with
 * its errno's text, exit 1, and stdout's write error as it always was.
 */
static void test_cli_output_whole_or_named_error(void **state)
{
	char *out;

	(void)state;
	assert_int_equal(run(NULL, "echo old >%s/o.json && %s analyze %s --format json -o "
			     "%s/o.json && %s analyze %s --format json | cmp - %s/o.json", tmpdir,
			     bin, torch, tmpdir, bin, torch, tmpdir), 0);
	assert_int_equal(run(&out, "ls -a %s | grep -c '\\.tmp\\.'", tmpdir), 1);
	free(out);
	assert_int_equal(run(&out, "%s analyze %s --format folded -o %s/none/o.txt 2>&1", bin,
			     torch, tmpdir), 1);
	assert_true(strstr(out, "/none/o.txt: No such file or directory\n") != NULL);
	assert_one_line(out);
	free(out);
	if (access("/dev/full", W_OK) != 0) {
		print_message("    no /dev/full: its write errors not checked\n");
		return;
	}
	assert_int_equal(run(&out, "%s analyze %s --format json -o /dev/full 2>&1", bin, torch),
			 1);
	assert_string_equal(out, "ringprof: /dev/full: No space left on device\n");
	free(out);
	assert_int_equal(run(&out, "%s analyze %s --format json 2>&1 >/dev/full", bin, torch),
			 1);
	assert_string_equal(out, "ringprof: stdout: Input/output error\n");
	free(out);
}

static void test_cli_version_is_the_project_version(void **state)
{
	char *out, want[64];

	(void)state;
	/* RP_PROJECT_VERSION: CMake's project() version, given to this test directly */
	snprintf(want, sizeof(want), "ringprof %s\n", RP_PROJECT_VERSION);
	assert_int_equal(run(&out, "%s --version", bin), 0);
	assert_string_equal(out, want);
	free(out);
	snprintf(want, sizeof(want), "ringprof-demo %s\n", RP_PROJECT_VERSION);
	assert_int_equal(run(&out, "%s/ringprof-demo --version", bindir), 0);
	assert_string_equal(out, want);
	free(out);
}

/* `ringprof help CMD` is `ringprof CMD --help`: that command's own text (not the
 * global usage), on stdout, exit 0; every command is listed in the global one. */
static void test_cli_help_per_command(void **state)
{
	char *global, *help, *own, want[64];

	(void)state;
	assert_int_equal(run(&global, "%s --help", bin), 0);
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		snprintf(want, sizeof(want), "\n  %s ", commands[i]);
		assert_non_null(strstr(global, want));
		assert_int_equal(run(&help, "%s help %s", bin, commands[i]), 0);
		assert_int_equal(run(&own, "%s %s --help", bin, commands[i]), 0);
		assert_string_equal(help, own);
		snprintf(want, sizeof(want), "usage: ringprof %s", commands[i]);
		assert_memory_equal(help, want, strlen(want));
		assert_string_not_equal(help, global);
		free(help);
		free(own);
	}
	free(global);
	assert_int_equal(run(&help, "%s help nosuch 2>&1", bin), 2);
	assert_one_line(help);
	free(help);
}

/* Every numeric option refuses what is not a whole number in its range, in one line
 * naming the option and the range, exit 2, before doing anything. */
static void test_cli_bad_numbers_named(void **state)
{
	static const struct {
		const char *args, *line;
	} cases[] = {
		{ "run --tick-ms -5", "ringprof: --tick-ms -5: a whole number from 1 to 10000\n" },
		{ "run --tick-ms abc", "ringprof: --tick-ms abc: a whole number from 1 to 10000\n" },
		{ "run --tick-ms 0", "ringprof: --tick-ms 0: a whole number from 1 to 10000\n" },
		{ "run --delay-ms 5x", "ringprof: --delay-ms 5x: a whole number from 0 to 600000\n" },
		{ "run --max-clients 4097",
		  "ringprof: --max-clients 4097: a whole number from 1 to 4096\n" },
		{ "run --client-idle-ms ' 7'",
		  "ringprof: --client-idle-ms  7: a whole number from 1 to 86400000\n" },
		{ "run --offcpu-threads 99999999999999999999",
		  "ringprof: --offcpu-threads 99999999999999999999: a whole number from 1 to "
		  "65536\n" },
		{ "run --max-names 0", "ringprof: --max-names 0: a whole number from 1 to 67108864\n" },
		{ "report --limit abc x.msgpack",
		  "ringprof: --limit abc: a whole number from 0 to 4294967295\n" },
		{ "analyze --gantt-rows -1 x.json",
		  "ringprof: --gantt-rows -1: a whole number from 0 to 4294967295\n" },
		{ "analyze --max-aiq-nodes +3 x.json",
		  "ringprof: --max-aiq-nodes +3: a whole number from 0 to 4294967295\n" },
		{ "snapshot --timeout-ms 1e3",
		  "ringprof: --timeout-ms 1e3: a whole number from 0 to 3600000\n" },
	};
	char *out;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(run(&out, "%s %s 2>&1", bin, cases[i].args), 2);
		assert_string_equal(out, cases[i].line);
		free(out);
	}
}

/* A bad option: one line naming it, with the hint, exit 2 (not the usage). */
static void test_cli_bad_option_one_line(void **state)
{
	static const struct {
		const char *args, *line;
	} cases[] = {
		{ "run --bogus",
		  "ringprof: run: --bogus: unknown option (try `ringprof help run`)\n" },
		{ "top --bogus=3",
		  "ringprof: top: --bogus: unknown option (try `ringprof help top`)\n" },
		{ "snapshot --timeout-ms",
		  "ringprof: snapshot: --timeout-ms needs a value (try `ringprof help snapshot`)\n" },
		{ "segments -x",
		  "ringprof: segments: -x: unknown option or missing value (try `ringprof help "
		  "segments`)\n" },
		{ "run extra", "ringprof: run: extra: unexpected argument (try `ringprof help run`)\n" },
		{ "", "ringprof: need a command (try ringprof --help)\n" },
	};
	char *out;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(run(&out, "%s %s 2>&1", bin, cases[i].args), 2);
		assert_string_equal(out, cases[i].line);
		free(out);
	}
}

/* The other programs: --help is usage on stdout, exit 0, and nothing else (the
 * generators used to write a trace); a bad number is one line, exit 2. */
static void test_cli_tools_help(void **state)
{
	static const char *const tools[] = { "ringprof-demo", "gen_nat", "gen_chrome" };
	char *out, want[64];

	(void)state;
	for (size_t i = 0; i < sizeof(tools) / sizeof(tools[0]); i++) {
		assert_int_equal(run(&out, "%s/%s --help 2>&1", bindir, tools[i]), 0);
		snprintf(want, sizeof(want), "usage: %s ", tools[i]);
		assert_memory_equal(out, want, strlen(want));
		assert_null(strchr(out, '{'));
		free(out);
	}
	assert_int_equal(run(&out, "%s/gen_nat 12x 2>&1", bindir), 2);
	assert_string_equal(out, "gen_nat: STEPS 12x: not valid (try gen_nat --help)\n");
	free(out);
	assert_int_equal(run(&out, "%s/gen_chrome 10 --threads -1 2>&1", bindir), 2);
	assert_string_equal(out, "gen_chrome: --threads -1: not valid (try gen_chrome --help)\n");
	free(out);
}

/* The bash completion: commands, then a command's options from its own help, then
 * the values of --format. */
static void test_cli_bash_completion(void **state)
{
	static const struct {
		const char *words, *want;
	} cases[] = {
		{ "an", "analyze\n" },
		{ "help seg", "segments\n" },
		{ "report --fo", "--format\n" },
		{ "run --tick", "--tick-ms\n" },
		{ "top --sor", "--sort\n" },
		{ "analyze x.json --format pp", "pprof\n" },
		{ "top --view th", "threads\n" },
	};
	const char *comp = getenv("RP_COMPLETION");
	char *out;

	(void)state;
	if (comp == NULL || run(NULL, "command -v bash >/dev/null") != 0) {
		print_message("    skipped: no bash or RP_COMPLETION\n");
		return;
	}
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(run(&out, "bash -c '. %s; COMP_WORDS=(%s %s); "
				     "COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _ringprof; "
				     "printf \"%%s\\n\" \"${COMPREPLY[@]}\"'", comp, bin,
				     cases[i].words), 0);
		if (strcmp(out, cases[i].want) != 0)
			fail_msg("%s: got \"%s\", want \"%s\"", cases[i].words, out, cases[i].want);
		free(out);
	}
}

/* The man page (help2man): every command's own help is in it. */
static void test_cli_man_page(void **state)
{
	const char *man = getenv("RP_MAN");
	char *out;

	(void)state;
	if (man == NULL) {
		print_message("    skipped: no help2man at build time (no man page)\n");
		return;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		assert_int_equal(run(&out, "grep -c '^usage: ringprof %s' %s", commands[i], man), 0);
		assert_string_equal(out, "1\n");
		free(out);
	}
	assert_int_equal(run(NULL, "grep -q '^ringprof-demo' %s/man/ringprof-demo.1 && "
			     "grep -qF -- '\\-\\-duration' %s/man/ringprof-demo.1", bindir, bindir), 0);
}

/* --- the live path --- */

/* @refuse_uring: make the loop believe io_uring is refused (the poll(2) path);
 * the engine's stderr goes to <tmpdir>/<session>.err. Not waited for. */
static pid_t start_engine_ex(const char *session, bool refuse_uring)
{
	char dir[300], err[400];

	snprintf(dir, sizeof(dir), "%s/snaps", tmpdir);
	snprintf(err, sizeof(err), "%s/%s.err", tmpdir, session);
	return track(rp_test_engine_spawn(bin, session, dir, err,
					  refuse_uring ? "RINGPROF_LOOP_FAIL_URING=1" : NULL,
					  "--quiet", (char *)NULL));
}

static pid_t start_engine(const char *session)
{
	return start_engine_ex(session, false);
}

/* Until the marker names @pid: it holds the marker's lock and has blocked the
 * signals we send; a killed engine's marker stays until the next one replaces it,
 * and a slow start (sanitizers) must not be mistaken for it. */
static void wait_engine(const char *session, pid_t pid)
{
	assert_int_equal(rp_test_engine_wait(session, pid, NULL), -1);
}

static int wait_exit(pid_t pid)
{
	int st;

	for (unsigned i = 0; i < n_children; i++)
		if (children[i] == pid)
			children[i] = children[--n_children];
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Calls of every function row named @name. */
static uint64_t calls_of(yajl_val root, const char *name)
{
	const char *fpath[] = { "functions", NULL }, *npath[] = { "name", NULL };
	yajl_val fns = yajl_tree_get(root, fpath, yajl_t_array);
	uint64_t n = 0;

	for (size_t i = 0; i < YAJL_GET_ARRAY(fns)->len; i++) {
		yajl_val f = YAJL_GET_ARRAY(fns)->values[i];
		const char *fname = YAJL_GET_STRING(yajl_tree_get(f, npath, yajl_t_string));
		if (fname != NULL && strcmp(fname, name) == 0)
			n += json_u64(f, "calls");
	}
	return n;
}

/* The demo's shape: every request a queue span; served ones a prefill and 8-64
 * decode steps (plus more inside LLM calls). */
static void check_demo_shape(yajl_val root)
{
	uint64_t req = calls_of(root, "request"), queue = calls_of(root, "queue");
	uint64_t prefill = calls_of(root, "prefill"), decode = calls_of(root, "decode_step");

	print_message("    requests %llu, prefill %llu, decode steps %llu\n",
		      (unsigned long long)req, (unsigned long long)prefill,
		      (unsigned long long)decode);
	assert_true(req > 0);
	assert_int_equal(queue, req);
	assert_true(prefill <= req && prefill > 0);
	assert_true(decode >= 8 * prefill);
}

/* The json report of the session's latest snapshot; events + dropped of sources
 * whose pid is @pid. */
static void snapshot_counts(const char *session, pid_t pid, uint64_t *events, uint64_t *dropped,
			    bool shape)
{
	char *path, *json, err[256];
	const char *spath[] = { "sources", NULL };
	yajl_val root, src;

	assert_int_equal(run(&path, "%s snapshot --timeout-ms 60000 --session %s", bin, session), 0);
	path[strcspn(path, "\n")] = '\0';
	assert_int_equal(run(&json, "%s report %s --format json", bin, path), 0);
	root = yajl_tree_parse(json, err, sizeof(err));
	assert_non_null(root);
	src = yajl_tree_get(root, spath, yajl_t_array);
	*events = *dropped = 0;
	for (size_t i = 0; i < YAJL_GET_ARRAY(src)->len; i++) {
		yajl_val s = YAJL_GET_ARRAY(src)->values[i];
		if (json_u64(s, "pid") == (uint64_t)pid) {
			*events += json_u64(s, "events");
			*dropped += json_u64(s, "dropped");
		}
	}
	if (shape)
		check_demo_shape(root);
	yajl_tree_free(root);
	free(json);
	free(path);
}

static pid_t start_demo(const char *session, const char *args, int *out_fd)
{
	int p[2];
	pid_t pid;

	assert_int_equal(pipe(p), 0);
	pid = track(fork());
	if (pid == 0) {
		char cmd[1024];
		dup2(p[1], 1);
		close(p[0]);
		setenv("RINGPROF_SESSION", session, 1);
		unsetenv("RINGPROF_NO_ENGINE"); /* the default exit path is under test */
		snprintf(cmd, sizeof(cmd), "exec %s-demo --quiet %s", bin, args);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	*out_fd = p[0];
	return pid;
}

static uint64_t read_emitted(int fd)
{
	char buf[256] = "";
	unsigned long long n = 0;
	ssize_t got = read(fd, buf, sizeof(buf) - 1);

	close(fd);
	assert_true(got > 0 && sscanf(buf, "emitted: %llu", &n) == 1);
	return n;
}

/* `snapshot -o PATH` keeps it there; `--keep` twice gives two files, both whole,
 * though the engine's own file was replaced in between. */
static void keep_snapshots(const char *session)
{
	char *a, *b, *c, *out;
	struct timespec ms = { 0, 2000000 };

	assert_int_equal(run(&a, "%s snapshot --timeout-ms 60000 --session %s -o %s/kept.msgpack",
			     bin, session, tmpdir), 0);
	a[strcspn(a, "\n")] = '\0';
	assert_true(strstr(a, "/kept.msgpack") != NULL);
	assert_int_equal(run(&b, "%s snapshot --timeout-ms 60000 --session %s --keep", bin, session), 0);
	nanosleep(&ms, NULL);
	assert_int_equal(run(&c, "%s snapshot --timeout-ms 60000 --session %s --keep", bin, session), 0);
	b[strcspn(b, "\n")] = c[strcspn(c, "\n")] = '\0';
	assert_string_not_equal(b, c);
	assert_true(strstr(b, session) != NULL && strstr(b, ".msgpack") != NULL);
	for (char **p = (char *[]){ a, b, c, NULL }; *p != NULL; p++) {
		assert_int_equal(run(&out, "%s report %s --format json >/dev/null", bin, *p), 0);
		free(out);
		unlink(*p);
		free(*p);
	}
}

static void live_accounting(const char *session, bool refuse_uring)
{
	uint64_t events, dropped, emitted;
	pid_t eng, demo;
	int fd;

	eng = start_engine_ex(session, refuse_uring);
	wait_engine(session, eng);
	demo = start_demo(session, "--duration 2 --rate 300 --time-scale 0.2", &fd);
	emitted = read_emitted(fd);
	assert_int_equal(wait_exit(demo), 0);
	snapshot_counts(session, demo, &events, &dropped, true);
	print_message("    emitted %llu, events %llu, dropped %llu\n",
		      (unsigned long long)emitted, (unsigned long long)events,
		      (unsigned long long)dropped);
	assert_int_equal(events + dropped, emitted);
	if (!refuse_uring)
		keep_snapshots(session);
	kill(eng, SIGTERM);
	assert_int_equal(wait_exit(eng), 0);
}

static void test_cli_live_accounts_for_every_event(void **state)
{
	(void)state;
	char session[32];

	snprintf(session, sizeof(session), "t_cli_live_%d", (int)getpid());
	live_accounting(session, false);
}

/* io_uring refused (as in many containers): one line says so, the same loop runs
 * on poll(2), with the same result. */
static void test_cli_live_on_poll_when_uring_refused(void **state)
{
	char *out, session[32];

	(void)state;
	snprintf(session, sizeof(session), "t_cli_poll_%d", (int)getpid());
	live_accounting(session, true);
	assert_int_equal(run(&out, "cat %s/%s.err", tmpdir, session), 0);
	assert_non_null(strstr(out, "io_uring: Operation not permitted; using poll(2)"));
	free(out);
}

/* The engine dies (SIGKILL) and a new one takes the running producer over. */
static void test_cli_engine_restart_reattaches(void **state)
{
	char session[32];
	uint64_t events, dropped;
	struct timespec pause = { 0, 300000000 };
	pid_t eng, demo;
	int fd;

	(void)state;
	snprintf(session, sizeof(session), "t_cli_restart_%d", (int)getpid());
	eng = start_engine(session);
	wait_engine(session, eng);
	/* Runs until told to stop (SIGTERM: it stops, prints its count, exits 0): one
	 * that ended before the new engine came up would have unlinked its segment, as
	 * a producer with no live engine does, on a machine slow to start engines. */
	demo = start_demo(session, "--duration 600 --rate 200 --time-scale 0.2", &fd);
	nanosleep(&pause, NULL);
	kill(eng, SIGKILL);
	assert_int_equal(wait_exit(eng), 128 + SIGKILL);
	eng = start_engine(session); /* the marker names a dead pid: replaced */
	wait_engine(session, eng);
	nanosleep(&pause, NULL);
	/* No shape check: requests begun before the restart end unmatched here. */
	snapshot_counts(session, demo, &events, &dropped, false);
	assert_true(events > 0); /* the new engine drains the same producer */
	kill(demo, SIGTERM);
	read_emitted(fd);
	assert_int_equal(wait_exit(demo), 0);
	kill(eng, SIGTERM);
	assert_int_equal(wait_exit(eng), 0);
}

/* --- issue 10: one consumer, no silent loss, no signal to a stranger --- */

/* Repro 1: a second `run` for a running session is refused and leaves the first
 * one's marker alone: `snapshot` still reaches it, and no second consumer starts. */
static void test_cli_second_engine_refused(void **state)
{
	char session[32], *out;
	pid_t eng;

	(void)state;
	snprintf(session, sizeof(session), "t_cli_two_%d", (int)getpid());
	eng = start_engine(session);
	wait_engine(session, eng);
	assert_int_equal(run(&out, "%s run --session %s --snapshot-dir %s/snaps --quiet 2>&1",
			     bin, session, tmpdir), 1);
	assert_non_null(strstr(out, "an engine already runs"));
	free(out);
	assert_int_equal(run(&out, "%s snapshot --timeout-ms 60000 --session %s", bin, session), 0);
	free(out);
	/* and a third is refused too */
	assert_int_equal(run(NULL, "%s run --session %s --snapshot-dir %s/snaps --quiet "
			     "2>/dev/null", bin, session, tmpdir), 1);
	kill(eng, SIGTERM);
	assert_int_equal(wait_exit(eng), 0);
}

/* Repro 3: a marker naming a process that is not the session's engine (pid reused,
 * or written by hand) is not signalled, and does not block `run`. */
static void test_cli_snapshot_signals_only_the_engine(void **state)
{
	char session[32], name[128], *out;
	struct rp_wire_engine m = { .magic = RP_WIRE_ENGINE_MAGIC };
	pid_t victim, eng;
	int fd, st;

	(void)state;
	snprintf(session, sizeof(session), "t_cli_pid_%d", (int)getpid());
	victim = track(fork());
	if (victim == 0) {
		signal(SIGUSR1, SIG_DFL);
		pause();
		_exit(0);
	}
	m.pid = victim;
	snprintf(name, sizeof(name), "/ringprof.%s.engine", session);
	fd = shm_open(name, O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, &m, sizeof(m)), sizeof(m));
	assert_int_equal(write(fd, "/tmp/x.msgpack", 15), 15);
	close(fd);
	assert_int_equal(run(&out, "%s snapshot --session %s --timeout-ms 300 2>&1", bin,
			     session), 1);
	assert_non_null(strstr(out, "stale"));
	free(out);
	assert_int_equal(waitpid(victim, &st, WNOHANG), 0); /* still alive */
	eng = start_engine(session); /* the stale marker does not block it */
	wait_engine(session, eng);
	assert_int_equal(run(&out, "%s snapshot --timeout-ms 60000 --session %s", bin, session), 0);
	free(out);
	kill(eng, SIGTERM);
	assert_int_equal(wait_exit(eng), 0);
	kill(victim, SIGKILL);
	wait_exit(victim);
}

/* Repro 7: a chain of 9,000 nested calls (2 MB): the text report's indentation
 * would be 77 MB (quadratic in the depth); refused at once with what to use
 * instead, while --format aiq (JSON) renders it, and shallow trees still render. */
static void test_cli_aiq_text_deep_tree_refused(void **state)
{
	char *out;

	(void)state;
	assert_int_equal(run(NULL, "/usr/bin/python3 -c \"import json\n"
			     "D=9000; t=1750000000.0\n"
			     "s=[{'payload':{'event_type':'FUNCTION_START','event_timestamp':t+i*1e-3,"
			     "'name':'f','UUID':'u%%d'%%i}} for i in range(D)]\n"
			     "s+=[{'payload':{'event_type':'FUNCTION_END','event_timestamp':t+(2*D-i)*1e-3,"
			     "'name':'f','UUID':'u%%d'%%i}} for i in reversed(range(D))]\n"
			     "json.dump([{'request_number':0,'intermediate_steps':s}],"
			     "open('%s/deep.json','w'))\"", tmpdir), 0);
	assert_int_equal(run(&out, "%s analyze %s/deep.json --format aiq-text 2>&1 | head -c 4096",
			     bin, tmpdir), 0);
	assert_non_null(strstr(out, "the call tree is 8999 levels deep"));
	assert_non_null(strstr(out, "use --format aiq (JSON)"));
	free(out);
	assert_int_equal(run(NULL, "%s analyze %s/deep.json --format aiq-text >/dev/null 2>&1",
			     bin, tmpdir), 1);
	assert_int_equal(run(NULL, "%s analyze %s/deep.json --format aiq -o %s/deep.aiq.json",
			     bin, tmpdir, tmpdir), 0);
}

/* Repro 4: a segment file truncated under the engine (a SIGBUS at its next read)
 * ends that source, logged, and nothing else: the engine keeps running and
 * answering. */
static void test_cli_shrunk_segment_survived(void **state)
{
	char session[32], seg[160], *out;
	struct timespec ms = { 0, 10000000 };
	pid_t eng, demo;
	int fd;

	(void)state;
	snprintf(session, sizeof(session), "t_cli_bus_%d", (int)getpid());
	eng = start_engine(session);
	wait_engine(session, eng);
	demo = start_demo(session, "--duration 3 --rate 300 --time-scale 0.2", &fd);
	snprintf(seg, sizeof(seg), "/dev/shm/ringprof.%s.%d.0", session, (int)demo);
	for (int i = 0; i < 500 && access(seg, F_OK) != 0; i++)
		nanosleep(&ms, NULL);
	for (int i = 0; i < 30; i++) /* the engine has attached it and reads it */
		nanosleep(&ms, NULL);
	assert_int_equal(truncate(seg, 4096), 0);
	close(fd);
	wait_exit(demo); /* it dies of the same SIGBUS: its own writes */
	assert_int_equal(run(&out, "%s snapshot --timeout-ms 60000 --session %s", bin, session), 0);
	free(out);
	assert_int_equal(kill(eng, 0), 0);
	kill(eng, SIGTERM);
	assert_int_equal(wait_exit(eng), 0);
}

/* Found by the soak: `ringprof snapshot` racing an engine's start (marker written,
 * signals not yet blocked) ended the engine with SIGUSR1's default action. */
static void test_cli_engine_start_survives_snapshot_requests(void **state)
{
	struct timespec pause = { 0, 200000000 };
	char session[32];
	pid_t asker, eng;

	(void)state;
	snprintf(session, sizeof(session), "t_cli_usr1_%d", (int)getpid());
	asker = track(fork());
	if (asker == 0) {
		char cmd[1024];
		snprintf(cmd, sizeof(cmd), "while :; do %s snapshot --session %s --timeout-ms 20 "
			 ">/dev/null 2>&1; done", bin, session);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 8; i++) {
		eng = start_engine(session);
		nanosleep(&pause, NULL);
		/* our own SIGTERM only once the marker names it: signals are blocked by
		 * then, and before (exec, a sanitizer's start) TERM's default is right */
		wait_engine(session, eng);
		kill(eng, SIGTERM);
		assert_int_equal(wait_exit(eng), 0);
	}
	kill(asker, SIGKILL);
	wait_exit(asker);
}

/* events, dropped and restart_gap of the sources of @pid in the latest snapshot. */
static void snapshot_counts_gap(const char *session, pid_t pid, uint64_t *events,
				uint64_t *dropped, uint64_t *gap)
{
	char *path, *json, err[256];
	const char *spath[] = { "sources", NULL }, *gpath[] = { "anomalies", "restart_gap", NULL };
	yajl_val root, src;

	assert_int_equal(run(&path, "%s snapshot --timeout-ms 60000 --session %s", bin, session), 0);
	path[strcspn(path, "\n")] = '\0';
	assert_int_equal(run(&json, "%s report %s --format json", bin, path), 0);
	root = yajl_tree_parse(json, err, sizeof(err));
	assert_non_null(root);
	src = yajl_tree_get(root, spath, yajl_t_array);
	*events = *dropped = *gap = 0;
	for (size_t i = 0; i < YAJL_GET_ARRAY(src)->len; i++) {
		yajl_val s = YAJL_GET_ARRAY(src)->values[i], g;
		if (json_u64(s, "pid") != (uint64_t)pid)
			continue;
		*events += json_u64(s, "events");
		*dropped += json_u64(s, "dropped");
		g = yajl_tree_get(s, gpath, yajl_t_number);
		assert_non_null(g);
		*gap += strtoull(YAJL_GET_NUMBER(g), NULL, 10);
	}
	yajl_tree_free(root);
	free(json);
	free(path);
}

/* Repro 2: the engine is stopped (SIGSTOP) while a short producer runs and exits;
 * after SIGCONT every record is there (the producer left its segment). */
static void test_cli_stopped_engine_loses_nothing(void **state)
{
	char session[32];
	uint64_t events, dropped, gap, emitted;
	pid_t eng, demo;
	int fd;

	(void)state;
	snprintf(session, sizeof(session), "t_cli_stop_%d", (int)getpid());
	eng = start_engine(session);
	wait_engine(session, eng);
	kill(eng, SIGSTOP);
	demo = start_demo(session, "--duration 1 --rate 300 --time-scale 0.2", &fd);
	emitted = read_emitted(fd);
	assert_int_equal(wait_exit(demo), 0);
	kill(eng, SIGCONT);
	snapshot_counts_gap(session, demo, &events, &dropped, &gap);
	print_message("    emitted %llu, events %llu, dropped %llu\n",
		      (unsigned long long)emitted, (unsigned long long)events,
		      (unsigned long long)dropped);
	assert_true(emitted > 0);
	assert_int_equal(events + dropped, emitted);
	kill(eng, SIGTERM);
	assert_int_equal(wait_exit(eng), 0);
}

/* Until the engine has read records from @pid's segment of @session (some ring's
 * consumer index moved), up to 60 s: read through a read-only mapping of our own. */
static void wait_engine_read(const char *session, pid_t pid)
{
	struct timespec ms = { 0, 10000000 };
	char name[160];

	snprintf(name, sizeof(name), "/dev/shm/ringprof.%s.%d.0", session, (int)pid);
	for (int i = 0; i < 6000; i++, nanosleep(&ms, NULL)) {
		int fd = open(name, O_RDONLY | O_CLOEXEC);
		struct stat st;
		const struct rp_wire_header *h;
		const struct rp_wire_ring *rings;
		bool read = false;

		if (fd < 0 || fstat(fd, &st) != 0 || (size_t)st.st_size < sizeof(*h)) {
			if (fd >= 0)
				close(fd);
			continue;
		}
		h = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
		close(fd);
		assert_true(h != MAP_FAILED);
		rings = (const void *)((const char *)h + h->ring_desc_offset);
		for (uint32_t r = 0; h->ring_desc_offset + (uint64_t)h->ring_count * sizeof(*rings) <=
				     (uint64_t)st.st_size && r < h->ring_count && !read; r++)
			read = __atomic_load_n(&rings[r].ring.c_head, __ATOMIC_ACQUIRE) != 0;
		munmap((void *)h, (size_t)st.st_size);
		if (read)
			return;
	}
	fail_msg("no engine read %s in 60 s", name);
}

/* Repro 8: an engine SIGKILLed after reading records it never wrote in a snapshot:
 * its successor counts them as restart_gap, so emitted = events + dropped + gap. */
static void test_cli_restart_gap_counted(void **state)
{
	char session[32];
	uint64_t events, dropped, gap, emitted;
	struct timespec pause = { 0, 500000000 };
	pid_t eng, demo;
	int fd;

	(void)state;
	snprintf(session, sizeof(session), "t_cli_gap_%d", (int)getpid());
	eng = start_engine(session);
	wait_engine(session, eng);
	/* Runs until stopped: it must outlive the first engine's reads and the second's
	 * start, however slow the machine. The first engine is killed once it has read
	 * some of its records (not after a pause: a sanitized demo on a loaded machine
	 * may not have written any by then), and half a second later. */
	demo = start_demo(session, "--duration 600 --rate 200 --time-scale 0.2", &fd);
	wait_engine_read(session, demo);
	nanosleep(&pause, NULL);
	kill(eng, SIGKILL);
	assert_int_equal(wait_exit(eng), 128 + SIGKILL);
	eng = start_engine(session);
	wait_engine(session, eng);
	kill(demo, SIGTERM);
	emitted = read_emitted(fd);
	assert_int_equal(wait_exit(demo), 0);
	snapshot_counts_gap(session, demo, &events, &dropped, &gap);
	print_message("    emitted %llu, events %llu, dropped %llu, restart_gap %llu\n",
		      (unsigned long long)emitted, (unsigned long long)events,
		      (unsigned long long)dropped, (unsigned long long)gap);
	assert_true(gap > 0);
	assert_int_equal(events + dropped + gap, emitted);
	kill(eng, SIGTERM);
	assert_int_equal(wait_exit(eng), 0);
}

static int setup(void **state)
{
	const char *b = getenv("RP_BIN_DIR"), *d = getenv("RP_TESTDATA");

	(void)state;
	snprintf(bindir, sizeof(bindir), "%s", b ? b : "../tools");
	snprintf(bin, sizeof(bin), "%s/ringprof", bindir);
	snprintf(torch, sizeof(torch), "%s/torch/cpu_legacy_trace.json",
		 d ? d : "tests/data");
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/rp_cli_XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	while (n_children > 0) {
		kill(children[--n_children], SIGKILL);
		waitpid(children[n_children], NULL, 0);
	}
	return run(NULL, "rm -rf %s", tmpdir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cli_analyze_json_matches_engine),
		cmocka_unit_test(test_cli_pstats_loads_in_python),
		cmocka_unit_test(test_cli_errors_are_one_line),
		cmocka_unit_test(test_cli_output_whole_or_named_error),
		cmocka_unit_test(test_cli_version_is_the_project_version),
		cmocka_unit_test(test_cli_help_per_command),
		cmocka_unit_test(test_cli_bad_numbers_named),
		cmocka_unit_test(test_cli_bad_option_one_line),
		cmocka_unit_test(test_cli_tools_help),
		cmocka_unit_test(test_cli_bash_completion),
		cmocka_unit_test(test_cli_man_page),
		cmocka_unit_test(test_cli_live_accounts_for_every_event),
		cmocka_unit_test(test_cli_second_engine_refused),
		cmocka_unit_test(test_cli_engine_start_survives_snapshot_requests),
		cmocka_unit_test(test_cli_shrunk_segment_survived),
		cmocka_unit_test(test_cli_aiq_text_deep_tree_refused),
		cmocka_unit_test(test_cli_snapshot_signals_only_the_engine),
		cmocka_unit_test(test_cli_stopped_engine_loses_nothing),
		cmocka_unit_test(test_cli_restart_gap_counted),
		cmocka_unit_test(test_cli_live_on_poll_when_uring_refused),
		cmocka_unit_test(test_cli_engine_restart_reattaches),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
