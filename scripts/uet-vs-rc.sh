#!/usr/bin/env bash
# UET (RUD, ROD) next to RoCE RC in one run, on every datapath: the simulated network (both sides in
# one process), and two network namespaces joined by a veth pair over kernel UDP and over AF_XDP
# (one side per namespace). Bandwidth (64 KiB sends) and latency (64-byte sends); every message is
# checked by the tool. Needs root and iproute2 for the namespace part.
#
#   scripts/uet-vs-rc.sh            # prints one line per transport, backend and mode
#   ITERS=2000 scripts/uet-vs-rc.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p softrdma
bin=$PWD/target/release/softrdma
iters=${ITERS:-3000}
lat_iters=${LAT_ITERS:-1000}

row() { # backend transport mode output
    local line
    if [ "$3" = bw ]; then
        line=$(grep -E '^ [0-9]+ ' <<<"$4" | head -n 1 | awk '{printf "%10.1f MB/s", $4}')
    else
        line=$(grep -E '^ [0-9]+ ' <<<"$4" | head -n 1 | awk '{printf "%8.2f us typical, %8.2f us avg", $5, $6}')
    fi
    local v
    v=$(grep -oE 'verified: [0-9]+ messages, [0-9]+ errors' <<<"$4" | tail -n 1)
    printf '%-8s %-5s %-4s %s  (%s)\n' "$1" "$2" "$3" "$line" "$v"
}

echo "== simulated network (one process; UET and RC rows from the same command)"
for t in rud rod; do
    out=$("$bin" perf send --transport "$t" --iters "$iters" --no-baseline)
    row sim "$t" bw "$out"
    row sim rc bw "$(sed -n '/RC, same operation/,$p' <<<"$out")"
    out=$("$bin" perf send --transport "$t" --mode lat --size 64 --iters "$lat_iters")
    row sim "$t" lat "$out"
    row sim rc lat "$(sed -n '/RC, same operation/,$p' <<<"$out")"
done

if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null; then
    echo "== namespaces skipped: needs root and iproute2"
    exit 0
fi
id=$$
na=uvr-a-$id nb=uvr-b-$id va=uvra$id vb=uvrb$id
cleanup() { ip netns del "$na" 2>/dev/null || true; ip netns del "$nb" 2>/dev/null || true; }
trap cleanup EXIT
ip netns add "$na"
ip netns add "$nb"
ip link add "$va" type veth peer name "$vb"
ip link set "$va" netns "$na"
ip link set "$vb" netns "$nb"
ip -n "$na" addr add 10.98.0.1/24 dev "$va"
ip -n "$nb" addr add 10.98.0.2/24 dev "$vb"
for x in "$na $va" "$nb $vb"; do
    set -- $x
    ip -n "$1" link set "$2" mtu 9000 up
    ip -n "$1" link set lo up
done

pair() { # backend transport-args... -> client output
    local backend=$1
    shift
    ip netns exec "$nb" "$bin" perf "$@" --backend "$backend" --dev "$vb" --server --local 10.98.0.2 >/dev/null 2>&1 &
    local server=$!
    sleep 0.3
    ip netns exec "$na" "$bin" perf "$@" --backend "$backend" --dev "$va" --connect 10.98.0.2 --local 10.98.0.1 --mtu 2048 2>&1 || true
    wait "$server" || true
}

for backend in udp afxdp; do
    echo "== namespaces, $backend"
    for t in rud rod rc; do
        out=$(pair "$backend" send --transport "$t" --iters "$iters")
        row "$backend" "$t" bw "$out"
        out=$(pair "$backend" send --transport "$t" --mode lat --size 64 --iters "$lat_iters")
        row "$backend" "$t" lat "$out"
    done
done
