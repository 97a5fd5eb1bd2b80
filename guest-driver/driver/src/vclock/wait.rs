//! Waits for data and serving while waiting (docs/virtual-time.md s.5):
//! waiting never advances a thread's clock; it resumes at the data's
//! arrival. A request served is charged from its arrival.

use super::board::SlotState;
use super::counter::Uncounted;
use super::thread::{CLOCK, NO_SLOT};
use super::{enabled, GLOBAL, NOTICE_NS};

/// The thread is inside a wait ([`wait_begin`] .. [`wait_end`]).
pub fn waiting() -> bool {
    enabled() && CLOCK.with(|c| c.waiting.get() > 0)
}

/// Serve a request that arrived at `arrival`, found by a poll (seed 000
/// s.2.1's polling, or a waiter answering while it waits;
/// docs/virtual-time.md s.5).
///
/// The service happens at the request's arrival, whoever does it and
/// whenever the host ran it: its CPU time counts from `arrival`, and what
/// it sends is stamped so. (The real cluster's processors poll every few
/// microseconds, at loop back-edges; on this host a poller may notice the
/// request only after its clock has run far past the arrival while the
/// requester waited, and a reply stamped then would make the prediction
/// follow the host's scheduling.) When the returned guard drops, a thread
/// that was waiting gets its clock back (its processor was idle); a thread
/// that was computing gets its clock back plus the service's time (its
/// processor did the work). A request from the server's own virtual future
/// (a computing poller leaves those, `cashmere::requests`) moves a
/// computing server's clock up to it first. Nested calls serve on the
/// outer one's terms. Without `arrival` the service starts at the thread's
/// own time.
pub fn serve(arrival: Option<u64>) -> Serving {
    let Some(g) = GLOBAL.get().filter(|_| enabled()) else {
        return Serving { restore: None };
    };
    let _uncounted = Uncounted::enter();
    CLOCK.with(|c| {
        let now = c.advance(g);
        c.set(g, now);
        if c.serving.get() {
            return Serving { restore: None };
        }
        let waiting = c.waiting.get() > 0;
        let at = arrival.unwrap_or(now);
        c.serving.set(true);
        // Not published: the board shows the thread's own time, which the
        // service does not move back.
        c.vt.set(at);
        Serving {
            restore: Some(Restore {
                back_to: if waiting { now } else { now.max(at) },
                from: at,
                add_service: !waiting,
            }),
        }
    })
}

/// A request being served ([`serve`]); dropping it ends the service.
#[derive(Debug)]
pub struct Serving {
    restore: Option<Restore>,
}

/// Where a server's clock goes when its service ends.
#[derive(Debug, Clone, Copy)]
struct Restore {
    /// Its own time, before the service.
    back_to: u64,
    /// When the service started.
    from: u64,
    /// The service's time is added (the thread was computing).
    add_service: bool,
}

impl Drop for Serving {
    fn drop(&mut self) {
        let Some(r) = self.restore else {
            return;
        };
        let Some(g) = GLOBAL.get() else {
            return;
        };
        let _uncounted = Uncounted::enter();
        let _ = CLOCK.try_with(|c| {
            let end = c.advance(g);
            c.serving.set(false);
            let service = end.saturating_sub(r.from);
            let vt = if r.add_service {
                r.back_to.saturating_add(service)
            } else {
                r.back_to
            };
            c.set(g, vt);
        });
    }
}

/// Begin a wait for data: the time so far is counted, and the thread leaves
/// the board's floor until [`wait_end`]. Nests (a fault inside a wait).
pub fn wait_begin() {
    let Some(g) = GLOBAL.get().filter(|_| enabled()) else {
        return;
    };
    let _uncounted = Uncounted::enter();
    CLOCK.with(|c| {
        let vt = c.advance(g);
        c.set(g, vt);
        let depth = c.waiting.get();
        c.waiting.set(depth + 1);
        if depth == 0 && c.slot.get() != NO_SLOT {
            g.board.set_state(c.slot.get(), SlotState::Waiting);
        }
    });
}

/// End a wait: the CPU the wait burnt is not counted; the thread resumes at
/// the later of its own time and `arrival` (the data's virtual arrival, if
/// known), plus [`NOTICE_NS`]. Returns its new time.
///
/// At `trace` level it logs where a wait resumed (its caller) and how far
/// past the thread's own time: what to look at when a prediction moves.
#[track_caller]
pub fn wait_end(arrival: Option<u64>) -> u64 {
    if log::log_enabled!(log::Level::Trace) {
        if let Some(a) = arrival.filter(|_| enabled()) {
            let own = CLOCK.with(|c| c.vt.get());
            log::trace!(
                "vclock: the wait at {} resumed {} us past its thread's own time {} us",
                std::panic::Location::caller(),
                a.saturating_sub(own) / 1000,
                own / 1000
            );
        }
    }
    end_wait(arrival, NOTICE_NS)
}

/// End a wait that waited for the host's own machinery, nothing of the
/// emulated network (a transmit FIFO draining into the hub): its CPU is not
/// counted and no time is added. Returns the thread's time.
pub fn wait_end_quiet() -> u64 {
    end_wait(None, 0)
}

fn end_wait(arrival: Option<u64>, notice: u64) -> u64 {
    let Some(g) = GLOBAL.get().filter(|_| enabled()) else {
        return 0;
    };
    let _uncounted = Uncounted::enter();
    CLOCK.with(|c| {
        c.start(g);
        c.cpu_mark.set(c.read(g));
        let depth = c.waiting.get().saturating_sub(1);
        c.waiting.set(depth);
        let mut vt = c.vt.get();
        if let Some(a) = arrival {
            vt = vt.max(a);
        }
        vt = vt.saturating_add(notice);
        c.set(g, vt);
        if depth == 0 && c.slot.get() != NO_SLOT {
            g.board.set_state(c.slot.get(), SlotState::Running);
        }
        // No gate here: a wait may end with a lock held that the slowest
        // thread needs; the next [`sync`] holds the thread if it must.
        c.vt.get()
    })
}

/// When a store of `bytes` sent at virtual time `send` arrives, alone on
/// the adapter's network (`VirtualLink::arrival`; Memory Channel 2 unless
/// `--link clan`): for a receiver that knows the sender's time from the
/// data itself.
pub fn one_way(send: u64, bytes: u64) -> u64 {
    super::network()
        .arrival(firmware_model::Nanos(send), bytes)
        .0
}
