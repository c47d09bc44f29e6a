#!/usr/bin/env bash
# A/B of `softrdma perf write --transport rud --tss` between two revisions, the way issue 10's
# numbers were taken: this machine's single-thread speed wanders by a few percent from minute to
# minute, so one run against one run says little. Both revisions are built (release profile, in
# target/ab/), then run alternately N times; the engine-time share of the AEAD baseline of each run
# is printed, with the median per revision, and the median engine MB/s (what to compare when the
# revisions seal with different AEADs, and so have different baselines).
#
#   scripts/tss-ab.sh REV_A REV_B            # 8 rounds
#   N=12 scripts/tss-ab.sh main HEAD~3 -- --size 1048576 --iters 312
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: $0 REV_A REV_B [-- extra perf arguments]" >&2; exit 2; }
a=$1 b=$2
shift 2
[ "${1:-}" = "--" ] && shift
rounds=${N:-8}
root=$PWD
work=$(mktemp -d)
trap 'for w in "$work"/*/; do git -C "$root" worktree remove --force "$w" 2>/dev/null || true; done; rm -rf "$work"' EXIT

build() { # rev side -> path of its softrdma binary
    local rev=$1 dir="$work/$2"
    git worktree add -q --detach "$dir" "$rev"
    # --bin rather than -p: the binary was in package `engine` before it moved to `softrdma`
    # (engine/cli); either way it is the root's default member.
    (cd "$dir" && CARGO_TARGET_DIR="$root/target/ab" cargo build --release -q --bin softrdma)
    cp "$root/target/ab/release/softrdma" "$dir.bin"
    echo "$dir.bin"
}
bin_a=$(build "$a" a)
bin_b=$(build "$b" b)

share() { # binary [perf arguments] -> "share MB/s": engine-time share of the baseline (%), engine MB/s
    local bin=$1
    shift
    "$bin" perf write --transport rud --tss "$@" 2>&1 |
        sed -nE 's/^ this run: ([0-9.]+) MB\/s of engine time = ([0-9.]+) % of the baseline.*/\2 \1/p'
}

declare -A runs rates
for _ in $(seq "$rounds"); do
    for side in a b; do
        bin=bin_$side
        read -r pct mbs <<<"$(share "${!bin}" "$@")"
        runs[$side]+="$pct "
        rates[$side]+="$mbs "
    done
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
for side in a b; do
    rev=$a
    [ $side = b ] && rev=$b
    printf '%-12s median %5s %% of its baseline, %7s MB/s of engine time  runs: %s\n' "$rev" \
        "$(median <<<"${runs[$side]}")" "$(median <<<"${rates[$side]}")" "${runs[$side]}"
done
