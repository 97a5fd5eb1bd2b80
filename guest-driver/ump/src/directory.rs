//! The cluster's UMP directory: which channels exist between which
//! endpoints, where each end's buffer is, and which endpoints accept
//! channels from unknown peers. Only opening, accepting and closing a
//! channel touch it; messages never do.
//!
//! It is a coherent Memory Channel region (every node holds a copy,
//! written broadcast with loopback), changed under one cluster spinlock
//! as a sequence lock: the writer stores an odd version, the changed
//! records, then the next even version. Stores of one node reach every
//! node in order (seed 000 s.2.2), so a reader that reads the same even
//! version before and after its copy of the records has read a consistent
//! directory; UMP tasks poll the version word (one load) and re-read only
//! when it moved. Each record carries a CRC: a packet of it dropped on the
//! way to a node (which no error count shows) leaves that node's copy
//! marked damaged, and UMP there waits (and times out) rather than act on
//! it.

use std::sync::atomic::{fence, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use mc_api::backoff::Backoff;
use mc_api::{LockSet, MemoryChannel, RxRegion, Sharing, TxRegion};

use crate::error::UmpError;

/// Region key of the directory and of its lock set.
pub(crate) const KEY_DIRECTORY: u32 = 0x554d_5000;
const KEY_LOCK: u32 = 0x554d_5001;
/// Records in the directory: channels being opened, open or closing, and
/// registered endpoints, cluster-wide.
pub const RECORDS: usize = 1024;
const HEAD: usize = 64;
const RECORD: usize = 64;
const BYTES: usize = HEAD + RECORDS * RECORD;
const OP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a node waits for its own directory change to come back before
/// it asks the ACK page whether it was lost (a loopback takes microseconds).
const OWN_CHANGE_CHECK: Duration = Duration::from_secs(1);

pub(crate) const KIND_FREE: u32 = 0;
pub(crate) const KIND_CHANNEL: u32 = 1;
pub(crate) const KIND_LISTEN: u32 = 2;
/// A record whose CRC does not match: a store of it was lost on the way to
/// this node. It takes part in nothing until it is written again.
pub(crate) const KIND_DAMAGED: u32 = 3;

/// Side A (the first opener) has opened; B has opened; A closed; B closed.
pub(crate) const A_OPEN: u8 = 1;
pub(crate) const B_OPEN: u8 = 2;
pub(crate) const A_CLOSED: u8 = 4;
pub(crate) const B_CLOSED: u8 = 8;
/// Created by a client for a registered endpoint: B's task completes it.
pub(crate) const VIA_LISTEN: u8 = 16;

/// No buffer.
pub(crate) const NO_BUFFER: u32 = u32::MAX;

/// One directory record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) kind: u32,
    /// The channel's number, unique in the cluster for a long while: it
    /// tags the channel's index words.
    pub(crate) uid: u32,
    /// A's handle (the first opener's own) and B's.
    pub(crate) a: u64,
    pub(crate) b: u64,
    pub(crate) a_node: u8,
    pub(crate) b_node: u8,
    pub(crate) transport: u8,
    pub(crate) flags: u8,
    pub(crate) a_task: u32,
    pub(crate) b_task: u32,
    /// Each end's Memory Channel buffer in its node's UMP region.
    pub(crate) a_off: u32,
    pub(crate) b_off: u32,
    /// Ring bytes of each direction.
    pub(crate) ring: u32,
}

impl Record {
    fn encode(&self) -> [u8; RECORD] {
        let mut b = [0u8; RECORD];
        b[0..4].copy_from_slice(&self.kind.to_le_bytes());
        b[4..8].copy_from_slice(&self.uid.to_le_bytes());
        b[8..16].copy_from_slice(&self.a.to_le_bytes());
        b[16..24].copy_from_slice(&self.b.to_le_bytes());
        b[24] = self.a_node;
        b[25] = self.b_node;
        b[26] = self.transport;
        b[27] = self.flags;
        b[28..32].copy_from_slice(&self.a_task.to_le_bytes());
        b[32..36].copy_from_slice(&self.b_task.to_le_bytes());
        b[36..40].copy_from_slice(&self.a_off.to_le_bytes());
        b[40..44].copy_from_slice(&self.b_off.to_le_bytes());
        b[44..48].copy_from_slice(&self.ring.to_le_bytes());
        let crc = crc32fast::hash(&b[..48]);
        b[48..52].copy_from_slice(&crc.to_le_bytes());
        b
    }

    fn decode(b: &[u8]) -> Record {
        let stored = u32::from_le_bytes([b[48], b[49], b[50], b[51]]);
        let never_written = b.iter().all(|&x| x == 0);
        if !never_written && stored != crc32fast::hash(&b[..48]) {
            return Record {
                kind: KIND_DAMAGED,
                ..Record::default()
            };
        }
        let w = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let d = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap_or_default());
        Record {
            kind: w(0),
            uid: w(4),
            a: d(8),
            b: d(16),
            a_node: b[24],
            b_node: b[25],
            transport: b[26],
            flags: b[27],
            a_task: w(28),
            b_task: w(32),
            a_off: w(36),
            b_off: w(40),
            ring: w(44),
        }
    }

    /// Whether this channel record joins endpoints `x` and `y`, either way.
    pub(crate) fn joins(&self, x: u64, y: u64) -> bool {
        self.kind == KIND_CHANNEL && ((self.a == x && self.b == y) || (self.a == y && self.b == x))
    }
}

/// A consistent copy of the directory.
#[derive(Clone, Debug)]
pub(crate) struct Snapshot {
    pub(crate) version: u64,
    pub(crate) next_uid: u32,
    pub(crate) records: Vec<Record>,
}

/// The directory, as one node sees and changes it.
pub(crate) struct Directory {
    mc: MemoryChannel,
    tx: TxRegion,
    rx: RxRegion,
    lock: LockSet,
    /// This node's threads take the cluster lock one at a time.
    local: Mutex<()>,
}

impl Directory {
    pub(crate) fn open(mc: &MemoryChannel) -> Result<Directory, UmpError> {
        let id = mc.region_alloc(KEY_DIRECTORY, BYTES as u64, true)?;
        let tx = mc.attach_transmit(id, Sharing::Shared, true)?;
        let rx = mc.attach_receive(id, Sharing::Shared, false)?;
        let lock = mc.lock_alloc(KEY_LOCK, 1, false, false)?;
        Ok(Directory {
            mc: mc.clone(),
            tx,
            rx,
            lock,
            local: Mutex::new(()),
        })
    }

    /// The version word: it moves whenever the directory changes.
    pub(crate) fn version(&self) -> u64 {
        self.rx.load_u64(0).unwrap_or(1)
    }

    /// This node's copy, if it is consistent now (no change half-arrived).
    pub(crate) fn try_snapshot(&self) -> Option<Snapshot> {
        let v = self.version();
        if v % 2 == 1 {
            return None;
        }
        // Written from a u32: anything larger is a damaged copy.
        let next_uid = u32::try_from(self.rx.load_u64(8).ok()?).ok()?;
        let mut b = vec![0u8; RECORDS * RECORD];
        self.rx.read(HEAD, &mut b).ok()?;
        fence(Ordering::Acquire);
        if self.version() != v {
            return None;
        }
        Some(Snapshot {
            version: v,
            next_uid,
            records: b.chunks_exact(RECORD).map(Record::decode).collect(),
        })
    }

    /// A consistent copy, waiting while a change is arriving. A change
    /// whose last store (the even version) was lost on the way here never
    /// arrives: with evidence of loss on this node's link (mc-api's
    /// `LossWatch`) the wait says so in seconds, not at the timeout.
    pub(crate) fn snapshot(&self) -> Result<Snapshot, UmpError> {
        let mut b = Backoff::new();
        let mut watch = self.mc.loss_watch();
        loop {
            if let Some(s) = self.try_snapshot() {
                return Ok(s);
            }
            if let Some(evidence) = watch.check() {
                return Err(UmpError::LostPacket {
                    lost: "the end of a change of the UMP directory (its even version word)",
                    waiting_for: "a consistent copy of the UMP directory",
                    evidence,
                });
            }
            if b.elapsed() > OP_TIMEOUT {
                return Err(UmpError::Timeout {
                    after: OP_TIMEOUT,
                    what: "a consistent copy of the UMP directory",
                });
            }
            b.snooze();
        }
    }

    /// Change the directory under its cluster lock: `f` edits the records
    /// (and may take channel numbers); the records it changed are written
    /// out. Returns once this node's own copy shows the change.
    pub(crate) fn update<R>(
        &self,
        f: impl FnOnce(&mut Snapshot) -> Result<R, UmpError>,
    ) -> Result<R, UmpError> {
        let _local = self.local.lock().unwrap_or_else(|p| p.into_inner());
        self.lock.acquire(0)?;
        let r = self.update_locked(f);
        let released = self.lock.release(0);
        let r = r?;
        released?;
        Ok(r)
    }

    fn update_locked<R>(
        &self,
        f: impl FnOnce(&mut Snapshot) -> Result<R, UmpError>,
    ) -> Result<R, UmpError> {
        // The lock's acquisition came back through loopback after every
        // earlier holder's release, so the copy is current once consistent.
        let old = self.snapshot()?;
        let mut new = old.clone();
        let r = f(&mut new)?;
        let changed: Vec<usize> = (0..RECORDS)
            .filter(|&i| new.records[i] != old.records[i])
            .collect();
        if changed.is_empty() && new.next_uid == old.next_uid {
            return Ok(r);
        }
        let odd = old.version + 1;
        let even = old.version + 2;
        let mut head = [0u8; 16];
        head[..8].copy_from_slice(&odd.to_le_bytes());
        head[8..].copy_from_slice(&u64::from(new.next_uid).to_le_bytes());
        self.tx.write(0, &head)?;
        for i in changed {
            self.tx.write(HEAD + i * RECORD, &new.records[i].encode())?;
        }
        self.tx.write_u64(0, even)?;
        // Read our own write before the lock goes: the next holder on this
        // node must see it, and so must this node's tasks. Memory Channel
        // does not retransmit: once an ACK-page check has answered for
        // every store made before it (mc-api's check_errors), a version
        // still missing here was lost on the way back.
        let mut b = Backoff::new();
        let mut asked = false;
        while self.version() != even {
            if !asked && b.elapsed() > OWN_CHANGE_CHECK {
                asked = true;
                if self.mc.check_errors_within(OWN_CHANGE_CHECK).is_ok() && self.version() != even {
                    return Err(UmpError::OwnChangeLost {
                        errors: self.mc.error_count(),
                        losses: self.mc.losses(),
                    });
                }
            }
            if b.elapsed() > OP_TIMEOUT {
                return Err(UmpError::Timeout {
                    after: OP_TIMEOUT,
                    what: "this node's copy of its own UMP directory change",
                });
            }
            b.snooze();
        }
        Ok(r)
    }
}

impl Snapshot {
    /// A free record's index.
    pub(crate) fn free_slot(&self) -> Result<usize, UmpError> {
        self.records
            .iter()
            .position(|r| r.kind == KIND_FREE)
            .ok_or(UmpError::NoSpace(
                "the UMP directory is full (1024 channels and registered endpoints cluster-wide)",
            ))
    }

    /// A new channel number (never 0, 24 bits).
    pub(crate) fn take_uid(&mut self) -> u32 {
        self.next_uid = (self.next_uid % 0x00ff_ffff) + 1;
        self.next_uid
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips() {
        let r = Record {
            kind: KIND_CHANNEL,
            uid: 77,
            a: u64::MAX,
            b: 3,
            a_node: 2,
            b_node: 5,
            transport: 1,
            flags: A_OPEN | VIA_LISTEN,
            a_task: 9,
            b_task: 10,
            a_off: 4096,
            b_off: NO_BUFFER,
            ring: 32768,
        };
        assert_eq!(Record::decode(&r.encode()), r);
        assert!(r.joins(3, u64::MAX) && r.joins(u64::MAX, 3) && !r.joins(3, 3));
    }
}
