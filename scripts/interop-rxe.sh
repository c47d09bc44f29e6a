#!/usr/bin/env bash
# softrdma against the Linux kernel's Soft-RoCE (rdma_rxe) and rdma-core's ibv_*_pingpong, in the VM of
# ../shared/interop/rxe-vm (root). Builds the VM image if needed, brings up br-rxe (host 10.77.0.1, VM
# 10.77.0.2), runs the matrix, prints one line per case and a summary; exits non-zero if a case failed.
#
#   scripts/interop-rxe.sh [quick]     quick: RC pingpong, 4096 bytes, both roles (what .ci/run runs)
set -uo pipefail
cd "$(dirname "$0")/.."
shared=${SHARED:-../shared}
vm=$shared/interop/rxe-vm
[ "$(id -u)" = 0 ] || { echo "interop-rxe: needs root (bridge, tap, QEMU)"; exit 2; }
bash "$vm/build.sh" >/dev/null || { echo "interop-rxe: building the VM image failed"; exit 2; }
bash "$vm/net.sh" up >/dev/null 2>&1 || true
cargo build --release -q -p engine || exit 2
bin=target/release/softrdma
pass=0; fail=0

case_line() { # tool role size result seconds
    printf '%-18s %-22s size %-6s %-4s %5.1fs\n' "$1" "$2" "$3" "$4" "$5"
    if [ "$4" = pass ]; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
}

# softrdma serves on the host, the stock tool in the VM connects.
vm_client() { # transport size
    local t=$1 s=$2 start=$SECONDS out
    out=$(mktemp)
    timeout 120 "$bin" pingpong "$t" -n 100 -s "$s" -m 1024 >"$out" 2>&1 &
    local pid=$!
    sleep 0.3
    timeout 200 bash "$vm/run-vm.sh" -n 1 -- "ibv_${t}_pingpong -d rxe0 -g 1 -n 100 -s $s -m 1024 10.77.0.1" >/dev/null 2>&1
    local v=$?
    wait "$pid"; local h=$?
    [ $v = 0 ] && [ $h = 0 ] && r=pass || r=fail
    case_line "ibv_${t}_pingpong" "softrdma server" "$s" "$r" "$((SECONDS - start))"
    rm -f "$out"
}

# The stock tool serves in the VM, softrdma connects from the host once the VM is up.
vm_server() { # transport size
    local t=$1 s=$2 start=$SECONDS out
    out=$(mktemp)
    timeout 200 bash "$vm/run-vm.sh" -n 1 -- "ibv_${t}_pingpong -d rxe0 -g 1 -n 100 -s $s -m 1024" >"$out" 2>&1 &
    local pid=$!
    # Connect once the VM is up and the tool listens (a refused or unanswered connection is retried).
    local h=1 until=$((SECONDS + 180))
    while [ $SECONDS -lt $until ]; do
        timeout 20 "$bin" pingpong "$t" 10.77.0.2 -n 100 -s "$s" -m 1024 >/dev/null 2>&1 && { h=0; break; }
        sleep 0.5
    done
    wait "$pid"; local v=$?
    [ $v = 0 ] && [ $h = 0 ] && r=pass || r=fail
    case_line "ibv_${t}_pingpong" "softrdma client" "$s" "$r" "$((SECONDS - start))"
    rm -f "$out"
}

if [ "${1:-}" = quick ]; then
    vm_client rc 4096
    vm_server rc 4096
else
    for t in rc uc; do
        for s in 1 64 4096 65536; do vm_client "$t" "$s"; vm_server "$t" "$s"; done
    done
    for s in 1 64 1024; do vm_client ud "$s"; vm_server ud "$s"; done
fi
echo "interop-rxe: $pass passed, $fail failed"
[ "$fail" = 0 ]
