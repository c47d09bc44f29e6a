#!/usr/bin/env bash
# Runs every cargo-fuzz target for SECONDS (default 60) each on stable (`-s none`), from the
# committed seeds (fuzz/seeds/), and fails on any crash: a short campaign whose table goes to
# target/fuzz-smoke.md rather than the docs (scripts/fuzz-campaign.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
exec bash scripts/fuzz-campaign.sh --seconds "${1:-60}" --out ../target/fuzz-smoke.md
