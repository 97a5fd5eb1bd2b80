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

# shellcheck source=scripts/lib/apt-install.sh
source "$(dirname "$0")/lib/apt-install.sh"
apt_install "PVM 3.4 (pvm3.h and the example programs)" "pvm3.h, pvm or $EXAMPLES"
