//! `mc-host pvm -n N [--slots S] [--tasks K] [cluster options] -- PROGRAM
//! ARGS`: PVM programs built against libpvm-mc on a virtual cluster of N
//! hosts (docs/pvm.md).
//!
//! The daemon's part of seed 004's Digital PVM, served here for every
//! host: the relay. Each task is its own guest process with its own
//! adapter; host h owns adapters h*S .. h*S+S-1, one per task it may ever
//! hold. The Memory Channel API opens a cluster's adapters together, so
//! every adapter's process starts at once: a task shell (`pvm-task`)
//! that brings the adapter and UMP up and parks. The relay then assigns
//! PROGRAM (K copies, siblings, the first on host 0) and every program
//! pvm_spawn asks for to parked shells, which load it and run its main.
//! It keeps the task table and the group table, kills, and sends exit
//! notices, on a Unix socket each task opens to this process (`pvm-relay`
//! has the words). Messages between tasks never pass here: they go over
//! UMP, through shared memory between the tasks of one host (each shell
//! is told its host's adapters and the run's directory for the channels'
//! files, `HostShm`) and over Memory Channel between hosts. Output is printed line by line as `[t40001] line`. The run ends
//! when every task has ended (the shells never used are then stopped);
//! its status is the first task's.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use clap::Args;
use firmware_model::abi::shm::HostShm;
use firmware_model::{LinkTiming, NodeId};
use mc_device::ClusterOptions;
use pvm_relay::{env, FromRelay, Host, Notice, Reply, Request, Task};

use crate::cli_error::{CliError, StopReason};
use crate::clock_args::{self, ClockArgs};
use crate::cluster_args::{ClusterArgs, DeliveryChoice};
use crate::pvm_error::{PvmError, SetUpLosses};

// pvm3.h's codes the relay answers with.
const PVM_BAD_PARAM: i32 = -2;
const PVM_NO_HOST: i32 = -6;
const PVM_NO_FILE: i32 = -7;
const PVM_DUP_GROUP: i32 = -18;
const PVM_NO_GROUP: i32 = -19;
const PVM_NOT_IN_GROUP: i32 = -20;
const PVM_NO_PARENT: i32 = -23;
const PVM_OUT_OF_RES: i32 = -27;
const PVM_NO_TASK: i32 = -31;

#[derive(Args, Debug)]
pub struct PvmArgs {
    /// Hosts of the virtual machine (pvm_config lists them as node0 ...).
    #[arg(long = "hosts", short = 'n', default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=16))]
    pub hosts: u8,
    /// Tasks a host may hold over the run (each has its own adapter;
    /// hosts x slots is at most 64).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u8).range(1..=64))]
    pub slots: u8,
    /// Copies of PROGRAM to start, siblings of one another (pvm_siblings),
    /// placed round-robin from host 0.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=64))]
    pub tasks: u8,
    /// When receivers see a store: `eager` or `skewed` (see `mc-host run`).
    #[arg(long, value_enum, default_value_t = DeliveryChoice::Eager)]
    pub delivery: DeliveryChoice,
    /// Seed of the fault injector and of skewed delivery.
    #[arg(long)]
    pub seed: Option<u64>,
    /// A fault plan (TOML) to replay during the run.
    #[arg(long, value_name = "FILE")]
    pub fault_plan: Option<PathBuf>,
    /// Link timing: `unthrottled`, `mc1`, `mc2` or `clan` (seed 001's cLAN VIA,
    /// which virtual time then follows too).
    #[arg(long, default_value = "unthrottled")]
    pub link: LinkTiming,
    #[command(flatten)]
    pub clock: ClockArgs,
    /// Give up (and stop every task) after this many seconds.
    #[arg(long, default_value_t = 600)]
    pub timeout: u64,
    /// Socket directory (default: a fresh temporary one).
    #[arg(long)]
    pub socket_dir: Option<PathBuf>,
    /// The first task's program and its arguments.
    #[arg(last = true, required = true, num_args = 1..)]
    pub command: Vec<String>,
}

/// What the relay knows of a task.
struct TaskRec {
    tid: i32,
    parent: i32,
    host: u32,
    program: String,
    pid: u32,
    conn: Option<Arc<Mutex<UnixStream>>>,
    /// Tasks to tell when this one ends: (who, tag).
    notify: Vec<(i32, i32)>,
    ended: Option<ExitStatus>,
    killed: bool,
}

/// An adapter and its task shell.
struct Slot {
    child: Option<Child>,
    pid: u32,
    /// The shell's connection while it waits for a program.
    parked: Option<Arc<Mutex<UnixStream>>>,
    /// The task it runs, once assigned.
    tid: Option<i32>,
    /// How its output is labelled.
    label: Arc<Mutex<String>>,
    ended: Option<ExitStatus>,
}

#[derive(Default)]
struct Group {
    /// Tid by instance; 0 for a free instance.
    members: Vec<i32>,
    frozen: bool,
}

/// How tasks are started.
struct Placement {
    search: Vec<PathBuf>,
    hosts: u32,
    slots: u32,
}

struct Table {
    tasks: Vec<TaskRec>,
    slots: Vec<Slot>,
    /// Slots assigned on each host.
    used: Vec<u32>,
    cursor: u32,
    groups: HashMap<String, Group>,
    first: Option<i32>,
    /// When a task first ended on a lost message (libpvm-mc's status 70).
    lost_at: Option<Instant>,
}

struct Relay {
    table: Mutex<Table>,
    changed: Condvar,
    placement: Placement,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn send_line(conn: &Mutex<UnixStream>, msg: &FromRelay) {
    let _ = lock(conn).write_all(pvm_relay::line(msg).as_bytes());
}

/// Print a shell's lines as `[LABEL] line` (its task's tid once assigned).
fn pump(label: Arc<Mutex<String>>, stream: impl Read + Send + 'static) {
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(l) = line else { return };
            let who = lock(&label).clone();
            if writeln!(std::io::stdout().lock(), "[{who}] {l}").is_err() {
                return;
            }
        }
    });
}

/// The status libpvm-mc ends a task with when a message was lost.
const LOST_EXIT: i32 = 70;

/// Once a task has ended on a lost message, the others still running are
/// stopped this much later (they may wait for it for ever).
const AFTER_LOSS: Duration = Duration::from_secs(5);

/// How long pvm_kill's SIGTERM has before SIGKILL follows.
const KILL_GRACE: Duration = Duration::from_secs(3);

/// How long a spawn waits for the shell it picked to have its adapter up.
const PARK_WAIT: Duration = Duration::from_secs(30);

impl Relay {
    /// The program a task names: a path as given, else next to the first
    /// program, in the working directory, or on PATH.
    fn resolve(&self, name: &str) -> Option<PathBuf> {
        let p = if name.contains('/') {
            Some(PathBuf::from(name)).filter(|p| p.is_file())
        } else {
            self.placement
                .search
                .iter()
                .map(|d| d.join(name))
                .find(|p| p.is_file())
        };
        p.and_then(|p| p.canonicalize().ok())
    }

    /// Start `count` tasks of `program` on parked shells; the tid of each,
    /// or an error code.
    fn spawn(
        &self,
        parent: i32,
        program: &str,
        args: &[String],
        place: &str,
        count: i32,
    ) -> Vec<i32> {
        let n = usize::try_from(count).unwrap_or(0);
        let Some(path) = self.resolve(program) else {
            return vec![PVM_NO_FILE; n];
        };
        let l = &self.placement;
        let fixed_host = if place.is_empty() {
            None
        } else {
            match place
                .strip_prefix("node")
                .and_then(|n| n.parse::<u32>().ok())
                .filter(|h| *h < l.hosts)
            {
                Some(h) => Some(h),
                None => return vec![PVM_NO_HOST; n],
            }
        };
        let mut t = lock(&self.table);
        // Place them first: siblings know one another from the start.
        let mut placed = Vec::new();
        for _ in 0..n {
            let host = match fixed_host {
                Some(h) => (t.used[h as usize] < l.slots).then_some(h),
                None => (0..l.hosts)
                    .map(|i| (t.cursor + i) % l.hosts)
                    .find(|h| t.used[*h as usize] < l.slots),
            };
            let Some(h) = host else {
                placed.push(None);
                continue;
            };
            if fixed_host.is_none() {
                t.cursor = (h + 1) % l.hosts;
            }
            let local = t.used[h as usize];
            t.used[h as usize] += 1;
            placed.push(Some((h, local)));
        }
        let tids: Vec<i32> = placed
            .iter()
            .map(|p| p.map_or(PVM_OUT_OF_RES, |(h, k)| pvm_relay::tid(h, k + 1)))
            .collect();
        let siblings: Vec<i32> = tids.iter().copied().filter(|t| *t > 0).collect();
        let mut out = Vec::new();
        for (p, tid) in placed.iter().zip(&tids) {
            let Some((h, k)) = *p else {
                out.push(*tid);
                continue;
            };
            let slot = (h * l.slots + k) as usize;
            let until = Instant::now() + PARK_WAIT;
            while t.slots[slot].parked.is_none()
                && t.slots[slot].ended.is_none()
                && Instant::now() < until
            {
                // A shell that failed to come up ends instead of parking.
                let s = &mut t.slots[slot];
                if let Some(st) = s.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                    s.child = None;
                    s.ended = Some(st);
                    break;
                }
                t = self
                    .changed
                    .wait_timeout(t, Duration::from_millis(100))
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
            let Some(conn) = t.slots[slot].parked.take() else {
                if t.slots[slot].ended.is_some() {
                    eprintln!("mc-host pvm: the task shell of adapter {slot} ended before it came up (above): t{tid:x} not started");
                } else {
                    eprintln!(
                        "mc-host pvm: the task shell of adapter {slot} did not come up in {} s (its adapter's or UMP's set-up is stuck: under a fault plan, packets lost during it): t{tid:x} not started",
                        PARK_WAIT.as_secs()
                    );
                }
                out.push(PVM_OUT_OF_RES);
                continue;
            };
            send_line(
                &conn,
                &FromRelay::Reply(Reply::Assign {
                    program: path.to_string_lossy().into_owned(),
                    args: args.to_vec(),
                    tid: *tid,
                    parent,
                    siblings: siblings.clone(),
                }),
            );
            let s = &mut t.slots[slot];
            s.tid = Some(*tid);
            *lock(&s.label) = format!("t{tid:x}");
            let pid = s.pid;
            t.tasks.push(TaskRec {
                tid: *tid,
                parent: if parent > 0 { parent } else { PVM_NO_PARENT },
                host: h,
                program: program.to_string(),
                pid,
                conn: None,
                notify: Vec::new(),
                ended: None,
                killed: false,
            });
            t.first.get_or_insert(*tid);
            out.push(*tid);
        }
        self.changed.notify_all();
        out
    }

    /// The answer to a request (None: later, for a parked shell).
    fn answer(
        self: &Arc<Self>,
        me: i32,
        req: Request,
        conn: &Arc<Mutex<UnixStream>>,
    ) -> Option<Reply> {
        Some(match req {
            Request::Park { node } => {
                let mut t = lock(&self.table);
                match t.slots.get_mut(node as usize) {
                    Some(s) if s.tid.is_none() => {
                        s.parked = Some(conn.clone());
                        self.changed.notify_all();
                        return None;
                    }
                    _ => Reply::Error(PVM_BAD_PARAM),
                }
            }
            Request::Enroll { tid, .. } => {
                let mut t = lock(&self.table);
                match t.tasks.iter_mut().find(|r| r.tid == tid) {
                    Some(r) => {
                        r.conn = Some(conn.clone());
                        Reply::Value(0)
                    }
                    None => Reply::Error(PVM_NO_TASK),
                }
            }
            Request::Spawn {
                program,
                args,
                place,
                count,
                ..
            } => {
                if count < 1 {
                    return Some(Reply::Error(PVM_BAD_PARAM));
                }
                Reply::Spawned(self.spawn(me, &program, &args, &place, count))
            }
            Request::Config => Reply::Hosts(
                (0..self.placement.hosts)
                    .map(|h| Host {
                        tid: pvm_relay::host_tid(h),
                        name: format!("node{h}"),
                    })
                    .collect(),
            ),
            Request::Tasks { which } => {
                let t = lock(&self.table);
                let list: Vec<Task> = t
                    .tasks
                    .iter()
                    .filter(|r| r.ended.is_none())
                    .filter(|r| {
                        which == 0 || r.tid == which || (which == pvm_relay::host_tid(r.host))
                    })
                    .map(|r| Task {
                        tid: r.tid,
                        parent: r.parent,
                        host: pvm_relay::host_tid(r.host),
                        program: r.program.clone(),
                        pid: r.pid,
                    })
                    .collect();
                if list.is_empty() && which != 0 {
                    Reply::Error(PVM_BAD_PARAM)
                } else {
                    Reply::Tasks(list)
                }
            }
            Request::NotifyExit { tag, tids } => {
                let mut t = lock(&self.table);
                for tid in tids {
                    match t.tasks.iter_mut().find(|r| r.tid == tid) {
                        Some(r) if r.ended.is_none() => r.notify.push((me, tag)),
                        _ => send_line(
                            conn,
                            &FromRelay::Notice(Notice::TaskExit {
                                tag,
                                tid,
                                host: pvm_relay::host_of(tid).map_or(0, pvm_relay::host_tid),
                            }),
                        ),
                    }
                }
                Reply::Value(0)
            }
            Request::Kill { tid } => {
                let t = lock(&self.table);
                let Some(r) = t.tasks.iter().find(|r| r.tid == tid && r.ended.is_none()) else {
                    return Some(Reply::Error(PVM_NO_TASK));
                };
                let pid = r.pid;
                drop(t);
                self.kill(tid, pid);
                Reply::Value(0)
            }
            Request::Join { group } => {
                let mut t = lock(&self.table);
                let g = t.groups.entry(group).or_default();
                if g.members.contains(&me) {
                    return Some(Reply::Error(PVM_DUP_GROUP));
                }
                let inst = match g.members.iter().position(|m| *m == 0) {
                    Some(i) => {
                        g.members[i] = me;
                        i
                    }
                    None => {
                        g.members.push(me);
                        g.members.len() - 1
                    }
                };
                self.changed.notify_all();
                // A group's instances are its members: at most every task.
                Reply::Value(i32::try_from(inst).unwrap_or(i32::MAX))
            }
            Request::Leave { group } => {
                let mut t = lock(&self.table);
                let Some(g) = t.groups.get_mut(&group) else {
                    return Some(Reply::Error(PVM_NO_GROUP));
                };
                let Some(i) = g.members.iter().position(|m| *m == me) else {
                    return Some(Reply::Error(PVM_NOT_IN_GROUP));
                };
                g.members[i] = 0;
                while g.members.last() == Some(&0) {
                    g.members.pop();
                }
                if g.members.is_empty() {
                    t.groups.remove(&group);
                }
                Reply::Value(0)
            }
            Request::Members { group } => {
                let t = lock(&self.table);
                match t.groups.get(&group) {
                    None => Reply::Error(PVM_NO_GROUP),
                    Some(g) => Reply::Members {
                        tids: g
                            .members
                            .iter()
                            .map(|m| if *m == 0 { -1 } else { *m })
                            .collect(),
                        frozen: g.frozen,
                    },
                }
            }
            Request::Freeze { group, count } => {
                let mut t = lock(&self.table);
                loop {
                    let Some(g) = t.groups.get_mut(&group) else {
                        return Some(Reply::Error(PVM_NO_GROUP));
                    };
                    let n = g.members.iter().filter(|m| **m != 0).count();
                    if usize::try_from(count).map_or(true, |c| n >= c) || g.frozen {
                        g.frozen = true;
                        return Some(Reply::Value(0));
                    }
                    t = self.changed.wait(t).unwrap_or_else(|p| p.into_inner());
                }
            }
            Request::Exit => {
                self.leave_all(me);
                Reply::Value(0)
            }
        })
    }

    /// pvm_kill: SIGTERM, which libpvm-mc takes at the task's next PVM
    /// call or wait (where it holds no cluster lock); SIGKILL if the task
    /// is still there [`KILL_GRACE`] later (it may compute without calling
    /// PVM).
    fn kill(self: &Arc<Self>, tid: i32, pid: u32) {
        let Ok(pid) = i32::try_from(pid) else { return };
        let mut t = lock(&self.table);
        if let Some(r) = t.tasks.iter_mut().find(|r| r.tid == tid) {
            r.killed = true;
        }
        // SAFETY: a signal to our own child, not yet reaped (its record
        // has not ended, and reaping happens under this lock).
        unsafe { libc::kill(pid, libc::SIGTERM) };
        drop(t);
        let me = self.clone();
        std::thread::spawn(move || {
            std::thread::sleep(KILL_GRACE);
            let t = lock(&me.table);
            if t.tasks.iter().any(|r| r.tid == tid && r.ended.is_none()) {
                // SAFETY: as above: still our unreaped child.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        });
    }

    /// A task that exits leaves its (unfrozen) groups.
    fn leave_all(&self, tid: i32) {
        let mut t = lock(&self.table);
        for g in t.groups.values_mut().filter(|g| !g.frozen) {
            for m in g.members.iter_mut().filter(|m| **m == tid) {
                *m = 0;
            }
            while g.members.last() == Some(&0) {
                g.members.pop();
            }
        }
        t.groups.retain(|_, g| !g.members.is_empty());
    }

    /// Serve one task's connection.
    fn serve(self: Arc<Self>, stream: UnixStream) {
        let Ok(w) = stream.try_clone() else { return };
        let conn = Arc::new(Mutex::new(w));
        let mut me = 0;
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { return };
            let req: Request = match serde_json::from_str(&line) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!(
                        "mc-host pvm: a task sent a line the relay cannot read ({e}): {line}"
                    );
                    return;
                }
            };
            if let Request::Enroll { tid, .. } = req {
                me = tid;
            }
            if let Some(reply) = self.answer(me, req, &conn) {
                send_line(&conn, &FromRelay::Reply(reply));
            }
        }
    }

    /// Reap shells that ended: their tasks' notices go out, groups forget
    /// them. True while any task runs.
    fn reap(&self) -> bool {
        let mut t = lock(&self.table);
        let mut ended = Vec::new();
        for (i, s) in t.slots.iter_mut().enumerate() {
            if let Some(st) = s.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                s.child = None;
                s.ended = Some(st);
                s.parked = None;
                match s.tid {
                    Some(tid) => ended.push((tid, st)),
                    None => eprintln!("mc-host pvm: the task shell of adapter {i} ended before it ran a task ({st})"),
                }
            }
        }
        if !ended.is_empty() {
            self.changed.notify_all();
        }
        for (tid, st) in &ended {
            let Some(i) = t.tasks.iter().position(|r| r.tid == *tid) else {
                continue;
            };
            t.tasks[i].ended = Some(*st);
            if st.code() == Some(LOST_EXIT) {
                t.lost_at.get_or_insert_with(Instant::now);
            }
            let r = &t.tasks[i];
            if !st.success() && !r.killed {
                use std::os::unix::process::ExitStatusExt;
                match (st.code(), st.signal()) {
                    (Some(c), _) => eprintln!(
                        "mc-host pvm: t{tid:x} ({}) exited with status {c}",
                        r.program
                    ),
                    (_, Some(sig)) => eprintln!(
                        "mc-host pvm: t{tid:x} ({}) was killed by signal {sig}",
                        r.program
                    ),
                    _ => {}
                }
            }
            let host = pvm_relay::host_tid(r.host);
            let notify = r.notify.clone();
            for (who, tag) in notify {
                if let Some(c) = t
                    .tasks
                    .iter()
                    .find(|x| x.tid == who)
                    .and_then(|x| x.conn.clone())
                {
                    send_line(
                        &c,
                        &FromRelay::Notice(Notice::TaskExit {
                            tag,
                            tid: *tid,
                            host,
                        }),
                    );
                }
            }
        }
        drop(t);
        for (tid, _) in ended {
            self.leave_all(tid);
        }
        let t = lock(&self.table);
        t.tasks.is_empty() || t.tasks.iter().any(|r| r.ended.is_none())
    }

    /// Task shells that ended, failing, before a task was assigned to them
    /// (their adapter's or UMP's set-up failed).
    fn shells_failed_before_a_task(&self) -> usize {
        lock(&self.table)
            .slots
            .iter()
            .filter(|s| s.tid.is_none() && s.ended.is_some_and(|st| !st.success()))
            .count()
    }

    /// Stop every shell still running (parked ones, or all on a stop).
    fn stop_all(&self) {
        let mut t = lock(&self.table);
        for s in t.slots.iter_mut() {
            if let Some(mut c) = s.child.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

/// A task gets SIGKILL when mc-host dies.
fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the child between fork and exec and only
    // calls prctl, which is async-signal-safe; it allocates nothing.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

fn search_path(first: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    if let Some(d) = first.parent().filter(|d| !d.as_os_str().is_empty()) {
        v.push(d.to_path_buf());
    }
    if let Ok(cwd) = std::env::current_dir() {
        v.push(cwd);
    }
    if let Some(p) = std::env::var_os("PATH") {
        v.extend(std::env::split_paths(&p));
    }
    v
}

/// Host `host`'s adapters (bit n: node n), with `slots` per host.
fn host_nodes(host: u32, slots: u32) -> u64 {
    let mask = u64::MAX.checked_shr(64 - slots.min(64)).unwrap_or(0);
    mask.checked_shl(host * slots).unwrap_or(0)
}

/// The directory of the run's shared-memory channel files, removed when
/// the run ends (however it ends): a task that died may have left one.
struct ShmDir(PathBuf);

impl ShmDir {
    fn create(socket_dir: &Path) -> Result<ShmDir, CliError> {
        let d = socket_dir.join("ump-shm");
        // Left by an earlier run in the same --socket-dir.
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir(&d).map_err(CliError::SocketDir)?;
        Ok(ShmDir(d))
    }
}

impl Drop for ShmDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// libpvm-mc's shared library: `MC_PVM_LIB`, else next to mc-host.
fn library() -> Result<PathBuf, CliError> {
    if let Some(p) = std::env::var_os(env::LIBRARY).filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    crate::run::resolve_program("libpvm_mc.so")
}

pub fn run(args: &PvmArgs) -> Result<(), CliError> {
    let nodes = u32::from(args.hosts) * u32::from(args.slots);
    // Too many for the hub (64 ports) is refused by the cluster's checks.
    let nodes = u8::try_from(nodes).unwrap_or(u8::MAX);
    let cluster_args = ClusterArgs {
        nodes,
        link: args.link,
        page_size: 8192,
        address_space: 512 << 20,
        max_payload: 32,
        hub_ports: None,
        delivery: args.delivery,
        seed: args.seed,
        fault_plan: args.fault_plan.clone(),
    };
    let plan = cluster_args.plan()?;
    let config = cluster_args.config(plan.as_ref())?;
    let shell = crate::run::resolve_program("pvm-task")?;
    let lib = library()?;
    let first = PathBuf::from(&args.command[0]);
    let tmp = tempfile::Builder::new()
        .prefix("mc-pvm-")
        .tempdir()
        .map_err(CliError::SocketDir)?;
    let dir: &Path = args.socket_dir.as_deref().unwrap_or(tmp.path());
    let clock_env = args.clock.guest_env(dir)?;
    // The tasks of one host share memory: their UMP channels map files
    // here rather than going through the hub (docs/pvm.md).
    let shm_dir = ShmDir::create(dir)?;
    let delivery = match args.delivery {
        DeliveryChoice::Eager => "eager",
        DeliveryChoice::Skewed => "skewed",
    };

    // The cluster, its fault plan, control socket and Ctrl-C, as `run` and
    // `mpirun` set them up.
    let launched =
        crate::launch::Launch::start(ClusterOptions::new(config.clone(), dir), plan.as_ref())?;
    let cluster = launched.cluster();
    let relay_socket = dir.join("pvm-relay.sock");
    let _ = std::fs::remove_file(&relay_socket);
    let listener = UnixListener::bind(&relay_socket).map_err(|source| PvmError::RelaySocket {
        path: relay_socket.clone(),
        source,
    })?;
    let relay = Arc::new(Relay {
        table: Mutex::new(Table {
            tasks: Vec::new(),
            slots: Vec::new(),
            used: vec![0; usize::from(args.hosts)],
            cursor: 0,
            groups: HashMap::new(),
            first: None,
            lost_at: None,
        }),
        changed: Condvar::new(),
        placement: Placement {
            search: search_path(&first),
            hosts: u32::from(args.hosts),
            slots: u32::from(args.slots),
        },
    });
    let r2 = relay.clone();
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(s) = s else { continue };
            let r = r2.clone();
            std::thread::spawn(move || r.serve(s));
        }
    });
    // Every adapter's shell, at once (the Memory Channel API's rendezvous).
    for n in 0..nodes {
        let socket = cluster
            .socket_path(NodeId(n))
            .ok_or(CliError::NoNodeSocket(n))?;
        let mut cmd = Command::new(&shell);
        clock_args::apply(&mut cmd, &clock_env);
        let host_shm = HostShm {
            dir: shm_dir.0.clone(),
            nodes: host_nodes(u32::from(n) / u32::from(args.slots), u32::from(args.slots)),
        };
        cmd.envs(host_shm.to_env());
        die_with_parent(&mut cmd);
        cmd.env("MC_DELIVERY", delivery)
            .env("MC_SEED", config.fault_seed.to_string())
            .env("MC_NODE", n.to_string())
            .env("MC_NODES", nodes.to_string())
            .env("MC_SOCKET", socket)
            .env(env::SOCKET, &relay_socket)
            .env(env::LIBRARY, &lib)
            .env_remove(env::TID)
            .env_remove(env::PARENT)
            .env_remove(env::SIBLINGS)
            // Host 0's first adapter runs the first task: it reads stdin.
            .stdin(if n == 0 {
                Stdio::inherit()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(source) => {
                relay.stop_all();
                return Err(CliError::StartGuest {
                    program: shell,
                    source,
                });
            }
        };
        let label = Arc::new(Mutex::new(format!("adapter{n}")));
        if let Some(o) = child.stdout.take() {
            pump(label.clone(), o);
        }
        if let Some(e) = child.stderr.take() {
            pump(label.clone(), e);
        }
        lock(&relay.table).slots.push(Slot {
            pid: child.id(),
            child: Some(child),
            parked: None,
            tid: None,
            label,
            ended: None,
        });
    }

    let started = relay.spawn(
        PVM_NO_PARENT,
        &args.command[0],
        &args.command[1..],
        "",
        i32::from(args.tasks),
    );
    let deadline = Instant::now() + Duration::from_secs(args.timeout);
    let mut stopped = None;
    if started.iter().all(|t| *t > 0) {
        while relay.reap() {
            if let Some(at) = lock(&relay.table).lost_at {
                if at.elapsed() >= AFTER_LOSS {
                    eprintln!(
                        "mc-host pvm: a task ended on a lost message {} s ago: stopping the tasks still running",
                        AFTER_LOSS.as_secs()
                    );
                    break;
                }
            }
            if launched.interrupted() {
                stopped = Some(StopReason::Interrupted);
            } else if Instant::now() > deadline {
                stopped = Some(StopReason::TimedOut);
            }
            if let Some(why) = stopped {
                log::warn!("{why}: stopping every task");
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    // Shells that failed to come up: name the losses behind them.
    let lost = launched.cluster().snapshot().hub.drops;
    let failed = relay.shells_failed_before_a_task();
    if failed > 0 && lost > 0 && started.iter().all(|t| *t > 0) {
        eprintln!(
            "mc-host pvm: {failed} task shells did not come up{}",
            SetUpLosses(lost)
        );
    }
    // The shells never used, or every one on a stop.
    relay.stop_all();
    // The tasks' last lines.
    std::thread::sleep(Duration::from_millis(100));
    launched.finish();
    if let Some(why) = stopped {
        return Err(CliError::Stopped(why));
    }
    if let Some(code) = started.iter().find(|t| **t < 0) {
        return Err(if *code == PVM_NO_FILE {
            CliError::ProgramNotFound {
                name: args.command[0].clone(),
            }
        } else {
            PvmError::FirstShell { lost }.into()
        });
    }
    let t = lock(&relay.table);
    let first = t.first.and_then(|f| t.tasks.iter().find(|r| r.tid == f));
    match first.and_then(|r| r.ended) {
        Some(s) if s.success() => Ok(()),
        Some(s) => Err(CliError::GuestCommand(s.code().unwrap_or(128))),
        // Stopped after another task's loss.
        None if t.lost_at.is_some() => Err(CliError::GuestCommand(LOST_EXIT)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::host_nodes;

    #[test]
    fn a_hosts_adapters_are_its_slots() {
        assert_eq!(host_nodes(0, 2), 0b11);
        assert_eq!(host_nodes(1, 2), 0b1100);
        assert_eq!(host_nodes(3, 4), 0xf000);
        assert_eq!(host_nodes(0, 64), u64::MAX);
        assert_eq!(host_nodes(15, 4), 0xf << 60);
    }
}
