//! The Memory Channel API with 2-4 virtual guests against the real backend,
//! each test under eager and skewed delivery (`integration::delivery`: the
//! API relies only on what the network promises, docs/api.md).

use std::time::Duration;

use firmware_model::{ClusterConfig, FaultCommand, FaultScope, NodeId, NodeSet, PacketFault, Rate};
use integration::delivery::for_each_delivery;
use integration::VirtualCluster;
use mc_api::{Barrier, LostPacket, McError, Permissions, Sharing, WaitFor};

const T: Duration = Duration::from_secs(30);

/// The low byte of `x`: patterns wrap every 256.
fn low_byte(x: usize) -> u8 {
    x.to_le_bytes()[0]
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| low_byte(i).wrapping_mul(7).wrapping_add(seed))
        .collect()
}

#[test]
fn regions_by_key_broadcast_and_coherent_late_attach() {
    for_each_delivery(&[1], |mode| {
        let vc = VirtualCluster::with_delivery(3, mode);
        let ids = vc.on_every_node(|mc| {
            let id = mc.region_alloc(42, 20_000, true).unwrap();
            let mut b = Barrier::new(&mc, 1).unwrap();
            if mc.node_id() == NodeId(1) {
                // Written before anyone attaches for receive.
                let tx = mc.attach_transmit(id, Sharing::Shared, false).unwrap();
                tx.write(100, &pattern(19_000, 3)).unwrap();
            }
            b.wait(T).unwrap();
            let rx = mc.attach_receive(id, Sharing::Shared, false).unwrap();
            assert_eq!(
                rx.to_vec(100, 19_000).unwrap(),
                pattern(19_000, 3),
                "node {}",
                mc.node_id()
            );
            b.wait(T).unwrap();
            id
        });
        assert!(ids.iter().all(|i| *i == ids[0]), "{ids:?}");
    });
}

#[test]
fn transmit_receive_with_and_without_loopback() {
    for_each_delivery(&[2], |mode| {
        let vc = VirtualCluster::with_delivery(2, mode);
        vc.on_every_node(|mc| {
            let id = mc.region_alloc(7, 8192, false).unwrap();
            let rx = mc.attach_receive(id, Sharing::Shared, false).unwrap();
            let mut b = Barrier::new(&mc, 1).unwrap();
            b.wait(T).unwrap();
            let me = mc.node_id().index();
            // Node 0 with loopback, node 1 without, at different offsets.
            let tx = mc.attach_transmit(id, Sharing::Shared, me == 0).unwrap();
            tx.write(me * 1024, &pattern(512, low_byte(me))).unwrap();
            b.wait(T).unwrap();
            assert_eq!(
                rx.to_vec(0, 512).unwrap(),
                pattern(512, 0),
                "node0's write, with loopback, is everywhere"
            );
            let n1 = rx.to_vec(1024, 512).unwrap();
            if me == 1 {
                assert_eq!(
                    n1,
                    vec![0; 512],
                    "no loopback: node1 must not see its own write"
                );
            } else {
                assert_eq!(n1, pattern(512, 1));
            }
            b.wait(T).unwrap();
        });
    });
}

/// Two threads of one node attach one region at once, one for transmit
/// with loopback and one for receive (Cashmere-1L's processors do, each
/// for its own mailbox and its sibling's): the adapter's entry for the
/// region must end with both halves, so the write comes back. Programming
/// the entry from a snapshot taken before the other thread's half was
/// recorded once left it without transmit ("page not enabled for
/// transmit"; this test caught that in about 1 run in 4 of 100 rounds).
/// A receiver takes only some pages of a region (`set_receiving`, as
/// Cashmere's homes do): stores into the others are not kept, and turning a
/// page on later takes the stores from then on. The coherent arena refuses.
#[test]
fn a_receiver_takes_only_the_pages_it_turned_on() {
    let vc = VirtualCluster::start(ClusterConfig::new(2));
    vc.on_every_node(|mc| {
        let ps = mc.layout().page_size as usize;
        let id = mc.region_alloc(9, 4 * ps as u64, false).unwrap();
        let rx = mc.attach_receive(id, Sharing::Shared, false).unwrap();
        rx.set_receiving(0, 4, false).unwrap();
        rx.set_receiving(2, 1, true).unwrap();
        assert!(rx.set_receiving(3, 2, true).is_err(), "past the region");
        let mut b = Barrier::new(&mc, 1).unwrap();
        b.wait(T).unwrap();
        let me = mc.node_id().index();
        let tx = mc.attach_transmit(id, Sharing::Shared, true).unwrap();
        if me == 0 {
            for p in 0..4 {
                tx.write(p * ps, &pattern(64, low_byte(p) + 1)).unwrap();
            }
            mc.check_errors().unwrap();
        }
        b.wait(T).unwrap();
        for p in 0..4 {
            let want = if p == 2 { pattern(64, 3) } else { vec![0; 64] };
            assert_eq!(rx.to_vec(p * ps, 64).unwrap(), want, "node {me} page {p}");
        }
        b.wait(T).unwrap();
        rx.set_receiving(1, 1, true).unwrap();
        b.wait(T).unwrap();
        if me == 1 {
            tx.write(ps, &pattern(64, 9)).unwrap();
            mc.check_errors().unwrap();
        }
        b.wait(T).unwrap();
        assert_eq!(rx.to_vec(ps, 64).unwrap(), pattern(64, 9), "node {me}");
        let cid = mc.region_alloc(10, 64, true).unwrap();
        let crx = mc.attach_receive(cid, Sharing::Shared, false).unwrap();
        assert!(matches!(
            crx.set_receiving(0, 1, false),
            Err(McError::CoherentReceivedWhole(_))
        ));
        b.wait(T).unwrap();
    });
}

#[test]
fn concurrent_transmit_and_receive_attaches_both_take() {
    let vc = VirtualCluster::start(ClusterConfig::new(1));
    vc.on_every_node(|mc| {
        for round in 0..100u32 {
            let id = mc.region_alloc(0x5100 + round, 8192, false).unwrap();
            let go = std::sync::Barrier::new(2);
            let (tx, rx) = std::thread::scope(|s| {
                let tx = s.spawn(|| {
                    go.wait();
                    mc.attach_transmit(id, Sharing::Shared, true).unwrap()
                });
                let rx = s.spawn(|| {
                    go.wait();
                    mc.attach_receive(id, Sharing::Shared, false).unwrap()
                });
                (tx.join().unwrap(), rx.join().unwrap())
            });
            tx.write_u64(0, u64::from(round) + 1).unwrap();
            let start = std::time::Instant::now();
            while rx.load_u64(0).unwrap() != u64::from(round) + 1 {
                assert!(
                    start.elapsed() < T,
                    "round {round}: the loopback write never came back"
                );
                std::thread::yield_now();
            }
        }
    });
}

#[test]
fn spinlock_mutual_exclusion_under_contention() {
    for_each_delivery(&[3], |mode| {
        let vc = VirtualCluster::with_delivery(4, mode);
        let totals = vc.on_every_node(|mc| {
            let id = mc.region_alloc(9, 8, true).unwrap();
            let tx = mc.attach_transmit(id, Sharing::Shared, true).unwrap();
            let rx = mc.attach_receive(id, Sharing::Shared, false).unwrap();
            let locks = mc.lock_alloc(10, 2, false, true).unwrap();
            if locks.holds(0) {
                tx.write_u64(0, 0).unwrap();
                locks.release(0).unwrap();
            }
            let mut b = Barrier::new(&mc, 1).unwrap();
            b.wait(T).unwrap();
            for _ in 0..150 {
                locks.acquire(0).unwrap();
                let v = rx.load_u64(0).unwrap();
                tx.write_u64(0, v + 1).unwrap();
                locks.release(0).unwrap();
            }
            b.wait(T).unwrap();
            rx.load_u64(0).unwrap()
        });
        assert!(totals.iter().all(|t| *t == 600), "{totals:?}");
    });
}

/// A holder's release dropped on the way to the waiter (a drop counts no
/// error): the waiter's copy of the lock array keeps the holder's entry,
/// and the wait fails with the typed error naming the lost release once
/// its adapter's drop count explains it (mc-api's `loss`), instead of
/// waiting out the lock's own timeout (120 s).
#[test]
fn a_lost_lock_release_fails_the_waiter_naming_it() {
    for_each_delivery(&[5], |mode| {
        let vc = VirtualCluster::with_delivery(2, mode);
        let cluster = vc.cluster.clone();
        let results = vc.on_every_node(move |mc| {
            let mut b = Barrier::new(&mc, 1).unwrap();
            let me = mc.node_id();
            let creator = (me == NodeId(0)).then(|| mc.lock_alloc(7, 1, false, true).unwrap());
            b.wait(T).unwrap();
            if let Some(locks) = creator {
                assert!(locks.holds(0));
                b.wait(T).unwrap();
                // Everything from node 0 to node 1 is dropped while the
                // release goes out: node 1 never sees it.
                cluster
                    .apply_fault(FaultCommand::Packets {
                        fault: PacketFault::Drop,
                        scope: FaultScope::Link {
                            from: NodeId(0),
                            to: NodeId(1),
                        },
                        rate: Rate::ALWAYS,
                    })
                    .unwrap();
                locks.release(0).unwrap();
                mc.flush().unwrap();
                cluster.apply_fault(FaultCommand::ClearPackets).unwrap();
                Ok(())
            } else {
                let locks = mc.lock_alloc(7, 1, false, false).unwrap();
                b.wait(T).unwrap();
                locks.acquire(0)
            }
        });
        assert!(results[0].is_ok());
        match &results[1] {
            Err(
                e @ McError::LostPacket {
                    waiting_for: WaitFor::ClusterSpinlock,
                    lost: LostPacket::LockRelease { holders },
                    evidence,
                },
            ) => {
                assert_eq!(*holders, NodeSet(0b1), "{e}");
                assert!(evidence.since_open >= 1, "{e}");
                assert!(e.to_string().contains("node0's release of the lock"), "{e}");
            }
            other => panic!("expected the lost release to be named, got {other:?}"),
        }
        let s = vc.cluster.snapshot();
        assert_eq!(s.cluster_error_count, 0, "the drop counted no error");
        assert!(s.nodes[1].counters.drops >= 1);
    });
}

/// Without packets lost, a holder slower than the loss rule's waits is
/// waited for: the waiter gets the lock once it is released.
#[test]
fn a_slow_holder_without_losses_is_waited_for() {
    let vc = VirtualCluster::with_delivery(2, firmware_model::DeliveryMode::Eager);
    vc.on_every_node(move |mc| {
        let mut b = Barrier::new(&mc, 1).unwrap();
        let me = mc.node_id();
        let creator = (me == NodeId(0)).then(|| mc.lock_alloc(8, 1, false, true).unwrap());
        b.wait(T).unwrap();
        if let Some(locks) = creator {
            b.wait(T).unwrap();
            std::thread::sleep(mc_api::LOSS_WAIT_EARLIER + Duration::from_secs(1));
            locks.release(0).unwrap();
        } else {
            let locks = mc.lock_alloc(8, 1, false, false).unwrap();
            b.wait(T).unwrap();
            locks.acquire(0).unwrap();
            locks.release(0).unwrap();
        }
        assert_eq!(mc.losses(), 0);
    });
}

#[test]
fn error_check_catches_an_injected_fault() {
    for_each_delivery(&[4], |mode| {
        let vc = VirtualCluster::with_delivery(3, mode);
        let cluster = vc.cluster.clone();
        vc.on_every_node(move |mc| {
            let id = mc.region_alloc(5, 4096, true).unwrap();
            let mut b = Barrier::new(&mc, 1).unwrap();
            b.wait(T).unwrap();
            if mc.node_id() == NodeId(0) {
                let tx = mc.attach_transmit(id, Sharing::Shared, false).unwrap();
                let saved = mc.error_count();
                tx.write(0, &pattern(1024, 1)).unwrap();
                let c = mc.check_errors().unwrap();
                assert_eq!(c.count, saved, "a clean write leaves the count alone");
                // Every packet from node 0 to node 2 now fails its CRC.
                cluster
                    .apply_fault(FaultCommand::Packets {
                        fault: PacketFault::Corrupt,
                        scope: FaultScope::Link {
                            from: NodeId(0),
                            to: NodeId(2),
                        },
                        rate: Rate::ALWAYS,
                    })
                    .unwrap();
                let saved = mc.error_count();
                tx.write(0, &pattern(1024, 2)).unwrap();
                let c = mc.check_errors().unwrap();
                assert_eq!(
                    c.count,
                    saved + 32,
                    "32 packets of 32 bytes were discarded at node 2"
                );
                assert_eq!(c.statuses[2].network_errors, 32);
                assert_eq!(c.statuses[1].network_errors, 0);
                cluster.apply_fault(FaultCommand::ClearPackets).unwrap();
                // Retry: now clean, and node 2 holds the data.
                let saved = mc.error_count();
                tx.write(0, &pattern(1024, 2)).unwrap();
                assert_eq!(mc.check_errors().unwrap().count, saved);
            }
            b.wait(T).unwrap();
            let rx = mc.attach_receive(id, Sharing::Shared, false).unwrap();
            assert_eq!(rx.to_vec(0, 1024).unwrap(), pattern(1024, 2));
            b.wait(T).unwrap();
        });
    });
}

#[test]
fn misuse_gets_clean_errors() {
    for_each_delivery(&[5], |mode| {
        let vc = VirtualCluster::with_delivery(2, mode);
        vc.on_every_node(|mc| {
            let me = mc.node_id().index();
            assert!(matches!(
                mc.region_lookup(0xbad),
                Err(McError::NoSuchRegion(_))
            ));
            assert!(matches!(
                mc.attach_transmit(999, Sharing::Shared, false),
                Err(McError::NoSuchRegion(_))
            ));
            let locks = mc.lock_alloc(3, 1, false, false).unwrap();
            assert!(matches!(locks.release(0), Err(McError::NotHeld { .. })));
            locks.acquire(0).unwrap();
            assert!(matches!(locks.acquire(0), Err(McError::AlreadyHeld { .. })));
            locks.release(0).unwrap();
            assert!(matches!(locks.release(0), Err(McError::NotHeld { .. })));
            assert!(matches!(locks.acquire(5), Err(McError::NoSuchLock { .. })));
            let id = mc.region_alloc(4, 100, false).unwrap();
            assert!(matches!(
                mc.region_alloc(4, 200, false),
                Err(McError::RegionSize { .. })
            ));
            let mut b = Barrier::new(&mc, 1).unwrap();
            b.wait(T).unwrap();
            // Permissions: node 0 publishes a region only it may write.
            if me == 0 {
                mc.region_alloc_with(12, 64, true, Permissions::PUBLISH)
                    .unwrap();
            }
            b.wait(T).unwrap();
            let pid = mc.region_lookup(12).unwrap();
            if me == 1 {
                assert!(matches!(
                    mc.attach_transmit(pid, Sharing::Shared, false),
                    Err(McError::PermissionDenied { node: 1, .. })
                ));
                drop(mc.attach_receive(pid, Sharing::Shared, false).unwrap());
            } else {
                drop(mc.attach_transmit(pid, Sharing::Shared, false).unwrap());
            }
            b.wait(T).unwrap();
            // Exclusive transmit: only one node gets it.
            let tx = if me == 0 {
                Some(mc.attach_transmit(id, Sharing::Exclusive, false).unwrap())
            } else {
                None
            };
            b.wait(T).unwrap();
            if me == 1 {
                assert!(matches!(
                    mc.attach_transmit(id, Sharing::Shared, false),
                    Err(McError::Busy { .. })
                ));
            }
            if let Some(tx) = &tx {
                assert!(matches!(
                    tx.write(90, &[0; 20]),
                    Err(McError::OutOfBounds { .. })
                ));
                assert!(matches!(mc.region_dealloc(id), Err(McError::Busy { .. })));
            }
            b.wait(T).unwrap();
            drop(tx);
            b.wait(T).unwrap();
            if me == 0 {
                mc.region_dealloc(id).unwrap();
                assert!(matches!(
                    mc.region_dealloc(id),
                    Err(McError::NoSuchRegion(_))
                ));
            }
            b.wait(T).unwrap();
        });
    });
}

#[test]
fn notifications_and_membership() {
    for_each_delivery(&[6], |mode| {
        let vc = VirtualCluster::with_delivery(3, mode);
        let cluster = vc.cluster.clone();
        // In-process: every node has left the last barrier before node 2
        // is crashed (a node sees a barrier complete only once the others'
        // arrivals reach it, which skewed delivery may delay past the
        // moment node 0 sees it complete).
        let all_past = std::sync::Arc::new(std::sync::Barrier::new(3));
        vc.on_every_node(move |mc| {
            let id = mc.region_alloc(11, 16384, false).unwrap();
            let rx = mc
                .attach_receive(id, Sharing::Shared, mc.node_id() == NodeId(1))
                .unwrap();
            let mut b = Barrier::new(&mc, 1).unwrap();
            b.wait(T).unwrap();
            match mc.node_id().0 {
                0 => {
                    let tx = mc.attach_transmit(id, Sharing::Shared, false).unwrap();
                    tx.write(8192 + 8, b"wake up").unwrap();
                }
                1 => {
                    let n = mc.wait_notification(&rx, T).unwrap();
                    assert_eq!(n.source, NodeId(0));
                    assert_eq!(n.page, rx.pages().0 + 1);
                    assert_eq!(rx.to_vec(8192 + 8, 7).unwrap(), b"wake up");
                }
                _ => {}
            }
            b.wait(T).unwrap();
            let h = mc.hosts();
            assert_eq!((h.epoch, h.members.len()), (1, 3));
            b.wait(T).unwrap();
            all_past.wait();
            if mc.node_id() == NodeId(0) {
                cluster.apply_fault(FaultCommand::Crash(NodeId(2))).unwrap();
                std::thread::sleep(Duration::from_millis(50));
                let h = mc.hosts();
                assert_eq!(h.epoch, 2);
                assert_eq!(h.members, vec![NodeId(0), NodeId(1)]);
                assert!(mc.membership_changes().contains(&(2, 0b011)));
            }
        });
    });
}

/// Attaching and detaching a region over and over reuses its receive memory
/// (the driver's DMA allocator never frees): 400 cycles of 1 MiB, several
/// times the guest's DMA memory, all succeed; every new attachment starts
/// zeroed and receives the writes made after it.
#[test]
fn attach_detach_cycles_reuse_receive_memory() {
    for_each_delivery(&[7], |mode| {
        const MIB: u64 = 1 << 20;
        const MIB_USIZE: usize = 1 << 20;
        let vc = VirtualCluster::with_delivery(2, mode);
        vc.on_every_node(|mc| {
            let id = mc.region_alloc(77, MIB, false).unwrap();
            let mut b = Barrier::new(&mc, 1).unwrap();
            let me = mc.node_id().index();
            let tx = mc.attach_transmit(id, Sharing::Shared, false).unwrap();
            for round in 0..100u32 {
                if me == 1 {
                    let rx = mc.attach_receive(id, Sharing::Shared, false).unwrap();
                    assert_eq!(rx.to_vec(MIB_USIZE - 64, 64).unwrap(), vec![0u8; 64]);
                    b.wait(T).unwrap();
                    b.wait(T).unwrap();
                    let want = pattern(64, low_byte(round as usize));
                    assert_eq!(
                        rx.to_vec(MIB_USIZE - 64, 64).unwrap(),
                        want,
                        "round {round}"
                    );
                } else {
                    b.wait(T).unwrap();
                    tx.write(MIB_USIZE - 64, &pattern(64, low_byte(round as usize)))
                        .unwrap();
                    b.wait(T).unwrap();
                }
            }
        });
    });
}

/// A node that allocates a region, a lock set or attaches finds the update at
/// once in its own copy of the tables (a lookup, another allocation), though
/// the table write it made is posted and comes back by loopback a while later.
#[test]
fn a_node_finds_its_own_table_updates_at_once() {
    for_each_delivery(&[8], |mode| {
        let vc = VirtualCluster::with_delivery(3, mode);
        vc.on_every_node(|mc| {
            let me = u32::from(mc.node_id().0);
            for k in 0..25 {
                let key = 1000 * (me + 1) + k;
                let id = mc.region_alloc(key, 64, k % 2 == 0).unwrap();
                assert_eq!(mc.region_lookup(key).unwrap(), id, "key {key}");
                let tx = mc.attach_transmit(id, Sharing::Exclusive, false).unwrap();
                drop(tx);
                mc.region_dealloc(id).unwrap();
                assert!(matches!(
                    mc.region_lookup(key),
                    Err(McError::NoSuchRegion(_))
                ));
            }
        });
    });
}

/// `write_many` combines writes that continue one another (within a 4 KiB
/// block) into one store: what arrives is byte for byte what was written,
/// in order, across block boundaries, gaps, overlapping rewrites and pieces
/// of every size; and the last write of the batch is seen last (a flag
/// after the data, as a program would use it).
#[test]
fn write_many_combines_adjacent_writes_without_changing_what_arrives() {
    for_each_delivery(&[3], |mode| {
        let vc = VirtualCluster::with_delivery(2, mode);
        vc.on_every_node(|mc| {
            const LEN: usize = 3 * 4096 + 704; // the flag after it 8-aligned
            let id = mc.region_alloc(77, LEN as u64 + 8, false).unwrap();
            let rx = mc.attach_receive(id, Sharing::Shared, false).unwrap();
            let mut b = Barrier::new(&mc, 1).unwrap();
            b.wait(T).unwrap();
            if mc.node_id() == NodeId(0) {
                let tx = mc.attach_transmit(id, Sharing::Shared, false).unwrap();
                let data = pattern(LEN, 9);
                // Pieces of 1 to 97 bytes, mostly adjacent, with a gap and
                // a rewrite of bytes already written in the same batch.
                let mut writes: Vec<(usize, &[u8])> = Vec::new();
                let mut at = 0;
                let mut k = 0;
                while at < LEN {
                    let len = (1 + k * 37 % 97).min(LEN - at);
                    if k % 50 != 49 {
                        writes.push((at, &data[at..at + len]));
                    }
                    at += len;
                    k += 1;
                }
                // Filled after the gaps were skipped: everything is written.
                let gaps: Vec<(usize, usize)> = {
                    let mut g = Vec::new();
                    let (mut at, mut k) = (0, 0);
                    while at < LEN {
                        let len = (1 + k * 37 % 97).min(LEN - at);
                        if k % 50 == 49 {
                            g.push((at, len));
                        }
                        at += len;
                        k += 1;
                    }
                    g
                };
                for &(at, len) in &gaps {
                    writes.push((at, &data[at..at + len]));
                }
                writes.push((4090, &data[4090..4100]));
                let flag = 1u64.to_le_bytes();
                writes.push((LEN, &flag));
                tx.write_many(&writes).unwrap();
            }
            if mc.node_id() == NodeId(1) {
                let start = std::time::Instant::now();
                while rx.load_u64(LEN).unwrap() != 1 {
                    assert!(start.elapsed() < T, "the flag never came");
                    std::thread::yield_now();
                }
                assert_eq!(rx.to_vec(0, LEN).unwrap(), pattern(LEN, 9));
            }
            b.wait(T).unwrap();
        });
    });
}
