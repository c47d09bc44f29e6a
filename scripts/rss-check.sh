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
#
# One 20 GiB run, MiB at the start / 10 % / end, on a 2-core VM busy with other work, measured before
# back-pressure, adaptive waiting and the loss-adaptive window were merged (the timeouts are those a
# loaded host then left; AF_XDP's 16 MiB UMEM is touched in the first second):
#
# | backend | capture | client RSS        | server RSS        | time, timeouts | capture files at 10 % / end |
# |---------|---------|-------------------|-------------------|----------------|-----------------------------|
# | UDP     | no      | 4.5 / 4.5 / 4.5   | 4.5 / 4.5 / 4.5   | 73 s, 392      | -                           |
# | UDP     | yes     | 4.8 / 5.6 / 5.1   | 4.7 / 5.7 / 5.2   | 310 s, 7,111   | 2,074 / 22,934 MiB          |
# | AF_XDP  | no      | 5.6 / 20.9 / 20.9 | 3.5 / 20.8 / 20.8 | 175 s, 3,358   | -                           |
# | AF_XDP  | yes     | 9.8 / 21.8 / 21.7 | 3.3 / 21.8 / 21.7 | 248 s, 6,638   | 2,096 / 22,859 MiB          |
set -euo pipefail
cd "$(dirname "$0")/.."
SOFTRDMA_RSS_GB=${1:-20} cargo test --release -p softrdma --test netns_memory -- --nocapture
