#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs fuzz_segment for SECONDS from a seed corpus that make_seed writes; exits
# non-zero when the fuzzer crashed (the input is kept in BUILD_DIR/tests/fuzz/artifacts).
#
# usage: tests/fuzz/run.sh BUILD_DIR SECONDS
set -euo pipefail

if [ $# -ne 2 ]; then
	echo "usage: $0 BUILD_DIR SECONDS" >&2
	exit 2
fi
dir="$1/tests/fuzz"
secs="$2"
corpus="$dir/corpus"
artifacts="$dir/artifacts"

mkdir -p "$corpus" "$artifacts"
"$dir/make_seed" "$corpus/seed"
seed_size=$(stat -c %s "$corpus/seed")
before=$(find "$artifacts" -type f | wc -l)

# Inputs may grow a little past the seed; only a length equal to segment_size
# gets past the validator, so much longer inputs are wasted work.
rc=0
"$dir/fuzz_segment" -max_total_time="$secs" -max_len=$((seed_size + 512)) \
	-artifact_prefix="$artifacts/" -print_final_stats=1 "$corpus" || rc=$?

after=$(find "$artifacts" -type f | wc -l)
if [ "$rc" -ne 0 ] || [ "$after" -ne "$before" ]; then
	echo "fuzz_segment failed (exit $rc); new artifacts:" >&2
	find "$artifacts" -type f -newer "$corpus/seed" >&2
	[ "$rc" -ne 0 ] || rc=1
	exit "$rc"
fi
echo "fuzz_segment: no crash in ${secs}s"
