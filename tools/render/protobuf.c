// SPDX-License-Identifier: MIT
/*
 * The protobuf writer (protobuf.h). Encoding rules, from the protobuf encoding
 * documentation: a field is a key varint (field number << 3 | wire type) and a payload;
 * varints are little-endian groups of 7 bits, the high bit set on every byte but the
 * last; sint fields zigzag first; a double is fixed64, its 8 bytes little-endian;
 * length-delimited payloads are a varint length and the bytes; a packed repeated
 * field is one length-delimited field whose payload is the varints one after another.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "protobuf.h"

void rp_pb_free(struct rp_pb *b)
{
	free(b->buf);
	rp_pb_init(b);
}

/* Room for @n more bytes; false (and the sticky error) when there is no memory. */
static int reserve(struct rp_pb *b, size_t n)
{
	size_t cap;
	uint8_t *p;

	if (b->err)
		return 0;
	if (b->cap - b->len >= n)
		return 1;
	cap = b->cap ? b->cap : 256;
	while (cap - b->len < n) {
		if (cap > SIZE_MAX / 2) {
			b->err = -ENOMEM;
			return 0;
		}
		cap *= 2;
	}
	p = realloc(b->buf, cap);
	if (p == NULL) {
		b->err = -ENOMEM;
		return 0;
	}
	b->buf = p;
	b->cap = cap;
	return 1;
}

void rp_pb_varint(struct rp_pb *b, uint64_t v)
{
	if (!reserve(b, 10)) /* 64 bits take at most 10 groups of 7 */
		return;
	while (v >= 0x80) {
		b->buf[b->len++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	b->buf[b->len++] = (uint8_t)v;
}

static void key(struct rp_pb *b, uint32_t field, unsigned wire)
{
	rp_pb_varint(b, (uint64_t)field << 3 | wire);
}

void rp_pb_uint(struct rp_pb *b, uint32_t field, uint64_t v)
{
	key(b, field, RP_PB_VARINT);
	rp_pb_varint(b, v);
}

void rp_pb_sint(struct rp_pb *b, uint32_t field, int64_t v)
{
	rp_pb_uint(b, field, rp_pb_zigzag(v));
}

void rp_pb_double(struct rp_pb *b, uint32_t field, double v)
{
	uint64_t u;

	memcpy(&u, &v, sizeof(u)); /* the bits; C11 doubles are IEEE 754 on every target */
	key(b, field, RP_PB_FIXED64);
	if (!reserve(b, 8))
		return;
	for (int i = 0; i < 8; i++)
		b->buf[b->len++] = (uint8_t)(u >> (8 * i));
}

void rp_pb_bytes(struct rp_pb *b, uint32_t field, const void *data, size_t n)
{
	key(b, field, RP_PB_LEN);
	rp_pb_varint(b, n);
	if (n && reserve(b, n)) {
		memcpy(b->buf + b->len, data, n);
		b->len += n;
	}
}

void rp_pb_string(struct rp_pb *b, uint32_t field, const char *s)
{
	rp_pb_bytes(b, field, s ? s : "", s ? strlen(s) : 0);
}

void rp_pb_message(struct rp_pb *b, uint32_t field, const struct rp_pb *msg)
{
	if (msg->err && !b->err)
		b->err = msg->err; /* a part missing would make the whole one wrong */
	rp_pb_bytes(b, field, msg->buf, msg->len);
}

/* The bytes a varint of @v takes. */
static size_t varint_len(uint64_t v)
{
	size_t n = 1;

	for (; v >= 0x80; v >>= 7)
		n++;
	return n;
}

void rp_pb_packed(struct rp_pb *b, uint32_t field, const uint64_t *v, size_t n)
{
	size_t len = 0;

	if (n == 0)
		return;
	for (size_t i = 0; i < n; i++)
		len += varint_len(v[i]);
	key(b, field, RP_PB_LEN);
	rp_pb_varint(b, len);
	for (size_t i = 0; i < n; i++)
		rp_pb_varint(b, v[i]);
}
