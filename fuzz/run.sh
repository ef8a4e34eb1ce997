#!/usr/bin/env bash
# Runs every fuzz target for MINUTES minutes each, one after the other, on
# one core, under nice: `fuzz/run.sh MINUTES [TARGET...]`. Stable Rust
# (`-s none`, see README.md); libFuzzer writes new inputs to
# fuzz/corpus/<t>/ (git-ignored), reads the committed fuzz/seeds/<t>/, and
# saves a crash in fuzz/artifacts/<t>/. Prints each target's executions,
# executions per second and crashes; exits non-zero if any target crashed.
set -u
cd "$(dirname "$0")/.."
minutes=${1:?usage: fuzz/run.sh MINUTES [TARGET...]}
shift
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(cargo fuzz list --fuzz-dir fuzz)
fi
# Debug assertions (overflow checks included) on: an arithmetic overflow
# is a bug as a panic is, and `cargo test` runs the bodies with them.
build=(cargo fuzz build --fuzz-dir fuzz -s none --debug-assertions)
nice -n 10 "${build[@]}" >/dev/null || exit 1
mkdir -p fuzz/logs
seconds=$((minutes * 60))
failed=0
printf '%-10s %14s %10s %8s\n' target executions execs/s crashes
for t in "${targets[@]}"; do
    mkdir -p "fuzz/corpus/$t" "fuzz/artifacts/$t"
    log="fuzz/logs/$t.log"
    # One process, one thread (no -jobs: that forks workers that log
    # elsewhere); the dictionary where one exists.
    dict=()
    [ -f "fuzz/dict/$t.dict" ] && dict=("-dict=fuzz/dict/$t.dict")
    nice -n 10 cargo fuzz run --fuzz-dir fuzz -s none --debug-assertions "$t" \
        "fuzz/corpus/$t" "fuzz/seeds/$t" -- \
        -max_total_time="$seconds" \
        -rss_limit_mb=4096 -print_final_stats=1 \
        -artifact_prefix="fuzz/artifacts/$t/" "${dict[@]}" >"$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    crashes=$(find "fuzz/artifacts/$t" -type f | wc -l)
    printf '%-10s %14s %10s %8s\n' "$t" "${execs:-?}" "${rate:-?}" "$crashes"
    if [ "$rc" -ne 0 ]; then
        failed=1
        grep -m1 -E 'panicked at|ERROR: libFuzzer' "$log" | sed 's/^/    /'
    fi
done
exit $failed
