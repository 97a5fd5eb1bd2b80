//! Every fault kind, with a fixed seed, seen from guests on the real backend;
//! and a Cashmere application that survives 1% corruption and a link flap.

use std::time::{Duration, Instant};

use firmware_model::abi::Status;
use firmware_model::{
    AdapterErrorStatus, ClusterConfig, FaultCommand, FaultScope, NodeId, PacketFault, PctEntry,
    Rate,
};
use integration::delivery::for_each_delivery;
use integration::{mc_host_run, VirtualCluster};
use mc_driver::{Adapter, ReceiveFrames, VhostUserTransport};

const PAGE: u64 = 8192;

fn config(delivery: firmware_model::DeliveryMode) -> ClusterConfig {
    ClusterConfig {
        fault_seed: 42,
        delivery,
        ..ClusterConfig::new(3)
    }
}

#[test]
fn dropped_packets_vanish_silently() {
    for_each_delivery(&[1], |mode| {
        let vc = VirtualCluster::start(config(mode));
        let (mut g0, mut g1) = (vc.adapter(0), vc.adapter(1));
        g0.set_pct(1, 1, PctEntry::transmit_broadcast().to_bits(), &[])
            .unwrap();
        let rx = g1.map_receive(1, 1, PctEntry::receive().to_bits()).unwrap();
        let drop_all = FaultCommand::Packets {
            fault: PacketFault::Drop,
            scope: FaultScope::Link {
                from: NodeId(0),
                to: NodeId(1),
            },
            rate: Rate::ALWAYS,
        };
        vc.cluster.apply_fault(drop_all).unwrap();
        g0.store(PAGE, &[9u8; 64]).unwrap();
        g0.flush().unwrap();
        assert_eq!(rx.read_vec(0, 64).unwrap(), vec![0u8; 64]);
        let s = vc.cluster.snapshot();
        assert_eq!(
            (s.nodes[1].counters.drops, s.cluster_error_count),
            (2, 0),
            "drops are not errors"
        );
    });
}

/// Node 0 broadcasts page 1, which node 1 receives, and checks errors
/// through its ACK page (page 2).
struct AckRig {
    vc: VirtualCluster,
    g0: Adapter<VhostUserTransport>,
    ack: ReceiveFrames,
    rx: ReceiveFrames,
    _g1: Adapter<VhostUserTransport>,
}

impl AckRig {
    fn start(mode: firmware_model::DeliveryMode) -> AckRig {
        let vc = VirtualCluster::start(config(mode));
        let (mut g0, mut g1) = (vc.adapter(0), vc.adapter(1));
        g0.set_pct(1, 1, PctEntry::transmit_broadcast().to_bits(), &[])
            .unwrap();
        let ack = g0
            .map_receive(2, 1, PctEntry::ack_page().to_bits())
            .unwrap();
        let rx = g1.map_receive(1, 1, PctEntry::receive().to_bits()).unwrap();
        AckRig {
            vc,
            g0,
            ack,
            rx,
            _g1: g1,
        }
    }

    fn fault(&self, f: FaultCommand) {
        self.vc.cluster.apply_fault(f).unwrap();
    }

    /// Post an ACK query (ordered after every store before it) and return
    /// every adapter's error status from its answer.
    fn check(&mut self) -> Vec<AdapterErrorStatus> {
        self.ack.region().fill(0, 64, 0xff).unwrap();
        self.g0.store(2 * PAGE, &[1]).unwrap();
        let start = Instant::now();
        while self.ack.load_u64(0).unwrap() == u64::MAX {
            assert!(start.elapsed() < Duration::from_secs(5), "no ACK answer");
            std::thread::yield_now();
        }
        (0..3)
            .map(|i| {
                AdapterErrorStatus::from_word(u32::from_le_bytes(
                    self.ack.read_vec(4 * i, 4).unwrap().try_into().unwrap(),
                ))
            })
            .collect()
    }
}

#[test]
fn a_link_down_loses_traffic_and_shows_in_the_ack_check() {
    for_each_delivery(&[2], |mode| {
        let mut r = AckRig::start(mode);
        r.fault(FaultCommand::LinkDown(NodeId(1)));
        // Posted: the store, then the ACK query, whose answer proves the store
        // was delivered or lost everywhere.
        r.g0.store(PAGE, b"lost").unwrap();
        let word = r.check()[1];
        // Going down, and the store lost to it: two errors at node 1.
        assert!(!word.link_up && word.network_errors == 2, "{word:?}");
        assert_eq!(r.rx.read_vec(0, 4).unwrap(), vec![0u8; 4]);
        r.fault(FaultCommand::LinkUp(NodeId(1)));
        r.g0.store(PAGE, b"sent").unwrap();
        r.rx.wait_for(0, b"sent", Duration::from_secs(5)).unwrap();
    });
}

/// Seed 004's "save the count, write, check" across a link flap: the count
/// is saved while the link is already down (its going down counted), the
/// store is lost to it, and the link is back by the check. The check must
/// still see the loss, whether the writer's link or a receiver's was down.
#[test]
fn a_store_lost_to_a_link_that_came_back_shows_in_the_ack_check() {
    for down in [0u8, 1] {
        for_each_delivery(&[4], |mode| {
            let mut r = AckRig::start(mode);
            r.fault(FaultCommand::LinkDown(NodeId(down)));
            let saved = r.vc.cluster.snapshot().cluster_error_count;
            r.g0.store(PAGE, b"lost").unwrap();
            r.g0.flush().unwrap();
            r.fault(FaultCommand::LinkUp(NodeId(down)));
            let word = r.check()[usize::from(down)];
            assert!(word.link_up, "node {down}: {word:?}");
            assert_eq!(r.rx.read_vec(0, 4).unwrap(), vec![0u8; 4]);
            let now = r.vc.cluster.snapshot().cluster_error_count;
            assert!(
                now > saved && word.network_errors >= 2,
                "node {down}'s link: the lost store left the count at {now} (saved {saved}), {word:?}"
            );
        });
    }
}

#[test]
fn a_crashed_adapter_is_offline_until_it_rejoins() {
    for_each_delivery(&[3], |mode| {
        let vc = VirtualCluster::start(config(mode));
        let (mut g0, mut g2) = (vc.adapter(0), vc.adapter(2));
        let events0 = g0.set_status_page().unwrap();
        g2.set_pct(1, 1, PctEntry::transmit_broadcast().to_bits(), &[])
            .unwrap();
        vc.cluster
            .apply_fault(FaultCommand::Crash(NodeId(2)))
            .unwrap();
        g2.store(PAGE, &[1u8; 8]).unwrap();
        assert_eq!(g2.flush().unwrap_err().status(), Some(Status::Offline));
        let st = events0.read().unwrap();
        assert_eq!((st.membership_epoch, st.members), (2, 0b011));
        vc.cluster
            .apply_fault(FaultCommand::Rejoin(NodeId(2)))
            .unwrap();
        // A fresh adapter: its PCT is empty, so the old mapping is gone.
        g2.store(PAGE, &[1u8; 8]).unwrap();
        assert_eq!(
            g2.flush().unwrap_err().status(),
            Some(Status::TransmitDisabled)
        );
        let st = events0.read().unwrap();
        assert_eq!((st.membership_epoch, st.members), (3, 0b111));
    });
}

#[test]
fn a_hub_stall_holds_every_packet() {
    for_each_delivery(&[4], |mode| {
        let vc = VirtualCluster::start(config(mode));
        let (mut g0, mut g1) = (vc.adapter(0), vc.adapter(1));
        g0.set_pct(1, 1, PctEntry::transmit_broadcast().to_bits(), &[])
            .unwrap();
        let rx = g1.map_receive(1, 1, PctEntry::receive().to_bits()).unwrap();
        let t0 = Instant::now();
        vc.cluster
            .apply_fault(FaultCommand::StallHub {
                duration: firmware_model::Nanos::from_millis(80),
            })
            .unwrap();
        g0.store(PAGE, b"late").unwrap();
        rx.wait_for(0, b"late", Duration::from_secs(5)).unwrap();
        // A lower bound: nothing crosses the hub before the stall ends.
        assert!(
            t0.elapsed() >= Duration::from_millis(80),
            "delivered {:?} after an 80 ms stall began",
            t0.elapsed()
        );
    });
}

/// Home migration under the example plan's delays (corruption retried by
/// the API, a link flap): requests time out and are asked again, and a
/// migration asked again must get the same answer, or a page ends with two
/// homes and updates are lost (Water-Nsquared under CSM-None-Mg failed 4
/// runs in 6 before migration requests were asked again in place).
#[test]
fn home_migration_survives_the_fault_plans_delays() {
    let plan = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/sor-fault-plan.toml"
    );
    let variants: &[&str] = if std::env::var("MC_TEST_EXHAUSTIVE").is_ok_and(|v| v == "1") {
        &["none-mg", "ms-mg", "adb"]
    } else {
        &["none-mg"]
    };
    for variant in variants {
        for _ in 0..2 {
            let (ok, text) = mc_host_run(
                4,
                300,
                &["--stats", "--fault-plan", plan],
                &[
                    "mc-guest",
                    "--reliable",
                    "csm",
                    "water-nsquared",
                    "--variant",
                    variant,
                    "--threads",
                    "2",
                ],
            );
            assert!(ok, "{variant}: {text}");
            assert_eq!(text.matches("verified").count(), 4, "{variant}: {text}");
        }
    }
}

/// The proof: SOR on 4 virtual nodes under the example plan (1%
/// corruption and a link flap), with every store checked and retried, verifies
/// on every node; the run really saw errors.
#[test]
fn cashmere_sor_survives_corruption_and_a_link_flap() {
    let plan = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/sor-fault-plan.toml"
    );
    let (ok, text) = mc_host_run(
        4,
        300,
        &["--stats", "--fault-plan", plan],
        &["mc-guest", "--reliable", "csm", "sor"],
    );
    assert!(ok, "{text}");
    for n in 0..4 {
        assert!(text.contains(&format!("[node{n}] csm sor")) && text.lines().any(|l| l.starts_with(&format!("[node{n}] csm sor")) && l.contains("verified")), "{text}");
    }
    let errors: u64 = text
        .lines()
        .find_map(|l| l.split("cluster error count ").nth(1))
        .and_then(|r| r.split(';').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    assert!(errors > 0, "the plan injected no errors?\n{text}");
}

/// The same plan without `--reliable`: nothing retransmits, so the run
/// cannot verify; it must end within seconds (not after 30-second timeouts)
/// with every failing node naming the cause and the remedy.
#[test]
fn cashmere_sor_without_reliable_under_corruption_fails_fast_naming_the_cause() {
    let plan = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/sor-fault-plan.toml"
    );
    let start = Instant::now();
    let (ok, text) = mc_host_run(
        4,
        120,
        &["--fault-plan", plan],
        &["mc-guest", "csm", "sor", "--iters", "400"],
    );
    assert!(
        !ok,
        "verified without retransmission under 1% corruption?\n{text}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(25),
        "took {:?} to fail:\n{text}",
        start.elapsed()
    );
    assert!(!text.contains("timed out"), "{text}");
    // The nodes that stop on their own error name the loss; the others may
    // stop because those left.
    let naming = text
        .lines()
        .filter(|l| l.contains("mc-guest: error:") && l.contains("--reliable"))
        .count();
    assert!(naming >= 1, "no node named the cause:\n{text}");
    for l in text.lines().filter(|l| l.contains("mc-guest: error:")) {
        assert!(
            l.contains("--reliable") || l.contains("failed or left the cluster"),
            "an error that names neither the loss nor a node that left: {l}\n{text}"
        );
    }
}

/// A node's adapter crashes in the middle of a Cashmere run: the survivors see
/// the membership change and stop with an error naming it instead of hanging.
#[test]
fn cashmere_stops_naming_a_crashed_node() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("crash.toml");
    std::fs::write(
        &plan,
        "seed = 1\n[[fault]]\nat = \"300ms\"\ndo = \"crash 2\"\n",
    )
    .unwrap();
    let start = Instant::now();
    let plan = plan.to_str().expect("a UTF-8 temporary path");
    let (ok, text) = mc_host_run(
        3,
        120,
        &["--fault-plan", plan],
        &[
            "mc-guest", "csm", "sor", "--size", "256", "--iters", "100000",
        ],
    );
    assert!(!ok, "{text}");
    assert!(
        !text.contains("timed out"),
        "it hung until the timeout:\n{text}"
    );
    // Either the program's own error, or (when the crash hits a page fault
    // being resolved) the protocol thread's, before the fault handler aborts.
    for n in [0, 1] {
        assert!(
            text.lines().any(|l| l.starts_with(&format!("[node{n}]"))
                && l.contains("node 2 failed or left the cluster")),
            "{text}"
        );
    }
    assert!(start.elapsed() < Duration::from_secs(100));
}

/// Cashmere's message layer (page request/reply) under silent drops and CRC
/// discards: every fetched copy is byte-for-byte the home's page, because a
/// damaged reply fails its end-to-end check and a lost one times out, and
/// either way the request goes out again.
#[test]
fn cashmere_page_fetches_survive_lost_and_corrupted_packets() {
    use cashmere::{Config, Csm};
    use std::sync::{Arc, Barrier};
    const PAGES: usize = 4;
    let vc = VirtualCluster::start(ClusterConfig {
        fault_seed: 7,
        ..ClusterConfig::new(2)
    });
    let cluster = vc.cluster.clone();
    let gate = Arc::new(Barrier::new(2));
    let value = |i: usize| u32::try_from(i).unwrap().wrapping_mul(2_654_435_761);
    vc.on_every_node(move |mc| {
        let csm = Csm::start(&mc, &Config::default()).unwrap();
        let words = PAGES * 2048;
        let a = csm.alloc::<u32>(words, true).unwrap();
        if csm.node_id() == 1 {
            // Node 1 touches the pages first: it is their home.
            for i in 0..words {
                a.set(i, value(i));
            }
        }
        csm.barrier().unwrap();
        if csm.node_id() == 0 {
            // One clean fetch each first: the home leaves Exclusive and
            // publishes its master copy before any packet is lost.
            for p in 0..u32::try_from(PAGES).unwrap() {
                csm.bench_fetch(p).unwrap();
            }
            for fault in [PacketFault::Drop, PacketFault::Corrupt] {
                cluster
                    .apply_fault(FaultCommand::Packets {
                        fault,
                        scope: FaultScope::Everywhere,
                        rate: Rate::from_probability(0.002).unwrap(),
                    })
                    .unwrap();
            }
            let before = csm.stats();
            for _ in 0..25 {
                for p in 0..PAGES {
                    let got = csm.bench_fetch(u32::try_from(p).unwrap()).unwrap();
                    for (w, b) in got.chunks_exact(4).enumerate() {
                        let i = p * 2048 + w;
                        let v = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                        assert_eq!(v, value(i), "word {i} of a fetched page");
                    }
                }
            }
            cluster.apply_fault(FaultCommand::ClearPackets).unwrap();
            let s = csm.stats();
            assert_eq!(s.page_transfers - before.page_transfers, 100, "{s}");
            eprintln!("fetch stats: {s}");
            let retries = (s.request_timeouts - before.request_timeouts)
                + (s.damaged_replies - before.damaged_replies);
            assert!(retries > 0, "0.2% loss of 8 KiB replies must hit some: {s}");
            let hub = cluster.snapshot().hub;
            assert!(hub.drops > 0 && hub.errors > 0, "{hub:?}");
        }
        gate.wait();
        csm.finish().unwrap();
    });
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        // The low byte of each index: the pattern wraps every 256.
        .map(|i| i.to_le_bytes()[0].wrapping_mul(31).wrapping_add(seed))
        .collect()
}

const T: Duration = Duration::from_secs(30);

/// Poll `f` until it holds; panic naming `what` after `T`.
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < T, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The first offset where two nodes' coherent state differs, if any.
fn first_difference(a: &[u8], b: &[u8]) -> Option<usize> {
    (a.len() != b.len())
        .then_some(a.len().min(b.len()))
        .or_else(|| a.iter().zip(b).position(|(x, y)| x != y))
}

fn assert_same_everywhere(snapshots: &[Vec<u8>]) {
    for (n, s) in snapshots.iter().enumerate().skip(1) {
        if let Some(at) = first_difference(&snapshots[0], s) {
            panic!(
                "node {n}'s coherent state differs from node 0's at byte {at:#x} \
                 (page {}): {:?} vs {:?}",
                at / 8192,
                &s[at..(at + 16).min(s.len())],
                &snapshots[0][at..(at + 16).min(s.len())]
            );
        }
    }
}

/// Issue 7 (seed 004, "Late Join"): node 2's adapter crashes; meanwhile the
/// others rewrite a coherent region, allocate another and a lock set. After
/// it rejoins, node 2 holds byte for byte the cluster's control pages and
/// coherent arena, finds the new region by key, and its stores reach the
/// others again.
#[test]
fn a_rejoined_node_catches_up_with_the_coherent_state() {
    use mc_api::{Barrier, Coherence, McError, Sharing};
    use std::sync::{Arc, Barrier as Sync};

    let _ = env_logger::builder().is_test(true).try_init();

    for_each_delivery(&[5], |mode| {
        let vc = VirtualCluster::start(config(mode));
        let cluster = vc.cluster.clone();
        let sync = Arc::new(Sync::new(3));
        let len = 64 << 10;
        let snapshots = vc.on_every_node(move |mc| {
            let me = mc.node_id().0;
            let id = mc.region_alloc(21, len as u64, true).unwrap();
            let tx = mc.attach_transmit(id, Sharing::Shared, true).unwrap();
            let rx = mc.attach_receive(id, Sharing::Shared, false).unwrap();
            let mut b = Barrier::new(&mc, 1).unwrap();
            if me == 0 {
                tx.write(0, &pattern(len, 1)).unwrap();
            }
            b.wait(T).unwrap();
            assert_eq!(rx.to_vec(0, len).unwrap(), pattern(len, 1));
            sync.wait();
            if me == 0 {
                cluster.apply_fault(FaultCommand::Crash(NodeId(2))).unwrap();
            }
            sync.wait();
            match me {
                0 => tx.write(0, &pattern(len, 2)).unwrap(),
                1 => {
                    let id2 = mc.region_alloc(22, 20_000, true).unwrap();
                    let tx2 = mc.attach_transmit(id2, Sharing::Shared, true).unwrap();
                    tx2.write(0, &pattern(20_000, 3)).unwrap();
                    let locks = mc.lock_alloc(23, 2, false, false).unwrap();
                    locks.acquire(1).unwrap();
                    locks.release(1).unwrap();
                }
                _ => {
                    // Posted: the refusal comes back at the flush.
                    tx.write(0, b"lost").unwrap();
                    assert!(
                        matches!(
                            mc.flush(),
                            Err(McError::Refused {
                                status: Status::Offline,
                                ..
                            })
                        ),
                        "an offline adapter sends nothing"
                    );
                    eventually("node 2 to notice it is offline", || {
                        mc.coherence() == Coherence::Offline
                    });
                    assert!(matches!(mc.region_lookup(21), Err(McError::Offline)));
                    // A barrier cannot complete for a node out of the
                    // cluster: it says so instead of waiting out its timeout.
                    let t0 = std::time::Instant::now();
                    assert!(matches!(b.wait(T), Err(McError::Offline)));
                    assert!(t0.elapsed() < T / 2, "{:?}", t0.elapsed());
                }
            }
            sync.wait();
            if me == 0 {
                cluster
                    .apply_fault(FaultCommand::Rejoin(NodeId(2)))
                    .unwrap();
            }
            sync.wait();
            if me == 2 {
                mc.wait_coherent(T).unwrap();
                let r = mc.last_resync().unwrap();
                eprintln!("node 2 caught up: {r:?}");
                assert_eq!(mc.rejoins(), 1);
                assert!(matches!(r.server, Some(NodeId(0 | 1))), "{r:?}");
                assert_eq!(rx.to_vec(0, len).unwrap(), pattern(len, 2));
                let id2 = mc.region_lookup(22).unwrap();
                let rx2 = mc.attach_receive(id2, Sharing::Shared, false).unwrap();
                assert_eq!(rx2.to_vec(0, 20_000).unwrap(), pattern(20_000, 3));
                // Same count: the lock set is found, not created again.
                mc.lock_alloc(23, 2, false, false).unwrap();
                tx.write(100, b"back").unwrap();
            }
            b.wait(T).unwrap();
            assert_eq!(rx.to_vec(100, 4).unwrap(), b"back", "node {me}");
            b.wait(T).unwrap();
            sync.wait();
            let snapshot = mc.coherent_snapshot();
            sync.wait();
            snapshot
        });
        assert_same_everywhere(&snapshots);
    });
}

/// The cluster keeps running while node 2 catches up: node 0 writes without
/// pause (a hot word, a sweeping block, single bytes), and node 2 itself
/// writes as soon as its stores go through again. At the end every node holds
/// what node 0 and node 2 last wrote, and the same coherent state.
#[test]
fn a_node_catches_up_while_the_cluster_keeps_writing() {
    use mc_api::{Barrier, Sharing};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Barrier as Sync, Mutex};

    let _ = env_logger::builder().is_test(true).try_init();

    for_each_delivery(&[6], |mode| {
        let vc = VirtualCluster::start(config(mode));
        let cluster = vc.cluster.clone();
        let sync = Arc::new(Sync::new(3));
        let caught_up = Arc::new(AtomicBool::new(false));
        let expected = Arc::new(Mutex::new(vec![0u8; 256 << 10]));
        let exp = expected.clone();
        let len = 256 << 10;
        let out = vc.on_every_node(move |mc| {
            let me = mc.node_id().0;
            let id = mc.region_alloc(31, len as u64, true).unwrap();
            let tx = mc.attach_transmit(id, Sharing::Shared, true).unwrap();
            let rx = mc.attach_receive(id, Sharing::Shared, false).unwrap();
            let mut b = Barrier::new(&mc, 1).unwrap();
            b.wait(T).unwrap();
            sync.wait();
            match me {
                0 => {
                    let mut model = vec![0u8; len];
                    let mut after = 0;
                    let mut i = 1u64;
                    // Until well after node 2 is coherent again.
                    while after < 200 {
                        let mut put = |off: usize, data: &[u8]| {
                            tx.write(off, data).unwrap();
                            model[off..off + data.len()].copy_from_slice(data);
                        };
                        put(0, &i.to_le_bytes());
                        // Byte values: the low byte of the round.
                        let b = i.to_le_bytes()[0];
                        let off = 4096 + (firmware_model::to_usize(i) * 1000) % (len - 8192);
                        put(off, &pattern(1000, b));
                        put(len - 1 - (firmware_model::to_usize(i) % 4000), &[b]);
                        // As fast as the network takes it: on the hardware a
                        // writer stalls when its write buffer is full; here
                        // its FIFO and the hub's queues would let it run
                        // seconds ahead of delivery under skewed delivery.
                        if i % 16 == 0 {
                            mc.check_errors().unwrap();
                        }
                        i += 1;
                        if caught_up.load(Ordering::Acquire) {
                            after += 1;
                        }
                    }
                    *exp.lock().unwrap() = model;
                }
                1 => {
                    std::thread::sleep(Duration::from_millis(5));
                    cluster.apply_fault(FaultCommand::Crash(NodeId(2))).unwrap();
                    std::thread::sleep(Duration::from_millis(20));
                    cluster
                        .apply_fault(FaultCommand::Rejoin(NodeId(2)))
                        .unwrap();
                }
                _ => {
                    // Node 2 writes its own word throughout; what went through last
                    // must be what everyone holds.
                    let mut last_ok = None;
                    let mut k = 1u64;
                    let start = Instant::now();
                    while mc.rejoins() == 0 {
                        assert!(start.elapsed() < T, "node 2 never caught up");
                        if tx.write_u64(8, k).is_ok() {
                            last_ok = Some(k);
                        }
                        k += 1;
                        std::thread::sleep(Duration::from_micros(200));
                    }
                    mc.wait_coherent(T).unwrap();
                    eprintln!("node 2 caught up: {:?}", mc.last_resync());
                    caught_up.store(true, Ordering::Release);
                    let v = last_ok.map_or(0, |v| v + 1);
                    // One more, to see it reach everyone after the catch-up.
                    tx.write_u64(8, v).unwrap();
                }
            }
            b.wait(T).unwrap();
            sync.wait();
            let snapshot = mc.coherent_snapshot();
            let region = rx.to_vec(0, len).unwrap();
            sync.wait();
            (snapshot, region)
        });
        let model = expected.lock().unwrap().clone();
        let node2_word = out[2].1[8..16].to_vec();
        for (n, (_, region)) in out.iter().enumerate() {
            // Words 0 (hot) and 1 (node 2's) are checked on their own.
            assert_eq!(region[..8], model[..8], "node {n}: the hot word");
            assert_eq!(region[8..16], node2_word[..], "node {n}: node 2's word");
            assert_ne!(node2_word, vec![0u8; 8], "node 2's writes never arrived");
            if let Some(at) = first_difference(&region[16..], &model[16..]) {
                panic!(
                    "node {n}: the region differs from what node 0 wrote at {}",
                    at + 16
                );
            }
        }
        let snapshots: Vec<Vec<u8>> = out.into_iter().map(|(s, _)| s).collect();
        assert_same_everywhere(&snapshots);
    });
}
