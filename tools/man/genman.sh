#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Man pages from the programs' own help (help2man): ringprof.1, whose COMMANDS
# section holds every command's `ringprof help CMD`, and ringprof-demo.1.
#   genman.sh BIN_DIR OUT_DIR
set -euo pipefail
bin=$1 out=$2
mkdir -p "$out"
inc=$(mktemp)
trap 'rm -f "$inc"' EXIT
{
	echo "[COMMANDS]"
	for c in run top snapshot report analyze merge segments probe; do
		echo ".SS $c"
		echo ".nf"
		# roff: a leading dot or quote would be a request; backslashes escaped
		"$bin/ringprof" help "$c" | sed -e 's/\\/\\e/g' -e "s/^\\([.']\\)/\\\\\\&\\1/"
		echo ".fi"
	done
	echo "[SEE ALSO]"
	echo "ringprof-demo(1); the docs/ folder of the ringprof sources (docs/cli.md)."
} >"$inc"
help2man --no-info --no-discard-stderr --include="$inc" \
	--name="live profiling analysis engine for lock-free shared-memory span rings" \
	--output="$out/ringprof.1" "$bin/ringprof"
help2man --no-info --name="a simulated inference server that records into ringprof" \
	--output="$out/ringprof-demo.1" "$bin/ringprof-demo"
