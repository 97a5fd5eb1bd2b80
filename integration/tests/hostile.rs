//! A hostile frontend against the backend (issue 17; docs/device.md section
//! 19): memory tables that lie, queues used without being configured, rings
//! broken by their own driver, rings at hostile addresses, descriptor loops,
//! junk messages, reconnect storms and a flooding guest. After each attack the
//! backend is alive, a fresh well-behaved connection on the attacked node is
//! served, and a well-behaved guest on another node kept its traffic going
//! with its memory untouched outside what it handed the device.
//!
//! Descriptor leaks and log flooding are measured process-wide, so they have
//! their own test binary (limits.rs).

use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::{Duration, Instant};

use firmware_model::abi::{
    self, CtrlRequest, CtrlResponse, TxRecordHeader, CTRL_QUEUE, EVENT_QUEUE, TX_QUEUE,
};
use firmware_model::{ClusterConfig, FaultCommand, Nanos, NodeId, PctEntry};
use integration::hostile::{
    raw_message, thread_cpu_time, Backing, GuestRam, Hostile, Latency, SplitRing, Victim,
};
use integration::VirtualCluster;
use mc_device::{Cluster, ClusterOptions, DeviceError};
use vhost::vhost_user::VhostUserFrontend;
use vhost::VhostBackend;

const MIB: usize = 1 << 20;
const WAIT: Duration = Duration::from_secs(10);

/// A fresh well-behaved connection on `node` is served: registers and a
/// control round trip.
fn served(vc: &VirtualCluster, node: u8) {
    let mut a = vc.adapter(node);
    assert_eq!(a.registers().expect("registers").node_id, u32::from(node));
    a.get_status().expect("a control round trip");
}

/// Wait (bounded) until node `node` has no guest attached.
fn wait_detached(vc: &VirtualCluster, node: u8) {
    let start = Instant::now();
    while vc.cluster.snapshot().nodes[usize::from(node)].connected {
        assert!(
            start.elapsed() < WAIT,
            "node {node} still holds the guest's memory"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A hostile connection to `node`, past the handshake, with `ram` as its table.
fn attach(vc: &VirtualCluster, node: u8, ram: &GuestRam) -> Hostile {
    let mut h = Hostile::connect(&vc.socket(node)).expect("connect");
    h.handshake(true).expect("handshake");
    h.set_mem_table(&[ram.region()]).expect("memory table");
    h
}

/// A control request in `ram`: (request gpa, length, response gpa).
fn write_request(ram: &GuestRam, at: u64, req: &CtrlRequest) -> (u64, u32, u64) {
    let bytes = req.encode();
    ram.write(at, &bytes);
    (at, u32::try_from(bytes.len()).unwrap(), at + 0x800)
}

fn response(ram: &GuestRam, at: u64) -> CtrlResponse {
    CtrlResponse::from_bytes(&ram.read(at, abi::CTRL_RESPONSE_SIZE)).expect("a response")
}

/// One GET_STATUS round trip on the control ring `ctrl` (request at `at`),
/// which must succeed: the node is served.
fn status_round_trip(h: &Hostile, ctrl: &mut SplitRing, ram: &GuestRam, at: u64) {
    let (req, len, resp) = write_request(ram, at, &CtrlRequest::GetStatus);
    ctrl.post(ram, &[(req, len, false), (resp, 16, true)]);
    h.kick(usize::from(CTRL_QUEUE));
    ctrl.wait_used(ram, 1, WAIT);
    assert_eq!(response(ram, resp).status, 0);
}

fn report(what: &str, r: &Latency) {
    println!(
        "{what}: the well-behaved node made {} control round trips: median {:?}, max {:?}",
        r.round_trips, r.median, r.max
    );
}

// ---- class 1: memory tables that lie

/// Every kind of lying table is refused before the backend touches it, so it
/// never dies of SIGBUS; the node is left without guest memory, the attacker's
/// connection ends, and the others go on.
#[test]
fn memory_tables_that_lie_are_refused() {
    let vc = VirtualCluster::start(ClusterConfig::new(2));
    let victim = Victim::start(&vc.socket(1));
    let gpa = 0x1000_0000;
    // (what, backing, file length, claimed size, claimed offset, shrink after)
    type Lie = (&'static str, Backing, usize, u64, u64, Option<u64>);
    let lies: [Lie; 5] = [
        (
            "a region larger than its file",
            Backing::Sealable,
            MIB,
            2 * MIB as u64,
            0,
            None,
        ),
        (
            "an offset past the end of the file",
            Backing::Sealable,
            MIB,
            MIB as u64,
            MIB as u64,
            None,
        ),
        (
            "a memfd that can still shrink",
            Backing::Unsealable,
            MIB,
            MIB as u64,
            0,
            Some(0),
        ),
        (
            "a plain file",
            Backing::PlainFile,
            MIB,
            MIB as u64,
            0,
            Some(0),
        ),
        (
            "a region past the end and a file that can shrink",
            Backing::Unsealable,
            MIB,
            4 * MIB as u64,
            0,
            None,
        ),
    ];
    for (what, backing, len, size, offset, shrink) in lies {
        let ram = GuestRam::new(len, gpa, backing).unwrap();
        let mut h = Hostile::connect(&vc.socket(0)).unwrap();
        h.handshake(true).unwrap();
        let table = h.set_mem_table(&[ram.region_claiming(size, offset)]);
        // Go on as if it had been accepted: shrink the file, then put a ring
        // where no file backs the mapping any more, and use it.
        if let Some(l) = shrink {
            let _ = ram.set_file_len(l);
        }
        let ring = gpa + size - 0x8000;
        let _ = h.setup_queue_at(
            usize::from(CTRL_QUEUE),
            16,
            [
                ram.host_addr(gpa) + (ring - gpa),
                ram.host_addr(gpa) + (ring - gpa) + 0x1000,
                ram.host_addr(gpa) + (ring - gpa) + 0x2000,
            ],
        );
        h.kick(usize::from(CTRL_QUEUE));
        std::thread::sleep(Duration::from_millis(20));
        assert!(table.is_err(), "{what}: the table was accepted");
        drop(h);
        wait_detached(&vc, 0);
        served(&vc, 0);
        victim.wait_progress(WAIT);
    }

    // An honest sealable memfd is accepted and sealed by the backend: the
    // frontend can no longer shrink it, and the node is served.
    let ram = GuestRam::new(MIB, gpa, Backing::Sealable).unwrap();
    let mut h = attach(&vc, 0, &ram);
    let e = ram.set_file_len(0).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EPERM), "{e}");
    let mut ctrl = SplitRing::at(gpa, 16);
    h.setup_queue(usize::from(CTRL_QUEUE), &ctrl, &ram).unwrap();
    status_round_trip(&h, &mut ctrl, &ram, gpa + 0x8000);

    // A lying table after a good one takes the node's memory away (the old
    // table is not kept either) and ends the connection.
    let liar = GuestRam::new(MIB, gpa, Backing::Sealable).unwrap();
    assert!(h
        .set_mem_table(&[liar.region_claiming(8 * MIB as u64, 0)])
        .is_err());
    drop(h);
    wait_detached(&vc, 0);
    served(&vc, 0);
    report("lying memory tables", &victim.finish().all());
}

// ---- class 2: queues a driver never configured

/// For every combination of configured queues, with and without EVENT_IDX,
/// the device writes nothing in guest RAM outside what the driver handed it:
/// the rings it configured and the buffers it posted. RAM starts at
/// guest-physical 0, where an unconfigured ring's addresses point.
#[test]
fn queues_never_configured_are_never_touched() {
    let vc = VirtualCluster::start(ClusterConfig::new(3));
    const FILL: u8 = 0x5a;
    for event_idx in [true, false] {
        for mask in 0u16..8 {
            let configured = |q: u16| mask & (1 << q) != 0;
            let ram = GuestRam::new(MIB, 0, Backing::Sealable).unwrap();
            ram.fill(FILL);
            let mut handed: Vec<(u64, usize)> = Vec::new();
            let mut h = Hostile::connect(&vc.socket(0)).unwrap();
            h.handshake(event_idx).unwrap();
            h.set_mem_table(&[ram.region()]).unwrap();
            let mut rings: Vec<SplitRing> = (0..3u16)
                .map(|q| SplitRing::at(0x10000 + u64::from(q) * 0x4000, 16))
                .collect();
            for q in (0..3u16).filter(|q| configured(*q)) {
                let r = &mut rings[usize::from(q)];
                // The driver zeroes its rings before handing them over.
                r.reset(&ram);
                handed.extend(r.ranges());
                h.setup_queue(usize::from(q), r, &ram).unwrap();
            }
            h.registers().unwrap();
            if configured(CTRL_QUEUE) {
                let (req, len, resp) = write_request(&ram, 0x30000, &CtrlRequest::GetStatus);
                handed.extend([(req, len as usize), (resp, 16)]);
                let r = &mut rings[usize::from(CTRL_QUEUE)];
                r.post(&ram, &[(req, len, false), (resp, 16, true)]);
                h.kick(usize::from(CTRL_QUEUE));
                r.wait_used(&ram, 1, WAIT);
            }
            if configured(EVENT_QUEUE) {
                let r = &mut rings[usize::from(EVENT_QUEUE)];
                for k in 0..4 {
                    let b = 0x31000 + 32 * k;
                    handed.push((b, 32));
                    r.post(&ram, &[(b, 32, true)]);
                }
                h.kick(usize::from(EVENT_QUEUE));
            }
            // Events for this adapter (membership changes).
            vc.cluster
                .apply_fault(FaultCommand::Crash(NodeId(2)))
                .unwrap();
            vc.cluster
                .apply_fault(FaultCommand::Rejoin(NodeId(2)))
                .unwrap();
            if configured(EVENT_QUEUE) {
                rings[usize::from(EVENT_QUEUE)].wait_used(&ram, 2, WAIT);
            }
            if configured(TX_QUEUE) {
                // The transmit virtqueue is only the FIFO's doorbell
                // (docs/device.md s.14): a chain posted on it is never read
                // and never completed, whatever it holds.
                let mut rec = TxRecordHeader {
                    addr: 0,
                    len: 8,
                    flags: 0,
                }
                .to_bytes()
                .to_vec();
                rec.extend_from_slice(&[1; 8]);
                ram.write(0x32000, &rec);
                // Written by this test, not the device.
                handed.push((0x32000, rec.len()));
                let r = &mut rings[usize::from(TX_QUEUE)];
                r.post(
                    &ram,
                    &[
                        (0x32000, u32::try_from(rec.len()).unwrap(), false),
                        (0x32100, 8, true),
                    ],
                );
                h.kick(usize::from(TX_QUEUE));
                std::thread::sleep(Duration::from_millis(20));
                assert!(
                    r.reap(&ram).is_empty(),
                    "a chain on the transmit doorbell was completed"
                );
            }
            for q in (0..3u16).filter(|q| configured(*q)) {
                h.kick(usize::from(q));
            }
            // Let the hub go idle (it arms notifications before it sleeps).
            std::thread::sleep(Duration::from_millis(30));
            let now = ram.snapshot();
            for (k, b) in now.iter().enumerate() {
                let k64 = k as u64;
                if *b != FILL
                    && !handed
                        .iter()
                        .any(|(a, l)| (*a..*a + *l as u64).contains(&k64))
                {
                    panic!(
                        "queues {mask:#05b} configured (EVENT_IDX {event_idx}): the device wrote \
                         guest-physical {k:#x}, which the driver never handed it"
                    );
                }
            }
            drop(h);
            wait_detached(&vc, 0);
        }
    }
    served(&vc, 0);
}

// ---- class 4: a driver that breaks its own ring

/// Rings whose available index jumps (forward past the queue size, backwards)
/// cost the hub no CPU while they stay broken, are reported once and in the
/// register file, and are served again once the driver re-initialises them.
#[test]
fn a_broken_ring_costs_nothing_until_the_driver_resets_it() {
    let vc = VirtualCluster::start(ClusterConfig::new(2));
    let gpa = 0x1000_0000;
    let ram = GuestRam::new(MIB, gpa, Backing::Sealable).unwrap();
    let mut h = attach(&vc, 0, &ram);
    let mut rings: Vec<SplitRing> = (0..3u16)
        .map(|q| SplitRing::at(gpa + u64::from(q) * 0x4000, 16))
        .collect();
    for (q, r) in rings.iter().enumerate() {
        h.setup_queue(q, r, &ram).unwrap();
    }
    for k in 0..4 {
        rings[usize::from(EVENT_QUEUE)].post(&ram, &[(gpa + 0x20000 + 32 * k, 32, true)]);
    }
    h.kick(usize::from(EVENT_QUEUE));
    let hub = vc.cluster.hub_thread_id().expect("the hub runs");

    // Break all three: forward by more than the size, and backwards.
    let ev = rings[usize::from(EVENT_QUEUE)].avail_idx();
    rings[usize::from(TX_QUEUE)].set_avail_idx(&ram, 17);
    rings[usize::from(CTRL_QUEUE)].set_avail_idx(&ram, u16::MAX);
    rings[usize::from(EVENT_QUEUE)].set_avail_idx(&ram, ev.wrapping_add(100));
    for q in 0..3 {
        h.kick(q);
    }
    // Events make the device look at its event ring.
    vc.cluster
        .apply_fault(FaultCommand::Crash(NodeId(1)))
        .unwrap();
    vc.cluster
        .apply_fault(FaultCommand::Rejoin(NodeId(1)))
        .unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let regs = h.registers().unwrap();
    assert_eq!(
        regs.broken_queues & 0b110,
        0b110,
        "control and event queues reported broken: {:#b}",
        regs.broken_queues
    );
    let errors = vc.cluster.snapshot().nodes[0].counters.protection_errors;

    // The guest keeps kicking its broken queues for a second.
    let cpu0 = thread_cpu_time(hub);
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(1) {
        for q in 0..3 {
            h.kick(q);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let spent = thread_cpu_time(hub) - cpu0;
    println!(
        "hub CPU while three rings stayed broken: {spent:?} in {:?}",
        t0.elapsed()
    );
    assert!(
        spent < Duration::from_millis(200),
        "the hub spent {spent:?} of CPU on broken rings"
    );
    // Said once, not once per kick.
    assert_eq!(
        vc.cluster.snapshot().nodes[0].counters.protection_errors,
        errors
    );

    // The driver resets the control queue: stop, re-initialise, serve.
    h.stop_queue(usize::from(CTRL_QUEUE)).unwrap();
    let ctrl = &mut rings[usize::from(CTRL_QUEUE)];
    ctrl.reset(&ram);
    h.setup_queue(usize::from(CTRL_QUEUE), ctrl, &ram).unwrap();
    status_round_trip(&h, ctrl, &ram, gpa + 0x30000);
    assert_eq!(h.registers().unwrap().broken_queues & 0b10, 0);
    drop(h);
    wait_detached(&vc, 0);
    served(&vc, 0);
}

// ---- descriptors that would block the backend's threads

/// Kick and call descriptors come from the frontend: one blocking eventfd as
/// the kick of every queue, a pipe holding less than a kick, a full pipe and
/// a saturated blocking eventfd as calls. None of them blocks a thread of the
/// backend: the attacker's own connection can still be stopped and torn
/// down, the node is served again, and the other node never waited.
#[test]
fn descriptors_that_would_block_never_block_the_backend() {
    let vc = VirtualCluster::start(ClusterConfig::new(3));
    let victim = Victim::start(&vc.socket(1));
    let (mut h, ram, mut rings) = configured(&vc);
    // One blocking eventfd kicks all three queues: reading it for the first
    // queue empties it, and a blocking read for the next never returned.
    let shared = vmm_sys_util::eventfd::EventFd::new(0).unwrap();
    for q in 0..3 {
        h.set_fd(q, shared.as_raw_fd(), true).unwrap();
    }
    shared.write(1).unwrap();
    // A saturated blocking eventfd as the control queue's call, a full pipe
    // as the event queue's.
    let saturated = vmm_sys_util::eventfd::EventFd::new(0).unwrap();
    saturated.write(u64::MAX - 1).unwrap();
    h.set_fd(1, saturated.as_raw_fd(), false).unwrap();
    let (r, w) = pipe();
    // SAFETY: O_NONBLOCK only while filling the pipe; `w` is ours.
    unsafe { libc::fcntl(w.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
    while nix_write(&w, &[0u8; 4096]) > 0 {}
    // SAFETY: back to blocking, as the frontend hands it over.
    unsafe { libc::fcntl(w.as_raw_fd(), libc::F_SETFL, 0) };
    h.set_fd(2, w.as_raw_fd(), false).unwrap();
    // The device answers requests and raises events: it signals both calls.
    let (req, len, resp) = write_request(&ram, GPA + 0x30000, &CtrlRequest::GetStatus);
    let ctrl = &mut rings[usize::from(CTRL_QUEUE)];
    ctrl.post(&ram, &[(req, len, false), (resp, 16, true)]);
    h.kick(1);
    shared.write(1).unwrap();
    ctrl.wait_used(&ram, 1, WAIT);
    for k in 0..4 {
        rings[usize::from(EVENT_QUEUE)].post(&ram, &[(GPA + 0x20000 + 32 * k, 32, true)]);
    }
    shared.write(1).unwrap();
    vc.cluster
        .apply_fault(FaultCommand::Crash(NodeId(2)))
        .unwrap();
    vc.cluster
        .apply_fault(FaultCommand::Rejoin(NodeId(2)))
        .unwrap();
    // A pipe holding three bytes as a kick: a blocking 8-byte read waited for more.
    let (kr, kw) = pipe();
    nix_write(&kw, b"abc");
    h.set_fd(0, kr.as_raw_fd(), true).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    // Stopping the rings needs each vring's lock: a worker blocked in a read
    // held it for good.
    for q in 0..3 {
        h.stop_queue(q).expect("the ring stops");
    }
    drop(h);
    wait_detached(&vc, 0);
    served(&vc, 0);
    victim.wait_progress(WAIT);
    drop((r, kw));
    report("descriptors that would block", &victim.finish().all());
}

fn pipe() -> (std::fs::File, std::fs::File) {
    use std::os::fd::FromRawFd;
    let mut fds = [0; 2];
    // SAFETY: pipe writes two fresh descriptors into `fds`.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: both are fresh and owned by nothing else.
    unsafe {
        (
            std::fs::File::from_raw_fd(fds[0]),
            std::fs::File::from_raw_fd(fds[1]),
        )
    }
}

fn nix_write(f: &std::fs::File, data: &[u8]) -> isize {
    // SAFETY: writes from a live slice to a descriptor `f` holds open.
    unsafe { libc::write(f.as_raw_fd(), data.as_ptr().cast(), data.len()) }
}

// ---- class 5: nothing waits on a stalled hub

/// Stalls are bounded: a stall longer than a minute is refused, by the fault
/// syntax and by the hub.
#[test]
fn stalls_are_bounded() {
    let e = "stall 1000000000s".parse::<FaultCommand>().unwrap_err();
    assert!(e.to_string().contains("60"), "{e}");
    let vc = VirtualCluster::start(ClusterConfig::new(2));
    let e = vc
        .cluster
        .apply_fault(FaultCommand::StallHub {
            duration: Nanos(1_000_000_000 * 1_000_000_000),
        })
        .unwrap_err();
    assert!(e.to_string().contains("60"), "{e}");
    assert_eq!(vc.cluster.fault_status().stalled_until, Nanos(0));
}

/// While the hub is stalled and a store waits for it, the statistics, the
/// fault status and other nodes' register reads answer at once.
#[test]
fn stats_faults_and_registers_answer_during_a_stall() {
    let vc = VirtualCluster::start(ClusterConfig::new(3));
    let (mut g0, mut g1, mut g2) = (vc.adapter(0), vc.adapter(1), vc.adapter(2));
    g0.set_pct(3, 1, PctEntry::transmit_broadcast().to_bits(), &[])
        .unwrap();
    let rx = g1.map_receive(3, 1, PctEntry::receive().to_bits()).unwrap();
    vc.cluster
        .apply_fault(FaultCommand::StallHub {
            duration: Nanos(3_000_000_000),
        })
        .unwrap();
    let sender = std::thread::spawn(move || {
        // Posted: the store returns at once and waits in the hub.
        g0.store(3 * 8192, b"stalled!").unwrap();
        g0.flush().unwrap();
        g0
    });
    std::thread::sleep(Duration::from_millis(200));
    // Far below the 3 s stall that a call waiting on the hub would share,
    // and far above what a loaded 2-core CI host can take from a thread.
    let prompt = Duration::from_secs(1);
    for _ in 0..5 {
        let t = Instant::now();
        vc.cluster.snapshot();
        assert!(t.elapsed() < prompt, "snapshot took {:?}", t.elapsed());
        let t = Instant::now();
        assert!(vc.cluster.fault_status().stalled_until > Nanos(0));
        assert!(t.elapsed() < prompt, "fault_status took {:?}", t.elapsed());
        let t = Instant::now();
        g2.registers().unwrap();
        assert!(
            t.elapsed() < prompt,
            "node 2's register read took {:?}",
            t.elapsed()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    sender.join().unwrap();
    rx.wait_for(0, b"stalled!", WAIT).unwrap();
}

// ---- class 7: socket paths

#[test]
fn socket_paths_are_never_taken_from_anyone() {
    let dir = tempfile::tempdir().unwrap();
    let start = || Cluster::start(ClusterOptions::new(ClusterConfig::new(2), dir.path()));
    // A regular file where a socket goes: refused, left as it was.
    let file = dir.path().join("node1.sock");
    std::fs::write(&file, b"keep me").unwrap();
    let e = start().err().expect("refused");
    assert!(matches!(e, DeviceError::NotASocket { .. }), "{e}");
    assert!(e.to_string().contains("node1.sock"), "{e}");
    assert_eq!(std::fs::read(&file).unwrap(), b"keep me");
    std::fs::remove_file(&file).unwrap();
    // A directory: the same.
    std::fs::create_dir(&file).unwrap();
    let e = start().err().expect("refused");
    assert!(matches!(e, DeviceError::NotASocket { .. }), "{e}");
    std::fs::remove_dir(&file).unwrap();
    // A stale socket (its server died) is replaced.
    drop(UnixListener::bind(&file).unwrap());
    let first = start().expect("stale sockets are replaced");
    // A second backend on a live directory is refused, naming the first, and
    // the first keeps its sockets.
    let e = start().err().expect("refused");
    assert!(matches!(e, DeviceError::InUse { .. }), "{e}");
    assert!(
        e.to_string()
            .contains(&format!("pid {}", std::process::id())),
        "{e}"
    );
    assert!(UnixStream::connect(dir.path().join("node0.sock")).is_ok());
    assert!(UnixStream::connect(dir.path().join("node1.sock")).is_ok());
    // A live socket from something else is not taken over either.
    first.shutdown();
    let other = UnixListener::bind(dir.path().join("node0.sock")).unwrap();
    let e = start().err().expect("refused");
    assert!(matches!(e, DeviceError::SocketLive { .. }), "{e}");
    drop(other);
    start().expect("free again").shutdown();
}

// ---- the attacker, every class in turn, while others keep working

const GPA: u64 = 0x1000_0000;

/// A hostile connection on node 0 with honest, sealable RAM and all three
/// queues configured (16 entries each, at GPA + q * 16 KiB).
fn configured(vc: &VirtualCluster) -> (Hostile, GuestRam, Vec<SplitRing>) {
    let ram = GuestRam::new(MIB, GPA, Backing::Sealable).unwrap();
    let mut h = attach(vc, 0, &ram);
    let rings: Vec<SplitRing> = (0..3u16)
        .map(|q| SplitRing::at(GPA + u64::from(q) * 0x4000, 16))
        .collect();
    for (q, r) in rings.iter().enumerate() {
        h.setup_queue(q, r, &ram).unwrap();
    }
    (h, ram, rings)
}

fn lying_table(vc: &VirtualCluster) {
    let ram = GuestRam::new(MIB, GPA, Backing::Sealable).unwrap();
    let mut h = Hostile::connect(&vc.socket(0)).unwrap();
    h.handshake(true).unwrap();
    assert!(h
        .set_mem_table(&[ram.region_claiming(4 * MIB as u64, 0)])
        .is_err());
    let past = ram.host_addr(GPA) + 3 * MIB as u64;
    let _ = h.setup_queue_at(1, 16, [past, past + 0x1000, past + 0x2000]);
    h.kick(1);
}

fn shrinking_memory(vc: &VirtualCluster) {
    let ram = GuestRam::new(MIB, GPA, Backing::Unsealable).unwrap();
    let mut h = Hostile::connect(&vc.socket(0)).unwrap();
    h.handshake(true).unwrap();
    let accepted = h.set_mem_table(&[ram.region()]).is_ok();
    ram.set_file_len(0).unwrap();
    let _ = h.setup_queue_at(
        1,
        16,
        [
            ram.host_addr(GPA),
            ram.host_addr(GPA) + 0x1000,
            ram.host_addr(GPA) + 0x2000,
        ],
    );
    h.kick(1);
    assert!(!accepted, "memory that can shrink was accepted");
}

fn rings_across_the_end_of_ram(vc: &VirtualCluster) {
    let ram = GuestRam::new(MIB, GPA, Backing::Sealable).unwrap();
    let mut h = attach(vc, 0, &ram);
    // A 1024-entry descriptor table starting 64 bytes before the end of RAM.
    let end = GPA + MIB as u64;
    let ring = SplitRing::with_rings(1024, end - 64, GPA, GPA + 0x4000);
    h.setup_queue(1, &ring, &ram).unwrap();
    h.kick(1);
    // Nor an available ring or used ring hanging off the end.
    let ring = SplitRing::with_rings(1024, GPA, end - 16, GPA + 0x8000);
    h.setup_queue(2, &ring, &ram).unwrap();
    h.kick(2);
    let ring = SplitRing::with_rings(1024, GPA + 0x10000, GPA + 0x20000, end - 64);
    h.setup_queue(0, &ring, &ram).unwrap();
    h.kick(0);
    vc.cluster
        .apply_fault(FaultCommand::Crash(NodeId(2)))
        .unwrap();
    vc.cluster
        .apply_fault(FaultCommand::Rejoin(NodeId(2)))
        .unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let b = h.registers().unwrap().broken_queues;
    assert_eq!(
        b & 0b110,
        0b110,
        "rings outside RAM must break their queue: {b:#b}"
    );
}

fn rings_over_the_status_page(vc: &VirtualCluster) {
    // The driver names its own event used ring as its status page: the device
    // writes both, in the attacker's own memory only.
    let (mut h, ram, mut rings) = configured(vc);
    let sp = rings[usize::from(EVENT_QUEUE)].used;
    let (req, len, resp) =
        write_request(&ram, GPA + 0x30000, &CtrlRequest::SetStatusPage { gpa: sp });
    let ctrl = &mut rings[usize::from(CTRL_QUEUE)];
    ctrl.post(&ram, &[(req, len, false), (resp, 16, true)]);
    h.kick(1);
    ctrl.wait_used(&ram, 1, WAIT);
    for k in 0..8 {
        rings[usize::from(EVENT_QUEUE)].post(&ram, &[(GPA + 0x20000 + 32 * k, 32, true)]);
    }
    h.kick(2);
    vc.cluster
        .apply_fault(FaultCommand::Crash(NodeId(2)))
        .unwrap();
    vc.cluster
        .apply_fault(FaultCommand::Rejoin(NodeId(2)))
        .unwrap();
    std::thread::sleep(Duration::from_millis(20));
    h.registers().unwrap();
}

fn unaligned_and_unmapped_rings(vc: &VirtualCluster) {
    let ram = GuestRam::new(MIB, GPA, Backing::Sealable).unwrap();
    // An odd used ring: refused with the request (the connection ends).
    let mut h = attach(vc, 0, &ram);
    let a = ram.host_addr(GPA);
    assert!(h
        .setup_queue_at(1, 16, [a, a + 0x1000, a + 0x2001])
        .is_err());
    drop(h);
    wait_detached(vc, 0);
    // Ring addresses in no region of the table: refused the same way.
    let mut h = attach(vc, 0, &ram);
    assert!(h
        .setup_queue_at(1, 16, [a + 2 * MIB as u64, a, a + 0x2000])
        .is_err());
}

fn indices_that_jump(vc: &VirtualCluster) {
    let (mut h, ram, mut rings) = configured(vc);
    rings[0].set_avail_idx(&ram, 17);
    rings[1].set_avail_idx(&ram, u16::MAX);
    rings[2].set_avail_idx(&ram, 1000);
    for _ in 0..100 {
        for q in 0..3 {
            h.kick(q);
        }
    }
    vc.cluster
        .apply_fault(FaultCommand::Crash(NodeId(2)))
        .unwrap();
    vc.cluster
        .apply_fault(FaultCommand::Rejoin(NodeId(2)))
        .unwrap();
    let start = Instant::now();
    while h.registers().unwrap().broken_queues & 0b110 != 0b110 {
        assert!(
            start.elapsed() < WAIT,
            "the broken queues were never noticed"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    // The index moves back within bounds: a broken queue stays broken.
    rings[1].set_avail_idx(&ram, 1);
    h.kick(1);
    std::thread::sleep(Duration::from_millis(10));
    assert_eq!(rings[1].used_idx(&ram), 0);
}

fn descriptor_loops_and_stray_heads(vc: &VirtualCluster) {
    let (h, ram, mut rings) = configured(vc);
    let (req, len, resp) = write_request(&ram, GPA + 0x30000, &CtrlRequest::GetStatus);
    // Control: a chain whose second descriptor points back to itself.
    let ctrl = &mut rings[usize::from(CTRL_QUEUE)];
    ctrl.write_desc(&ram, 0, req, len, 1, 1);
    ctrl.write_desc(&ram, 1, resp, 16, 1 | 2, 1);
    ctrl.make_available(&ram, 0);
    // An indirect table that names itself as an indirect table.
    let table = GPA + 0x31000;
    ram.write(table, &table.to_le_bytes());
    ram.write(table + 8, &16u32.to_le_bytes());
    ram.write(table + 12, &4u16.to_le_bytes());
    ctrl.write_desc(&ram, 2, table, 16, 4, 0);
    ctrl.make_available(&ram, 2);
    h.kick(1);
    ctrl.wait_used(&ram, 2, WAIT);
    // Transmit: a ring of descriptors each pointing to the next, all around.
    let tx = &mut rings[usize::from(TX_QUEUE)];
    for i in 0..16 {
        tx.write_desc(&ram, i, GPA + 0x32000, 64, 1, (i + 1) % 16);
    }
    tx.make_available(&ram, 0);
    h.kick(0);
    // The transmit virtqueue is only a doorbell: the loop is never walked.
    std::thread::sleep(Duration::from_millis(10));
    assert!(
        tx.reap(&ram).is_empty(),
        "the transmit doorbell completed a chain"
    );
    // A head outside the queue breaks it.
    let ctrl = &mut rings[usize::from(CTRL_QUEUE)];
    ctrl.make_available(&ram, 40_000);
    h.kick(1);
    std::thread::sleep(Duration::from_millis(10));
}

fn queues_used_before_set_up(vc: &VirtualCluster) {
    let ram = GuestRam::new(MIB, GPA, Backing::Sealable).unwrap();
    let h = Hostile::connect(&vc.socket(0)).unwrap();
    // Before features, owner or a memory table: kick and call descriptors,
    // enables, ring stops, sizes.
    let kick = vmm_sys_util::eventfd::EventFd::new(0).unwrap();
    for q in 0..3 {
        let _ = h.fe.set_vring_kick(q, &kick);
        let _ = h.fe.set_vring_call(q, &kick);
        let _ = h.fe.get_vring_base(q);
    }
    kick.write(1).unwrap();
    drop(h);
    wait_detached(vc, 0);
    let mut h = Hostile::connect(&vc.socket(0)).unwrap();
    h.handshake(true).unwrap();
    h.set_mem_table(&[ram.region()]).unwrap();
    // Kick descriptors but no ring addresses; enables without anything.
    for q in 0..3 {
        h.fe.set_vring_kick(q, &kick).unwrap();
        h.fe.set_vring_enable(q, true).unwrap();
    }
    kick.write(1).unwrap();
    for q in 0..3 {
        h.fe.get_vring_base(q).unwrap();
    }
    vc.cluster
        .apply_fault(FaultCommand::Crash(NodeId(2)))
        .unwrap();
    vc.cluster
        .apply_fault(FaultCommand::Rejoin(NodeId(2)))
        .unwrap();
    std::thread::sleep(Duration::from_millis(10));
}

fn junk_messages(vc: &VirtualCluster) {
    let ram = GuestRam::new(MIB, GPA, Backing::Sealable).unwrap();
    let bodies: [(u32, Vec<u8>, bool); 5] = [
        // A memory table with no regions.
        (5, vec![0; 8], false),
        // Two regions, one descriptor.
        (
            5,
            [2u32.to_le_bytes(), [0; 4]]
                .concat()
                .into_iter()
                .chain(vec![0x11; 64])
                .collect(),
            true,
        ),
        // A request nobody knows.
        (0xdead, vec![1, 2, 3], false),
        // A register write far past the register file.
        (
            25,
            [4000u32, 8, 0]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .chain([0xff; 8])
                .collect(),
            false,
        ),
        // A header announcing more than it sends.
        (2, vec![0; 4], false),
    ];
    for (code, body, with_fd) in bodies {
        let s = UnixStream::connect(vc.socket(0)).unwrap();
        let fds = if with_fd { vec![ram.fd()] } else { vec![] };
        let _ = raw_message(&s, code, &body, &fds);
        drop(s);
        wait_detached(vc, 0);
    }
    // Register writes through a proper connection: refused and counted.
    let mut h = attach(vc, 0, &ram);
    for off in [0u32, 0x50, 127] {
        let _ = h.fe.set_config(
            off,
            vhost::vhost_user::message::VhostUserConfigFlags::WRITABLE,
            &[0xff; 4],
        );
    }
    h.registers().unwrap();
}

fn reconnect_storm(vc: &VirtualCluster) {
    for k in 0..300 {
        let s = UnixStream::connect(vc.socket(0)).unwrap();
        if k % 2 == 0 {
            let _ = raw_message(&s, 1, &[], &[]);
        }
    }
}

fn flooding_guest(vc: &VirtualCluster) {
    let mut g = vc.adapter(0);
    g.set_pct(20, 1, PctEntry::transmit_broadcast().to_bits(), &[])
        .unwrap();
    let data = vec![0xeeu8; 60_000];
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_millis(700) {
        let _ = g
            .fifo()
            .post_all(&[(20 * 8192, &data[..8192]), (0, &data[..8])]);
        let _ = g.ctrl(&CtrlRequest::SetPct {
            first_page: 1 << 30,
            count: 1,
            entry: 0,
            frames: vec![],
        });
    }
    let _ = g.flush();
}

fn new_table_while_queues_run(vc: &VirtualCluster) {
    let (h, ram, mut rings) = configured(vc);
    let other = GuestRam::new(MIB, GPA, Backing::Sealed).unwrap();
    // Swap the table for another file at the same addresses, then use the
    // rings (which now read the other file's zeros).
    h.set_mem_table(&[other.region()]).unwrap();
    rings[1].post(
        &ram,
        &[(GPA + 0x30000, 8, false), (GPA + 0x30800, 16, true)],
    );
    h.kick(1);
    std::thread::sleep(Duration::from_millis(10));
}

#[test]
fn hostile_frontends_do_not_disturb_the_other_nodes() {
    let vc = VirtualCluster::start(ClusterConfig::new(3));
    let victim = Victim::start(&vc.socket(1));
    type Attack = fn(&VirtualCluster);
    let attacks: [(&str, Attack); 13] = [
        ("a memory table that lies", lying_table),
        ("memory shrunk under the backend", shrinking_memory),
        ("rings across the end of RAM", rings_across_the_end_of_ram),
        ("a ring over the status page", rings_over_the_status_page),
        ("unaligned and unmapped rings", unaligned_and_unmapped_rings),
        ("available indices that jump", indices_that_jump),
        (
            "descriptor loops and stray heads",
            descriptor_loops_and_stray_heads,
        ),
        ("queues used before set-up", queues_used_before_set_up),
        ("junk messages", junk_messages),
        ("a reconnect storm", reconnect_storm),
        ("a flooding guest", flooding_guest),
        (
            "a new memory table under running queues",
            new_table_while_queues_run,
        ),
        ("a memory table that lies, again", lying_table),
    ];
    // A quiet second first, for comparison.
    std::thread::sleep(Duration::from_secs(1));
    let attacked_from = Instant::now();
    let mut phases = Vec::new();
    for (what, attack) in attacks {
        let t0 = Instant::now();
        attack(&vc);
        wait_detached(&vc, 0);
        served(&vc, 0);
        victim.wait_progress(WAIT);
        println!("{what}: survived ({:?})", t0.elapsed());
        phases.push((t0, what));
    }
    let until = Instant::now();
    let samples = victim.finish();
    report(
        "before the attacks",
        &samples.between(Instant::now() - Duration::from_secs(3600), attacked_from),
    );
    let r = samples.between(attacked_from, until);
    report("during the attacks", &r);
    if let Some(at) = r.max_at {
        let during = phases
            .iter()
            .rev()
            .find(|(t, _)| *t <= at)
            .map_or("?", |p| p.1);
        println!("the slowest round trip came during: {during}");
    }
    assert!(r.round_trips > 0);
}

// ---- fairness (issue 28): no guest can delay another
//
// A victim on node 1 keeps storing to itself (loopback) and asking for its
// status while an attacker on node 0 commits a whole lap of the largest FIFO
// at once, floods 64 KiB stores or ACK queries, re-registers its FIFO in a
// loop, or shrinks its memory table under bound frames. What is asserted is
// a count, not a time: the victim's rounds (a GET_STATUS and a store that
// came back) per lap the attacker commits. docs/device.md s.20 has the
// figures.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use firmware_model::abi::{fifo, FRAME_SIZE};
use integration::delivery::for_each_delivery;
use mc_driver::{Adapter, AdapterOptions, VhostUserOptions, VhostUserTransport};

/// The victim's rounds: (when it started, GET_STATUS round trip, store to
/// delivery).
type Rounds = Arc<Mutex<Vec<(Instant, Duration, Duration)>>>;

/// A well-behaved guest that counts its rounds and times each half.
struct FairVictim {
    stop: Arc<AtomicBool>,
    rounds: Arc<AtomicU64>,
    samples: Rounds,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FairVictim {
    fn start(socket: &std::path::Path) -> FairVictim {
        let t = VhostUserTransport::connect(socket, &VhostUserOptions::default()).unwrap();
        let mut a = Adapter::new(
            t,
            AdapterOptions {
                timeout: Duration::from_secs(60),
                ..Default::default()
            },
        )
        .unwrap();
        let entry = PctEntry::transmit_broadcast()
            .with_loopback()
            .with_receive()
            .to_bits();
        let rx = a.map_receive(9, 1, entry).unwrap();
        let (stop, rounds, samples) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicU64::new(0)),
            Rounds::default(),
        );
        let (s, r, l) = (stop.clone(), rounds.clone(), samples.clone());
        let thread = std::thread::spawn(move || {
            let mut k = 0u64;
            while !s.load(Ordering::Acquire) {
                k += 1;
                let t0 = Instant::now();
                a.get_status().expect("victim GET_STATUS");
                let t1 = Instant::now();
                let off = 8 * (k % 1024);
                a.store(9 * 8192 + off, &k.to_le_bytes())
                    .expect("victim store");
                rx.wait_for(
                    firmware_model::to_usize(off),
                    &k.to_le_bytes(),
                    Duration::from_secs(60),
                )
                .expect("victim store comes back");
                l.lock().unwrap().push((t0, t1 - t0, t1.elapsed()));
                r.store(k, Ordering::Release);
            }
        });
        let v = FairVictim {
            stop,
            rounds,
            samples,
            thread: Some(thread),
        };
        let t0 = Instant::now();
        while v.rounds() < 10 {
            assert!(t0.elapsed() < WAIT, "the victim does not start");
            std::thread::sleep(Duration::from_millis(1));
        }
        v
    }

    fn rounds(&self) -> u64 {
        self.rounds.load(Ordering::Acquire)
    }

    /// Median, p99 and max of GET_STATUS and of store to delivery, for the
    /// rounds that started in `[from, to)`.
    fn figures(&self, from: Instant, to: Instant) -> String {
        let s = self.samples.lock().unwrap();
        let pick = |f: fn(&(Instant, Duration, Duration)) -> Duration| {
            let mut v: Vec<Duration> = s
                .iter()
                .filter(|x| x.0 >= from && x.0 < to)
                .map(f)
                .collect();
            v.sort();
            // The sample `pct` per cent of the way up, rounded down.
            let at = |pct: usize| v.get(v.len().saturating_sub(1) * pct / 100).copied();
            format!(
                "median {:?}, p99 {:?}, max {:?}",
                at(50).unwrap_or_default(),
                at(99).unwrap_or_default(),
                v.last().copied().unwrap_or_default()
            )
        };
        format!(
            "GET_STATUS {}; store to delivery {}",
            pick(|x| x.1),
            pick(|x| x.2)
        )
    }
}

impl Drop for FairVictim {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            if let Err(p) = t.join() {
                if !std::thread::panicking() {
                    std::panic::resume_unwind(p);
                }
            }
        }
    }
}

const A_GPA: u64 = 0x2000_0000;
const A_RAM: usize = 24 * MIB;
/// The largest FIFO the device takes.
const A_SLOTS: u32 = fifo::MAX_SLOTS;
const A_FIFO: u64 = A_GPA + MIB as u64;
const A_REQ: u64 = A_GPA + 0x10000;
const A_FRAMES: u64 = A_GPA + 0x40000;
const A_PAGE: u32 = 20;
const A_ACK_PAGE: u32 = 30;

/// The attacker: a hostile frontend on node 0 with the largest FIFO.
struct Attacker {
    h: Hostile,
    ram: GuestRam,
    ctrl: SplitRing,
    /// Laps committed so far.
    laps: u64,
}

impl Attacker {
    fn start(vc: &VirtualCluster) -> Attacker {
        let ram = GuestRam::new(A_RAM, A_GPA, Backing::Sealable).unwrap();
        let mut h = attach(vc, 0, &ram);
        let rings: Vec<SplitRing> = (0..3u16)
            .map(|q| SplitRing::at(A_GPA + u64::from(q) * 0x4000, 16))
            .collect();
        for (q, r) in rings.iter().enumerate() {
            h.setup_queue(q, r, &ram).unwrap();
        }
        let mut a = Attacker {
            h,
            ram,
            ctrl: rings[usize::from(CTRL_QUEUE)].clone(),
            laps: 0,
        };
        let per_page = 8192 / u64::from(FRAME_SIZE);
        for (page, count, entry, frames) in [
            (A_PAGE, 8, PctEntry::transmit_broadcast(), vec![]),
            (
                A_ACK_PAGE,
                1,
                PctEntry::ack_page(),
                (0..per_page)
                    .map(|k| A_FRAMES + k * u64::from(FRAME_SIZE))
                    .collect(),
            ),
        ] {
            let r = a.ctrl(&CtrlRequest::SetPct {
                first_page: page,
                count,
                entry: entry.to_bits(),
                frames,
            });
            assert_eq!(r.status, 0, "{r:?}");
        }
        a.register();
        a
    }

    fn ctrl(&mut self, req: &CtrlRequest) -> CtrlResponse {
        let (q, len, resp) = write_request(&self.ram, A_REQ, req);
        self.ctrl
            .post(&self.ram, &[(q, len, false), (resp, 16, true)]);
        self.h.kick(usize::from(CTRL_QUEUE));
        self.ctrl.wait_used(&self.ram, 1, Duration::from_secs(60));
        response(&self.ram, resp)
    }

    fn register(&mut self) {
        let r = self.ctrl(&CtrlRequest::SetTxFifo {
            gpa: A_FIFO,
            slots: A_SLOTS,
        });
        assert_eq!(r.status, 0, "{r:?}");
        self.laps = 0;
    }

    /// Lay a lap out: `record(k)` is the k-th record's (address, length);
    /// records follow one another, with padding where one would wrap.
    fn lay_out(&self, record: impl Fn(u64) -> (u64, u32)) {
        let slots = u64::from(A_SLOTS);
        let slots_at = A_FIFO + fifo::slots_offset(A_SLOTS) as u64;
        let mut bytes = vec![0u8; fifo::SLOT_SIZE * A_SLOTS as usize];
        let (mut p, mut k) = (0u64, 0u64);
        while p < slots {
            let (addr, len) = record(k);
            let need = TxRecordHeader::slots(len);
            let at = usize::try_from(p).unwrap() * fifo::SLOT_SIZE;
            let h = if p + need > slots {
                TxRecordHeader::pad(slots - p)
            } else {
                TxRecordHeader {
                    addr,
                    len,
                    flags: 0,
                }
            };
            bytes[at..at + 16].copy_from_slice(&h.to_bytes());
            p += TxRecordHeader::slots(h.len);
            k += 1;
        }
        self.ram.write(slots_at, &bytes);
    }

    /// Commit the whole lap at once (every tag in one write) and wait until
    /// the device has taken all of it.
    fn commit_lap(&mut self) {
        let tag = u32::try_from(self.laps + 1).unwrap();
        let tags: Vec<u8> = (0..A_SLOTS).flat_map(|_| tag.to_le_bytes()).collect();
        self.ram.write(A_FIFO + fifo::HEADER_SIZE as u64, &tags);
        self.h.kick(usize::from(TX_QUEUE));
        self.laps += 1;
        let end = self.laps * u64::from(A_SLOTS);
        let t0 = Instant::now();
        loop {
            let b = self.ram.read(A_FIFO + fifo::header::CONSUMED as u64, 8);
            if u64::from_le_bytes(b.try_into().unwrap()) >= end {
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(120),
                "the lap is not taken"
            );
            self.h.kick(usize::from(TX_QUEUE));
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

/// The attacks, each as a layout of its laps (or something else per pass).
fn one_byte_stores(k: u64) -> (u64, u32) {
    // Never continuing one another, so nothing merges.
    (u64::from(A_PAGE) * 8192 + 8 * (k % 1024), 1)
}

fn large_stores(_: u64) -> (u64, u32) {
    (u64::from(A_PAGE) * 8192, abi::MAX_RECORD_DATA)
}

fn ack_queries(_: u64) -> (u64, u32) {
    (u64::from(A_ACK_PAGE) * 8192, 4)
}

/// Victim rounds per attacker pass, and the victim's figures, for each
/// attack in `mode`.
fn fairness_under(mode: firmware_model::DeliveryMode, laps: u64) -> Vec<(&'static str, u64)> {
    let vc = VirtualCluster::with_delivery(2, mode);
    let victim = FairVictim::start(&vc.socket(1));
    let quiet = Instant::now();
    std::thread::sleep(Duration::from_millis(300));
    println!("{mode}, quiet: {}", victim.figures(quiet, Instant::now()));
    let mut a = Attacker::start(&vc);
    let mut out = Vec::new();
    type Layout = fn(u64) -> (u64, u32);
    let attacks: [(&str, Layout); 3] = [
        ("a lap of one-byte stores", one_byte_stores),
        ("a lap of 64 KiB stores", large_stores),
        ("a lap of ACK queries", ack_queries),
    ];
    for (what, layout) in attacks {
        a.lay_out(layout);
        let t0 = Instant::now();
        let mut fewest = u64::MAX;
        let mut each = Vec::new();
        for _ in 0..laps {
            let before = victim.rounds();
            let l0 = Instant::now();
            a.commit_lap();
            each.push((victim.rounds() - before, l0.elapsed()));
            fewest = fewest.min(victim.rounds() - before);
        }
        println!("{mode}, {what}: rounds per lap {each:?}");
        println!(
            "{mode}, {what}: at least {fewest} victim rounds per lap ({:?} a lap); {}",
            t0.elapsed() / u32::try_from(laps).unwrap(),
            victim.figures(t0, Instant::now())
        );
        out.push((what, fewest));
    }
    // Re-registering the FIFO in a loop (each clears its 2 MiB of tags).
    let t0 = Instant::now();
    let before = victim.rounds();
    for _ in 0..200 {
        a.register();
    }
    println!(
        "{mode}, 200 FIFO registrations: {} victim rounds in {:?}; {}",
        victim.rounds() - before,
        t0.elapsed(),
        victim.figures(t0, Instant::now())
    );
    assert!(victim.rounds() > before, "the victim made no progress");
    drop(a);
    wait_detached(&vc, 0);
    out
}

/// A victim keeps working while the attacker commits whole laps of the
/// largest FIFO at once (one-byte stores, 64 KiB stores, ACK queries) and
/// re-registers its FIFO in a loop: it completes rounds during every lap, and
/// the figures (rounds per lap, GET_STATUS and store-to-delivery median, p99
/// and max) are printed for docs/device.md s.20. The bound on the hub's side
/// is checked exactly, without timing, by mc-device's
/// `a_full_ring_takes_one_bounded_turn_per_pass` and the model's arbitration
/// properties; here a count per lap is all a loaded host allows (on this
/// 2-core machine at a load of 15-27 the code before the fix gave the victim
/// 6-935 rounds per lap in a debug build, the fix 26-3,396).
#[test]
fn a_lap_committed_at_once_does_not_hold_the_others_up() {
    for_each_delivery(&[7], |mode| {
        for (what, fewest) in fairness_under(mode, 3) {
            assert!(
                fewest >= 1,
                "{mode}, {what}: the victim made no round in a lap"
            );
        }
    });
}
