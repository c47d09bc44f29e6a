#!/usr/bin/env bash
# softrdma against the Linux kernel's Soft-RoCE (rdma_rxe) driven by the stock rdma-core and perftest
# tools, in the VM of ../shared/interop/rxe-vm (root). Builds the VM image if needed, brings up br-rxe
# (host 10.77.0.1, VM 10.77.0.2), runs the matrix, prints one line per case (tool, role, backend,
# impairment, pass/fail, seconds) and a summary; exits non-zero if a case failed.
#
#   scripts/interop-rxe.sh            the whole matrix: ibv_{rc,uc,ud}_pingpong -c and ib_{write,read,send,
#                                     atomic}_bw, ib_{write,read,send}_lat, both roles, UDP and AF_XDP,
#                                     and the RC cases again with 10% loss on the VM's egress (netem)
#                                     and on softrdma's (--tx-loss 0.1)
#   scripts/interop-rxe.sh quick      both roles of ibv_rc_pingpong -s 4096 and ib_write_bw over UDP and
#                                     of ib_send_lat over AF_XDP (what .ci/run runs)
#
# Environment: BACKENDS (default "udp afxdp"), IMPAIRMENTS (default "none vm-loss tx-loss"),
# FILTER (a grep -E pattern on "tool role backend impairment"), ITERS (perftest iterations, 200),
# HOST_EXTRA (more softrdma arguments for every case).
set -uo pipefail
cd "$(dirname "$0")/.."
shared=${SHARED:-../shared}
vm=$shared/interop/rxe-vm
[ "$(id -u)" = 0 ] || { echo "interop-rxe: needs root (bridge, tap, QEMU, AF_XDP)"; exit 2; }
bash "$vm/build.sh" >/dev/null 2>&1 || { echo "interop-rxe: building the VM image failed"; exit 2; }
bash "$vm/net.sh" up >/dev/null 2>&1 || true
ip link show br-rxe >/dev/null 2>&1 || { echo "interop-rxe: br-rxe did not come up"; exit 2; }
if pgrep -f 'ifname=tap-rxe1' >/dev/null; then
    echo "interop-rxe: a VM already runs on tap-rxe1 (another run of this script?)"; exit 2
fi
cargo build --release -q -p softrdma || exit 2
logs=$(mktemp -d /tmp/interop-rxe.XXXXXX)
# A copy, so that a rebuild while the matrix runs does not change the binary under test.
cp target/release/softrdma "$logs/softrdma"
bin=$logs/softrdma
host=10.77.0.1
guest=10.77.0.2
iters=${ITERS:-200}
pass=0; fail=0; failed=(); reruns=0

# The VM's command runs under a watchdog: in software emulation the VM's own NIC sometimes stops
# transmitting during long runs with 10 % netem loss (eth0's tx_packets freezes, the host's tap sees
# nothing more, even ping from the VM fails: see README). When the tool is alive, eth0 sent nothing
# for 10 s and three pings to the host all fail, the watchdog says so and ends the tool; run_case
# then runs that case once more and counts it.
vm_watch() { # command
    printf '%s & p=$!; last=-1; while kill -0 $p 2>/dev/null; do sleep 10; t=$(cat /sys/class/net/eth0/statistics/tx_packets); if [ "$t" = "$last" ] && kill -0 $p 2>/dev/null && ! ping -c 3 -W 1 %s >/dev/null 2>&1; then echo "interop-rxe: VM egress stalled (eth0 sent nothing for 10 s, ping to the host fails)"; kill $p; exit 99; fi; last=$t; done; wait $p' "$1" "$host"
}

line() { # tool role backend impairment result seconds
    printf '%-34s %-16s %-6s %-8s %-4s %5ss\n' "$1" "$2" "$3" "$4" "$5" "$6"
    if [ "$5" = pass ]; then pass=$((pass + 1)); else fail=$((fail + 1)); failed+=("$1 $2 $3 $4"); fi
}

# One case. $1 tool label, $2 the VM's command (server form: no address), $3 softrdma's arguments
# (server form), $4 "pingpong" or "perftest", $5 role (softrdma-server|softrdma-client), $6 backend,
# $7 impairment.
run_case() {
    local label=$1 role=$5 backend=$6 imp=$7
    if [ -n "${FILTER:-}" ] && ! echo "$label $role $backend $imp" | grep -qE "$FILTER"; then return; fi
    local t0=$SECONDS
    run_once "$@"
    if [ "$r" = fail ] && grep -q "VM egress stalled" "$logs/$tag.vm"; then
        reruns=$((reruns + 1))
        cp "$logs/$tag.vm" "$logs/$tag.stalled.vm"
        echo "    $label $role $backend $imp: the VM's egress stalled (environment fault, see README; log in $logs/$tag.stalled.vm): running the case again"
        run_once "$@"
    fi
    line "$label" "$role" "$backend" "$imp" "$r" "$((SECONDS - t0))"
    if [ $r = fail ]; then
        echo "    softrdma exit $h, VM exit $v; logs: $logs/$tag.host $logs/$tag.vm"
        tail -n 3 "$logs/$tag.host" | sed 's/^/    host: /'
        grep -v '^\s*$' "$logs/$tag.vm" | tail -n 3 | sed 's/^/    vm:   /'
    fi
}

# One run of a case; sets r (pass|fail), h and v (exit codes) and tag.
run_once() {
    local label=$1 vmcmd=$2 ours=$3 kind=$4 role=$5 backend=$6 imp=$7
    local vmopts=() extra=()
    tag=$(echo "$label-$role-$backend-$imp" | tr -c 'A-Za-z0-9_.-' '_')
    [ "$backend" = afxdp ] && extra+=(--backend afxdp --dev br-rxe)
    [ "$imp" = tx-loss ] && extra+=(--tx-loss 0.1)
    [ "$imp" = vm-loss ] && vmopts+=(-e 'loss 10%')
    # shellcheck disable=SC2206
    [ -n "${HOST_EXTRA:-}" ] && extra+=($HOST_EXTRA)
    if [ "$role" = softrdma-server ]; then
        [ "$kind" = perftest ] && extra+=(--server)
        # shellcheck disable=SC2086
        timeout 300 "$bin" $ours "${extra[@]}" >"$logs/$tag.host" 2>&1 &
        local pid=$!
        sleep 0.3
        timeout 300 bash "$vm/run-vm.sh" -t 280 "${vmopts[@]}" -n 1 -- "$(vm_watch "$vmcmd $host")" >"$logs/$tag.vm" 2>&1
        v=$?
        # Once the VM is done, softrdma has a few seconds to finish (not the whole timeout).
        (sleep 15; kill "$pid" 2>/dev/null) &
        local reaper=$!
        wait "$pid"; h=$?
        kill "$reaper" 2>/dev/null; wait "$reaper" 2>/dev/null
    else
        if [ "$kind" = perftest ]; then extra+=(--connect "$guest"); else extra+=("$guest"); fi
        timeout 300 bash "$vm/run-vm.sh" -t 280 "${vmopts[@]}" -n 1 -- "$(vm_watch "$vmcmd")" >"$logs/$tag.vm" 2>&1 &
        local pid=$!
        # The client retries while the VM boots (up to 60 s, as the stock clients do).
        # shellcheck disable=SC2086
        timeout 300 "$bin" $ours "${extra[@]}" >"$logs/$tag.host" 2>&1
        h=$?
        wait "$pid"; v=$?
    fi
    r=fail
    [ "$v" = 0 ] && [ "$h" = 0 ] && r=pass
}

both_roles() { # label vmcmd ours kind backend impairment
    run_case "$1" "$2" "$3" "$4" softrdma-server "$5" "$6"
    run_case "$1" "$2" "$3" "$4" softrdma-client "$5" "$6"
}

pingpongs() { # backend impairment (RC only when impaired)
    local b=$1 i=$2 t s
    for t in rc uc; do
        [ "$i" != none ] && [ "$t" != rc ] && continue
        for s in 1 64 4096 65536; do
            both_roles "ibv_${t}_pingpong -s $s" "ibv_${t}_pingpong -d rxe0 -g 1 -n 100 -s $s -m 1024 -c" \
                "pingpong $t -n 100 -s $s -m 1024 -c" pingpong "$b" "$i"
        done
    done
    [ "$i" != none ] && return
    # ibv_ud_pingpong has no -m: its messages fit the port's active MTU (1024 on br-rxe).
    for s in 1 64 1024; do
        both_roles "ibv_ud_pingpong -s $s" "ibv_ud_pingpong -d rxe0 -g 1 -n 100 -s $s -c" \
            "pingpong ud -n 100 -s $s -m 1024 -c" pingpong "$b" "$i"
    done
}

perftests() { # backend impairment
    local b=$1 i=$2 n=$iters
    local pt="-d rxe0 -x 1 -F -n $n"
    for s in "" 4096; do
        local vs="" os="" l=""
        [ -n "$s" ] && { vs="-s $s"; os="--size $s"; l=" -s $s"; }
        both_roles "ib_write_bw$l" "ib_write_bw $pt $vs" "perf write --perftest --iters $n $os" perftest "$b" "$i"
        both_roles "ib_read_bw$l" "ib_read_bw $pt $vs" "perf read --perftest --iters $n $os" perftest "$b" "$i"
        both_roles "ib_send_bw$l" "ib_send_bw $pt $vs" "perf send --perftest --iters $n $os" perftest "$b" "$i"
    done
    both_roles "ib_atomic_bw -A FETCH_AND_ADD" "ib_atomic_bw $pt -A FETCH_AND_ADD" \
        "perf atomic --perftest --iters $n --atomic fetch-add" perftest "$b" "$i"
    both_roles "ib_atomic_bw -A CMP_AND_SWAP" "ib_atomic_bw $pt -A CMP_AND_SWAP" \
        "perf atomic --perftest --iters $n --atomic cmp-swap" perftest "$b" "$i"
    both_roles "ib_write_lat" "ib_write_lat $pt" "perf write --perftest --mode lat --iters $n" perftest "$b" "$i"
    both_roles "ib_read_lat" "ib_read_lat $pt" "perf read --perftest --mode lat --iters $n" perftest "$b" "$i"
    both_roles "ib_send_lat" "ib_send_lat $pt" "perf send --perftest --mode lat --iters $n" perftest "$b" "$i"
}

if [ "${1:-}" = quick ]; then
    both_roles "ibv_rc_pingpong -s 4096" "ibv_rc_pingpong -d rxe0 -g 1 -n 100 -s 4096 -m 1024 -c" \
        "pingpong rc -n 100 -s 4096 -m 1024 -c" pingpong udp none
    both_roles "ib_write_bw" "ib_write_bw -d rxe0 -x 1 -F -n $iters" "perf write --perftest --iters $iters" \
        perftest udp none
    both_roles "ib_send_lat" "ib_send_lat -d rxe0 -x 1 -F -n $iters" \
        "perf send --perftest --mode lat --iters $iters" perftest afxdp none
else
    for b in ${BACKENDS:-udp afxdp}; do
        for i in ${IMPAIRMENTS:-none vm-loss tx-loss}; do
            pingpongs "$b" "$i"
            perftests "$b" "$i"
        done
    done
fi
echo "interop-rxe: $pass passed, $fail failed, $reruns run again after a VM egress stall (logs in $logs)"
for f in "${failed[@]}"; do echo "  failed: $f"; done
[ "$fail" = 0 ]
