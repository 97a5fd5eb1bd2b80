//! A hostile vhost-user frontend: what a broken or malicious QEMU, or any
//! process that can reach an adapter's socket, can do to the backend (issue 17,
//! docs/device.md section 19).
//!
//! - [`GuestRam`], [`SplitRing`], [`Hostile`], [`raw_message`]: the rigs
//!   shared with mc-device's own tests and the fuzz targets
//!   (`mc_device::test_rig`): guest RAM as the attacker shares it, the driver
//!   side of a split ring in it, and a frontend that sends what it is told.
//! - [`Victim`]: a well-behaved guest (the driver's `Adapter` over its
//!   vhost-user transport) that keeps its control round trips and loopback
//!   stores going on another node while the attacks run, and at the end checks
//!   that its memory outside what it handed the device is byte-identical.
//! - [`thread_cpu_time`]: a thread's CPU time, to show a thread does not spin.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use firmware_model::PctEntry;
use mc_driver::{Adapter, AdapterOptions, Transport, VhostUserOptions, VhostUserTransport};

pub use mc_device::test_rig::{
    raw_message, Backing, GuestRam, Hostile, SplitRing, F_EVENT_IDX, F_VERSION_1,
};

/// CPU time thread `tid` of this process has used so far.
pub fn thread_cpu_time(tid: i32) -> Duration {
    // schedstat: nanoseconds on the CPU, first field.
    if let Ok(s) = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")) {
        if let Some(ns) = s.split_whitespace().next().and_then(|v| v.parse().ok()) {
            return Duration::from_nanos(ns);
        }
    }
    // stat: utime and stime (fields 14 and 15) in clock ticks.
    let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).expect("thread stat");
    let after = &s[s.rfind(')').expect("comm") + 2..];
    let f: Vec<u64> = after
        .split_whitespace()
        .map(|v| v.parse().unwrap_or(0))
        .collect();
    // SAFETY: sysconf only reads a system constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1);
    let hz = u64::try_from(hz).expect("max(1) is positive");
    Duration::from_millis((f[11] + f[12]) * 1000 / hz)
}

/// Open descriptors of this process.
pub fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

/// What a [`Victim`] saw: its control round trips, each with when it started.
#[derive(Debug)]
pub struct VictimReport {
    pub samples: Vec<(Instant, Duration)>,
}

/// Round trips in one stretch of time.
#[derive(Debug)]
pub struct Latency {
    pub round_trips: usize,
    pub median: Duration,
    pub max: Duration,
    /// When the slowest round trip started.
    pub max_at: Option<Instant>,
}

impl VictimReport {
    /// The round trips that started in `[from, to)`.
    pub fn between(&self, from: Instant, to: Instant) -> Latency {
        let mut l: Vec<_> = self
            .samples
            .iter()
            .filter(|(t, _)| *t >= from && *t < to)
            .map(|(t, d)| (*d, *t))
            .collect();
        l.sort();
        Latency {
            round_trips: l.len(),
            median: l.get(l.len() / 2).map(|x| x.0).unwrap_or_default(),
            max: l.last().map(|x| x.0).unwrap_or_default(),
            max_at: l.last().map(|x| x.1),
        }
    }

    /// All of them.
    pub fn all(&self) -> Latency {
        let far = Instant::now() + Duration::from_secs(3600);
        self.between(self.samples.first().map_or(far, |s| s.0), far)
    }
}

/// A well-behaved guest on another node, keeping its traffic going.
pub struct Victim {
    stop: Arc<AtomicBool>,
    progress: Arc<AtomicU64>,
    latencies: Arc<Mutex<Vec<(Instant, Duration)>>>,
    thread: Option<JoinHandle<()>>,
}

/// Page the victim stores to and receives back (loopback).
const VICTIM_PAGE: u32 = 9;
const FILL: u8 = 0xc3;

impl Victim {
    /// Attach to `socket` and start: status page, one loopback page, then
    /// control round trips and stores to itself until [`Victim::finish`].
    pub fn start(socket: &Path) -> Victim {
        let t = VhostUserTransport::connect(
            socket,
            &VhostUserOptions {
                ram_size: 8 << 20,
                ..Default::default()
            },
        )
        .expect("victim connects");
        let mut a = Adapter::new(
            t,
            AdapterOptions {
                timeout: Duration::from_secs(20),
                ..Default::default()
            },
        )
        .expect("victim adapter");
        a.set_status_page().expect("victim status page");
        let entry = PctEntry::transmit_broadcast()
            .with_loopback()
            .with_receive()
            .to_bits();
        let rx = a.map_receive(VICTIM_PAGE, 1, entry).expect("victim page");
        let page = u64::from(a.page_size());
        // Everything the driver has not handed the device: must never change.
        let dma = a.transport().dma().clone();
        let free_from = dma.len() - a.dma_remaining();
        dma.fill(free_from, a.dma_remaining(), FILL).unwrap();

        let stop = Arc::new(AtomicBool::new(false));
        let progress = Arc::new(AtomicU64::new(0));
        let latencies = Arc::new(Mutex::new(Vec::new()));
        let (s, p, l) = (stop.clone(), progress.clone(), latencies.clone());
        let thread = std::thread::Builder::new()
            .name("victim".into())
            .spawn(move || {
                let mut shadow = vec![0u8; firmware_model::to_usize(page)];
                let mut k = 0u64;
                while !s.load(Ordering::Acquire) {
                    k += 1;
                    let t0 = Instant::now();
                    a.get_status().expect("victim control round trip");
                    l.lock().unwrap().push((t0, t0.elapsed()));
                    let off = 8 * (k % (page / 8));
                    a.store(u64::from(VICTIM_PAGE) * page + off, &k.to_le_bytes())
                        .expect("victim store");
                    let off = firmware_model::to_usize(off);
                    shadow[off..off + 8].copy_from_slice(&k.to_le_bytes());
                    rx.wait_for(off, &k.to_le_bytes(), Duration::from_secs(20))
                        .expect("victim store comes back");
                    p.store(k, Ordering::Release);
                }
                // Its receive frame holds exactly its own stores...
                assert_eq!(
                    rx.read_vec(0, firmware_model::to_usize(page)).unwrap(),
                    shadow,
                    "victim's receive frame"
                );
                // ...and nothing it never handed the device was written.
                let free = dma.read_vec(free_from, dma.len() - free_from).unwrap();
                if let Some(k) = free.iter().position(|b| *b != FILL) {
                    panic!(
                        "victim memory at {:#x} (outside anything it handed the device) changed",
                        dma.gpa() + (free_from + k) as u64
                    );
                }
                drop(a);
            })
            .expect("spawn victim");
        let v = Victim {
            stop,
            progress,
            latencies,
            thread: Some(thread),
        };
        v.wait_progress(Duration::from_secs(20));
        v
    }

    /// Wait (bounded) until the victim completes another round.
    pub fn wait_progress(&self, timeout: Duration) {
        let before = self.progress.load(Ordering::Acquire);
        let start = Instant::now();
        while self.progress.load(Ordering::Acquire) <= before {
            assert!(
                self.thread.as_ref().is_some_and(|t| !t.is_finished()),
                "the victim stopped"
            );
            assert!(
                start.elapsed() < timeout,
                "the victim made no progress in {timeout:?}"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Stop, check its memory, and report its control round trips.
    pub fn finish(mut self) -> VictimReport {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            if let Err(p) = t.join() {
                std::panic::resume_unwind(p);
            }
        }
        VictimReport {
            samples: std::mem::take(&mut *self.latencies.lock().unwrap()),
        }
    }
}

impl Drop for Victim {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
