#!/usr/bin/env bash
# softrdma against rxe on the same two VMs, in one invocation (issue 27, acceptance 1): the VM pair of
# ../shared/interop/rxe-vm (one emulated vCPU each, virtio-net, MTU 1500, rdma_rxe on eth0) runs
#   rxe       ib_write_bw -s 65536 and ib_send_lat -s 2 (rdma-core's perftest, rxe0, GID index 1)
#   udp       softrdma perf write 64 KiB and perf send --mode lat 2 B over kernel UDP (port 5000:
#             rdma_rxe holds 4791 in the VMs)
#   afxdp     the same over AF_XDP on eth0 (native XDP in virtio-net's driver, --xdp-driver)
#   ceiling   kernel UDP alone between the VMs (scripts/udp-ceiling.c: RoCE-packet-sized datagrams
#             sent 62 per GSO send, a receiver that only counts bytes): what the VMs carry with
#             no ICRC, no copy and no ACK at either end, the room softrdma's UDP backend works in
#   floor     the same with the work no verifying user-space RoCE stack can skip: a CRC-32 over every
#             datagram at both ends and each payload copied into memory at the receiver (still no
#             headers, ACKs or completions): what such a stack could reach on these VMs at best
# with path MTU 1024 everywhere (the largest a 1500-byte link carries), and prints bandwidth and
# round-trip latency with softrdma's ratios to rxe. perftest's ib_send_lat reports half the round
# trip; softrdma's post-to-completion latency of a SEND is the whole round trip (request and ACK),
# so the table compares softrdma's t_typical with twice rxe's. Both VMs boot once; VM 1 runs the
# servers one after another, VM 2 the clients (each retried until its server listens). The VMs'
# speed drifts by 2x and more within minutes, rxe's as much as softrdma's: every case runs ROUNDS
# times, the rounds alternating, and the table shows medians (each run's figure beside them).
#
#   sudo bash scripts/vm-bench.sh        # ITERS=500 (64 KiB writes), LAT_ITERS=1000, ROUNDS=3
# Exits non-zero when a run fails, or bandwidth < 3x rxe's or latency > rxe's on either backend.
#
# What mattered on these VMs (software emulation: their speed varies from run to run by 2x and more,
# rxe included): virtio-net's queue fills and AF_XDP in copy mode then leaves frames in its TX ring
# with nothing to say when to kick again (the datapath retries 100 us later,
# `Datapath::flush_retry_in`); a 64 KiB message's ACK leaves the server 1-4 ms after its last packet,
# so `perf` asks for the 256-PSN window at once against a softrdma peer (512 made UDP WRITEs about
# 20 % faster here but lossy SENDs on veth slower: see engine/roce/src/window.rs); the UDP socket's
# buffers are sized past the VMs' 208 KiB `net.core.rmem_max` (SO_RCVBUFFORCE, allowed to root); the
# emulated CPU computes the ICRC faster with a table than with its emulated carry-less multiply (the
# first datapath opened times both); native XDP (`--xdp-driver`) is 17 % faster than generic mode.
# Adaptive waiting: a 1,000-message WRITE run made 6,448 socket polls instead of 263,480 busy-polling,
# at half the client's CPU time.
#
# Measured: the ceiling row made 75.6 MB/s in a run where rxe made 16.2 and softrdma 35.8 over UDP; it
# takes all of the host's two cores (the two QEMU vCPU threads and their I/O threads), as softrdma's
# runs take 180 % and rxe's 155 % (its responder's vCPU is the limit there). The floor row made
# 44.1 MB/s in a run where the ceiling made 59.4 and rxe 11.7: about three quarters of the ceiling.
set -uo pipefail
cd "$(dirname "$0")/.."
shared=${SHARED:-../shared}
vm=$shared/interop/rxe-vm
[ "$(id -u)" = 0 ] || { echo "vm-bench: needs root (bridge, tap, QEMU)"; exit 2; }
bash "$vm/build.sh" >/dev/null 2>&1 || { echo "vm-bench: building the VM image failed"; exit 2; }
bash "$vm/net.sh" up >/dev/null 2>&1 || true
if pgrep -f 'ifname=tap-rxe[12]' >/dev/null; then
    echo "vm-bench: a VM already runs on tap-rxe1/2"; exit 2
fi
iters=${ITERS:-500}
lat_iters=${LAT_ITERS:-1000}
rounds=${ROUNDS:-3}
# A static binary (glibc, crt-static) runs in the VM's minimal root.
target=x86_64-unknown-linux-gnu
RUSTFLAGS="-C target-feature=+crt-static" cargo build --release -q -p softrdma --target $target || exit 2
work=$(mktemp -d /tmp/vm-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir "$work/x"
strip -o "$work/x/softrdma" "target/$target/release/softrdma"
ceiling=1
gcc -O2 -static -o "$work/x/udp-ceiling" scripts/udp-ceiling.c 2>/dev/null || ceiling=0

perf_common="--iters $iters --size 65536 --mtu 1024 --counters"
# Both sides of the latency runs busy-poll (--wait spin), as perftest's do (ib_send_lat's client and
# server spin on their CQs). Between the VMs, against waiting adaptively: over UDP a spinning client
# took the round trip from 757 to 605 us (medians of 3 alternating runs) and a spinning server then
# changed nothing; over AF_XDP, where polling the rings needs no system call, a spinning server took
# it from 556 to 422 us.
lat_common="--mode lat --size 2 --iters $lat_iters --mtu 1024 --counters --wait spin"
udp="--backend udp --udp-port 5000"
# virtio-net runs XDP in its driver (--xdp-driver): no socket buffer per received frame, as generic
# mode (the default, which works on any interface) allocates. Between the VMs, 64 KiB WRITEs ran
# 17 % faster (29.7/31.0/27.6 against 25.0/25.5/25.3 MB/s, alternating). The VMs' Linux 6.1 has no
# multi-buffer AF_XDP: softrdma falls back to single-buffer sockets (path MTU 1024 fits a chunk).
afxdp="--backend afxdp --dev eth0 --xdp-driver"
pt="-d rxe0 -x 1 -F -m 1024"
# name | server (VM 1) | client (VM 2, the server's address appended)
cases=(
    "rxe-write|ib_write_bw $pt -s 65536 -n $iters|ib_write_bw $pt -s 65536 -n $iters"
    "rxe-lat|ib_send_lat $pt -s 2 -n $lat_iters|ib_send_lat $pt -s 2 -n $lat_iters"
    "udp-write|softrdma perf write $udp --server --local 10.77.0.2|softrdma perf write $udp $perf_common --connect"
    "udp-lat|softrdma perf send $udp --wait spin --server --local 10.77.0.2|softrdma perf send $udp $lat_common --connect"
    "afxdp-write|softrdma perf write $afxdp --server --local 10.77.0.2|softrdma perf write $afxdp $perf_common --connect"
    "afxdp-lat|softrdma perf send $afxdp --wait spin --server --local 10.77.0.2|softrdma perf send $afxdp $lat_common --connect"
)
[ $ceiling = 1 ] && cases+=("udp-ceiling|/extra/udp-ceiling recv 6000|/extra/udp-ceiling send 6000 6"
    "udp-floor|/extra/udp-ceiling recv icrc 6000|/extra/udp-ceiling send icrc 6000 6")
# Each VM's commands go in a script under /extra (a long command would not fit the kernel's command
# line, which carries it).
echo 'sleep 2' >"$work/x/client.sh"
: >"$work/x/server.sh"
for r in $(seq "$rounds"); do for c in "${cases[@]}"; do
    IFS='|' read -r name server client <<<"$c"
    name=$name.$r
    cat >>"$work/x/server.sh" <<EOF
echo '=== BENCH $name server'; $server; echo "=== BENCH $name server exit \$?"
EOF
    # A client that finds no server yet exits at once and tries again; one that ran is not repeated.
    cat >>"$work/x/client.sh" <<EOF
echo '=== BENCH $name'; ok=1
for i in \$(seq 30); do
    if $client 10.77.0.2 >/tmp/out 2>&1; then ok=0; break; fi
    grep -qiE 'refused|Couldn.t connect' /tmp/out || break; sleep 1
done
cat /tmp/out; echo "=== BENCH $name exit \$ok"; sleep 2
EOF
done; done
timeout=$((300 + rounds * (300 + iters / 2 + lat_iters / 10)))
bash "$vm/run-vm.sh" -n 1 -t "$timeout" -x "$work/x" -- 'sh /extra/server.sh' >"$work/vm1.log" 2>&1 &
vm1=$!
bash "$vm/run-vm.sh" -n 2 -t "$timeout" -x "$work/x" -- 'sh /extra/client.sh' >"$work/vm2.log" 2>&1
wait $vm1

# The lines of one case's client output.
section() { tr -d '\r' <"$work/vm2.log" | awk -v n="$1" '$0 == "=== BENCH " n { on = 1; next } /^=== BENCH / { on = 0 } on'; }
status=0
for r in $(seq "$rounds"); do for c in "${cases[@]}"; do
    name=${c%%|*}.$r
    if ! grep -q "=== BENCH $name exit 0" "$work/vm2.log"; then
        echo "vm-bench: $name failed:"; section "$name" | tail -15; status=1
    fi
done; done
# perftest prints "#bytes #iterations BW peak BW average ..." (MB/s) and "#bytes #iterations t_min
# t_max t_typical ..." (us); softrdma prints the same columns. Each takes a case and prints every
# round's figure, one per line.
each() { for r in $(seq "$rounds"); do section "$1.$r" | awk "$2"; done; }
bws() { each "$1" '$1 == 65536 && NF >= 5 { print $4; exit }'; }
lats() { each "$1" '$1 == 2 && NF >= 5 { print $5; exit }'; }
# The median of the numbers on stdin (nothing for none); them all, comma-separated.
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) printf "%.2f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
runs() { paste -sd, - | sed 's/,/, /g'; }
# Retries and timeouts of a case's clients, summed over the rounds.
counters() {
    for r in $(seq "$rounds"); do section "$1.$r"; done |
        sed -n 's/.*requests [0-9]* retries \([0-9]*\) timeouts \([0-9]*\).*/\1 \2/p' |
        awk '{ r += $1; t += $2 } END { if (NR) printf "retries %d, timeouts %d", r, t }'
}
# S / R to two decimals (0 where either is missing).
ratio() { awk -v s="${1:-0}" -v r="${2:-0}" 'BEGIN { printf "%.2f", (r > 0 ? s / r : 0) }'; }
rxe_bw=$(bws rxe-write | median); rxe_lat=$(lats rxe-lat | median)
rxe_rtt=$(awk -v l="${rxe_lat:-0}" 'BEGIN { printf "%.2f", 2 * l }')
echo "medians of $rounds alternating rounds (each round's figure in the last column)"
printf '%-28s %12s %8s %22s %8s  %s\n' "peer pair" "BW [MB/s]" "x rxe" "RTT typical [us]" "x rxe" "client counters; runs: BW / RTT"
printf '%-28s %12s %8s %22s %8s  %s\n' "rxe <-> rxe" "${rxe_bw:--}" - "$rxe_rtt (2 x $rxe_lat)" - \
    "$(bws rxe-write | runs) / $(lats rxe-lat | awk '{ print 2 * $1 }' | runs)"
for b in udp afxdp; do
    sbw=$(bws $b-write | median); slat=$(lats $b-lat | median)
    rb=$(ratio "$sbw" "$rxe_bw"); rl=$(ratio "$slat" "$rxe_rtt")
    printf '%-28s %12s %8s %22s %8s  %s\n' "softrdma <-> softrdma, $b" "${sbw:--}" "$rb" "${slat:--}" "$rl" \
        "$(counters $b-write); $(bws $b-write | runs) / $(lats $b-lat | runs)"
    awk -v b="$rb" -v l="$rl" 'BEGIN { exit !(b >= 3 && l > 0 && l <= 1) }' || status=1
done
# The receiver's figure (what arrived), from VM 1's log.
if [ $ceiling = 1 ]; then
    received() {
        for r in $(seq "$rounds"); do
            tr -d '\r' <"$work/vm1.log" | awk -v n="=== BENCH $1.$r server" '$0 == n { on = 1; next } /^=== BENCH / { on = 0 } on' |
                sed -n 's/^udp-ceiling: received \([0-9.]*\) MB\/s.*/\1/p' | head -1
        done
    }
    cbw=$(received udp-ceiling | median); fbw=$(received udp-floor | median)
    printf '%-28s %12s %8s %22s %8s  %s\n' "kernel UDP alone (ceiling)" "${cbw:--}" "$(ratio "$cbw" "$rxe_bw")" "" "" \
        "$(received udp-ceiling | runs)"
    printf '%-28s %12s %8s %22s %8s  %s\n' "+ ICRCs and a copy (floor)" "${fbw:--}" "$(ratio "$fbw" "$rxe_bw")" "" "" \
        "$(received udp-floor | runs)"
else
    echo "kernel UDP alone (ceiling): not measured (no gcc to build scripts/udp-ceiling.c: scripts/setup.sh installs it)"
fi
[ $status = 0 ] && echo "vm-bench: pass (bandwidth >= 3x rxe, round trip <= rxe on both backends)" \
    || echo "vm-bench: FAIL (needs bandwidth >= 3x rxe and round trip <= rxe on both backends)"
[ -n "${KEEP:-}" ] && cp "$work/vm1.log" "$work/vm2.log" "$KEEP"/ 2>/dev/null
exit $status
