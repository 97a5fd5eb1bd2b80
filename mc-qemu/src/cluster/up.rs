//! `mc-host cluster up`: start the backend and one QEMU guest per node,
//! and wait until every guest's command agent is ready.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::agent::AGENT_READY_TAG;
use super::processes::{down, process_alive};
use super::state_dir::{read_lossy, read_pid, write_pid, QemuClusterRecord, StateDir};
use crate::boot::{qemu_args, tail_lines, AdapterSpec, BootSpec};
use crate::error::QemuError;
use crate::find::{Accel, Qemu};

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

/// Something went wrong in `up`; everything started is stopped again.
fn fail_up(state: &StateDir, e: QemuError) -> QemuError {
    let _ = down(state, &mut |_| {});
    e
}

/// Start the backend (`backend`, a `mc-host serve --socket-dir <state>/sock
/// ...` command) and one QEMU guest per node running the command agent; wait
/// until every guest's agent is ready. `progress` gets one line per event.
pub fn up(
    qemu: &Qemu,
    opts: &UpOptions,
    mut backend: Command,
    progress: &mut dyn FnMut(&str),
) -> Result<QemuClusterRecord, QemuError> {
    let st = &opts.state;
    fs::create_dir_all(st.socket_dir())
        .map_err(|e| QemuError::io(format!("creating {}", st.socket_dir().display()), e))?;
    let marker = st.0.to_string_lossy().into_owned();
    for (what, f) in st.pid_files() {
        if read_pid(&f).is_some_and(|p| process_alive(p, &marker)) {
            return Err(QemuError::ClusterRunning {
                dir: st.0.clone(),
                what,
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
                QemuError::BackendExited {
                    status,
                    log_tail: tail_lines(&read_lossy(&st.backend_log()), 20),
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
            u32::try_from(firmware_model::abi::CONFIG_SIZE).expect("the config space is small"),
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
    let state = QemuClusterRecord {
        nodes: opts.nodes,
        memory_mib: opts.memory_mib,
        backend_pid,
        guest_pids: pids,
        image_dir: opts.image_dir.clone(),
    };
    let text = toml::to_string(&state).map_err(QemuError::ClusterRecordWrite)?;
    fs::write(st.state_file(), text)
        .map_err(|e| QemuError::io(format!("writing {}", st.state_file().display()), e))?;
    Ok(state)
}
