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
# The exchanges' parsers (security review M1) start from real messages: perf_hello's first byte is
# the receiving side's lane count less one, pingpong_msg and perftest_exchange take the messages as
# they are.
python3 - fuzz/corpus <<'PY'
import json, pathlib, sys
c = pathlib.Path(sys.argv[1])
for t in ("perf_hello", "pingpong_msg", "perftest_exchange"):
    (c / t).mkdir(parents=True, exist_ok=True)
qps = {"gid": "10.0.0.1", "qpns": [17, 18], "psns": [1, 1001], "rkeys": [5, 6], "addrs": [0, 4096], "udp_port": 4791}
test = {"op": "send", "qp_type": "rc", "atomic": "fetch-add", "mode": "bw", "size": 4096, "iters": 10,
        "qps": 2, "mtu": 1024, "depth": 16, "seed": 7, "dcqcn_bps": None}
uet = {"op": "Write", "transport": "Rud", "lat": False, "size": 4096, "iters": 100, "depth": 16,
       "max_payload": 4096, "seed": 1, "max_retries": 100, "tss": False, "cc": "None",
       "cc_bps": 100000000000, "cc_rtt_ns": 20000}
lines = {"client": {**test, **qps}, "server": qps, "done": {"done": True, "sent": [10, 10]},
         "rx": {"rx": [3, 4]}, "report": {"verified": 20, "errors": 0, "lost": 0}, "uet": {"uet": uet}}
for name, v in lines.items():
    (c / "perf_hello" / name).write_bytes(b"\x01" + json.dumps(v).encode())
(c / "pingpong_msg" / "address").write_bytes(b"0000:000011:0abcde:00000000000000000000ffff0a4d0002\0done\0")
dest = b"0000:0001:000011:07c6db:00000217:0000560a5e3e9000:00:00:00:00:00:00:00:00:00:00:ff:ff:0a:4d:00:03:00000000:\0"
(c / "perftest_exchange" / "handshake").write_bytes(dest)
(c / "perftest_exchange" / "version-mtu").write_bytes(b"6.06" + bytes(12))
PY
# cm_mad: the MADs of the real rdma_cm exchanges (IPv4 frames to QP1: the MAD follows Ethernet, IP,
# UDP, BTH and DETH, 62 bytes in).
python3 - fuzz/corpus/cm_mad "$shared/captures/roce" <<'PY'
import pathlib, struct, sys
out = pathlib.Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)
for f in sorted(pathlib.Path(sys.argv[2]).rglob("*.pcap")):
    b = f.read_bytes()
    e = "<" if b[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    off, n = 24, 0
    while off + 16 <= len(b):
        incl = struct.unpack(e + "I", b[off + 8:off + 12])[0]
        fr = b[off + 16:off + 16 + incl]
        off += 16 + incl
        if len(fr) >= 62 + 256 and fr[12:14] == b"\x08\x00" and fr[23] == 17 and fr[36:38] == b"\x12\xb7" \
                and fr[46:50] == b"\x00\x00\x00\x01":
            (out / f"{f.stem}-{n}").write_bytes(fr[62:62 + 256])
            n += 1
PY
# capture_reader takes whole capture images: the real ones under 200 KB and the generated ones.
mkdir -p fuzz/corpus/capture_reader
find "$shared/captures" "$seeds" -name '*.pcap*' -size -200k -exec cp {} fuzz/corpus/capture_reader/ \;
# provider_config: a service file, then (after 0xFF) the UET_PROVIDER_* values separated by 0xFE.
mkdir -p fuzz/corpus/provider_config
printf '# name start count\nstorage 16 64\nai 0 8\n\xff2048\xfe0x10000\xfe32768\xfe26\xfe42' \
    > fuzz/corpus/provider_config/services
# context_rx and cm_qp1 build their inputs from descriptions (see their headers) and start from an
# empty corpus. cm_mad starts from the CM MADs of the real captures (after BTH and DETH).
targets="ethernet_frame uet_frame qp_packets context_rx uet_endpoint tss_domain perf_hello pingpong_msg"
targets="$targets perftest_exchange provider_config capture_reader cm_mad cm_qp1"
for target in $targets; do
    echo "fuzz: $target for ${seconds}s"
    (cd fuzz && cargo fuzz run -s none "$target" -- -max_total_time="$seconds" -print_final_stats=1)
done
