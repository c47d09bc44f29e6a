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
