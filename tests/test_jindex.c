// SPDX-License-Identifier: MIT
/*
 * The block index of JSON text (engine/formats/jindex.h) against a byte-by-byte
 * oracle, for every implementation this CPU runs (SWAR, SSE2, AVX2, each with the
 * shift-xor cascade and with PCLMUL): every mask of every block, and the carries,
 * on random text drawn from the bytes a lexer cares about (quotes, backslash runs
 * of every length, brackets, whitespace, control and non-ASCII bytes) and on
 * generated JSON whose strings hold escapes, quotes and braces, shifted so that
 * each byte lands on every block boundary.
 */
#include "support.h"

#include "jindex.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define MAXB	      64 /* blocks per text */
#define BS8	      "\\\\\\\\\\\\\\\\" /* eight backslashes */

struct oracle {
	uint64_t quote[MAXB], in_str[MAXB], op[MAXB], ws[MAXB], odd[MAXB];
};

/* What jindex.h says, one byte at a time: a quote is real after an even run of
 * backslashes; in a string from an opening quote to before its closing one. */
static void oracle_of(const unsigned char *t, size_t n, struct oracle *o)
{
	size_t run = 0;
	bool in = false;

	memset(o, 0, sizeof(*o));
	for (size_t i = 0; i < n; i++) {
		unsigned char c = t[i];
		uint64_t bit = 1ull << (i % 64);
		size_t b = i / 64;
		bool q = c == '"' && run % 2 == 0;

		if (q) {
			o->quote[b] |= bit;
			in = !in;
		}
		if (in)
			o->in_str[b] |= bit;
		if (!in && c != 0 && strchr("{}[]:,", c) != NULL)
			o->op[b] |= bit;
		if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
			o->ws[b] |= bit;
		if (c == '\\' || c < 0x20 || c >= 0x80)
			o->odd[b] |= bit;
		run = c == '\\' ? run + 1 : 0;
	}
}

static unsigned impls[8], nimpl;

static void setup_impls(void)
{
	unsigned s = rp_jindex_supported();

	nimpl = 0;
	/* every subset of what the CPU has, classes by one path at a time */
	const unsigned cls[] = { RP_JINDEX_SWAR, RP_JINDEX_SSE2, RP_JINDEX_AVX2 };
	for (size_t c = 0; c < ARRAY_SIZE(cls); c++) {
		if ((cls[c] & s) != cls[c])
			continue;
		impls[nimpl++] = cls[c];
		if (s & RP_JINDEX_CLMUL)
			impls[nimpl++] = cls[c] | RP_JINDEX_CLMUL;
	}
}

static unsigned long checked;

/* Every implementation on @t (a multiple of 64 bytes) against the oracle. */
static void check_text(const unsigned char *t, size_t n)
{
	struct oracle o;

	assert_true(n % 64 == 0 && n / 64 <= MAXB);
	oracle_of(t, n, &o);
	for (unsigned k = 0; k < nimpl; k++) {
		struct rp_jindex_carry c = { 0 };
		for (size_t b = 0; b < n / 64; b++) {
			struct rp_jindex_blk x;
			rp_jindex_block_impl(impls[k], t + 64 * b, &c, &x);
			if (x.quote != o.quote[b] || x.in_str != o.in_str[b] || x.op != o.op[b] ||
			    x.ws != o.ws[b] || x.odd != o.odd[b]) {
				fprintf(stderr, "impl %#x block %zu: quote %016llx/%016llx "
						"in %016llx/%016llx op %016llx/%016llx\n",
					impls[k], b, (unsigned long long)x.quote,
					(unsigned long long)o.quote[b], (unsigned long long)x.in_str,
					(unsigned long long)o.in_str[b], (unsigned long long)x.op,
					(unsigned long long)o.op[b]);
				fail();
			}
		}
		checked++;
	}
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void test_jindex_random_bytes(void **state)
{
	static const unsigned char alpha[] = "\"\\\\\\{}[]:, \t\n\rab\x01\x1f\x7f\x80\xff\xc3";
	unsigned char t[64 * 8];

	(void)state;
	setup_impls();
	for (int round = 0; round < 20000; round++) {
		/* runs of one byte (long backslash runs) as often as single bytes */
		for (size_t i = 0; i < sizeof(t);) {
			unsigned char c = alpha[next_rand() % (sizeof(alpha) - 1)];
			size_t len = next_rand() % 4 == 0 ? 1 + next_rand() % 70 : 1;
			while (len-- && i < sizeof(t))
				t[i++] = c;
		}
		check_text(t, 64 * (1 + next_rand() % 8));
	}
	/* every byte value at every position of a block */
	memset(t, 'a', sizeof(t));
	for (unsigned v = 0; v < 256; v++)
		for (size_t p = 0; p < 128; p++) {
			t[p] = (unsigned char)v;
			check_text(t, 128);
			t[p] = 'a';
		}
	assert_true(checked > 0);
}

/* Generated JSON: objects and arrays holding strings with escapes, quotes and
 * braces inside, UTF-8, numbers of every shape. */
static size_t gen_json(char *o, size_t cap)
{
	static const char *const str[] = {
		"\"plain\"", "\"q\\\"uo\\\\te\"", "\"{[]}:,\"", "\"\\\\\"", "\"\\\\\\\"\"",
		"\"\\u00e9\\ud83d\\ude00\"", "\"\xc3\xa9\xe2\x82\xac\"", "\"\"", "\"a\\/b\\n\\t\"",
		"\"" BS8 BS8 BS8 BS8 BS8 BS8 BS8 BS8 "\"", "\"" BS8 BS8 "\\\"\"",
	};
	static const char *const num[] = { "0", "-0", "1.5e+10", "-12.75E-1", "1750000000.3340001",
					   "18446744073709551615", "1e-300", "true", "false",
					   "null" };
	size_t n = 0;

	n += (size_t)snprintf(o + n, cap - n, "[");
	while (n + 200 < cap) {
		switch (next_rand() % 5) {
		case 0:
			n += (size_t)snprintf(o + n, cap - n, "{%s: %s, %s:[%s,%s]}, ",
					      str[next_rand() % ARRAY_SIZE(str)],
					      num[next_rand() % ARRAY_SIZE(num)],
					      str[next_rand() % ARRAY_SIZE(str)],
					      str[next_rand() % ARRAY_SIZE(str)],
					      num[next_rand() % ARRAY_SIZE(num)]);
			break;
		case 1:
			n += (size_t)snprintf(o + n, cap - n, "%s,\n  ",
					      str[next_rand() % ARRAY_SIZE(str)]);
			break;
		default:
			n += (size_t)snprintf(o + n, cap - n, "%s ,",
					      num[next_rand() % ARRAY_SIZE(num)]);
			break;
		}
	}
	n += (size_t)snprintf(o + n, cap - n, "0]");
	return n;
}

static void test_jindex_json_every_boundary(void **state)
{
	char json[64 * 6];
	unsigned char t[64 * 8];

	(void)state;
	setup_impls();
	for (int round = 0; round < 300; round++) {
		size_t n = gen_json(json, sizeof(json));
		for (size_t shift = 0; shift < 64; shift++) {
			memset(t, ' ', sizeof(t));
			memcpy(t + shift, json, n);
			check_text(t, sizeof(t));
		}
	}
}

/* The default is one of the supported sets, and gives the same as that set. */
static void test_jindex_default_is_supported(void **state)
{
	unsigned s = rp_jindex_supported(), b = rp_jindex_best();
	const unsigned char t[64] = "{\"a\\\"\": [1, \"}\"]}";
	struct rp_jindex_carry c1 = { 0 }, c2 = { 0 };
	struct rp_jindex_blk x, y;

	(void)state;
	assert_int_equal(b & ~s, 0);
	rp_jindex_block(t, &c1, &x);
	rp_jindex_block_impl(RP_JINDEX_SWAR, t, &c2, &y);
	assert_memory_equal(&x, &y, sizeof(x));
	assert_int_equal(y.quote, (1ull << 1) | (1ull << 5) | (1ull << 12) | (1ull << 14));
	assert_int_equal(y.op, (1ull << 0) | (1ull << 6) | (1ull << 8) | (1ull << 10) |
				       (1ull << 15) | (1ull << 16));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_jindex_random_bytes),
		cmocka_unit_test(test_jindex_json_every_boundary),
		cmocka_unit_test(test_jindex_default_is_supported),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
