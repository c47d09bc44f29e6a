#!/usr/bin/env bash
# Rebuilds the committed seed corpora (fuzz/seeds/TARGET/) of the targets that take real input:
# the frames of ../shared/captures and of `softrdma gen roce|uet`, the CM MADs and the perftest
# exchanges of the real captures, the capture images themselves, and hand-written messages where no
# capture has them. What is already in fuzz/seeds/TARGET/ is kept as input; the union is minimized
# with `cargo fuzz cmin` (one job at a time, nice 19), so only seeds that add coverage stay.
# The targets that build their input from descriptions get their seeds from a campaign instead
# (`scripts/fuzz-campaign.sh --keep`).
set -euo pipefail
cd "$(dirname "$0")/.."
shared=${SHARED:-../shared}
raw=target/fuzz-seeds
rm -rf "$raw"
mkdir -p "$raw/pcap"
# SOFTRDMA: a built softrdma binary to use instead of `cargo run`.
softrdma() { if [ -n "${SOFTRDMA:-}" ]; then "$SOFTRDMA" "$@"; else cargo run -q -- "$@"; fi; }
softrdma gen roce --out "$raw/pcap/gen-roce.pcap" >/dev/null
softrdma gen uet --out "$raw/pcap/gen-uet.pcap" >/dev/null

# frames OUT PREFIX_HEX DIR...: one file per frame of every pcap under DIR (PREFIX before each).
frames() {
    python3 - "$@" <<'PY'
import pathlib, struct, sys
out, prefix = pathlib.Path(sys.argv[1]), bytes.fromhex(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)
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

frames "$raw/ethernet_frame" "" "$shared/captures/roce" "$shared/captures/uet" "$raw/pcap"
# uet_frame: first byte 0x02 = native IP with protocol 253, no CRC; second byte unused then.
frames "$raw/uet_frame" "02fd" "$shared/captures/uet" "$raw/pcap"
# cm_mad: the MADs of the real rdma_cm exchanges (IPv4 frames to QP1: the MAD follows Ethernet,
# IP, UDP, BTH and DETH, 62 bytes in). perftest_exchange: the TCP payloads of the real perftest
# exchanges (../shared/captures/exchange).
frames "$raw/frames-roce" "" "$shared/captures/roce"
frames "$raw/frames-exchange" "" "$shared/captures/exchange"
python3 - "$raw" <<'PY'
import pathlib, sys
raw = pathlib.Path(sys.argv[1])
for t in ("cm_mad", "perftest_exchange"):
    (raw / t).mkdir(parents=True, exist_ok=True)
for f in sorted((raw / "frames-roce").iterdir()):
    fr = f.read_bytes()
    if len(fr) >= 62 + 256 and fr[12:14] == b"\x08\x00" and fr[23] == 17 and fr[36:38] == b"\x12\xb7" \
            and fr[46:50] == b"\x00\x00\x00\x01":
        (raw / "cm_mad" / f.name).write_bytes(fr[62:62 + 256])
for f in sorted((raw / "frames-exchange").iterdir()):
    fr = f.read_bytes()
    if len(fr) < 34 or fr[12:14] != b"\x08\x00" or fr[23] != 6:
        continue
    tcp = 14 + (fr[14] & 15) * 4
    payload = fr[tcp + (fr[tcp + 12] >> 4) * 4:]
    if payload:
        (raw / "perftest_exchange" / f.name).write_bytes(payload)
PY
# The exchanges' parsers (security review M1) also start from hand-written messages: perf_hello's
# first byte is the receiving side's lane count less one, pingpong_msg and perftest_exchange take
# the messages as they are.
python3 - "$raw" <<'PY'
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
# capture_reader takes whole capture images: the real ones under 20 KB and the generated ones.
mkdir -p "$raw/capture_reader"
find "$shared/captures" "$raw/pcap" -name '*.pcap*' -size -20k -exec cp {} "$raw/capture_reader/" \;
# provider_config: a service file, then (after 0xFF) the UET_PROVIDER_* values separated by 0xFE.
mkdir -p "$raw/provider_config"
printf '# name start count\nstorage 16 64\nai 0 8\n\xff2048\xfe0x10000\xfe32768\xfe26\xfe42' \
    > "$raw/provider_config/services"

cd fuzz
for target in ethernet_frame uet_frame cm_mad perftest_exchange perf_hello pingpong_msg capture_reader \
    provider_config; do
    mkdir -p "seeds/$target"
    cp "../$raw/$target"/* "seeds/$target/"
    echo "fuzz-seeds: $target: $(ls "seeds/$target" | wc -l) inputs, minimizing"
    nice -n 19 cargo fuzz cmin -s none -O -a "$target" "seeds/$target" -- -print_final_stats=0 2>&1 | tail -1
    echo "fuzz-seeds: $target: $(ls "seeds/$target" | wc -l) seeds, $(cat "seeds/$target"/* | wc -c) bytes"
done
