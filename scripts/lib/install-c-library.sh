# Shared by scripts/install-lib*.sh (sourced, not run): build one of the
# workspace's C libraries in release and install it under a prefix.
#
# install_c_library ROOT PACKAGE PREFIX [HEADER:DEST]...
#   builds PACKAGE (libimc, libump, libcsm), installs PREFIX/lib/PACKAGE.a
#   and PACKAGE.so, and each HEADER (relative to ROOT) as
#   PREFIX/include/DEST; then lists what it installed.
install_c_library() {
    icl_root=$1
    icl_package=$2
    icl_prefix=$3
    shift 3
    icl_target=${CARGO_TARGET_DIR:-$icl_root/target}
    cargo build --release -p "$icl_package" --manifest-path "$icl_root/Cargo.toml"
    install -d "$icl_prefix/lib" "$icl_prefix/include"
    icl_installed=""
    for icl_header in "$@"; do
        icl_dest="$icl_prefix/include/${icl_header#*:}"
        install -d "$(dirname "$icl_dest")"
        install -m 644 "$icl_root/${icl_header%%:*}" "$icl_dest"
        icl_installed="$icl_installed $icl_dest"
    done
    install -m 644 "$icl_target/release/$icl_package.a" "$icl_prefix/lib/$icl_package.a"
    install -m 755 "$icl_target/release/$icl_package.so" "$icl_prefix/lib/$icl_package.so"
    echo "installed $icl_package in $icl_prefix:"
    for icl_file in $icl_installed "$icl_prefix/lib/$icl_package.a" "$icl_prefix/lib/$icl_package.so"; do
        echo "  $icl_file"
    done
}
