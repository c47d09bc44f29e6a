#!/usr/bin/env bash
# softrdma against the Linux kernel's Soft-RoCE (rdma_rxe) driven by the stock rdma-core and perftest
# tools, in the VM of ../shared/interop/rxe-vm (root). Builds the VM image if needed, brings up br-rxe
# (host 10.77.0.1, VM 10.77.0.2), runs the matrix, prints one line per case (tool, role, backend,
# impairment, pass/fail, seconds) and a summary; exits non-zero if a case failed.
#
# Three kinds of host peer face the stock tool in the VM; the role column names the kind and the
# host's role:
#   softrdma-server/-client   softrdma's own tools: `softrdma pingpong` and `softrdma perf --perftest`
#   verbs-server/-client      the same stock binary on the host, unmodified, under
#                             `softrdma run --backend B --dev br-rxe --local 10.77.0.1 -- TOOL ...`
#                             (device softrdma_br-rxe, GID index 1), i.e. softrdma's libibverbs library
#   cm-server/-client         rdma_cm programs (rping, udaddy, ucmatose, perftest -R) the same way:
#                             connected by softrdma's connection manager and the VM kernel's
#
#   scripts/interop-rxe.sh            the whole matrix: ibv_{rc,uc,ud}_pingpong -c and ib_{write,read,send,
#                                     atomic}_bw, ib_{write,read,send}_lat, both roles, UDP and AF_XDP,
#                                     and the RC cases again with 10% loss on the VM's egress (netem)
#                                     and on softrdma's (--tx-loss 0.1); for the verbs peer also
#                                     ibv_srq_pingpong, ibv_rc_pingpong -e and ib_atomic_lat, and no
#                                     tx-loss (softrdma run has no loss option); for the cm peer
#                                     rping, ucmatose -c 4, ib_write_bw -R, ib_send_bw -R, and
#                                     udaddy (unimpaired only)
#   scripts/interop-rxe.sh quick      both roles of ibv_rc_pingpong -s 4096 and ib_write_bw over UDP and
#                                     of ib_send_lat over AF_XDP; with the verbs peer, both roles of
#                                     ibv_rc_pingpong -s 4096 and the verbs client of ib_write_bw over
#                                     UDP, and both roles of rping -C 20 over UDP (what .ci/run runs)
#
# Environment: BACKENDS (default "udp afxdp"), IMPAIRMENTS (default "none vm-loss tx-loss"),
# PEERS (default "pingpong perftest verbs cm": which host peers the full matrix runs),
# FILTER (a grep -E pattern on "tool role backend impairment", e.g. FILTER=verbs),
# ITERS (perftest iterations, 200), HOST_EXTRA (more arguments for every softrdma pingpong/perf case;
# the verbs peer reads its settings from the environment instead, e.g. SOFTRDMA_RX_ICRC).
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
# ... and the libibverbs library `softrdma run` preloads, which it finds beside the binary.
cp target/release/deps/libsoftrdma_ibverbs.so "$logs/libsoftrdma_ibverbs.so" || exit 2
bin=$logs/softrdma
# The VM image has rping, udaddy and rdma_server/rdma_client but not ucmatose: the host's (Debian's
# rdmacm-utils, the same release) goes in with run-vm.sh -x.
mkdir -p "$logs/vmbin"
cp /usr/bin/ucmatose "$logs/vmbin/" 2>/dev/null || true
host=10.77.0.1
guest=10.77.0.2
iters=${ITERS:-200}
pass=0; fail=0; failed=(); reruns=0

# The VM's command runs under a watchdog: in software emulation the VM's own NIC sometimes stops
# transmitting during long runs with 10 % netem loss (eth0's tx_packets freezes, the host's tap sees
# nothing more, even ping from the VM fails: see engine/cli/docs/interop.md). When the tool is alive, eth0 sent nothing
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
# (server form; for "verbs", the host's tool command), $4 "pingpong", "perftest" or "verbs", $5 role
# (softrdma-server|softrdma-client|verbs-server|verbs-client), $6 backend, $7 impairment.
run_case() {
    local label=$1 role=$5 backend=$6 imp=$7
    if [ -n "${FILTER:-}" ] && ! echo "$label $role $backend $imp" | grep -qE "$FILTER"; then return; fi
    local t0=$SECONDS
    run_once "$@"
    if [ "$r" = fail ] && grep -q "VM egress stalled" "$logs/$tag.vm"; then
        reruns=$((reruns + 1))
        cp "$logs/$tag.vm" "$logs/$tag.stalled.vm"
        echo "    $label $role $backend $imp: the VM's egress stalled (environment fault, see engine/cli/docs/interop.md; log in $logs/$tag.stalled.vm): running the case again"
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
    local vmopts=() extra=() cmd
    tag=$(echo "$label-$role-$backend-$imp" | tr -c 'A-Za-z0-9_.-' '_')
    [ "$imp" = vm-loss ] && vmopts+=(-e 'loss 10%')
    [ "$kind" = cm ] && vmopts+=(-x "$logs/vmbin")
    if [ "$kind" = verbs ] || [ "$kind" = cm ]; then
        # shellcheck disable=SC2206
        cmd=("$bin" run --backend "$backend" --dev br-rxe --local "$host" -- $ours)
    else
        [ "$backend" = afxdp ] && extra+=(--backend afxdp --dev br-rxe)
        [ "$imp" = tx-loss ] && extra+=(--tx-loss 0.1)
        # shellcheck disable=SC2206
        [ -n "${HOST_EXTRA:-}" ] && extra+=($HOST_EXTRA)
        [ "$kind" = perftest ] && [ "$role" = softrdma-server ] && extra+=(--server)
        # shellcheck disable=SC2206
        cmd=("$bin" $ours "${extra[@]}")
    fi
    if [ "${role#*-}" = server ]; then
        local vpid=
        if [ "$kind" = verbs ] || [ "$kind" = cm ]; then
            # The device's port is down, as rxe's would be, while br-rxe has no carrier, and perftest
            # refuses a port that is down: the VM starts first (QEMU brings the link up at once,
            # long before the guest's client connects).
            wait_link down
            if [ "$kind" = cm ]; then run_vm "$vmcmd" & else run_vm "$vmcmd $host" & fi
            vpid=$!
            wait_link up
        fi
        timeout 300 "${cmd[@]}" >"$logs/$tag.host" 2>&1 &
        local pid=$!
        if [ -n "$vpid" ]; then
            wait "$vpid"; v=$?
        else
            sleep 0.3
            run_vm "$vmcmd $host"; v=$?
        fi
        # Once the VM is done, softrdma has a few seconds to finish (not the whole timeout).
        (sleep 15; kill "$pid" 2>/dev/null) &
        local reaper=$!
        wait "$pid"; h=$?
        kill "$reaper" 2>/dev/null; wait "$reaper" 2>/dev/null
    else
        if [ "$kind" = perftest ]; then cmd+=(--connect "$guest"); elif [ "$kind" != cm ]; then cmd+=("$guest"); fi
        if [ "$kind" = cm ]; then
            # An rdma_cm client whose server is not up yet fails at once: while the VM boots and
            # its program starts (the address does not resolve yet: ADDR_ERROR; no listener yet:
            # a REJ with reason 8, or for UD a SIDR lookup that fails), run it again, for up to
            # 120 s.
            wait_link down
            setsid timeout 300 bash "$vm/run-vm.sh" -t 280 "${vmopts[@]}" -n 1 -- "$(vm_watch "$vmcmd")" \
                >"$logs/$tag.vm" 2>&1 &
            local pid=$!
            wait_link up
            local end=$((SECONDS + 120)) early=0
            while :; do
                timeout 300 "${cmd[@]}" >"$logs/$tag.host" 2>&1
                h=$?
                if [ "$h" != 0 ] && [ "$SECONDS" -lt "$end" ] &&
                    grep -qE "REJECTED.{0,12}8\b|RDMA_CM_EVENT_(UNREACHABLE|ADDR_ERROR)|Unexpected CM event bl blka [178]|-113" "$logs/$tag.host"; then
                    early=$((early + 1))
                    sleep 1
                    continue
                fi
                echo "interop-rxe: $early earlier attempts found the VM's program not up yet" >>"$logs/$tag.host"
                break
            done
            (sleep 30; stop_vm "$pid") &
            local reaper=$!
            wait "$pid"; v=$?
            kill "$reaper" 2>/dev/null; wait "$reaper" 2>/dev/null
            # The VM's session is over; a QEMU the reaper's kill did not reach goes now.
            stop_vm "$pid"
        elif [ "$kind" = verbs ]; then
            wait_link down
            # In a session of its own, so that the whole VM (QEMU included) can be ended below.
            setsid timeout 300 bash "$vm/run-vm.sh" -t 280 "${vmopts[@]}" -n 1 -- "$(vm_watch "$vmcmd")" \
                >"$logs/$tag.vm" 2>&1 &
            local pid=$!
            wait_link up
            stock_client "${cmd[@]}"
            # Once the host's client is done, the VM's server has a few seconds to finish: a client
            # that failed early must not leave it waiting for the whole time limit.
            (sleep 30; stop_vm "$pid") &
            local reaper=$!
            wait "$pid"; v=$?
            kill "$reaper" 2>/dev/null; wait "$reaper" 2>/dev/null
            # The VM's session is over; a QEMU the reaper's kill did not reach goes now.
            stop_vm "$pid"
        else
            run_vm "$vmcmd" &
            local pid=$!
            # softrdma's client retries while the VM boots (up to 60 s, as the stock clients do).
            timeout 300 "${cmd[@]}" >"$logs/$tag.host" 2>&1
            h=$?
            wait "$pid"; v=$?
        fi
    fi
    r=fail
    [ "$v" = 0 ] && [ "$h" = 0 ] && r=pass
}

# Ends a VM started in a session of its own (pid): its process group, and QEMU, which run-vm.sh's
# `timeout` put in a group of its own; waits (up to 10 s) until QEMU has let go of tap-rxe1.
stop_vm() {
    local _
    kill -- "-$1" 2>/dev/null
    pkill -f 'ifname=tap-rxe1' 2>/dev/null
    for _ in $(seq 100); do
        pgrep -f 'ifname=tap-rxe1' >/dev/null || return 0
        sleep 0.1
    done
}

# The VM, running command (under the watchdog); its console goes to the case's .vm log.
run_vm() {
    timeout 300 bash "$vm/run-vm.sh" -t 280 "${vmopts[@]}" -n 1 -- "$(vm_watch "$1")" >"$logs/$tag.vm" 2>&1
}

# Waits (up to 60 s) until br-rxe's operstate is $1 (up once the VM's QEMU has opened its tap,
# down once it has closed it: the kernel reports either with up to a second's delay).
wait_link() {
    local _
    for _ in $(seq 600); do
        [ "$(cat /sys/class/net/br-rxe/operstate 2>/dev/null)" = "$1" ] && return
        sleep 0.1
    done
}

# A stock client on the host (command...): it connects to the VM's server once and gives up with
# "Couldn't connect to" when nothing listens yet, so while the VM boots (up to 120 s) a refused
# attempt, which the server never saw, is made again. Sets h; the last attempt's output is the log.
stock_client() {
    local end=$((SECONDS + 120)) refused=0
    while :; do
        timeout 300 "$@" >"$logs/$tag.host" 2>&1
        h=$?
        if [ "$h" != 0 ] && [ "$SECONDS" -lt "$end" ] && grep -q "Couldn't connect to" "$logs/$tag.host"; then
            refused=$((refused + 1))
            sleep 1
            continue
        fi
        echo "interop-rxe: $refused earlier attempts found no server listening in the VM" >>"$logs/$tag.host"
        return
    done
}

both_roles() { # label vmcmd ours kind backend impairment
    local p=softrdma
    [ "$4" = verbs ] && p=verbs
    [ "$4" = cm ] && p=cm
    run_case "$1" "$2" "$3" "$4" $p-server "$5" "$6"
    run_case "$1" "$2" "$3" "$4" $p-client "$5" "$6"
}

# The verbs peer: the VM's stock command run on the host under `softrdma run`, on softrdma's device.
verbs_roles() { # label vmcmd backend impairment
    both_roles "$1" "$2" "${2//rxe0/softrdma_br-rxe}" verbs "$3" "$4"
}

# The cm peer: an rdma_cm program on both sides (the host's under `softrdma run`), connected by the
# connection managers (MADs on QP1). ADDR in the client's command is the server's address.
cm_roles() { # label server-cmd client-cmd backend impairment
    local hs=${2//rxe0/softrdma_br-rxe} hc=${3//rxe0/softrdma_br-rxe}
    run_case "$1" "${3//ADDR/$host}" "$hs" cm cm-server "$4" "$5"
    run_case "$1" "$2" "${hc//ADDR/$guest}" cm cm-client "$4" "$5"
}

# rping, udaddy, ucmatose and perftest's rdma_cm mode (kind cm; RC only when impaired).
# Under VM loss the perftest cases move 4 KiB messages: rxe's RC ACK timeout on an rdma_cm QP is
# its CM's (cm_ack_timeout of the REP's target ACK delay 15 and RoCE's packet lifetime 16: 17,
# 0.54 s, not perftest's -u 14), and with rxe as the requester most losses wait one out: 200 x
# 4 KiB take about 40 s (0.02 MB/s), 200 x 64 KiB would take ten minutes.
cms() { # backend impairment
    local b=$1 i=$2 pt="-d rxe0 -x 1 -F -n $iters -R"
    [ "$i" = tx-loss ] && return
    [ "$i" = none ] || pt+=" -s 4096"
    cm_roles "rping -C 100" "rping -s -C 100" "rping -c -a ADDR -C 100 -v" "$b" "$i"
    cm_roles "ucmatose -c 4" "ucmatose -c 4" "ucmatose -s ADDR -c 4" "$b" "$i"
    cm_roles "ib_write_bw -R" "ib_write_bw $pt" "ib_write_bw $pt ADDR" "$b" "$i"
    cm_roles "ib_send_bw -R" "ib_send_bw $pt" "ib_send_bw $pt ADDR" "$b" "$i"
    [ "$i" = none ] && cm_roles "udaddy" "udaddy" "udaddy -s ADDR" "$b" "$i"
    return 0
}

# ibv_*_pingpong against `softrdma pingpong` (kind pingpong) or under `softrdma run` (kind verbs).
pingpongs() { # kind backend impairment (RC only when impaired)
    local k=$1 b=$2 i=$3 t s
    [ "$k" = verbs ] && [ "$i" = tx-loss ] && return
    for t in rc uc; do
        [ "$i" != none ] && [ "$t" != rc ] && continue
        for s in 1 64 4096 65536; do
            local vc="ibv_${t}_pingpong -d rxe0 -g 1 -n 100 -s $s -m 1024 -c"
            if [ "$k" = verbs ]; then
                verbs_roles "ibv_${t}_pingpong -s $s" "$vc" "$b" "$i"
            else
                both_roles "ibv_${t}_pingpong -s $s" "$vc" "pingpong $t -n 100 -s $s -m 1024 -c" pingpong "$b" "$i"
            fi
        done
    done
    if [ "$k" = verbs ]; then
        # Completion events, and a shared receive queue (16 RC QPs): stock tool on both sides only.
        verbs_roles "ibv_rc_pingpong -s 4096 -e" "ibv_rc_pingpong -d rxe0 -g 1 -n 100 -s 4096 -m 1024 -c -e" "$b" "$i"
        verbs_roles "ibv_srq_pingpong -s 4096" "ibv_srq_pingpong -d rxe0 -g 1 -n 100 -s 4096 -m 1024" "$b" "$i"
    fi
    [ "$i" != none ] && return
    # ibv_ud_pingpong has no -m: its messages fit the port's active MTU (1024 on br-rxe).
    for s in 1 64 1024; do
        local vc="ibv_ud_pingpong -d rxe0 -g 1 -n 100 -s $s -c"
        if [ "$k" = verbs ]; then
            verbs_roles "ibv_ud_pingpong -s $s" "$vc" "$b" "$i"
        else
            both_roles "ibv_ud_pingpong -s $s" "$vc" "pingpong ud -n 100 -s $s -m 1024 -c" pingpong "$b" "$i"
        fi
    done
}

# perftest against `softrdma perf --perftest` (kind perftest) or under `softrdma run` (kind verbs).
perftests() { # kind backend impairment
    local k=$1 b=$2 i=$3 n=$iters
    local pt="-d rxe0 -x 1 -F -n $n"
    [ "$k" = verbs ] && [ "$i" = tx-loss ] && return
    # case label vmcmd ours(softrdma perf arguments)
    pcase() {
        if [ "$k" = verbs ]; then verbs_roles "$1" "$2" "$b" "$i"; else both_roles "$1" "$2" "$3" perftest "$b" "$i"; fi
    }
    for s in "" 4096; do
        local vs="" os="" l=""
        [ -n "$s" ] && { vs="-s $s"; os="--size $s"; l=" -s $s"; }
        pcase "ib_write_bw$l" "ib_write_bw $pt $vs" "perf write --perftest --iters $n $os"
        pcase "ib_read_bw$l" "ib_read_bw $pt $vs" "perf read --perftest --iters $n $os"
        pcase "ib_send_bw$l" "ib_send_bw $pt $vs" "perf send --perftest --iters $n $os"
    done
    pcase "ib_atomic_bw -A FETCH_AND_ADD" "ib_atomic_bw $pt -A FETCH_AND_ADD" \
        "perf atomic --perftest --iters $n --atomic fetch-add"
    pcase "ib_atomic_bw -A CMP_AND_SWAP" "ib_atomic_bw $pt -A CMP_AND_SWAP" \
        "perf atomic --perftest --iters $n --atomic cmp-swap"
    pcase "ib_write_lat" "ib_write_lat $pt" "perf write --perftest --mode lat --iters $n"
    pcase "ib_read_lat" "ib_read_lat $pt" "perf read --perftest --mode lat --iters $n"
    pcase "ib_send_lat" "ib_send_lat $pt" "perf send --perftest --mode lat --iters $n"
    # softrdma perf has no atomic latency mode; the stock tool under softrdma run does.
    [ "$k" = verbs ] && pcase "ib_atomic_lat" "ib_atomic_lat $pt"
    return 0
}

if [ "${1:-}" = quick ]; then
    both_roles "ibv_rc_pingpong -s 4096" "ibv_rc_pingpong -d rxe0 -g 1 -n 100 -s 4096 -m 1024 -c" \
        "pingpong rc -n 100 -s 4096 -m 1024 -c" pingpong udp none
    both_roles "ib_write_bw" "ib_write_bw -d rxe0 -x 1 -F -n $iters" "perf write --perftest --iters $iters" \
        perftest udp none
    both_roles "ib_send_lat" "ib_send_lat -d rxe0 -x 1 -F -n $iters" \
        "perf send --perftest --mode lat --iters $iters" perftest afxdp none
    verbs_roles "ibv_rc_pingpong -s 4096" "ibv_rc_pingpong -d rxe0 -g 1 -n 100 -s 4096 -m 1024 -c" udp none
    vc="ib_write_bw -d rxe0 -x 1 -F -n $iters"
    run_case "ib_write_bw" "$vc" "${vc//rxe0/softrdma_br-rxe}" verbs verbs-client udp none
    cm_roles "rping -C 20" "rping -s -C 20" "rping -c -a ADDR -C 20 -v" udp none
else
    for b in ${BACKENDS:-udp afxdp}; do
        for i in ${IMPAIRMENTS:-none vm-loss tx-loss}; do
            for k in ${PEERS:-pingpong perftest verbs cm}; do
                case $k in
                    pingpong) pingpongs pingpong "$b" "$i" ;;
                    perftest) perftests perftest "$b" "$i" ;;
                    verbs) pingpongs verbs "$b" "$i"; perftests verbs "$b" "$i" ;;
                    cm) cms "$b" "$i" ;;
                    *) echo "interop-rxe: PEERS: unknown peer $k (pingpong, perftest, verbs or cm)"; exit 2 ;;
                esac
            done
        done
    done
fi
echo "interop-rxe: $pass passed, $fail failed, $reruns run again after a VM egress stall (logs in $logs)"
for f in "${failed[@]}"; do echo "  failed: $f"; done
[ "$fail" = 0 ]
