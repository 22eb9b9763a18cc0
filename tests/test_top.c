// SPDX-License-Identifier: MIT
/*
 * `ringprof top` as a user sees it, under a real engine and ringprof-demo: in tmux at
 * 80x24 and 120x40 (tmux capture-pane; skipped without tmux) every line fits the
 * screen and every element is whole (the header's figures, the table's title and
 * names, the status line with all its keys); keys 1-6 and < > pick the sort
 * column; piped, it writes plain frames and no escape code; a concurrency level at
 * its cap is marked (≥N) and the cap hit is named; events/s is over the window; a
 * request milestone is on its own line, not a row of the table.
 */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "support.h"

static char bin[600], tmpdir[256], session[64], tmux[400];
static pid_t engine, demo;

#define run(out, ...) rp_test_sh(out, NULL, __VA_ARGS__)

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

static pid_t spawn(const char *cmd)
{
	pid_t pid = fork();

	if (pid == 0) {
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* Columns of a UTF-8 line (every character one column: the frame has no wide ones). */
static int columns(const char *s, size_t n)
{
	int c = 0;

	for (size_t i = 0; i < n; i++)
		c += ((unsigned char)s[i] & 0xc0) != 0x80;
	return c;
}

/* The pane's text, after @keys (tmux send-keys arguments, "" none), once it shows
 * @want: top redraws once a second, later on a loaded machine (sanitizers, other
 * builds), so a fixed pause would be a guess; up to 60 s turns a hang into a failure.
 * The pane as last captured either way: the test's own checks say what is missing. */
static char *capture(const char *keys, const char *want)
{
	char *out = NULL;

	if (keys[0] != '\0')
		assert_int_equal(run(NULL, "%s send-keys -t top '%s'", tmux, keys), 0);
	for (int i = 0; i < 300; i++) {
		free(out);
		sleep_ms(200);
		assert_int_equal(run(&out, "%s capture-pane -p -t top", tmux), 0);
		if (strstr(out, want) != NULL)
			break;
	}
	return out;
}

/* Every line within @cols, @rows lines; the status line (the last) whole: ends
 * with @tail. */
static void assert_fits(const char *pane, int cols, int rows, const char *tail)
{
	const char *line = pane, *last = pane;
	int n = 0;

	for (const char *nl; (nl = strchr(line, '\n')) != NULL; line = nl + 1, n++) {
		if (columns(line, (size_t)(nl - line)) > cols)
			fail_msg("line %d wider than %d:\n%s", n + 1, cols, pane);
		if (nl > line)
			last = line;
	}
	if (n != rows)
		fail_msg("%d lines, not %d:\n%s", n, rows, pane);
	if (strlen(last) < strlen(tail) + 1 ||
	    strncmp(last + strlen(last) - strlen(tail) - 1, tail, strlen(tail)) != 0)
		fail_msg("status line cut: %s", last);
}

static void start_top(int cols, int rows)
{
	run(NULL, "%s kill-server 2>/dev/null", tmux);
	assert_int_equal(run(NULL, "LANG=C.UTF-8 %s new-session -d -s top -x %d -y %d "
			     "'LANG=C.UTF-8 %s top --session %s --dir %s'", tmux, cols, rows, bin,
			     session, tmpdir), 0);
}

static void test_top_80x24_fits(void **state)
{
	char *pane, *title;

	(void)state;
	start_top(80, 24);
	pane = capture("", "q:quit\n");
	assert_fits(pane, 80, 24, "q:quit");
	assert_memory_equal(pane, "ringprof top  session ", 22);
	assert_non_null(strstr(pane, "events/s ("));
	assert_non_null(strstr(pane, "\ndropped "));
	assert_non_null(strstr(pane, "\nwindow all  sort cum  view names"));
	assert_non_null(strstr(pane, "\nconcurrency overall now "));
	title = strstr(pane, "\n     calls    rate/s  self%");
	assert_non_null(title);
	assert_non_null(strstr(title, "p99  name [category]\n"));
	assert_non_null(strstr(title, "  request [REQUEST]\n"));
	assert_non_null(strstr(pane, " h:help /:filter v:view 1-6:sort w:window p:pause q:quit"));
	free(pane);
	/* keys: 1 calls, > the next column (self), 6 p99, < back to p90 */
	pane = capture("1", "sort calls  view");
	assert_non_null(strstr(pane, "sort calls  view"));
	free(pane);
	pane = capture(">", "sort self  view");
	assert_non_null(strstr(pane, "sort self  view"));
	free(pane);
	pane = capture("6", "sort p99  view");
	assert_non_null(strstr(pane, "sort p99  view"));
	free(pane);
	pane = capture("<", "sort p90  view");
	assert_non_null(strstr(pane, "sort p90  view"));
	free(pane);
	pane = capture("h", "help: any key closes it\n"); /* the help fits too */
	assert_fits(pane, 80, 24, "help: any key closes it");
	free(pane);
	run(NULL, "%s send-keys -t top q; %s kill-server 2>/dev/null", tmux, tmux);
}

static void test_top_120x40_shows_more(void **state)
{
	char *pane;

	(void)state;
	start_top(120, 40);
	pane = capture("", "q quit\n");
	assert_fits(pane, 120, 40, "q quit");
	assert_non_null(strstr(pane, "      p90      p99  name [category]\n"));
	assert_non_null(strstr(pane, "\ntop by cum "));
	assert_non_null(strstr(pane, "\nslowest "));
	assert_non_null(strstr(pane, "1-6 or s sort  w window  p pause  q quit"));
	free(pane);
	run(NULL, "%s send-keys -t top q; %s kill-server 2>/dev/null", tmux, tmux);
}

/* Piped: frames of plain text, one a second, no escape code; from the second one
 * events/s is over the fetches of the window, not between two: the third frame's
 * spans the first fetch to the third, at least 2 s (a second's sleep, then a fetch,
 * between two frames). Not exactly 2 s: a loaded machine adds to every fetch. */
static void test_top_piped_plain_frames(void **state)
{
	char *out, *last = NULL;
	unsigned secs = 0;

	(void)state;
	assert_int_equal(run(&out, "%s top --session %s --dir %s --frames 3 | cat", bin, session,
			     tmpdir), 0);
	assert_null(strchr(out, '\x1b'));
	assert_non_null(strstr(out, "events/s (average)"));
	for (char *p = out; (p = strstr(p, " events/s (")) != NULL; p++)
		last = p;
	assert_non_null(last);
	if (sscanf(last, " events/s (%u s)", &secs) != 1 || secs < 2)
		fail_msg("the third frame's rate is not over 2 s or more:\n%s", out);
	free(out);
}

/* The engine keeps 4 levels per sub-window (--max-window-level 4): the window's
 * levels at 4 read ≥4, and the cap hit is named. */
static void test_top_capped_level_marked(void **state)
{
	char *out, *conc;

	(void)state;
	assert_int_equal(run(&out, "%s top --session %s --dir %s --once --window 10s --width 80",
			     bin, session, tmpdir), 0);
	conc = strstr(out, "\nconcurrency overall ");
	assert_non_null(conc);
	if (strstr(conc, "max \xe2\x89\xa5" "4  mean") == NULL)
		fail_msg("no capped max in:\n%s", out);
	if (strstr(out, "window_level_cap ") == NULL)
		fail_msg("the cap is not named in:\n%s", out);
	free(out);
}

/* A request's milestone (rp_async_mark, from this process: a producer of the engine's
 * session) is on the milestones line, and is not a row of the table: a time from a
 * request's start is not a span's time (no self, no cum, no rate of calls). */
static void test_top_milestones_not_rows(void **state)
{
	uint32_t req = rp_intern("top_req", "REQUEST", "", 0);
	uint32_t mark = rp_intern("top_ttft", "milestone", "", 0);
	char *out = NULL;
	bool seen = false;

	(void)state;
	uint32_t fwd = rp_intern("top_forward", "LLM", "", 0);

	for (uint64_t track = 1; track <= 3; track++) {
		rp_async_begin(req, track, 1);
		rp_async_mark(mark, track);
	}
	rp_begin(fwd); /* a batch's forward, charged to the three (test_top_charged_line) */
	for (uint64_t track = 1; track <= 3; track++)
		rp_charge(fwd, 0, track);
	rp_end(fwd);
	for (uint64_t track = 1; track <= 3; track++)
		rp_async_end(req, track, 1);
	for (int i = 0; i < 120 && !seen; i++) { /* until the engine has them: up to 60 s */
		free(out);
		out = NULL;
		seen = run(&out, "%s top --session %s --dir %s --once --width 120 --filter top_",
			   bin, session, tmpdir) == 0 && strstr(out, "  top_ttft p50 ") != NULL &&
		       strstr(out, "  top_req [REQUEST]\n") != NULL;
		if (!seen)
			sleep_ms(500);
	}
	if (!seen)
		fail_msg("no milestone line for top_ttft, or no top_req row:\n%s", out);
	if (strstr(out, "  top_ttft [milestone]") != NULL || strstr(out, "  top_ttft\n") != NULL)
		fail_msg("the milestone is a row of the table:\n%s", out);
	free(out);
}

/* The forward the test above charged to its three requests: on the charged line, with
 * its three shares (all time). */
static void test_top_charged_line(void **state)
{
	char *out = NULL;
	bool seen = false;

	(void)state;
	for (int i = 0; i < 120 && !seen; i++) {
		free(out);
		out = NULL;
		seen = run(&out, "%s top --session %s --dir %s --once --width 120", bin, session,
			   tmpdir) == 0 && strstr(out, "\ncharged (all time)  top_req ") != NULL;
		if (!seen)
			sleep_ms(500);
	}
	if (!seen || strstr(strstr(out, "\ncharged (all time)"), "/req (3 shares)") == NULL)
		fail_msg("no charged line with top_req's 3 shares:\n%s", out);
	free(out);
}

static int setup(void **state)
{
	const char *b = getenv("RP_BIN_DIR");
	char cmd[2048];

	(void)state;
	if (run(NULL, "command -v tmux >/dev/null") != 0) {
		fprintf(stderr, "test_top: skipped: no tmux (apt-get install tmux)\n");
		exit(77);
	}
	snprintf(bin, sizeof(bin), "%s/ringprof", b ? b : "../tools");
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/rp_top_XXXXXX");
	if (mkdtemp(tmpdir) == NULL)
		return -1;
	snprintf(session, sizeof(session), "t_top_%d", (int)getpid());
	setenv("RINGPROF_SESSION", session, 1); /* test_top_milestones_not_rows records */
	snprintf(tmux, sizeof(tmux), "tmux -L rp_top_%d -f /dev/null", (int)getpid());
	snprintf(cmd, sizeof(cmd), "exec %s run --session %s --snapshot-dir %s --quiet "
		 "--max-window-level 4 --windows 10s,1m >%s/engine.log 2>&1", bin, session, tmpdir,
		 tmpdir);
	engine = spawn(cmd);
	snprintf(cmd, sizeof(cmd), "%s/ringprof-%s.sock", tmpdir, session);
	if (rp_test_engine_wait(session, engine, cmd) != -1)
		return -1;
	snprintf(cmd, sizeof(cmd), "RINGPROF_SESSION=%s exec %s-demo --quiet --duration 600 "
		 "--rate 150 --distinct-names 50 >/dev/null", session, bin);
	demo = spawn(cmd);
	/* until the engine has the demo's requests (not a pause long enough on a quiet
	 * machine: up to 60 s) */
	for (int i = 0; i < 120; i++) {
		char *out = NULL;
		bool seen = run(&out, "%s top --session %s --dir %s --once --width 120", bin,
				session, tmpdir) == 0 && strstr(out, "  request [REQUEST]\n") != NULL;

		free(out);
		if (seen)
			return 0;
		sleep_ms(500);
	}
	return -1;
}

static int teardown(void **state)
{
	(void)state;
	run(NULL, "%s kill-server 2>/dev/null", tmux);
	kill(demo, SIGKILL);
	waitpid(demo, NULL, 0);
	kill(engine, SIGTERM);
	waitpid(engine, NULL, 0);
	return run(NULL, "rm -rf %s", tmpdir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_top_80x24_fits),
		cmocka_unit_test(test_top_120x40_shows_more),
		cmocka_unit_test(test_top_piped_plain_frames),
		cmocka_unit_test(test_top_capped_level_marked),
		cmocka_unit_test(test_top_milestones_not_rows),
		cmocka_unit_test(test_top_charged_line),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
