/* SPDX-License-Identifier: MIT */
/*
 * A protobuf *writer*, just what a write-only message needs (tools/render/render_pprof.c
 * writes pprof's profile.proto with it, render_prom_pb.c Prometheus's metrics.proto):
 * varints, int64 (proto's int64 is the two's complement as a 10-byte varint), zigzag
 * sint32/sint64, doubles (fixed64), length-delimited fields (strings, bytes, nested
 * messages) and packed repeated varints. No reader, no schema, no reflection:
 * the caller writes fields in the order it likes with their numbers from the .proto.
 *
 * A nested message is written into a buffer of its own first, then copied in as a
 * length-delimited field, so no length has to be guessed or patched. Memory errors are
 * sticky: after one, every call does nothing and rp_pb_error() says -ENOMEM, so a
 * writer checks once at the end.
 */
#ifndef RP_TOOLS_PROTOBUF_H
#define RP_TOOLS_PROTOBUF_H

#include <stddef.h>
#include <stdint.h>

struct rp_pb {
	uint8_t *buf;
	size_t len, cap;
	int err; /* 0, or -ENOMEM once an allocation failed */
};

/* Wire types (the low 3 bits of a field's key). */
enum { RP_PB_VARINT = 0, RP_PB_FIXED64 = 1, RP_PB_LEN = 2 };

/* An empty buffer (no allocation yet); rp_pb_free() releases it. */
static inline void rp_pb_init(struct rp_pb *b)
{
	*b = (struct rp_pb){ 0 };
}

void rp_pb_free(struct rp_pb *b);

/* Empties @b for reuse, keeping its memory (and its error). */
static inline void rp_pb_reset(struct rp_pb *b)
{
	b->len = 0;
}

static inline int rp_pb_error(const struct rp_pb *b)
{
	return b->err;
}

/* A bare varint (no key). */
void rp_pb_varint(struct rp_pb *b, uint64_t v);

/* Field @field as a varint: uint64, bool, enum, or int64 (pass (uint64_t)v: a negative
 * one takes 10 bytes, as protobuf writes it). Zero is written too: callers that want
 * proto3's "absent means 0" leave the call out. */
void rp_pb_uint(struct rp_pb *b, uint32_t field, uint64_t v);

/* sint32/sint64's zigzag mapping: 0, -1, 1, -2 .. -> 0, 1, 2, 3 .. (small magnitudes,
 * small varints). */
static inline uint64_t rp_pb_zigzag(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

/* Field @field as a zigzag varint (sint32, sint64). */
void rp_pb_sint(struct rp_pb *b, uint32_t field, int64_t v);

/* Field @field as a double: 8 bytes, little-endian IEEE 754 (wire type fixed64). */
void rp_pb_double(struct rp_pb *b, uint32_t field, double v);

/* Field @field, length-delimited: @n bytes at @data (a string, bytes, or an encoded
 * message). */
void rp_pb_bytes(struct rp_pb *b, uint32_t field, const void *data, size_t n);

/* Field @field as a string (NUL-terminated @s; NULL reads as ""). */
void rp_pb_string(struct rp_pb *b, uint32_t field, const char *s);

/* Field @field as a nested message: the bytes written into @msg. */
void rp_pb_message(struct rp_pb *b, uint32_t field, const struct rp_pb *msg);

/* Field @field as packed repeated varints (uint64, or int64 cast): one length-delimited
 * field; nothing when @n is 0 (an empty packed field and an absent one read alike). */
void rp_pb_packed(struct rp_pb *b, uint32_t field, const uint64_t *v, size_t n);

#endif
