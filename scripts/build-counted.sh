#!/usr/bin/env bash
# build-counted.sh: build mc-guest with work counters, for the
# virtual clock's counted work (`mc-host run --clock virtual --work
# counted`, docs/virtual-time.md s.9).
#
#   scripts/build-counted.sh            # target/counted/.../mc-guest
#   target/release/mc-host run --nodes 4 --threads 2 --clock virtual \
#       --work counted -- "$(scripts/build-counted.sh --print-dir)/mc-guest" csm sor
#
# rustc's SanitizerCoverage pass calls a callback on every LLVM edge of
# every crate it compiles (mc-guest, Cashmere, UMP, the driver and their
# dependencies); mc-driver defines the callback (vclock/counter.rs), which
# counts into a thread-local. The build names its target
# (x86_64-unknown-linux-gnu) so that RUSTFLAGS reach the target's crates
# only, not build scripts or proc macros, and goes into its own target
# directory (target/counted) so that it never mixes with the plain build.
# Not libcsm: an instrumented libcsm.a does not link into a C program yet
# (it refers to a hidden std symbol, `<&T as Debug>::fmt`, that it does not
# hold); scripts/mc-cc --counted links the plain libcsm.
# Release only: in a debug build the callback's own thread-local access is
# a function the pass would instrument, and it would call itself.
#
# Options: --print-dir prints the directory of the built mc-guest and
# stops. Environment: CARGO (default cargo), CARGO_BUILD_JOBS.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
triple=x86_64-unknown-linux-gnu
dir=${MC_COUNTED_TARGET_DIR:-$root/target/counted}
out=$dir/$triple/release
if [ "${1:-}" = --print-dir ]; then
    echo "$out"
    exit 0
fi
[ $# -eq 0 ] || {
    echo "build-counted.sh: unknown argument $1 (try --print-dir)" >&2
    exit 2
}
# The flags are the counters; nothing else differs from the plain release
# build (the callbacks are inlined into the instrumented code).
export RUSTFLAGS="${RUSTFLAGS:-} -C passes=sancov-module -C llvm-args=-sanitizer-coverage-level=3 -C llvm-args=-sanitizer-coverage-trace-pc-guard"
"${CARGO:-cargo}" build --release --target "$triple" --target-dir "$dir" \
    --manifest-path "$root/Cargo.toml" -p mc-guest
echo "$out"
