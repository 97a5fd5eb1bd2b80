//! The control socket of a running cluster (`DIR/control.sock`).
//!
//! One request per connection, one line of text; the answer is text ending in a
//! line `ok` or `error: REASON`. Requests: `stats`, `status`, `fault COMMAND`
//! (the syntax of [`firmware_model::FaultCommand`]'s parser).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use firmware_model::{FaultCommand, FaultSyntaxError, ModelError};
use log::warn;
use mc_device::{Cluster, ClusterSnapshot, FaultStatus};

pub const CONTROL_SOCKET: &str = "control.sock";

/// Why a request to a running cluster got no answer, or a refusal.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error(
        "cannot reach a running cluster at {} ({source}): is `mc-host serve --socket-dir {}` running?",
        path.display(),
        dir.display()
    )]
    Unreachable {
        path: PathBuf,
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("control socket {}: {source}", path.display())]
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

/// Why the control socket cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum ControlServerError {
    #[error("cannot listen on {}: {source}", path.display())]
    Listen {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot start its thread: {0}")]
    Thread(#[source] std::io::Error),
}

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

/// Serves the control socket until dropped.
pub struct ControlServer {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ControlServer {
    pub fn start(dir: &Path, cluster: Arc<Cluster>) -> Result<ControlServer, ControlServerError> {
        let path = dir.join(CONTROL_SOCKET);
        let _ = std::fs::remove_file(&path);
        let listen = |source| ControlServerError::Listen {
            path: path.clone(),
            source,
        };
        let listener = UnixListener::bind(&path).map_err(listen)?;
        listener.set_nonblocking(true).map_err(listen)?;
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name("mc-control".into())
            .spawn(move || {
                while !s.load(Ordering::Acquire) {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            if let Err(e) = handle(stream, &cluster) {
                                warn!("control request failed: {e}");
                            }
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(20));
                        }
                        Err(e) => {
                            warn!("control socket: {e}");
                            std::thread::sleep(Duration::from_millis(100));
                        }
                    }
                }
            })
            .map_err(ControlServerError::Thread)?;
        Ok(ControlServer {
            path,
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

fn handle(stream: UnixStream, cluster: &Cluster) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line)?;
    let mut out = &stream;
    let reply = answer(line.trim(), cluster);
    match reply {
        Ok(text) => writeln!(out, "{text}ok"),
        Err(e) => writeln!(out, "error: {e}"),
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

/// The per-node counter table.
pub fn format_snapshot(s: &ClusterSnapshot) -> String {
    let mut t = format!(
        "membership epoch {} members {}; cluster error count {}; up {:.1} s\n",
        s.membership.epoch,
        s.membership.members,
        s.cluster_error_count,
        s.uptime.0 as f64 / 1e9
    );
    t += &format!(
        "{:<6} {:<9} {:>5} {:>10} {:>12} {:>10} {:>12} {:>7} {:>7} {:>7}\n",
        "node",
        "state",
        "conns",
        "pkts tx",
        "bytes tx",
        "pkts rx",
        "bytes rx",
        "drops",
        "errors",
        "refused"
    );
    for n in &s.nodes {
        let c = &n.counters;
        let state = match (n.status.online, n.status.link_up, n.connected) {
            (false, _, _) => "crashed",
            (true, false, _) => "link-down",
            (true, true, true) => "up",
            (true, true, false) => "idle",
        };
        t += &format!(
            "{:<6} {:<9} {:>5} {:>10} {:>12} {:>10} {:>12} {:>7} {:>7} {:>7}\n",
            n.node.to_string(),
            state,
            n.connections,
            c.packets_sent,
            c.bytes_sent,
            c.packets_received,
            c.bytes_received,
            c.drops,
            c.errors,
            c.protection_errors
        );
    }
    t += &format!(
        "hub: {} packets ({} broadcast), {} deliveries, {} drops, {} errors, {} ACKs\n",
        s.hub.packets, s.hub.broadcasts, s.hub.deliveries, s.hub.drops, s.hub.errors, s.hub.acks
    );
    t
}

fn format_status(f: &FaultStatus, s: &ClusterSnapshot) -> String {
    let mut t = String::new();
    if f.rules.is_empty() {
        t += "packet faults: none\n";
    }
    for (fault, scope, rate) in &f.rules {
        t += &format!("packet fault: {fault} {rate} {scope}\n");
    }
    for n in &s.nodes {
        if !n.status.online {
            t += &format!("{}: crashed\n", n.node);
        } else if !n.status.link_up {
            t += &format!("{}: link down\n", n.node);
        }
    }
    if f.stalled_until > f.now {
        t += &format!(
            "hub stalled for another {:.3} ms\n",
            (f.stalled_until.0 - f.now.0) as f64 / 1e6
        );
    }
    for sf in &f.scheduled {
        t += &format!(
            "scheduled at {:.3} s: {}\n",
            sf.at.0 as f64 / 1e9,
            sf.command
        );
    }
    t += &format!(
        "cluster error count {}, drops {}, membership epoch {} members {}\n",
        s.cluster_error_count, s.hub.drops, s.membership.epoch, s.membership.members
    );
    t
}

/// Send one request to the control socket in `dir`; the answer without its
/// final `ok`, or the server's error.
pub fn request(dir: &Path, req: &str) -> Result<String, ControlError> {
    let path = dir.join(CONTROL_SOCKET);
    let mut stream = UnixStream::connect(&path).map_err(|source| ControlError::Unreachable {
        path: path.clone(),
        dir: dir.to_path_buf(),
        source,
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
