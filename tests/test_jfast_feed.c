// SPDX-License-Identifier: MIT
/*
 * rp_jfast_feed() (engine/formats/jfast.h), which reads each chunk in place,
 * against what it replaces: every chunk appended to the window, then one
 * rp_jfast_run() over the window. Both must give the same callbacks in the same
 * order, the same result per chunk, and at a hand-over the same text offset and
 * the same pieces of text for yajl (the window's, then the rest of the chunk).
 * Inputs: generated JSON (escapes, braces in strings, UTF-8, numbers of every
 * shape, strings longer than the 512 bytes copied behind a pending token, nested
 * values muted), whole and damaged at one byte, cut into chunks at every position
 * (two chunks) and at random sizes; callbacks cancelling at the k-th call.
 */
#include "support.h"

#include "jfast.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* What the callbacks saw, as text. */
struct log {
	char *s;
	size_t n, cap;
	long calls, cancel_at; /* the cancel_at-th call returns 0 (0: none) */
	unsigned depth;
	const unsigned char *text; /* the whole input, to check the offsets given to run */
	size_t text_n;
};

static void put(struct log *l, const char *tag, const void *s, size_t n)
{
	size_t need = l->n + strlen(tag) + n + 2;

	if (need > l->cap) {
		l->cap = need * 2;
		l->s = realloc(l->s, l->cap);
		assert_non_null(l->s);
	}
	memcpy(l->s + l->n, tag, strlen(tag));
	l->n += strlen(tag);
	if (n)
		memcpy(l->s + l->n, s, n);
	l->n += n;
	l->s[l->n++] = '|';
}

static int ret(struct log *l)
{
	return ++l->calls != l->cancel_at;
}

static int c_null(void *c)
{
	put(c, "z", NULL, 0);
	return ret(c);
}

static int c_bool(void *c, int v)
{
	put(c, v ? "t" : "f", NULL, 0);
	return ret(c);
}

static int c_num(void *c, const char *s, size_t n)
{
	put(c, "n", s, n);
	return ret(c);
}

static int c_str(void *c, const unsigned char *s, size_t n)
{
	put(c, "s", s, n);
	return ret(c);
}

static int c_key(void *c, const unsigned char *s, size_t n)
{
	put(c, "k", s, n);
	return ret(c);
}

static int c_smap(void *c)
{
	struct log *l = c;

	l->depth++;
	put(c, "{", NULL, 0);
	return ret(c);
}

static int c_emap(void *c)
{
	struct log *l = c;

	l->depth--;
	put(c, "}", NULL, 0);
	return ret(c);
}

static int c_sarr(void *c)
{
	struct log *l = c;

	l->depth++;
	put(c, "[", NULL, 0);
	return ret(c);
}

static int c_earr(void *c)
{
	struct log *l = c;

	l->depth--;
	put(c, "]", NULL, 0);
	return ret(c);
}

static const yajl_callbacks cbs = {
	.yajl_null = c_null,
	.yajl_boolean = c_bool,
	.yajl_number = c_num,
	.yajl_string = c_str,
	.yajl_start_map = c_smap,
	.yajl_map_key = c_key,
	.yajl_end_map = c_emap,
	.yajl_start_array = c_sarr,
	.yajl_end_array = c_earr,
};

/* Values three deep and more are muted, as the readers mute payloads. */
static int mute(void *c)
{
	return ((struct log *)c)->depth >= 3;
}

struct side {
	struct rp_jfast j;
	struct rp_jfast_win w;
	struct log l;
};

static enum rp_jfast_rc run(void *ctx, const unsigned char *b, size_t n, uint64_t at, bool eof,
			    size_t *used)
{
	struct side *s = ctx;

	/* the text offset given is where these bytes are */
	assert_true(at + n <= s->l.text_n);
	assert_memory_equal(s->l.text + at, b, n);
	return rp_jfast_run(&s->j, b, n, eof, used);
}

static void side_init(struct side *s, const unsigned char *t, size_t n, long cancel_at)
{
	memset(s, 0, sizeof(*s));
	s->l.cancel_at = cancel_at;
	s->l.text = t;
	s->l.text_n = n;
	rp_jfast_init(&s->j, &cbs, &s->l, mute);
	assert_int_equal(rp_jfast_win_init(&s->w), 0);
}

static void side_free(struct side *s)
{
	rp_jfast_win_free(&s->w);
	free(s->l.s);
}

/* A stop, as a log entry: the result, the offset, yajl's pieces. */
static void put_stop(struct side *s, enum rp_jfast_rc rc, uint64_t at, const unsigned char *rest,
		     size_t rest_n)
{
	char tag[64];
	const unsigned char *p;
	size_t k;

	snprintf(tag, sizeof(tag), "STOP%d@%llu", (int)rc, (unsigned long long)at);
	put(&s->l, tag, NULL, 0);
	if (rc != RP_JFAST_BAIL)
		return;
	while ((k = rp_jfast_win_next(&s->w, &p)) > 0)
		put(&s->l, "piece", p, k);
	if (rest_n)
		put(&s->l, "piece", rest, rest_n);
}

/* The reference: each chunk put in the window, one run over it (the readers before). */
static void feed_old(struct side *s, const unsigned char *b, size_t n, bool eof, bool *stopped)
{
	struct rp_jfast_win *w = &s->w;
	enum rp_jfast_rc rc;
	size_t used;

	if (n > 0 && !rp_jfast_win_put(w, b, n)) {
		put_stop(s, RP_JFAST_BAIL, w->base + w->start, b, n);
		*stopped = true;
		return;
	}
	if (n == 0 && !eof)
		return;
	rc = run(s, rp_jfast_win_data(w), rp_jfast_win_len(w), w->base + w->start, eof, &used);
	if (rc == RP_JFAST_CANCEL || rc == RP_JFAST_NOMEM) {
		put_stop(s, rc, w->base + w->start + used, NULL, 0);
		*stopped = true;
		return;
	}
	rp_jfast_win_take(w, used);
	if (rc == RP_JFAST_BAIL) {
		put_stop(s, rc, w->base + w->start, NULL, 0);
		*stopped = true;
		return;
	}
	put(&s->l, rc == RP_JFAST_DONE ? "DONE" : "MORE", NULL, 0);
}

static void feed_new(struct side *s, const unsigned char *b, size_t n, bool eof, bool *stopped)
{
	struct rp_jfast_stop st;
	enum rp_jfast_rc rc;

	if (n == 0 && !eof)
		return;
	rc = rp_jfast_feed(&s->w, run, s, b, n, eof, &st);
	if (rc == RP_JFAST_CANCEL || rc == RP_JFAST_NOMEM || rc == RP_JFAST_BAIL) {
		put_stop(s, rc, st.at, st.rest, st.rest_n);
		*stopped = true;
		return;
	}
	put(&s->l, rc == RP_JFAST_DONE ? "DONE" : "MORE", NULL, 0);
}

static unsigned long compared;

/* @t cut at the @nc offsets @cut (ascending, within t), read both ways. */
static void compare(const unsigned char *t, size_t n, const size_t *cut, size_t nc, long cancel_at)
{
	struct side a, b;
	bool sa = false, sb = false;
	size_t from = 0;

	side_init(&a, t, n, cancel_at);
	side_init(&b, t, n, cancel_at);
	for (size_t k = 0; k <= nc && !sa && !sb; k++) {
		size_t to = k < nc ? cut[k] : n;
		feed_old(&a, t + from, to - from, false, &sa);
		feed_new(&b, t + from, to - from, false, &sb);
		from = to;
	}
	if (!sa && !sb) {
		feed_old(&a, NULL, 0, true, &sa);
		feed_new(&b, NULL, 0, true, &sb);
	}
	if (a.l.n != b.l.n || memcmp(a.l.s, b.l.s, a.l.n) != 0) {
		fprintf(stderr, "differ on %.*s\nold: %.*s\nnew: %.*s\n", (int)(n < 300 ? n : 300),
			(const char *)t, (int)(a.l.n < 2000 ? a.l.n : 2000), a.l.s,
			(int)(b.l.n < 2000 ? b.l.n : 2000), b.l.s);
		fail();
	}
	compared++;
	side_free(&a);
	side_free(&b);
}

static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Generated JSON with every kind of token, and strings around the 512-byte bridge. */
static size_t gen_json(char *o, size_t cap, size_t want)
{
	static const char *const str[] = {
		"\"plain\"", "\"q\\\"uo\\\\te\"", "\"{[]}:,\"", "\"\\\\\"", "\"\\u00e9\\ud83d\\ude00\"",
		"\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"", "\"\"", "\"a\\/b\\n\\t\"",
	};
	static const char *const num[] = { "0", "-0", "1.5e+10", "-12.75E-1", "1750000000.3340001",
					   "18446744073709551615", "1e-300", "true", "false",
					   "null", "7" };
	size_t n = 0;

	n += (size_t)snprintf(o + n, cap - n, "[");
	while (n < want && n + 2000 < cap) {
		switch (next_rand() % 6) {
		case 0:
			n += (size_t)snprintf(o + n, cap - n, "{%s: %s, \"d\": {\"e\": [%s, {%s: %s}]}}, ",
					      str[next_rand() % ARRAY_SIZE(str)],
					      num[next_rand() % ARRAY_SIZE(num)],
					      str[next_rand() % ARRAY_SIZE(str)],
					      str[next_rand() % ARRAY_SIZE(str)],
					      num[next_rand() % ARRAY_SIZE(num)]);
			break;
		case 1: {
			size_t len = 400 + next_rand() % 800; /* around the bridge */
			o[n++] = '"';
			for (size_t i = 0; i < len; i++)
				o[n++] = (char)('a' + next_rand() % 26);
			n += (size_t)snprintf(o + n, cap - n, "\",\n  ");
			break;
		}
		case 2:
			n += (size_t)snprintf(o + n, cap - n, "%s,\n  ",
					      str[next_rand() % ARRAY_SIZE(str)]);
			break;
		default:
			n += (size_t)snprintf(o + n, cap - n, "%s ,",
					      num[next_rand() % ARRAY_SIZE(num)]);
			break;
		}
	}
	n += (size_t)snprintf(o + n, cap - n, "0]\n");
	return n;
}

/* Short texts cut in two at every position, whole and with each byte damaged. */
static void test_jfast_feed_every_cut(void **state)
{
	static char t[4096];
	size_t cut[1];

	(void)state;
	for (int round = 0; round < 12; round++) {
		size_t n = gen_json(t, sizeof(t), 150);
		for (size_t c = 0; c <= n; c++) {
			cut[0] = c;
			compare((unsigned char *)t, n, cut, 1, 0);
		}
		/* damage: one byte replaced, cut at a few places around it */
		for (size_t p = 0; p < n; p += 3) {
			static const char bad[] = "\"\\{]x\x01";
			char save = t[p];
			t[p] = bad[next_rand() % (sizeof(bad) - 1)];
			for (size_t d = 0; d < 3; d++) {
				cut[0] = p + d - 1 < n ? p + d - 1 : p;
				compare((unsigned char *)t, n, cut, 1, 0);
			}
			t[p] = save;
		}
	}
	assert_true(compared > 0);
}

/* Longer texts in chunks of random sizes (tiny, around the bridge, large). */
static void test_jfast_feed_random_chunks(void **state)
{
	static char t[256 * 1024];
	size_t cut[4096];

	(void)state;
	for (int round = 0; round < 150; round++) {
		size_t n = gen_json(t, sizeof(t), 2000 + next_rand() % (200 * 1024)), nc = 0;
		for (size_t at = 0; nc < ARRAY_SIZE(cut);) {
			static const size_t sizes[] = { 1, 7, 64, 511, 512, 513, 1500, 65536 };
			at += 1 + next_rand() % sizes[next_rand() % ARRAY_SIZE(sizes)];
			if (at >= n)
				break;
			cut[nc++] = at;
		}
		long cancel = round % 3 == 0 ? (long)(next_rand() % 3000) + 1 : 0;
		if (round % 5 == 1) /* damaged */
			t[next_rand() % n] = '}';
		compare((unsigned char *)t, n, cut, nc, cancel);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_jfast_feed_every_cut),
		cmocka_unit_test(test_jfast_feed_random_chunks),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
