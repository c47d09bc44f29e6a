#!/usr/bin/env bash
# Regenerates the C ABI files that bindgen writes (scripts/gen-*-abi.sh) into the tree and fails if
# they differ from the committed ones: a hand edit of a generated file, or a generator changed
# without its output committed, fails here. The bindgen version is the one the files' headers name
# (scripts/setup.sh installs it, and libclang-dev); another version could lay the files out
# differently, so it is refused rather than compared. On a failure the regenerated files are left
# in the tree, for `git diff` to show against the committed (or staged) ones.
set -euo pipefail
cd "$(dirname "$0")/.."
files=(engine/ibverbs/src/abi.rs engine/ibverbs/src/cm_abi.rs engine/libfabric/src/abi.rs)
want=$(sed -n 's/.* with bindgen \([0-9.]*\); do not edit\./\1/p' "${files[@]}" | sort -u)
if [ "$(printf '%s\n' "$want" | grep -c .)" -ne 1 ]; then
    echo "check-abi: the generated files do not name one bindgen version: ${want:-none}" >&2
    exit 1
fi
have=$(bindgen --version 2>/dev/null | awk '{print $2}') || true
if [ "$have" != "$want" ]; then
    echo "check-abi: bindgen ${have:-is missing}; the files were generated with $want (bash scripts/setup.sh)" >&2
    exit 1
fi
# Regenerating overwrites the files in the tree and compares them with git's index: an edit not yet
# staged would be lost unseen, so it is refused (stage it, and it is compared).
if ! git diff --quiet -- "${files[@]}"; then
    echo "check-abi: unstaged changes to generated files (git diff -- ${files[*]}); stage them to have them checked" >&2
    exit 1
fi
# cm_abi.rs takes the types abi.rs defines: the verbs file first.
bash scripts/gen-ibverbs-abi.sh >/dev/null
bash scripts/gen-rdmacm-abi.sh >/dev/null
bash scripts/gen-libfabric-abi.sh >/dev/null
if ! git diff --exit-code --stat -- "${files[@]}"; then
    echo "check-abi: the generated C ABI files differ from what scripts/gen-*-abi.sh write (git diff -- ${files[*]})" >&2
    exit 1
fi
echo "check-abi: ${files[*]} are what bindgen $want generates"
