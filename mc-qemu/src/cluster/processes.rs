//! The processes of a QEMU cluster: which still run (`status`) and stopping
//! them all (`down`), guarded against reused pids.

use std::fs;
use std::time::{Duration, Instant};

use super::state_dir::{read_pid, StateDir};
use crate::error::QemuError;

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
    // Only a single process: 0 and negative pids would signal groups.
    let Some(pid) = libc::pid_t::try_from(pid).ok().filter(|p| *p > 0) else {
        return;
    };
    // SAFETY: kill(2) takes its two arguments by value and touches no memory
    // of ours; a pid that is gone is an error return (ESRCH), not undefined
    // behaviour. That the pid is still the process meant is checked by the
    // callers with `process_alive` (see there) before they signal.
    unsafe {
        libc::kill(pid, sig);
    }
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
