//! The client side of the control socket: one request, one answer.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The socket's file name in the cluster's socket directory (the server
/// listens where clients look).
pub const CONTROL_SOCKET: &str = "control.sock";

/// Why a request to a running cluster got no answer, or a refusal.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error(
        "cannot reach a running cluster at {} ({cause}): is `mc-host serve --socket-dir {}` running?",
        path.display(),
        dir.display()
    )]
    // The cause sits mid-sentence, before the advice: printed here, so not
    // a `source()`.
    Unreachable {
        path: PathBuf,
        dir: PathBuf,
        cause: std::io::Error,
    },
    #[error("control socket {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The cluster answered `error: REASON`.
    #[error("{reason}")]
    Refused { reason: String },
    #[error("the cluster closed the control connection without an answer")]
    NoAnswer,
}

/// Send one request to the control socket in `dir`; the answer without its
/// final `ok`, or the server's error.
pub fn request(dir: &Path, req: &str) -> Result<String, ControlError> {
    let path = dir.join(CONTROL_SOCKET);
    let mut stream = UnixStream::connect(&path).map_err(|source| ControlError::Unreachable {
        path: path.clone(),
        dir: dir.to_path_buf(),
        cause: source,
    })?;
    let io = |source| ControlError::Io {
        path: path.clone(),
        source,
    };
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(io)?;
    writeln!(stream, "{req}").map_err(io)?;
    let mut text = String::new();
    for line in BufReader::new(&stream).lines() {
        let line = line.map_err(io)?;
        if line == "ok" {
            return Ok(text);
        }
        if let Some(e) = line.strip_prefix("error: ") {
            return Err(ControlError::Refused {
                reason: e.to_string(),
            });
        }
        text += &line;
        text.push('\n');
    }
    Err(ControlError::NoAnswer)
}
