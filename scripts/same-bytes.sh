#!/usr/bin/env bash
# Checks that a refactor kept the bytes on the wire: builds `softrdma` at REV (default HEAD~1) in a
# throwaway git worktree and from the working tree, runs the same seeded `perf` runs on the simulated network with `--pcap` on both, and
# compares the captures byte for byte (frames and their virtual-time stamps).
#
#   bash scripts/same-bytes.sh [REV]
#
# Exits 1 if any capture differs. The runs: RC WRITE clean and with loss and reordering, UET RUD
# send, and UET RUD WRITE sealed with TSS.
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:-HEAD~1}
root=$PWD
work=$root/target/same-bytes
rm -rf "$work/tree"
mkdir -p "$work"
git worktree prune
git worktree add -q --detach "$work/tree" "$rev"
trap 'git -C "$root" worktree remove --force "$work/tree"' EXIT
# The old tree builds into its own target directory, kept between runs (a second check is quick).
(cd "$work/tree" && CARGO_TARGET_DIR="$work/target" cargo build --release -q)
cargo build --release -q
before=$work/target/release/softrdma
after=$root/target/release/softrdma
runs=(
    "write --iters 300 --seed 7"
    "write --iters 300 --seed 7 --loss 0.05 --reorder 0.05"
    "send --transport rud --iters 300 --seed 7"
    "write --transport rud --tss --iters 300 --seed 7"
)
status=0
for r in "${runs[@]}"; do
    # shellcheck disable=SC2086
    "$before" perf $r --pcap "$work/before.pcap" > /dev/null
    # shellcheck disable=SC2086
    "$after" perf $r --pcap "$work/after.pcap" > /dev/null
    if cmp -s "$work/before.pcap" "$work/after.pcap"; then
        echo "same bytes: perf $r ($(stat -c %s "$work/after.pcap") bytes of pcap)"
    else
        echo "DIFFERENT: perf $r" >&2
        status=1
    fi
done
rm -f "$work/before.pcap" "$work/after.pcap"
exit $status
