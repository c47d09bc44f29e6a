#!/usr/bin/env bash
# The project's test command: formatting, lints with warnings denied, and the whole test suite.
# Ends with one line "tests: N passed, M failed, K ignored" summed over every test binary.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings
mkdir -p target
log=target/test-log.txt
set +e
cargo test --workspace 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i; if ($(i+1) ~ /^ignored/) g += $i } }
     END { printf "tests: %d passed, %d failed, %d ignored\n", p, f, g }' "$log" | tee target/test-summary.txt
exit "$status"
