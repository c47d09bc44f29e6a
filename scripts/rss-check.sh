#!/usr/bin/env bash
# Resident memory of both `softrdma perf write` processes during a long run over a veth pair between
# two network namespaces (issue 27): kernel UDP and AF_XDP, with and without --capture on both sides.
# Prints RSS at the start, at 10 % and at the end of each run, and fails if either process grew by
# 16 MiB or more after 10 % of the run or a capture file did not grow while the run went on.
#
#   sudo bash scripts/rss-check.sh [GIB]     # default 20 GiB per run, release build
#
# The capture runs write both sides' pcap files (a little over GIB each) under $TMPDIR (/tmp), one
# run at a time, and remove them. The test suite runs the same test with 2 GiB
# (engine/cli/tests/netns_memory.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
SOFTRDMA_RSS_GB=${1:-20} cargo test --release -p softrdma --test netns_memory -- --nocapture
