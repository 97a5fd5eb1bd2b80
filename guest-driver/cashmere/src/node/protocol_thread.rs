//! The node's protocol thread (seed 000 s.2.1): it sleeps until a store
//! lands in the node's mailbox (the adapter's event signal; where the
//! transport has none, as PCI in a QEMU guest, it polls the events with
//! growing sleeps), takes the events, rings the doorbell for the node's
//! other waiters, and answers requests. With message detection by polling
//! the application threads answer where they poll; while they do and none
//! of them sleeps on the doorbell, this thread ticks (`POLL_TICK`) instead
//! of waiting for the event signal.

use std::sync::Arc;
use std::time::{Duration, Instant};

use mc_api::vclock;

use super::protocol_control::WindowMark;
use super::{mark_protocol_thread, Node};
use crate::error::CsmError;
use crate::times::{self, Activity};

/// The longest sleep of the protocol thread (it looks at the membership
/// then, and at its stop flag).
const PROTOCOL_NAP: Duration = Duration::from_millis(20);
/// The longest sleep of the protocol thread when other protocol nodes share
/// its adapter's event signal (1L): how late it may notice an event a
/// sibling's protocol thread was woken for.
const SHARED_NAP: Duration = Duration::from_millis(1);
/// How soon the protocol thread looks again at requests it could not
/// answer because another thread held the state.
const BUSY_RETRY: Duration = Duration::from_micros(200);
/// The protocol thread's sleep while the application threads poll: how
/// long a request waits at most when they stop polling (a program leaving
/// its loops) before this thread notices.
const POLL_TICK: Duration = Duration::from_micros(500);
/// How often the membership is looked at.
const MEMBERSHIP_EVERY: Duration = Duration::from_millis(20);
/// Log a protocol failure, tell the other nodes, and keep it for the
/// application threads' next call.
fn report_failure(node: &Node, e: Arc<CsmError>) {
    log::error!(
        "node{}: cashmere protocol thread: {}",
        node.me,
        mc_api::ErrorChain(&e)
    );
    node.sync.abort();
    node.control.fail(e);
}

/// The node's protocol thread: sleep until the mailbox takes a store, ring
/// the doorbell, answer requests.
///
/// In virtual time this thread is always waiting (docs/virtual-time.md
/// s.5): it is not a free extra processor. It serves each request at the
/// request's arrival, stamps its reply so, and charges the service's CPU
/// time to the node's application processor 0, which the paper's interrupt
/// would have stopped.
pub(super) fn protocol_thread(node: &Node) {
    mark_protocol_thread();
    vclock::wait_begin();
    protocol_loop(node);
    vclock::wait_end_quiet();
}

fn protocol_loop(node: &Node) {
    times::begin_window();
    let mut idle = Some(times::enter(Activity::Idle));
    let mut last_work = Instant::now();
    // Looking for more work since the last piece (requests come in bursts).
    let mut spinning = false;
    let mut last_members = Instant::now();
    let mut nap = Duration::from_micros(10);
    // The application threads' poll count when this thread last went to
    // sleep (`FutexBell::polls`).
    let mut polls_before: Option<u32> = None;
    while !node.control.stopping() {
        match node.control.pending_mark() {
            Some(WindowMark::Begin) => {
                drop(idle.take());
                times::begin_window();
                idle = Some(times::enter(Activity::Idle));
                node.control.opened();
            }
            Some(WindowMark::End) => {
                node.control.closed(times::breakdown("proto", node.me));
            }
            None => {}
        }
        // The events are taken before the words are looked at: an event is
        // delivered after the store it reports, so what it reports is there.
        // Requests are this thread's to answer; anything else (a reply, a
        // barrier, an echo, a ring) may be what a sleeping waiter waits for.
        let notes = node.mc.take_notifications(node.mail.own());
        let events = notes.len();
        // Synchronisation messages (CSM-None) need no state: their handler
        // runs here whatever else holds it.
        if let Err(e) = node.sync.serve() {
            report_failure(node, Arc::new(e));
            return;
        }
        if notes.iter().any(|n| !node.mail.is_request(n.page)) {
            node.bell.ring();
        }
        if last_members.elapsed() > MEMBERSHIP_EVERY {
            last_members = Instant::now();
            if node.sync.refresh_members() {
                node.bell.ring();
            }
        }
        if node.requests_waiting() {
            // Never blocks on the state: a thread holding it may be asleep
            // waiting for an event only this thread takes. That thread
            // answers requests itself while it waits.
            let guard = match node.state.try_lock() {
                Ok(g) => Some(g),
                Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) => None,
            };
            match guard {
                Some(mut st) => {
                    let mark = vclock::work_mark();
                    let r = {
                        let _serve = times::enter(Activity::Serve);
                        node.serve_requests(&mut st)
                    };
                    node.control.charge_app0(vclock::protocol_work_since(mark));
                    drop(st);
                    if let Err(e) = r {
                        report_failure(node, Arc::new(e));
                        return;
                    }
                    if spinning {
                        node.bell.protocol_spun(true);
                    }
                    spinning = false;
                    last_work = Instant::now();
                    nap = Duration::from_micros(10);
                }
                None => {
                    // The holder answers while it waits: wake it if it
                    // sleeps. Look again soon: it may not be waiting at all
                    // (a release diffing many pages).
                    node.bell.ring();
                    match node.control.signal() {
                        Some(s) => {
                            let _ = s.wait(BUSY_RETRY);
                        }
                        None => std::thread::sleep(BUSY_RETRY),
                    }
                }
            }
            continue;
        }
        if events > 0 {
            last_work = Instant::now();
            continue;
        }
        if node.choices.polling() {
            // While the application threads poll (the count moved since
            // this thread last slept) and none sleeps on the bell, they
            // answer requests: sleep a tick instead of being woken by every
            // store into the mailbox, each wake-up a context switch on a
            // core they compute on.
            let now = node.bell.polls();
            let polled = now.is_some() && polls_before.is_some() && now != polls_before;
            polls_before = now;
            if polled {
                spinning = false;
                node.bell.tick(POLL_TICK);
                continue;
            }
        }
        if last_work.elapsed() < node.bell.protocol_spin() {
            spinning = true;
            std::thread::yield_now();
            continue;
        }
        if spinning {
            node.bell.protocol_spun(false);
            spinning = false;
        }
        match node.control.signal() {
            // After `take_notifications` the adapter signals the next event;
            // one that came since then has signalled already.
            Some(s) => {
                let nap = if node.shared_adapter {
                    SHARED_NAP
                } else {
                    PROTOCOL_NAP
                };
                if let Err(e) = s.wait(nap) {
                    report_failure(node, Arc::new(e.into()));
                    return;
                }
            }
            // No interrupts (PCI in a QEMU guest): poll, sleeping longer
            // the longer nothing comes.
            None => {
                std::thread::sleep(nap);
                nap = (nap * 2).min(Duration::from_micros(200));
            }
        }
    }
    drop(idle);
    node.control.stopped(|| times::breakdown("proto", node.me));
}
