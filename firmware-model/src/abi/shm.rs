//! Which of a run's adapters share one host's memory, as `mc-host` hands
//! it to its guests (issue 41: several PVM tasks on one host, each a
//! process with its own adapter): a directory for the files their UMP
//! channels map, and the adapters (nodes) that reach it. The variables are
//! spelled here and nowhere else. Pure: the caller passes the
//! environment's lookup.

use std::path::PathBuf;

/// The variables, private to this module: use [`HostShm`].
mod env {
    /// The directory where a host's processes create the files of their
    /// shared-memory UMP channels (one per run, removed with it).
    pub const DIR: &str = "MC_UMP_SHM_DIR";
    /// The nodes whose processes share that memory: a 64-bit mask, hex.
    pub const NODES: &str = "MC_UMP_SHM_NODES";
}

/// The processes of one host: where their channel files go and which
/// nodes they are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostShm {
    pub dir: PathBuf,
    /// Bit n: node n is a process of this host.
    pub nodes: u64,
}

/// A shared-memory variable that does not say what it must.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("{var}={value:?}: {why}")]
pub struct ShmEnvError {
    pub var: &'static str,
    pub value: String,
    pub why: &'static str,
}

impl HostShm {
    /// Whether node `n` is a process of this host.
    pub fn holds(&self, n: u8) -> bool {
        n < 64 && self.nodes & (1 << n) != 0
    }

    /// The variables that give a guest this value.
    pub fn to_env(&self) -> Vec<(&'static str, String)> {
        vec![
            (env::DIR, self.dir.display().to_string()),
            (env::NODES, format!("{:x}", self.nodes)),
        ]
    }

    /// What [`HostShm::to_env`] set, read back through `var`: `None` when
    /// the directory is unset or empty (every channel between processes
    /// then goes over Memory Channel).
    pub fn from_lookup(
        var: impl Fn(&'static str) -> Option<String>,
    ) -> Result<Option<HostShm>, ShmEnvError> {
        let dir = match var(env::DIR) {
            Some(d) if !d.is_empty() => PathBuf::from(d),
            _ => return Ok(None),
        };
        let bad = |value: String, why| ShmEnvError {
            var: env::NODES,
            value,
            why,
        };
        let nodes = match var(env::NODES) {
            None => return Err(bad(String::new(), "must be set with MC_UMP_SHM_DIR")),
            Some(v) => u64::from_str_radix(v.trim(), 16)
                .map_err(|_| bad(v, "expected a hexadecimal mask of nodes"))?,
        };
        Ok(Some(HostShm { dir, nodes }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn the_variables_carry_the_value_there_and_back() {
        let v = HostShm {
            dir: PathBuf::from("/tmp/run/ump-shm"),
            nodes: 0xf0,
        };
        let vars: HashMap<_, _> = v.to_env().into_iter().collect();
        let back = HostShm::from_lookup(|k| vars.get(k).cloned()).unwrap();
        assert_eq!(back, Some(v.clone()));
        assert!(v.holds(4) && v.holds(7) && !v.holds(3) && !v.holds(8) && !v.holds(200));
        assert_eq!(HostShm::from_lookup(|_| None).unwrap(), None);
    }

    #[test]
    fn a_bad_mask_is_an_error_naming_the_variable() {
        let e = HostShm::from_lookup(|k| Some(if k == env::DIR { "/d" } else { "zz" }.to_string()))
            .unwrap_err();
        assert_eq!(e.var, env::NODES);
        assert!(e.to_string().contains("MC_UMP_SHM_NODES=\"zz\""));
    }
}
