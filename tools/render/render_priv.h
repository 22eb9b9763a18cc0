/* SPDX-License-Identifier: MIT */
/*
 * What the renderers share (private to tools/render/render_*.c). The shared helpers
 * live in render_common.c, which calls no other renderer, so the files form no cycle:
 * text and json call device and steps, and every one of them calls common.
 */
#ifndef RP_TOOLS_RENDER_PRIV_H
#define RP_TOOLS_RENDER_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "report.h"

/*
 * rp_render_utf8_next() - the length of the UTF-8 sequence that starts at @s
 * (render_common.c).
 * @s: a NUL-terminated string, *s != 0.
 * @valid: set to whether those bytes are one well-formed character; if not, they are
 *	one maximal ill-formed subpart, to be replaced by a single U+FFFD.
 * Return: 1 to 4; never reads past the terminating NUL (it is no continuation byte).
 */
size_t rp_render_utf8_next(const char *s, bool *valid);

/* rp_render_utf8_copy() - a well-formed UTF-8 copy of @s (NULL reads as ""), each
 * invalid byte replaced by U+FFFD; the caller frees it. NULL when out of memory. */
char *rp_render_utf8_copy(const char *s);

/*
 * rp_render_json_str() - @s as a JSON string, quotes included (render_common.c): '"' and
 * '\\' escaped, control characters as \u00XX, ill-formed UTF-8 as U+FFFD, the rest as
 * is; NULL is written as "".
 */
void rp_render_json_str(FILE *out, const char *s);

/*
 * rp_render_safe_char() - the character at @s (*s != 0) as printable text on one line,
 * into @buf (NUL-terminated): '\n', '\t', '\r' as C escapes, the other C0 controls and
 * DEL as \xNN, the C1 controls (U+0080-U+009F, which terminals may obey: U+009B is a
 * CSI) as \xc2\xNN, ill-formed UTF-8 as U+FFFD, anything else as is (render_common.c).
 * @cols: set to the columns it takes (a character counts one).
 * Return: the bytes of @s it stands for.
 */
size_t rp_render_safe_char(const char *s, char buf[16], size_t *cols);

/* rp_render_safe_str() - @s through rp_render_safe_char(), at most @room columns (a
 * character or escape that would pass them is left out, whole). NULL writes nothing.
 * Return: the columns written. */
size_t rp_render_safe_str(FILE *out, const char *s, size_t room);

/* rp_render_safe_width() - the columns rp_render_safe_str() takes for all of @s. */
size_t rp_render_safe_width(const char *s);

/* rp_render_safe_buf() - @s through rp_render_safe_char() into @dst, cut (whole
 * characters) to fit @cap > 0 bytes. Return: @dst. */
char *rp_render_safe_buf(char *dst, size_t cap, const char *s);

/*
 * rp_render_fn_order() - r->fns in display order: cum desc, self desc, then name,
 * category, file, line (render_common.c).
 * Return: a malloc'ed array of r->n_fns pointers into r->fns (the caller frees it),
 * or NULL when out of memory. An empty report gives a valid one-element array.
 */
const struct rp_report_fn **rp_render_fn_order(const struct rp_report *r);

/*
 * rp_render_wfn_order() - a window's rows in display order: cum desc, self desc, calls
 * desc, then name (byte order, "?" for an fn out of range), then position (render_common.c).
 * Return: a malloc'ed array of w->n_fns indices into w->fns (the caller frees it), or
 * NULL when out of memory. An empty window gives a valid one-element array.
 */
uint32_t *rp_render_wfn_order(const struct rp_report *r, const struct rp_report_window *w);

/*
 * rp_render_fn_at() - r->fns[@fn], or NULL when @fn is out of range: lists that
 * index fns (bottlenecks, windows, spans, CCT nodes) may come from a snapshot, and
 * a renderer shows "?" rather than trusting them.
 */
static inline const struct rp_report_fn *rp_render_fn_at(const struct rp_report *r, uint32_t fn)
{
	return fn < r->n_fns ? &r->fns[fn] : NULL;
}

/*
 * rp_render_rate() - @calls per second over @range_ns as an exact decimal with three
 * decimals, rounded half up ("12.500"), or "0" when @range_ns is 0 (render_common.c).
 * The value may exceed 2^64 (many calls over a few ns), hence the 128-bit arithmetic.
 * Return: @buf.
 */
char *rp_render_rate(char buf[48], uint64_t calls, uint64_t range_ns);
/*
 * rp_render_covered_ns() - the part of window @w its events can cover: from the later
 * of its start and the report's first event to its end (render_common.c). A window
 * longer than the run (a 5 min window over 20 s) would otherwise dilute every rate.
 */
uint64_t rp_render_covered_ns(const struct rp_report *r, const struct rp_report_window *w);

/* The "device" section (render_device.c): json appends ",\n  \"device\":{...}" inside
 * the top-level object, text prints a block; both nothing when no device work was
 * seen. */
void rp_render_device_json(const struct rp_report *r, FILE *out);
void rp_render_device_text(const struct rp_report *r, FILE *out);

#endif
