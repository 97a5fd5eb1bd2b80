#!/usr/bin/env bash
# hlrc-whatif.sh: seed 001 s.6's broadcast what-if, measured
# (docs/hlrc.md, "What-if: barriers by broadcast").
#
#   scripts/hlrc-whatif.sh [REPS] [NODES...]
#
# Runs each application under `--protocol hlrc` (one barrier manager) and
# `--protocol hlrc-broadcast` (every node broadcasts its arrival), in
# predicted time on the counted-work clock, on Memory Channel 2's timing
# (`--link` left at its default: virtual time is MC2's) and on seed 001's
# cLAN (`--link clan`, where a broadcast is one copy per receiver), the two
# protocols alternating, REPS times (default 5), and prints per
# application, node count and link the median predicted seconds of each
# and their ratio. Environment: MC_HOST (default target/release/mc-host),
# MC_GUEST (default: the counted build, scripts/build-counted.sh, built if
# missing), APPS (default "sor water-nsquared lu"), PRESET (default
# medium; at 16 nodes and more, small), LINKS (default "mc2 clan").
# A measurement, not a test: the protocol's part of a prediction moves
# from run to run (which request the hub orders first), so read medians.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
reps=${1:-5}
shift || true
nodes_list=${*:-"8 32"}
host=${MC_HOST:-$root/target/release/mc-host}
guest=${MC_GUEST:-}
if [ -z "$guest" ]; then
    guest="$("$root/scripts/build-counted.sh" --print-dir)/mc-guest"
    [ -x "$guest" ] || "$root/scripts/build-counted.sh" >&2
fi
[ -x "$host" ] || { echo "hlrc-whatif.sh: no mc-host at $host (cargo build --release -p host)" >&2; exit 2; }
apps=${APPS:-"sor water-nsquared lu"}
links=${LINKS:-"mc2 clan"}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

printf '%-15s %5s %5s %12s %12s %7s\n' app nodes link hlrc_s broadcast_s ratio
for n in $nodes_list; do
    preset=${PRESET:-}
    [ -n "$preset" ] || { if [ "$n" -ge 16 ]; then preset=small; else preset=medium; fi; }
    for app in $apps; do
        for link in $links; do
            link_args=()
            [ "$link" = mc2 ] || link_args=(--link "$link")
            for r in $(seq "$reps"); do
                for p in hlrc hlrc-broadcast; do
                    out=$("$host" run --nodes "$n" "${link_args[@]}" --clock virtual --work counted -- \
                        "$guest" csm "$app" --protocol "$p" --preset "$preset" 2>&1) || {
                        echo "hlrc-whatif.sh: $app $p on $n nodes ($link) failed:" >&2
                        echo "$out" | tail -5 >&2
                        exit 1
                    }
                    echo "$out" | grep -E "^\[node0\] csm $app" | grep -oE "predicted [0-9.]+ s" |
                        awk '{print $2}' >>"$tmp/$app.$n.$link.$p"
                done
            done
            a=$(median <"$tmp/$app.$n.$link.hlrc")
            b=$(median <"$tmp/$app.$n.$link.hlrc-broadcast")
            printf '%-15s %5s %5s %12s %12s %7.3f\n' "$app" "$n" "$link" "$a" "$b" \
                "$(echo "$b $a" | awk '{print $1/$2}')"
        done
    done
done
