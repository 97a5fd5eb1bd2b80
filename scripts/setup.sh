#!/usr/bin/env bash
# Set up what the QEMU path of this project needs, from the distribution's
# package repositories only. Idempotent: re-running it when everything is in
# place only checks and says so.
#
#   1. mmdebstrap (apt)
#   2. a QEMU >= 10.2 with vhost-user-test-device-pci: the one named by
#      $MC_QEMU or found on PATH if new enough, otherwise a cached Debian
#      trixie root with trixie-backports' qemu-system-x86
#   3. the guest kernel (the default release's linux-image-cloud-amd64) and a
#      static busybox, extracted into the cache
#
# Cache: ${MC_CACHE_DIR:-~/.cache/mc-emu}
#   qemu-root/               trixie root holding usr/bin/qemu-system-x86_64
#   guest/vmlinuz            guest kernel image
#   guest/kernel-package     name and version of the package it came from
#   guest/busybox            static busybox
#   guest/busybox-package    name and version of the package it came from
#
# mc-host (host/src/qemu) reads the same layout.
set -euo pipefail

MIN_QEMU_MAJOR=10
MIN_QEMU_MINOR=2
CACHE_DIR="${MC_CACHE_DIR:-$HOME/.cache/mc-emu}"
QEMU_ROOT="$CACHE_DIR/qemu-root"
GUEST_DIR="$CACHE_DIR/guest"
QEMU_SUITE="trixie"

say() { printf 'setup: %s\n' "$*"; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO=(sudo)
    fi
fi

# Temporary directories to remove on exit, whatever happens.
TMP_DIRS=()
cleanup() { if [ "${#TMP_DIRS[@]}" -gt 0 ]; then rm -rf "${TMP_DIRS[@]}"; fi; }
trap cleanup EXIT

APT_UPDATED=0
apt_update_once() {
    if [ "$APT_UPDATED" -eq 0 ]; then
        say "apt-get update"
        "${SUDO[@]}" apt-get update -qq || die "apt-get update failed"
        APT_UPDATED=1
    fi
}

# --- helpers ---------------------------------------------------------------

# Print the version ("11.1.3") of the QEMU run by the command in "$@", or nothing.
qemu_version_of() {
    local out
    out="$("$@" -version 2>/dev/null | head -n1)" || return 0
    # "QEMU emulator version 11.1.3 (Debian 1:11.1.3+ds-1~bpo13+1)"
    printf '%s\n' "$out" | sed -n 's/^QEMU emulator version \([0-9]\+\.[0-9]\+\(\.[0-9]\+\)\?\).*/\1/p'
}

# True if the QEMU run by "$@" is >= MIN.
qemu_new_enough() {
    local v major minor
    v="$(qemu_version_of "$@")"
    [ -n "$v" ] || return 1
    IFS=. read -r major minor _ <<<"$v"
    [ "$major" -gt "$MIN_QEMU_MAJOR" ] ||
        { [ "$major" -eq "$MIN_QEMU_MAJOR" ] && [ "$minor" -ge "$MIN_QEMU_MINOR" ]; }
}

# The command that runs the cached root's QEMU through its own loader.
root_qemu_cmd() {
    printf '%s\n' "$QEMU_ROOT/lib64/ld-linux-x86-64.so.2" \
        --library-path "$QEMU_ROOT/usr/lib/x86_64-linux-gnu:$QEMU_ROOT/lib/x86_64-linux-gnu" \
        "$QEMU_ROOT/usr/bin/qemu-system-x86_64"
}

# The Debian mirror (archive, not security) from the machine's apt sources.
debian_mirror() {
    local f uri
    f=/etc/apt/sources.list.d/debian.sources
    if [ -r "$f" ]; then
        # deb822: first stanza whose Suites has no "-security" suite.
        uri="$(awk '
            /^[[:space:]]*$/ { if (uris != "" && !sec) { print uris; exit } uris=""; sec=0; next }
            /^URIs:/ { uris=$2 }
            /^Suites:/ { for (i = 2; i <= NF; i++) if ($i ~ /-security$/) sec=1 }
            END { if (uris != "" && !sec) print uris }
        ' "$f" | head -n1)"
    fi
    if [ -z "${uri:-}" ]; then
        for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
            [ -r "$f" ] || continue
            # deb [options] URI suite components...
            uri="$(awk '$1 == "deb" {
                        i = 2; if ($2 ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
                        if ($(i+1) !~ /-security$/) { print $i; exit } }' "$f")"
            [ -n "$uri" ] && break
        done
    fi
    [ -n "${uri:-}" ] || die "no Debian mirror found in /etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list"
    printf '%s\n' "${uri%/}"
}

# --- 1. mmdebstrap ------------------------------------------------------------

need_mmdebstrap() {
    if command -v mmdebstrap >/dev/null 2>&1; then
        say "mmdebstrap: present ($(command -v mmdebstrap))"
    else
        apt_update_once
        say "installing mmdebstrap (apt)"
        "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mmdebstrap >/dev/null ||
            die "apt-get install mmdebstrap failed"
        say "mmdebstrap: installed"
    fi
}

# --- 2. QEMU --------------------------------------------------------------------

setup_qemu() {
    if [ -n "${MC_QEMU:-}" ]; then
        [ -x "$MC_QEMU" ] || die "MC_QEMU=$MC_QEMU is not an executable file"
        if qemu_new_enough "$MC_QEMU"; then
            say "QEMU: using MC_QEMU=$MC_QEMU ($(qemu_version_of "$MC_QEMU" ))"
            return
        fi
        say "QEMU: MC_QEMU=$MC_QEMU is older than $MIN_QEMU_MAJOR.$MIN_QEMU_MINOR or unreadable; using the cached root instead"
    fi
    local onpath
    onpath="$(command -v qemu-system-x86_64 || true)"
    if [ -n "$onpath" ]; then
        if qemu_new_enough "$onpath"; then
            say "QEMU: using $onpath on PATH ($(qemu_version_of "$onpath" ))"
            return
        fi
        say "QEMU: $onpath on PATH is too old ($(qemu_version_of "$onpath" )); need >= $MIN_QEMU_MAJOR.$MIN_QEMU_MINOR"
    fi
    local cmd
    mapfile -t cmd < <(root_qemu_cmd)
    if [ -x "$QEMU_ROOT/usr/bin/qemu-system-x86_64" ] && qemu_new_enough "${cmd[@]}"; then
        say "QEMU: cached root already present: $QEMU_ROOT ($(qemu_version_of "${cmd[@]}" ))"
        return
    fi
    need_mmdebstrap
    local mirror tmp
    mirror="$(debian_mirror)"
    tmp="$QEMU_ROOT.tmp.$$"
    TMP_DIRS+=("$tmp")
    mkdir -p "$CACHE_DIR"
    rm -rf "$tmp"
    say "QEMU: building a $QEMU_SUITE root with $QEMU_SUITE-backports' qemu-system-x86 from $mirror"
    say "      into $QEMU_ROOT (about 255 MB; takes a minute)"
    "${SUDO[@]}" mmdebstrap --quiet --variant=apt --include=qemu-system-x86 \
        --aptopt="APT::Default-Release \"$QEMU_SUITE-backports\"" \
        "$QEMU_SUITE" "$tmp" \
        "deb $mirror $QEMU_SUITE main" "deb $mirror $QEMU_SUITE-backports main" ||
        { rm -rf "$tmp"; die "mmdebstrap failed"; }
    if [ "${#SUDO[@]}" -gt 0 ]; then "${SUDO[@]}" chown -R "$(id -u):$(id -g)" "$tmp"; fi
    rm -rf "$QEMU_ROOT"
    mv "$tmp" "$QEMU_ROOT"
    mapfile -t cmd < <(root_qemu_cmd)
    qemu_new_enough "${cmd[@]}" ||
        die "the QEMU in $QEMU_ROOT does not run or is older than $MIN_QEMU_MAJOR.$MIN_QEMU_MINOR"
    say "QEMU: cached root ready ($(qemu_version_of "${cmd[@]}" ))"
}

# --- 3. guest kernel and busybox -------------------------------------------------

# Candidate version of package $1 in the default release, or nothing.
candidate_version() {
    apt-cache policy "$1" 2>/dev/null | sed -n 's/^ *Candidate: //p' | grep -v '(none)' || true
}

# Download package $1 into the current directory; print the .deb's name.
download_deb() {
    apt-get download -qq "$1" >/dev/null 2>&1 ||
        { apt_update_once; apt-get download -qq "$1" >/dev/null; } ||
        die "apt-get download $1 failed"
    ls -t ./"$1"_*.deb | head -n1
}

setup_kernel() {
    if [ -s "$GUEST_DIR/vmlinuz" ] && [ -s "$GUEST_DIR/kernel-package" ]; then
        say "kernel: already present: $GUEST_DIR/vmlinuz ($(cat "$GUEST_DIR/kernel-package"))"
        return
    fi
    if [ -z "$(candidate_version linux-image-cloud-amd64)" ]; then apt_update_once; fi
    # The metapackage depends on the real image package (or, for the newest
    # kernels, on one that depends on a linux-binary-* holding the image).
    local work pkg deb vmlinuz depth=0
    work="$(mktemp -d "$CACHE_DIR/kernel.XXXXXX")"
    TMP_DIRS+=("$work")
    chmod 755 "$work"
    pkg=linux-image-cloud-amd64
    while :; do
        depth=$((depth + 1))
        [ "$depth" -le 4 ] || die "no package with boot/vmlinuz-* found below linux-image-cloud-amd64"
        local next
        next="$(apt-cache depends "$pkg" 2>/dev/null |
            sed -n 's/^ *|\?Depends: \(linux-\(image\|binary\)-[^ <>]*\).*/\1/p' | head -n1)"
        [ -n "$next" ] || die "apt-cache depends $pkg names no linux-image-*/linux-binary-* package"
        say "kernel: $pkg -> $next"
        deb="$(cd "$work" && download_deb "$next")"
        # (list to a file first: grep -q closing the pipe early trips pipefail)
        dpkg-deb -c "$work/$deb" >"$work/contents"
        if grep -q '\./boot/vmlinuz-' "$work/contents"; then
            pkg="$next"
            break
        fi
        pkg="$next"
    done
    say "kernel: extracting $deb"
    dpkg-deb -x "$work/$deb" "$work/root"
    vmlinuz="$(ls "$work"/root/boot/vmlinuz-* | head -n1)"
    [ -s "$vmlinuz" ] || die "no boot/vmlinuz-* in $deb"
    mkdir -p "$GUEST_DIR"
    cp "$vmlinuz" "$GUEST_DIR/vmlinuz.tmp"
    mv "$GUEST_DIR/vmlinuz.tmp" "$GUEST_DIR/vmlinuz"
    printf '%s %s %s\n' "$pkg" "$(dpkg-deb -f "$work/$deb" Version)" "$(basename "$vmlinuz")" \
        >"$GUEST_DIR/kernel-package"
    rm -rf "$work"
    say "kernel: ready: $GUEST_DIR/vmlinuz ($(cat "$GUEST_DIR/kernel-package"))"
}

setup_busybox() {
    if [ -s "$GUEST_DIR/busybox" ] && [ -s "$GUEST_DIR/busybox-package" ]; then
        say "busybox: already present: $GUEST_DIR/busybox ($(cat "$GUEST_DIR/busybox-package"))"
        return
    fi
    if [ -z "$(candidate_version busybox-static)" ]; then apt_update_once; fi
    local work deb
    work="$(mktemp -d "$CACHE_DIR/busybox.XXXXXX")"
    TMP_DIRS+=("$work")
    chmod 755 "$work"
    say "busybox: downloading busybox-static"
    deb="$(cd "$work" && download_deb busybox-static)"
    dpkg-deb -x "$work/$deb" "$work/root"
    [ -x "$work/root/bin/busybox" ] || die "no bin/busybox in $deb"
    mkdir -p "$GUEST_DIR"
    cp "$work/root/bin/busybox" "$GUEST_DIR/busybox.tmp"
    mv "$GUEST_DIR/busybox.tmp" "$GUEST_DIR/busybox"
    printf 'busybox-static %s\n' "$(dpkg-deb -f "$work/$deb" Version)" >"$GUEST_DIR/busybox-package"
    rm -rf "$work"
    say "busybox: ready: $GUEST_DIR/busybox ($(cat "$GUEST_DIR/busybox-package"))"
}

main() {
    local start=$SECONDS
    say "cache: $CACHE_DIR"
    mkdir -p "$CACHE_DIR" "$GUEST_DIR"
    # Left-overs of an interrupted run.
    rm -rf "$CACHE_DIR"/kernel.?????? "$CACHE_DIR"/busybox.?????? "$QEMU_ROOT".tmp.*
    setup_qemu
    setup_kernel
    setup_busybox
    say "done in $((SECONDS - start)) s; next: cargo run --release --bin mc-host -- cluster up --nodes 3"
}

main "$@"
