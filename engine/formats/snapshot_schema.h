// SPDX-License-Identifier: MIT
/*
 * The snapshot schema in code, shared by the encoder (snapshot_encode.c) and the
 * decoder (snapshot_decode.c): a table per record type, a field per key, in the
 * order docs/snapshot.md gives. Both directions walk the same tables, so a key
 * cannot be written under one name and read under another. Private to the three
 * snapshot files.
 */
#ifndef RP_SNAPSHOT_SCHEMA_H
#define RP_SNAPSHOT_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "snapshot.h"

#define STR_MAX	   4096u /* bytes kept of a string; longer ones are cut (docs) */
#define MEMBUF_MIN 4096u /* first allocation of a rp_membuf */

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

enum ftype {
	F_U64,	  /* unsigned integer */
	F_U32,	  /* unsigned integer < 2^32 */
	F_I32,	  /* signed integer in int32_t */
	F_I64,	  /* signed integer in int64_t 1.2 */
	F_F64,	  /* finite double, written as float64 (integers also read) 1.2 */
	F_SUM,	  /* as F_F64, but +-inf allowed: a sum that overflowed 1.2 */
	F_STR,	  /* string, cut at STR_MAX */
	F_REF,	  /* index, or nil (-1 also read) for RP_NONE; .ref says into what */
	F_ANOM,	  /* map anomaly name -> count, over uint64_t[RP_ANOM_KIND_COUNT] */
	F_REC,	  /* nested map, described by .sub, at .off */
	F_ARR,	  /* array of .sub records: pointer at .off, uint32_t count at .aux */
	F_U64S,	  /* array of u64: pointer at .off, uint32_t count at .aux 1.2 */
	F_SKETCH, /* a struct rp_report_sketch: nil when alpha == 0, else a map 1.2 */
	F_VER,	  /* [major, minor]; checked before everything else */
	F_U8,	  /* unsigned integer < 256 1.2 */
	F_STRS,	  /* array of str: char ** at .off, uint32_t count at .aux 1.2 */
};

/* What an F_REF indexes, checked once the whole report is read. */
enum ref {
	REF_NONE,
	REF_FN,
	REF_FN_OR_NIL,
	REF_SRC_OR_NIL,
	REF_SRC,	  /* a source; nil is an error 1.2 */
	REF_RTRACK,	  /* recorder.tracks 1.2 */
	REF_RNAME,	  /* recorder.names 1.2 */
	REF_PHASE_OR_NIL, /* one of device.phases_total phases (the list may be cut) 1.2 */
};

struct table;
struct where;

struct field {
	const char *key;
	uint8_t keylen;
	uint8_t type;  /* enum ftype */
	uint8_t ref;   /* enum ref, for F_REF */
	bool required; /* missing: -EINVAL (else 0, "" or empty) */
	size_t off;    /* of the value in the record */
	size_t aux;    /* of the uint32_t count, for F_ARR and F_U64S */
	const struct table *sub;
};

struct table {
	const struct field *f;
	uint32_t n;  /* at most 32: decode_record keeps a bit per field */
	size_t size; /* of one record, for F_ARR */
	/* Checks a decoded record as a whole (NULL: nothing to check). */
	int (*check)(void *base, const struct where *w, char *why);
};

/* --- errors: where a value sits ------------------------------------------------- */

/* A chain from a value up to the root, for messages; nothing is built unless a
 * message is. A link prints as ".key", "[index]" or, zeroed, nothing. */
struct where {
	const struct where *up;
	const char *key; /* not NUL-terminated; may come from the input */
	uint32_t keylen;
	uint32_t index;
	bool has_index;
};

/* The root record: struct rp_report. */
extern const struct table rp_snap_top_table;
/* The recorder's span records (the encoder packs them itself, snapshot_encode.c). */
extern const struct table *const rp_snap_rspan_table;

/* Bytes of s[0..n) to keep: at most STR_MAX, on a UTF-8 boundary. */
size_t rp_snap_cut_len(const char *s, size_t n);

/* "<what> <path>: <strerror>" into @why (snapshot_decode.c); returns @err. */
int rp_snap_sys_fail(char *why, int err, const char *what, const char *path);

/* Whole-record checks the tables name (snapshot_decode.c). */
int rp_snap_check_sketch(void *base, const struct where *w, char *why);
int rp_snap_check_step(void *base, const struct where *w, char *why);
int rp_snap_check_rtrack(void *base, const struct where *w, char *why);
int rp_snap_check_recorder(void *base, const struct where *w, char *why);
int rp_snap_check_interval(void *base, const struct where *w, char *why);
int rp_snap_check_device(void *base, const struct where *w, char *why);

#endif
