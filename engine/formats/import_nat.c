// SPDX-License-Identifier: MIT
/*
 * Agent-toolkit trace import; what is read and how it is fed is in import_nat.h.
 * yajl's callback parser follows the structure by depth alone: requests are the
 * objects at depth 1, their "intermediate_steps" array at depth 2, steps at depth 3,
 * "payload" and "function_ancestry" members at depth 5; every other value, at any
 * depth (the LLM inputs and outputs in "data", "metadata", ...), only moves the
 * depth. A request's steps are kept until its object closes, then sorted and
 * handed on; the engine's events of every request wait in one array for the
 * final time-ordered feed (requests overlap in time).
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yajl/yajl_parse.h>
#include <zlib.h>

#include "import_nat.h"
#include "jfast.h"
#include "readahead.h"
#include "sort.h"

#define NONE	UINT32_MAX
#define CHUNK	(64u * 1024)
#define MIB	(1024u * 1024)
#define NUM_MAX 1024

#define SPLIT_DONE 1 /* parse(): the second half's reader read the rest */

#define STR_KEEP RP_JFAST_STR_KEEP /* raw bytes of a string given to yajl: decode to >= 682 */

_Static_assert(STR_KEEP / 6 >= RP_NAT_STR_MAX, "a kept string must still be cut by us");
_Static_assert(NUM_MAX + 1 >= RP_JFAST_NUM + 8, "the lane reads eight bytes past a timestamp digit");

/*
 * In front of yajl: yajl keeps a token that straddles two yajl_parse() calls in a
 * growing buffer, so one huge string (an LLM's output in "data") would cost memory
 * in proportion. This scanner follows string boundaries and gives yajl only the first
 * STR_KEEP raw bytes of a string (cut outside escapes and UTF-8 sequences) and then
 * its closing quote; the dropped middle is not validated. Number runs longer than
 * NUM_MAX are refused.
 */
struct scan {
	bool in_str, dropping;
	int esc;    /* -1 after a backslash; 4..1 hex digits of \u left; 0 */
	size_t run; /* raw bytes of this string, or of this run of number characters */
};

enum kind { V_NULL, V_BOOL, V_NUM, V_STR, V_MAP, V_ARR };
enum fkey { F_OTHER, F_TYPE, F_TS, F_NAME, F_UUID, F_FNAME };

/* One START or END of the request being read. */
struct step {
	double ts;	/* the toolkit's float(event_timestamp) */
	uint64_t ns;	/* the decimal text in exact nanoseconds, if ns_ok */
	uint32_t uuid;	/* aiq's uuid id, or the request-local one */
	uint32_t aname; /* aiq's name id */
	uint32_t ename; /* the engine's name id */
	uint32_t seq;	/* file order in the request */
	uint8_t start, type, ns_ok;
};

struct gen_ev { /* an engine event, waiting for the time-ordered feed */
	uint64_t ts;
	uint32_t track;
	uint32_t seq_kind; /* order in the request << 1 | 1 for a BEGIN */
	uint32_t name;
	uint32_t span;
};

#define LANE_DEPTH 32 /* containers open in a skipped value: deeper goes to jfast */
#define LANE_EVS   16 /* kept fields of a step (more: duplicates, to jfast) */

/* A kept field's value, as field() will be given it. */
struct lane_ev {
	const unsigned char *s;
	uint32_t n;
	uint8_t fkey, kind;
};

/*
 * A key the lane expects at a member of an object: the bytes read there last time
 * (the comma before it, from the second member on, '"', the key, '"', ':' and a
 * space after it if there was one) and the key's class. Steps repeat their layout,
 * so a key is nearly always its slot's: one 32-byte compare rather than the
 * separator's checks, a string scan and the compares that class the key. Only a key
 * that scanned plain (no escape) with its colon right after it is kept, so equal
 * bytes are the same key, checked; its class depends on nothing else, so members
 * past the last slot share it without harm.
 */
#define LANE_SLOTS 16

struct lane_tkey {
	unsigned char k[32];
	uint32_t skip; /* the bits of k not compared: ~((1 << len) - 1); all zero when
			* nothing is kept, and then no text matches (it is compared
			* where the text has a byte above ' ' or a ',', k[0] is 0) */
	uint8_t len;
	int8_t cls; /* enum fkey, or the step key's S_ */
} __attribute__((aligned(16)));

enum lane_obj { K_STEP, K_PAYLOAD, K_ANC, K_PLAIN, K_OBJS };

struct lane {
	struct lane_ev ev[LANE_EVS];
	unsigned n_ev;
	int step_key, fkey; /* what the last keys left in m (-1: none) */
	struct lane_tkey keys[K_OBJS][LANE_SLOTS];
};

struct split;

/* What the second half's reader keeps for the aiq (split mode, see below): its
 * requests' steps in the aiq's order with ids in its own tables. */
struct rec {
	struct rp_strtab uuids, names;
	struct rp_aiq_step *steps;
	size_t n_steps, cap_steps, max_steps;
	uint32_t *reqs; /* steps per request */
	size_t n_reqs, cap_reqs;
};

struct imp {
	struct rp_engine *e;
	struct rp_aiq *aiq;
	struct rec *rec;    /* the second half's reader: steps recorded, not fed */
	struct split *sp;   /* the first half's reader: the second half's, while split */
	bool split_done;    /* the second half's steps are in: the read stops here */
	const unsigned char *run_ptr; /* the text the fast path runs over, at ... */
	uint64_t run_off;	      /* ... this text offset */
	struct rp_nat_caps caps;
	uint32_t src;
	struct rp_nat_stats *st;
	const char *origin;
	char *why;
	yajl_handle h; /* its callbacks: rp_jfast_relay, through jf */
	struct rp_jfast jf;
	struct rp_jfast_win win;
	bool fast;     /* the fast path reads (jfast.h); false once it handed over to yajl */
	uint64_t text; /* JSON bytes given so far */
	int rc; /* our error (-EINVAL, -ENOMEM) with `what` */
	char what[RP_WHY_MAX];
	uint64_t off; /* JSON bytes before the chunk being parsed */
	struct scan sc;

	/* Where the parser is. */
	size_t depth;
	bool top_seen, in_req, in_steps, in_step, in_payload, in_anc, req_key_steps;
	enum { S_OTHER, S_PAYLOAD, S_ANC } step_key;
	enum fkey fkey;

	/* The step being read. */
	char type[32], name[RP_NAT_STR_MAX], uuid[RP_NAT_STR_MAX], fname[RP_NAT_STR_MAX];
	char num[NUM_MAX + 1];
	size_t num_len;
	bool ts_plain;		    /* num is ts_dec's (the lane's rp_jfast_dec()) */
	struct rp_jfast_dec ts_dec;
	bool has_type, has_ts, has_uuid, type_cut;
	size_t name_len, uuid_len, fname_len;

	/* The request being read, and the events of all of them. */
	struct step *steps;
	size_t n_steps, cap_steps;
	struct rp_strtab local; /* request-local UUIDs when there is no aiq */
	uint32_t *started;	/* per UUID id: request + 1 of its last START */
	uint32_t cap_started;
	struct gen_ev *evs;
	size_t n_evs, cap_evs;
	uint64_t t_max;
	uint32_t request;
	struct rp_aiq_step batch[1024]; /* steps handed to the aiq, a batch at a time */
	bool lane_hit;			/* the lane's start_map callback cancelled for it */
	uint64_t lane_n;		/* steps the lane read */
	struct lane lane;
	unsigned char chunk[CHUNK];	/* input; yajl reads it while the callbacks run */
};

static int stop(struct imp *m, int err, const char *what)
{
	snprintf(m->what, sizeof(m->what), "%s", what);
	m->rc = err;
	return 0;
}

static void bad(struct imp *m)
{
	m->st->bad++;
	if (m->e != NULL)
		m->e->src[m->src].counts.anomalies[RP_ANOM_BAD_EVENT]++;
}

static bool push(void **p, size_t *cap, size_t size, size_t n)
{
	if (n < *cap)
		return true;
	size_t c = *cap ? *cap * 2 : 1024;
	void *q = realloc(*p, c * size);
	if (q == NULL)
		return false;
	*p = q;
	*cap = c;
	return true;
}

/* ---- numbers ---- */

/* The decimal text @s in nanoseconds, exactly (half up); false if negative or too big. */
static bool dec_to_ns(const char *s, uint64_t *out)
{
	char dig[NUM_MAX + 1];
	size_t nd = 0;
	long ip = 0, ex = 0; /* digits before the point; exponent */
	uint64_t v = 0;
	bool point = false;

	if (*s == '-')
		return false;
	for (; *s && *s != 'e' && *s != 'E'; s++) {
		if (*s == '.') {
			point = true;
			continue;
		}
		dig[nd++] = *s;
		ip += !point;
	}
	if (*s)
		ex = strtol(s + 1, NULL, 10);
	if (ex > 40 || ex < -40)
		return ex < 0 ? (*out = 0, true) : false;
	ip += ex + 9; /* digits [0, ip) are the integer nanoseconds */
	for (long i = 0; i < ip; i++) {
		unsigned d = i < (long)nd ? (unsigned)(dig[i] - '0') : 0;
		if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, d, &v))
			return false;
	}
	if (ip >= 0 && ip < (long)nd && dig[ip] >= '5' && __builtin_add_overflow(v, 1, &v))
		return false;
	*out = v;
	return true;
}

/* dec_to_ns() for a number read by rp_jfast_dec(): the same, in integers. */
static bool plain_to_ns(const struct rp_jfast_dec *d, uint64_t *out)
{
	static const uint64_t p10[] = { 1,	 10,	   100,	      1000,	  10000,
					100000,	 1000000,  10000000,  100000000, 1000000000,
					10000000000ull };
	int fd = -d->p; /* digits after the point: 0..19 */

	if (d->neg)
		return false;
	if (fd <= 9)
		return !__builtin_mul_overflow(d->w, p10[9 - fd], out);
	/* cut to nanoseconds; up when the first digit cut is 5 or more */
	uint64_t div = p10[fd - 9];
	*out = d->w / div + (d->w % div >= div / 2);
	return true;
}

bool rp_nat_ns_of(const char *s, size_t n, uint64_t *out)
{
	struct rp_jfast_dec dec;

	return rp_jfast_dec(s, n, &dec) ? plain_to_ns(&dec, out) : dec_to_ns(s, out);
}

/* ---- a step, a request ---- */

static const struct {
	const char *name;
	uint8_t len;  /* strlen(name) */
	int8_t start; /* 1 START, 0 END, -1 ignored */
	uint8_t type;
} types[] = {
#define T(name, start, type) { name, sizeof(name) - 1, start, type }
	T("LLM_START", 1, RP_AIQ_LLM),
	T("LLM_END", 0, RP_AIQ_LLM),
	T("TOOL_START", 1, RP_AIQ_TOOL),
	T("TOOL_END", 0, RP_AIQ_TOOL),
	T("FUNCTION_START", 1, RP_AIQ_FUNCTION),
	T("FUNCTION_END", 0, RP_AIQ_FUNCTION),
	T("SPAN_START", 1, RP_AIQ_FUNCTION),
	T("SPAN_END", 0, RP_AIQ_FUNCTION),
	T("LLM_NEW_TOKEN", -1, 0),
	T("SPAN_CHUNK", -1, 0),
	T("WORKFLOW_START", -1, 0),
	T("WORKFLOW_END", -1, 0),
	T("TASK_START", -1, 0),
	T("TASK_END", -1, 0),
	T("TTC_START", -1, 0),
	T("TTC_END", -1, 0),
	T("CUSTOM_START", -1, 0),
	T("CUSTOM_END", -1, 0),
#undef T
};

static void step_begin(struct imp *m)
{
	m->in_step = true;
	m->has_type = m->has_ts = m->has_uuid = m->type_cut = m->ts_plain = false;
	m->name_len = m->uuid_len = m->fname_len = 0;
	m->name[0] = m->uuid[0] = m->fname[0] = '\0';
}

/* The request-local or aiq id of the step's UUID (ENDs too: the file need not be in
 * time order, an END may come before its START); NONE: out of memory. */
static uint32_t uuid_id(struct imp *m)
{
	if (m->rec != NULL)
		return rp_strtab_get(&m->rec->uuids, m->uuid, m->uuid_len, true);
	if (m->aiq != NULL)
		return rp_aiq_uuid(m->aiq, m->uuid, m->uuid_len, true);
	return rp_strtab_get(&m->local, m->uuid, m->uuid_len, true);
}

static int name_ids(struct imp *m, struct step *s)
{
	static const char *const unknown[] = { "unknown_llm", "unknown_tool", "unknown_function" };
	const char *n = s->type == RP_AIQ_FUNCTION ? m->fname : m->name;
	size_t len = s->type == RP_AIQ_FUNCTION ? m->fname_len : m->name_len;

	if (len == 0) { /* `row.get(...) or "unknown_..."`: null and "" alike */
		n = unknown[s->type];
		len = strlen(n);
	}
	if (m->rec != NULL && (s->aname = rp_strtab_get(&m->rec->names, n, len, true)) == NONE)
		return -ENOMEM;
	if (m->aiq != NULL && (s->aname = rp_aiq_name(m->aiq, n, len)) == NONE)
		return -ENOMEM;
	if (m->e != NULL)
		s->ename = rp_engine_name(m->e, m->src, n, rp_aiq_type_names[s->type], "", 0);
	return 0;
}

static int step_end(struct imp *m)
{
	struct rp_jfast_dec dec;
	struct step *s;
	size_t t, len;

	m->in_step = false;
	m->st->steps++;
	/* strcmp() with each name, its length first (one strlen() of the type, which
	 * may hold a NUL of its own, rather than a strcmp() call per name) */
	len = m->has_type && !m->type_cut ? strlen(m->type) : 0;
	for (t = 0; t < sizeof(types) / sizeof(types[0]); t++)
		if (len != 0 && types[t].len == len && memcmp(m->type, types[t].name, len) == 0)
			break;
	if (t == sizeof(types) / sizeof(types[0]) ||
	    (types[t].start >= 0 && (!m->has_ts || !m->has_uuid))) {
		bad(m);
		return 1;
	}
	if (types[t].start < 0)
		return 1;
	m->st->calls++;
	if (m->n_steps >= m->caps.max_request_steps) {
		m->st->capped++;
		bad(m);
		return 1;
	}
	if (!push((void **)&m->steps, &m->cap_steps, sizeof(*s), m->n_steps))
		return stop(m, -ENOMEM, "out of memory");
	s = &m->steps[m->n_steps];
	*s = (struct step){ .start = (uint8_t)types[t].start,
			    .type = types[t].type,
			    .seq = (uint32_t)m->n_steps };
	if (m->ts_plain) /* the lane read it */
		dec = m->ts_dec;
	if (m->ts_plain || rp_jfast_dec(m->num, m->num_len, &dec)) { /* the usual form: one pass */
		s->ts = rp_jfast_dec_double(&dec, m->num);
		s->ns_ok = plain_to_ns(&dec, &s->ns);
	} else {
		s->ts = rp_jfast_strtod(m->num);
		s->ns_ok = dec_to_ns(m->num, &s->ns);
	}
	s->uuid = uuid_id(m);
	if (s->uuid == NONE)
		return stop(m, -ENOMEM, "out of memory");
	if (s->start && name_ids(m, s) != 0)
		return stop(m, -ENOMEM, "out of memory");
	m->n_steps++;
	return 1;
}

static int cmp_step(const void *x, const void *y)
{
	const struct step *a = x, *b = y;

	if (a->ts != b->ts)
		return a->ts < b->ts ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

#define step_before(x, y) (cmp_step((x), (y)) < 0)
RP_SORT_DEFINE(sort_steps, struct step, step_before)

/* The engine's events of one request: BEGIN/END on async track = request index. */
static int engine_request(struct imp *m)
{
	uint32_t req = m->request + 1;

	for (size_t i = 0; i < m->n_steps; i++) {
		const struct step *s = &m->steps[i];
		if (!s->ns_ok) {
			bad(m); /* negative or beyond 2^64 ns: not an engine time */
			continue;
		}
		if (s->start) {
			if (s->uuid >= m->cap_started) {
				uint32_t old = m->cap_started, c = s->uuid * 2 + 64;
				uint32_t *p = realloc(m->started, (size_t)c * sizeof(*p));
				if (p == NULL)
					return -ENOMEM;
				memset(p + old, 0, (size_t)(c - old) * sizeof(*p));
				m->started = p;
				m->cap_started = c;
			}
			if (m->started[s->uuid] == req)
				bad(m); /* a duplicate UUID in its request */
			m->started[s->uuid] = req;
		}
		if (m->n_evs >= m->caps.max_events) {
			m->st->capped++;
			bad(m);
			continue;
		}
		if (!push((void **)&m->evs, &m->cap_evs, sizeof(*m->evs), m->n_evs))
			return -ENOMEM;
		m->evs[m->n_evs++] =
			(struct gen_ev){ s->ns, m->request, (uint32_t)i << 1 | s->start,
					 s->start ? s->ename : 0, s->uuid };
		if (s->ns > m->t_max)
			m->t_max = s->ns;
	}
	return 0;
}

/* The second half's reader: one request's sorted steps, kept for the replay. */
static int record(struct rec *r, const struct step *st, size_t n)
{
	if (r->n_steps + n > r->max_steps)
		return -E2BIG; /* the split gives up: memory stays bounded */
	while (r->n_steps + n > r->cap_steps)
		if (!push((void **)&r->steps, &r->cap_steps, sizeof(*r->steps), r->cap_steps))
			return -ENOMEM;
	if (!push((void **)&r->reqs, &r->cap_reqs, sizeof(*r->reqs), r->n_reqs))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		r->steps[r->n_steps + i] = (struct rp_aiq_step){ st[i].ts, st[i].uuid, st[i].aname,
								 st[i].start, st[i].type };
	r->n_steps += n;
	r->reqs[r->n_reqs++] = (uint32_t)n;
	return 0;
}

static bool split_at(struct imp *m);

static int request_end(struct imp *m)
{
	int err = 0;

	m->in_req = false;
	m->st->requests++;
	if (m->n_steps > 1 && !sort_steps(m->steps, m->n_steps))
		qsort(m->steps, m->n_steps, sizeof(*m->steps), cmp_step);
	if (m->rec != NULL)
		err = record(m->rec, m->steps, m->n_steps);
	if (m->aiq != NULL) {
		struct rp_aiq_step *as = m->batch;
		/* In batches: no second copy of the request. */
		for (size_t i = 0; i < m->n_steps && !err;) {
			size_t k = 0;
			for (; k < sizeof(m->batch) / sizeof(*as) && i + k < m->n_steps; k++) {
				const struct step *s = &m->steps[i + k];
				as[k] = (struct rp_aiq_step){ s->ts, s->uuid, s->aname, s->start,
							      s->type };
			}
			err = rp_aiq_request_part(m->aiq, as, k, i + k == m->n_steps);
			i += k;
		}
		if (m->n_steps == 0)
			err = rp_aiq_request_part(m->aiq, NULL, 0, true);
	}
	if (err == 0 && m->e != NULL)
		err = engine_request(m);
	m->n_steps = 0;
	if (m->aiq == NULL)
		rp_strtab_reset(&m->local);
	m->request++;
	return err ? stop(m, err, "out of memory") : 1;
}

/* ---- yajl callbacks ---- */

static void put_str(struct imp *m, char *dst, size_t *len, const unsigned char *s, size_t n)
{
	if (n >= RP_NAT_STR_MAX) {
		m->st->cut++;
		n = RP_NAT_STR_MAX - 1;
		while (n > 0 && (s[n] & 0xc0) == 0x80)
			n--; /* not inside a UTF-8 sequence */
	}
	memcpy(dst, s, n);
	dst[n] = '\0';
	*len = n;
}

static void field(struct imp *m, enum kind k, const unsigned char *s, size_t n)
{
	size_t len;

	switch (m->fkey) {
	case F_TYPE:
		m->has_type = k == V_STR;
		m->type_cut = n >= sizeof(m->type);
		if (m->has_type && !m->type_cut) {
			memcpy(m->type, s, n);
			m->type[n] = '\0';
		}
		break;
	case F_TS: m->has_ts = k == V_NUM; break;
	case F_NAME:
		if (k == V_STR)
			put_str(m, m->name, &m->name_len, s, n);
		else
			m->name_len = 0; /* null (or not a string): unknown */
		break;
	case F_UUID:
		m->has_uuid = k == V_STR;
		if (m->has_uuid)
			put_str(m, m->uuid, &m->uuid_len, s, n);
		break;
	case F_FNAME:
		if (k == V_STR)
			put_str(m, m->fname, &m->fname_len, s, n);
		else
			m->fname_len = 0;
		break;
	case F_OTHER: break;
	}
	(void)len;
}

static int on_value(struct imp *m, enum kind k, const unsigned char *s, size_t n)
{
	switch (m->depth) {
	case 0:
		m->top_seen = true;
		return k == V_ARR ? 1 : stop(m, -EINVAL, "the top level is not an array");
	case 1:
		if (k == V_MAP)
			m->in_req = true;
		else
			bad(m); /* a request that is not an object */
		return 1;
	case 2:
		if (m->in_req && m->req_key_steps) {
			if (k == V_ARR)
				m->in_steps = true;
			else
				bad(m);
		}
		return 1;
	case 3:
		if (m->in_steps) {
			if (k == V_MAP)
				step_begin(m);
			else
				bad(m);
		}
		return 1;
	case 4:
		if (m->in_step && k == V_MAP) {
			m->in_payload = m->step_key == S_PAYLOAD;
			m->in_anc = m->step_key == S_ANC;
		}
		return 1;
	case 5:
		if (m->in_payload || m->in_anc)
			field(m, k, s, n);
		return 1;
	}
	return 1;
}

/* A scalar at depth 5 (most of them): on_value()'s case 5 without its call,
 * and field() only for a key it keeps. */
static inline bool scalar5(struct imp *m, enum kind k, const unsigned char *s, size_t n)
{
	if (m->depth != 5)
		return false;
	if (m->fkey != F_OTHER && (m->in_payload || m->in_anc))
		field(m, k, s, n);
	return true;
}

static int cb_null(void *ctx)
{
	return scalar5(ctx, V_NULL, NULL, 0) || on_value(ctx, V_NULL, NULL, 0);
}

static int cb_boolean(void *ctx, int v)
{
	(void)v;
	return on_value(ctx, V_BOOL, NULL, 0);
}

static int cb_number(void *ctx, const char *s, size_t n)
{
	struct imp *m = ctx;

	if (m->depth == 5 && m->in_payload && m->fkey == F_TS) {
		if (n > NUM_MAX)
			return stop(m, -EINVAL, "event_timestamp longer than 1024 bytes");
		memcpy(m->num, s, n);
		m->num[n] = '\0';
		m->num_len = n;
		m->ts_plain = false;
	}
	return on_value(m, V_NUM, NULL, 0);
}

static int cb_string(void *ctx, const unsigned char *s, size_t n)
{
	return scalar5(ctx, V_STR, s, n) || on_value(ctx, V_STR, s, n);
}

/* Whether the key @s[0..@n) is the string literal @lit. */
#define key_is(s, n, lit) ((n) == sizeof(lit) - 1 && memcmp((s), (lit), sizeof(lit) - 1) == 0)

static int cb_map_key(void *ctx, const unsigned char *s, size_t n)
{
	struct imp *m = ctx;

	if (m->depth == 5) { /* the most keys: a payload's and an ancestry's */
		if (m->in_payload)
			m->fkey = key_is(s, n, "event_type")	    ? F_TYPE
				  : key_is(s, n, "event_timestamp") ? F_TS
				  : key_is(s, n, "name")	    ? F_NAME
				  : key_is(s, n, "UUID")	    ? F_UUID
								    : F_OTHER;
		else if (m->in_anc)
			m->fkey = key_is(s, n, "function_name") ? F_FNAME : F_OTHER;
	} else if (m->depth == 2 && m->in_req) {
		m->req_key_steps = key_is(s, n, "intermediate_steps");
	} else if (m->depth == 4 && m->in_step) {
		m->step_key = key_is(s, n, "payload")		  ? S_PAYLOAD
			      : key_is(s, n, "function_ancestry") ? S_ANC
								  : S_OTHER;
	}
	return 1;
}

static int cb_start(void *ctx, enum kind k)
{
	struct imp *m = ctx;

	if (m->sp != NULL && m->depth == 1 && k == V_MAP && split_at(m))
		return 0; /* the second reader read the rest (or m->rc says why not) */
	if (!on_value(m, k, NULL, 0))
		return 0;
	m->depth++;
	return 1;
}

static int cb_start_map(void *ctx)
{
	return cb_start(ctx, V_MAP);
}

static int cb_start_array(void *ctx)
{
	return cb_start(ctx, V_ARR);
}

static int cb_end_map(void *ctx)
{
	struct imp *m = ctx;

	m->depth--;
	if (m->depth == 4) {
		m->in_payload = m->in_anc = false;
	} else if (m->depth == 3 && m->in_step) {
		return step_end(m);
	} else if (m->depth == 1 && m->in_req) {
		m->in_steps = false;
		return request_end(m);
	}
	return 1;
}

static int cb_end_array(void *ctx)
{
	struct imp *m = ctx;

	m->depth--;
	if (m->depth == 2)
		m->in_steps = false;
	return 1;
}

static const yajl_callbacks callbacks = {
	.yajl_null = cb_null,
	.yajl_boolean = cb_boolean,
	.yajl_number = cb_number,
	.yajl_string = cb_string,
	.yajl_start_map = cb_start_map,
	.yajl_map_key = cb_map_key,
	.yajl_end_map = cb_end_map,
	.yajl_start_array = cb_start_array,
	.yajl_end_array = cb_end_array,
};

/* ---- driving ---- */

static bool number_char(unsigned char c)
{
	return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}

/* How many of @b yajl gets before a drop starts or a number is too long. */
static size_t scan_keep(struct scan *s, const unsigned char *b, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = b[i];

		if (!s->in_str) {
			if (c == '"') {
				s->in_str = true;
				s->run = 0;
			} else if ((s->run = number_char(c) ? s->run + 1 : 0) > NUM_MAX) {
				return i;
			}
			continue;
		}
		if (s->esc == 0 && c != '"' && c != '\\' && s->run < STR_KEEP) {
			size_t end = n - i < STR_KEEP - s->run ? n : i + (STR_KEEP - s->run), k;
			const unsigned char *q = memchr(b + i, '"', end - i), *bs;

			k = q ? (size_t)(q - b) : end;
			bs = memchr(b + i, '\\', k - i);
			k = bs ? (size_t)(bs - b) : k;
			s->run += k - i;
			i = k - 1; /* plain bytes: nothing to track */
			continue;
		}
		if (s->esc < 0) {
			s->esc = c == 'u' ? 4 : 0;
		} else if (s->esc > 0) {
			s->esc--;
		} else if (c == '"') {
			s->in_str = false;
			s->run = 0;
			continue;
		} else if (s->run >= STR_KEEP && (c & 0xc0) != 0x80) {
			s->dropping = true; /* not inside an escape or a UTF-8 sequence */
			return i;
		} else if (c == '\\') {
			s->esc = -1;
		}
		s->run++;
	}
	return n;
}

/* How many of @b to drop: up to (not including) the string's closing quote. */
static size_t scan_drop(struct scan *s, const unsigned char *b, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (s->esc) {
			s->esc = 0;
		} else if (b[i] == '\\') {
			s->esc = 1;
		} else if (b[i] == '"') {
			s->dropping = false;
			return i;
		}
	}
	return n;
}

static int fail_at(struct imp *m, int err, uint64_t at, const char *what)
{
	snprintf(m->why, RP_WHY_MAX, "%s: byte %llu: %.100s", m->origin, (unsigned long long)at,
		 what);
	return err;
}

/* @n bytes at JSON offset @off to yajl (@last: the end of the text). */
static int parse_run(struct imp *m, const unsigned char *b, size_t n, uint64_t off, bool last)
{
	yajl_status st = last ? yajl_complete_parse(m->h) : yajl_parse(m->h, b, n);
	uint64_t at = off + (last ? 0 : yajl_get_bytes_consumed(m->h));
	unsigned char *msg;
	int rc;

	if (st == yajl_status_ok)
		return 0;
	if (st == yajl_status_client_canceled)
		return fail_at(m, m->rc, at, m->what);
	msg = yajl_get_error(m->h, 0, NULL, 0);
	if (msg == NULL)
		return fail_at(m, -ENOMEM, at, "out of memory");
	n = strlen((char *)msg);
	while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
		msg[--n] = '\0';
	rc = fail_at(m, -EINVAL, at, (char *)msg);
	yajl_free_error(m->h, msg);
	return rc;
}

/* The next @n bytes of JSON text, through the scanner, to yajl; NULL: the end. */
static int slow_parse(struct imp *m, const unsigned char *b, size_t n, bool last)
{
	size_t i = 0, k;
	int rc;

	if (last)
		return parse_run(m, NULL, 0, m->off, true);
	while (i < n) {
		k = m->sc.dropping ? 0 : scan_keep(&m->sc, b + i, n - i);
		if (k > 0 && (rc = parse_run(m, b + i, k, m->off + i, false)) != 0)
			return rc;
		i += k;
		if (!m->sc.in_str && m->sc.run > NUM_MAX)
			return fail_at(m, -EINVAL, m->off + i, "number longer than 1024 bytes");
		if (m->sc.dropping)
			i += scan_drop(&m->sc, b + i, n - i);
	}
	m->off += n;
	return 0;
}

/* ---- the fast path (jfast.h) and the hand-over to yajl ---- */

/* After a container's start: are its keys and values never looked at? (Then the
 * callbacks they would get change nothing: see the depth rules above.) */
static int nat_mute(void *ctx)
{
	const struct imp *m = ctx;

	switch (m->depth) {
	case 1: return 0;
	case 2: return !m->in_req;
	case 3: return !m->in_steps;
	case 4: return !m->in_step;
	case 5: return !(m->in_payload || m->in_anc);
	}
	return 1;
}

/* ---- the step lane: a whole step in one pass, in front of the fast path ----
 *
 * Most of a trace is its steps, and most of a step is what the analysis never
 * reads (parent ids, framework, tags, data, metadata, usage). Through the fast
 * path every one of its ~60 tokens costs a turn of jfast's loop and, outside the
 * muted values, a callback. The lane reads a step as one object instead: when
 * jfast is about to start a step (a '{' at depth 3 of "intermediate_steps"), the
 * start_map callback cancels, and the lane parses the whole object from that '{'
 * with a parser that knows the layout: a step's member keys compared once for
 * "payload" and "function_ancestry", theirs by length for the five fields kept
 * (and each key first against the bytes its member had in the last object of its
 * kind: struct lane_tkey), every other value skipped whole by jfast's
 * rp_jfast_skip_value() (checked as jfast checks it: the lane's one scanner of
 * its own, lane_num(), takes plain numbers only, as jfast's takes them, and
 * hands it any other), strings by jfast's scanner. It records the kept fields (pointers into
 * the text) and, once the object's '}' is read, gives them to field() and step_end() in the order the
 * callbacks would have, then brings jfast to the state after the object (a "{}"
 * run with callbacks that do nothing) and lets it go on after it; a ", {" behind
 * the step starts the next one in the lane too.
 *
 * It accepts a strict subset of what jfast accepts (jfast's own string, number and
 * literal checks, whitespace, nesting no deeper than LANE_DEPTH under the step) and
 * only whole objects inside the text it was given, and it keeps no string that has
 * an escape or is longer than what the callbacks get whole. For anything else,
 * before any effect (counters included), it gives the '{' back: jfast starts the
 * object (its start_map callback, made as jfast would) and reads it as before. So
 * the callbacks' effects, errors and their offsets, and where a read stops are the
 * same; test_nat_lane and fuzz_nat_lane compare both ways (rp_nat_lane_off).
 */

bool rp_nat_lane_off;
uint64_t rp_nat_lane_steps;

#define LANE_INLINE static inline __attribute__((always_inline))

static bool lane_sp_slow(const unsigned char **q, const unsigned char *e)
{
	const unsigned char *p = *q;

	while (p < e && rp_jfast_ws(*p))
		p++;
	*q = p;
	return p < e;
}

/* *@q on past whitespace; false at @e (the end of the text the lane may read). */
LANE_INLINE bool lane_sp(const unsigned char **q, const unsigned char *e)
{
	if (__builtin_expect(*q < e && **q > ' ', 1))
		return true;
	return lane_sp_slow(q, e);
}

/* *@q past the separator (',' or ':') it is at and the whitespace after it, the
 * usual one space first. */
LANE_INLINE bool lane_sep(const unsigned char **q, const unsigned char *e)
{
	const unsigned char *p = *q + 1;

	if (p < e && *p == ' ')
		p++;
	*q = p;
	return lane_sp(q, e);
}

/*
 * The string at *@q (its opening quote), whole before @e, as jfast takes it: *@q
 * past its closing quote, its raw bytes at *@s, *@len; *@esc set if it holds an
 * escape. false: not whole, or jfast would not take it.
 */
LANE_INLINE bool lane_str(const unsigned char **q, const unsigned char *e,
			  const unsigned char **s, size_t *len, bool *esc)
{
	const unsigned char *p = *q + 1;

	if (rp_jfast_scan_str(p, (size_t)(e - p), len, esc) != RP_JFAST_SCAN_OK)
		return false;
	*s = p;
	*q = p + *len + 1;
	return true;
}

/* The first byte from @p on that is not a decimal digit (or @e), eight at a time:
 * a byte's low nibble above 9 carries into its bit 4, any other byte has a high
 * nibble; a carry out of a flagged byte only reaches later ones. */
LANE_INLINE const unsigned char *lane_digits(const unsigned char *p, const unsigned char *e)
{
	const uint64_t ones = 0x0101010101010101ull;
	uint64_t x, f;

	for (; e - p >= 8; p += 8) {
		memcpy(&x, p, 8);
		x = le64toh(x) ^ (ones * '0');
		f = (x & (ones * 0xf0)) | ((x + ones * 6) & (ones * 0x10));
		if (f)
			return p + __builtin_ctzll(f) / 8;
	}
	while (p < e && rp_jfast_digit(*p))
		p++;
	return p;
}

/*
 * A number at *@q (its '-' or first digit) of the plain form -?(0|[1-9]D*)(.D+)?,
 * followed before @e by whitespace, ',', ']' or '}', its digits found eight at a
 * time: *@q past it. Exactly what jfast's scanner takes of that form; false for
 * any other (an exponent, a leading zero before a digit, the text's end), which
 * that scanner then decides.
 */
LANE_INLINE bool lane_num(const unsigned char **q, const unsigned char *e)
{
	const unsigned char *p = *q + (**q == '-'), *r;

	if (p < e && *p == '0')
		r = p + 1;
	else if ((r = lane_digits(p, e)) == p)
		return false;
	if (r < e && *r == '.') {
		p = r + 1;
		if ((r = lane_digits(p, e)) == p)
			return false;
	}
	if (r >= e || r - *q > RP_JFAST_NUM ||
	    !(rp_jfast_ws(*r) || *r == ',' || *r == ']' || *r == '}'))
		return false;
	*q = r;
	return true;
}

/* The value at *@q (p < e), checked and skipped by jfast (a plain number by
 * lane_num()), nesting at most @depth containers: *@q past it. */
LANE_INLINE bool lane_skip(const unsigned char **q, const unsigned char *e, unsigned depth)
{
	size_t len;

	if ((**q == '-' || rp_jfast_digit(**q)) && lane_num(q, e))
		return true;
	if (rp_jfast_skip_value(*q, (size_t)(e - *q), depth, &len) != RP_JFAST_SCAN_OK)
		return false;
	*q += len;
	return true;
}

/* Whether the @n bytes at @s are the string literal @lit (constant-size compares). */
#define lane_is(s, n, lit) ((n) == sizeof(lit) - 1 && memcmp((s), (lit), sizeof(lit) - 1) == 0)

/* After an object's member, at *@q: 1 with *@q at the next key, 0 with *@q past
 * the object's '}', -1 if not taken. */
LANE_INLINE int lane_next(const unsigned char **q, const unsigned char *e)
{
	if (__builtin_expect(*q < e && **q == ',', 1)) /* the next member */
		return lane_sep(q, e) ? 1 : -1;
	if (!lane_sp(q, e))
		return -1;
	if (**q == '}') {
		++*q;
		return 0;
	}
	return **q == ',' && lane_sep(q, e) ? 1 : -1;
}

/* A payload key's field (cb_map_key's comparisons, by length first). */
LANE_INLINE enum fkey lane_payload_key(const unsigned char *s, size_t n)
{
	switch (n) {
	case 4:
		return memcmp(s, "name", 4) == 0 ? F_NAME : memcmp(s, "UUID", 4) == 0 ? F_UUID
										: F_OTHER;
	case 10: return memcmp(s, "event_type", 10) == 0 ? F_TYPE : F_OTHER;
	case 15: return memcmp(s, "event_timestamp", 15) == 0 ? F_TS : F_OTHER;
	}
	return F_OTHER;
}

/* The class of key @s[0..@n) in an object of kind @o: what cb_map_key makes of it. */
LANE_INLINE int lane_class(enum lane_obj o, const unsigned char *s, size_t n)
{
	switch (o) {
	case K_STEP:
		return lane_is(s, n, "payload")		  ? S_PAYLOAD
		       : lane_is(s, n, "function_ancestry") ? S_ANC
							    : S_OTHER;
	case K_PAYLOAD: return lane_payload_key(s, n);
	case K_ANC: return lane_is(s, n, "function_name") ? F_FNAME : F_OTHER;
	default: return F_OTHER;
	}
}

/* Whether the text at @p (before @e, at a byte above ' ') starts with @t's bytes. */
LANE_INLINE bool lane_tkey_hit(const struct lane_tkey *t, const unsigned char *p,
			       const unsigned char *e)
{
#if defined(__SSE2__)
	if (e - p < 32)
		return false;
	__m128i a = _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)p),
				   _mm_loadu_si128((const __m128i *)(const void *)t->k));
	__m128i b = _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)(p + 16)),
				   _mm_loadu_si128((const __m128i *)(const void *)(t->k + 16)));
	uint32_t eq = (uint32_t)_mm_movemask_epi8(a) | (uint32_t)_mm_movemask_epi8(b) << 16;

	return (eq | t->skip) == UINT32_MAX;
#else
	return t->len != 0 && (size_t)(e - p) >= t->len && memcmp(p, t->k, t->len) == 0;
#endif
}

/* @n bytes at @s (a key's quotes, its colon, maybe a space) kept in @t, with the
 * key's class. */
static void lane_keep(struct lane_tkey *t, const unsigned char *s, size_t n, int cls)
{
	memset(t->k, 0, sizeof(t->k));
	memcpy(t->k, s, n);
	t->len = (uint8_t)n;
	t->skip = n >= 32 ? 0 : ~((1u << n) - 1);
	t->cls = (int8_t)cls;
}

/*
 * The key at *@q (after whitespace) in an object of kind @o and its colon, scanned:
 * *@q at the value (after whitespace), the key's class in *@cls. A plain key with
 * its colon right after it is kept in @t as the bytes from @from (its quote, or the
 * comma before it) to past the colon and a space after it; NULL @from: not kept.
 */
LANE_INLINE bool lane_key(const unsigned char **q, const unsigned char *e, struct lane_tkey *t,
			  enum lane_obj o, const unsigned char *from, int *cls)
{
	const unsigned char *s;
	size_t len;
	bool esc;

	if (**q != '"' || !lane_str(q, e, &s, &len, &esc) || esc)
		return false;
	*cls = lane_class(o, s, len);
	if (__builtin_expect(*q < e && **q == ':', 1)) { /* the colon right after it */
		const unsigned char *end = *q + 1 + (*q + 1 < e && (*q)[1] == ' ');

		if (from != NULL && end - from <= (ptrdiff_t)sizeof(t->k))
			lane_keep(t, from, (size_t)(end - from), *cls);
		return lane_sep(q, e);
	}
	return lane_sp(q, e) && **q == ':' && lane_sep(q, e);
}

/* An object's first key (member 0 of kind @o) at *@q (after whitespace, not '}'):
 * as lane_key(), the key the first member had last time compared first. */
LANE_INLINE bool lane_first(const unsigned char **q, const unsigned char *e, struct lane *L,
			    enum lane_obj o, int *cls)
{
	struct lane_tkey *t = &L->keys[o][0];

	if (lane_tkey_hit(t, *q, e)) {
		*q += t->len;
		*cls = t->cls;
		return lane_sp(q, e);
	}
	return lane_key(q, e, t, o, *q, cls);
}

/*
 * After a member's value, at *@q: 1 with *@q at the next member's value (after its
 * key, whose class is in *@cls), 0 with *@q past the object's '}', -1 if not taken.
 * The comma, key and colon kept in the next member's slot @t are compared first.
 */
LANE_INLINE int lane_then(const unsigned char **q, const unsigned char *e, struct lane_tkey *t,
			  enum lane_obj o, int *cls)
{
	const unsigned char *c = *q;
	int r;

	/* (a slot with nothing kept cannot match a ',') */
	if (c < e && *c == ',' && lane_tkey_hit(t, c, e)) {
		*q += t->len;
		*cls = t->cls;
		return lane_sp(q, e) ? 1 : -1;
	}
	if ((r = lane_next(q, e)) <= 0)
		return r;
	return lane_key(q, e, t, o, c < e && *c == ',' ? c : NULL, cls) ? 1 : -1;
}

/* A kept field's value at *@q: recorded in @L as field() will be given it. */
static bool lane_field(const unsigned char **q, const unsigned char *e, enum fkey f,
		       struct lane *L)
{
	const unsigned char *p = *q, *s = NULL;
	unsigned char c = *p;
	size_t len = 0;
	enum kind kind;
	bool esc;

	if (L->n_ev == LANE_EVS)
		return false;
	if (c == '"') {
		if (!lane_str(q, e, &s, &len, &esc) || esc || len > RP_JFAST_STR_KEEP)
			return false; /* decoded or cut by jfast: its */
		kind = V_STR;
	} else {
		if (!lane_skip(q, e, LANE_DEPTH)) /* a container: field() is told at its start */
			return false;
		kind = c == '{' ? V_MAP : c == '[' ? V_ARR : c == 'n' ? V_NULL
			: c == 't' || c == 'f' ? V_BOOL : V_NUM;
		if (kind == V_NUM) {
			s = p;
			len = (size_t)(*q - p);
		}
	}
	L->ev[L->n_ev++] = (struct lane_ev){ s, (uint32_t)len, (uint8_t)f, (uint8_t)kind };
	return true;
}

/* An object no field of which is read (a payload's "data"), at *@q: checked and
 * skipped as lane_skip() would skip it, its keys by their slots. */
static bool lane_plain(const unsigned char **q, const unsigned char *e, struct lane *L)
{
	const unsigned char *p = *q + 1;
	struct lane_tkey *t = L->keys[K_PLAIN], *last = t + LANE_SLOTS - 1;
	int r, f;

	if (!lane_sp(&p, e))
		return false;
	if (*p == '}') {
		*q = p + 1;
		return true;
	}
	if (!lane_first(&p, e, L, K_PLAIN, &f))
		return false;
	do { /* each value inside this object: one container less */
		if (!lane_skip(&p, e, LANE_DEPTH - 1))
			return false;
	} while ((r = lane_then(&p, e, t += t < last, K_PLAIN, &f)) > 0);
	*q = p;
	return r == 0;
}

/* The object at *@q ('{'), a payload (@o K_PAYLOAD) or a function_ancestry (K_ANC):
 * its kept fields recorded in @L, *@q past it. */
static bool lane_fields(const unsigned char **q, const unsigned char *e, enum lane_obj o,
			struct lane *L)
{
	const unsigned char *p = *q + 1;
	struct lane_tkey *t = L->keys[o], *last = t + LANE_SLOTS - 1;
	int r, f;

	if (!lane_sp(&p, e))
		return false;
	if (*p == '}') {
		*q = p + 1;
		return true;
	}
	if (!lane_first(&p, e, L, o, &f))
		return false;
	do {
		L->fkey = f;
		if (!(f != F_OTHER			 ? lane_field(&p, e, (enum fkey)f, L)
		      : o == K_PAYLOAD && *p == '{' ? lane_plain(&p, e, L)
						     : lane_skip(&p, e, LANE_DEPTH)))
			return false;
	} while ((r = lane_then(&p, e, t += t < last, o, &f)) > 0);
	*q = p;
	return r == 0;
}

/* The step object at @b ('{'), whole before @e: its end, NULL if not taken. */
static const unsigned char *lane_step(const unsigned char *b, const unsigned char *e,
				      struct lane *L)
{
	const unsigned char *p = b + 1;
	struct lane_tkey *t = L->keys[K_STEP], *last = t + LANE_SLOTS - 1;
	int r, sk;

	L->n_ev = 0;
	L->step_key = L->fkey = -1;
	if (!lane_sp(&p, e))
		return NULL;
	if (*p == '}')
		return p + 1;
	if (!lane_first(&p, e, L, K_STEP, &sk))
		return NULL;
	do {
		L->step_key = sk;
		if (!(sk != S_OTHER && *p == '{'
			      ? lane_fields(&p, e, sk == S_ANC ? K_ANC : K_PAYLOAD, L)
			      : lane_skip(&p, e, LANE_DEPTH)))
			return NULL;
	} while ((r = lane_then(&p, e, t += t < last, K_STEP, &sk)) > 0);
	return r == 0 ? p : NULL;
}

/* Eight digits (the first in the low byte, each minus '0') as their value. */
static uint64_t lane_eight(uint64_t x)
{
	x = (x * 10 + (x >> 8)) & 0x00ff00ff00ff00ffull;
	x = (x * 100 + (x >> 16)) & 0x0000ffff0000ffffull;
	return (x * 10000 + (x >> 32)) & 0xffffffffull;
}

/*
 * The @n digits at *@p appended to *@w, eight at a time (as jfast's
 * eight_digits). A last run shorter than eight is read with the bytes after it
 * (@p is in a buffer with eight readable bytes past any digit) and shifted up out
 * of the word: what a borrow from them reaches is shifted out too.
 */
static void lane_dec_run(const unsigned char **p, size_t n, uint64_t *w)
{
	static const uint64_t p10[] = { 1, 10, 100, 1000, 10000, 100000, 1000000, 10000000 };
	const unsigned char *s = *p;
	uint64_t v = *w, x;

	for (; n >= 8; n -= 8, s += 8) {
		memcpy(&x, s, 8);
		v = v * 100000000u + lane_eight(le64toh(x) - 0x3030303030303030ull);
	}
	if (n > 0) {
		memcpy(&x, s, 8);
		x = (le64toh(x) - 0x3030303030303030ull) << (8 * (8 - n));
		v = v * p10[n] + lane_eight(x);
		s += n;
	}
	*w = v;
	*p = s;
}

/*
 * rp_jfast_dec() of the number @s[0..@n) the lane checked (-?D+(.D+)?, maybe an
 * exponent after): the same answer when true, the digits read once, eight at a
 * time. false: not the plain form or more than 19 digits; then step_end() asks
 * rp_jfast_dec() as before.
 */
static bool lane_dec(const unsigned char *s, size_t n, struct rp_jfast_dec *d)
{
	const unsigned char *p = s, *e = s + n, *r;
	int id, fd = 0;

	d->w = 0;
	d->neg = *p == '-';
	p += d->neg;
	r = lane_digits(p, e);
	id = (int)(r - p);
	d->point = r < e && *r == '.';
	if (d->point)
		fd = (int)(lane_digits(r + 1, e) - (r + 1));
	if ((d->point ? r + 1 + fd : r) != e || id + fd > 19)
		return false;
	lane_dec_run(&p, (size_t)id, &d->w);
	if (d->point) {
		p++;
		lane_dec_run(&p, (size_t)fd, &d->w);
	}
	d->digits = id + fd;
	d->p = -fd;
	return d->digits > 0 && (!d->point || fd > 0);
}

/* The step @L read: what the callbacks would have done with it, step_end()'s
 * answer (0: cancel). */
static int lane_commit(struct imp *m, const struct lane *L)
{
	step_begin(m);
	for (unsigned e = 0; e < L->n_ev; e++) {
		const struct lane_ev *v = &L->ev[e];
		m->fkey = (enum fkey)v->fkey;
		if (v->kind == V_NUM && v->fkey == F_TS) { /* cb_number's copy */
			memcpy(m->num, v->s, v->n);
			m->num[v->n] = '\0';
			m->num_len = v->n;
			/* from the copy: eight bytes readable past every digit */
			m->ts_plain = lane_dec((const unsigned char *)m->num, v->n, &m->ts_dec);
		}
		field(m, (enum kind)v->kind, v->s, v->n);
	}
	if (L->step_key >= 0)
		m->step_key = L->step_key;
	if (L->fkey >= 0)
		m->fkey = (enum fkey)L->fkey;
	m->lane_n++;
	return step_end(m);
}

static int nop_cb(void *ctx)
{
	(void)ctx;
	return 1;
}

static int nop_mute(void *ctx)
{
	(void)ctx;
	return 0;
}

static const yajl_callbacks nop_callbacks = {
	.yajl_start_map = nop_cb,
	.yajl_end_map = nop_cb,
};

/* Brings jfast to the state after @text ("{}": after a value; "{},": a value next
 * in the array), with no callback: its containers, its state, what a hand-over
 * primes yajl with, as if it had read them. */
static void lane_state(struct imp *m, const char *text)
{
	size_t used;

	m->jf.cb = &nop_callbacks;
	m->jf.mute = nop_mute;
	rp_jfast_run(&m->jf, (const unsigned char *)text, strlen(text), false, &used);
	m->jf.cb = &callbacks;
	m->jf.mute = nat_mute;
}

/* jfast starts the step itself (its start_map callback made), as it would have. */
static enum rp_jfast_rc lane_give_back(struct imp *m)
{
	size_t used;

	return rp_jfast_run(&m->jf, (const unsigned char *)"{", 1, false, &used);
}

/*
 * The steps from @b[*@at] (a step's '{', jfast before it) on, each with the next
 * behind a ',': *@at past what was read, jfast in the state there. jfast's state
 * only matters where it reads on, so it is set once: "{}" (after a value) behind
 * the last step read, "{}," (a value next) before a step given back.
 * @return RP_JFAST_MORE to go on; CANCEL (a step's callbacks cancelled at *@at).
 */
static enum rp_jfast_rc lane_steps(struct imp *m, const unsigned char *b, size_t n, size_t *at)
{
	const unsigned char *p = b + *at, *e = b + n, *end, *k;
	struct lane *L = &m->lane;
	bool done = false;

	while ((end = lane_step(p, e, L)) != NULL) {
		p = end;
		done = true;
		if (!lane_commit(m, L)) {
			lane_state(m, "{}");
			*at = (size_t)(p - b);
			return RP_JFAST_CANCEL;
		}
		k = p;
		if (!lane_sp(&k, e) || *k != ',')
			goto after;
		k++;
		if (!lane_sp(&k, e) || *k != '{')
			goto after;
		p = k;
	}
	if (done) /* *p is a step behind a ',' */
		lane_state(m, "{},");
	*at = (size_t)(p - b) + 1;
	return lane_give_back(m);
after:
	lane_state(m, "{}");
	*at = (size_t)(p - b);
	return RP_JFAST_MORE;
}

/* A step's start, when the fast path reads: the lane's (see above). */
static int cb_start_map_lane(void *ctx)
{
	struct imp *m = ctx;

	if (m->depth == 3 && m->in_steps && !m->in_step && !m->in_payload && !m->in_anc &&
	    m->jf.mute_depth == 0) {
		m->lane_hit = true;
		return 0;
	}
	return cb_start(ctx, V_MAP);
}

static const yajl_callbacks lane_callbacks = {
	.yajl_null = cb_null,
	.yajl_boolean = cb_boolean,
	.yajl_number = cb_number,
	.yajl_string = cb_string,
	.yajl_start_map = cb_start_map_lane,
	.yajl_map_key = cb_map_key,
	.yajl_end_map = cb_end_map,
	.yajl_start_array = cb_start_array,
	.yajl_end_array = cb_end_array,
};

/* rp_jfast_run() over @b[0..@n) with the steps read by the lane. */
static enum rp_jfast_rc lane_run(struct imp *m, const unsigned char *b, size_t n, bool last,
				 size_t *used)
{
	size_t off = 0, u;
	enum rp_jfast_rc rc;

	if (rp_nat_lane_off)
		return rp_jfast_run(&m->jf, b, n, last, used);
	for (;;) {
		m->jf.cb = &lane_callbacks;
		rc = rp_jfast_run(&m->jf, b + off, n - off, last, &u);
		m->jf.cb = &callbacks;
		off += u;
		if (rc != RP_JFAST_CANCEL || !m->lane_hit)
			break;
		m->lane_hit = false;
		off--; /* the step's '{' */
		if ((rc = lane_steps(m, b, n, &off)) != RP_JFAST_MORE)
			break;
	}
	*used = off;
	return rc;
}

/*
 * yajl reads on from the last token the fast path completed (text offset @at):
 * primed into the same state, then given what is left of the window chunk by
 * chunk, then @n bytes at @b (a chunk the window had no room for), then the end.
 */
static void split_end(struct imp *m);

static int hand_over(struct imp *m, uint64_t at, const unsigned char *b, size_t n, bool last)
{
	const unsigned char *p;
	size_t k;
	int err;

	split_end(m); /* yajl gives no offsets to confirm the split with */
	m->fast = false;
	m->off = at;
	m->sc = (struct scan){ .run = m->jf.numrun };
	if (!rp_jfast_prime_yajl(&m->jf, m->h))
		return fail_at(m, -ENOMEM, at, "out of memory");
	while ((k = rp_jfast_win_next(&m->win, &p)) > 0)
		if ((err = slow_parse(m, p, k, false)) != 0)
			return err;
	if (n > 0 && (err = slow_parse(m, b, n, false)) != 0)
		return err;
	return last ? slow_parse(m, NULL, 0, true) : 0;
}

/* One fast-path run over @n bytes at text offset @at; *@used: how many it read. */
static int fast_run(struct imp *m, const unsigned char *b, size_t n, uint64_t at, bool last,
		    size_t *used, bool *bail)
{
	enum rp_jfast_rc rc;

	m->run_ptr = b;
	m->run_off = at;
	rc = lane_run(m, b, n, last, used);
	*bail = rc == RP_JFAST_BAIL;
	if (rc == RP_JFAST_CANCEL && m->split_done)
		return SPLIT_DONE;
	if (rc == RP_JFAST_CANCEL)
		return fail_at(m, m->rc, at + *used, m->what);
	if (rc == RP_JFAST_NOMEM)
		return fail_at(m, -ENOMEM, at + *used, "out of memory");
	return 0;
}

static enum rp_jfast_rc nat_run(void *ctx, const unsigned char *b, size_t n, uint64_t at, bool last,
				size_t *used)
{
	struct imp *m = ctx;

	m->run_ptr = b;
	m->run_off = at;
	return lane_run(m, b, n, last, used);
}

/* The next chunk of text (a file's), through the window; NULL, last: the end. */
static int parse(struct imp *m, const unsigned char *b, size_t n, bool last)
{
	struct rp_jfast_stop s;
	enum rp_jfast_rc rc;

	if (!m->fast)
		return slow_parse(m, b, n, last);
	m->text += n;
	if (n == 0 && !last)
		return 0;
	/* Each chunk is read as it comes, as yajl read it: what the callbacks saw
	 * when a chunk ends (or an error stops the read) is the same. */
	rc = rp_jfast_feed(&m->win, nat_run, m, b, n, last, &s);
	if (rc == RP_JFAST_CANCEL && m->split_done)
		return SPLIT_DONE;
	if (rc == RP_JFAST_CANCEL)
		return fail_at(m, m->rc, s.at, m->what);
	if (rc == RP_JFAST_NOMEM)
		return fail_at(m, -ENOMEM, s.at, "out of memory");
	if (rc == RP_JFAST_BAIL)
		return hand_over(m, s.at, s.rest, s.rest_n, last);
	if (last)
		m->off = m->text;
	return 0;
}

/* A whole buffer: the fast path over it in place, yajl from where it stopped. */
static int parse_buffer(struct imp *m, const unsigned char *b, size_t n)
{
	size_t used;
	bool bail;
	int err = fast_run(m, b, n, 0, true, &used, &bail);

	m->fast = false;
	if (err || !bail) {
		m->off = n;
		return err;
	}
	m->off = used;
	m->sc = (struct scan){ .run = m->jf.numrun };
	if (!rp_jfast_prime_yajl(&m->jf, m->h))
		return fail_at(m, -ENOMEM, used, "out of memory");
	if (used < n && (err = slow_parse(m, b + used, n - used, false)) != 0)
		return err;
	return slow_parse(m, NULL, 0, true);
}

static int cmp_ev(const void *x, const void *y)
{
	const struct gen_ev *a = x, *b = y;

	if (a->ts != b->ts)
		return a->ts < b->ts ? -1 : 1;
	if (a->track != b->track)
		return a->track < b->track ? -1 : 1;
	return (a->seq_kind >> 1 > b->seq_kind >> 1) - (a->seq_kind >> 1 < b->seq_kind >> 1);
}

#define ev_before(x, y) (cmp_ev((x), (y)) < 0)
RP_SORT_DEFINE(sort_evs, struct gen_ev, ev_before)

static void feed_engine(struct imp *m)
{
	if (m->n_evs > 1 && !sort_evs(m->evs, m->n_evs))
		qsort(m->evs, m->n_evs, sizeof(*m->evs), cmp_ev);
	for (size_t i = 0; i < m->n_evs; i++) {
		const struct gen_ev *g = &m->evs[i];
		struct rp_event ev = { .ts = g->ts,
				       .name = g->name,
				       .track = g->track,
				       .arg = g->span,
				       .kind = g->seq_kind & 1 ? RP_EV_ASYNC_BEGIN
							       : RP_EV_ASYNC_END };
		rp_engine_event(m->e, m->src, 0, &ev);
	}
	rp_engine_close_source(m->e, m->src, m->t_max, RP_ANOM_OPEN_AT_END);
	rp_engine_finish_source(m->e, m->src);
}

static int start(struct imp *m, struct rp_engine *e, struct rp_aiq *aiq,
		 const struct rp_nat_caps *caps, const char *label,
		 struct rp_nat_stats *st, char *why)
{
	memset(m, 0, sizeof(*m));
	m->e = e;
	m->aiq = aiq;
	if (caps != NULL)
		m->caps = *caps;
	if (m->caps.max_events == 0)
		m->caps.max_events = 1u << 25;
	if (m->caps.max_request_steps == 0)
		m->caps.max_request_steps = 1u << 24;
	m->st = st;
	m->origin = label;
	m->why = why;
	memset(st, 0, sizeof(*st));
	why[0] = '\0';
	rp_jfast_init(&m->jf, &callbacks, m, nat_mute);
	m->fast = true;
	if (rp_strtab_init(&m->local) != 0 || rp_jfast_win_init(&m->win) != 0 ||
	    (m->h = yajl_alloc(&rp_jfast_relay, NULL, &m->jf)) == NULL) {
		rp_strtab_free(&m->local);
		rp_jfast_win_free(&m->win);
		snprintf(why, RP_WHY_MAX, "%s: out of memory", label);
		return -ENOMEM;
	}
	if (e != NULL) {
		int src = rp_engine_add_source(e, label, 0, RP_SRC_FILE);
		if (src < 0) {
			yajl_free(m->h);
			rp_strtab_free(&m->local);
			rp_jfast_win_free(&m->win);
			snprintf(why, RP_WHY_MAX, "%s: too many sources", label);
			return src;
		}
		m->src = (uint32_t)src;
		strcpy(e->clock, "trace");
	}
	return 0;
}

static int finish(struct imp *m, int err, bool ended)
{
	split_end(m);
	if (err == 0 && !ended)
		err = parse(m, NULL, 0, true);
	if (err == 0 && !m->top_seen)
		err = fail_at(m, -EINVAL, m->off, "empty input");
	if (err == 0 && m->e != NULL)
		feed_engine(m);
	__atomic_fetch_add(&rp_nat_lane_steps, m->lane_n, __ATOMIC_RELAXED);
	yajl_free(m->h);
	rp_strtab_free(&m->local);
	rp_jfast_win_free(&m->win);
	free(m->steps);
	free(m->started);
	free(m->evs);
	return err;
}


/* ---- two readers: the second half of a plain file on another core ----
 *
 * For the toolkit analysis alone (no engine) on a plain file, a second reader
 * starts at a guessed start of a top-level element (a request) near the middle
 * and parses from there to the end on its own thread, in the state the first
 * reader would be in there (inside the top-level array, a value expected, depth
 * 1, no request open), recording each request's sorted steps with ids of its own
 * string tables. The first reader reads from the start as always; the guess is
 * confirmed only if the first reader itself, on its fast path, starts a depth-1
 * object at exactly that byte. Then, if the second reader read to the end on the
 * fast path without a hand-over, an error or a cancelled callback, its strings
 * are interned in the analysis in their first-seen order (so every id is what the
 * one reader would have given) and its requests handed on in file order, and the
 * first reader stops there: the callbacks made are those the one reader would have
 * made, so the analysis and the counts are the same. In every other case (a wrong
 * guess, the first reader passing the byte, handing over to yajl, failing first;
 * the second reader bailing, failing, or recording more steps than its bound) the
 * second reader's work is dropped and the first reads on alone, as before.
 */

size_t rp_nat_split_min = 64u << 20;
uint64_t rp_nat_split_at;
unsigned rp_nat_split_used;

enum { SPLIT_RUNNING, SPLIT_OFF };

struct split {
	uint64_t at;  /* the guessed element start */
	int fd, state;
	atomic_bool abort;
	pthread_t th;
	bool ok;      /* the second reader read to the end, on the fast path */
	uint64_t end; /* its bytes read to */
	struct rec rec;
	struct rp_nat_stats st;
	char why[RP_WHY_MAX];
	struct imp b;
};

static enum rp_jfast_rc split_run(void *ctx, const unsigned char *b, size_t n, uint64_t at,
				  bool last, size_t *used)
{
	struct imp *m = ctx;

	(void)at;
	return lane_run(m, b, n, last, used);
}

/* The second reader's text: the fast path only, false when it would hand over. */
static bool split_parse(struct imp *m, const unsigned char *b, size_t n, bool last)
{
	struct rp_jfast_stop s;
	enum rp_jfast_rc rc;

	if (n == 0 && !last)
		return true;
	rc = rp_jfast_feed(&m->win, split_run, m, b, n, last, &s);
	return last ? rc == RP_JFAST_DONE : rc == RP_JFAST_MORE;
}

static void *split_reader(void *arg)
{
	struct split *sp = arg;
	unsigned char *buf = malloc(RP_RA_BLOCK);
	uint64_t at = sp->at;
	ssize_t r;

	while (buf != NULL && !atomic_load_explicit(&sp->abort, memory_order_relaxed)) {
		r = pread(sp->fd, buf, RP_RA_BLOCK, (off_t)at);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 || (r > 0 && !split_parse(&sp->b, buf, (size_t)r, false)))
			break;
		if (r == 0) {
			sp->ok = split_parse(&sp->b, NULL, 0, true) && sp->b.rc == 0;
			break;
		}
		at += (uint64_t)r;
	}
	sp->end = at;
	free(buf);
	return NULL;
}

/* A byte near @size * 0.52 (the first reader also replays the second's requests)
 * that may start a request: the '{' before the next
 * "intermediate_steps" key, itself after a ',' (0: none found). */
static uint64_t split_guess(int fd, uint64_t size)
{
	static const char key[] = "\"intermediate_steps\"";
	size_t len = 1u << 20;
	uint64_t from = size / 100 * 52, at = 0;
	char *b = malloc(len), *k;
	ssize_t n;

	if (b == NULL)
		return 0;
	n = pread(fd, b, len, (off_t)from);
	for (k = n > 0 ? memmem(b, (size_t)n, key, sizeof(key) - 1) : NULL; k != NULL && at == 0;
	     k = memmem(k + 1, (size_t)(b + n - k - 1), key, sizeof(key) - 1)) {
		char *q = k, *c;
		if (k == b || k[-1] == '\\')
			continue;
		while (q > b && *q != '{')
			q--;
		if (*q != '{' || q == b)
			continue;
		c = q - 1;
		while (c > b && (*c == ' ' || *c == '\n' || *c == '\r' || *c == '\t'))
			c--;
		if (c > b && *c == ',')
			at = from + (uint64_t)(q - b);
	}
	free(b);
	return at;
}

static void split_free(struct split *sp)
{
	rp_strtab_free(&sp->rec.uuids);
	rp_strtab_free(&sp->rec.names);
	free(sp->rec.steps);
	free(sp->rec.reqs);
	free(sp);
}

static int start(struct imp *m, struct rp_engine *e, struct rp_aiq *aiq,
		 const struct rp_nat_caps *caps, const char *label,
		 struct rp_nat_stats *st, char *why);
static int finish(struct imp *m, int err, bool ended);

/* Starts the second reader if the file is big enough and plain, and a guess found. */
static void split_start(struct imp *m, int fd, uint64_t size)
{
	unsigned char magic[2];
	struct split *sp;
	uint64_t at;

	if (size < rp_nat_split_min || size < 16 || rp_jfast_off || pread(fd, magic, 2, 0) != 2 ||
	    (magic[0] == 0x1f && magic[1] == 0x8b) ||
	    (at = rp_nat_split_at ? rp_nat_split_at : split_guess(fd, size)) == 0 || at >= size)
		return;
	sp = calloc(1, sizeof(*sp));
	if (sp == NULL)
		return;
	if (rp_strtab_init(&sp->rec.uuids) != 0 || rp_strtab_init(&sp->rec.names) != 0 ||
	    start(&sp->b, NULL, NULL, &m->caps, m->origin, &sp->st, sp->why) != 0) {
		split_free(sp);
		return;
	}
	sp->at = at;
	sp->fd = fd;
	/* Its records stay within what the analysis itself may keep. */
	sp->rec.max_steps = 2 * (size_t)m->aiq->max_nodes + 1024;
	sp->b.rec = &sp->rec;
	sp->b.depth = 1;
	sp->b.top_seen = true;
	rp_jfast_enter_array(&sp->b.jf);
	if (pthread_create(&sp->th, NULL, split_reader, sp) != 0) {
		finish(&sp->b, -1, true);
		split_free(sp);
		return;
	}
	m->sp = sp;
}

/* The split is off (or done): the second reader stopped, joined and freed. */
static void split_end(struct imp *m)
{
	struct split *sp = m->sp;

	if (sp == NULL)
		return;
	atomic_store_explicit(&sp->abort, true, memory_order_relaxed);
	pthread_join(sp->th, NULL);
	finish(&sp->b, -1, true);
	split_free(sp);
	m->sp = NULL;
}

/* The second reader's requests into the analysis, as the first would have fed them. */
static int split_replay(struct imp *m, struct split *sp)
{
	struct rec *r = &sp->rec;
	uint32_t *mu = malloc(((size_t)r->uuids.n + 1) * sizeof(*mu));
	uint32_t *mn = malloc(((size_t)r->names.n + 1) * sizeof(*mn));
	struct rp_nat_stats *st = m->st;
	size_t at = 0;
	int err = mu && mn ? 0 : -ENOMEM;

	for (uint32_t i = 0; !err && i < r->uuids.n; i++)
		if ((mu[i] = rp_aiq_uuid(m->aiq, rp_strtab_str(&r->uuids, i),
					 (uint32_t)r->uuids.off[i], true)) == NONE)
			err = -ENOMEM;
	for (uint32_t i = 0; !err && i < r->names.n; i++)
		if ((mn[i] = rp_aiq_name(m->aiq, rp_strtab_str(&r->names, i),
					 (uint32_t)r->names.off[i])) == NONE)
			err = -ENOMEM;
	for (size_t q = 0; !err && q < r->n_reqs; q++) {
		/* no step recorded at all (requests without steps): no array either */
		struct rp_aiq_step *s = r->steps != NULL ? r->steps + at : NULL;
		for (uint32_t k = 0; k < r->reqs[q]; k++) {
			s[k].uuid = mu[s[k].uuid];
			s[k].name = s[k].start ? mn[s[k].name] : 0;
		}
		err = rp_aiq_request(m->aiq, s, r->reqs[q]);
		at += r->reqs[q];
	}
	free(mu);
	free(mn);
	st->requests += sp->st.requests;
	st->steps += sp->st.steps;
	st->calls += sp->st.calls;
	st->bad += sp->st.bad;
	st->cut += sp->st.cut;
	st->capped += sp->st.capped;
	st->bytes = sp->end;
	m->request += (uint32_t)sp->st.requests;
	return err;
}

/*
 * At each depth-1 object the first reader starts (before it is looked at): true if
 * it is the guessed one and the second reader read the rest; then its requests are
 * in the analysis and the first reader stops.
 */
static bool split_at(struct imp *m)
{
	struct split *sp = m->sp;
	uint64_t at;

	if (!m->fast)
		return false;
	at = m->run_off + (uint64_t)(m->jf.tok - m->run_ptr);
	if (at < sp->at)
		return false;
	if (at > sp->at) {
		split_end(m); /* passed it: not an element start */
		return false;
	}
	pthread_join(sp->th, NULL);
	if (!sp->ok) {
		finish(&sp->b, -1, true);
		split_free(sp);
		m->sp = NULL;
		return false;
	}
	if ((m->rc = split_replay(m, sp)) != 0) {
		snprintf(m->what, sizeof(m->what), "out of memory");
	} else {
		m->split_done = true;
		rp_nat_split_used++;
	}
	finish(&sp->b, -1, true);
	split_free(sp);
	m->sp = NULL;
	return true;
}

int rp_import_nat_buf(struct rp_engine *e, struct rp_aiq *aiq, const struct rp_nat_caps *caps,
		      const void *buf, size_t len,
		      const char *label, struct rp_nat_stats *st, char why[RP_WHY_MAX])
{
	struct rp_nat_stats local;
	struct imp *m = malloc(sizeof(*m));
	int err;

	if (m == NULL)
		return -ENOMEM;
	err = start(m, e, aiq, caps, label, st ? st : &local, why);
	if (err == 0) {
		m->st->bytes = len;
		err = finish(m, len ? parse_buffer(m, buf, len) : 0, len > 0);
	}
	free(m);
	return err;
}

/* The file's chunks, read ahead on a second thread (readahead.h), to the parser. */
static int read_chunks(struct imp *m, struct rp_readahead *ra, rp_chrome_progress_fn progress,
		       void *ctx, uint64_t total)
{
	const struct rp_ra_chunk *c;
	uint64_t mark = MIB;
	int n, err;

	do {
		c = rp_ra_next(ra);
		n = c->n;
		if (n < 0) {
			err = c->err;
			return fail_at(m, err == Z_ERRNO ? -c->saved_errno : -EINVAL,
				       (uint64_t)c->offset,
				       err == Z_ERRNO ? strerror(c->saved_errno) : c->msg);
		}
		if (n > 0 && (err = parse(m, c->data, (size_t)n, false)) != 0)
			return err;
		m->st->bytes = (uint64_t)c->offset;
		if (progress != NULL && m->st->bytes >= mark) {
			progress(ctx, m->st->bytes, total);
			mark = m->st->bytes - m->st->bytes % MIB + MIB;
		}
	} while (n > 0);
	err = c->err;
	if (err != Z_OK && err != Z_BUF_ERROR)
		return fail_at(m, -EINVAL, m->st->bytes, "corrupt gzip stream");
	if (err == Z_BUF_ERROR)
		return fail_at(m, -EINVAL, m->st->bytes, "truncated gzip stream");
	return 0;
}

static int read_gz(struct imp *m, gzFile gz, int fd, rp_chrome_progress_fn progress, void *ctx,
		   uint64_t total)
{
	struct rp_readahead ra;
	int err;

	if (rp_ra_start(&ra, gz, fd, CHUNK) != 0)
		return fail_at(m, -ENOMEM, 0, "out of memory");
	err = read_chunks(m, &ra, progress, ctx, total);
	rp_ra_stop(&ra);
	return err;
}

int rp_import_nat(struct rp_engine *e, struct rp_aiq *aiq, const struct rp_nat_caps *caps,
		  const char *path,
		  rp_chrome_progress_fn progress, void *ctx, struct rp_nat_stats *st,
		  char why[RP_WHY_MAX])
{
	struct rp_nat_stats local;
	struct imp *m = malloc(sizeof(*m));
	struct stat sb;
	gzFile gz = NULL;
	int fd, err;

	if (m == NULL)
		return -ENOMEM;
	err = start(m, e, aiq, caps, path, st ? st : &local, why);
	if (err) {
		free(m);
		return err;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	err = fd < 0 || fstat(fd, &sb) != 0 ? -errno : S_ISDIR(sb.st_mode) ? -EISDIR : 0;
	if (err == 0 && (gz = gzdopen(fd, "rb")) == NULL)
		err = -ENOMEM;
	if (err) {
		snprintf(why, RP_WHY_MAX, "%s: %s", path, strerror(-err));
		if (fd >= 0)
			close(fd);
		finish(m, err, false);
		free(m);
		return err;
	}
	gzbuffer(gz, CHUNK);
	if (e == NULL && aiq != NULL && S_ISREG(sb.st_mode))
		split_start(m, fd, (uint64_t)sb.st_size);
	err = read_gz(m, gz, fd, progress, ctx, S_ISREG(sb.st_mode) ? (uint64_t)sb.st_size : 0);
	split_end(m); /* the second reader reads fd: stopped before it is closed */
	gzclose_r(gz);
	err = finish(m, err == SPLIT_DONE ? 0 : err, err == SPLIT_DONE);
	free(m);
	return err;
}

int rp_nat_detect(const char *path)
{
	static const char key[] = "\"intermediate_steps\"";
	char *buf = malloc(CHUNK + 1);
	gzFile gz = gzopen(path, "rb");
	int n, found;

	if (buf == NULL || gz == NULL) {
		free(buf);
		if (gz != NULL)
			gzclose_r(gz);
		return buf == NULL ? -ENOMEM : -ENOENT;
	}
	n = gzread(gz, buf, CHUNK);
	gzclose_r(gz);
	found = n > 0 && memmem(buf, (size_t)n, key, sizeof(key) - 1) != NULL;
	free(buf);
	return n < 0 ? -EIO : found;
}
