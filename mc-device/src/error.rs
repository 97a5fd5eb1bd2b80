//! Errors at the crate boundary. Each keeps its cause as its `source()` and
//! does not repeat it in its message: a printer walks the chain once.

use std::io;
use std::path::PathBuf;

use firmware_model::ModelError;

/// Why a cluster could not be started or driven.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error("invalid cluster")]
    Model(#[from] ModelError),
    #[error("socket directory {path}")]
    SocketDir {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot listen on {path}")]
    Listen {
        path: PathBuf,
        #[source]
        source: vhost::vhost_user::Error,
    },
    #[error("cannot keep a handle on the socket {path}")]
    ListenFd {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "socket directory {dir} is in use by another backend ({holder}); stop it first, or use another socket directory"
    )]
    InUse { dir: PathBuf, holder: String },
    #[error("cannot lock the socket directory with {path}")]
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
    #[error("cannot check or clear the socket path {path}")]
    SocketPath {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot start a thread")]
    Thread(#[source] io::Error),
    #[error("cannot create an eventfd")]
    EventFd(#[source] io::Error),
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use firmware_model::{ClusterConfig, Hub};

    use super::*;

    /// A printer walks the chain once: no message repeats its source's.
    #[test]
    fn no_error_prints_its_source_twice() {
        let io = || io::Error::other("the cause, spelled once");
        let path = || PathBuf::from("/run/mc");
        let model = Hub::new(ClusterConfig::new(0)).map(drop).unwrap_err();
        let errors = [
            DeviceError::Model(model),
            DeviceError::SocketDir {
                path: path(),
                source: io(),
            },
            DeviceError::Listen {
                path: path(),
                source: vhost::vhost_user::Error::SocketError(io()),
            },
            DeviceError::ListenFd {
                path: path(),
                source: io(),
            },
            DeviceError::Lock {
                path: path(),
                source: io(),
            },
            DeviceError::SocketPath {
                path: path(),
                source: io(),
            },
            DeviceError::Thread(io()),
            DeviceError::EventFd(io()),
        ];
        for e in &errors {
            let source = e.source().expect("a cause").to_string();
            assert!(
                !e.to_string().contains(&source),
                "{e:?} prints its source in its own message"
            );
        }
    }
}
