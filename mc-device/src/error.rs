//! Errors at the crate boundary.

use std::io;
use std::path::PathBuf;

use firmware_model::ModelError;

/// Why a cluster could not be started or driven.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error("invalid cluster: {0}")]
    Model(#[from] ModelError),
    #[error("socket directory {path}: {source}")]
    SocketDir { path: PathBuf, source: io::Error },
    #[error("cannot listen on {path}: {reason}")]
    Listen { path: PathBuf, reason: String },
    #[error("cannot start a thread: {0}")]
    Thread(io::Error),
    #[error("cannot create an eventfd: {0}")]
    EventFd(io::Error),
}
