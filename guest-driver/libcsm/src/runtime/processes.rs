//! The program's processes: `CREATE` on node 0 until every process has
//! its function, then the start record and the start flag; the other nodes
//! wait for the flag and run theirs; every process ends in one barrier and
//! node 0's `MAIN_END` ends the run (seed 000 s.2: the processes of a node
//! are its threads).

use std::cell::RefCell;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;

use super::control::{MAGIC, W_BIAS, W_FUNCS, W_GLOBALS, W_LAYOUT, W_MAGIC, W_PROCS};
use super::start::layout_fingerprint;
use super::{fatal, ok, Creation, RunError, Runtime, DONE, PROC};
use crate::globals;
use mc_api::vclock;

thread_local! {
    /// Main's place on the virtual clock (main is process 0 of node 0),
    /// from the start until its process ends.
    static MAIN_CLOCK: RefCell<Option<vclock::Participant>> = const { RefCell::new(None) };
}

/// A process thread's stack (SPLASH processes keep big arrays on theirs).
const STACK: usize = 16 << 20;
/// Cashmere flag 0: node 0 has created the processes.
pub(super) const START_FLAG: u32 = 0;

impl Runtime {
    /// `CREATE(f)`: one more process; the last one starts them all.
    pub fn create(&'static self, f: usize) -> Result<(), RunError> {
        self.main_only("CREATE")?;
        let mut c = self.creation.lock().unwrap_or_else(|p| p.into_inner());
        if c.ended {
            return Err(RunError::SecondRound);
        }
        // One CREATE more than the cluster has processes for (after the
        // last one the processes have started): the program's -p is larger.
        if c.created + 1 >= self.procs {
            return Err(self.shape_error(u64::from(c.created) + 2));
        }
        c.created += 1;
        let slot = c.created as usize;
        c.funcs[slot] = f;
        if c.created + 1 == self.procs {
            self.start(&mut c)?;
        }
        Ok(())
    }

    /// `CREATE(f, n)`: `n - 1` processes running `f` (the caller runs it too).
    pub fn create_n(&'static self, f: usize, n: i64) -> Result<(), RunError> {
        self.main_only("CREATE")?;
        if n != i64::from(self.procs) {
            return Err(self.shape_error(n.max(0).unsigned_abs()));
        }
        let mut c = self.creation.lock().unwrap_or_else(|p| p.into_inner());
        if c.started || c.created > 0 {
            return Err(RunError::SecondRound);
        }
        for slot in 1..self.procs as usize {
            c.funcs[slot] = f;
        }
        c.created = self.procs - 1;
        self.start(&mut c)
    }

    /// Make sure the processes run before an operation that needs them all
    /// (a barrier, the end): with one process, there is nothing to create.
    pub fn need_all(&'static self, what: &'static str) -> Result<(), RunError> {
        if self.me != 0 {
            return Ok(());
        }
        let mut c = self.creation.lock().unwrap_or_else(|p| p.into_inner());
        if c.started {
            return Ok(());
        }
        if c.created + 1 == self.procs {
            return self.start(&mut c);
        }
        Err(self.not_all_created(what, c.created))
    }

    /// Node 0: publish the processes and the globals, set the start flag,
    /// start this node's other processes.
    fn start(&'static self, c: &mut Creation) -> Result<(), RunError> {
        let bias = globals::load_bias();
        self.write(W_BIAS, bias as u64);
        self.write(W_LAYOUT, layout_fingerprint() as u64);
        self.write(W_GLOBALS, self.globals.len as u64);
        self.write(W_PROCS, u64::from(self.procs));
        for (slot, &f) in c.funcs.iter().enumerate().skip(1) {
            self.write(W_FUNCS + slot, f.wrapping_sub(bias) as u64);
        }
        self.write(W_MAGIC, MAGIC);
        c.started = true;
        // Main is process 0: on the virtual clock from here, and its timed
        // part starts here too.
        let clock = self.csm.join_clock(0, vclock::now())?;
        MAIN_CLOCK.with(|m| *m.borrow_mut() = Some(clock));
        self.csm.mark_start();
        if self.nodes > 1 {
            self.csm.flag_set(START_FLAG, 1)?;
        }
        for t in 1..self.threads {
            let f = c.funcs[t as usize];
            c.local.push(self.spawn(t, f)?);
        }
        Ok(())
    }

    /// A thread running process `proc`: `f`, then the end barrier.
    fn spawn(&'static self, proc: u32, f: usize) -> Result<JoinHandle<()>, RunError> {
        // A thread starts at its spawner's virtual time.
        let at = vclock::now();
        std::thread::Builder::new()
            .name(format!("csm-p{proc}"))
            .stack_size(STACK)
            .spawn(move || {
                PROC.with(|p| p.set(Some(proc)));
                let _clock = ok(self
                    .csm
                    .join_clock(proc % self.threads, at)
                    .map_err(RunError::from));
                self.csm.mark_start();
                // SAFETY: `f` is the address of a `void f(void)` function of
                // this executable (CREATE's argument, relocated by the bias).
                let func: extern "C" fn() = unsafe { std::mem::transmute(f) };
                func();
                ok(self.end_of_process(proc));
            })
            .map_err(RunError::Spawn)
    }

    /// A process is done: its time, then the barrier every process ends with
    /// (after it, every node has every process's writes).
    fn end_of_process(&self, proc: u32) -> Result<(), RunError> {
        self.csm.mark_end();
        if self.settings.stats {
            let b = self.csm.thread_breakdown(&format!("p{proc}"));
            self.breakdowns
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(b);
        }
        self.csm.barrier()?;
        Ok(())
    }

    /// `WAIT_FOR_END(n)` in main: main ends as process 0, every process
    /// reaches the end barrier, node 0's threads are joined.
    pub fn wait_for_end(&'static self, n: i64) -> Result<(), RunError> {
        self.main_only("WAIT_FOR_END")?;
        let p = i64::from(self.procs);
        // SPLASH-2 passes P - 1 (the processes it created), SPLASH-3's
        // CREATE(f, P) programs often P.
        if n != p && n != p - 1 {
            return Err(self.shape_error((n + 1).max(0).unsigned_abs()));
        }
        self.end_main()
    }

    fn end_main(&'static self) -> Result<(), RunError> {
        self.need_all("WAIT_FOR_END")?;
        let local = {
            let mut c = self.creation.lock().unwrap_or_else(|p| p.into_inner());
            if c.ended {
                return Ok(());
            }
            c.ended = true;
            std::mem::take(&mut c.local)
        };
        self.end_of_process(0)?;
        // Main's process is done: it leaves the clock (and says what work
        // it counted).
        drop(MAIN_CLOCK.with(|m| m.borrow_mut().take()));
        for h in local {
            h.join().map_err(|_| RunError::Panicked)?;
        }
        Ok(())
    }

    /// `MAIN_END`, or `exit(0)` in main: end the run on every node.
    pub fn main_end(&'static self) -> Result<(), RunError> {
        if self.finished.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        self.end_main()?;
        self.finish()
    }

    /// Cashmere's final barrier (the other nodes wait in theirs, answering
    /// node 0's requests until it gets here), then the report.
    fn finish(&self) -> Result<(), RunError> {
        let stats = self.csm.finish()?;
        // No prediction from a count that went wrong.
        vclock::check()?;
        DONE.store(true, Ordering::SeqCst);
        crate::report::report(self, &stats)
    }

    /// Nodes other than 0: wait for the start, take the globals, run this
    /// node's processes, end with node 0. Never returns.
    pub(super) fn serve(&'static self) -> ! {
        ok(self.csm.flag_wait(START_FLAG).map_err(RunError::from));
        let magic = self.read(W_MAGIC);
        if magic != MAGIC {
            fatal(RunError::ForeignStart { got: magic });
        }
        let procs = self.read(W_PROCS);
        if procs != u64::from(self.procs) {
            fatal(RunError::StartProcs {
                theirs: procs,
                ours: self.procs,
            });
        }
        let len = self.read(W_GLOBALS);
        if len != self.globals.len as u64 {
            fatal(RunError::GlobalsSize {
                theirs: len,
                ours: self.globals.len,
            });
        }
        let bias = globals::load_bias();
        let theirs = self.read(W_BIAS);
        if theirs != bias as u64 && !self.globals.is_empty() {
            fatal(RunError::CodeMoved { theirs, ours: bias });
        }
        if self.read(W_LAYOUT) != layout_fingerprint() as u64 {
            log::warn!(
                "node {}: the address space layout differs from node 0's (randomisation could \
                 not be turned off): globals holding pointers to libc objects, argv or \
                 malloc'd memory are node 0's",
                self.me
            );
        }
        let first = self.me * self.threads;
        let handles: Vec<_> = (0..self.threads)
            .map(|t| {
                let proc = first + t;
                let f = usize::try_from(self.read(W_FUNCS + proc as usize))
                    .expect("a function's address fits usize")
                    .wrapping_add(bias);
                ok(self.spawn(proc, f))
            })
            .collect();
        for h in handles {
            if h.join().is_err() {
                fatal(RunError::Panicked);
            }
        }
        self.finished.store(true, Ordering::SeqCst);
        ok(self.finish());
        // SAFETY: flush C stdio before leaving without returning to main.
        unsafe { libc::fflush(std::ptr::null_mut()) };
        std::process::exit(0)
    }
}
