//! What a DSM program on a guest is told by its environment, spelled here
//! and nowhere else (docs/dsm.md).

/// Which DSM protocol a C program's runtime (libcsm) starts, by name
/// (`cashmere`, the default, or `naive`); `mc-guest csm --protocol` is the
/// same choice.
pub const PROTOCOL_ENV: &str = "CSM_PROTOCOL";
