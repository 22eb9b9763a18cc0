#!/bin/sh
# SPDX-License-Identifier: MIT
#
# import_slope.sh: instructions per byte of `ringprof analyze`, counted by
# callgrind (exact and steady on a shared machine, where wall time is not), as
# the slope between two sizes of the same generated trace, so that what every
# run pays once (start-up, the report's fixed part) drops out:
#   chrome  gen_chrome N and 2N events, --format json (reader, importer, engine,
#           report);
#   nat     gen_nat N and 2N steps, --format aiq (reader, the toolkit analysis
#           and its rendering).
# Prints one line per trace kind; no pass/fail.
#
# usage: bench/import_slope.sh BUILD_DIR [CHROME_EVENTS [NAT_STEPS]]
set -eu

build=${1:?usage: import_slope.sh BUILD_DIR [CHROME_EVENTS [NAT_STEPS]]}
ce=${2:-20000}
ns=${3:-5000}
rp=$build/tools/ringprof
command -v valgrind >/dev/null || { echo "import_slope: no valgrind" >&2; exit 1; }
# say what is missing rather than print nothing (set -e would stop at the first use)
for t in ringprof gen_chrome gen_nat; do
	[ -x "$build/tools/$t" ] || {
		echo "import_slope: $build/tools/$t is missing (cmake --build $build --target $t)" >&2
		exit 1
	}
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# instructions of one run: callgrind's "I refs" total
irefs() {
	valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.out" "$@" 2>&1 >/dev/null |
		sed -n 's/.*I *refs: *//p' | tr -d ,
}

slope() { # kind format generator size
	"$build/tools/$3" "$4" >"$tmp/a.json" 2>/dev/null
	"$build/tools/$3" $(($4 * 2)) >"$tmp/b.json" 2>/dev/null
	ba=$(wc -c <"$tmp/a.json")
	bb=$(wc -c <"$tmp/b.json")
	ia=$(irefs "$rp" analyze "$tmp/a.json" --format "$2" -o /dev/null)
	ib=$(irefs "$rp" analyze "$tmp/b.json" --format "$2" -o /dev/null)
	awk -v k="$1" -v f="$2" -v ba="$ba" -v bb="$bb" -v ia="$ia" -v ib="$ib" 'BEGIN {
		printf "%-7s --format %-5s %9d B %12d instr   %9d B %12d instr   %6.2f instr/B\n",
		       k, f, ba, ia, bb, ib, (ib - ia) / (bb - ba) }'
}

slope chrome json gen_chrome "$ce"
slope nat aiq gen_nat "$ns"
