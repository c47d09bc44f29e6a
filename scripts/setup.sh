#!/usr/bin/env bash
# Installs what the README's commands and .ci/run need on a fresh machine of this kind (Debian, Rust
# toolchain by rustup, root). Safe to run again: it skips what is already there.
set -euo pipefail

if ! rustup component list --installed 2>/dev/null | grep -q '^rustfmt'; then
    rustup component add rustfmt
fi
if ! rustup component list --installed 2>/dev/null | grep -q '^clippy'; then
    rustup component add clippy
fi
# llvm-profdata, for the profile-guided release build (scripts/pgo.sh). It comes from rustup's
# server, not a package registry: where that is out of reach, everything else still works and
# scripts/pgo.sh says what is missing.
if ! rustup component list --installed 2>/dev/null | grep -q '^llvm-tools'; then
    rustup component add llvm-tools || echo "setup: rustup could not add llvm-tools; scripts/pgo.sh needs it" >&2
fi
if ! command -v cargo-fuzz >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi
# tshark: the Wireshark cross-check of `softrdma gen` output (engine/cli/tests/gen_tshark.rs).
if ! command -v tshark >/dev/null 2>&1; then
    if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
    $sudo apt-get update -qq
    echo "wireshark-common wireshark-common/install-setuid boolean false" | $sudo debconf-set-selections
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq tshark >/dev/null
fi
# rdma-core's and perftest's stock tools and headers: the programs `softrdma run` runs unmodified
# (engine/cli/tests/netns_verbs.rs), the C ABIs' headers (libibverbs-dev, librdmacm-dev,
# libfabric-dev) and libclang-dev, with which bindgen reads them (scripts/check-abi.sh), the C compiler that builds the C test programs against them (gcc), and the
# libraries Debian's perftest links (librdmacm, libmlx5 of ibverbs-providers); and ethtool, with which
# engine/cli/tests/netns_udp.rs turns a veth's offloads off to capture datagrams as a wire has them;
# Open MPI with mpi4py, which engine/cli/tests/netns_mpi.rs and scripts/mpi-netns.sh run over the
# libfabric provider; and UCX (ucx-utils, libucx0), which engine/cli/tests/netns_ucx.rs runs over
# softrdma.
verbs_pkgs=(ibverbs-utils perftest rdmacm-utils libibverbs-dev librdmacm-dev libfabric-bin libfabric-dev
    libclang-dev ibverbs-providers gcc ethtool openmpi-bin python3-mpi4py ucx-utils libucx0)
missing=()
for p in "${verbs_pkgs[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done
if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# bindgen, which scripts/check-abi.sh runs to regenerate the C ABI files and compare them with the
# committed ones: the version their headers name (another could lay them out differently).
bindgen_version=$(sed -n 's/.* with bindgen \([0-9.]*\); do not edit\./\1/p' "$(dirname "$0")/../engine/ibverbs/src/abi.rs")
if [ "$(bindgen --version 2>/dev/null | awk '{print $2}')" != "$bindgen_version" ]; then
    cargo install bindgen-cli --version "$bindgen_version" --locked
fi
