#!/usr/bin/env bash
# Install what MPI programs on the emulated Memory Channel need, from the
# distribution's package repositories: Open MPI (mpicc, mpirun, with the
# ofi MTL) and libfabric (the headers the `mc` provider is built against,
# and fi_info). Idempotent: when everything is there it only says so.
#
#   scripts/setup-mpi.sh
#
# Without them the MPI tests (integration/tests/mpi.rs) skip, saying why.
set -euo pipefail

PACKAGES=(openmpi-bin libopenmpi-dev libfabric-dev libfabric-bin)

say() { printf 'setup-mpi: %s\n' "$*"; }

have_all() {
    command -v mpicc >/dev/null 2>&1 && command -v mpirun >/dev/null 2>&1 &&
        command -v fi_info >/dev/null 2>&1 && [ -f /usr/include/rdma/fabric.h ]
}

if have_all; then
    say "Open MPI $(mpirun --version 2>/dev/null | head -n1 | awk '{print $NF}') and libfabric $(fi_info --version 2>/dev/null | awk '/libfabric:/ {print $2}') are installed"
    exit 0
fi

# shellcheck source=scripts/lib/apt-install.sh
source "$(dirname "$0")/lib/apt-install.sh"
apt_install "Open MPI (with the ofi MTL) and libfabric's development files" "mpicc, mpirun, fi_info or rdma/fabric.h"
