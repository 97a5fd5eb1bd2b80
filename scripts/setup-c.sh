#!/usr/bin/env bash
# Install what C programs on the emulator need to build, from the
# distribution's packages (Debian): a C compiler (gcc), m4 (the SPLASH
# macros, scripts/mc-cc), binutils (objcopy, objdump: mc-cc's renaming of
# the program's globals; ar) and make. Idempotent: when all are present it only says so.
# The tests that need them (integration/tests/c_api.rs, c_anl.rs) skip,
# saying why, without them. See docs/c-programs.md.
set -euo pipefail

say() { printf 'setup-c: %s\n' "$*"; }

missing=()
command -v "${CC:-cc}" >/dev/null 2>&1 || missing+=(gcc)
command -v m4 >/dev/null 2>&1 || missing+=(m4)
{ command -v objcopy && command -v objdump && command -v ar; } >/dev/null 2>&1 || missing+=(binutils)
# make: a program's own Makefile with mc-cc as CC (integration/tests/mc_cc.rs)
command -v make >/dev/null 2>&1 || missing+=(make)
if [ ${#missing[@]} -eq 0 ]; then
    say "cc, m4, objcopy, objdump, ar, make: present"
    exit 0
fi
SUDO=()
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo)
fi
say "installing ${missing[*]} (apt)"
"${SUDO[@]}" apt-get update -qq
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
say "installed ${missing[*]}"
