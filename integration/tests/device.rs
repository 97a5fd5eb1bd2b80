//! The backend through its real sockets, driven by virtual guests speaking
//! vhost-user as QEMU does: reconnects, concurrent senders, faults, bad input;
//! each under eager and skewed delivery (`integration::delivery`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use firmware_model::abi::Status;
use firmware_model::{
    ClusterConfig, FaultCommand, FaultScope, NodeId, PacketFault, PctEntry, Rate,
};
use integration::delivery::{config, for_each_delivery, for_each_delivery_up_to};
use integration::VirtualCluster;

const PAGE: u64 = 8192;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        // The low byte of each index: the pattern wraps every 256.
        .map(|i| i.to_le_bytes()[0].wrapping_mul(29).wrapping_add(seed))
        .collect()
}

/// A guest disconnects and reconnects (a QEMU restart) while two others keep
/// talking: their traffic is not disturbed, and the returning guest starts from
/// a reset adapter. Skewed only in an exhaustive run (two seeds): a sender
/// that posts without pause is delivered far more slowly skewed than eager
/// (tens of seconds here).
#[test]
fn reconnect_while_others_keep_sending() {
    for_each_delivery_up_to(&[], 2, |mode| {
        let vc = VirtualCluster::with_delivery(3, mode);
        let mut g0 = vc.adapter(0);
        let mut g1 = vc.adapter(1);
        g0.set_pct(3, 1, PctEntry::transmit_broadcast().to_bits(), &[])
            .unwrap();
        let rx1 = g1.map_receive(3, 1, PctEntry::receive().to_bits()).unwrap();

        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicU64::new(0));
        let (s, n) = (stop.clone(), sent.clone());
        let sender = std::thread::spawn(move || {
            let mut i = 0u64;
            while !s.load(Ordering::Acquire) {
                i += 1;
                g0.store(3 * PAGE + 64, &i.to_le_bytes()).unwrap();
                n.store(i, Ordering::Release);
            }
            g0.flush().unwrap();
            g0
        });

        for round in 0..3 {
            let mut g2 = vc.adapter(2);
            let rx2 = g2.map_receive(3, 1, PctEntry::receive().to_bits()).unwrap();
            let before = sent.load(Ordering::Acquire);
            let start = Instant::now();
            // Node 2 receives node 0's stream while attached.
            while rx2.load_u64(64).unwrap() <= before {
                assert!(
                    start.elapsed() < Duration::from_secs(10),
                    "round {round}: node 2 gets nothing"
                );
                std::thread::yield_now();
            }
            drop(rx2);
            drop(g2); // disconnect
            std::thread::sleep(Duration::from_millis(20));
        }
        // The returning guest found a reset adapter: nothing enabled.
        let mut g2 = vc.adapter(2);
        assert_eq!(g2.get_pct(3).unwrap(), (0, false));
        stop.store(true, Ordering::Release);
        let _g0 = sender.join().unwrap();
        let last = sent.load(Ordering::Acquire);
        assert!(last > 10);
        // Posted stores: the last one lands some time after the flush.
        rx1.wait_for(64, &last.to_le_bytes(), Duration::from_secs(10))
            .expect("node 1 saw every store, the last one last");
        let snap = vc.cluster.snapshot();
        assert_eq!(snap.nodes[2].connections, 4);
        assert_eq!(snap.nodes[1].counters.packets_received, last);
    });
}

/// Several senders write the same broadcast + loopback page at once. Total
/// order: every receiver applies the same writes in the same order, so every
/// copy of the page ends up identical.
#[test]
fn concurrent_senders_leave_every_copy_identical() {
    for_each_delivery(&[2], |mode| {
        let vc = VirtualCluster::with_delivery(3, mode);
        let entry = PctEntry::transmit_broadcast()
            .with_loopback()
            .with_receive();
        let mut guests: Vec<_> = (0..3).map(|n| vc.adapter(n)).collect();
        let rxs: Vec<_> = guests
            .iter_mut()
            .map(|g| g.map_receive(6, 1, entry.to_bits()).unwrap())
            .collect();
        // Each sender's ACK page (pages 10, 11, 12).
        let acks: Vec<_> = guests
            .iter_mut()
            .enumerate()
            .map(|(n, g)| {
                g.map_receive(
                    10 + u32::try_from(n).unwrap(),
                    1,
                    PctEntry::ack_page().to_bits(),
                )
                .unwrap()
            })
            .collect();
        let threads: Vec<_> = guests
            .into_iter()
            .zip(acks)
            .enumerate()
            .map(|(n, (g, ack))| {
                std::thread::spawn(move || {
                    for i in 0..300u32 {
                        // Overlapping writes: 4 slots of 256 bytes, each sender cycling.
                        let n = u32::try_from(n).unwrap();
                        let slot = u64::from((i + n) % 4) * 256;
                        let mut data =
                            pattern(256, i.to_le_bytes()[0] ^ (u8::try_from(n).unwrap() * 85));
                        data[..4].copy_from_slice(&i.to_le_bytes());
                        g.store(6 * PAGE + slot, &data).unwrap();
                    }
                    // The ACK answer comes once every store before it has
                    // reached every receiver.
                    ack.region().fill(0, 64, 0xff).unwrap();
                    g.store((10 + n as u64) * PAGE, &[1]).unwrap();
                    let start = Instant::now();
                    while ack.region().read_u32(0).unwrap() == u32::MAX {
                        assert!(start.elapsed() < Duration::from_secs(30), "no ACK answer");
                        std::thread::yield_now();
                    }
                    g
                })
            })
            .collect();
        let _guests: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        // Every sender's ACK answered: every copy is final.
        let copies: Vec<Vec<u8>> = rxs.iter().map(|r| r.read_vec(0, 1024).unwrap()).collect();
        assert_eq!(copies[0], copies[1]);
        assert_eq!(copies[1], copies[2]);
        assert_ne!(copies[0], vec![0u8; 1024]);
    });
}

/// Corrupted packets are counted; the count is one load on the status page.
#[test]
fn error_count_reaches_every_status_page() {
    for_each_delivery(&[3], |mode| {
        let vc = VirtualCluster::with_delivery(2, mode);
        let mut g0 = vc.adapter(0);
        let mut g1 = vc.adapter(1);
        let s0 = g0.set_status_page().unwrap();
        let s1 = g1.set_status_page().unwrap();
        g0.set_pct(1, 1, PctEntry::transmit_broadcast().to_bits(), &[])
            .unwrap();
        let _rx = g1.map_receive(1, 1, PctEntry::receive().to_bits()).unwrap();
        vc.cluster
            .apply_fault(FaultCommand::Packets {
                fault: PacketFault::Corrupt,
                scope: FaultScope::Node(NodeId(1)),
                rate: Rate::ALWAYS,
            })
            .unwrap();
        g0.store(PAGE, &[7u8; 96]).unwrap();
        let start = Instant::now();
        while s0.cluster_error_count().unwrap() != 3 || s1.cluster_error_count().unwrap() != 3 {
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "status pages never showed 3 errors"
            );
            std::thread::yield_now();
        }
        assert_eq!(s1.read().unwrap().errors, 3);
        assert_eq!(vc.cluster.snapshot().cluster_error_count, 3);
    });
}

/// Bad requests through the socket fail with a status for that guest only.
#[test]
fn bad_requests_fail_for_that_guest_only() {
    for_each_delivery(&[4], |mode| {
        let vc = VirtualCluster::with_delivery(2, mode);
        let mut g0 = vc.adapter(0);
        let mut g1 = vc.adapter(1);
        g0.set_pct(2, 1, PctEntry::transmit_broadcast().to_bits(), &[])
            .unwrap();
        let rx = g1.map_receive(2, 1, PctEntry::receive().to_bits()).unwrap();
        // A store to a page not enabled for transmit: refused, seen at the flush.
        g0.store(9 * PAGE, &[1u8; 8]).unwrap();
        assert_eq!(
            g0.flush().unwrap_err().status(),
            Some(Status::TransmitDisabled)
        );
        // Receive frames outside guest RAM.
        let e = g1
            .set_pct(
                5,
                1,
                PctEntry::receive().to_bits(),
                &[1 << 40, (1 << 40) + 4096],
            )
            .unwrap_err();
        assert_eq!(e.status(), Some(Status::BadAddress));
        // An invalid PCT entry.
        let e = g0
            .set_pct(5, 1, PctEntry::transmit_to(NodeId(0)).to_bits(), &[])
            .unwrap_err();
        assert_eq!(e.status(), Some(Status::InvalidPct));
        // Nothing reached node 1, and good traffic still flows.
        assert_eq!(rx.read_vec(0, 8192).unwrap(), vec![0u8; 8192]);
        g0.store(2 * PAGE, b"still here").unwrap();
        g0.flush().unwrap();
        rx.wait_for(0, b"still here", Duration::from_secs(5))
            .unwrap();
        let snap = vc.cluster.snapshot();
        assert_eq!(snap.nodes[0].status.protection_errors, 2);
        assert_eq!(snap.nodes[1].status.protection_errors, 1);
    });
}

/// Two clusters in one process share nothing: the same page on both carries
/// different traffic.
#[test]
fn clusters_in_one_process_are_isolated() {
    for_each_delivery(&[5], |mode| {
        let a = VirtualCluster::with_delivery(2, mode);
        let b = VirtualCluster::with_delivery(2, mode);
        let entry = PctEntry::transmit_broadcast().with_receive();
        let (mut a0, mut a1) = (a.adapter(0), a.adapter(1));
        let (mut b0, mut b1) = (b.adapter(0), b.adapter(1));
        let _ = a0.map_receive(1, 1, entry.to_bits()).unwrap();
        let ra = a1.map_receive(1, 1, entry.to_bits()).unwrap();
        let _ = b0.map_receive(1, 1, entry.to_bits()).unwrap();
        let rb = b1.map_receive(1, 1, entry.to_bits()).unwrap();
        a0.store(PAGE, b"cluster a").unwrap();
        b0.store(PAGE, b"cluster b").unwrap();
        ra.wait_for(0, b"cluster a", Duration::from_secs(5))
            .unwrap();
        rb.wait_for(0, b"cluster b", Duration::from_secs(5))
            .unwrap();
        assert_eq!(a.cluster.snapshot().hub.packets, 1);
        assert_eq!(b.cluster.snapshot().hub.packets, 1);
    });
}

/// With a hardware link preset the backend holds each delivery until the
/// timing model says it is due: 50 KB over Memory Channel 1 (50 MB/s) cannot
/// land in less than a millisecond. (A lower bound: slowness cannot fail it.)
#[test]
fn mc1_timing_is_applied() {
    for_each_delivery(&[6], |mode| {
        let dir = tempfile::tempdir().unwrap();
        let opts = mc_device::ClusterOptions::new(
            ClusterConfig {
                delivery: mode,
                ..ClusterConfig::mc1(2)
            },
            dir.path(),
        );
        let cluster = mc_device::Cluster::start(opts).unwrap();
        let connect = |n: u8| {
            let t = mc_driver::VhostUserTransport::connect(
                cluster.socket_path(NodeId(n)).unwrap(),
                &Default::default(),
            )
            .unwrap();
            mc_driver::Adapter::new(t, Default::default()).unwrap()
        };
        let (mut g0, mut g1) = (connect(0), connect(1));
        g0.set_pct(0, 7, PctEntry::transmit_broadcast().to_bits(), &[])
            .unwrap();
        let rx = g1.map_receive(0, 7, PctEntry::receive().to_bits()).unwrap();
        let data = pattern(50_000, 4);
        let start = Instant::now();
        g0.store(0, &data).unwrap();
        rx.wait_for(0, &data, Duration::from_secs(10)).unwrap();
        let took = start.elapsed();
        assert!(
            took >= Duration::from_micros(1_000),
            "50 KB at 50 MB/s took only {took:?}"
        );
        drop((g0, g1));
    });
}

/// One guest floods the hub with large chains; two others keep exchanging
/// messages, and every one of their round trips completes. Skewed only in an
/// exhaustive run (two seeds), as above: 200 round trips behind the flood take
/// about 40 s skewed against 2 s eager in a debug build.
#[test]
fn a_flooding_guest_does_not_stop_the_others() {
    for_each_delivery_up_to(&[], 2, |mode| {
        let vc = VirtualCluster::with_delivery(3, mode);
        let (mut g0, mut g1, mut flood) = (vc.adapter(0), vc.adapter(1), vc.adapter(2));
        let both = PctEntry::transmit_broadcast().with_receive();
        let r0 = g0.map_receive(1, 1, both.to_bits()).unwrap();
        let r1 = g1.map_receive(1, 1, both.to_bits()).unwrap();
        flood
            .set_pct(8, 8, PctEntry::transmit_broadcast().to_bits(), &[])
            .unwrap();
        let _victims: Vec<_> = [&mut g0, &mut g1]
            .into_iter()
            .map(|g| g.map_receive(8, 8, PctEntry::receive().to_bits()).unwrap())
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicU64::new(0));
        let (s, d) = (stop.clone(), done.clone());
        let flooder = std::thread::spawn(move || {
            let data = vec![0xeeu8; 60_000];
            while !s.load(Ordering::Acquire) {
                // Stores, and refused stores (page 0 is not enabled), as fast as it can.
                // The hub gives it one bounded turn a pass (docs/device.md s.20), so on a
                // loaded host its ring may stay full for a while: it tries again.
                match flood.fifo().post_all(&[(8 * PAGE, &data), (0, &data[..8])]) {
                    Ok(_) => {
                        d.fetch_add(1, Ordering::AcqRel);
                    }
                    Err(mc_driver::Error::Timeout { .. }) => {}
                    Err(e) => panic!("the flooder's post failed: {e}"),
                }
            }
            let _ = flood.flush();
        });
        // The flood is under way before the others start talking.
        let wait = Instant::now();
        while done.load(Ordering::Acquire) < 20 {
            assert!(
                wait.elapsed() < Duration::from_secs(30),
                "the flooder never got going"
            );
            std::thread::yield_now();
        }
        let start = Instant::now();
        for i in 1..=200u64 {
            g0.store(PAGE, &i.to_le_bytes()).unwrap();
            while r1.load_u64(0).unwrap() != i {
                assert!(
                    start.elapsed() < Duration::from_secs(60),
                    "round trip {i} never completed"
                );
                std::thread::yield_now();
            }
            g1.store(PAGE + 8, &i.to_le_bytes()).unwrap();
            while r0.load_u64(8).unwrap() != i {
                assert!(
                    start.elapsed() < Duration::from_secs(60),
                    "round trip {i} never completed"
                );
                std::thread::yield_now();
            }
        }
        let took = start.elapsed();
        let chains = done.load(Ordering::Acquire);
        stop.store(true, Ordering::Release);
        flooder.join().unwrap();
        println!(
            "200 round trips in {took:?}; the flooder had posted {chains} pairs of stores by then"
        );
        assert!(vc.cluster.snapshot().nodes[2].counters.protection_errors > 0);
    });
}

/// A PCT range larger than one control request takes (4096 pages) is sent in
/// pieces by the driver; every page of it, the last included, is programmed.
#[test]
fn a_pct_range_larger_than_one_request_is_programmed_whole() {
    use firmware_model::abi::MAX_PCT_PAGES_PER_REQUEST;
    for_each_delivery(&[8], |mode| {
        let vc = VirtualCluster::start(ClusterConfig {
            page_size: 4096,
            ..config(2, mode)
        });
        let (mut g0, mut g1) = (vc.adapter(0), vc.adapter(1));
        let pages = MAX_PCT_PAGES_PER_REQUEST + 3;
        g0.set_pct(0, pages, PctEntry::transmit_broadcast().to_bits(), &[])
            .unwrap();
        let rx = g1
            .map_receive(0, pages, PctEntry::receive().to_bits())
            .unwrap();
        for page in [
            0,
            MAX_PCT_PAGES_PER_REQUEST - 1,
            MAX_PCT_PAGES_PER_REQUEST,
            pages - 1,
        ] {
            let data = pattern(64, page.to_le_bytes()[0]);
            g0.store(u64::from(page) * 4096 + 8, &data).unwrap();
            g0.flush().unwrap();
            let at = page as usize * 4096 + 8;
            rx.wait_for(at, &data, Duration::from_secs(5))
                .unwrap_or_else(|e| panic!("page {page}: {e}"));
        }
        // A frame list that does not match the page count is refused up front.
        assert!(g1
            .set_pct(0, 2, PctEntry::receive().to_bits(), &rx.frames()[..1])
            .is_err());
    });
}
