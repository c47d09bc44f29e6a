#!/usr/bin/env bash
# Runs fuzz targets one after the other (nice 19, one libFuzzer job at a time) for a number of
# executions or seconds each, from their committed seeds (fuzz/seeds/TARGET/, read only) and
# their working corpus (fuzz/corpus/TARGET/, where libFuzzer keeps what it finds), and appends a
# row per target to a Markdown table: executions, seconds, executions per second, coverage
# (libFuzzer's cov: edges and ft: features), the corpus at the end, and the findings (new files
# under fuzz/artifacts/TARGET/: crashes, timeouts, out-of-memory inputs). Exits non-zero if
# anything was found.
#
#   scripts/fuzz-campaign.sh [--runs N] [--seconds S] [--keep] [--out FILE] [TARGET...]
#
# At least one of --runs and --seconds; with both, a target stops at whichever comes first.
# No TARGET: all of them (`cargo fuzz list`). --out: the table to append to (default
# fuzz/campaign.md, relative to fuzz/). --keep: merge what the run found into the committed seeds,
# minimized as `cargo fuzz cmin` does (libFuzzer's -merge=1), for a target with no findings.
# Build: `cargo fuzz build -s none -O -a` (stable, optimized, debug assertions and overflow checks
# kept), once at the start; the targets then run as built (as `cargo fuzz run` runs them), so a
# source edited during a long campaign changes nothing until the next.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
usage() { sed -n '10p' "$0" >&2; exit 2; }
limits=() keep= out=campaign.md
while [ $# -gt 0 ]; do
    case $1 in
        --runs) limits+=("-runs=$2"); shift 2 ;;
        --seconds) limits+=("-max_total_time=$2"); shift 2 ;;
        --keep) keep=1; shift ;;
        --out) out=$2; shift 2 ;;
        -*) usage ;;
        *) break ;;
    esac
done
[ ${#limits[@]} -gt 0 ] || usage
build=(-s none -O -a)
if [ $# -gt 0 ]; then targets=("$@"); else mapfile -t targets < <(cargo fuzz list); fi
nice -n 19 cargo fuzz build "${build[@]}"
bin_dir=target/$(rustc -vV | sed -n 's/^host: //p')/release
if ! grep -qs '^| date (UTC) |' "$out"; then
    mkdir -p "$(dirname "$out")"
    printf '| date (UTC) | target | executions | seconds | exec/s | cov | ft | corpus | findings |\n' >> "$out"
    printf '|---|---|---:|---:|---:|---:|---:|---|---|\n' >> "$out"
fi
found=0
log_dir=../target/fuzz-campaign
mkdir -p "$log_dir"
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t" "seeds/$t" "artifacts/$t"
    log="$log_dir/$t.log"
    marker="$log_dir/$t.start"
    touch "$marker"
    start=$(date +%s)
    echo "fuzz-campaign: $t (${limits[*]}), log in $log"
    status=0
    nice -n 19 "$bin_dir/$t" -artifact_prefix="artifacts/$t/" "${limits[@]}" -print_final_stats=1 \
        "corpus/$t" "seeds/$t" > "$log" 2>&1 || status=$?
    seconds=$(($(date +%s) - start))
    stat() { sed -n "s/^stat::$1: *//p" "$log" | tail -1; }
    execs=$(stat number_of_executed_units)
    rate=$(stat average_exec_per_sec)
    # The last status line: "#N DONE cov: C ft: F corp: U/SIZE ...", or the last before a crash.
    last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<< "$last")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<< "$last")
    corp=$(sed -n 's/.* corp: \([^ ]*\).*/\1/p' <<< "$last")
    mapfile -t new < <(find "artifacts/$t" -type f -newer "$marker")
    findings=${#new[@]}
    if [ "$findings" -gt 0 ] || [ "$status" -ne 0 ]; then
        found=1
        what="$findings: ${new[*]:-exit status $status}"
        tail -30 "$log"
    else
        what=none
    fi
    row="| $(date -u +%Y-%m-%d) | \`$t\` | ${execs:-?} | $seconds | ${rate:-?} | ${cov:-?} | ${ft:-?} | ${corp:-?} | $what |"
    echo "$row" | tee -a "$out"
    if [ -n "$keep" ] && [ "$findings" -eq 0 ] && [ "$status" -eq 0 ]; then
        # `cargo fuzz cmin` as the built target runs it: the seeds and the corpus merged into a
        # fresh directory, which becomes the seeds.
        merged="$log_dir/$t.merged"
        rm -rf "$merged" && mkdir -p "$merged"
        nice -n 19 "$bin_dir/$t" -merge=1 "$merged" "seeds/$t" "corpus/$t" > "$log_dir/$t.cmin.log" 2>&1
        rm -rf "seeds/$t" && mv "$merged" "seeds/$t"
        echo "fuzz-campaign: $t: $(ls "seeds/$t" | wc -l) seeds, $(cat "seeds/$t"/* | wc -c) bytes"
    fi
done
exit "$found"
