//! A node of HLRC on the emulated adapter: the engine behind one mutex, the
//! application thread's entry points, and the communication thread that
//! takes messages from the mailbox and hands them to the engine (seed 001
//! s.4.1.2: "a separate communication thread on each node that is
//! responsible for handling all the incoming messages").
//!
//! The application thread never waits holding the engine: it hands the
//! engine its entry point, sends what it returns, and waits on the node's
//! condition variable until the engine says the wait is over. On the
//! virtual clock it then resumes at the arrival of the message that ended
//! the wait.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use dsm_core::times::{self, Activity};
use dsm_core::vm::HeapMemory;
use dsm_core::Stats;
use mc_api::vclock;

use crate::engine::{Access, Engine, Outgoing, Step, To};
use crate::error::HlrcError;
use crate::mailbox::Mailboxes;
use crate::pages::NodePages;
use crate::wire;

/// How long a node waits for a page, a lock, a barrier or a flag.
pub const GIVE_UP: Duration = Duration::from_secs(600);

struct Shared {
    engine: Engine<NodePages>,
    /// The virtual arrival of the last message that ended a wait.
    arrival: Option<u64>,
    /// The communication thread's error, once it stopped on one.
    failed: Option<String>,
}

pub(crate) struct HlrcNode {
    mc: mc_api::MemoryChannel,
    pub(crate) me: usize,
    pub(crate) nodes: usize,
    pub(crate) heap: Arc<HeapMemory>,
    pub(crate) mail: Mailboxes,
    shared: Mutex<Shared>,
    changed: Condvar,
    pub(crate) stop: AtomicBool,
}

impl HlrcNode {
    pub(crate) fn new(
        mc: mc_api::MemoryChannel,
        me: usize,
        nodes: usize,
        heap: Arc<HeapMemory>,
        engine: Engine<NodePages>,
        mail: Mailboxes,
    ) -> HlrcNode {
        HlrcNode {
            mc,
            me,
            nodes,
            heap,
            mail,
            shared: Mutex::new(Shared {
                engine,
                arrival: None,
                failed: None,
            }),
            changed: Condvar::new(),
            stop: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn send_all(&self, out: &mut Vec<Outgoing<Vec<u8>>>) -> Result<(), HlrcError> {
        for o in out.drain(..) {
            match o.to {
                To::Node(n) => self.mail.send(n, wire::encode(&o.message))?,
                To::Every => self.mail.broadcast(&wire::encode(&o.message))?,
            }
        }
        Ok(())
    }

    /// Run an entry point of the application thread, send what it says,
    /// and wait until the engine is ready again.
    fn enter(
        &self,
        what: &dyn Fn() -> String,
        f: impl FnOnce(
            &mut Engine<NodePages>,
            &mut Vec<Outgoing<Vec<u8>>>,
        ) -> Result<Step, crate::engine::EngineError>,
    ) -> Result<(), HlrcError> {
        let mut out = Vec::new();
        let mut g = self.lock();
        g.arrival = None;
        let step = f(&mut g.engine, &mut out)?;
        drop(g);
        self.send_all(&mut out)?;
        if step == Step::Done {
            return Ok(());
        }
        self.wait_ready(what)
    }

    fn wait_ready(&self, what: &dyn Fn() -> String) -> Result<(), HlrcError> {
        let start = Instant::now();
        let mut losses = self.mc.loss_watch();
        vclock::wait_begin();
        let r = (|| {
            let mut g = self.lock();
            loop {
                if let Some(e) = &g.failed {
                    return Err(HlrcError::CommThread(e.clone()));
                }
                if g.engine.ready() {
                    return Ok(g.arrival);
                }
                let (ng, _) = self
                    .changed
                    .wait_timeout(g, Duration::from_millis(5))
                    .unwrap_or_else(|p| p.into_inner());
                g = ng;
                drop(g);
                self.mail.check_failed()?;
                if let Some(evidence) = losses.check() {
                    return Err(HlrcError::Lost {
                        what: what(),
                        evidence,
                    });
                }
                if start.elapsed() > GIVE_UP {
                    return Err(HlrcError::Timeout {
                        what: what(),
                        after: GIVE_UP,
                    });
                }
                g = self.lock();
            }
        })();
        match r {
            Ok(arrival) => {
                vclock::wait_end(arrival);
                Ok(())
            }
            Err(e) => {
                vclock::wait_end(None);
                Err(e)
            }
        }
    }

    /// A fault at byte `offset` of the heap.
    pub(crate) fn fault(&self, offset: usize, page_size: usize) -> Result<(), HlrcError> {
        let page = offset / page_size;
        let _fault = times::enter(Activity::Fault);
        self.enter(&|| format!("page {page}"), |e, out| {
            // A fault on a readable page is a write.
            let write = e.access(page) == Access::Read;
            e.fault(page, write, out)
        })
    }

    pub(crate) fn acquire(&self, lock: usize) -> Result<(), HlrcError> {
        let _lock = times::enter(Activity::Lock);
        self.enter(&|| format!("lock {lock}"), |e, out| e.acquire(lock, out))
    }

    pub(crate) fn release(&self, lock: usize) -> Result<(), HlrcError> {
        let _diff = times::enter(Activity::Diff);
        let mut out = Vec::new();
        self.lock().engine.release(lock, &mut out)?;
        self.send_all(&mut out)
    }

    pub(crate) fn barrier(&self) -> Result<(), HlrcError> {
        let _barrier = times::enter(Activity::Barrier);
        self.enter(&|| "a barrier".to_string(), |e, out| e.barrier(out))
    }

    pub(crate) fn flag_set(&self, flag: usize, value: u64) -> Result<(), HlrcError> {
        let mut out = Vec::new();
        self.lock().engine.flag_set(flag, value, &mut out)?;
        self.send_all(&mut out)
    }

    pub(crate) fn flag_wait(&self, flag: usize) -> Result<u64, HlrcError> {
        let _flag = times::enter(Activity::Flag);
        loop {
            let mut out = Vec::new();
            let got = {
                let mut g = self.lock();
                g.arrival = None;
                g.engine.flag_wait(flag, &mut out)?
            };
            self.send_all(&mut out)?;
            if let Some(v) = got {
                return Ok(v);
            }
            self.wait_ready(&|| format!("flag {flag}"))?;
        }
    }

    pub(crate) fn stats(&self) -> Stats {
        let g = self.lock();
        let e = g.engine.stats();
        let m = g.engine.memory();
        Stats {
            page_transfers: e.page_fetches,
            read_faults: e.page_fetches,
            diffs: e.diffs_sent,
            diff_bytes: m.diff_bytes,
            twins: m.twins_taken,
            lock_acquires: e.remote_acquires + e.local_acquires,
            barriers: e.barriers,
            invalidations: e.invalidations,
            message_bytes: self.mail.sent_bytes(),
            ..Stats::default()
        }
    }

    /// The communication thread: messages to the engine, until stopped.
    ///
    /// In virtual time it is always waiting, as Cashmere's protocol thread
    /// is (docs/virtual-time.md s.5): it serves each message at the
    /// message's arrival, so what it sends (a page, a grant, a barrier's
    /// release) is stamped from there, whenever the host ran it.
    pub(crate) fn serve(self: Arc<Self>) {
        vclock::wait_begin();
        self.serve_loop();
        vclock::wait_end_quiet();
    }

    fn serve_loop(&self) {
        let mut from = 0;
        let mut idle = 0u32;
        while !self.stop.load(Ordering::Acquire) {
            match self.serve_one(&mut from) {
                Ok(true) => idle = 0,
                Ok(false) => {
                    idle = idle.saturating_add(1);
                    match idle {
                        0..64 => std::hint::spin_loop(),
                        64..512 => std::thread::yield_now(),
                        _ => std::thread::sleep(Duration::from_micros(20)),
                    }
                }
                Err(e) => {
                    let text = mc_api::ErrorChain(&e).to_string();
                    log::error!("hlrc node {}: {text}", self.me);
                    self.lock().failed = Some(text);
                    self.changed.notify_all();
                    self.mail.abandon();
                    return;
                }
            }
        }
    }

    fn serve_one(&self, from: &mut usize) -> Result<bool, HlrcError> {
        self.mail.flush()?;
        let Some(m) = self.mail.receive(*from)? else {
            return Ok(false);
        };
        *from = m.from;
        let message = wire::decode(&m.bytes, self.nodes).map_err(|source| HlrcError::Wire {
            from: m.from,
            source,
        })?;
        let _serving = vclock::serve(m.arrival);
        let mut out = Vec::new();
        {
            let mut g = self.lock();
            let was_ready = g.engine.ready();
            g.engine.handle(m.from, message, &mut out)?;
            if !was_ready && g.engine.ready() {
                g.arrival = m.arrival;
            }
        }
        self.changed.notify_all();
        self.send_all(&mut out)?;
        Ok(true)
    }
}
