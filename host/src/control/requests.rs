//! What the control socket answers: one request line in, text ending in
//! `ok` or `error: REASON` out.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use firmware_model::ErrorChain;
use firmware_model::{FaultCommand, FaultSyntaxError, ModelError};
use mc_device::Cluster;

use super::report::{format_snapshot, format_status};

/// Why the server refuses a request (sent back as `error: ...`).
#[derive(Debug, thiserror::Error)]
enum RequestError {
    #[error("empty request")]
    Empty,
    #[error("unknown request {0:?}: expected stats, status or fault COMMAND")]
    Unknown(String),
    #[error(transparent)]
    FaultSyntax(#[from] FaultSyntaxError),
    #[error(transparent)]
    Fault(#[from] ModelError),
}

pub(super) fn handle(stream: UnixStream, cluster: &Cluster) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line)?;
    let mut out = &stream;
    let reply = answer(line.trim(), cluster);
    match reply {
        Ok(text) => writeln!(out, "{text}ok"),
        Err(e) => writeln!(out, "error: {}", ErrorChain(&e)),
    }
}

fn answer(req: &str, cluster: &Cluster) -> Result<String, RequestError> {
    let (verb, rest) = req.split_once(' ').unwrap_or((req, ""));
    match verb {
        "stats" => Ok(format_snapshot(&cluster.snapshot())),
        "status" => Ok(format_status(&cluster.fault_status(), &cluster.snapshot())),
        "fault" => {
            let cmd: FaultCommand = rest.parse()?;
            cluster.apply_fault(cmd)?;
            Ok(format!("applied: {cmd}\n"))
        }
        "" => Err(RequestError::Empty),
        other => Err(RequestError::Unknown(other.to_string())),
    }
}
