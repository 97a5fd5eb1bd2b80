//! Contention at the hub in virtual time (issue 29, docs/virtual-time.md
//! s.3, vtime/links.rs): stamped stores through a real `Hub`, their
//! deliveries' virtual arrivals checked against MC2's links and crossbar.

use super::*;
use crate::sink::RecordingSink;
use crate::vtime::{arrival, VIRTUAL_LINK};
use proptest::prelude::*;

const PS: u64 = 8192;

fn ser(bytes: u64) -> u64 {
    VIRTUAL_LINK.serialisation(bytes).0
}

/// The page node `s` sends to node `d` on, point to point.
fn p2p_page(s: u8, d: u8) -> u32 {
    1_000 + u32::from(s) * 64 + u32::from(d)
}

/// The page node `s` broadcasts on.
fn bcast_page(s: u8) -> u32 {
    100 + u32::from(s)
}

/// Every ordered pair has a point-to-point page, every node a broadcast page
/// every other node receives (no loopback).
fn cluster(nodes: u8) -> Hub {
    cluster_on(crate::timing::LinkTiming::UNTHROTTLED, nodes)
}

/// [`cluster`] with real-time pacing `link` (which also chooses the
/// virtual network: `--link clan`).
fn cluster_on(link: crate::timing::LinkTiming, nodes: u8) -> Hub {
    let mut config = ClusterConfig::new(nodes);
    config.link = link;
    let mut h = Hub::new(config).unwrap();
    for s in 0..nodes {
        for d in 0..nodes {
            if s == d {
                continue;
            }
            let p = PageNumber(p2p_page(s, d));
            h.set_pct(NodeId(s), p, PctEntry::transmit_to(NodeId(d)))
                .unwrap();
            h.set_pct(NodeId(d), p, PctEntry::receive()).unwrap();
            h.set_pct(NodeId(d), PageNumber(bcast_page(s)), PctEntry::receive())
                .unwrap();
        }
        h.set_pct(
            NodeId(s),
            PageNumber(bcast_page(s)),
            PctEntry::transmit_broadcast(),
        )
        .unwrap();
    }
    h
}

/// One store: from, to (`None`: broadcast), virtual send time, bytes.
#[derive(Clone, Copy, Debug)]
struct Store {
    src: u8,
    dst: Option<u8>,
    vt: u64,
    len: u32,
}

fn store_addr(st: &Store) -> GlobalAddr {
    let page = match st.dst {
        Some(d) => p2p_page(st.src, d),
        None => bcast_page(st.src),
    };
    GlobalAddr(u64::from(page) * PS)
}

/// Send `st` stamped; returns (receiver, packet's last byte, arrival) of
/// every delivery.
fn send(h: &mut Hub, st: &Store) -> Vec<(NodeId, u64, u64)> {
    let mut sink = RecordingSink::new();
    h.transmit_stamped(
        Nanos(0),
        NodeId(st.src),
        store_addr(st),
        st.len,
        Some(Nanos(st.vt)),
        &mut sink,
    )
    .unwrap();
    sink.deliveries()
        .map(|d| {
            let through = u64::from(d.packet.store_offset + d.packet.len);
            (d.receiver, through, d.vt.expect("stamped").0)
        })
        .collect()
}

/// The last arrival of `st` at `node`.
fn last_at(deliveries: &[(NodeId, u64, u64)], node: u8) -> u64 {
    deliveries
        .iter()
        .filter(|d| d.0 == NodeId(node))
        .map(|d| d.2)
        .max()
        .expect("delivered")
}

fn alone(st: &Store) -> u64 {
    arrival(Nanos(st.vt), u64::from(st.len)).0
}

#[test]
fn a_lone_store_arrives_as_it_always_did_packet_by_packet() {
    for st in [
        Store {
            src: 0,
            dst: Some(1),
            vt: 5_000,
            len: 8,
        },
        Store {
            src: 1,
            dst: Some(0),
            vt: 7,
            len: 100,
        },
        Store {
            src: 2,
            dst: None,
            vt: 1_000_000,
            len: 8192,
        },
    ] {
        let mut h = cluster(3);
        for (_, through, at) in send(&mut h, &st) {
            assert_eq!(at, arrival(Nanos(st.vt), through).0, "{st:?}");
        }
        assert_eq!(h.hub_counters().virtual_queueing_ns, 0);
    }
}

#[test]
fn a_store_across_two_pages_to_two_receivers_arrives_as_it_always_did() {
    // Node 0's pages to nodes 1 and 2 are neighbours: half the store goes
    // to each, the second half after the first on node 0's uplink.
    let mut h = cluster(3);
    assert_eq!(p2p_page(0, 2), p2p_page(0, 1) + 1);
    let mut sink = RecordingSink::new();
    let send = Nanos(3_000);
    let addr = GlobalAddr(u64::from(p2p_page(0, 1)) * PS + 4096);
    h.transmit_stamped(Nanos(0), NodeId(0), addr, 8192, Some(send), &mut sink)
        .unwrap();
    let mut to = [0; 3];
    for d in sink.deliveries() {
        let through = u64::from(d.packet.store_offset + d.packet.len);
        assert_eq!(d.vt, Some(arrival(send, through)));
        to[d.receiver.index()] += d.packet.len;
    }
    assert_eq!(to, [0, 4096, 4096]);
}

#[test]
fn two_stores_from_one_sender_at_once_go_one_after_the_other() {
    let mut h = cluster(2);
    let st = Store {
        src: 0,
        dst: Some(1),
        vt: 1_000,
        len: 256,
    };
    let first = send(&mut h, &st);
    let second = send(&mut h, &st);
    assert_eq!(last_at(&first, 1), alone(&st));
    assert_eq!(last_at(&second, 1), alone(&st) + ser(256));
    // Every packet of the second waited the first's serialisation.
    for (a, b) in first.iter().zip(&second) {
        assert_eq!(b.2, a.2 + ser(256));
    }
    assert_eq!(
        h.node_counters(NodeId(0)).unwrap().virtual_queueing_ns,
        8 * ser(256)
    );
}

#[test]
fn two_senders_to_one_receiver_share_its_downlink() {
    let mut h = cluster(3);
    let a = Store {
        src: 0,
        dst: Some(2),
        vt: 1_000,
        len: 512,
    };
    let b = Store {
        src: 1,
        dst: Some(2),
        vt: 1_000,
        len: 512,
    };
    let first = send(&mut h, &a);
    let second = send(&mut h, &b);
    assert_eq!(last_at(&first, 2), alone(&a));
    assert_eq!(last_at(&second, 2), alone(&b) + ser(512));
}

#[test]
fn disjoint_pairs_cross_the_crossbar_at_once() {
    let mut h = cluster(4);
    let a = Store {
        src: 0,
        dst: Some(1),
        vt: 1_000,
        len: 4096,
    };
    let b = Store {
        src: 2,
        dst: Some(3),
        vt: 1_000,
        len: 4096,
    };
    let c = Store {
        src: 1,
        dst: Some(0),
        vt: 1_000,
        len: 4096,
    };
    for st in [a, b, c] {
        assert_eq!(last_at(&send(&mut h, &st), st.dst.unwrap()), alone(&st));
    }
    assert_eq!(h.hub_counters().virtual_queueing_ns, 0);
}

#[test]
fn ten_page_replies_sent_at_once_arrive_one_after_another() {
    let mut h = cluster(2);
    let st = Store {
        src: 0,
        dst: Some(1),
        vt: 0,
        len: 8192,
    };
    let last = (0..10)
        .map(|_| last_at(&send(&mut h, &st), 1))
        .max()
        .unwrap();
    assert_eq!(last, 10 * ser(8192) + VIRTUAL_LINK.one_way_latency.0);
    // About 1.1 ms, not the 109 us each would take alone.
    assert!((1_090_000..1_100_000).contains(&last), "{last}");
}

#[test]
fn a_broadcast_takes_over_every_downlink() {
    // Node 3 receives nothing of node 0's broadcast; the crossbar is taken
    // over all the same (seed 000 s.2.2), so 1 -> 3 waits for it.
    let mut h = cluster(4);
    h.set_pct(NodeId(3), PageNumber(bcast_page(0)), PctEntry::default())
        .unwrap();
    let b = Store {
        src: 0,
        dst: None,
        vt: 1_000,
        len: 256,
    };
    let p = Store {
        src: 1,
        dst: Some(3),
        vt: 1_000,
        len: 64,
    };
    let got = send(&mut h, &b);
    assert!(got.iter().all(|d| d.0 != NodeId(3)));
    for n in [1, 2] {
        assert_eq!(last_at(&got, n), alone(&b), "the same time everywhere");
    }
    assert_eq!(last_at(&send(&mut h, &p), 3), alone(&p) + ser(256));
}

#[test]
fn a_broadcast_takes_over_from_point_to_point_traffic() {
    let mut h = cluster(4);
    // 1 -> 3 streams first. The broadcast from 0, ready as its first byte
    // reaches the hub, waits for the packet in flight on node 3's downlink
    // only, not for the stream; the stream's rest goes after it.
    let p = Store {
        src: 1,
        dst: Some(3),
        vt: 1_000,
        len: 512,
    };
    let b = Store {
        src: 0,
        dst: None,
        vt: 1_000,
        len: 64,
    };
    assert_eq!(last_at(&send(&mut h, &p), 3), alone(&p));
    let got = send(&mut h, &b);
    let packet = ser(32);
    for n in [1, 2, 3] {
        assert_eq!(last_at(&got, n), alone(&b) + packet);
    }
    // Node 3's downlink was held for the broadcast: what comes next to it
    // waits for the stream and the broadcast.
    let q = Store {
        src: 2,
        dst: Some(3),
        vt: 1_000,
        len: 8,
    };
    assert_eq!(
        last_at(&send(&mut h, &q), 3),
        alone(&q) + ser(512) + ser(64)
    );
}

#[test]
fn broadcasts_at_once_go_one_after_the_other() {
    let mut h = cluster(3);
    let a = Store {
        src: 0,
        dst: None,
        vt: 1_000,
        len: 256,
    };
    let b = Store {
        src: 1,
        dst: None,
        vt: 1_000,
        len: 256,
    };
    assert_eq!(last_at(&send(&mut h, &a), 2), alone(&a));
    assert_eq!(last_at(&send(&mut h, &b), 2), alone(&b) + ser(256));
}

#[test]
fn earlier_stamps_sent_later_in_real_time_are_not_charged_for_later_ones() {
    // A thread ahead in virtual time sent first; one behind sends after,
    // to the same receiver. It goes in the free time before.
    let mut h = cluster(3);
    let ahead = Store {
        src: 0,
        dst: Some(2),
        vt: 50_000,
        len: 8192,
    };
    let behind = Store {
        src: 1,
        dst: Some(2),
        vt: 10_000,
        len: 256,
    };
    send(&mut h, &ahead);
    assert_eq!(last_at(&send(&mut h, &behind), 2), alone(&behind));
}

#[test]
fn hostile_stamps_never_panic_and_far_future_ones_delay_nobody_now() {
    let mut h = cluster(3);
    for vt in [u64::MAX, u64::MAX - 1, 0, u64::MAX / 2, 1 << 62, 0, 5] {
        for dst in [Some(2), None] {
            let st = Store {
                src: 0,
                dst,
                vt,
                len: 8192,
            };
            for (_, _, at) in send(&mut h, &st) {
                assert!(at >= vt.saturating_add(VIRTUAL_LINK.one_way_latency.0));
            }
        }
    }
    // Node 0 stamps an hour ahead, a lot; node 1's present-time stores to
    // the same receiver are not held by it.
    let hour = 3_600_000_000_000;
    for i in 0..100 {
        send(
            &mut h,
            &Store {
                src: 0,
                dst: Some(2),
                vt: hour + i,
                len: 8192,
            },
        );
    }
    let now = Store {
        src: 1,
        dst: Some(2),
        vt: 2_000_000,
        len: 64,
    };
    assert_eq!(last_at(&send(&mut h, &now), 2), alone(&now));
    let b = Store {
        src: 1,
        dst: None,
        vt: 3_000_000,
        len: 64,
    };
    assert_eq!(last_at(&send(&mut h, &b), 2), alone(&b));
}

#[test]
fn calendars_stay_bounded_whatever_the_stamps() {
    let mut h = cluster(3);
    let mut vt = 0u64;
    for i in 0..20_000u64 {
        // Mostly forward, with jumps back and far ahead.
        vt = match i % 7 {
            0 => vt.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1),
            3 => vt / 2,
            _ => vt.saturating_add(1_000 + i % 13 * 97),
        };
        let src = u8::try_from(i % 3).unwrap();
        let dst = (i % 5 != 0).then(|| u8::try_from((i + 1) % 3).unwrap());
        send(
            &mut h,
            &Store {
                src,
                dst,
                vt,
                len: 8,
            },
        );
    }
    assert!(h.vlinks.intervals() <= h.vlinks.max_intervals());
}

/// Stores whose links are never busy at once: greedily keep, in virtual
/// order, those whose span on their links (send to arrival) overlaps no kept
/// store sharing a link with it. A broadcast shares every link.
fn without_conflicts(mut stores: Vec<Store>) -> Vec<Store> {
    stores.sort_by_key(|s| s.vt);
    let mut kept: Vec<Store> = Vec::new();
    let span = |s: &Store| (s.vt, alone(s) + 1);
    let shares = |a: &Store, b: &Store| {
        a.src == b.src || a.dst.is_none() || b.dst.is_none() || a.dst == b.dst
    };
    for s in stores {
        let (s0, s1) = span(&s);
        let clash = kept.iter().any(|k| {
            let (k0, k1) = span(k);
            shares(k, &s) && s0 < k1 && k0 < s1
        });
        if !clash {
            kept.push(s);
        }
    }
    kept
}

fn any_store(nodes: u8) -> impl Strategy<Value = Store> {
    (
        0..nodes,
        0..nodes,
        any::<bool>(),
        0u64..2_000_000,
        1u32..3_000,
    )
        .prop_map(move |(src, d, bcast, vt, len)| Store {
            src,
            dst: (!bcast).then_some(if d == src { (d + 1) % nodes } else { d }),
            vt,
            len,
        })
}

proptest! {
    /// Where no two stores need a link at the same virtual time, the real
    /// order they reach the hub in changes nothing: each arrives as if alone.
    #[test]
    fn without_conflicts_the_real_order_does_not_matter(
        shuffled in proptest::collection::vec(any_store(4), 1..40)
            .prop_map(without_conflicts)
            .prop_flat_map(|v| Just(v).prop_shuffle()),
    ) {
        let mut h = cluster(4);
        for st in &shuffled {
            for (_, through, at) in send(&mut h, st) {
                prop_assert_eq!(at, arrival(Nanos(st.vt), through).0);
            }
        }
        prop_assert_eq!(h.hub_counters().virtual_queueing_ns, 0);
    }

    /// Any stores, any stamps (hostile ones included), any order: nothing
    /// arrives before it would alone, and the calendars stay bounded.
    #[test]
    fn contention_only_ever_delays(
        stores in proptest::collection::vec(
            (any_store(4), prop_oneof![
                Just(0u64), Just(u64::MAX), any::<u64>(), 0u64..5_000_000
            ]),
            1..60,
        ),
    ) {
        let mut h = cluster(4);
        for (st, vt) in stores {
            let st = Store { vt, ..st };
            for (_, through, at) in send(&mut h, &st) {
                prop_assert!(at >= arrival(Nanos(st.vt), through).0);
            }
        }
        prop_assert!(h.vlinks.intervals() <= h.vlinks.max_intervals());
    }

    /// A burst to one receiver, all sent at one virtual time, in any real
    /// order: the downlink carries it back to back, so the last arrival is
    /// the same, and nothing arrives before it would alone.
    #[test]
    fn a_burst_to_one_receiver_ends_at_the_same_time_in_any_order(
        (stores, shuffled) in proptest::collection::vec((0u8..3, 1u32..5_000), 1..12)
            .prop_map(|lens| {
                lens.into_iter()
                    .map(|(src, len)| Store { src, dst: Some(3), vt: 10_000, len })
                    .collect::<Vec<_>>()
            })
            .prop_flat_map(|v| (Just(v.clone()), Just(v).prop_shuffle())),
    ) {
        let mut last = Vec::new();
        for order in [&stores, &shuffled] {
            let mut h = cluster(4);
            let mut end = 0;
            for st in order {
                for (_, through, at) in send(&mut h, st) {
                    prop_assert!(at >= arrival(Nanos(st.vt), through).0);
                    end = end.max(at);
                }
            }
            last.push(end);
        }
        // Back to back on the downlink from the first byte: the uplinks
        // started together, so the downlink never waits for data.
        let total: u64 = stores.iter().map(|s| ser(u64::from(s.len))).sum();
        prop_assert_eq!(last[0], 10_000 + total + VIRTUAL_LINK.one_way_latency.0);
        prop_assert_eq!(last[0], last[1]);
    }
}

/// Seed 001's cLAN (`--link clan`): the same hub, its own timing, and no
/// broadcast.
mod clan {
    use super::*;
    use crate::vtime::VirtualLink;

    fn clan_cluster(nodes: u8) -> Hub {
        cluster_on(crate::timing::LinkTiming::CLAN, nodes)
    }

    fn clan_ser(bytes: u64) -> u64 {
        VirtualLink::Clan.ser(bytes)
    }

    #[test]
    fn a_lone_store_arrives_at_clan_timing() {
        let mut h = clan_cluster(2);
        let st = Store {
            src: 0,
            dst: Some(1),
            vt: 5_000,
            len: 4096,
        };
        let at = last_at(&send(&mut h, &st), 1);
        assert_eq!(at, VirtualLink::Clan.arrival(Nanos(5_000), 4096).0);
        // Slower to start (8.2 us against 2.9 us), faster to stream (101
        // MB/s against 75 MB/s): a 4 KiB page arrives sooner than on MC2.
        assert!(at < alone(&st), "{at} {}", alone(&st));
    }

    #[test]
    fn a_broadcast_leaves_the_sender_once_per_receiver() {
        // Memory Channel 2: every receiver has the page at the same time.
        let st = Store {
            src: 0,
            dst: None,
            vt: 0,
            len: 1024,
        };
        let mut mc2 = cluster(4);
        let d = send(&mut mc2, &st);
        let mc2_at: Vec<u64> = (1..4).map(|n| last_at(&d, n)).collect();
        assert!(mc2_at.iter().all(|&a| a == mc2_at[0]), "{mc2_at:?}");
        // cLAN: three copies up one port, each a page's serialisation
        // after the one before.
        let mut h = clan_cluster(4);
        let d = send(&mut h, &st);
        let mut at: Vec<u64> = (1..4).map(|n| last_at(&d, n)).collect();
        at.sort_unstable();
        let first = VirtualLink::Clan.arrival(Nanos(0), 1024).0;
        assert_eq!(
            at,
            vec![first, first + clan_ser(1024), first + 2 * clan_ser(1024)]
        );
    }

    #[test]
    fn two_senders_to_one_receiver_share_its_downlink() {
        let mut h = clan_cluster(3);
        let a = Store {
            src: 0,
            dst: Some(2),
            vt: 0,
            len: 8192,
        };
        let b = Store { src: 1, ..a };
        let first = last_at(&send(&mut h, &a), 2);
        let second = last_at(&send(&mut h, &b), 2);
        assert_eq!(first, VirtualLink::Clan.arrival(Nanos(0), 8192).0);
        assert_eq!(second, first + clan_ser(8192));
    }
}
