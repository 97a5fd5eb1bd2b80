//! What a C program's run asks for, read from the environment once at
//! `MAIN_INITENV`: the program has its own command line (SPLASH's `-p`,
//! sizes, files), so Cashmere's options travel as environment variables,
//! which `mc-host run` passes to every node (and sets `MC_THREADS` from
//! `--threads`). Every node must see the same values.

use std::path::PathBuf;

use cashmere::{CsmVariant, MessageDetection};
use dsm_select::ProtocolName;

/// A setting that does not parse, named with what it accepts.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("{name}={value:?}: {expected}")]
    Bad {
        name: &'static str,
        value: String,
        expected: String,
    },
    #[error(
        "CSM_LEVELS=1 with MC_THREADS={threads}: the one-level protocol gives every \
         processor a protocol node of its own, which for a C program means a process of its \
         own; run 1L with one thread per node (--threads 1), or CSM_LEVELS=2"
    )]
    OneLevelThreads { threads: u32 },
}

/// The run's settings, validated.
#[derive(Clone, Debug)]
pub struct Settings {
    /// `MC_THREADS` (default 1): processes per node (Cashmere-2L threads).
    pub threads: u32,
    /// `MC_NODES`: the cluster size as `mc-host run` or the QEMU image says
    /// (sizes the coherent arena before the adapter is open).
    pub nodes_hint: u32,
    /// `CSM_PROTOCOL` (`dsm_select::PROTOCOL_ENV`; default cashmere): the
    /// DSM protocol, as `mc-guest csm --protocol`.
    pub protocol: ProtocolName,
    /// `CSM_VARIANT` (default dms): Cashmere's variant.
    pub variant: CsmVariant,
    /// `CSM_DETECTION` (default poll).
    pub detection: MessageDetection,
    /// `CSM_LEVELS` 1 or 2 (default 2; with one thread per node both are
    /// the same protocol).
    pub one_level: bool,
    /// `CSM_PAGE_SIZE` 4096 or 8192 (default 8192).
    pub page_size: u32,
    /// `CSM_HEAP_MIB`: a smaller shared heap (for `G_MALLOC`) than the
    /// largest the run's variant and cluster allow, which is the heap
    /// without it (`runtime::heap`); more than that is refused.
    pub heap_mib: Option<usize>,
    /// `CSM_LOCKS` (default 1024): Cashmere locks behind the program's
    /// LOCKs (more ANL locks than this share them).
    pub locks: u32,
    /// `CSM_STATS=1`: print each node's counters and time breakdown.
    pub stats: bool,
    /// `CSM_JSON=FILE`: node 0 appends the run's record.
    pub json: Option<PathBuf>,
    /// `CSM_NO_EXCLUSIVE=1`, `CSM_HOME_DIFFS=1`: protocol switches as
    /// `mc-guest csm`'s `--no-exclusive` and `--home-diffs`.
    pub exclusive_mode: bool,
    pub home_direct: bool,
}

fn var(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

fn flag(name: &str) -> bool {
    var(name).is_some_and(|v| !matches!(v.as_str(), "0" | "false" | "no"))
}

fn number<T: std::str::FromStr>(
    name: &'static str,
    default: T,
    ok: impl Fn(&T) -> bool,
    expected: &str,
) -> Result<T, SettingsError> {
    match var(name) {
        None => Ok(default),
        Some(v) => match v.parse::<T>() {
            Ok(n) if ok(&n) => Ok(n),
            _ => Err(SettingsError::Bad {
                name,
                value: v,
                expected: expected.to_string(),
            }),
        },
    }
}

/// How a node notices requests by its name (`mc-guest csm --detection`'s
/// spelling, in any case).
fn detection(name: &'static str) -> Result<MessageDetection, SettingsError> {
    match var(name) {
        None => Ok(MessageDetection::default()),
        Some(v) => v
            .parse::<MessageDetection>()
            .map_err(|_| SettingsError::Bad {
                name,
                expected: format!(
                    "one of {}",
                    MessageDetection::ALL
                        .iter()
                        .map(|d| d.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                value: v,
            }),
    }
}

/// The DSM protocol by its name (`mc-guest csm --protocol`'s spelling).
fn protocol(name: &'static str) -> Result<ProtocolName, SettingsError> {
    match var(name) {
        None => Ok(ProtocolName::default()),
        Some(v) => v.parse::<ProtocolName>().map_err(|_| SettingsError::Bad {
            name,
            expected: format!("one of {}", ProtocolName::names()),
            value: v,
        }),
    }
}

/// A protocol variant by its name (`mc-guest csm --variant`'s spelling).
fn variant(name: &'static str) -> Result<CsmVariant, SettingsError> {
    match var(name) {
        None => Ok(CsmVariant::default()),
        Some(v) => v.parse::<CsmVariant>().map_err(|_| SettingsError::Bad {
            name,
            expected: format!(
                "one of {}",
                CsmVariant::all()
                    .iter()
                    .map(|x| x.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            value: v,
        }),
    }
}

impl Settings {
    pub fn from_env() -> Result<Settings, SettingsError> {
        let threads = number(
            "MC_THREADS",
            1u32,
            |t| (1..=cashmere::MAX_THREADS).contains(t),
            &format!("1 to {}", cashmere::MAX_THREADS),
        )?;
        let levels = number("CSM_LEVELS", 2u32, |l| *l == 1 || *l == 2, "1 or 2")?;
        if levels == 1 && threads > 1 {
            return Err(SettingsError::OneLevelThreads { threads });
        }
        Ok(Settings {
            threads,
            nodes_hint: number("MC_NODES", 1u32, |n| (1..=64).contains(n), "1 to 64")?,
            protocol: protocol(dsm_select::PROTOCOL_ENV)?,
            variant: variant("CSM_VARIANT")?,
            detection: detection("CSM_DETECTION")?,
            one_level: levels == 1,
            page_size: number(
                "CSM_PAGE_SIZE",
                8192u32,
                |p| *p == 4096 || *p == 8192,
                "4096 or 8192",
            )?,
            heap_mib: match var("CSM_HEAP_MIB") {
                None => None,
                Some(_) => Some(number(
                    "CSM_HEAP_MIB",
                    0usize,
                    |m| (1..=cashmere::MAX_HEAP_BYTES >> 20).contains(m),
                    &format!("1 to {}", cashmere::MAX_HEAP_BYTES >> 20),
                )?),
            },
            locks: number(
                "CSM_LOCKS",
                1024u32,
                |l| (2..=4096).contains(l),
                "2 to 4096",
            )?,
            stats: flag("CSM_STATS"),
            json: var("CSM_JSON").map(PathBuf::from),
            exclusive_mode: !flag("CSM_NO_EXCLUSIVE"),
            home_direct: !flag("CSM_HOME_DIFFS"),
        })
    }
}
