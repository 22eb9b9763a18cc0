// SPDX-License-Identifier: MIT
/*
 * The consumer's trust boundary (engine/ingest/segment.c): a segment is written by another
 * process, so every header field the validator checks is broken here one at a time
 * and must be refused with the exact errno and a message naming the field; name
 * lookups must stay inside the arena; a drain must resynchronise on an implausible
 * producer index instead of reading outside the ring; a segment owned by another
 * uid must not be opened.
 *
 * Every case starts from a fresh copy of a real segment ("golden"), made once in
 * main() by this process's own producer, so the only wrong byte is the one a case
 * writes. Copies are exactly the segment's size, so under ASan a read past the end
 * is caught.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "support.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define RINGS	      4u
#define RING_CAP      64u
#define NAMES	      64u
#define FOREIGN_UID   65534 /* nobody; 65533 when we are nobody */

static unsigned char *golden; /* the producer's segment, copied after the events */
static size_t golden_size;
static uint32_t ids[4]; /* interned in main(), in the order of `names` */
static int main_tid;	/* the thread that owns ring 0 in the golden copy */

/* Long enough to be cut by struct rp_name's buffers (256, 64, 256 bytes). */
static char long_name[300], long_cat[80], long_file[270];

struct name_key {
	const char *name, *cat, *file;
	uint32_t line;
};

static const struct name_key names[] = {
	{"decode", "LLM", "model.c", 42},
	{"search", "TOOL", NULL, 0},
	{"tokens", "COUNTER", "sampler.c", 7},
	{long_name, long_cat, long_file, 99},
};

/* The golden ring 0 holds these, in this order; name is an index into ids[]. */
static const struct rp_event events[] = {
	{.kind = RP_EV_BEGIN, .name = 0},
	{.kind = RP_EV_COUNTER, .name = 2, .arg = 1234},
	{.kind = RP_EV_ASYNC_BEGIN, .name = 1, .track = 77, .arg = 5},
	{.kind = RP_EV_LINK, .name = 1, .flags = RP_LINK_LAUNCH, .track = 5, .arg = 900},
	{.kind = RP_EV_ASYNC_END, .name = 1, .track = 77, .arg = 5},
	{.kind = RP_EV_INSTANT, .name = 3},
	{.kind = RP_EV_END, .name = 0},
};

/* A fresh, segment-aligned copy of the golden bytes, exactly golden_size long. */
static unsigned char *fresh_copy(void)
{
	unsigned char *p = aligned_alloc(RP_WIRE_CACHELINE, golden_size);

	assert_non_null(p);
	memcpy(p, golden, golden_size);
	return p;
}

static struct rp_wire_header golden_hdr(void)
{
	struct rp_wire_header h;

	memcpy(&h, golden, sizeof(h));
	return h;
}

static struct rp_segment *attach_copy(void)
{
	struct rp_segment *s = NULL;
	char why[RP_WHY_MAX] = "";
	int err = rp_segment_attach(fresh_copy(), golden_size, &s, why);

	if (err != 0)
		fail_msg("rp_segment_attach: %d %s", err, why);
	return s;
}

/* rp_segment_close() leaves the memory of an attached segment to its caller. */
static void detach_copy(struct rp_segment *s)
{
	void *base = s->base;

	rp_segment_close(s);
	free(base);
}

/* ---- validator ---------------------------------------------------------------- */

/* One store into the header: an integer of `width` bytes, or, for wider fields
 * (the session), `width` copies of the byte `val`. */
struct poke {
	size_t off;
	size_t width;
	uint64_t val;
};

struct hdr_case {
	char what[48];
	struct poke p[3]; /* width 0: unused */
	int err;
	const char *needle; /* must appear in `why` */
};

#define HDR_AT(f) offsetof(struct rp_wire_header, f), sizeof(((struct rp_wire_header *)0)->f)
#define POKE(f, v)                                                                                 \
	{                                                                                          \
		HDR_AT(f), (uint64_t)(v)                                                           \
	}

static void poke(unsigned char *base, const struct poke *p)
{
	uint8_t v8 = (uint8_t)p->val;
	uint16_t v16 = (uint16_t)p->val;
	uint32_t v32 = (uint32_t)p->val;

	switch (p->width) {
	case 0: break;
	case 1: memcpy(base + p->off, &v8, 1); break;
	case 2: memcpy(base + p->off, &v16, 2); break;
	case 4: memcpy(base + p->off, &v32, 4); break;
	case 8: memcpy(base + p->off, &p->val, 8); break;
	default: memset(base + p->off, (int)p->val, p->width);
	}
}

/* Identity, state and the count/size fields. */
static size_t identity_cases(const struct rp_wire_header *g, struct hdr_case *out)
{
	const struct hdr_case c[] = {
		{"magic 0", {POKE(magic, 0)}, -EAGAIN, "magic"},
		{"magic wrong", {POKE(magic, RP_WIRE_MAGIC ^ 1)}, -EINVAL, "magic"},
		{"version_major 2", {POKE(version_major, 2)}, -EPROTONOSUPPORT, "major version"},
		{"version_major 0", {POKE(version_major, 0)}, -EPROTONOSUPPORT, "major version"},
		{"header_size 256", {POKE(header_size, 256)}, -EINVAL, "header_size"},
		{"header_size 328", {POKE(header_size, 328)}, -EINVAL, "header_size"},
		{"header_size 0", {POKE(header_size, 0)}, -EINVAL, "header_size"},
		/* Valid by itself, but the header would then run into the descriptors. */
		{"header_size 384", {POKE(header_size, 384)}, -EINVAL, "ring_desc_offset"},
		{"segment_size +4096",
		 {POKE(segment_size, g->segment_size + 4096)},
		 -EINVAL,
		 "segment_size"},
		{"segment_size -4096",
		 {POKE(segment_size, g->segment_size - 4096)},
		 -EINVAL,
		 "segment_size"},
		{"event_size 16", {POKE(event_size, 16)}, -EINVAL, "event_size"},
		{"event_size 64", {POKE(event_size, 64)}, -EINVAL, "event_size"},
		{"pid 0", {POKE(pid, 0)}, -EINVAL, "pid"},
		{"pid -1", {POKE(pid, (uint32_t)-1)}, -EINVAL, "pid"},
		{"session bad char", {POKE(session[1], '.')}, -EINVAL, "session"},
		{"session slash", {POKE(session[0], '/')}, -EINVAL, "session"},
		{"session empty", {POKE(session[0], 0)}, -EINVAL, "session"},
		{"session no NUL", {POKE(session, 'a')}, -EINVAL, "session"},
		{"state 0", {POKE(state, 0)}, -EINVAL, "state"},
		{"state 3", {POKE(state, 3)}, -EINVAL, "state"},
	};

	memcpy(out, c, sizeof(c));
	return ARRAY_SIZE(c);
}

static size_t count_cases(struct hdr_case *out)
{
	const struct hdr_case c[] = {
		{"ring_count 0", {POKE(ring_count, 0)}, -EINVAL, "ring_count"},
		{"ring_count max+1",
		 {POKE(ring_count, RP_WIRE_MAX_RINGS + 1)},
		 -EINVAL,
		 "ring_count"},
		/* In range, but 4096 descriptors run into the ring data. */
		{"ring_count max",
		 {POKE(ring_count, RP_WIRE_MAX_RINGS)},
		 -EINVAL,
		 "ring_data_offset"},
		{"ring_capacity 48", {POKE(ring_capacity, 48)}, -EINVAL, "ring_capacity"},
		{"ring_capacity 0", {POKE(ring_capacity, 0)}, -EINVAL, "ring_capacity"},
		{"ring_capacity 2", {POKE(ring_capacity, 2)}, -EINVAL, "ring_capacity"},
		{"ring_capacity 2^25",
		 {POKE(ring_capacity, RP_WIRE_MAX_RING_CAP << 1)},
		 -EINVAL,
		 "ring_capacity"},
		{"ring_capacity 2^31+2^30",
		 {POKE(ring_capacity, 0xc0000000u)},
		 -EINVAL,
		 "ring_capacity"},
		/* A power of two in range whose records run into the name table. */
		{"ring_capacity 128", {POKE(ring_capacity, 128)}, -EINVAL, "name_table_offset"},
		{"ring_desc_size 0", {POKE(ring_desc_size, 0)}, -EINVAL, "ring_desc_size"},
		{"ring_desc_size 192", {POKE(ring_desc_size, 192)}, -EINVAL, "ring_desc_size"},
		{"name_capacity 0", {POKE(name_capacity, 0)}, -EINVAL, "name_capacity"},
		{"name_capacity max+1",
		 {POKE(name_capacity, RP_WIRE_MAX_NAMES + 1)},
		 -EINVAL,
		 "name_capacity"},
		{"name_entry_size 32", {POKE(name_entry_size, 32)}, -EINVAL, "name_entry_size"},
		{"name_entry_size 0", {POKE(name_entry_size, 0)}, -EINVAL, "name_entry_size"},
		{"name_arena_size 0", {POKE(name_arena_size, 0)}, -EINVAL, "name_arena_size"},
		{"name_arena_size max+1",
		 {POKE(name_arena_size, RP_WIRE_MAX_ARENA + 1)},
		 -EINVAL,
		 "name_arena_size"},
		{"name_arena_size 2^64-1",
		 {POKE(name_arena_size, UINT64_MAX)},
		 -EINVAL,
		 "name_arena_size"},
	};

	memcpy(out, c, sizeof(c));
	return ARRAY_SIZE(c);
}

static size_t clock_cases(struct hdr_case *out)
{
	const struct hdr_case c[] = {
		{"clock source 0", {POKE(clock.source, 0)}, -EINVAL, "clock source"},
		{"clock source 3", {POKE(clock.source, 3)}, -EINVAL, "clock source"},
		{"clock shift 64", {POKE(clock.shift, 64)}, -EINVAL, "shift"},
		{"clock shift 2^32-1", {POKE(clock.shift, UINT32_MAX)}, -EINVAL, "shift"},
		{"clock mult 0", {POKE(clock.mult, 0)}, -EINVAL, "mult"},
		/* Whatever clock the golden segment has: monotonic, then one bad value. */
		{"monotonic mult 2",
		 {POKE(clock.source, RP_CLOCK_MONOTONIC), POKE(clock.mult, 2),
		  POKE(clock.shift, 0)},
		 -EINVAL,
		 "monotonic"},
		{"monotonic shift 1",
		 {POKE(clock.source, RP_CLOCK_MONOTONIC), POKE(clock.mult, 1),
		  POKE(clock.shift, 1)},
		 -EINVAL,
		 "monotonic"},
	};

	memcpy(out, c, sizeof(c));
	return ARRAY_SIZE(c);
}

/* Five ways to break each region offset: misaligned, overlapping the region
 * before it, starting past the end, running past the end, and so large that
 * offset + length would wrap around 2^64. */
static size_t region_cases(const struct rp_wire_header *g, struct hdr_case *out)
{
	const struct {
		const char *field;
		size_t off;
		uint64_t orig, lo; /* lo: where the region before it ends */
	} r[] = {
		{"ring_desc_offset", offsetof(struct rp_wire_header, ring_desc_offset),
		 g->ring_desc_offset, g->header_size},
		{"ring_data_offset", offsetof(struct rp_wire_header, ring_data_offset),
		 g->ring_data_offset, g->ring_desc_offset + RINGS * sizeof(struct rp_wire_ring)},
		{"name_table_offset", offsetof(struct rp_wire_header, name_table_offset),
		 g->name_table_offset,
		 g->ring_data_offset + RINGS * RING_CAP * sizeof(struct rp_event)},
		{"name_arena_offset", offsetof(struct rp_wire_header, name_arena_offset),
		 g->name_arena_offset, g->name_table_offset + NAMES * sizeof(struct rp_wire_name)},
	};
	const char *how[] = {"misaligned", "overlapping", "past the end", "running over",
			     "wrapping"};
	size_t n = 0;

	for (size_t i = 0; i < ARRAY_SIZE(r); i++) {
		uint64_t val[] = {r[i].orig + 8, r[i].lo - RP_WIRE_CACHELINE,
				  g->segment_size + RP_WIRE_CACHELINE,
				  g->segment_size - RP_WIRE_CACHELINE,
				  UINT64_MAX - (RP_WIRE_CACHELINE - 1)};

		for (size_t k = 0; k < ARRAY_SIZE(val); k++, n++) {
			snprintf(out[n].what, sizeof(out[n].what), "%s %s", r[i].field, how[k]);
			out[n].p[0] = (struct poke){r[i].off, 8, val[k]};
			out[n].p[1] = (struct poke){0, 0, 0};
			out[n].p[2] = (struct poke){0, 0, 0};
			out[n].err = -EINVAL;
			out[n].needle = r[i].field;
		}
	}
	return n;
}

static void check_case(const struct hdr_case *c)
{
	unsigned char *copy = fresh_copy();
	struct rp_segment_view v, untouched;
	char why[RP_WHY_MAX];
	int err;

	memset(&v, 0xa5, sizeof(v));
	memset(&untouched, 0xa5, sizeof(untouched));
	memset(why, 0, sizeof(why));
	for (size_t i = 0; i < ARRAY_SIZE(c->p); i++)
		poke(copy, &c->p[i]);
	err = rp_segment_validate(copy, golden_size, &v, why);
	free(copy);
	if (err != c->err)
		fail_msg("%s: got %d (%s), want %d", c->what, err, why, c->err);
	if (c->err == 0)
		return;
	if (strstr(why, c->needle) == NULL)
		fail_msg("%s: why \"%s\" does not name \"%s\"", c->what, why, c->needle);
	/* The view is filled only on success. */
	assert_memory_equal(&v, &untouched, sizeof(v));
}

/* The unmodified segment passes, and the view repeats the header exactly. */
static void check_golden_view(void)
{
	struct rp_wire_header h = golden_hdr();
	struct rp_segment_view v;
	char why[RP_WHY_MAX] = "";
	const char *sess = getenv("RINGPROF_SESSION");

	assert_int_equal(rp_segment_validate(golden, golden_size, &v, why), 0);
	assert_int_equal(v.ring_count, RINGS);
	assert_int_equal(v.ring_capacity, RING_CAP);
	assert_int_equal(v.name_capacity, NAMES);
	assert_int_equal(v.pid, getpid());
	assert_int_equal(v.segment_size, golden_size);
	assert_int_equal(v.ring_desc_offset, h.ring_desc_offset);
	assert_int_equal(v.ring_data_offset, h.ring_data_offset);
	assert_int_equal(v.name_table_offset, h.name_table_offset);
	assert_int_equal(v.name_arena_offset, h.name_arena_offset);
	assert_int_equal(v.name_arena_size, h.name_arena_size);
	assert_int_equal(v.created_realtime_ns, h.created_realtime_ns);
	assert_memory_equal(&v.clock, &h.clock, sizeof(v.clock));
	assert_string_equal(v.session, sess != NULL && *sess != '\0' ? sess : "default");
}

/* Mappings too small to hold a header, or none at all. */
static void check_short_mappings(void)
{
	struct rp_segment_view v;
	char why[RP_WHY_MAX] = "";

	assert_int_equal(rp_segment_validate(golden, sizeof(struct rp_wire_header) - 1, &v, why),
			 -EINVAL);
	assert_non_null(strstr(why, "smaller than the header"));
	assert_int_equal(rp_segment_validate(golden, 0, &v, why), -EINVAL);
	assert_non_null(strstr(why, "smaller than the header"));
	assert_int_equal(rp_segment_validate(NULL, golden_size, &v, why), -EINVAL);
	assert_non_null(strstr(why, "header"));
	/* A whole header, but the mapping is shorter than the segment it describes. */
	assert_int_equal(rp_segment_validate(golden, sizeof(struct rp_wire_header), &v, why),
			 -EINVAL);
	assert_non_null(strstr(why, "segment_size"));
	assert_int_equal(rp_segment_validate(golden, golden_size - 1, &v, why), -EINVAL);
	assert_non_null(strstr(why, "segment_size"));
}

static void test_segment_rejects_each_malformed_field(void **state)
{
	struct rp_wire_header g = golden_hdr();
	struct hdr_case c[96];
	size_t n = 0;

	(void)state;
	check_golden_view();
	check_short_mappings();
	n += identity_cases(&g, c + n);
	n += count_cases(c + n);
	n += clock_cases(c + n);
	n += region_cases(&g, c + n);
	assert_true(n <= ARRAY_SIZE(c));
	assert_int_equal(n, 20 + 18 + 7 + 20);
	for (size_t i = 0; i < n; i++)
		check_case(&c[i]);
}

/* Fields a reader may ignore do not make a segment invalid. */
static void test_segment_accepts_compatible_changes(void **state)
{
	const struct hdr_case ok[] = {
		{"version_minor 9", {POKE(version_minor, 9)}, 0, NULL},
		{"state exited", {POKE(state, RP_SEG_EXITED)}, 0, NULL},
		{"session 31 chars", {POKE(session, 'z'), POKE(session[31], 0)}, 0, NULL},
		{"tsc clock", {POKE(clock.source, RP_CLOCK_TSC), POKE(clock.shift, 63)}, 0, NULL},
		{"reserved0", {POKE(reserved0, 0xffffffffu)}, 0, NULL},
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(ok); i++)
		check_case(&ok[i]);
}

/* ---- names -------------------------------------------------------------------- */

static struct rp_wire_name *wire_name(struct rp_segment *s, uint32_t id)
{
	return (struct rp_wire_name *)((char *)s->base + s->v.name_table_offset) + id;
}

static void check_short_names(struct rp_segment *s)
{
	struct rp_name n;

	assert_int_equal(rp_segment_name(s, RP_NAME_OVERFLOW, &n), 0);
	assert_string_equal(n.name, "[overflow]");
	assert_string_equal(n.category, "");
	assert_string_equal(n.file, "");
	assert_int_equal(n.line, 0);
	for (size_t i = 0; i < 3; i++) {
		memset(&n, 0x5a, sizeof(n));
		assert_int_equal(rp_segment_name(s, ids[i], &n), 0);
		assert_string_equal(n.name, names[i].name);
		assert_string_equal(n.category, names[i].cat);
		assert_string_equal(n.file, names[i].file ? names[i].file : "");
		assert_int_equal(n.line, names[i].line);
	}
}

/* Strings longer than the buffers are cut at buffer size - 1 and terminated; a
 * canary after the struct catches a write past it. */
static void check_long_name(struct rp_segment *s)
{
	struct {
		struct rp_name n;
		unsigned char canary[64];
	} b;
	unsigned char ref[64];

	memset(&b, 0x5a, sizeof(b));
	memset(ref, 0x5a, sizeof(ref));
	assert_int_equal(rp_segment_name(s, ids[3], &b.n), 0);
	assert_int_equal(strlen(b.n.name), sizeof(b.n.name) - 1);
	assert_memory_equal(b.n.name, long_name, sizeof(b.n.name) - 1);
	assert_int_equal(strlen(b.n.category), sizeof(b.n.category) - 1);
	assert_memory_equal(b.n.category, long_cat, sizeof(b.n.category) - 1);
	assert_int_equal(strlen(b.n.file), sizeof(b.n.file) - 1);
	assert_memory_equal(b.n.file, long_file, sizeof(b.n.file) - 1);
	assert_int_equal(b.n.line, 99);
	assert_memory_equal(b.canary, ref, sizeof(ref));
}

/* Id name_capacity is one past the table: there a published-looking entry is put
 * (in the arena, which follows the table), so only the bound check can refuse it. */
static void check_id_past_table(struct rp_segment *s)
{
	struct rp_wire_name *past = wire_name(s, NAMES), saved;
	struct rp_name n;

	assert_true((char *)(past + 1) <= (char *)s->base + s->size);
	memcpy(&saved, past, sizeof(saved));
	memcpy(past, wire_name(s, ids[0]), sizeof(*past));
	assert_int_equal(rp_segment_name(s, NAMES, &n), -ENOENT);
	memcpy(past, &saved, sizeof(saved));
}

/* Ids outside the table, and entries not (or no longer) published. */
static void check_missing_names(struct rp_segment *s)
{
	struct rp_name n;

	check_id_past_table(s);
	assert_int_equal(rp_segment_name(s, NAMES, &n), -ENOENT);
	assert_int_equal(rp_segment_name(s, NAMES + 1, &n), -ENOENT);
	assert_int_equal(rp_segment_name(s, UINT32_MAX, &n), -ENOENT);
	assert_int_equal(wire_name(s, 5)->ready, 0);
	assert_int_equal(rp_segment_name(s, 5, &n), -ENOENT);
	assert_int_equal(rp_segment_name(s, NAMES - 1, &n), -ENOENT);
	wire_name(s, ids[0])->ready = 0;
	assert_int_equal(rp_segment_name(s, ids[0], &n), -ENOENT);
	/* Only 1 means published (wire.h); anything else is not an entry to trust. */
	wire_name(s, ids[0])->ready = 2;
	assert_int_equal(rp_segment_name(s, ids[0], &n), -ENOENT);
	wire_name(s, ids[0])->ready = 1;
	assert_int_equal(rp_segment_name(s, ids[0], &n), 0);
}

/* Sets one (offset, length) pair of entry ids[1] and returns the lookup result. */
static int lookup_with(struct rp_segment *s, size_t field, uint32_t off, uint32_t len)
{
	struct rp_wire_name *w = wire_name(s, ids[1]);
	struct rp_wire_name saved = *w;
	struct rp_name n;
	uint32_t pair[2] = {off, len};
	int err;

	memcpy((char *)w + field, pair, sizeof(pair));
	err = rp_segment_name(s, ids[1], &n);
	*w = saved;
	return err;
}

static void check_arena_bounds(struct rp_segment *s)
{
	const size_t fields[] = {offsetof(struct rp_wire_name, name_off),
				 offsetof(struct rp_wire_name, cat_off),
				 offsetof(struct rp_wire_name, file_off)};
	uint32_t size = (uint32_t)s->v.name_arena_size;

	for (size_t i = 0; i < ARRAY_SIZE(fields); i++) {
		size_t f = fields[i];

		assert_int_equal(lookup_with(s, f, size, 1), -EINVAL);
		assert_int_equal(lookup_with(s, f, size - 2, 3), -EINVAL);
		assert_int_equal(lookup_with(s, f, size + 64, 0), -EINVAL);
		assert_int_equal(lookup_with(s, f, 0, size + 1), -EINVAL);
		assert_int_equal(lookup_with(s, f, 0, UINT32_MAX), -EINVAL);
		/* off + len wraps in 32 bits to 16: must not pass as in bounds. */
		assert_int_equal(lookup_with(s, f, 0xfffffff0u, 0x20), -EINVAL);
		assert_int_equal(lookup_with(s, f, UINT32_MAX, 1), -EINVAL);
		/* Exactly up to the end of the arena is fine. */
		assert_int_equal(lookup_with(s, f, size - 3, 3), 0);
		assert_int_equal(lookup_with(s, f, size, 0), 0);
	}
}

static void test_segment_name_lookup_bounds(void **state)
{
	struct rp_segment *s = attach_copy();

	(void)state;
	check_short_names(s);
	check_long_name(s);
	check_missing_names(s);
	check_arena_bounds(s);
	detach_copy(s);
}

/* ---- drain -------------------------------------------------------------------- */

static struct rp_event *slots_of(struct rp_segment *s, uint32_t ring)
{
	return (struct rp_event *)((char *)s->base + s->v.ring_data_offset) +
	       (uint64_t)ring * s->v.ring_capacity;
}

/* Publishes n records with arg = first..first+n-1 after the producer index. */
static void publish(struct rp_segment *s, uint32_t ring, unsigned n, uint64_t first)
{
	struct rp_wire_ring *r = rp_test_ring(s, ring);
	uint32_t tail = r->ring.p_tail;

	for (unsigned k = 0; k < n; k++)
		slots_of(s, ring)[(tail + k) & (RING_CAP - 1)] =
			(struct rp_event){.ts = 1000 + first + k,
					  .name = ids[2],
					  .kind = RP_EV_COUNTER,
					  .arg = first + k};
	r->ring.p_tail = tail + n;
}

static void expect_records(struct rp_segment *s, uint32_t ring, unsigned n, uint64_t first)
{
	struct rp_event ev[RING_CAP];

	assert_int_equal(rp_segment_drain(s, ring, ev, RING_CAP, NULL), n);
	for (unsigned k = 0; k < n; k++) {
		assert_int_equal(ev[k].kind, RP_EV_COUNTER);
		assert_int_equal(ev[k].name, ids[2]);
		assert_int_equal(ev[k].ts, 1000 + first + k);
		assert_int_equal(ev[k].arg, first + k);
	}
	assert_int_equal(rp_segment_drain(s, ring, ev, RING_CAP, NULL), 0);
}

/* What main() emitted comes out whole, in order, with the owner's identity. */
static void check_golden_ring(struct rp_segment *s)
{
	struct rp_event ev[RING_CAP];
	struct rp_ring_info info;
	unsigned n;

	assert_int_equal(rp_segment_ring_pending(s, 0), ARRAY_SIZE(events));
	n = rp_segment_drain(s, 0, ev, RING_CAP, &info);
	assert_int_equal(n, ARRAY_SIZE(events));
	for (unsigned k = 0; k < n; k++) {
		assert_int_equal(ev[k].kind, events[k].kind);
		assert_int_equal(ev[k].name, ids[events[k].name]);
		/* span records carry their depth (1.1): 0, the BEGIN's and the END's */
		bool span = events[k].kind == RP_EV_BEGIN || events[k].kind == RP_EV_END;

		assert_int_equal(ev[k].flags, events[k].flags | (span ? RP_SPAN_DEPTH : 0));
		assert_int_equal(ev[k].depth, 0);
		assert_int_equal(ev[k].track, events[k].track);
		assert_int_equal(ev[k].arg, events[k].arg);
		assert_true(k == 0 || ev[k].ts >= ev[k - 1].ts);
	}
	assert_int_equal(info.state, RP_RING_ACTIVE);
	assert_int_equal(info.gen, 1);
	assert_int_equal(info.tid, main_tid);
	assert_int_equal(s->rings[0].received, ARRAY_SIZE(events));
	assert_int_equal(rp_test_ring(s, 0)->ring.c_head, ARRAY_SIZE(events));
	/* A ring nobody claimed is empty, not corrupt. */
	assert_int_equal(rp_segment_drain(s, 3, ev, RING_CAP, &info), 0);
	assert_int_equal(info.state, RP_RING_FREE);
	assert_int_equal(s->rings[3].resyncs, 0);
}

/* Sets p_tail of ring 0 to `tail`: the drain must skip to it, read nothing. */
static void expect_resync(struct rp_segment *s, uint32_t tail, uint64_t resyncs)
{
	struct rp_wire_ring *r = rp_test_ring(s, 0);
	uint64_t received = s->rings[0].received;
	struct rp_event ev[RING_CAP];

	r->ring.p_tail = tail;
	assert_int_equal(rp_segment_ring_pending(s, 0), 0);
	assert_int_equal(rp_segment_drain(s, 0, ev, RING_CAP, NULL), 0);
	assert_int_equal(s->rings[0].resyncs, resyncs);
	assert_int_equal(s->rings[0].head, tail);
	assert_int_equal(r->ring.c_head, tail);
	assert_int_equal(s->rings[0].received, received);
}

static void test_segment_drain_resyncs_corrupt_tail(void **state)
{
	struct rp_segment *s = attach_copy();
	uint32_t head;

	(void)state;
	check_golden_ring(s);
	head = s->rings[0].head;
	expect_resync(s, head + RING_CAP + 5, 1);
	publish(s, 0, 3, 100);
	expect_records(s, 0, 3, 100);
	/* Behind the consumer: a difference of almost 2^32. */
	head = s->rings[0].head;
	expect_resync(s, head - 1, 2);
	publish(s, 0, 2, 200);
	expect_records(s, 0, 2, 200);
	/* The boundary: capacity - 1 records is a full ring, capacity is not possible. */
	head = s->rings[0].head;
	expect_resync(s, head + RING_CAP, 3);
	publish(s, 0, RING_CAP - 1, 300);
	assert_int_equal(rp_segment_ring_pending(s, 0), RING_CAP - 1);
	expect_records(s, 0, RING_CAP - 1, 300);
	assert_int_equal(s->rings[0].resyncs, 3);
	assert_int_equal(s->rings[1].resyncs + s->rings[2].resyncs + s->rings[3].resyncs, 0);
	detach_copy(s);
}

/* ---- owner marks ---------------------------------------------------------------- */

/* The plain scan the fast one must equal. */
static uint32_t oracle_find_mark(const struct rp_event *e, uint32_t n)
{
	for (uint32_t k = 0; k < n; k++)
		if (e[k].kind == RP_EV_THREAD)
			return k;
	return n;
}

/* Record k of a stream: a mark where bit k of @marks is set, else a kind that is not
 * one, with the mark's value in every other byte it could be confused with. */
static struct rp_event mark_rec(uint32_t k, uint64_t marks, uint64_t salt)
{
	static const uint8_t other[] = {RP_EV_BEGIN, RP_EV_END, RP_EV_COUNTER, 0, 255,
					RP_EV_THREAD + 1, RP_EV_THREAD - 1};
	bool mark = k < 64 && (marks >> k & 1);

	return (struct rp_event){
		.ts = 0x0a0a0a0a0a0a0a0aull + k,
		.name = 0x0a0a0a0au ^ (uint32_t)salt,
		.kind = mark ? RP_EV_THREAD : other[(k + salt) % sizeof(other)],
		.flags = RP_EV_THREAD,
		.depth = 0x0a0a,
		.track = mark ? k + 1 : 0x0a0a0a0a0a0a0a0aull,
		.arg = salt * 1000 + k,
	};
}

/* Every set of marks among up to 12 records, then single, paired and no marks at
 * every position of longer runs (both ends, every offset of the scan's passes, marks
 * just past the run). */
static void test_segment_find_mark_same_as_scan(void **state)
{
	struct rp_event e[80];

	(void)state;
	for (uint32_t n = 0; n <= 12; n++)
		for (uint64_t m = 0; m < (1ull << n); m++) {
			for (uint32_t k = 0; k < n; k++)
				e[k] = mark_rec(k, m, m);
			assert_int_equal(rp_segment_find_mark(e, n), oracle_find_mark(e, n));
		}
	for (uint32_t n = 13; n <= 80; n++)
		for (uint32_t p = 0; p <= 64; p++)
			for (uint32_t q = p; q <= 64; q += 7) {
				uint64_t m = (p < 64 ? 1ull << p : 0) | (q < 64 ? 1ull << q : 0);

				/* (the marks past @n are in memory: never answered) */
				for (uint32_t k = 0; k < 80; k++)
					e[k] = mark_rec(k, m, p + q);
				assert_int_equal(rp_segment_find_mark(e, n), oracle_find_mark(e, n));
			}
}

/* A drain copies every record exactly, in order, and counts the marks among them
 * (marks_read) exactly: marks at every position, none, at both ends of a run, with
 * runs that wrap the ring's end. */
static void test_segment_drain_counts_marks(void **state)
{
	struct rp_segment *s = attach_copy();
	struct rp_wire_ring *r = rp_test_ring(s, 1);
	struct rp_event ev[RING_CAP], want[RING_CAP];
	uint32_t marks = s->rings[1].marks;
	uint64_t salt = 0;

	(void)state;
	for (uint32_t n = 1; n < RING_CAP; n += (n < 12 ? 1 : 5))
		for (uint32_t p = 0; p <= n + 3; p += (n < 12 ? 1 : 3), salt++) {
			uint32_t tail = r->ring.p_tail, expect = 0;
			uint64_t m = (p < 64 ? 1ull << p : 0) | (salt % 3 == 0 ? 1ull << (n - 1) : 0) |
				     (salt % 5 == 0 ? 0x8421ull : 0);

			for (uint32_t k = 0; k < n; k++) {
				want[k] = mark_rec(k, m, salt);
				expect += want[k].kind == RP_EV_THREAD;
				slots_of(s, 1)[(tail + k) & (RING_CAP - 1)] = want[k];
			}
			r->ring.p_tail = tail + n;
			assert_int_equal(rp_segment_drain(s, 1, ev, RING_CAP, NULL), n);
			assert_memory_equal(ev, want, n * sizeof(ev[0]));
			marks += expect;
			assert_int_equal(s->rings[1].marks, marks);
			assert_int_equal(r->marks_read, marks);
			assert_int_equal(r->ring.c_head, tail + n);
		}
	assert_int_equal(s->rings[1].resyncs, 0);
	detach_copy(s);
}

/* ---- open --------------------------------------------------------------------- */

static char foreign_path[96];

static int unlink_foreign(void **state)
{
	(void)state;
	shm_unlink(foreign_path);
	return 0;
}

/* A shm object holding the golden bytes; fd returned, or -1 with errno. */
static int make_foreign(void)
{
	int fd;

	snprintf(foreign_path, sizeof(foreign_path), "/ringprof.t_foreign.%d.0", (int)getpid());
	fd = shm_open(foreign_path, O_CREAT | O_RDWR, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)golden_size), 0);
	assert_int_equal(pwrite(fd, golden, golden_size, 0), (ssize_t)golden_size);
	return fd;
}

static void test_segment_open_refuses_foreign_uid(void **state)
{
	struct rp_segment *s = NULL;
	char why[RP_WHY_MAX] = "", uid_str[16];
	/* fchown() to our own uid succeeds and changes nothing: pick another. */
	uid_t uid = geteuid() == FOREIGN_UID ? FOREIGN_UID - 1 : FOREIGN_UID;
	int fd = make_foreign();

	(void)state;
	/* Ours, it opens: so the refusal below is the owner's doing. */
	assert_int_equal(rp_segment_open(foreign_path, &s, why), 0);
	assert_int_equal(s->v.segment_size, golden_size);
	rp_segment_close(s);
	s = NULL;
	if (fchown(fd, uid, (gid_t)-1) != 0) {
		assert_int_equal(errno, EPERM);
		close(fd);
		skip();
	}
	close(fd);
	assert_int_equal(rp_segment_open(foreign_path, &s, why), -EACCES);
	assert_null(s);
	assert_non_null(strstr(why, "uid"));
	snprintf(uid_str, sizeof(uid_str), "%u", (unsigned)uid);
	assert_non_null(strstr(why, uid_str));
}

static void test_segment_open_missing_name(void **state)
{
	struct rp_segment *s = NULL;
	char path[96], why[RP_WHY_MAX] = "";

	(void)state;
	snprintf(path, sizeof(path), "/ringprof.t_missing.%d.0", (int)getpid());
	shm_unlink(path);
	assert_int_equal(rp_segment_open(path, &s, why), -ENOENT);
	assert_null(s);
	assert_non_null(strstr(why, path));
}

/* ---- setup -------------------------------------------------------------------- */

static void fill_pattern(char *buf, size_t len, char base)
{
	for (size_t i = 0; i < len - 1; i++)
		buf[i] = (char)(base + i % 26);
	buf[len - 1] = '\0';
}

/* Interns the names and emits `events` on this thread, which claims ring 0. */
static int produce(void)
{
	fill_pattern(long_name, sizeof(long_name), 'a');
	fill_pattern(long_cat, sizeof(long_cat), 'A');
	fill_pattern(long_file, sizeof(long_file), 'a');
	long_file[0] = '/';
	if (rp_init() != 0)
		return -1;
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		ids[i] = rp_intern(names[i].name, names[i].cat, names[i].file, names[i].line);
		if (ids[i] != i + 1) /* id 0 is [overflow]; ids follow in order */
			return -1;
	}
	for (size_t i = 0; i < ARRAY_SIZE(events); i++)
		rp_emit(events[i].kind, events[i].flags, ids[events[i].name], events[i].track,
			events[i].arg);
	main_tid = rp_test_gettid();
	return 0;
}

/* Copies this process's segment, as a consumer maps it, into `golden`. */
static int snapshot(void)
{
	struct rp_segment *s = NULL;
	char why[RP_WHY_MAX] = "";

	if (rp_segment_open(rp_segment_path(), &s, why) != 0) {
		fprintf(stderr, "test_segment: rp_segment_open: %s\n", why);
		return -1;
	}
	golden_size = s->size;
	golden = aligned_alloc(RP_WIRE_CACHELINE, golden_size);
	if (golden != NULL)
		memcpy(golden, s->base, golden_size);
	rp_segment_close(s);
	return golden != NULL ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_segment_rejects_each_malformed_field),
		cmocka_unit_test(test_segment_accepts_compatible_changes),
		cmocka_unit_test(test_segment_name_lookup_bounds),
		cmocka_unit_test(test_segment_drain_resyncs_corrupt_tail),
		cmocka_unit_test(test_segment_find_mark_same_as_scan),
		cmocka_unit_test(test_segment_drain_counts_marks),
		cmocka_unit_test_teardown(test_segment_open_refuses_foreign_uid, unlink_foreign),
		cmocka_unit_test(test_segment_open_missing_name),
	};
	int ret;

	setenv("RINGPROF_RING_EVENTS", "64", 1);
	setenv("RINGPROF_RINGS", "4", 1);
	setenv("RINGPROF_NAMES", "64", 1);
	if (produce() != 0 || snapshot() != 0) {
		fprintf(stderr, "test_segment: cannot make the golden segment\n");
		return 1;
	}
	ret = cmocka_run_group_tests(tests, NULL, NULL);
	free(golden);
	return ret;
}
