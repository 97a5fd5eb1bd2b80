//! A hostile vhost-user frontend: what a broken or malicious QEMU, or any
//! process that can reach an adapter's socket, can do to the backend (issue 17,
//! docs/device.md section 19).
//!
//! - [`GuestRam`]: guest RAM as the attacker shares it: a memfd (sealable or
//!   not, sealed or not) or a plain file, at any guest-physical address, read
//!   and written here directly, and tables that lie about it.
//! - [`SplitRing`]: the driver side of a split ring written straight into that
//!   RAM, so indices can jump, descriptors loop and heads point anywhere.
//! - [`Hostile`]: the vhost-user messages, over the `vhost` crate's frontend
//!   (which sends whatever it is given), and [`raw_message`] for what it will
//!   not send.
//! - [`Victim`]: a well-behaved guest (the driver's `Adapter` over its
//!   vhost-user transport) that keeps its control round trips and loopback
//!   stores going on another node while the attacks run, and at the end checks
//!   that its memory outside what it handed the device is byte-identical.
//! - [`thread_cpu_time`]: a thread's CPU time, to show a thread does not spin.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use firmware_model::abi::{Registers, CONFIG_SIZE, NUM_QUEUES};
use firmware_model::PctEntry;
use mc_driver::{Adapter, AdapterOptions, Transport, VhostUserOptions, VhostUserTransport};
use vhost::vhost_user::message::{
    VhostUserConfigFlags, VhostUserHeaderFlag, VhostUserProtocolFeatures, VhostUserVirtioFeatures,
};
use vhost::vhost_user::{Frontend, VhostUserFrontend};
use vhost::{VhostBackend, VhostUserMemoryRegionInfo, VringConfigData};
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};
use vmm_sys_util::sock_ctrl_msg::ScmSocket;

/// VIRTIO_F_VERSION_1 and VIRTIO_RING_F_EVENT_IDX.
pub const F_VERSION_1: u64 = 1 << 32;
pub const F_EVENT_IDX: u64 = 1 << 29;

/// How guest RAM is backed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backing {
    /// A memfd created with MFD_ALLOW_SEALING, left unsealed (the backend may
    /// seal it).
    Sealable,
    /// A memfd sealed against resizing and further sealing (QEMU's default).
    Sealed,
    /// A memfd created without MFD_ALLOW_SEALING: it can always shrink.
    Unsealable,
    /// A plain temporary file.
    PlainFile,
}

/// Guest RAM the attacker shares: `len` bytes at guest-physical `gpa`.
pub struct GuestRam {
    file: File,
    ptr: *mut u8,
    len: usize,
    gpa: u64,
}

// SAFETY: the mapping is plain shared memory owned by this value; every access
// below is volatile, so sharing it between threads is sound.
unsafe impl Send for GuestRam {}
// SAFETY: as above.
unsafe impl Sync for GuestRam {}

impl GuestRam {
    pub fn new(len: usize, gpa: u64, backing: Backing) -> io::Result<GuestRam> {
        let file = match backing {
            Backing::PlainFile => tempfile::tempfile()?,
            _ => {
                let flags = match backing {
                    Backing::Unsealable => libc::MFD_CLOEXEC,
                    _ => libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
                };
                // SAFETY: a plain syscall with a valid NUL-terminated name.
                let fd = unsafe { libc::memfd_create(c"hostile-ram".as_ptr(), flags) };
                if fd < 0 {
                    return Err(io::Error::last_os_error());
                }
                // SAFETY: `fd` is a fresh descriptor nothing else owns.
                unsafe { File::from_raw_fd(fd) }
            }
        };
        file.set_len(len as u64)?;
        if backing == Backing::Sealed {
            let seals = libc::F_SEAL_GROW | libc::F_SEAL_SHRINK | libc::F_SEAL_SEAL;
            // SAFETY: adds seals to the memfd `file` owns.
            if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, seals) } < 0 {
                return Err(io::Error::last_os_error());
            }
        }
        // SAFETY: a fresh shared mapping of a file this value owns, at an
        // address the kernel picks; the result is checked.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(GuestRam {
            file,
            ptr: ptr.cast(),
            len,
            gpa,
        })
    }

    pub fn gpa(&self) -> u64 {
        self.gpa
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }

    /// The address the frontend names for `gpa` in vring messages (vhost-user
    /// speaks frontend virtual addresses; the backend translates them through
    /// the memory table).
    pub fn host_addr(&self, gpa: u64) -> u64 {
        self.ptr as u64 + (gpa - self.gpa)
    }

    /// The honest table entry for this RAM.
    pub fn region(&self) -> VhostUserMemoryRegionInfo {
        self.region_claiming(self.len as u64, 0)
    }

    /// A table entry claiming `size` bytes of the file from `offset`, whatever
    /// the file holds.
    pub fn region_claiming(&self, size: u64, offset: u64) -> VhostUserMemoryRegionInfo {
        VhostUserMemoryRegionInfo {
            guest_phys_addr: self.gpa,
            memory_size: size,
            userspace_addr: self.ptr as u64,
            mmap_offset: offset,
            mmap_handle: self.fd(),
        }
    }

    /// Try to resize the file under the backend (what a sealed file refuses).
    pub fn set_file_len(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }

    fn offset(&self, gpa: u64, len: usize) -> usize {
        let off = gpa
            .checked_sub(self.gpa)
            .filter(|o| o + len as u64 <= self.len as u64)
            .unwrap_or_else(|| panic!("{gpa:#x}+{len:#x} is outside this RAM"));
        off as usize
    }

    pub fn write(&self, gpa: u64, data: &[u8]) {
        let off = self.offset(gpa, data.len());
        for (k, b) in data.iter().enumerate() {
            // SAFETY: in the mapping (checked by `offset`); volatile because the
            // backend reads it concurrently.
            unsafe { self.ptr.add(off + k).write_volatile(*b) };
        }
    }

    pub fn read(&self, gpa: u64, len: usize) -> Vec<u8> {
        let off = self.offset(gpa, len);
        // SAFETY: in the mapping (checked by `offset`); volatile because the
        // backend writes it concurrently.
        (0..len)
            .map(|k| unsafe { self.ptr.add(off + k).read_volatile() })
            .collect()
    }

    pub fn fill(&self, byte: u8) {
        self.write(self.gpa, &vec![byte; self.len]);
    }

    /// All of it.
    pub fn snapshot(&self) -> Vec<u8> {
        self.read(self.gpa, self.len)
    }

    pub fn write_u16(&self, gpa: u64, v: u16) {
        self.write(gpa, &v.to_le_bytes());
    }

    pub fn read_u16(&self, gpa: u64) -> u16 {
        let b = self.read(gpa, 2);
        u16::from_le_bytes([b[0], b[1]])
    }
}

impl Drop for GuestRam {
    fn drop(&mut self) {
        // SAFETY: exactly the mapping made in `new`.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// The driver side of one split ring, in [`GuestRam`].
#[derive(Clone, Debug)]
pub struct SplitRing {
    pub size: u16,
    pub desc: u64,
    pub avail: u64,
    pub used: u64,
    next_desc: u16,
    avail_idx: u16,
    used_seen: u16,
}

impl SplitRing {
    /// A ring of `size` entries laid out from `base` (descriptors, then the
    /// available ring, then the used ring on the next 4 KiB boundary).
    pub fn at(base: u64, size: u16) -> SplitRing {
        let n = u64::from(size);
        let avail = base + 16 * n;
        let used = (avail + 6 + 2 * n).div_ceil(4096) * 4096;
        SplitRing::with_rings(size, base, avail, used)
    }

    /// A ring with its three parts wherever the caller says.
    pub fn with_rings(size: u16, desc: u64, avail: u64, used: u64) -> SplitRing {
        SplitRing {
            size,
            desc,
            avail,
            used,
            next_desc: 0,
            avail_idx: 0,
            used_seen: 0,
        }
    }

    /// The guest-physical ranges the driver hands the device with this ring.
    pub fn ranges(&self) -> [(u64, usize); 3] {
        let n = usize::from(self.size);
        [
            (self.desc, 16 * n),
            (self.avail, 6 + 2 * n),
            (self.used, 6 + 8 * n),
        ]
    }

    /// Post a chain of (gpa, len, device-writable) buffers; returns its head.
    pub fn post(&mut self, ram: &GuestRam, bufs: &[(u64, u32, bool)]) -> u16 {
        let head = self.next_desc;
        for (k, &(gpa, len, w)) in bufs.iter().enumerate() {
            let i = (self.next_desc + k as u16) % self.size;
            let last = k + 1 == bufs.len();
            let flags: u16 = (if last { 0 } else { 1 }) | (if w { 2 } else { 0 });
            self.write_desc(ram, i, gpa, len, flags, (i + 1) % self.size);
        }
        self.next_desc = (self.next_desc + bufs.len() as u16) % self.size;
        self.make_available(ram, head);
        head
    }

    /// Write descriptor `i` verbatim (loops, heads anywhere).
    pub fn write_desc(&self, ram: &GuestRam, i: u16, gpa: u64, len: u32, flags: u16, next: u16) {
        let d = self.desc + 16 * u64::from(i % self.size);
        ram.write(d, &gpa.to_le_bytes());
        ram.write(d + 8, &len.to_le_bytes());
        ram.write(d + 12, &flags.to_le_bytes());
        ram.write(d + 14, &next.to_le_bytes());
    }

    /// Put `head` in the next available slot (whatever it names) and publish it.
    pub fn make_available(&mut self, ram: &GuestRam, head: u16) {
        let slot = self.avail + 4 + 2 * u64::from(self.avail_idx % self.size);
        ram.write_u16(slot, head);
        self.avail_idx = self.avail_idx.wrapping_add(1);
        ram.write_u16(self.avail + 2, self.avail_idx);
    }

    /// Move the available index anywhere (what a well-behaved driver never does).
    pub fn set_avail_idx(&mut self, ram: &GuestRam, idx: u16) {
        self.avail_idx = idx;
        ram.write_u16(self.avail + 2, idx);
    }

    pub fn avail_idx(&self) -> u16 {
        self.avail_idx
    }

    /// The device's used index as it is in memory now.
    pub fn used_idx(&self, ram: &GuestRam) -> u16 {
        ram.read_u16(self.used + 2)
    }

    /// Completions not yet seen: (head, written length).
    pub fn reap(&mut self, ram: &GuestRam) -> Vec<(u32, u32)> {
        let idx = self.used_idx(ram);
        let mut out = Vec::new();
        while self.used_seen != idx {
            let e = self.used + 4 + 8 * u64::from(self.used_seen % self.size);
            let b = ram.read(e, 8);
            out.push((
                u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
                u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
            ));
            self.used_seen = self.used_seen.wrapping_add(1);
        }
        out
    }

    /// Wait (bounded) until `n` completions are seen.
    pub fn wait_used(&mut self, ram: &GuestRam, n: usize, timeout: Duration) -> Vec<(u32, u32)> {
        let start = Instant::now();
        let mut got = Vec::new();
        while got.len() < n {
            got.extend(self.reap(ram));
            assert!(
                start.elapsed() < timeout,
                "only {} of {n} completions after {timeout:?}",
                got.len()
            );
            std::thread::sleep(Duration::from_micros(200));
        }
        got
    }

    /// Forget what was posted (the driver re-initialises the ring).
    pub fn reset(&mut self, ram: &GuestRam) {
        self.next_desc = 0;
        self.avail_idx = 0;
        self.used_seen = 0;
        for (gpa, len) in self.ranges() {
            ram.write(gpa, &vec![0; len]);
        }
    }
}

/// A vhost-user frontend that sends what it is told.
pub struct Hostile {
    pub fe: Frontend,
    kicks: Vec<EventFd>,
    calls: Vec<EventFd>,
}

impl Hostile {
    /// Connect to `path`; every request asks for an acknowledgement (once
    /// REPLY_ACK is negotiated), so a refusal shows up as an error.
    /// A backend that stops answering shows as an error after 10 s.
    pub fn connect(path: &Path) -> vhost::Result<Hostile> {
        let sock = UnixStream::connect(path).map_err(|e| {
            vhost::Error::VhostUserProtocol(vhost::vhost_user::Error::SocketConnect(e))
        })?;
        for t in [
            sock.set_read_timeout(Some(Duration::from_secs(10))),
            sock.set_write_timeout(Some(Duration::from_secs(10))),
        ] {
            t.map_err(|e| {
                vhost::Error::VhostUserProtocol(vhost::vhost_user::Error::SocketError(e))
            })?;
        }
        let fe = Frontend::from_stream(sock, NUM_QUEUES as u64);
        fe.set_hdr_flags(VhostUserHeaderFlag::NEED_REPLY);
        let mk = || EventFd::new(EFD_NONBLOCK).expect("eventfd");
        Ok(Hostile {
            fe,
            kicks: (0..NUM_QUEUES).map(|_| mk()).collect(),
            calls: (0..NUM_QUEUES).map(|_| mk()).collect(),
        })
    }

    /// What QEMU does before the memory table: features, protocol features
    /// (MQ, CONFIG, REPLY_ACK), owner.
    pub fn handshake(&mut self, event_idx: bool) -> vhost::Result<()> {
        let offered = self.fe.get_features()?;
        let pf = self.fe.get_protocol_features()?;
        self.fe.set_protocol_features(
            pf & (VhostUserProtocolFeatures::MQ
                | VhostUserProtocolFeatures::CONFIG
                | VhostUserProtocolFeatures::REPLY_ACK),
        )?;
        self.fe.set_owner()?;
        let want = F_VERSION_1
            | VhostUserVirtioFeatures::PROTOCOL_FEATURES.bits()
            | if event_idx { F_EVENT_IDX } else { 0 };
        self.fe.set_features(offered & want)
    }

    pub fn set_mem_table(&self, regions: &[VhostUserMemoryRegionInfo]) -> vhost::Result<()> {
        self.fe.set_mem_table(regions).map(|_| ())
    }

    /// Set queue `q` up on `ring` (size, base, addresses, kick, call, enable),
    /// as QEMU's vhost_virtqueue_start does.
    pub fn setup_queue(&mut self, q: usize, ring: &SplitRing, ram: &GuestRam) -> vhost::Result<()> {
        self.setup_queue_at(
            q,
            ring.size,
            [
                ram.host_addr(ring.desc),
                ram.host_addr(ring.avail),
                ram.host_addr(ring.used),
            ],
        )
    }

    /// Set queue `q` up with ring addresses given as frontend addresses.
    pub fn setup_queue_at(&mut self, q: usize, size: u16, addrs: [u64; 3]) -> vhost::Result<()> {
        self.fe.set_vring_num(q, size)?;
        self.fe.set_vring_base(q, 0)?;
        self.fe.set_vring_addr(
            q,
            &VringConfigData {
                queue_max_size: size,
                queue_size: size,
                flags: 0,
                desc_table_addr: addrs[0],
                used_ring_addr: addrs[2],
                avail_ring_addr: addrs[1],
                log_addr: None,
            },
        )?;
        self.fe.set_vring_kick(q, &self.kicks[q])?;
        self.fe.set_vring_call(q, &self.calls[q])?;
        self.fe.set_vring_enable(q, true)
    }

    /// Stop queue `q` (VHOST_USER_GET_VRING_BASE), as QEMU does before a reset.
    pub fn stop_queue(&self, q: usize) -> vhost::Result<u32> {
        self.fe.get_vring_base(q)
    }

    /// Give queue `q` any descriptor as its kick (`kick`) or call.
    pub fn set_fd(&mut self, q: usize, fd: RawFd, kick: bool) -> vhost::Result<()> {
        // SAFETY: a duplicate of `fd`, owned by the wrapper for the message
        // and closed with it.
        let e = unsafe { EventFd::from_raw_fd(libc::dup(fd)) };
        if kick {
            self.fe.set_vring_kick(q, &e)
        } else {
            self.fe.set_vring_call(q, &e)
        }
    }

    pub fn kick(&self, q: usize) {
        self.kicks[q].write(1).expect("kick");
    }

    /// The register file (VHOST_USER_GET_CONFIG).
    pub fn registers(&mut self) -> vhost::Result<Registers> {
        let (_, bytes) = self.fe.get_config(
            0,
            CONFIG_SIZE as u32,
            VhostUserConfigFlags::WRITABLE,
            &[0u8; CONFIG_SIZE],
        )?;
        Ok(Registers::from_bytes(&bytes).expect("a register file"))
    }
}

/// Send one raw vhost-user message (`code`, version-1 flags, `body`) with
/// `fds` attached: for what the `vhost` frontend refuses to send.
pub fn raw_message(s: &UnixStream, code: u32, body: &[u8], fds: &[RawFd]) -> io::Result<()> {
    let mut msg = Vec::with_capacity(12 + body.len());
    msg.extend_from_slice(&code.to_le_bytes());
    msg.extend_from_slice(&1u32.to_le_bytes());
    msg.extend_from_slice(&(body.len() as u32).to_le_bytes());
    msg.extend_from_slice(body);
    s.send_with_fds(&[&msg[..]], fds)
        .map(|_| ())
        .map_err(|e| io::Error::from_raw_os_error(e.errno()))
}

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
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
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
                let mut shadow = vec![0u8; page as usize];
                let mut k = 0u64;
                while !s.load(Ordering::Acquire) {
                    k += 1;
                    let t0 = Instant::now();
                    a.get_status().expect("victim control round trip");
                    l.lock().unwrap().push((t0, t0.elapsed()));
                    let off = 8 * (k % (page / 8));
                    a.store(u64::from(VICTIM_PAGE) * page + off, &k.to_le_bytes())
                        .expect("victim store");
                    shadow[off as usize..off as usize + 8].copy_from_slice(&k.to_le_bytes());
                    rx.wait_for(off as usize, &k.to_le_bytes(), Duration::from_secs(20))
                        .expect("victim store comes back");
                    p.store(k, Ordering::Release);
                }
                // Its receive frame holds exactly its own stores...
                assert_eq!(
                    rx.read_vec(0, page as usize).unwrap(),
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
