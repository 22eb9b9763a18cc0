// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the snapshot reader (engine/formats/snapshot.c): snapshot files come
 * from anywhere, so any input must be refused or decoded without a read outside it,
 * an allocation beyond O(input) or a leak, and every failure must leave the report
 * freeable. An accepted input is also written back and read again: what the
 * decoder accepts, the encoder must write, and that must decode and re-encode to
 * the same bytes (the two directions agree on every field). And the decoder's own
 * pre-scan must agree with msgpack-c on what is well-formed: the scan is what keeps
 * msgpack-c's allocations O(input), so a disagreement is a bug even when refused.
 * An accepted report is also merged with itself (engine/formats/merge.c): the merge trusts
 * what the decoder validated (indices, sketches), so it must not crash on it; it may
 * refuse (a count that would overflow) with a reason, and what it makes must encode
 * and decode again; and merged after itself as another host's, its clock aligned
 * (rp_report_align) through anchors a file may set to anything.
 * Seeds: tests/fuzz/seeds/snapshot/ (run.sh copies them into the corpus); v1_2.msgpack
 * holds every 1.2 section.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "merge.h"
#include "snapshot.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The whole message, not a part: the path before it can quote input keys (up to 32
 * bytes, then "..."), and those cannot produce this prefix at the top level. */
static const char disagree[] = "snapshot: msgpack-c refused the input (";

static void round_trip(const struct rp_report *r)
{
	struct rp_membuf a = { 0 }, b = { 0 };
	struct rp_report again;
	char why[RP_WHY_MAX];

	if (rp_snapshot_encode(r, rp_membuf_sink, &a) != 0)
		abort();
	if (rp_snapshot_decode(a.data, a.len, &again, why) != 0)
		abort();
	if (rp_snapshot_encode(&again, rp_membuf_sink, &b) != 0)
		abort();
	if (a.len != b.len || memcmp(a.data, b.data, a.len) != 0)
		abort();
	rp_report_free(&again);
	rp_membuf_free(&a);
	rp_membuf_free(&b);
}

/* @r twice into an empty report: the second pass matches every row of the first. */
static void merge_twice(const struct rp_report *r)
{
	struct rp_report m = { 0 }, again;
	struct rp_membuf a = { 0 };
	char why[RP_WHY_MAX];

	if (rp_report_merge(&m, r, why, sizeof(why)) != 0 ||
	    rp_report_merge(&m, r, why, sizeof(why)) != 0) {
		if (why[0] == '\0')
			abort(); /* a refusal says why */
		rp_report_free(&m);
		return;
	}
	if (rp_snapshot_encode(&m, rp_membuf_sink, &a) != 0 ||
	    rp_snapshot_decode(a.data, a.len, &again, why) != 0)
		abort();
	rp_report_free(&again);
	rp_report_free(&m);
	rp_membuf_free(&a);
}

/* @r merged after itself as another host's (1.4): rp_report_align() on the decoded
 * anchors and shifts (any values a file may hold), then the merge. The first copy's
 * anchored source gets another boot id and an anchor moved by @salt, so the shift
 * is taken whenever @r has an anchor. */
static void merge_aligned(struct rp_report *r, uint64_t salt)
{
	struct rp_report m = { 0 }, again;
	struct rp_membuf a = { 0 };
	char why[RP_WHY_MAX];
	struct rp_align al;

	if (rp_report_merge(&m, r, why, sizeof(why)) != 0) {
		rp_report_free(&m);
		return;
	}
	for (uint32_t i = 0; i < m.n_sources; i++)
		if (m.sources[i].anchor_realtime_ns != 0) {
			free(m.sources[i].boot_id);
			m.sources[i].boot_id = strdup("another boot");
			m.sources[i].anchor_realtime_ns += salt;
			break;
		}
	rp_report_align(&m, r, &al);
	if (al.note[0] == '\0')
		abort(); /* a later input: aligned or not, it says which */
	if (rp_report_merge(&m, r, why, sizeof(why)) == 0) {
		if (rp_snapshot_encode(&m, rp_membuf_sink, &a) != 0 ||
		    rp_snapshot_decode(a.data, a.len, &again, why) != 0)
			abort();
		rp_report_free(&again);
		rp_membuf_free(&a);
	} else if (why[0] == '\0') {
		abort();
	}
	rp_report_free(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rp_report r;
	char why[RP_WHY_MAX];

	if (rp_snapshot_decode(data, size, &r, why) == 0) {
		round_trip(&r);
		merge_twice(&r);
		merge_aligned(&r, size > 8 ? (uint64_t)data[size - 1] << 40 | data[size - 2] : 7);
	}
	else if (why[0] == '\0' || strncmp(why, disagree, strlen(disagree)) == 0)
		abort(); /* every refusal says why; the scan and msgpack-c agree */
	rp_report_free(&r);
	return 0;
}
