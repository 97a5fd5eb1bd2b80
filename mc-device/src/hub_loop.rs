//! The hub thread: polls every adapter's transmit ring.
//!
//! Low latency needs polling (a wake-up through an eventfd costs tens of
//! microseconds here), but a spinning thread steals a core from the guests. So
//! the hub spins only while traffic is recent; after `spin` of idleness it arms
//! the transmit queues' notifications and sleeps until a guest kicks.

use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use log::debug;

use crate::device::Device;

/// Sleep at most this long, so a shutdown request is seen.
const SLEEP_MS: i32 = 100;

pub(crate) fn run(shared: Arc<Device>) {
    let mut idle_since: Option<Instant> = None;
    let mut spins: u32 = 0;
    while !shared.shutdown.load(Ordering::Acquire) {
        let worked = {
            let mut st = shared.lock();
            st.advance();
            let mut n = 0;
            for i in 0..st.nodes.len() {
                n += st.process_tx(i);
            }
            if n > 0 {
                st.refresh_status_pages();
            }
            n
        };
        if worked > 0 {
            idle_since = None;
            continue;
        }
        let since = *idle_since.get_or_insert_with(Instant::now);
        if since.elapsed() < shared.spin {
            spins = spins.wrapping_add(1);
            if spins % 32 == 0 {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
            continue;
        }
        // Idle: arm kicks, re-check, sleep (no later than the next scheduled fault).
        let sleep_ms = {
            let st = shared.lock();
            if st.arm_tx_notifications() {
                idle_since = None;
                continue;
            }
            st.next_fault_in()
                .map_or(SLEEP_MS, |d| (d.as_millis() as i32 + 1).min(SLEEP_MS))
        };
        let mut pfd = libc::pollfd {
            fd: shared.wake.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: `pfd` is a valid pollfd for the duration of the call and the
        // count is 1.
        let r = unsafe { libc::poll(&mut pfd, 1, sleep_ms) };
        if r > 0 {
            let _ = shared.wake.read();
            debug!("hub woken by a kick");
        }
        shared.lock().disarm_tx_notifications();
        idle_since = None;
    }
}
