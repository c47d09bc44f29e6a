#!/usr/bin/env bash
# softrdma between two network namespaces over a veth pair (MTU 9000), as a user on one host would
# run it (issue 27, acceptance 2 and 4), on kernel UDP and AF_XDP:
#   clean     perf write and perf send, 64 KiB x ITERS: bandwidth, retransmissions (retries), tail
#             probes and timeouts of both sides (a clean link must need no retry and no timeout; a
#             probe, the oldest and last unacknowledged packets sent again when no ACK came for
#             about two round trips, shows a peer that stalled that long)
#   tx-loss   the same with --tx-loss 0.01 on both sides: goodput as a share of the clean run
#   one-core  both processes under `taskset -c 0`: bandwidth as a share of the two-core run (in
#             which the server runs on core 1, the client on core 0)
# Every measurement runs REPEAT times, alternating with the run it is compared with (this machine's
# speed drifts: for a second or two now and then, any run, clean or lossy, old build or new, spin or
# adaptive wait, makes half its usual MB/s); the table shows medians, of 5 so that one such phase
# cannot decide a row. Exits non-zero when a run fails its data check, a clean
# run retransmits, the lossy goodput is under 80 % or the one-core run under 50 % of its baseline.
#
#   sudo bash scripts/veth-bench.sh        # ITERS=20000 REPEAT=5 BACKENDS="udp afxdp" OPS="write send"
#
# Measured on the 2-core development VM (2026-11-29, 3e3e7b5: the window widened against a responder
# that keeps, urgent NAKs and repair ACKs, one ICRC pass per received UDP frame), path MTU 2048, 64 KiB
# x 20,000, medians of 5 (range in brackets), ratios to the clean run:
#
# | op    | backend | clean MB/s        | retx/probes/timeouts | 1 % loss both ways                         | one core     |
# |-------|---------|-------------------|----------------------|--------------------------------------------|--------------|
# | write | UDP     | 1,879 (957-2,200) | 0 / 5-15 / 0         | 1,911 (1.02), 6,365-6,387 retx, 0 timeouts | 1,497 (0.80) |
# | send  | UDP     | 2,420 (2,332-2,457) | 0 / 4-11 / 0       | 2,021 (0.84), 6,370-6,381 retx, 0 timeouts | 1,580 (0.65) |
# | write | AF_XDP  | 1,245             | 0 / 5-11 / 0         | 1,234 (0.99), 0 timeouts                   | 1,023 (0.82) |
# | send  | AF_XDP  | 1,202             | 0 / 4-14 / 0         | 1,195 (0.99), 0 timeouts                   | 897 (0.75)   |
#
# With loss, each lost frame costs a resend of that frame alone (about 6,400 per run, 1 % of 640,000)
# and no timeout: softrdma's responder keeps what followed it. What brought UDP SEND from 0.72 to 0.84:
# a repair takes a round trip, and the sender's window (128 PSNs, holding the packets kept behind the
# gap) and the receiver's credits stopped it for that round trip at every loss; the window now widens
# to 256 against a responder that keeps, the `perf` server posts twice the client's in-flight
# messages, a gap's NAK and the ACK that ends its repair leave before the rest of the received batch,
# and the UDP datapath's ICRC check is the only one. A clean run's tail probes (about 200 us without
# an ACK) are not losses: this VM stops a process for milliseconds now and then (one `progress` call
# of the server took 9.3 ms). A write run now and then measures 1,000-1,200 instead of 2,200 MB/s
# clean, pinned or not: in those runs the client spends up to twice the CPU time on the same sends,
# most of it in the kernel's copy of the datagrams. Earlier, before adaptive waiting yielded the core,
# a one-core UDP `perf write` made 36-46 MB/s with 12-71 timeouts (278 MB/s with none after).
set -uo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "veth-bench: needs root (network namespaces, veth, AF_XDP)"; exit 2; }
iters=${ITERS:-20000}
repeat=${REPEAT:-5}
backends=${BACKENDS:-udp afxdp}
ops=${OPS:-write send}
cargo build --release -q -p softrdma || exit 2
work=$(mktemp -d /tmp/veth-bench.XXXXXX)
cp target/release/softrdma "$work/softrdma"
bin=$work/softrdma
a=vb-a-$$ b=vb-b-$$ va=vba$$ vb=vbb$$
cleanup() { ip netns del "$a" 2>/dev/null; ip netns del "$b" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
ip netns add "$a" && ip netns add "$b" || exit 2
ip link add "$va" type veth peer name "$vb" || exit 2
ip link set "$va" netns "$a"; ip link set "$vb" netns "$b"
ip -n "$a" addr add 10.99.0.1/24 dev "$va"; ip -n "$b" addr add 10.99.0.2/24 dev "$vb"
for x in "$a $va" "$b $vb"; do
    set -- $x
    ip -n "$1" link set "$2" mtu 9000 up; ip -n "$1" link set lo up
done

status=0
# One run: $1 op, $2 backend, $3 "loss"|"clean", $4 "1core"|"2core". Prints "MB/s retries probes
# timeouts" (summed over both sides) or "fail".
run() {
    local op=$1 backend=$2 loss=$3 cores=$4 spin=() cpin=() common=() sdev=() cdev=()
    common=(perf "$op" --backend "$backend" --counters --size 65536 --iters "$iters" --mtu 2048)
    [ "$loss" = loss ] && common+=(--tx-loss 0.01)
    # Two cores: a core each. Left to the scheduler, the two processes (and the kernel's work for
    # each, which runs on the sender's core) sometimes shared one: UDP runs then measured 1,200 or
    # 2,300 MB/s by chance.
    if [ "$cores" = 1core ]; then spin=(taskset -c 0) cpin=(taskset -c 0); else spin=(taskset -c 1) cpin=(taskset -c 0); fi
    [ "$backend" = afxdp ] && { sdev=(--dev "$va"); cdev=(--dev "$vb"); }
    ip netns exec "$a" "${spin[@]}" "$bin" "${common[@]}" --server --local 10.99.0.1 "${sdev[@]}" \
        >"$work/server" 2>&1 &
    local spid=$!
    sleep 0.5
    timeout 600 ip netns exec "$b" "${cpin[@]}" "$bin" "${common[@]}" --connect 10.99.0.1 "${cdev[@]}" \
        >"$work/client" 2>&1
    local crc=$?
    wait "$spid"; local src=$?
    if [ $crc != 0 ] || [ $src != 0 ] || ! grep -q "verified: .* 0 errors" "$work/client"; then
        echo fail; cp "$work/client" "$work/failed-client"; cp "$work/server" "$work/failed-server"
        { echo "--- client ($op $backend $loss $cores, exit $crc)"; tail -5 "$work/client";
          echo "--- server (exit $src)"; tail -5 "$work/server"; } >&2
        return
    fi
    local bw retries probes timeouts
    bw=$(awk '$1 == 65536 && NF >= 5 { print $4; exit }' "$work/client")
    retries=$(cat "$work/client" "$work/server" | sed -n 's/.* retries \([0-9]*\) timeouts.*/\1/p' | awk '{s += $1} END {print s + 0}')
    probes=$(cat "$work/client" "$work/server" | sed -n 's/.* tail probes \([0-9]*\) .*/\1/p' | awk '{s += $1} END {print s + 0}')
    timeouts=$(cat "$work/client" "$work/server" | sed -n 's/.* timeouts \([0-9]*\) .*/\1/p' | awk '{s += $1} END {print s + 0}')
    echo "$bw $retries $probes $timeouts"
}

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

printf '%-6s %-6s %-9s %12s %12s %8s %9s  %s\n' op backend run "MB/s median" "baseline" ratio "retx/probes/tmo" "MB/s of each run"
for backend in $backends; do
    for op in $ops; do
        declare -A bws=() retx=()
        for _ in $(seq "$repeat"); do
            for kind in clean loss 1core; do
                case $kind in
                    clean) r=$(run "$op" "$backend" clean 2core) ;;
                    loss) r=$(run "$op" "$backend" loss 2core) ;;
                    1core) r=$(run "$op" "$backend" clean 1core) ;;
                esac
                if [ "$r" = fail ]; then status=1; continue; fi
                set -- $r
                bws[$kind]="${bws[$kind]:-} $1"
                retx[$kind]="${retx[$kind]:-} $2/$3/$4"
            done
        done
        clean=$(echo ${bws[clean]:-0} | tr ' ' '\n' | median)
        for kind in clean loss 1core; do
            m=$(echo ${bws[$kind]:-0} | tr ' ' '\n' | median)
            ratio=$(awk -v m="$m" -v c="$clean" 'BEGIN { printf "%.2f", (c > 0 ? m / c : 0) }')
            printf '%-6s %-6s %-9s %12s %12s %8s %9s  %s\n' "$op" "$backend" "$kind" "$m" \
                "$([ $kind = clean ] && echo - || echo "$clean")" "$([ $kind = clean ] && echo - || echo "$ratio")" \
                "$(echo ${retx[$kind]:-} | tr ' ' ',')" "$(echo ${bws[$kind]:-} | tr ' ' ',')"
            case $kind in
                clean) for x in ${retx[clean]:-}; do case $x in 0/*/0) ;; *) status=1 ;; esac; done ;;
                loss) awk -v r="$ratio" 'BEGIN { exit !(r >= 0.8) }' || status=1 ;;
                1core) awk -v r="$ratio" 'BEGIN { exit !(r >= 0.5) }' || status=1 ;;
            esac
        done
        unset bws retx
    done
done
[ $status = 0 ] && echo "veth-bench: pass" || echo "veth-bench: FAIL (see the rows above)"
exit $status
