//! What the node's application threads and its protocol thread tell each
//! other (seed 000 s.2.1): stop, the failure that stopped the protocol
//! thread, the timed window's marks for the protocol thread's own
//! breakdown, and which board slot its work is charged to (the node's
//! application processor 0, docs/virtual-time.md). The adapter's event
//! signal, which wakes the protocol thread, is here too.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use mc_api::{vclock, EventSignal};

use crate::times::TimeBreakdown;
use crate::CsmError;

/// Where the protocol thread's timed window is (`Csm::mark_start`,
/// `Csm::mark_end`).
mod window {
    pub const NONE: u8 = 0;
    pub const BEGIN: u8 = 1;
    pub const OPEN: u8 = 2;
    pub const END: u8 = 3;
    pub const CLOSED: u8 = 4;
}

/// A mark the protocol thread has yet to take.
pub(super) enum WindowMark {
    Begin,
    End,
}

pub(crate) struct ProtocolControl {
    stop: AtomicBool,
    /// What stopped the protocol thread, if it stopped.
    failure: Mutex<Option<Arc<CsmError>>>,
    /// The adapter's event signal, if the transport has one.
    signal: Option<EventSignal>,
    /// The protocol thread's window (`window::*`) and its breakdown.
    window: AtomicU8,
    times: Mutex<Option<TimeBreakdown>>,
    /// The board slot of the node's application processor 0, which the
    /// protocol thread's work is charged to (the processor the paper's
    /// interrupt would stop); `u32::MAX` until that thread joins the clock.
    app0_slot: AtomicU32,
}

impl ProtocolControl {
    pub(super) fn new(signal: Option<EventSignal>) -> ProtocolControl {
        ProtocolControl {
            stop: AtomicBool::new(false),
            failure: Mutex::new(None),
            signal,
            window: AtomicU8::new(window::NONE),
            times: Mutex::new(None),
            app0_slot: AtomicU32::new(u32::MAX),
        }
    }

    pub(super) fn signal(&self) -> Option<&EventSignal> {
        self.signal.as_ref()
    }

    /// Wake the protocol thread (to stop it, or to take a window mark).
    pub(super) fn wake(&self) {
        if let Some(s) = &self.signal {
            let _ = s.raise();
        }
    }

    /// Tell the protocol thread to stop, and wake it.
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        self.wake();
    }

    pub(super) fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// Keep what stopped the protocol thread for the application threads.
    pub(super) fn fail(&self, e: Arc<CsmError>) {
        *self.failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
    }

    pub(crate) fn failure(&self) -> Option<Arc<CsmError>> {
        self.failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The node's first `mark_start`: the protocol thread's window opens.
    pub(crate) fn mark_start(&self) {
        if self
            .window
            .compare_exchange(
                window::NONE,
                window::BEGIN,
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .is_ok()
        {
            self.wake();
        }
    }

    /// A `mark_end`: the protocol thread's window closes, if it opened.
    pub(crate) fn mark_end(&self) {
        if self.window.load(Ordering::Acquire) >= window::BEGIN {
            self.window.store(window::END, Ordering::Release);
            self.wake();
        }
    }

    /// The mark the protocol thread has to take, if any.
    pub(super) fn pending_mark(&self) -> Option<WindowMark> {
        match self.window.load(Ordering::Acquire) {
            window::BEGIN => Some(WindowMark::Begin),
            window::END => Some(WindowMark::End),
            _ => None,
        }
    }

    /// The protocol thread has begun its window.
    pub(super) fn opened(&self) {
        let _ = self.window.compare_exchange(
            window::BEGIN,
            window::OPEN,
            Ordering::AcqRel,
            Ordering::Relaxed,
        );
    }

    /// The protocol thread's window has ended with `times`.
    pub(super) fn closed(&self, times: TimeBreakdown) {
        *self.times.lock().unwrap_or_else(|p| p.into_inner()) = Some(times);
        let _ = self.window.compare_exchange(
            window::END,
            window::CLOSED,
            Ordering::AcqRel,
            Ordering::Relaxed,
        );
    }

    /// The protocol thread stops: its breakdown up to now, unless its
    /// window closed already (`breakdown` is called only then).
    pub(super) fn stopped(&self, breakdown: impl FnOnce() -> TimeBreakdown) {
        if self.window.load(Ordering::Acquire) != window::CLOSED {
            *self.times.lock().unwrap_or_else(|p| p.into_inner()) = Some(breakdown());
        }
    }

    /// The protocol thread's breakdown in the timed window.
    pub(crate) fn breakdown(&self) -> Option<TimeBreakdown> {
        self.times.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The calling thread is the node's application processor 0.
    pub(crate) fn set_app0_slot(&self, slot: u32) {
        self.app0_slot.store(slot, Ordering::Relaxed);
    }

    /// Charge `ns` of virtual time to the node's application processor 0
    /// (work the protocol thread did on the node's behalf).
    pub(super) fn charge_app0(&self, ns: u64) {
        let slot = self.app0_slot.load(Ordering::Relaxed);
        if slot != u32::MAX && ns > 0 {
            vclock::charge(slot, ns);
        }
    }
}
