//! What a PVM task of libpvm-mc and the relay of `mc-host pvm` say to each
//! other: the daemon's part of seed 004's Digital PVM ("a daemon per node
//! that only relays the commands that must run on another node"). Only
//! what a task cannot do in-line goes here: spawning, the task and host
//! tables, exit notices, killing, and group membership. Messages between
//! tasks never do: they go over UMP (docs/pvm.md).
//!
//! Each request and each answer is one JSON object on one line of the
//! task's Unix socket connection (`MC_PVM_SOCKET`). The relay answers
//! every request in order with a [`FromRelay::Reply`]; a
//! [`FromRelay::Notice`] may come between answers at any time.

use serde::{Deserialize, Serialize};

/// The environment a task is started with.
pub mod env {
    /// The library the task shell loads (libpvm_mc.so).
    pub const LIBRARY: &str = "MC_PVM_LIB";
    /// The relay's socket.
    pub const SOCKET: &str = "MC_PVM_SOCKET";
    /// The task's own tid (decimal).
    pub const TID: &str = "MC_PVM_TID";
    /// Its parent's tid, or absent (PvmNoParent).
    pub const PARENT: &str = "MC_PVM_PARENT";
    /// The tids spawned by the same call, comma-separated.
    pub const SIBLINGS: &str = "MC_PVM_SIBLINGS";
}

/// The tid of task `local` (1-based) on host `host` (0-based), as PVM 3
/// lays tids out: the host in bits 18..30, the task on it below.
/// `host` is below 4095 and `local` below 2^18 (PVM's fields).
pub fn tid(host: u32, local: u32) -> i32 {
    i32::try_from(((host + 1) << 18) | local)
        .expect("a host below 4095 and a task below 2^18 fit in 30 bits")
}

/// The tid that stands for host `host` (pvm_tidtohost, hi_tid).
pub fn host_tid(host: u32) -> i32 {
    tid(host, 0)
}

/// The host (0-based) of a tid, if it names one.
pub fn host_of(tid: i32) -> Option<u32> {
    let h = (u32::try_from(tid).ok()? >> 18) & 0xfff;
    (h > 0).then(|| h - 1)
}

/// A task's request.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub enum Request {
    /// A task shell (`pvm-task`) whose adapter is up waits for a program
    /// to run; answered with [`Reply::Assign`] when a spawn picks it.
    Park { node: u32 },
    /// The first words of a task: who it is.
    Enroll { tid: i32, pid: u32 },
    /// pvm_spawn: `count` copies of `program`, placed round-robin, or on
    /// the host named by `place` when `flag` has PvmTaskHost.
    Spawn {
        program: String,
        args: Vec<String>,
        flag: i32,
        place: String,
        count: i32,
    },
    /// pvm_tasks: 0 for all, a host's tid, or a task's tid.
    Tasks { which: i32 },
    /// pvm_config.
    Config,
    /// pvm_notify(PvmTaskExit, tag, tids).
    NotifyExit { tag: i32, tids: Vec<i32> },
    /// pvm_kill.
    Kill { tid: i32 },
    /// pvm_joingroup: the instance number.
    Join { group: String },
    /// pvm_lvgroup.
    Leave { group: String },
    /// The members of a group, by instance (-1 for a free instance), and
    /// whether it is frozen.
    Members { group: String },
    /// pvm_freezegroup: answered once `count` members have joined (-1:
    /// those there now).
    Freeze { group: String, count: i32 },
    /// pvm_exit: the task leaves its groups and the relay forgets it.
    Exit,
}

/// A host of the virtual machine (pvm_config).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Host {
    pub tid: i32,
    pub name: String,
}

/// A task of the task table (pvm_tasks).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Task {
    pub tid: i32,
    pub parent: i32,
    pub host: i32,
    pub program: String,
    pub pid: u32,
}

/// The relay's answer to a request.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub enum Reply {
    /// A number: an instance, a count, or 0 for done.
    Value(i32),
    /// A PVM error code (negative, as pvm3.h's).
    Error(i32),
    /// The tids started (an error code in place of each one not started).
    Spawned(Vec<i32>),
    Tasks(Vec<Task>),
    Hosts(Vec<Host>),
    Members {
        tids: Vec<i32>,
        frozen: bool,
    },
    /// To a parked shell: run `program` (a path) as task `tid`.
    Assign {
        program: String,
        args: Vec<String>,
        tid: i32,
        parent: i32,
        siblings: Vec<i32>,
    },
}

/// Something the relay sends unasked.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub enum Notice {
    /// A task this one asked about (pvm_notify) has exited; it becomes a
    /// message with `tag` from the exited task's host, holding `tid`.
    TaskExit { tag: i32, tid: i32, host: i32 },
}

/// A line from the relay.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub enum FromRelay {
    Reply(Reply),
    Notice(Notice),
}

/// One line of JSON, newline included.
pub fn line<T: Serialize>(v: &T) -> String {
    let mut s = serde_json::to_string(v).expect("plain enums and strings always serialise");
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tids_name_their_host() {
        assert_eq!(tid(0, 1), 0x40001);
        assert_eq!(host_tid(2), 0xc0000);
        assert_eq!(host_of(tid(5, 3)), Some(5));
        assert_eq!(host_of(-23), None);
        assert_eq!(host_of(3), None);
    }

    #[test]
    fn a_line_reads_back() {
        let r = Request::Spawn {
            program: "slave 1".into(),
            args: vec!["a b".into()],
            flag: 1,
            place: "node1".into(),
            count: 3,
        };
        let l = line(&r);
        assert!(l.ends_with('\n') && l.matches('\n').count() == 1);
        assert_eq!(serde_json::from_str::<Request>(l.trim_end()).unwrap(), r);
    }
}
