//! A cluster of QEMU guests on one backend: `mc-host cluster up|run|status|down`.
//!
//! Everything lives in a state directory:
//!
//! | path | what |
//! |---|---|
//! | `backend.pid`, `backend.log` | the backend (`mc-host serve`) |
//! | `sock/node<i>.sock`, `sock/control.sock` | its vhost-user and control sockets |
//! | `node<i>.pid` | QEMU of node i |
//! | `node<i>.serial.log` (+ `.qemu-stderr`) | its console and QEMU's stderr |
//! | `node<i>.agent.sock` | the guest's command channel (its ttyS1) |
//! | `cluster.toml` | what `up` started |
//!
//! Pid files are written as soon as each process starts, so `down` stops
//! everything even after `mc-host` itself crashed half-way through `up`.
//!
//! Commands reach a running guest through its command agent (init.sh with
//! `mc.agent=1`): QEMU serves the guest's second serial port on
//! `node<i>.agent.sock`; the host writes `RUN <id> <base64 command>` and reads
//! the output up to `MC-CMD-END <id> <status>`.

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::boot::{qemu_args, AdapterSpec, BootSpec};
use super::find::{Accel, Qemu};
use super::image::base64_encode;
use super::{tail_lines, QemuError};

/// What the guest's agent prints on the console once it serves commands.
pub const AGENT_READY_TAG: &str = "MC-AGENT-READY";
/// The end of one command's output on the command channel.
pub const CMD_END_TAG: &str = "MC-CMD-END";
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
    pub fn load(&self) -> Result<ClusterState, QemuError> {
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
        toml::from_str(&text).map_err(|e| QemuError::BadArgument {
            what: "cluster state",
            reason: format!("{}: {e}", p.display()),
        })
    }

    /// Every pid file present: (what, file).
    fn pid_files(&self) -> Vec<(String, PathBuf)> {
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
pub struct ClusterState {
    pub nodes: u32,
    pub memory_mib: u32,
    pub backend_pid: u32,
    pub guest_pids: Vec<u32>,
    pub image_dir: PathBuf,
}

/// How to bring a cluster up.
#[derive(Debug, Clone)]
pub struct UpOptions {
    pub state: StateDir,
    pub nodes: u32,
    pub memory_mib: u32,
    pub kernel: PathBuf,
    pub initrd: PathBuf,
    pub image_dir: PathBuf,
    /// Limit for each guest to print its agent's readiness line.
    pub ready_timeout: Duration,
    pub quiet: bool,
}

fn write_pid(path: &Path, pid: u32) -> Result<(), QemuError> {
    fs::write(path, format!("{pid}\n"))
        .map_err(|e| QemuError::io(format!("writing {}", path.display()), e))
}

fn read_pid(path: &Path) -> Option<u32> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// True if `pid` is a live process whose command line mentions `marker`
/// (guards against a reused pid).
pub fn process_alive(pid: u32, marker: &str) -> bool {
    let Ok(cmdline) = fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    if let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) {
        // A zombie is not running anything.
        if let Some(state) = stat
            .rsplit(')')
            .next()
            .and_then(|r| r.split_whitespace().next())
        {
            if state == "Z" {
                return false;
            }
        }
    }
    String::from_utf8_lossy(&cmdline).contains(marker)
}

fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: kill has no memory-safety preconditions.
    unsafe {
        libc::kill(pid as libc::pid_t, sig);
    }
}

/// Something went wrong in `up`; everything started is stopped again.
fn fail_up(state: &StateDir, e: QemuError) -> QemuError {
    let _ = down(state, &mut |_| {});
    e
}

fn read_lossy(p: &Path) -> String {
    fs::read(p)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

/// Start the backend (`backend`, a `mc-host serve --socket-dir <state>/sock
/// ...` command) and one QEMU guest per node running the command agent; wait
/// until every guest's agent is ready. `progress` gets one line per event.
pub fn up(
    qemu: &Qemu,
    opts: &UpOptions,
    mut backend: Command,
    progress: &mut dyn FnMut(&str),
) -> Result<ClusterState, QemuError> {
    let st = &opts.state;
    fs::create_dir_all(st.socket_dir())
        .map_err(|e| QemuError::io(format!("creating {}", st.socket_dir().display()), e))?;
    let marker = st.0.to_string_lossy().into_owned();
    for (what, f) in st.pid_files() {
        if read_pid(&f).is_some_and(|p| process_alive(p, &marker)) {
            return Err(QemuError::BadArgument {
                what: "cluster up",
                reason: format!(
                    "a cluster is already running in {} ({what} is alive): \
                     `mc-host cluster down --state-dir {}` first",
                    st.0.display(),
                    st.0.display()
                ),
            });
        }
        let _ = fs::remove_file(f);
    }
    let _ = fs::remove_file(st.state_file());
    for n in 0..64 {
        let _ = fs::remove_file(st.agent_socket(n));
    }
    if let Ok(rd) = fs::read_dir(st.socket_dir()) {
        for e in rd.flatten() {
            let _ = fs::remove_file(e.path());
        }
    }

    // The backend.
    let log = fs::File::create(st.backend_log())
        .map_err(|e| QemuError::io(format!("creating {}", st.backend_log().display()), e))?;
    let log2 = log
        .try_clone()
        .map_err(|e| QemuError::io("backend log", e))?;
    let start = Instant::now();
    let child = backend
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log2)
        .process_group(0)
        .spawn()
        .map_err(|e| QemuError::io("starting the backend (mc-host serve)", e))?;
    let backend_pid = child.id();
    write_pid(&st.backend_pid(), backend_pid)?;
    let mut backend_child = child;
    let sockets: Vec<PathBuf> = (0..opts.nodes)
        .map(|n| st.socket_dir().join(format!("node{n}.sock")))
        .collect();
    loop {
        if sockets.iter().all(|s| s.exists()) {
            break;
        }
        if let Ok(Some(status)) = backend_child.try_wait() {
            return Err(fail_up(
                st,
                QemuError::BadArgument {
                    what: "backend",
                    reason: format!(
                        "mc-host serve exited ({status}); its log:\n{}",
                        tail_lines(&read_lossy(&st.backend_log()), 20)
                    ),
                },
            ));
        }
        if start.elapsed() > Duration::from_secs(20) {
            return Err(fail_up(
                st,
                QemuError::Timeout {
                    stage: "open its sockets (backend)",
                    after: Duration::from_secs(20),
                    serial_tail: tail_lines(&read_lossy(&st.backend_log()), 20),
                },
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    progress(&format!(
        "backend up (pid {backend_pid}), {} sockets in {}",
        opts.nodes,
        st.socket_dir().display()
    ));
    // It runs on by itself: don't keep a handle that would reap it.
    std::mem::forget(backend_child);

    // The guests.
    let mut children: Vec<Child> = Vec::new();
    let mut pids = Vec::new();
    for n in 0..opts.nodes {
        let mut spec = BootSpec::new(
            opts.kernel.clone(),
            opts.initrd.clone(),
            st.serial_log(n),
            String::new(),
        );
        spec.node = n;
        spec.memory_mib = opts.memory_mib;
        spec.quiet = opts.quiet;
        spec.adapter = Some(AdapterSpec::memory_channel(
            sockets[n as usize].clone(),
            firmware_model::abi::CONFIG_SIZE as u32,
        ));
        spec.agent_socket = Some(st.agent_socket(n));
        let args = match qemu_args(&spec, Accel::Tcg) {
            Ok(a) => a,
            Err(e) => return Err(fail_up(st, e)),
        };
        let _ = fs::remove_file(&spec.serial_log);
        let stderr_path = PathBuf::from(format!("{}.qemu-stderr", spec.serial_log.display()));
        let stderr = fs::File::create(&stderr_path)
            .map_err(|e| QemuError::io(format!("creating {}", stderr_path.display()), e))?;
        let child = qemu
            .command()
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .process_group(0)
            .spawn();
        let child = match child {
            Ok(c) => c,
            Err(e) => {
                return Err(fail_up(
                    st,
                    QemuError::io(format!("starting {}", qemu.program.display()), e),
                ))
            }
        };
        write_pid(&st.node_pid(n), child.id())?;
        pids.push(child.id());
        children.push(child);
    }
    progress(&format!(
        "{} guests booting (TCG, {} MiB each); serial logs {}",
        opts.nodes,
        opts.memory_mib,
        st.serial_log(0).display()
    ));

    let boot_start = Instant::now();
    let mut ready = vec![false; opts.nodes as usize];
    while ready.iter().any(|r| !r) {
        for n in 0..opts.nodes {
            let i = n as usize;
            if ready[i] {
                continue;
            }
            let serial = read_lossy(&st.serial_log(n));
            if serial
                .lines()
                .any(|l| l.contains(&format!("{AGENT_READY_TAG} node=")))
            {
                ready[i] = true;
                progress(&format!(
                    "node {n}: ready after {:.2} s ({}/{})",
                    boot_start.elapsed().as_secs_f64(),
                    ready.iter().filter(|r| **r).count(),
                    opts.nodes
                ));
                continue;
            }
            if let Ok(Some(status)) = children[i].try_wait() {
                let stderr = read_lossy(Path::new(&format!(
                    "{}.qemu-stderr",
                    st.serial_log(n).display()
                )));
                return Err(fail_up(
                    st,
                    QemuError::QemuExited {
                        status: format!("node {n}: {status}"),
                        stage: "printed MC-AGENT-READY",
                        stderr: stderr.trim().to_string(),
                        serial_tail: tail_lines(&serial, 30),
                    },
                ));
            }
            if boot_start.elapsed() > opts.ready_timeout {
                return Err(fail_up(
                    st,
                    QemuError::Timeout {
                        stage: "print MC-AGENT-READY",
                        after: opts.ready_timeout,
                        serial_tail: format!("node {n}:\n{}", tail_lines(&serial, 30)),
                    },
                ));
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // The guests run on after this process exits.
    for c in children {
        std::mem::forget(c);
    }
    let state = ClusterState {
        nodes: opts.nodes,
        memory_mib: opts.memory_mib,
        backend_pid,
        guest_pids: pids,
        image_dir: opts.image_dir.clone(),
    };
    let text = toml::to_string(&state).map_err(|e| QemuError::BadArgument {
        what: "cluster state",
        reason: e.to_string(),
    })?;
    fs::write(st.state_file(), text)
        .map_err(|e| QemuError::io(format!("writing {}", st.state_file().display()), e))?;
    Ok(state)
}

/// One node's result of [`run`].
#[derive(Debug, Clone)]
pub struct NodeResult {
    pub node: u32,
    /// The command's exit status; None if it could not be run or finish.
    pub status: Option<i32>,
    pub output: String,
    /// Why there is no status.
    pub error: Option<String>,
}

fn run_one(
    sock: &Path,
    id: &str,
    command: &str,
    timeout: Duration,
    on_line: &(dyn Fn(&str) + Sync),
) -> Result<(i32, String), String> {
    let mut s = UnixStream::connect(sock).map_err(|e| {
        format!(
            "cannot reach the guest's command channel {} ({e}): is the cluster up?",
            sock.display()
        )
    })?;
    s.set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    writeln!(s, "RUN {id} {}", base64_encode(command.as_bytes()))
        .map_err(|e| format!("sending the command: {e}"))?;
    let mut out = String::new();
    let mut r = BufReader::new(&s);
    let mut buf = Vec::new();
    let start = Instant::now();
    loop {
        buf.clear();
        match r.read_until(b'\n', &mut buf) {
            Ok(0) => return Err("the command channel closed (guest gone?)".into()),
            Ok(_) => {}
            Err(e) => {
                return Err(format!(
                    "no end of the command after {:.0} s ({e})",
                    start.elapsed().as_secs_f64()
                ))
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
                    .ok_or_else(|| format!("malformed end line {line:?}"))?;
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

/// One process of a cluster as `status` sees it.
#[derive(Debug, Clone)]
pub struct ProcessStatus {
    pub what: String,
    pub pid: Option<u32>,
    pub alive: bool,
}

/// The processes recorded in `state` and whether each still runs.
pub fn status(state: &StateDir) -> Vec<ProcessStatus> {
    let marker = state.0.to_string_lossy().into_owned();
    state
        .pid_files()
        .into_iter()
        .map(|(what, f)| {
            let pid = read_pid(&f);
            ProcessStatus {
                what,
                pid,
                alive: pid.is_some_and(|p| process_alive(p, &marker)),
            }
        })
        .collect()
}

/// Stop every process whose pid file is in `state` (SIGTERM, then SIGKILL
/// after 5 s) and remove the pid files, sockets and state file. Returns how
/// many processes were stopped.
pub fn down(state: &StateDir, progress: &mut dyn FnMut(&str)) -> Result<usize, QemuError> {
    let marker = state.0.to_string_lossy().into_owned();
    let mut stopped = 0;
    let files = state.pid_files();
    // Guests first (they are the backend's clients), then the backend.
    for group in [false, true] {
        let mut alive = Vec::new();
        for (what, f) in files.iter().filter(|(w, _)| (w == "backend") == group) {
            match read_pid(f) {
                Some(pid) if process_alive(pid, &marker) => {
                    signal(pid, libc::SIGTERM);
                    alive.push((what.clone(), pid));
                }
                _ => {}
            }
        }
        let start = Instant::now();
        while !alive.is_empty() {
            alive.retain(|(what, pid)| {
                let a = process_alive(*pid, &marker);
                if !a {
                    progress(&format!("stopped {what} (pid {pid})"));
                    stopped += 1;
                }
                a
            });
            if start.elapsed() > Duration::from_secs(5) {
                for (what, pid) in alive.drain(..) {
                    signal(pid, libc::SIGKILL);
                    progress(&format!("killed {what} (pid {pid}): it ignored SIGTERM"));
                    stopped += 1;
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        for (_, f) in files.iter().filter(|(w, _)| (w == "backend") == group) {
            let _ = fs::remove_file(f);
        }
    }
    let _ = fs::remove_file(state.state_file());
    for n in 0..64 {
        let _ = fs::remove_file(state.agent_socket(n));
    }
    if let Ok(rd) = fs::read_dir(state.socket_dir()) {
        for e in rd.flatten() {
            let _ = fs::remove_file(e.path());
        }
    }
    Ok(stopped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn down_on_an_empty_state_dir_is_harmless() {
        let d = tempfile::tempdir().unwrap();
        let st = StateDir(d.path().to_path_buf());
        assert_eq!(down(&st, &mut |_| {}).unwrap(), 0);
        assert!(status(&st).is_empty());
        // A stale pid file (no such process) is cleaned up, nothing is signalled.
        fs::write(st.node_pid(0), "999999999\n").unwrap();
        assert!(!status(&st)[0].alive);
        assert_eq!(down(&st, &mut |_| {}).unwrap(), 0);
        assert!(!st.node_pid(0).exists());
        assert!(st.load().is_err());
    }

    #[test]
    fn pid_reuse_is_not_mistaken_for_a_guest() {
        // Our own process is alive, but its command line does not name the dir.
        assert!(!process_alive(std::process::id(), "/no/such/state/dir"));
        assert!(process_alive(std::process::id(), ""));
    }
}
