#!/usr/bin/env bash
# Before and after for the data path (issue 42), in one sitting: runs
# `mc-guest bench bandwidth`, `bench ump` and `bench latency` on a 2-node
# virtual cluster with each of two builds, alternating (base, new, base, ...)
# for ROUNDS rounds, and prints each figure's median per build, the ratio
# new/base of the medians, and the raw limits the benches measured in the
# same runs (docs/perf.md, "Second pass").
#
#   scripts/datapath-bench.sh BASE_BIN_DIR NEW_BIN_DIR [ROUNDS]    (5)
#
# Each BIN_DIR holds a release `mc-host` and `mc-guest` (mc-host runs the
# mc-guest beside it). Needs only bash and coreutils: nothing is built here.
set -euo pipefail

if [ $# -lt 2 ]; then
    echo "usage: $0 BASE_BIN_DIR NEW_BIN_DIR [ROUNDS]" >&2
    exit 2
fi
BASE="$1"
NEW="$2"
ROUNDS="${3:-5}"
for d in "$BASE" "$NEW"; do
    for b in mc-host mc-guest; do
        [ -x "$d/$b" ] || { echo "datapath-bench: no executable $d/$b" >&2; exit 1; }
    done
done

OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT

# The word before the first occurrence of word $2 in line $1.
before_word() {
    local -a w
    read -ra w <<<"$1"
    local i
    for ((i = 1; i < ${#w[@]}; i++)); do
        if [ "${w[i]}" = "$2" ]; then
            echo "${w[i - 1]}"
            return
        fi
    done
}

# The first line of file $1 that contains $2.
line_with() {
    local l
    while IFS= read -r l; do
        if [[ "$l" == *"$2"* ]]; then
            echo "$l"
            return
        fi
    done <"$1"
}

# Record figure $2 = $3 for build $1 (nothing if the run did not give it).
record() {
    [ -n "$3" ] && echo "$3" >>"$OUT/$1.$2"
    return 0
}

one_round() {
    local build="$1" dir="$2" f l
    f="$OUT/run.txt"
    "$dir/mc-host" run --nodes 2 -- mc-guest bench bandwidth >"$f" 2>&1 || true
    for size in 32 256 4096 65536; do
        l="$(line_with "$f" "streaming, $size B writes")"
        record "$build" "bw$size" "$(before_word "$l" MB/s)"
        local -a w
        read -ra w <<<"$l"
        [ ${#w[@]} -gt 0 ] && record "$build" "bw$size-raw" "${w[-3]}"
        [ ${#w[@]} -gt 0 ] && record "$build" "bw$size-share" "${w[-1]%x}"
    done
    "$dir/mc-host" run --nodes 2 -- mc-guest bench ump >"$f" 2>&1 || true
    for size in 65536 1048576; do
        l="$(line_with "$f" " $size |")"
        if [ -n "$l" ]; then
            local bw="${l##*|}"
            local -a b
            read -ra b <<<"$bw"
            record "$build" "ump$size-blk" "${b[0]}"
            record "$build" "ump$size-nb" "${b[1]}"
        fi
    done
    l="$(line_with "$f" "this machine, same run")"
    local mem
    mem="$(before_word "${l##*memcpy 64 KiB}" MB/s)"
    record "$build" "ump-memcpy" "$mem"
    if [ -n "$mem" ] && [ -s "$OUT/$build.ump65536-blk" ]; then
        local -a last
        mapfile -t last <"$OUT/$build.ump65536-blk"
        record "$build" "ump-share" "$(ratio "${last[-1]}" "$mem")"
    fi
    "$dir/mc-host" run --nodes 2 -- mc-guest bench latency >"$f" 2>&1 || true
    l="$(line_with "$f" "one-way latency, 8-byte write (median)")"
    record "$build" "lat" "$(before_word "$l" us)"
}

# Median of the numbers in file $1 (the lower middle of an even count).
median() {
    [ -s "$1" ] || { echo "-"; return; }
    local -a v
    mapfile -t v < <(sort -g "$1")
    echo "${v[$(((${#v[@]} - 1) / 2))]}"
}

# A decimal number as an integer count of thousandths.
milli() {
    local x="$1" int frac
    int="${x%%.*}"
    if [ "$int" = "$x" ]; then frac=""; else frac="${x#*.}"; fi
    frac="${frac}000"
    frac="${frac:0:3}"
    echo $((10#${int:-0} * 1000 + 10#$frac))
}

# $1 / $2 to two decimals ("-" when either is missing or $2 is 0).
ratio() {
    if [ "$1" = "-" ] || [ "$2" = "-" ]; then echo "-"; return; fi
    local a b q
    a="$(milli "$1")"
    b="$(milli "$2")"
    [ "$b" -eq 0 ] && { echo "-"; return; }
    q=$(((a * 100 + b / 2) / b))
    printf '%d.%02d' $((q / 100)) $((q % 100))
}

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 1; r <= ROUNDS; r++)); do
    one_round base "$BASE"
    one_round new "$NEW"
    echo "round $r of $ROUNDS done; load average $(cut -d' ' -f1-3 /proc/loadavg)"
done

printf '%-34s %12s %12s %10s\n' "figure (median of $ROUNDS)" base new new/base
for fig in bw32 bw256 bw4096 bw65536 ump65536-blk ump65536-nb ump1048576-blk ump1048576-nb lat; do
    b="$(median "$OUT/base.$fig")"
    n="$(median "$OUT/new.$fig")"
    case "$fig" in
    bw*) name="streaming ${fig#bw} B, MB/s" ;;
    ump*) name="UMP over MC ${fig#ump}, MB/s" ;;
    lat) name="one-way latency 8 B, us" ;;
    esac
    printf '%-34s %12s %12s %10s\n' "$name" "$b" "$n" "$(ratio "$n" "$b")"
done
echo "raw limits measured in the same runs (medians), and each build's share of them:"
for size in 32 65536; do
    printf '  streaming %s B: memcpy %s / %s MB/s (base / new); share of raw %s / %s\n' "$size" \
        "$(median "$OUT/base.bw$size-raw")" "$(median "$OUT/new.bw$size-raw")" \
        "$(median "$OUT/base.bw$size-share")" "$(median "$OUT/new.bw$size-share")"
done
bm="$(median "$OUT/base.ump-memcpy")"
nm="$(median "$OUT/new.ump-memcpy")"
printf '  UMP 64 KiB blocking: memcpy 64 KiB %s / %s MB/s; share (median of the runs'"'"' ratios) %s / %s\n' \
    "$bm" "$nm" "$(median "$OUT/base.ump-share")" "$(median "$OUT/new.ump-share")"
echo "every run, in order (base | new):"
for fig in bw32 bw65536 ump65536-blk ump1048576-nb lat; do
    printf '  %-16s %s | %s\n' "$fig" "$(tr '\n' ' ' <"$OUT/base.$fig" 2>/dev/null)" \
        "$(tr '\n' ' ' <"$OUT/new.$fig" 2>/dev/null)"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
