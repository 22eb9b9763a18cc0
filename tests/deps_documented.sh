#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# docs/build.md lists every package .ci/deps installs (each as a word of its table).
set -euo pipefail
cd "$(dirname "$0")/.."
rc=0
for p in $(bash .ci/deps --list); do
	tr -s ' `|:,' '\n' <docs/build.md | grep -xF -- "$p" >/dev/null ||
		{ echo "docs/build.md: $p missing"; rc=1; }
done
exit $rc
