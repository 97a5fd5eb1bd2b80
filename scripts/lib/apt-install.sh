# shellcheck shell=bash
# Sourced by the set-up scripts: install PACKAGES with apt-get (as root, or
# through sudo), then check with the caller's `have_all` that what they
# provide is there. The caller defines `say`, `have_all` and PACKAGES.
#
#   apt_install "WHAT TO INSTALL BY HAND WITHOUT APT" "WHAT HAVE_ALL LOOKS FOR"

apt_install() {
    local by_hand=$1 looked_for=$2
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1; then
            sudo=(sudo)
        else
            say "error: not root and no sudo: install ${PACKAGES[*]} by hand" >&2
            exit 1
        fi
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        say "error: no apt-get: install $by_hand by hand" >&2
        exit 1
    fi
    say "apt-get install ${PACKAGES[*]}"
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${PACKAGES[@]}"
    have_all || { say "error: the packages installed, but $looked_for is still missing" >&2; exit 1; }
    say "done"
}
