#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs every fuzz target for SECONDS each from its seed corpus; exits non-zero when
# a fuzzer crashed (inputs kept in BUILD_DIR/tests/fuzz/artifacts-<target>).
#   fuzz_segment   seed: a real segment written by make_seed
#   fuzz_chrome    seeds: tests/fuzz/seeds/chrome/*
#   fuzz_chrome_fast seeds: tests/fuzz/seeds/chrome/* (whole events against jfast and yajl)
#   fuzz_snapshot  seeds: tests/fuzz/seeds/snapshot/*
#   fuzz_import    seeds: tests/fuzz/seeds/chrome/* (the importer and the engine)
#   fuzz_nat       seeds: tests/fuzz/seeds/nat/* (agent-toolkit traces: engine and aiq)
#   fuzz_nat_split seeds: tests/fuzz/seeds/nat/* (the two-reader path against one reader)
#   fuzz_nat_lane  seeds: tests/fuzz/seeds/nat_lane/* (the step lane against jfast's
#                  callbacks; three bytes of options, then the trace)
#   fuzz_otlp      seeds: tests/fuzz/seeds/otlp/* (OTLP requests, 'p' protobuf or 'j'
#                  JSON then the body: decoders, reorder buffer, engine)
#   fuzz_http      seeds: tests/fuzz/seeds/http/* (the CLI's HTTP response parser)
#   fuzz_accept    seeds: tests/fuzz/seeds/accept/* (/metrics content negotiation)
#   fuzz_http_request seeds: tests/fuzz/seeds/http_request/* (the listeners' HTTP core:
#                  pipelined request heads and bodies, whole and byte by byte)
#
# usage: tests/fuzz/run.sh BUILD_DIR SECONDS
set -euo pipefail

if [ $# -ne 2 ]; then
	echo "usage: $0 BUILD_DIR SECONDS" >&2
	exit 2
fi
dir="$1/tests/fuzz"
secs="$2"
src="$(cd "$(dirname "$0")" && pwd)"
failed=0

run_target() { # target max_len
	local name=fuzz_$1 max_len=$2 corpus="$dir/corpus-$1" artifacts="$dir/artifacts-$1"
	local rc=0 before after
	# Crashes, leaks, timeouts, OOMs; not the slow-unit-* files libFuzzer also writes
	# there (an input that took over 10 s: on a loaded machine, a matter of load).
	before=$(find "$artifacts" -type f ! -name 'slow-unit-*' 2>/dev/null | wc -l)
	touch "$dir/$name.start" # what is newer came from this run (the corpus changes in it)
	"$dir/$name" -max_total_time="$secs" -max_len="$max_len" -artifact_prefix="$artifacts/" \
		-print_final_stats=1 "$corpus" 2>"$dir/$name.log" || rc=$?
	grep -E "^(stat::number_of_executed_units|Done)" "$dir/$name.log" || true
	find "$artifacts" -type f -name 'slow-unit-*' -newer "$dir/$name.start" \
		-printf "$name: slow input (not a failure): %p\n" || true
	after=$(find "$artifacts" -type f ! -name 'slow-unit-*' | wc -l)
	if [ "$rc" -ne 0 ] || [ "$after" -ne "$before" ]; then
		echo "$name failed (exit $rc); see $dir/$name.log; new artifacts:" >&2
		find "$artifacts" -type f -newer "$dir/$name.start" >&2 || true
		tail -40 "$dir/$name.log" >&2
		failed=1
	else
		echo "$name: no crash in ${secs}s"
	fi
}

for t in segment chrome chrome_fast snapshot import nat nat_split nat_lane otlp http accept http_request; do
	mkdir -p "$dir/corpus-$t" "$dir/artifacts-$t"
	seeds=$t
	[ "$t" = import ] && seeds=chrome
	[ "$t" = chrome_fast ] && seeds=chrome
	[ "$t" = nat_split ] && seeds=nat
	if [ -d "$src/seeds/$seeds" ]; then
		cp "$src/seeds/$seeds"/* "$dir/corpus-$t/" 2>/dev/null || true
	fi
done
RINGPROF_NO_ENGINE=discard "$dir/make_seed" "$dir/corpus-segment/seed"
seed_size=$(stat -c %s "$dir/corpus-segment/seed")

# Only a length equal to segment_size gets past the validator: little growth.
run_target segment $((seed_size + 512))
run_target chrome 65536
run_target chrome_fast 65536
run_target snapshot 65536
run_target import 65536
run_target nat 65536
run_target nat_split 65536
run_target nat_lane 65536
run_target otlp 65536
run_target http 65536
run_target accept 8192
run_target http_request 16384
exit "$failed"
