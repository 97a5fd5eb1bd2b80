#!/bin/sh
# Host independence of predicted time (issue 29, docs/virtual-time.md s.8):
# the same virtual-time run under three host loads, the median of REPS runs
# of each, and the spread of those medians ((max - min) / min).
#
#   quiet   nothing else running
#   hogs    beside two busy loops (CPU hogs)
#   core0   confined to one core (taskset -c 0)
#
# Usage: scripts/predict-check.sh [REPS] [SHAPES] [APPS]
#   defaults: 3 runs, shapes 2:1 and 2:2 (nodes:threads), apps sor gauss
#   water-nsquared, each at a size that computes for about 0.1-0.3 s of
#   predicted time (SOR 2048x2048 x 20 iterations, Gauss 1024, Water 1000
#   molecules x 3 steps): runs of a few milliseconds are dominated by cold
#   caches and first-touch page faults, whose CPU cost depends on the host.
#   MC_QUANTUM_US sets --quantum-us.
# Builds the release mc-host and mc-guest first. Prints one line per
# application and shape: the median predicted time per load, their spread,
# and beside them the median wall-clock time of the same runs per load
# (what the host measured; it follows the load).
# A measurement, not a test: it takes minutes and its figures depend on
# the host only as far as the prediction fails to be host-independent.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
reps=${1:-3}
shapes=${2:-"2:1 2:2"}
apps=${3:-"sor gauss water-nsquared"}
target=${CARGO_TARGET_DIR:-$root/target}
cd "$root"
cargo build --release -p host -p mc-guest >&2
mc_host="$target/release/mc-host"
work=$(mktemp -d)
hogs=""
stop_hogs() {
    for p in $hogs; do kill "$p" 2>/dev/null || true; done
    hogs=""
}
trap 'stop_hogs; rm -rf "$work"' EXIT
quantum=""
[ -n "${MC_QUANTUM_US:-}" ] && quantum="--quantum-us $MC_QUANTUM_US"

# The problem each application computes.
problem() {
    case "$1" in
        sor) echo "--rows 2048 --cols 2048 --iters 20" ;;
        gauss) echo "--size 1024" ;;
        water-nsquared) echo "--size 1000 --iters 3" ;;
        *) echo "--preset medium" ;;
    esac
}

# One run: prints its predicted and its wall-clock time in seconds.
run_once() { # load app nodes threads
    rec="$work/r.jsonl"
    rm -f "$rec"
    cmd="$mc_host run --nodes $3 --threads $4 --clock virtual $quantum -- \
        mc-guest csm $2 $(problem "$2") --json $rec"
    if [ "$1" = core0 ]; then
        cmd="taskset -c 0 $cmd"
    fi
    $cmd > "$work/out" 2>&1 || { cat "$work/out" >&2; echo "run failed" >&2; exit 1; }
    p=$(sed -n 's/.*"predicted_s":\([0-9.e+-]*\).*/\1/p' "$rec" | tail -1)
    # The run's own compute_s: the first in the record's times object
    # (the nodes' follow it).
    w=$(sed -n 's/.*"times":{"compute_s":\([0-9.e+-]*\).*/\1/p' "$rec" | tail -1)
    echo "$p $w"
}

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

printf '%-16s %-5s %12s %12s %12s %8s   %-30s\n' app shape quiet hogs core0 spread \
    "wall-clock: quiet hogs core0"
for app in $apps; do
    for shape in $shapes; do
        nodes=${shape%:*} threads=${shape#*:}
        line=""
        walls=""
        for load in quiet hogs core0; do
            if [ "$load" = hogs ]; then
                sh -c 'while :; do :; done' & hogs="$hogs $!"
                sh -c 'while :; do :; done' & hogs="$hogs $!"
            fi
            for _ in $(seq "$reps"); do run_once "$load" "$app" "$nodes" "$threads"; done \
                > "$work/times"
            stop_hogs
            line="$line $(cut -d' ' -f1 "$work/times" | median)"
            walls="$walls $(cut -d' ' -f2 "$work/times" | median)"
        done
        # shellcheck disable=SC2086
        set -- $line
        spread=$(printf '%s\n%s\n%s\n' "$1" "$2" "$3" |
            awk 'NR==1{mn=$1;mx=$1} {if($1<mn)mn=$1; if($1>mx)mx=$1} END {printf "%.1f%%", 100*(mx-mn)/mn}')
        printf '%-16s %-5s %12s %12s %12s %8s  %s\n' "$app" "$shape" "$1" "$2" "$3" "$spread" \
            "$walls"
    done
done
