#!/usr/bin/env bash
# Runs an MPI job of two ranks across two network namespaces joined by a veth pair (MTU 9000), one
# rank in each, over softrdma's libfabric provider: Open MPI's mpirun runs in the first namespace
# under `softrdma run`, and its rsh launcher reaches the second through an agent that enters that
# namespace under `softrdma run` too (this script, called as `mpi-netns.sh --agent HOST WORDS...`).
# The program is unmodified; the provider is chosen with Open MPI's own MCA parameters.
#
#   scripts/mpi-netns.sh [OPTIONS] -- MPIRUN-ARGS...
#
#   --backend udp|afxdp  the provider's datapath (default udp; afxdp: generic XDP on each veth end)
#   --tss                seal every packet with TSS (a key file made for the run)
#   --job-id N           the job's JobID (default: the one `softrdma run` assigns, which the
#                        second namespace's launcher inherits through the environment)
#   --net A.B.C          the namespaces' /24 (default 10.97.0): rank 0 at .1, rank 1 at .2
#   --softrdma PATH      the softrdma binary (default: $SOFTRDMA, else target/release/softrdma,
#                        else target/debug/softrdma)
#
# MPIRUN-ARGS follow the launch options (the MCA parameters that select the route, then the
# program), e.g.
#   scripts/mpi-netns.sh -- --mca pml cm --mca mtl ofi python3 -m mpi4py.bench ringtest
#   scripts/mpi-netns.sh --backend afxdp --tss -- --mca pml ob1 --mca btl self,ofi \
#       python3 -m mpi4py.bench helloworld
# The script adds `--mca mtl_ofi_provider_include "${MPI_NETNS_PROVIDER:-softrdma}" --mca btl_ofi_provider_include "${MPI_NETNS_PROVIDER:-softrdma}"`
# (libfabric's other providers would otherwise be as eligible) and Open MPI's launch options for
# namespaces: the agent, no tree spawn, the out-of-band channel on the veth, no binding to cores.
# Needs root, iproute2 and Open MPI (`openmpi-bin`; mpi4py programs: `python3-mpi4py`). The exit
# status is mpirun's.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if [ "${1:-}" = "--agent" ]; then
    # Called by mpirun's rsh launcher: HOST, then the words of one shell command (as with ssh).
    shift
    host="$1"
    shift
    if [ "$host" != "$MPI_NETNS_HOST_B" ]; then
        echo "mpi-netns.sh --agent: unknown host $host (only $MPI_NETNS_HOST_B is remote)" >&2
        exit 255
    fi
    exec ip netns exec "$MPI_NETNS_B" "$MPI_NETNS_SOFTRDMA" run --backend "$MPI_NETNS_BACKEND" \
        --dev "$MPI_NETNS_VB" --no-verbs -- sh -c "$*"
fi

backend=udp
tss=0
job_id=""
net=10.97.0
softrdma="${SOFTRDMA:-}"
while [ $# -gt 0 ]; do
    case "$1" in
    --backend) backend="$2"; shift 2 ;;
    --tss) tss=1; shift ;;
    --job-id) job_id="$2"; shift 2 ;;
    --net) net="$2"; shift 2 ;;
    --softrdma) softrdma="$2"; shift 2 ;;
    --) shift; break ;;
    *) echo "mpi-netns.sh: unknown option $1 (see the comment at the top of $0)" >&2; exit 2 ;;
    esac
done
if [ $# -eq 0 ]; then
    echo "mpi-netns.sh: nothing to run: mpi-netns.sh [OPTIONS] -- MPIRUN-ARGS... PROGRAM" >&2
    exit 2
fi
case "$backend" in udp | afxdp) ;; *) echo "mpi-netns.sh: --backend udp or afxdp" >&2; exit 2 ;; esac
if [ -z "$softrdma" ]; then
    for c in "$here/../target/release/softrdma" "$here/../target/debug/softrdma"; do
        if [ -x "$c" ]; then softrdma="$c"; break; fi
    done
fi
if [ -z "$softrdma" ] || [ ! -x "$softrdma" ]; then
    echo "mpi-netns.sh: no softrdma binary (cargo build --release -p softrdma, or --softrdma PATH)" >&2
    exit 2
fi
softrdma="$(cd "$(dirname "$softrdma")" && pwd)/$(basename "$softrdma")"
for tool in ip mpirun; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "mpi-netns.sh: $tool is missing (scripts/setup.sh installs it)" >&2
        exit 2
    fi
done

id=$$
ns_a="mpi-a-$id" ns_b="mpi-b-$id" va="mpia$id" vb="mpib$id"
work="$(mktemp -d "${TMPDIR:-/tmp}/mpi-netns.XXXXXX")"
cleanup() {
    ip netns del "$ns_a" 2>/dev/null || true
    ip netns del "$ns_b" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
ip netns add "$ns_a"
ip netns add "$ns_b"
ip link add "$va" type veth peer name "$vb"
ip link set "$va" netns "$ns_a"
ip link set "$vb" netns "$ns_b"
for side in "$ns_a $va 1" "$ns_b $vb 2"; do
    read -r ns dev host <<<"$side"
    ip -n "$ns" addr add "$net.$host/24" dev "$dev"
    ip -n "$ns" link set "$dev" mtu 9000 up
    ip -n "$ns" link set lo up
done

env_vars=()
if [ "$tss" = 1 ]; then
    # The secure domain's key, readable by its owner only (the provider refuses others); each
    # process takes the next epoch from the file beside it.
    (umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/tss.key")
    env_vars+=("SOFTRDMA_TSS_KEY_FILE=$work/tss.key")
fi
run_opts=(--backend "$backend" --dev "$va" --no-verbs)
if [ -n "$job_id" ]; then run_opts+=(--job-id "$job_id"); fi

export MPI_NETNS_B="$ns_b" MPI_NETNS_VB="$vb" MPI_NETNS_HOST_B="$net.2"
export MPI_NETNS_SOFTRDMA="$softrdma" MPI_NETNS_BACKEND="$backend"
printf '#!/bin/sh\nexec %q --agent "$@"\n' "$here/mpi-netns.sh" >"$work/agent"
chmod +x "$work/agent"

set +e
ip netns exec "$ns_a" env "${env_vars[@]}" "$softrdma" run "${run_opts[@]}" -- \
    mpirun --allow-run-as-root -np 2 --host "localhost,$net.2" --bind-to none \
    --mca plm_rsh_agent "$work/agent" --mca plm_rsh_no_tree_spawn 1 \
    --mca oob_tcp_if_include "$net.0/24" --mca btl_tcp_if_include "$net.0/24" \
    --mca mtl_ofi_provider_include "${MPI_NETNS_PROVIDER:-softrdma}" --mca btl_ofi_provider_include "${MPI_NETNS_PROVIDER:-softrdma}" \
    "$@"
status=$?
set -e
exit $status
