#!/usr/bin/env bash
# Runs every cargo-fuzz target for SECONDS (default 60) each on stable (`-s none`), seeded with the
# real frames of ../shared/captures and the `softrdma gen` corpora, and fails on any crash.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shared=${SHARED:-../shared}

seeds=target/fuzz-seeds
mkdir -p "$seeds"
cargo run -q -- gen roce --out "$seeds/gen-roce.pcap" >/dev/null
cargo run -q -- gen uet --out "$seeds/gen-uet.pcap" >/dev/null

seed() { # seed TARGET PREFIX_HEX DIR...: one corpus file per frame of every pcap under DIR
    local target=$1 prefix=$2; shift 2
    mkdir -p "fuzz/corpus/$target"
    python3 - "fuzz/corpus/$target" "$prefix" "$@" <<'PY'
import pathlib, struct, sys
out, prefix = pathlib.Path(sys.argv[1]), bytes.fromhex(sys.argv[2])
for d in sys.argv[3:]:
    for f in sorted(pathlib.Path(d).rglob("*.pcap")):
        b = f.read_bytes()
        e = "<" if b[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
        off, n = 24, 0
        while off + 16 <= len(b):
            incl = struct.unpack(e + "I", b[off + 8:off + 12])[0]
            (out / f"{f.stem}-{n}").write_bytes(prefix + b[off + 16:off + 16 + incl])
            off += 16 + incl
            n += 1
PY
}

seed ethernet_frame "" "$shared/captures/roce" "$shared/captures/uet" "$seeds"
# qp_packets, uet_endpoint and tss_domain build their inputs from descriptions (see their headers)
# and start from an empty corpus.
# uet_frame: first byte 0x02 = native IP with protocol 253, no CRC; second byte unused then.
seed uet_frame "02fd" "$shared/captures/uet" "$seeds"
for target in ethernet_frame uet_frame qp_packets uet_endpoint tss_domain; do
    echo "fuzz: $target for ${seconds}s"
    (cd fuzz && cargo fuzz run -s none "$target" -- -max_total_time="$seconds" -print_final_stats=1)
done
