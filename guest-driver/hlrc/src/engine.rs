//! One node's HLRC protocol as a state machine with no I/O (seed 001 s.4).
//!
//! The application's synchronous entry points (a fault, an acquire, a
//! release, a barrier) and the communication thread's asynchronous one (a
//! message arrived, [`Engine::handle`]) change the node's state, act on its
//! pages through [`PageMemory`], and return the messages to send. Whoever
//! drives it moves the messages (the DSM core's mailbox on the emulated
//! adapter, or a test's queues) and, where an entry point returns
//! [`Step::Wait`], feeds arriving messages to [`Engine::handle`] until
//! [`Engine::ready`] says the wait is over. Messages between two nodes must
//! arrive in the order sent (Memory Channel's total order gives that).
//!
//! One application thread per node, as in seed 001 s.4.3 ("each node
//! executes one application thread").

use std::collections::BTreeMap;

use crate::{
    BarrierManager, BarrierMode, HomePolicy, Homes, Interval, IntervalId, IntervalLog, LockManager,
    LockReply, LockState, Node, Page, PageNeeds, PageVersions, VectorTime,
};

/// What a node may do with its copy of a page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// No valid copy: any access faults.
    None,
    /// A valid copy: writes fault (to twin it).
    Read,
    /// Twinned (or at home): reads and writes go through.
    Write,
}

/// The pages of one node, as the protocol acts on them.
pub trait PageMemory {
    /// The changes a writer made to a page since its twin.
    type Diff: Clone + std::fmt::Debug;
    /// Set the access the node's threads have to `page`.
    fn protect(&mut self, page: Page, access: Access);
    /// Keep a copy of `page` as it is now (before this node writes it).
    fn twin(&mut self, page: Page);
    /// The changes since the twin, and drop the twin; `None` if nothing
    /// changed.
    fn diff(&mut self, page: Page) -> Option<Self::Diff>;
    /// Apply another node's changes to this node's copy (at the home); a
    /// diff that does not fit the page is refused.
    fn apply(
        &mut self,
        page: Page,
        diff: &Self::Diff,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>>;
    /// The whole page, for a fetch.
    fn read_page(&self, page: Page) -> Vec<u8>;
    /// Bytes in a page.
    fn page_size(&self) -> usize;
    /// Replace this node's copy with the home's (`data` is a page long).
    fn install(&mut self, page: Page, data: &[u8]);
}

/// A lock, numbered from 0; its manager is node `lock mod nodes`.
pub type LockId = usize;

/// A protocol message.
#[derive(Clone, Debug)]
pub enum Message<D> {
    /// A writer's changes to a page, for its home (at the writer's release).
    Diff {
        page: Page,
        interval: IntervalId,
        diff: D,
    },
    /// A fault's request for a page, answered once the home holds what
    /// `needs` names (per writer, the newest interval).
    PageRequest { page: Page, needs: Vec<u32> },
    /// The home's copy.
    PageReply { page: Page, data: Vec<u8> },
    /// A first-touch claim of a page's home, to the deciding node (node 0).
    HomeClaim { page: Page },
    /// The page's home, as decided.
    HomeIs { page: Page, home: Node },
    /// To the lock's manager.
    LockRequest { lock: LockId, time: VectorTime },
    /// From the manager to the last requester: hand the lock to `requester`.
    LockForward {
        lock: LockId,
        requester: Node,
        time: VectorTime,
    },
    /// The lock, with the notices the acquirer has not seen.
    LockGrant {
        lock: LockId,
        time: VectorTime,
        intervals: Vec<Interval>,
    },
    /// To the barrier manager (node 0): the arriver's time and the
    /// intervals it knows that the last barrier did not spread.
    BarrierArrive {
        time: VectorTime,
        intervals: Vec<Interval>,
    },
    /// From the manager: everyone arrived.
    BarrierRelease {
        time: VectorTime,
        intervals: Vec<Interval>,
    },
    /// A write-once flag was set (to every other node): a release whose
    /// acquire is the wait for the flag (ours: seed 001 has no flags; the
    /// ANL macros' programs use them).
    FlagSet {
        flag: usize,
        value: u64,
        time: VectorTime,
        intervals: Vec<Interval>,
    },
}

/// Where a message goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum To {
    Node(Node),
    /// Every other node, by one Memory Channel broadcast (only a barrier
    /// arrival under [`BarrierMode::Broadcast`]).
    Every,
}

/// A message for a node, or for all.
#[derive(Clone, Debug)]
pub struct Outgoing<D> {
    pub to: To,
    pub message: Message<D>,
}

/// What an entry point left to wait for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitFor {
    /// The page's home to be known (first touch).
    Home(Page),
    /// The page's copy from its home.
    Page(Page),
    /// The lock's grant.
    Lock(LockId),
    /// The barrier's release.
    Barrier,
    /// A flag to be set.
    Flag(usize),
}

/// An entry point's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Done: the application goes on.
    Done,
    /// Feed messages to [`Engine::handle`] until [`Engine::ready`].
    Wait(WaitFor),
}

/// A protocol error: a message that cannot be right.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Home(#[from] crate::HomeError),
    #[error(transparent)]
    Interval(#[from] crate::intervals::OutOfOrder),
    #[error(transparent)]
    Barrier(#[from] crate::barrier::BarrierError),
    #[error("node {from} sent {what} for page {page}, whose home is not this node")]
    NotHome {
        from: Node,
        what: &'static str,
        page: Page,
    },
    #[error("node {from} sent {what}, which only node 0 takes")]
    NotManager { from: Node, what: &'static str },
    #[error("node {from} set flag {flag} twice (a flag is set once)")]
    FlagTwice { from: Node, flag: usize },
    #[error("node {from} sent a {what} this node did not ask for")]
    Unasked { from: Node, what: &'static str },
    #[error("node {from} sent {len} bytes for page {page}, whose size is {size}")]
    PageSize {
        from: Node,
        page: Page,
        len: usize,
        size: usize,
    },
    #[error("node {from}'s diff of page {page} does not fit it")]
    Diff {
        from: Node,
        page: Page,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// One node's protocol state.
pub struct Engine<M: PageMemory> {
    me: Node,
    nodes: usize,
    memory: M,
    time: VectorTime,
    log: IntervalLog,
    homes: Homes,
    /// At this node as home: how far each writer's diffs are applied.
    versions: PageVersions,
    /// What this node's notices name, per page.
    needs: PageNeeds,
    access: Vec<Access>,
    /// Pages written (twinned, or written at home) in this interval.
    dirty: Vec<Page>,
    /// Fetches waiting at this home for diffs: (requester, page, needs).
    pending: Vec<(Node, Page, Vec<u32>)>,
    /// Locks managed here.
    managers: BTreeMap<LockId, LockManager>,
    locks: BTreeMap<LockId, LockState>,
    /// How barriers spread notices.
    barrier_mode: BarrierMode,
    /// The barrier manager: node 0's, or under broadcast every node's.
    barrier: Option<BarrierManager>,
    /// Under broadcast, arrivals at the next barrier that came before this
    /// node left the current one (a node is at most one barrier ahead).
    early: Vec<(Node, VectorTime, Vec<Interval>)>,
    /// Flags set, with what their setter's release carried.
    flags: BTreeMap<usize, (u64, VectorTime, Vec<Interval>)>,
    waiting: Option<WaitFor>,
    /// The fault being served: its page and whether it was a write, to
    /// carry on when the home is known or the page came.
    faulting: Option<(Page, bool)>,
    stats: EngineStats,
}

/// What a node's protocol did (seed 001 Fig. 2's categories counted).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineStats {
    pub page_fetches: u64,
    pub diffs_sent: u64,
    pub diffs_applied: u64,
    pub remote_acquires: u64,
    pub local_acquires: u64,
    pub barriers: u64,
    pub invalidations: u64,
}

impl<M: PageMemory> Engine<M> {
    /// Node `me` of `nodes`, over `pages` pages held in `memory`. Every
    /// page starts valid and zero everywhere (a heap allocated before the
    /// threads start, as seed 001 s.3.2's programming model has it).
    pub fn new(me: Node, nodes: usize, pages: usize, policy: HomePolicy, memory: M) -> Self {
        let mut memory = memory;
        for p in 0..pages {
            memory.protect(p, Access::Read);
        }
        Engine {
            me,
            nodes,
            memory,
            time: VectorTime::new(nodes),
            log: IntervalLog::new(nodes),
            homes: Homes::new(policy, nodes, pages),
            versions: PageVersions::new(pages, nodes),
            needs: PageNeeds::new(pages, nodes),
            access: vec![Access::Read; pages],
            dirty: Vec::new(),
            pending: Vec::new(),
            managers: BTreeMap::new(),
            locks: BTreeMap::new(),
            barrier_mode: BarrierMode::Manager,
            barrier: (me == 0).then(|| BarrierManager::new(nodes)),
            early: Vec::new(),
            flags: BTreeMap::new(),
            waiting: None,
            faulting: None,
            stats: EngineStats::default(),
        }
    }

    /// Spread barrier notices as `mode` says (every node of a run must
    /// choose the same).
    pub fn with_barrier(mut self, mode: BarrierMode) -> Self {
        self.barrier_mode = mode;
        self.barrier = match mode {
            BarrierMode::Manager => (self.me == 0).then(|| BarrierManager::new(self.nodes)),
            BarrierMode::Broadcast => Some(BarrierManager::new(self.nodes)),
        };
        self
    }

    pub fn memory(&self) -> &M {
        &self.memory
    }

    pub fn memory_mut(&mut self) -> &mut M {
        &mut self.memory
    }

    pub fn stats(&self) -> EngineStats {
        self.stats
    }

    pub fn time(&self) -> &VectorTime {
        &self.time
    }

    /// What this node may do with its copy of `page` (a fault on a
    /// readable page is a write).
    pub fn access(&self, page: Page) -> Access {
        self.access.get(page).copied().unwrap_or(Access::None)
    }

    /// Pages in the heap.
    pub fn pages(&self) -> usize {
        self.access.len()
    }

    /// Whether the last entry point's wait is over.
    pub fn ready(&self) -> bool {
        self.waiting.is_none()
    }

    fn wait(&mut self, w: WaitFor) -> Step {
        self.waiting = Some(w);
        Step::Wait(w)
    }

    fn set_access(&mut self, page: Page, a: Access) {
        self.access[page] = a;
        self.memory.protect(page, a);
    }

    /// The application touched `page` (`write`: to store) and faulted.
    pub fn fault(
        &mut self,
        page: Page,
        write: bool,
        out: &mut Vec<Outgoing<M::Diff>>,
    ) -> Result<Step, EngineError> {
        let home = match self.homes.home_of(page)? {
            Some(h) => h,
            None if self.me == 0 => self.homes.claim(page, 0)?,
            None => {
                out.push(Outgoing {
                    to: To::Node(0),
                    message: Message::HomeClaim { page },
                });
                self.faulting = Some((page, write));
                return Ok(self.wait(WaitFor::Home(page)));
            }
        };
        if self.access[page] == Access::None {
            if home == self.me {
                // The home's copy is the page; it may only lack diffs in
                // flight, which `handle` applies as they come.
                if !self.versions.satisfies(page, self.needs.needs(page)) {
                    self.pending
                        .push((self.me, page, self.needs.needs(page).to_vec()));
                    self.faulting = Some((page, write));
                    return Ok(self.wait(WaitFor::Page(page)));
                }
                self.set_access(page, Access::Read);
            } else {
                self.stats.page_fetches += 1;
                out.push(Outgoing {
                    to: To::Node(home),
                    message: Message::PageRequest {
                        page,
                        needs: self.needs.needs(page).to_vec(),
                    },
                });
                self.faulting = Some((page, write));
                return Ok(self.wait(WaitFor::Page(page)));
            }
        }
        if write {
            self.start_writing(page, home);
        }
        Ok(Step::Done)
    }

    fn start_writing(&mut self, page: Page, home: Node) {
        if self.access[page] == Access::Write {
            return;
        }
        if home != self.me {
            self.memory.twin(page);
        }
        self.dirty.push(page);
        self.set_access(page, Access::Write);
    }

    /// End this node's interval: diffs to their homes, a new interval with
    /// the written pages' notices. The start of every release and barrier.
    /// A page twinned and left unchanged names no notice.
    fn end_interval(&mut self, out: &mut Vec<Outgoing<M::Diff>>) -> Result<(), EngineError> {
        let mut pages = std::mem::take(&mut self.dirty);
        pages.sort_unstable();
        pages.dedup();
        let mut written = Vec::with_capacity(pages.len());
        let mut diffs = Vec::new();
        for &page in &pages {
            self.set_access(page, Access::Read);
            let home = self.homes.home_of(page)?.unwrap_or(self.me);
            if home == self.me {
                written.push(page);
            } else if let Some(diff) = self.memory.diff(page) {
                written.push(page);
                diffs.push((home, page, diff));
            }
        }
        if written.is_empty() {
            return Ok(());
        }
        let number = self.time.tick(self.me);
        let id = IntervalId {
            node: self.me,
            number,
        };
        for (home, page, diff) in diffs {
            self.stats.diffs_sent += 1;
            out.push(Outgoing {
                to: To::Node(home),
                message: Message::Diff {
                    page,
                    interval: id,
                    diff,
                },
            });
        }
        let interval = Interval::new(id, written);
        for n in interval.notices() {
            self.needs.note(n);
            if self.homes.home_of(n.page)? == Some(self.me) {
                self.versions.applied(n.page, self.me, number);
            }
        }
        self.log.record(interval)?;
        Ok(())
    }

    fn manager_of(&self, lock: LockId) -> Node {
        lock % self.nodes
    }

    /// Acquire `lock`: ends the interval (diffs go to their homes), then
    /// takes the lock here if this node kept it, or asks its manager.
    pub fn acquire(
        &mut self,
        lock: LockId,
        out: &mut Vec<Outgoing<M::Diff>>,
    ) -> Result<Step, EngineError> {
        self.end_interval(out)?;
        if self.locks.entry(lock).or_default().acquire_local() {
            self.stats.local_acquires += 1;
            return Ok(Step::Done);
        }
        self.stats.remote_acquires += 1;
        let step = self.wait(WaitFor::Lock(lock));
        let manager = self.manager_of(lock);
        let time = self.time.clone();
        if manager == self.me {
            self.manage_request(lock, self.me, time, out)?;
        } else {
            out.push(Outgoing {
                to: To::Node(manager),
                message: Message::LockRequest { lock, time },
            });
        }
        Ok(if self.ready() { Step::Done } else { step })
    }

    /// Release `lock`: ends the interval, and hands the lock to the next
    /// requester if one waits (with the notices it has not seen).
    pub fn release(
        &mut self,
        lock: LockId,
        out: &mut Vec<Outgoing<M::Diff>>,
    ) -> Result<(), EngineError> {
        self.end_interval(out)?;
        if let Some((to, time)) = self.locks.entry(lock).or_default().release() {
            self.grant(lock, to, &time, out);
        }
        Ok(())
    }

    /// A barrier: ends the interval, arrives at the manager (node 0) with
    /// the intervals this node knows, and waits for the release.
    pub fn barrier(&mut self, out: &mut Vec<Outgoing<M::Diff>>) -> Result<Step, EngineError> {
        self.end_interval(out)?;
        self.stats.barriers += 1;
        let step = self.wait(WaitFor::Barrier);
        let time = self.time.clone();
        let none = VectorTime::new(self.nodes);
        let intervals: Vec<Interval> = self.log.unseen_by(&none).cloned().collect();
        match self.barrier_mode {
            BarrierMode::Manager if self.me == 0 => {
                self.barrier_arrive(0, time, intervals, out)?;
            }
            BarrierMode::Manager => out.push(Outgoing {
                to: To::Node(0),
                message: Message::BarrierArrive { time, intervals },
            }),
            BarrierMode::Broadcast => {
                out.push(Outgoing {
                    to: To::Every,
                    message: Message::BarrierArrive {
                        time: time.clone(),
                        intervals: intervals.clone(),
                    },
                });
                self.barrier_arrive_everywhere(self.me, time, intervals)?;
            }
        }
        Ok(if self.ready() { Step::Done } else { step })
    }

    /// Set write-once flag `flag` to `value`: a release to every node.
    pub fn flag_set(
        &mut self,
        flag: usize,
        value: u64,
        out: &mut Vec<Outgoing<M::Diff>>,
    ) -> Result<(), EngineError> {
        self.end_interval(out)?;
        if self.flags.contains_key(&flag) {
            return Err(EngineError::FlagTwice {
                from: self.me,
                flag,
            });
        }
        let none = VectorTime::new(self.nodes);
        let intervals: Vec<Interval> = self.log.unseen_by(&none).cloned().collect();
        for to in (0..self.nodes).filter(|&n| n != self.me) {
            out.push(Outgoing {
                to: To::Node(to),
                message: Message::FlagSet {
                    flag,
                    value,
                    time: self.time.clone(),
                    intervals: intervals.clone(),
                },
            });
        }
        self.flags
            .insert(flag, (value, self.time.clone(), Vec::new()));
        Ok(())
    }

    /// Wait until `flag` is set, then acquire what its setter released:
    /// `Some(value)` once set; `None`: wait until [`Engine::ready`], then
    /// call again.
    pub fn flag_wait(
        &mut self,
        flag: usize,
        out: &mut Vec<Outgoing<M::Diff>>,
    ) -> Result<Option<u64>, EngineError> {
        self.end_interval(out)?;
        let Some((value, time, intervals)) = self.flags.get_mut(&flag) else {
            self.waiting = Some(WaitFor::Flag(flag));
            return Ok(None);
        };
        let value = *value;
        let time = time.clone();
        let intervals = std::mem::take(intervals);
        self.apply_notices(&time, intervals)?;
        Ok(Some(value))
    }

    fn grant(
        &mut self,
        lock: LockId,
        to: Node,
        their_time: &VectorTime,
        out: &mut Vec<Outgoing<M::Diff>>,
    ) {
        let intervals = self.log.unseen_by(their_time).cloned().collect();
        out.push(Outgoing {
            to: To::Node(to),
            message: Message::LockGrant {
                lock,
                time: self.time.clone(),
                intervals,
            },
        });
    }

    fn manage_request(
        &mut self,
        lock: LockId,
        requester: Node,
        time: VectorTime,
        out: &mut Vec<Outgoing<M::Diff>>,
    ) -> Result<(), EngineError> {
        match self.managers.entry(lock).or_default().request(requester) {
            LockReply::Grant if requester == self.me => {
                self.granted(lock, &VectorTime::new(self.nodes), Vec::new())?
            }
            LockReply::Grant => out.push(Outgoing {
                to: To::Node(requester),
                message: Message::LockGrant {
                    lock,
                    time: VectorTime::new(self.nodes),
                    intervals: Vec::new(),
                },
            }),
            LockReply::Forward(last) if last == self.me => {
                self.forwarded(lock, requester, time, out)
            }
            LockReply::Forward(last) => out.push(Outgoing {
                to: To::Node(last),
                message: Message::LockForward {
                    lock,
                    requester,
                    time,
                },
            }),
        }
        Ok(())
    }

    fn forwarded(
        &mut self,
        lock: LockId,
        requester: Node,
        time: VectorTime,
        out: &mut Vec<Outgoing<M::Diff>>,
    ) {
        if let Some((to, t)) = self
            .locks
            .entry(lock)
            .or_default()
            .forwarded(requester, time)
        {
            self.grant(lock, to, &t, out);
        }
    }

    fn granted(
        &mut self,
        lock: LockId,
        time: &VectorTime,
        intervals: Vec<Interval>,
    ) -> Result<(), EngineError> {
        self.apply_notices(time, intervals)?;
        self.locks.entry(lock).or_default().granted();
        if self.waiting == Some(WaitFor::Lock(lock)) {
            self.waiting = None;
        }
        Ok(())
    }

    /// Learn intervals and a time: invalidate every page a notice names
    /// with a diff this node's copy may lack.
    fn apply_notices(
        &mut self,
        time: &VectorTime,
        intervals: Vec<Interval>,
    ) -> Result<(), EngineError> {
        for interval in intervals {
            for n in interval.notices() {
                if n.interval.node != self.me && self.needs.note(n) {
                    self.invalidate(n.page)?;
                }
            }
            self.log.record(interval)?;
        }
        self.time.merge(time);
        Ok(())
    }

    fn invalidate(&mut self, page: Page) -> Result<(), EngineError> {
        if self.access[page] == Access::None {
            return Ok(());
        }
        let at_home = self.homes.home_of(page)? == Some(self.me);
        if !at_home || !self.versions.satisfies(page, self.needs.needs(page)) {
            self.stats.invalidations += 1;
            self.set_access(page, Access::None);
        }
        Ok(())
    }

    fn barrier_arrive(
        &mut self,
        from: Node,
        time: VectorTime,
        intervals: Vec<Interval>,
        out: &mut Vec<Outgoing<M::Diff>>,
    ) -> Result<(), EngineError> {
        let Some(manager) = self.barrier.as_mut() else {
            return Err(EngineError::NotManager {
                from,
                what: "a barrier arrival",
            });
        };
        let release = manager.arrive(from, time)?;
        for interval in intervals {
            self.log.record(interval)?;
        }
        let Some(release) = release else {
            return Ok(());
        };
        // Every node's share first: applying this node's own release
        // forgets the intervals the others' still need.
        let mut own = Vec::new();
        for (node, arrived) in release.arrived.iter().enumerate() {
            let intervals: Vec<Interval> = self.log.unseen_by(arrived).cloned().collect();
            if node == self.me {
                own = intervals;
            } else {
                out.push(Outgoing {
                    to: To::Node(node),
                    message: Message::BarrierRelease {
                        time: release.merged.clone(),
                        intervals,
                    },
                });
            }
        }
        self.barrier_released(&release.merged, own)
    }

    /// Under [`BarrierMode::Broadcast`] every node is its own manager: it
    /// takes every arrival (its own too), and when all have come applies
    /// what it has not seen, with no release message. The notices then
    /// cross the network once, in one broadcast per node, instead of to
    /// node 0 and back (seed 001 s.6: "we can also broadcast the
    /// invalidations sent at the time of barriers").
    fn barrier_arrive_everywhere(
        &mut self,
        from: Node,
        time: VectorTime,
        intervals: Vec<Interval>,
    ) -> Result<(), EngineError> {
        let Some(manager) = self.barrier.as_mut() else {
            return Err(EngineError::NotManager {
                from,
                what: "a barrier arrival",
            });
        };
        if manager.has_arrived(from)? {
            // Its arrival at the next barrier: it left this one, having
            // seen every arrival, before this node did.
            if self.early.iter().any(|(n, _, _)| *n == from) {
                return Err(crate::barrier::BarrierError::Twice(from).into());
            }
            self.early.push((from, time, intervals));
            return Ok(());
        }
        let release = manager.arrive(from, time)?;
        for interval in intervals {
            self.log.record(interval)?;
        }
        let Some(release) = release else {
            return Ok(());
        };
        let own: Vec<Interval> = self
            .log
            .unseen_by(&release.arrived[self.me])
            .cloned()
            .collect();
        self.barrier_released(&release.merged, own)?;
        for (n, t, i) in std::mem::take(&mut self.early) {
            self.barrier_arrive_everywhere(n, t, i)?;
        }
        Ok(())
    }

    fn barrier_released(
        &mut self,
        time: &VectorTime,
        intervals: Vec<Interval>,
    ) -> Result<(), EngineError> {
        self.apply_notices(time, intervals)?;
        // Every node has now seen `time`: nobody will ask for those
        // intervals again.
        self.log.forget_seen_by_all(time);
        if self.waiting == Some(WaitFor::Barrier) {
            self.waiting = None;
        }
        Ok(())
    }

    /// Fetches waiting at this home whose diffs have all come.
    fn serve_pending(&mut self, out: &mut Vec<Outgoing<M::Diff>>) {
        let mut i = 0;
        while i < self.pending.len() {
            let (who, page, ref needs) = self.pending[i];
            if !self.versions.satisfies(page, needs) {
                i += 1;
                continue;
            }
            self.pending.swap_remove(i);
            if who == self.me {
                self.page_arrived_at_home(page);
            } else {
                out.push(Outgoing {
                    to: To::Node(who),
                    message: Message::PageReply {
                        page,
                        data: self.memory.read_page(page),
                    },
                });
            }
        }
    }

    fn page_arrived_at_home(&mut self, page: Page) {
        self.set_access(page, Access::Read);
        self.finish_fault(page);
    }

    fn finish_fault(&mut self, page: Page) {
        if self.waiting == Some(WaitFor::Page(page)) {
            self.waiting = None;
            if let Some((p, true)) = self.faulting.take() {
                let home = self.homes.home_of(p).ok().flatten().unwrap_or(self.me);
                self.start_writing(p, home);
            }
        }
    }

    /// A message from `from` arrived (the communication thread's entry
    /// point, seed 001 s.4.1.2).
    pub fn handle(
        &mut self,
        from: Node,
        message: Message<M::Diff>,
        out: &mut Vec<Outgoing<M::Diff>>,
    ) -> Result<(), EngineError> {
        match message {
            Message::Diff {
                page,
                interval,
                diff,
            } => {
                self.must_be_home(from, page, "a diff")?;
                self.memory
                    .apply(page, &diff)
                    .map_err(|source| EngineError::Diff { from, page, source })?;
                self.versions.applied(page, interval.node, interval.number);
                self.stats.diffs_applied += 1;
                self.serve_pending(out);
            }
            Message::PageRequest { page, needs } => {
                self.must_be_home(from, page, "a page request")?;
                self.pending.push((from, page, needs));
                self.serve_pending(out);
            }
            Message::PageReply { page, data } => {
                if self.waiting != Some(WaitFor::Page(page)) {
                    return Err(EngineError::Unasked { from, what: "page" });
                }
                let size = self.memory.page_size();
                if data.len() != size {
                    return Err(EngineError::PageSize {
                        from,
                        page,
                        len: data.len(),
                        size,
                    });
                }
                self.memory.install(page, &data);
                self.set_access(page, Access::Read);
                self.finish_fault(page);
            }
            Message::HomeClaim { page } => {
                if self.me != 0 {
                    return Err(EngineError::NotManager {
                        from,
                        what: "a home claim",
                    });
                }
                let home = self.homes.claim(page, from)?;
                out.push(Outgoing {
                    to: To::Node(from),
                    message: Message::HomeIs { page, home },
                });
            }
            Message::HomeIs { page, home } => {
                if self.waiting != Some(WaitFor::Home(page)) {
                    return Err(EngineError::Unasked { from, what: "home" });
                }
                self.homes.learn(page, home)?;
                self.waiting = None;
                let (page, write) = self.faulting.take().unwrap_or((page, false));
                self.fault(page, write, out)?;
            }
            Message::LockRequest { lock, time } => {
                if self.manager_of(lock) != self.me {
                    return Err(EngineError::NotManager {
                        from,
                        what: "a lock request",
                    });
                }
                self.manage_request(lock, from, time, out)?;
            }
            Message::LockForward {
                lock,
                requester,
                time,
            } => self.forwarded(lock, requester, time, out),
            Message::LockGrant {
                lock,
                time,
                intervals,
            } => {
                if self.waiting != Some(WaitFor::Lock(lock)) {
                    return Err(EngineError::Unasked {
                        from,
                        what: "lock grant",
                    });
                }
                self.granted(lock, &time, intervals)?;
            }
            Message::BarrierArrive { time, intervals } => match self.barrier_mode {
                BarrierMode::Manager => self.barrier_arrive(from, time, intervals, out)?,
                BarrierMode::Broadcast => self.barrier_arrive_everywhere(from, time, intervals)?,
            },
            Message::FlagSet {
                flag,
                value,
                time,
                intervals,
            } => {
                if self.flags.contains_key(&flag) {
                    return Err(EngineError::FlagTwice { from, flag });
                }
                self.flags.insert(flag, (value, time, intervals));
                if self.waiting == Some(WaitFor::Flag(flag)) {
                    self.waiting = None;
                }
            }
            Message::BarrierRelease { time, intervals } => {
                if self.waiting != Some(WaitFor::Barrier) {
                    return Err(EngineError::Unasked {
                        from,
                        what: "barrier release",
                    });
                }
                self.barrier_released(&time, intervals)?;
            }
        }
        Ok(())
    }

    fn must_be_home(
        &mut self,
        from: Node,
        page: Page,
        what: &'static str,
    ) -> Result<(), EngineError> {
        match self.homes.home_of(page)? {
            Some(h) if h == self.me => Ok(()),
            // Under first touch, node 0's answer to this node's claim can
            // come after a message that another node sent on node 0's
            // answer to its own: only a home is sent diffs and requests.
            None => Ok(self.homes.learn(page, self.me)?),
            Some(_) => Err(EngineError::NotHome { from, what, page }),
        }
    }
}
