#!/usr/bin/env bash
# Install Debian's PVM 3.4 (the daemon and library, pvm3.h, the example
# programs) from the distribution's package repositories. libpvm-mc is
# built against Debian's pvm3.h, the integration test builds the examples
# of pvm-examples against libpvm-mc, and the daemon's own PVM is the
# latency baseline (docs/pvm.md). Idempotent: when everything is there it
# only says so.
#
#   scripts/setup-pvm.sh
#
# Without them the PVM tests (integration/tests/pvm.rs) skip, saying why.
set -euo pipefail

PACKAGES=(pvm pvm-dev pvm-examples)
EXAMPLES=/usr/share/doc/pvm-examples/examples.tar.gz

say() { printf 'setup-pvm: %s\n' "$*"; }

have_all() {
    [ -f /usr/include/pvm3.h ] && [ -f "$EXAMPLES" ] && command -v pvm >/dev/null 2>&1
}

if have_all; then
    say "PVM $(dpkg-query -W -f='${Version}' pvm-dev 2>/dev/null || echo '?'): pvm3.h, the daemon and $EXAMPLES are installed"
    exit 0
fi

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO=(sudo)
    else
        say "error: not root and no sudo: install ${PACKAGES[*]} by hand" >&2
        exit 1
    fi
fi
if ! command -v apt-get >/dev/null 2>&1; then
    say "error: no apt-get: install PVM 3.4 (pvm3.h and the example programs) by hand" >&2
    exit 1
fi
say "apt-get install ${PACKAGES[*]}"
"${SUDO[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq "${PACKAGES[@]}"
have_all || { say "error: the packages installed, but pvm3.h, pvm or $EXAMPLES is still missing" >&2; exit 1; }
say "done"
