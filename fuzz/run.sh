#!/usr/bin/env bash
# Run every fuzz target for a bounded time (default 10 s each) and keep any
# crashing input under regressions/<target>/, where `cargo test -p mc-device`
# replays it on stable. Needs a nightly toolchain and cargo-fuzz
# (`cargo install cargo-fuzz`); says so and exits 0 when they are missing, so it
# can run anywhere.
set -u
cd "$(dirname "$0")"
secs=${1:-10}
if ! cargo +nightly --version >/dev/null 2>&1 || ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz/run.sh: skipped: needs a nightly toolchain and cargo-fuzz (cargo install cargo-fuzz)"
    exit 0
fi
status=0
for t in transmit_records control_commands register_writes vhost_user_messages vhost_user_sequence; do
    echo "== $t (${secs}s)"
    mkdir -p "corpus/$t" "regressions/$t"
    cargo +nightly fuzz run "$t" "corpus/$t" "regressions/$t" -- \
        -max_total_time="$secs" -artifact_prefix="regressions/$t/" -print_final_stats=1 > "/tmp/mc-fuzz-$t.log" 2>&1
    rc=$?
    tail -n 12 "/tmp/mc-fuzz-$t.log"
    if [ $rc -ne 0 ]; then
        echo "$t: crash found (exit $rc); the input is in regressions/$t/"
        status=1
    fi
done
exit $status
