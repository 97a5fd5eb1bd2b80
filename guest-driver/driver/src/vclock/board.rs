//! The clock board: where every guest thread of a virtual-time run shows its
//! virtual time, so that no running thread gets more than a quantum ahead of
//! the slowest (the Wisconsin Wind Tunnel's quantum, docs/virtual-time.md).
//!
//! It is simulation control, not part of the emulated hardware: a small file
//! that `mc-host run --clock virtual` creates and every virtual guest maps
//! `MAP_SHARED` (a process of its own, or an anonymous mapping when a
//! program runs alone). It carries no guest data. Blocking uses a futex on
//! the shared `generation` word, which a thread bumps when it may have raised
//! the floor (its time crossed a quarter quantum, or it stopped running).
//!
//! ```text
//! 0x00 magic u32 | 0x04 version u32 | 0x08 quantum_ns u64
//! 0x10 capacity u32 | 0x14 high_water u32 | 0x18 generation u32 | 0x1c sleepers u32
//! 0x40 + 32 * i: slot i { vt u64, debt u64, state u32, pid u32, _ u64 }
//! ```

use std::fs::OpenOptions;
use std::path::Path;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use vm_memory::mmap::MmapRegion;
use vm_memory::{FileOffset, VolatileMemory};

use super::VclockError;
use crate::futex::{self, Scope};

const MAGIC: u32 = 0x4256_434d; // "MCVB"
const VERSION: u32 = 1;
const HEADER: usize = 64;
const SLOT: usize = 32;
/// Slots of a board `mc-host run` creates: threads of every node together.
pub const DEFAULT_CAPACITY: u32 = 4096;

mod at {
    pub const MAGIC: usize = 0x00;
    pub const VERSION: usize = 0x04;
    pub const QUANTUM: usize = 0x08;
    pub const CAPACITY: usize = 0x10;
    pub const HIGH_WATER: usize = 0x14;
    pub const GENERATION: usize = 0x18;
    pub const SLEEPERS: usize = 0x1c;
    pub const VT: usize = 0;
    pub const DEBT: usize = 8;
    pub const STATE: usize = 16;
    pub const PID: usize = 20;
}

/// What a slot's thread is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum SlotState {
    Free = 0,
    /// Computing or doing protocol work: counts for the floor.
    Running = 1,
    /// Waiting for data: left out of the floor (its next action comes after
    /// data that a running thread sends).
    Waiting = 2,
}

/// How long a gated thread waits for the floor to move before it goes on
/// anyway (a thread that blocks somewhere no clock knows of must not hang
/// the run; each such break is counted and reported).
const STALL: Duration = Duration::from_millis(250);
/// One futex sleep at most, before looking again.
const NAP: Duration = Duration::from_millis(1);

/// A mapped clock board.
pub struct ClockBoard {
    map: MmapRegion,
    capacity: u32,
    quantum: u64,
}

impl std::fmt::Debug for ClockBoard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClockBoard")
            .field("capacity", &self.capacity)
            .field("quantum", &self.quantum)
            .finish()
    }
}

fn board_bytes(capacity: u32) -> usize {
    HEADER + SLOT * capacity as usize
}

impl ClockBoard {
    /// Join the board at `path`, or create it there if this process is the
    /// first of the run (every guest of `mc-host run --clock virtual` is
    /// handed the same path; whoever comes first makes it, the others wait
    /// for its header).
    pub fn open_or_create(
        path: &Path,
        quantum_ns: u64,
        capacity: u32,
    ) -> Result<ClockBoard, VclockError> {
        let io = |source| VclockError::Board {
            path: path.display().to_string(),
            source,
        };
        match OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
        {
            Ok(file) => {
                file.set_len(board_bytes(capacity) as u64).map_err(io)?;
                let map = MmapRegion::from_file(FileOffset::new(file, 0), board_bytes(capacity))
                    .map_err(|e| VclockError::Map(e.to_string()))?;
                Ok(ClockBoard::format(map, quantum_ns, capacity))
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                // The creator may still be writing the header.
                let deadline = Instant::now() + Duration::from_secs(5);
                loop {
                    match ClockBoard::open(path) {
                        Err(VclockError::NotABoard(_)) if Instant::now() < deadline => {
                            std::thread::sleep(Duration::from_millis(1));
                        }
                        other => return other,
                    }
                }
            }
            Err(e) => Err(io(e)),
        }
    }

    /// Write a new board's header into `map` (the magic last).
    fn format(map: MmapRegion, quantum_ns: u64, capacity: u32) -> ClockBoard {
        let board = ClockBoard {
            map,
            capacity,
            quantum: quantum_ns,
        };
        board
            .u64_at(at::QUANTUM)
            .store(quantum_ns, Ordering::Relaxed);
        board
            .u32_at(at::CAPACITY)
            .store(capacity, Ordering::Relaxed);
        board.u32_at(at::VERSION).store(VERSION, Ordering::Relaxed);
        board.u32_at(at::MAGIC).store(MAGIC, Ordering::Release);
        board
    }

    /// Map a board another process created.
    pub fn open(path: &Path) -> Result<ClockBoard, VclockError> {
        let io = |source| VclockError::Board {
            path: path.display().to_string(),
            source,
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        let len = usize::try_from(len).unwrap_or(0);
        if len < HEADER {
            return Err(VclockError::NotABoard(path.display().to_string()));
        }
        let map = MmapRegion::from_file(FileOffset::new(file, 0), len)
            .map_err(|e| VclockError::Map(e.to_string()))?;
        let mut board = ClockBoard {
            map,
            capacity: 0,
            quantum: 0,
        };
        if board.u32_at(at::MAGIC).load(Ordering::Acquire) != MAGIC
            || board.u32_at(at::VERSION).load(Ordering::Relaxed) != VERSION
        {
            return Err(VclockError::NotABoard(path.display().to_string()));
        }
        let capacity = board.u32_at(at::CAPACITY).load(Ordering::Relaxed);
        if board_bytes(capacity) > len {
            return Err(VclockError::NotABoard(path.display().to_string()));
        }
        board.capacity = capacity;
        board.quantum = board.u64_at(at::QUANTUM).load(Ordering::Relaxed);
        Ok(board)
    }

    /// A board in this process's memory alone (a program run without
    /// `mc-host run --clock virtual`).
    pub fn private(quantum_ns: u64, capacity: u32) -> Result<ClockBoard, VclockError> {
        let map =
            MmapRegion::new(board_bytes(capacity)).map_err(|e| VclockError::Map(e.to_string()))?;
        Ok(ClockBoard::format(map, quantum_ns, capacity))
    }

    pub fn quantum(&self) -> u64 {
        self.quantum
    }

    fn u32_at(&self, offset: usize) -> &AtomicU32 {
        // In range and aligned by construction (offsets below the header or
        // inside a checked slot); a failure here is a bug of this file.
        self.map
            .get_atomic_ref::<AtomicU32>(offset)
            .expect("clock board word in range")
    }

    fn u64_at(&self, offset: usize) -> &AtomicU64 {
        self.map
            .get_atomic_ref::<AtomicU64>(offset)
            .expect("clock board word in range")
    }

    fn slot(&self, i: u32, field: usize) -> usize {
        HEADER + SLOT * i as usize + field
    }

    fn state(&self, i: u32) -> &AtomicU32 {
        self.u32_at(self.slot(i, at::STATE))
    }

    /// Claim a free slot for this thread, starting at virtual time `vt`.
    pub fn claim(&self, vt: u64) -> Result<u32, VclockError> {
        for i in 0..self.capacity {
            let state = self.state(i);
            if state
                .compare_exchange(
                    SlotState::Free as u32,
                    SlotState::Waiting as u32,
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_ok()
            {
                self.u64_at(self.slot(i, at::VT))
                    .store(vt, Ordering::Relaxed);
                self.u64_at(self.slot(i, at::DEBT))
                    .store(0, Ordering::Relaxed);
                self.u32_at(self.slot(i, at::PID))
                    .store(std::process::id(), Ordering::Relaxed);
                self.u32_at(at::HIGH_WATER)
                    .fetch_max(i + 1, Ordering::AcqRel);
                state.store(SlotState::Running as u32, Ordering::Release);
                return Ok(i);
            }
        }
        Err(VclockError::BoardFull(self.capacity))
    }

    /// Give slot `i` back (its thread ends).
    pub fn release(&self, i: u32) {
        self.state(i)
            .store(SlotState::Free as u32, Ordering::Release);
        self.ring();
    }

    /// Show slot `i`'s time; `ring` when the floor may have moved.
    pub fn publish(&self, i: u32, vt: u64, old: u64) {
        self.u64_at(self.slot(i, at::VT))
            .store(vt, Ordering::Release);
        let quarter = (self.quantum / 4).max(1);
        if vt / quarter != old / quarter {
            self.ring();
        }
    }

    pub fn set_state(&self, i: u32, state: SlotState) {
        self.state(i).store(state as u32, Ordering::Release);
        if state != SlotState::Running {
            self.ring();
        }
    }

    /// Add `ns` to the debt of slot `i` (work done on its processor's
    /// behalf by another thread); its owner takes it at its next sync.
    pub fn charge(&self, i: u32, ns: u64) {
        if i < self.capacity {
            self.u64_at(self.slot(i, at::DEBT))
                .fetch_add(ns, Ordering::AcqRel);
        }
    }

    /// Take slot `i`'s debt.
    pub fn take_debt(&self, i: u32) -> u64 {
        let debt = self.u64_at(self.slot(i, at::DEBT));
        if debt.load(Ordering::Relaxed) == 0 {
            return 0;
        }
        debt.swap(0, Ordering::AcqRel)
    }

    fn ring(&self) {
        self.u32_at(at::GENERATION).fetch_add(1, Ordering::AcqRel);
        if self.u32_at(at::SLEEPERS).load(Ordering::Acquire) > 0 {
            futex::wake_all(self.u32_at(at::GENERATION), Scope::Shared);
        }
    }

    /// The slowest running thread other than `me`: (its slot, its time).
    pub fn floor(&self, me: u32) -> Option<(u32, u64)> {
        let high = self
            .u32_at(at::HIGH_WATER)
            .load(Ordering::Acquire)
            .min(self.capacity);
        let mut best: Option<(u32, u64)> = None;
        for i in 0..high {
            if i == me || self.state(i).load(Ordering::Acquire) != SlotState::Running as u32 {
                continue;
            }
            let vt = self.u64_at(self.slot(i, at::VT)).load(Ordering::Acquire);
            if best.is_none_or(|(_, b)| vt < b) {
                best = Some((i, vt));
            }
        }
        best
    }

    /// Hold slot `me`, at time `vt`, until no running thread is more than a
    /// quantum behind it. `stalled` remembers a floor (slot, time) that did
    /// not move for [`STALL`]: it is passed over until it moves. Returns
    /// whether the gate was broken by a stall.
    pub fn gate(&self, me: u32, vt: u64, stalled: &mut Option<(u32, u64)>) -> bool {
        let mut since: Option<(Instant, (u32, u64))> = None;
        loop {
            let generation = self.u32_at(at::GENERATION).load(Ordering::Acquire);
            let Some(floor) = self.floor(me) else {
                return false;
            };
            if vt <= floor.1.saturating_add(self.quantum) || *stalled == Some(floor) {
                return false;
            }
            match since {
                Some((t, f)) if f == floor => {
                    if t.elapsed() >= STALL {
                        if !self.owner_alive(floor.0) {
                            // A process that died holding a slot: free it.
                            let _ = self.state(floor.0).compare_exchange(
                                SlotState::Running as u32,
                                SlotState::Free as u32,
                                Ordering::AcqRel,
                                Ordering::Relaxed,
                            );
                            continue;
                        }
                        *stalled = Some(floor);
                        return true;
                    }
                }
                _ => since = Some((Instant::now(), floor)),
            }
            let sleepers = self.u32_at(at::SLEEPERS);
            sleepers.fetch_add(1, Ordering::AcqRel);
            futex::wait(self.u32_at(at::GENERATION), generation, NAP, Scope::Shared);
            sleepers.fetch_sub(1, Ordering::AcqRel);
        }
    }

    fn owner_alive(&self, i: u32) -> bool {
        let pid = self.u32_at(self.slot(i, at::PID)).load(Ordering::Relaxed);
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            return false;
        };
        // SAFETY: kill with signal 0 sends nothing; it only asks whether
        // the process exists.
        let r = unsafe { libc::kill(pid, 0) };
        r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_board_file_is_shared_between_mappings() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("board");
        let a = ClockBoard::open_or_create(&path, 1000, 16).unwrap();
        let b = ClockBoard::open(&path).unwrap();
        assert_eq!(b.quantum(), 1000);
        let s = a.claim(500).unwrap();
        assert_eq!(b.floor(u32::MAX), Some((s, 500)));
        a.publish(s, 900, 500);
        assert_eq!(b.floor(u32::MAX), Some((s, 900)));
        a.set_state(s, SlotState::Waiting);
        assert_eq!(b.floor(u32::MAX), None);
        a.release(s);
        assert_eq!(b.claim(0).unwrap(), s, "a released slot is reused");
    }

    #[test]
    fn the_first_guest_creates_the_board_and_the_others_join_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("board");
        let joined: Vec<_> = (0..4)
            .map(|_| {
                let p = path.clone();
                std::thread::spawn(move || ClockBoard::open_or_create(&p, 2_000, 64).unwrap())
            })
            .collect();
        let boards: Vec<ClockBoard> = joined.into_iter().map(|t| t.join().unwrap()).collect();
        let s = boards[0].claim(42).unwrap();
        for b in &boards {
            assert_eq!(b.quantum(), 2_000);
            assert_eq!(b.floor(u32::MAX), Some((s, 42)));
        }
    }

    #[test]
    fn something_else_is_not_a_board() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("junk");
        std::fs::write(&path, vec![7u8; 4096]).unwrap();
        assert!(matches!(
            ClockBoard::open(&path),
            Err(VclockError::NotABoard(_))
        ));
        std::fs::write(&path, b"tiny").unwrap();
        assert!(matches!(
            ClockBoard::open(&path),
            Err(VclockError::NotABoard(_))
        ));
        assert!(matches!(
            ClockBoard::open(&dir.path().join("missing")),
            Err(VclockError::Board { .. })
        ));
    }

    #[test]
    fn a_full_board_says_so() {
        let b = ClockBoard::private(1000, 2).unwrap();
        b.claim(0).unwrap();
        b.claim(0).unwrap();
        assert!(matches!(b.claim(0), Err(VclockError::BoardFull(2))));
    }

    #[test]
    fn a_thread_ahead_waits_for_the_slowest_and_goes_on_when_it_catches_up() {
        let b = std::sync::Arc::new(ClockBoard::private(1_000, 8).unwrap());
        let slow = b.claim(0).unwrap();
        let fast = b.claim(0).unwrap();
        // Within a quantum: no wait.
        assert!(!b.gate(fast, 1_000, &mut None));
        let b2 = b.clone();
        let t = std::thread::spawn(move || {
            let mut stalled = None;
            let broke = b2.gate(fast, 5_000, &mut stalled);
            (broke, stalled)
        });
        std::thread::sleep(Duration::from_millis(20));
        assert!(!t.is_finished(), "5 us ahead of a 1 us quantum must wait");
        b.publish(slow, 4_500, 0);
        let (broke, _) = t.join().unwrap();
        assert!(!broke);
    }

    #[test]
    fn a_stalled_floor_is_passed_over_and_counted() {
        let b = ClockBoard::private(1_000, 8).unwrap();
        let _slow = b.claim(0).unwrap();
        let fast = b.claim(0).unwrap();
        let mut stalled = None;
        assert!(b.gate(fast, 10_000, &mut stalled), "broken after the stall");
        // The same stalled floor no longer holds it.
        assert!(!b.gate(fast, 20_000, &mut stalled));
    }

    #[test]
    fn waiting_threads_do_not_hold_others_back() {
        let b = ClockBoard::private(1_000, 8).unwrap();
        let waiter = b.claim(0).unwrap();
        let runner = b.claim(0).unwrap();
        b.set_state(waiter, SlotState::Waiting);
        assert!(!b.gate(runner, 1_000_000, &mut None));
    }

    #[test]
    fn debt_is_taken_once() {
        let b = ClockBoard::private(1_000, 8).unwrap();
        let s = b.claim(0).unwrap();
        b.charge(s, 300);
        b.charge(s, 200);
        assert_eq!(b.take_debt(s), 500);
        assert_eq!(b.take_debt(s), 0);
        b.charge(10_000, 5); // out of range: ignored
    }
}
