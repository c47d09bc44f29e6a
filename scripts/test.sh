#!/usr/bin/env bash
# The project's test command: formatting, lints with warnings denied, the layout rules of
# ARCHITECTURE.md (scripts/layers.py), the documentation (rustdoc with warnings denied, the Markdown
# pages' links), the generated C ABI files (scripts/check-abi.sh), and the whole test suite.
# Ends with one line "tests: N passed, M failed, K ignored" summed over every test binary.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings
python3 scripts/layers.py
# The manual is the crates' documentation (README.md is its front page): it must build without a
# warning (broken or private intra-doc links), and the Markdown pages' links must lead somewhere.
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps -q
python3 scripts/doc-links.py
# The bindgen files are what scripts/gen-*-abi.sh generate (a few seconds; needs scripts/setup.sh).
bash scripts/check-abi.sh
mkdir -p target
log=target/test-log.txt
set +e
cargo test --workspace 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
# The fuzz targets live outside the workspace (cargo-fuzz builds them with its own flags), so the
# workspace build does not see an API change break them: build them, and replay every target's
# committed seeds (fuzz/seeds/) through the target's code.
cargo test --manifest-path fuzz/Cargo.toml 2>&1 | tee -a "$log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
# The provider's example programs (one per UET profile) check their own results and exit non-zero
# on a mismatch; each counts as a test in the summary.
for ex in uet_ai_base uet_ai_full uet_hpc; do
    if cargo run -q -p engine --example "$ex" > "target/example-$ex.txt" 2>&1; then
        echo "test result: ok. 1 passed; 0 failed; 0 ignored (example $ex)" | tee -a "$log"
    else
        cat "target/example-$ex.txt"
        echo "test result: FAILED. 0 passed; 1 failed; 0 ignored (example $ex)" | tee -a "$log"
        status=1
    fi
done
set -e
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i; if ($(i+1) ~ /^ignored/) g += $i } }
     END { printf "tests: %d passed, %d failed, %d ignored\n", p, f, g }' "$log" | tee target/test-summary.txt
exit "$status"
