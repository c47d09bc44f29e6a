#!/usr/bin/env bash
# Where the time of `softrdma perf write --transport rud --tss` goes, in units of the AEAD
# baseline's time for the same bytes (= 100), from perf samples of one run (issue 10's budget: 70 %
# of the baseline allows 143 units in all).
#
# The run interleaves its baseline (perf::uet::AeadBaseline), so one recording holds both: samples
# whose stack holds `AeadBaseline` are the baseline, those under `perf::uet::timed` the harness
# (making and checking messages, which engine time leaves out), and the rest of
# `UetBench::run_bw` the run. The run's samples are grouped by leaf (the AEAD's bulk and per-call
# work, the receive copy) and else by the innermost frame that names a protocol step.
#
#   scripts/tss-profile.sh                    # 20000 messages of 64 KiB
#   scripts/tss-profile.sh --iters 5000       # any further perf arguments
#
# Needs perf (Debian's linux-perf; installed here when missing and running as root) and python3.
# Builds a frame-pointer, full-debuginfo binary in target/fp (inlined frames get their names).
#
# Measured on the plain release build (the floor, the same messages sealed, opened and copied out
# with no protocol, is about 95 % of the baseline): AEAD ~106 units (the plain loop's 100: each data
# packet seals 4,152 bytes in two pieces, headers in place and payload scattered, and a response per
# message), receive copy ~12, protocol of both ends ~31, spread over a dozen steps none above 9.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v perf >/dev/null 2>&1; then
    [ "$(id -u)" -eq 0 ] || { echo "perf is missing: apt-get install linux-perf" >&2; exit 2; }
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq linux-perf >/dev/null
fi
RUSTFLAGS="-C force-frame-pointers=yes -g" CARGO_TARGET_DIR=target/fp cargo build --release -q -p softrdma
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--iters 20000)
perf record -q -o "$work/perf.data" --call-graph dwarf,16384 -F 5000 \
    target/fp/release/softrdma perf write --transport rud --tss "${args[@]}" | grep -E "this run|verified"
perf script -i "$work/perf.data" -F ip,sym 2>/dev/null >"$work/stacks.txt"
python3 - "$work/stacks.txt" <<'EOF'
import collections, sys

# The innermost frame naming one of these decides a protocol sample's group.
STEPS = [
    ("receive: SES and PDS (handle_packet_ecn)", "handle_packet_ecn"),
    ("receive: Ethernet/IP/UDP parse", "parse_udp"),
    ("receive: TSS open wrapper", "SecureDomain::open"),
    ("receive: UetNode open/deliver", "UetNode<D>::open"),
    ("receive: UetNode open/deliver", "UetNode<D>::deliver"),
    ("send: bodies built at post (write_src)", "write_src"),
    ("send: PDS queue and headers (poll_transmit_split)", "poll_transmit_split"),
    ("send: ACKs taken (TxHalf::on_ack)", "TxHalf::on_ack"),
    ("send: TSS seal wrapper", "SecureDomain::seal_scatter"),
    ("send: UetNode send/transmit_all", "UetNode<D>::send"),
    ("send: UetNode send/transmit_all", "transmit_all"),
    ("send: frame headers (UdpTemplate)", "UdpTemplate::write"),
    ("timers (poll_timeout)", "poll_timeout"),
    ("simulated network", "nicsim::"),
    ("simulated network", "SimPort"),
    ("the loop and completions", "initiator_completions"),
    ("the loop and completions", "Initiator<D>::post"),
    ("the loop and completions", "UetBench::step"),
    ("the loop and completions", "UetNode<D>::progress"),
]
AEAD_BULK = ("aes_gcm_encrypt_avx512", "aes_gcm_decrypt_avx512", "_aesni_ctr32_ghash_6x")
AEAD_CALL = ("aws_lc", "OPENSSL_", "aead_aes_gcm", "CRYPTO_", "skip_iv")

def group(syms):
    leaf = syms[0]
    if any(k in leaf for k in AEAD_BULK):
        return "AEAD bulk"
    if any(k in leaf for k in AEAD_CALL):
        return "AEAD per call"
    if ("memcpy" in leaf or "memmove" in leaf) and any("on_request" in s for s in syms):
        return "receive copy into the region"
    for s in syms:
        for name, key in STEPS:
            if key in s:
                return "protocol: " + name
    return "protocol: other"

run, base = collections.Counter(), collections.Counter()
counts = collections.Counter()
for block in open(sys.argv[1]).read().split("\n\n"):
    syms = [l.split(None, 1)[1] if len(l.split(None, 1)) > 1 else "?" for l in block.strip().splitlines()]
    if not syms or not any("UetBench" in s and "run_bw" in s for s in syms):
        continue
    if any("AeadBaseline" in s for s in syms):
        counts["baseline"] += 1
        base[group(syms)] += 1
    elif any("perf::uet::timed" in s for s in syms):
        counts["harness"] += 1
    else:
        counts["run"] += 1
        run[group(syms)] += 1
if not counts["baseline"]:
    sys.exit("no baseline samples: is this a --tss bandwidth run?")
unit = counts["baseline"] / 100.0
print(f"samples: run {counts['run']}, baseline {counts['baseline']}, harness {counts['harness']}; "
      f"sampled share {100 * counts['baseline'] / max(counts['run'], 1):.1f} %")
print(f"{'':60} {'run':>7} {'baseline':>9}")
order = ["AEAD bulk", "AEAD per call", "receive copy into the region"]
proto = sorted((k for k in run if k.startswith("protocol")), key=lambda k: -run[k])
for k in order + proto:
    print(f"{k:60} {run[k] / unit:7.1f} {base[k] / unit:9.1f}")
print(f"{'protocol, all':60} {sum(run[k] for k in proto) / unit:7.1f}")
print(f"{'total (70 % of the baseline allows 143)':60} {counts['run'] / unit:7.1f} {100.0:9.1f}")
EOF
