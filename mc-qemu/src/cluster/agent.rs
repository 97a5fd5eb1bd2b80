//! Running a command on every guest of a QEMU cluster through its command
//! agent (init.sh with `mc.agent=1`, on the guest's ttyS1).

use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::state_dir::StateDir;
use crate::error::QemuError;
use crate::shell::base64_encode;

/// What the guest's agent prints on the console once it serves commands.
pub const AGENT_READY_TAG: &str = "MC-AGENT-READY";
/// The end of one command's output on the command channel.
pub const CMD_END_TAG: &str = "MC-CMD-END";

/// Why a command on one guest gave no exit status.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    // The cause sits mid-sentence, before the advice: printed here, so not
    // a `source()`.
    #[error(
        "cannot reach the guest's command channel {} ({cause}): is the cluster up?",
        socket.display()
    )]
    Unreachable { socket: PathBuf, cause: io::Error },
    #[error("setting up the command channel")]
    Setup(#[source] io::Error),
    #[error("sending the command")]
    Send(#[source] io::Error),
    #[error("the command channel closed (guest gone?)")]
    Closed,
    #[error("no end of the command after {:.0} s ({cause})", after.as_secs_f64())]
    NoEnd { after: Duration, cause: io::Error },
    #[error("malformed end line {0:?}")]
    MalformedEnd(String),
}

/// One node's result of [`run`].
#[derive(Debug)]
pub struct NodeResult {
    pub node: u32,
    /// The command's exit status; None if it could not be run or finish.
    pub status: Option<i32>,
    pub output: String,
    /// Why there is no status.
    pub error: Option<AgentError>,
}

fn run_one(
    sock: &Path,
    id: &str,
    command: &str,
    timeout: Duration,
    on_line: &(dyn Fn(&str) + Sync),
) -> Result<(i32, String), AgentError> {
    let mut s = UnixStream::connect(sock).map_err(|source| AgentError::Unreachable {
        socket: sock.to_path_buf(),
        cause: source,
    })?;
    s.set_read_timeout(Some(timeout))
        .map_err(AgentError::Setup)?;
    writeln!(s, "RUN {id} {}", base64_encode(command.as_bytes())).map_err(AgentError::Send)?;
    let mut out = String::new();
    let mut r = BufReader::new(&s);
    let mut buf = Vec::new();
    let start = Instant::now();
    loop {
        buf.clear();
        match r.read_until(b'\n', &mut buf) {
            Ok(0) => return Err(AgentError::Closed),
            Ok(_) => {}
            Err(source) => {
                return Err(AgentError::NoEnd {
                    after: start.elapsed(),
                    cause: source,
                })
            }
        }
        let line = String::from_utf8_lossy(&buf);
        let line = line.trim_end_matches(['\n', '\r']);
        if let Some(rest) = line.strip_prefix(CMD_END_TAG) {
            let mut w = rest.split_whitespace();
            if w.next() == Some(id) {
                let status = w
                    .next()
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| AgentError::MalformedEnd(line.to_string()))?;
                return Ok((status, out));
            }
            // The end of an earlier, abandoned command: drop its output.
            out.clear();
            continue;
        }
        if line == AGENT_READY_TAG {
            continue;
        }
        on_line(line);
        out.push_str(line);
        out.push('\n');
    }
}

/// Run the /bin/sh command line `command` on every guest at once and gather
/// each node's output and exit status. `on_line(node, line)` sees each line
/// as it arrives.
pub fn run(
    state: &StateDir,
    command: &str,
    timeout: Duration,
    on_line: &(dyn Fn(u32, &str) + Sync),
) -> Result<Vec<NodeResult>, QemuError> {
    let cs = state.load()?;
    let id = format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    );
    let results = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..cs.nodes)
            .map(|n| {
                let sock = state.agent_socket(n);
                let id = &id;
                scope.spawn(move || {
                    let line = |l: &str| on_line(n, l);
                    match run_one(&sock, id, command, timeout, &line) {
                        Ok((status, output)) => NodeResult {
                            node: n,
                            status: Some(status),
                            output,
                            error: None,
                        },
                        Err(e) => NodeResult {
                            node: n,
                            status: None,
                            output: String::new(),
                            error: Some(e),
                        },
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("node thread"))
            .collect::<Vec<_>>()
    });
    Ok(results)
}
