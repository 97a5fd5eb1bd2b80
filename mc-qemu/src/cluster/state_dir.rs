//! The state directory of a QEMU cluster: where each file lives, the pid
//! files, and the record `up` leaves (`cluster.toml`).

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::QemuError;

const STATE_FILE: &str = "cluster.toml";

/// The files of a cluster's state directory.
#[derive(Debug, Clone)]
pub struct StateDir(pub PathBuf);

impl StateDir {
    pub fn socket_dir(&self) -> PathBuf {
        self.0.join("sock")
    }
    pub fn backend_pid(&self) -> PathBuf {
        self.0.join("backend.pid")
    }
    pub fn backend_log(&self) -> PathBuf {
        self.0.join("backend.log")
    }
    pub fn node_pid(&self, n: u32) -> PathBuf {
        self.0.join(format!("node{n}.pid"))
    }
    pub fn serial_log(&self, n: u32) -> PathBuf {
        self.0.join(format!("node{n}.serial.log"))
    }
    pub fn agent_socket(&self, n: u32) -> PathBuf {
        self.0.join(format!("node{n}.agent.sock"))
    }
    pub fn state_file(&self) -> PathBuf {
        self.0.join(STATE_FILE)
    }

    /// The cluster `up` recorded, if any.
    pub fn load(&self) -> Result<QemuClusterRecord, QemuError> {
        let p = self.state_file();
        let text = fs::read_to_string(&p).map_err(|e| {
            QemuError::io(
                format!(
                    "no cluster in {} ({}): start one with `mc-host cluster up`",
                    self.0.display(),
                    p.display()
                ),
                e,
            )
        })?;
        toml::from_str(&text).map_err(|source| QemuError::ClusterRecord { path: p, source })
    }

    /// Every pid file present: (what, file).
    pub(super) fn pid_files(&self) -> Vec<(String, PathBuf)> {
        let mut v = Vec::new();
        if let Ok(rd) = fs::read_dir(&self.0) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if let Some(what) = name.strip_suffix(".pid") {
                    v.push((what.to_string(), e.path()));
                }
            }
        }
        // Guests first, the backend last.
        v.sort_by_key(|(w, _)| (w == "backend", w.clone()));
        v
    }
}

/// What `up` started (`cluster.toml`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QemuClusterRecord {
    pub nodes: u32,
    pub memory_mib: u32,
    pub backend_pid: u32,
    pub guest_pids: Vec<u32>,
    pub image_dir: PathBuf,
}

pub(super) fn write_pid(path: &Path, pid: u32) -> Result<(), QemuError> {
    fs::write(path, format!("{pid}\n"))
        .map_err(|e| QemuError::io(format!("writing {}", path.display()), e))
}

pub(super) fn read_pid(path: &Path) -> Option<u32> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

pub(super) fn read_lossy(p: &Path) -> String {
    fs::read(p)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}
