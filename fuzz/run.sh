#!/usr/bin/env bash
# Fuzz every target for a bounded time (default 10 s each). A crash fails the
# run (exit 1) and its input is kept under regressions/<target>/, where
# `cargo test -p mc-device` replays it on stable.
#
# cargo-fuzz is installed when it is missing (`cargo install cargo-fuzz`, about
# 30 s). It needs unstable compiler flags: a nightly toolchain is used when
# rustup has one, otherwise the stable one with RUSTC_BOOTSTRAP=1.
set -u
cd "$(dirname "$0")"
secs=${1:-10}
targets=(transmit_records control_commands register_writes vhost_user_messages vhost_user_sequence)

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz/run.sh: installing cargo-fuzz"
    if ! cargo install --locked cargo-fuzz; then
        echo "fuzz/run.sh: cannot install cargo-fuzz" >&2
        exit 1
    fi
fi
if cargo +nightly --version >/dev/null 2>&1; then
    toolchain=(+nightly)
else
    toolchain=()
    export RUSTC_BOOTSTRAP=1
fi

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
echo "== building the fuzz targets"
if ! cargo "${toolchain[@]}" fuzz build >"$logs/build" 2>&1; then
    tail -n 30 "$logs/build"
    echo "fuzz/run.sh: the fuzz targets do not build" >&2
    exit 1
fi
status=0
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t" "regressions/$t"
    cargo "${toolchain[@]}" fuzz run "$t" "corpus/$t" "regressions/$t" -- \
        -max_total_time="$secs" -artifact_prefix="regressions/$t/" \
        -print_final_stats=1 >"$logs/$t" 2>&1
    rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$logs/$t" | tail -n 1)
    echo "== $t: ${runs:-?} inputs in ${secs}s ($(( ${runs:-0} / secs ))/s)"
    if [ $rc -ne 0 ]; then
        tail -n 40 "$logs/$t"
        echo "$t: crash found (exit $rc); the input is in fuzz/regressions/$t/" >&2
        status=1
    fi
done
exit $status
