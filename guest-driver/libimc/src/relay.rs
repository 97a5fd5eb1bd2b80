//! The command relay (seed 004, "Command Relay"): fixed mailboxes in
//! Memory Channel space through which a node asks another to run a
//! service, here the one the seed names, a UNIX signal to a process on
//! that node (imc_kill); and the host names of imc_gethosts.
//!
//! Every process that opens libimc allocates the relay page (one coherent
//! region under a reserved key, so every node holds every mailbox) and
//! starts an agent thread, the seed's server thread: it polls the request
//! mailboxes for requests addressed to its node, checks the sender's
//! credentials against the target process as kill(2) would ("the command
//! relay then adds process credentials"), sends the signal and answers in
//! the sender's answer mailbox. Calls are synchronous and serialised per
//! node, as the seed's are: a node has one request mailbox.
//!
//! Page layout (8 KiB): host names at 0 (64 bytes per node, the last byte
//! 1 once written), requests at 4096 (32 bytes per node: destination,
//! signal, pid, real and effective uid of the sender, then the sequence
//! number, last, so a receiver that sees it has the rest), answers at 6144
//! (16 bytes per node: status, then the sequence number it answers).
//!
//! The C calls that use it (imc_kill, imc_gethosts) are in `hosts`.

use std::ffi::{c_char, c_int};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mc_api::{ConnectOptions, McError, MemoryChannel, RxRegion, Sharing, TxRegion};

use crate::abi::*;
use crate::words::{int_of, word_of};
use crate::{api_failure, failure};

/// The reserved key of the relay page ("IMCR").
const RELAY_KEY: u32 = 0x494d_4352;
const PAGE_BYTES: u64 = 8192;
const NAMES: usize = 0;
const NAME_BYTES: usize = 64;
const REQUESTS: usize = 4096;
const REQUEST_BYTES: usize = 32;
const ANSWERS: usize = 6144;
const ANSWER_BYTES: usize = 16;
/// How long a sender waits for the agent's answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long to wait for a member's name to appear.
const NAME_TIMEOUT: Duration = Duration::from_secs(10);
/// The agent polls this often while requests came recently, else slower.
const POLL_BUSY: Duration = Duration::from_micros(200);
const POLL_IDLE: Duration = Duration::from_millis(2);
const BUSY_FOR: Duration = Duration::from_millis(200);

/// The relay page, shared by the calls and the agent thread.
struct Page {
    tx: TxRegion,
    rx: RxRegion,
}

pub(crate) struct Relay {
    page: Arc<Page>,
    me: u32,
    /// The last request this node sent (the mailbox is used by one call at
    /// a time).
    sending: Mutex<u64>,
}

/// This node's host name: `MC_HOSTNAME` if set; `node<N>` in a virtual
/// guest (every virtual guest of a cluster runs on the same host, under
/// its name); else the guest's host name, unless it has none.
fn own_name(opts: &ConnectOptions, me: u32) -> String {
    if let Some(n) = std::env::var("MC_HOSTNAME").ok().filter(|n| !n.is_empty()) {
        return n;
    }
    let fallback = format!("node{me}");
    if opts.is_virtual() {
        return fallback;
    }
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into our buffer.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast::<c_char>(), buf.len()) };
    let name = if rc == 0 {
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        String::from_utf8_lossy(&buf[..end]).into_owned()
    } else {
        String::new()
    };
    match name.as_str() {
        "" | "(none)" | "localhost" => fallback,
        _ => name,
    }
}

impl Relay {
    /// Allocate and attach the relay page, publish this node's name, start
    /// the agent thread.
    pub(crate) fn start(mc: &MemoryChannel, opts: &ConnectOptions) -> Result<Relay, McError> {
        let me = u32::from(mc.node_id().0);
        let id = mc.region_alloc(RELAY_KEY, PAGE_BYTES, true)?;
        let tx = mc.attach_transmit(id, Sharing::Shared, true)?;
        let rx = mc.attach_receive(id, Sharing::Shared, false)?;
        let mut slot = [0u8; NAME_BYTES];
        let name = own_name(opts, me);
        let n = name.len().min(NAME_BYTES - 2);
        slot[..n].copy_from_slice(&name.as_bytes()[..n]);
        slot[NAME_BYTES - 1] = 1;
        tx.write(NAMES + NAME_BYTES * me as usize, &slot)?;
        let page = Arc::new(Page { tx, rx });
        let agent = page.clone();
        let nodes = mc.nodes() as usize;
        std::thread::Builder::new()
            .name(format!("imc-relay{me}"))
            .spawn(move || serve(&agent, me, nodes))
            .map_err(McError::JoinThread)?;
        Ok(Relay {
            page,
            me,
            sending: Mutex::new(0),
        })
    }

    /// The name node `n` published, if it has.
    fn name_of(&self, n: u32) -> Option<String> {
        let mut slot = [0u8; NAME_BYTES];
        self.page
            .rx
            .read(NAMES + NAME_BYTES * n as usize, &mut slot)
            .ok()?;
        if slot[NAME_BYTES - 1] != 1 {
            return None;
        }
        let end = slot.iter().position(|&b| b == 0).unwrap_or(NAME_BYTES - 1);
        Some(String::from_utf8_lossy(&slot[..end]).into_owned())
    }

    /// The names of `members`, waiting a while for any not yet published.
    pub(crate) fn names(&self, members: &[u32]) -> Vec<(u32, String)> {
        let start = Instant::now();
        loop {
            let names: Vec<(u32, Option<String>)> =
                members.iter().map(|&n| (n, self.name_of(n))).collect();
            if names.iter().all(|(_, s)| s.is_some()) || start.elapsed() > NAME_TIMEOUT {
                return names
                    .into_iter()
                    .map(|(n, s)| (n, s.unwrap_or_else(|| format!("node{n}"))))
                    .collect();
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Send `sig` to `pid` on node `dest` and wait for the agent's answer.
    pub(crate) fn kill(&self, dest: u32, pid: i32, sig: i32) -> c_int {
        let mut seq = self.sending.lock().unwrap_or_else(|p| p.into_inner());
        *seq += 1;
        let s = *seq;
        // SAFETY: getuid and geteuid take no arguments, cannot fail and touch no
        // memory: they only return this process's ids.
        let (ruid, euid) = unsafe { (libc::getuid(), libc::geteuid()) };
        let mut req = [0u8; REQUEST_BYTES];
        req[0..4].copy_from_slice(&dest.to_le_bytes());
        req[4..8].copy_from_slice(&sig.to_le_bytes());
        req[8..12].copy_from_slice(&pid.to_le_bytes());
        req[12..16].copy_from_slice(&ruid.to_le_bytes());
        req[16..20].copy_from_slice(&euid.to_le_bytes());
        req[24..32].copy_from_slice(&s.to_le_bytes());
        let mine = self.me as usize;
        if let Err(e) = self.page.tx.write(REQUESTS + REQUEST_BYTES * mine, &req) {
            return api_failure(&e);
        }
        let answer = ANSWERS + ANSWER_BYTES * mine;
        let start = Instant::now();
        loop {
            if self.page.rx.load_u64(answer + 8).ok() == Some(s) {
                let status = self.page.rx.load_u32(answer).map_or(IMC_MCERROR, int_of);
                return if status == IMC_SUCCESS {
                    IMC_SUCCESS
                } else {
                    failure(status, format!("node{dest} refused the signal"))
                };
            }
            if start.elapsed() > ANSWER_TIMEOUT {
                return failure(
                    IMC_TIMEOUT,
                    format!("node{dest} did not answer the relay in {ANSWER_TIMEOUT:?} (is a libimc program running there?)"),
                );
            }
            std::thread::sleep(Duration::from_micros(100));
        }
    }
}

/// The agent: serve requests addressed to node `me`, forever.
fn serve(page: &Page, me: u32, nodes: usize) {
    let mut seen = vec![0u64; nodes];
    let mut last = Instant::now() - BUSY_FOR;
    loop {
        for (s, seen) in seen.iter_mut().enumerate() {
            let at = REQUESTS + REQUEST_BYTES * s;
            let seq = page.rx.load_u64(at + 24).unwrap_or(0);
            if seq == 0 || seq == *seen {
                continue;
            }
            *seen = seq;
            let mut req = [0u8; REQUEST_BYTES];
            if page.rx.read(at, &mut req).is_err() {
                continue;
            }
            let word = |i: usize| u32::from_le_bytes([req[i], req[i + 1], req[i + 2], req[i + 3]]);
            if word(0) != me {
                continue;
            }
            last = Instant::now();
            let status = deliver(int_of(word(8)), int_of(word(4)), word(12), word(16));
            log::info!(
                "libimc relay: node{s} asks signal {} to pid {}: {}",
                word(4),
                word(8),
                describe(status)
            );
            let mut ans = [0u8; ANSWER_BYTES];
            ans[0..4].copy_from_slice(&word_of(status).to_le_bytes());
            ans[8..16].copy_from_slice(&seq.to_le_bytes());
            if let Err(e) = page.tx.write(ANSWERS + ANSWER_BYTES * s, &ans) {
                log::warn!(
                    "libimc relay: answering node{s}: {}",
                    firmware_model::ErrorChain(&e)
                );
            }
        }
        std::thread::sleep(if last.elapsed() < BUSY_FOR {
            POLL_BUSY
        } else {
            POLL_IDLE
        });
    }
}

/// The ids of process `pid`: (real, saved) uid, from /proc.
fn target_uids(pid: i32) -> Option<(u32, u32)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    let ids: Vec<u32> = line[4..]
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    Some((*ids.first()?, *ids.get(2)?))
}

/// Send the signal as kill(2) would for the sender's credentials: a
/// privileged sender (effective uid 0) may signal any process; another
/// only one whose real or saved uid is its real or effective uid.
fn deliver(pid: i32, sig: i32, ruid: u32, euid: u32) -> c_int {
    if pid <= 0 {
        return IMC_BADPARM;
    }
    if !(0..=64).contains(&sig) {
        return IMC_EINVAL;
    }
    let Some((real, saved)) = target_uids(pid) else {
        return IMC_ESRCH;
    };
    if euid != 0 && ![real, saved].contains(&ruid) && ![real, saved].contains(&euid) {
        return IMC_EPERM;
    }
    // SAFETY: kill(2) with a checked pid (> 0: one process) and signal.
    if unsafe { libc::kill(pid, sig) } == 0 {
        return IMC_SUCCESS;
    }
    match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::ESRCH) => IMC_ESRCH,
        Some(libc::EPERM) => IMC_EPERM,
        Some(libc::EINVAL) => IMC_EINVAL,
        _ => IMC_MCERROR,
    }
}
