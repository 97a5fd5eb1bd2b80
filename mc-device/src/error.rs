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
    SocketDir {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot listen on {path}: {source}")]
    Listen {
        path: PathBuf,
        #[source]
        source: vhost::vhost_user::Error,
    },
    #[error("cannot keep a handle on the socket {path}: {source}")]
    ListenFd {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "socket directory {dir} is in use by another backend ({holder}); stop it first, or use another socket directory"
    )]
    InUse { dir: PathBuf, holder: String },
    #[error("cannot lock the socket directory with {path}: {source}")]
    Lock {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path} is {kind}, not a socket: refusing to replace it")]
    NotASocket { path: PathBuf, kind: &'static str },
    #[error(
        "{path} is a live socket (something accepts connections on it): refusing to take it over"
    )]
    SocketLive { path: PathBuf },
    #[error("cannot check or clear the socket path {path}: {source}")]
    SocketPath {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot start a thread: {0}")]
    Thread(#[source] io::Error),
    #[error("cannot create an eventfd: {0}")]
    EventFd(#[source] io::Error),
}
