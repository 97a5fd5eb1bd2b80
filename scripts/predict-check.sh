#!/bin/sh
# Host independence of predicted time (issue 29, docs/virtual-time.md s.8):
# the same virtual-time run under three host loads, the median of REPS runs
# of each, and the spread of those medians ((max - min) / min).
#
#   quiet   nothing else running
#   hogs    beside two busy loops (CPU hogs)
#   core0   confined to one core (taskset -c 0)
#
# Usage: scripts/predict-check.sh [--work counted|cpu-time] [REPS] [SHAPES] [APPS]
#   --work counted (the default, as of mc-host run --clock virtual)
#   measures the counted-work clock (docs/virtual-time.md s.9): the guest
#   is the instrumented mc-guest of scripts/build-counted.sh (built first
#   unless MC_BIN_DIR is set; MC_COUNTED_DIR names a prebuilt one), and the
#   sequential program is timed by the same counted work, so its column is
#   the floor of that clock (the same under every load). --work cpu-time
#   measures the CPU-time clock with the plain mc-guest.
#   defaults: 3 runs, shapes 2:1 and 2:2 (nodes:threads), apps sor gauss
#   water-nsquared, each at a size that computes for about 0.1-0.3 s of
#   predicted time (SOR 2048x2048 x 20 iterations, Gauss 1024, Water 1000
#   molecules x 3 steps): runs of a few milliseconds are dominated by cold
#   caches and first-touch page faults, whose CPU cost depends on the host.
#   MC_QUANTUM_US sets --quantum-us; MC_PROBLEM replaces the problem's
#   options (e.g. "--size 2048" for a larger Gauss); MC_BIN_DIR names a directory holding
#   prebuilt mc-host and mc-guest (then nothing is built); MC_LOADS
#   chooses the loads (default "quiet hogs core0"; also "cores01", confined
#   to the first two cores, as on a 2-core host).
#
# The loads are interleaved (each repetition runs quiet, hogs, core0 in
# turn), so a drift of the host's own speed over minutes (co-tenants of
# this virtual machine) falls on every load alike instead of on whichever
# ran last.
#
# Beside each prediction it measures, under the same load and in the same
# repetition, the floor of the method: the CPU time of the application's
# sequential program (one node, `--sequential`, its computation only). That
# is plain CPU time with no emulator in it; where it spreads across loads,
# every CPU-time-based prediction spreads at least as much. And it prints
# the predicted speedup of each repetition (that sequential CPU time over
# the prediction), which divides the host's speed out as the report does.
#
# Builds the release mc-host and mc-guest first. Prints, per application
# and shape, one line each for the predicted time, the sequential CPU time,
# the predicted speedup (medians per load and their spread) and the
# wall-clock time of the parallel runs (which follows the load).
# A measurement, not a test: it takes minutes and its figures depend on
# the host only as far as the prediction fails to be host-independent.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
work_measure=counted
if [ "${1:-}" = --work ]; then
    work_measure=${2:?--work needs cpu-time or counted}
    shift 2
fi
case "$work_measure" in
    cpu-time | counted) ;;
    *) echo "predict-check.sh: --work is cpu-time or counted, not $work_measure" >&2; exit 2 ;;
esac
reps=${1:-3}
shapes=${2:-"2:1 2:2"}
apps=${3:-"sor gauss water-nsquared"}
target=${CARGO_TARGET_DIR:-$root/target}
cd "$root"
if [ -n "${MC_BIN_DIR:-}" ]; then
    # Prebuilt binaries (mc-host with mc-guest beside it), e.g. on a host
    # without a Rust toolchain.
    mc_host="$MC_BIN_DIR/mc-host"
else
    cargo build --release -p host -p mc-guest >&2
    mc_host="$target/release/mc-host"
fi
# The guest, and what times its computing.
guest=mc-guest
work_flag="--work cpu-time"
if [ "$work_measure" = counted ]; then
    if [ -n "${MC_COUNTED_DIR:-}" ]; then
        guest="$MC_COUNTED_DIR/mc-guest"
    elif [ -n "${MC_BIN_DIR:-}" ]; then
        guest="$("$root/scripts/build-counted.sh" --print-dir)/mc-guest"
    else
        guest="$("$root/scripts/build-counted.sh" | tail -1)/mc-guest"
    fi
    work_flag="--work counted"
fi
seq_label="sequential cpu s"
[ "$work_measure" = counted ] && seq_label="sequential work s"
work=$(mktemp -d)
hogs=""
stop_hogs() {
    for p in $hogs; do kill "$p" 2>/dev/null || true; done
    hogs=""
}
# Stopped or interrupted, it stops its busy loops too (a shell runs no EXIT
# trap when a signal kills it).
trap 'stop_hogs; rm -rf "$work"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
quantum=""
[ -n "${MC_QUANTUM_US:-}" ] && quantum="--quantum-us $MC_QUANTUM_US"
loads=${MC_LOADS:-"quiet hogs core0"}

# The problem each application computes.
problem() {
    if [ -n "${MC_PROBLEM:-}" ]; then
        echo "$MC_PROBLEM"
        return
    fi
    case "$1" in
        sor) echo "--rows 2048 --cols 2048 --iters 20" ;;
        gauss) echo "--size 1024" ;;
        water-nsquared) echo "--size 1000 --iters 3" ;;
        *) echo "--preset medium" ;;
    esac
}

# A field of the run's JSON record: the last match.
field() { # name file
    sed -n "s/.*\"$1\":\([0-9.e+-]*\).*/\1/p" "$2" | tail -1
}

# One run under `load`; leaves its record in $work/r.jsonl.
run_once() { # load app nodes threads extra...
    load=$1 app=$2 nodes=$3 threads=$4
    shift 4
    rec="$work/r.jsonl"
    rm -f "$rec"
    cmd="$mc_host run --nodes $nodes --threads $threads --clock virtual $work_flag $quantum -- \
        $guest csm $app $(problem "$app") --json $rec $*"
    case "$load" in
        core0) cmd="taskset -c 0 $cmd" ;;
        cores01) cmd="taskset -c 0,1 $cmd" ;;
    esac
    $cmd > "$work/out" 2>&1 || { cat "$work/out" >&2; echo "run failed: $cmd" >&2; exit 1; }
}

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# "m1 m2 m3 spread" of the medians per load of column COL in FILE
# (lines: load value...).
per_load() { # file col
    line=""
    for load in $loads; do
        line="$line $(awk -v l="$load" -v c="$2" '$1 == l {print $c}' "$1" | median)"
    done
    spread=$(echo "$line" | tr ' ' '\n' | grep . |
        awk 'NR==1{mn=$1;mx=$1} {if($1<mn)mn=$1; if($1>mx)mx=$1} END {printf "%.1f%%", 100*(mx-mn)/mn}')
    for v in $line; do printf '%12.4g ' "$v"; done
    printf '%8s' "$spread"
}

echo "predict-check: work measured by $work_measure" >&2
printf '%-16s %-5s %-16s' app shape measure
for load in $loads; do printf ' %12s' "$load"; done
printf ' %8s\n' spread
for app in $apps; do
    : > "$work/seq"
    for shape in $shapes; do : > "$work/par-$shape"; done
    for _ in $(seq "$reps"); do
        for load in $loads; do
            if [ "$load" = hogs ]; then
                sh -c 'while :; do :; done' & hogs="$hogs $!"
                sh -c 'while :; do :; done' & hogs="$hogs $!"
            fi
            run_once "$load" "$app" 1 1 --sequential
            seq_cpu=$(field sequential_cpu_s "$work/r.jsonl")
            echo "$load $seq_cpu" >> "$work/seq"
            echo "predict-check: $app sequential ($load): ${seq_cpu} s CPU" >&2
            for shape in $shapes; do
                run_once "$load" "$app" "${shape%:*}" "${shape#*:}"
                p=$(field predicted_s "$work/r.jsonl")
                # The run's own compute_s: the first in the record's times
                # object (the nodes' follow it).
                w=$(sed -n 's/.*"times":{"compute_s":\([0-9.e+-]*\).*/\1/p' "$work/r.jsonl" | tail -1)
                s=$(awk -v a="$seq_cpu" -v b="$p" 'BEGIN {printf "%.4f", a / b}')
                echo "$load $p $w $s" >> "$work/par-$shape"
                echo "predict-check: $app $shape ($load): predicted ${p} s, wall ${w} s, speedup $s" >&2
            done
            stop_hogs
        done
    done
    for shape in $shapes; do
        printf '%-16s %-5s %-16s %s\n' "$app" "$shape" "predicted s" "$(per_load "$work/par-$shape" 2)"
        printf '%-16s %-5s %-16s %s\n' "$app" "$shape" "$seq_label" "$(per_load "$work/seq" 2)"
        printf '%-16s %-5s %-16s %s\n' "$app" "$shape" "speedup" "$(per_load "$work/par-$shape" 4)"
        printf '%-16s %-5s %-16s %s\n' "$app" "$shape" "wall-clock s" "$(per_load "$work/par-$shape" 3)"
    done
done
