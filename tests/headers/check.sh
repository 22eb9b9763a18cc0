#!/usr/bin/env bash
# The public headers as users compile them: <ringprof/ringprof.h> as C99, C11, C17
# and C2x, <ringprof/ringprof.hpp> (which includes it) as C++11..23 (and once more
# without exceptions and RTTI), with gcc and clang, -Wall -Wextra -Wpedantic -Werror;
# each also with RP_NO_RDTSC (the path of targets without rdtsc) and, last, checks
# that neither Concurrency Kit nor an intrinsics header reaches the user.
#   check.sh INCLUDE_DIR
set -uo pipefail
inc=$1
here=$(cd "$(dirname "$0")" && pwd)
fail=0 n=0
flags=(-Wall -Wextra -Wpedantic -Werror -I"$inc" -c -o /dev/null)
try() { # compiler std file extra...
	local cc=$1 std=$2 src=$3
	shift 3
	n=$((n + 1))
	if ! out=$("$cc" -std="$std" "$@" "${flags[@]}" "$src" 2>&1); then
		echo "FAIL: $cc -std=$std $* $(basename "$src")"
		echo "$out" | head -20
		fail=$((fail + 1))
	fi
}
for pair in gcc:g++ clang:clang++; do
	cc=${pair%%:*} cxx=${pair##*:}
	if ! command -v "$cc" >/dev/null || ! command -v "$cxx" >/dev/null; then
		echo "FAIL: $cc/$cxx not installed (bash .ci/deps installs both)"
		fail=$((fail + 1))
		continue
	fi
	for std in c99 c11 c17 c2x; do
		try "$cc" "$std" "$here/use.c"
		try "$cc" "$std" "$here/use.c" -DRP_NO_RDTSC
	done
	for std in c++11 c++14 c++17 c++20 c++2b; do
		try "$cxx" "$std" "$here/use.cpp"
		try "$cxx" "$std" "$here/use.cpp" -DRP_NO_RDTSC
		try "$cxx" "$std" "$here/use.cpp" -fno-exceptions -fno-rtti
	done
	# What a user's file pulls in: no ck, no intrinsics.
	deps=$("$cxx" -std=c++17 -I"$inc" -M "$here/use.cpp")
	if echo "$deps" | grep -E -q 'ck_|intrin'; then
		echo "FAIL: $cxx: the headers include ck or intrinsics headers:"
		echo "$deps" | tr ' ' '\n' | grep -E 'ck_|intrin'
		fail=$((fail + 1))
	fi
done
echo "header check: $((n - fail))/$n compilations passed, $fail failed"
[ "$fail" -eq 0 ]
