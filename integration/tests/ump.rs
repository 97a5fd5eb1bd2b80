//! UMP (seed 004's Universal Message Passing, `guest-driver/ump`) on
//! virtual clusters against the real backend: channels opened in any
//! order, by either side, late, or accepted by a registered endpoint; many
//! channels per task and several tasks (threads) per node, over shared
//! memory between a node's tasks and Memory Channel between nodes, chosen
//! by where the peer is; messages from 0 bytes to several MiB through
//! rings smaller than they are; non-blocking writes overlapping reads;
//! multicast. Eagerly and with skewed delivery (docs/device.md s.19).
//!
//! The fault plans (drops and corruption) are in `ump_faults.rs`.

use std::sync::Arc;
use std::time::Duration;

use integration::delivery::{for_each_delivery, for_each_delivery_up_to};
use integration::ump_rig::{message, small_rings};
use integration::VirtualCluster;
use mc_api::{Barrier, MemoryChannel};
use ump::{ChannelId, Config, Event, Node, Transport, Ump, UmpError};

const T: Duration = Duration::from_secs(60);

fn wait_opened(u: &Ump, ch: ChannelId) {
    loop {
        match u.wait(Some(ch), T).unwrap() {
            Some(Event::Opened(c)) if c == ch => return,
            Some(_) => {}
            None => panic!("channel {ch} never opened"),
        }
    }
}

fn read_msg(u: &Ump, ch: ChannelId, cap: usize) -> Vec<u8> {
    let mut buf = vec![0u8; cap];
    let n = u.read(ch, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

const SIZES: &[usize] = &[0, 1, 7, 8, 9, 100, 487, 4096, 10_000, 65_536, 300_001];

/// Two nodes, one task each: every size both ways through 4 KiB rings,
/// the larger ones streamed while the peer reads.
#[test]
fn messages_of_every_size_cross_between_two_nodes_through_small_rings() {
    for_each_delivery(&[3, 4], |mode| {
        let vc = VirtualCluster::with_delivery(2, mode);
        vc.on_every_node(|mc: MemoryChannel| {
            let me = u64::from(mc.node_id().0);
            let node = Node::open(&mc, small_rings()).unwrap();
            let u = Ump::init(&node);
            let ch = u.open(100 + me, 101 - me, Transport::Auto).unwrap();
            if me == 0 {
                wait_opened(&u, ch);
            }
            for (i, &len) in SIZES.iter().enumerate() {
                if me == 0 {
                    u.write(ch, &message(i as u64, len)).unwrap();
                    let back = read_msg(&u, ch, len);
                    assert_eq!(back, message(1000 + i as u64, len), "size {len}");
                } else {
                    let got = read_msg(&u, ch, 400_000);
                    assert_eq!(got, message(i as u64, len), "size {len}");
                    u.write(ch, &message(1000 + i as u64, len)).unwrap();
                }
            }
            let info = u.info();
            assert_eq!(info.channels[0].transport, Some(Transport::MemoryChannel));
            assert_eq!(info.channels[0].messages_sent, SIZES.len() as u64);
            u.exit().unwrap();
        });
    });
}

/// A message of several MiB, both ways at once with non-blocking writes
/// (the background writers stream them while both tasks read: no
/// deadlock though each message is a thousand rings long).
#[test]
fn several_mib_both_ways_at_once_with_non_blocking_writes() {
    for_each_delivery_up_to(&[5], 1, |mode| {
        let vc = VirtualCluster::with_delivery(2, mode);
        vc.on_every_node(|mc: MemoryChannel| {
            let me = u64::from(mc.node_id().0);
            let node = Node::open(&mc, small_rings()).unwrap();
            let u = Ump::init(&node);
            let ch = u
                .open(200 + me, 201 - me, Transport::MemoryChannel)
                .unwrap();
            let len = 3 << 20;
            let out: Arc<Vec<u8>> = Arc::new(message(me, len));
            let w = u.nbwrite(ch, out).unwrap();
            let small = u.nbwrite(ch, Arc::new(message(10 + me, 5))).unwrap();
            assert_eq!(read_msg(&u, ch, len), message(1 - me, len));
            assert_eq!(read_msg(&u, ch, 5), message(11 - me, 5));
            assert!(w.wait(T).unwrap() && small.wait(T).unwrap());
            u.exit().unwrap();
        });
    });
}

/// Node 0 runs three tasks (threads), node 1 two. Every task opens a
/// channel to every other task, in an order of its own; tasks on one node
/// get shared memory, the others Memory Channel. Then each sends every
/// peer a message and reads one from each.
#[test]
fn every_task_talks_to_every_other_over_the_transport_its_place_chooses() {
    for_each_delivery(&[6], |mode| {
        let vc = VirtualCluster::with_delivery(2, mode);
        vc.on_every_node(|mc: MemoryChannel| {
            let me = mc.node_id().0;
            let node = Node::open(&mc, small_rings()).unwrap();
            // Endpoints: node*10 + task.
            let all: Vec<u64> = vec![0, 1, 2, 10, 11];
            let mine: Vec<u64> = all
                .iter()
                .copied()
                .filter(|e| e / 10 == u64::from(me))
                .collect();
            let threads: Vec<_> = mine
                .iter()
                .map(|&ep| {
                    let node = node.clone();
                    let all = all.clone();
                    std::thread::spawn(move || {
                        let u = Ump::init(&node);
                        let mut peers: Vec<u64> = all.into_iter().filter(|&p| p != ep).collect();
                        // Each task opens in its own order.
                        peers.rotate_left((ep % 4) as usize);
                        let chans: Vec<(u64, ChannelId)> = peers
                            .iter()
                            .map(|&p| (p, u.open(ep, p, Transport::Auto).unwrap()))
                            .collect();
                        for &(p, ch) in &chans {
                            u.write(
                                ch,
                                &message(ep * 100 + p, 3000 + firmware_model::to_usize(p)),
                            )
                            .unwrap();
                        }
                        for &(p, ch) in &chans {
                            assert_eq!(
                                read_msg(&u, ch, 10_000),
                                message(p * 100 + ep, 3000 + firmware_model::to_usize(ep)),
                                "{p} -> {ep}"
                            );
                        }
                        let info = u.info();
                        for (c, &(p, _)) in info.channels.iter().zip(&chans) {
                            let local = p / 10 == ep / 10;
                            let want = if local {
                                Transport::SharedMemory
                            } else {
                                Transport::MemoryChannel
                            };
                            assert_eq!(c.transport, Some(want), "{ep} <-> {p}");
                        }
                        u
                    })
                })
                .collect();
            let tasks: Vec<Ump> = threads.into_iter().map(|t| t.join().unwrap()).collect();
            // Nobody closes before everybody has read.
            Barrier::new(&mc, 0x554d_0001).unwrap().wait(T).unwrap();
            for u in tasks {
                u.exit().unwrap();
            }
        });
    });
}

/// A server registers an endpoint; clients with handles it does not know
/// open channels to it, some before it registered (late), some after; it
/// learns of each from `wait` and answers each.
#[test]
fn a_registered_endpoint_accepts_clients_it_does_not_know() {
    for_each_delivery(&[7], |mode| {
        let vc = VirtualCluster::with_delivery(3, mode);
        vc.on_every_node(|mc: MemoryChannel| {
            let me = mc.node_id().0;
            let node = Node::open(&mc, small_rings()).unwrap();
            let mut b = Barrier::new(&mc, 0x554d_0002).unwrap();
            const SERVER: u64 = 0xfeed;
            if me == 0 {
                let u = Ump::init(&node);
                // Node 1's client opens before the server registers.
                b.wait(T).unwrap();
                u.listen(SERVER, Transport::Auto).unwrap();
                b.wait(T).unwrap();
                let mut served = 0;
                let mut opened = Vec::new();
                while served < 4 {
                    match u.wait(None, T).unwrap().expect("an event") {
                        Event::Opened(ch) => opened.push(ch),
                        Event::Message(ch) => {
                            let m = read_msg(&u, ch, 100);
                            u.write(ch, &[&m[..], b"!"].concat()).unwrap();
                            served += 1;
                        }
                        Event::Closed(_) => {}
                    }
                }
                assert_eq!(opened.len(), 4);
                b.wait(T).unwrap();
                u.exit().unwrap();
            } else {
                // Two client tasks per node, one of them a thread.
                let client = |ep: u64| {
                    let u = Ump::init(&node);
                    let ch = u.open(ep, SERVER, Transport::Auto).unwrap();
                    u.write(ch, &ep.to_le_bytes()).unwrap();
                    let r = read_msg(&u, ch, 100);
                    assert_eq!(r, [&ep.to_le_bytes()[..], b"!"].concat());
                    u
                };
                let early = (me == 1).then(|| Ump::init(&node));
                let early_ch = early.as_ref().map(|u| {
                    u.open(0x100 + u64::from(me), SERVER, Transport::Auto)
                        .unwrap()
                });
                b.wait(T).unwrap();
                b.wait(T).unwrap();
                let node2 = node.clone();
                let _ = node2;
                let a = client(0x200 + u64::from(me));
                let c = if let (Some(u), Some(ch)) = (&early, early_ch) {
                    u.write(ch, b"early").unwrap();
                    assert_eq!(read_msg(u, ch, 100), b"early!");
                    None
                } else {
                    Some(client(0x300 + u64::from(me)))
                };
                b.wait(T).unwrap();
                a.exit().unwrap();
                if let Some(c) = c {
                    c.exit().unwrap();
                }
                if let Some(e) = early {
                    e.exit().unwrap();
                }
            }
        });
    });
}

/// Many channels per task: one task on node 0 with a channel to each of
/// 24 endpoints of node 1's task; a multicast reaches all, then each
/// answers on its own.
#[test]
fn a_multicast_reaches_every_channel_of_a_list() {
    for_each_delivery(&[8], |mode| {
        let vc = VirtualCluster::with_delivery(2, mode);
        vc.on_every_node(|mc: MemoryChannel| {
            let me = mc.node_id().0;
            let node = Node::open(&mc, small_rings()).unwrap();
            let u = Ump::init(&node);
            const N: u64 = 24;
            let chans: Vec<ChannelId> = (0..N)
                .map(|k| {
                    if me == 0 {
                        u.open(k, 1000 + k, Transport::Auto).unwrap()
                    } else {
                        u.open(1000 + k, k, Transport::Auto).unwrap()
                    }
                })
                .collect();
            let msg = message(42, 9000);
            if me == 0 {
                u.mcast(&chans, &msg).unwrap();
                for (k, &ch) in chans.iter().enumerate() {
                    assert_eq!(read_msg(&u, ch, 64), (k as u64).to_le_bytes());
                }
            } else {
                for (k, &ch) in chans.iter().enumerate() {
                    assert_eq!(read_msg(&u, ch, 10_000), msg);
                    u.write(ch, &(k as u64).to_le_bytes()).unwrap();
                }
            }
            assert!(matches!(
                u.mcast(&[chans[0], chans[0]], b"x"),
                Err(UmpError::Config(_))
            ));
            Barrier::new(&mc, 0x554d_0003).unwrap().wait(T).unwrap();
            u.exit().unwrap();
        });
    });
}

/// Closing: the peer reads what was written before the close, then sees
/// the close (an event, then `Closed` from a read and a write); the rings
/// are given back, so channels can be opened and closed far more often
/// than the region has room for at once.
#[test]
fn a_close_comes_after_the_messages_and_gives_the_rings_back() {
    let vc = VirtualCluster::with_delivery(2, firmware_model::DeliveryMode::Eager);
    vc.on_every_node(|mc: MemoryChannel| {
        let me = u64::from(mc.node_id().0);
        // Room for 4 rings at once; 40 channels one after the other.
        let config = Config {
            region_bytes: 4 * (4096 + 64),
            ..small_rings()
        };
        let node = Node::open(&mc, config).unwrap();
        let u = Ump::init(&node);
        for round in 0..40u64 {
            let ch = u
                .open(10 * round + me, 10 * round + 1 - me, Transport::Auto)
                .unwrap();
            if me == 0 {
                u.write(ch, &message(round, 100)).unwrap();
                u.close(ch).unwrap();
                assert!(matches!(u.write(ch, b"x"), Err(UmpError::NoSuchChannel(_))));
            } else {
                assert_eq!(read_msg(&u, ch, 100), message(round, 100));
                let mut buf = [0u8; 8];
                assert!(matches!(u.read(ch, &mut buf), Err(UmpError::Closed(_))));
                assert!(matches!(u.write(ch, b"x"), Err(UmpError::Closed(_))));
                u.close(ch).unwrap();
            }
        }
        Barrier::new(&mc, 0x554d_0004).unwrap().wait(T).unwrap();
        assert_eq!(node.region_usage().0, 0, "every ring given back");
    });
}

/// Misuse gets clear errors and costs nothing.
#[test]
fn misuse_is_refused_with_the_reason() {
    let vc = VirtualCluster::with_delivery(1, firmware_model::DeliveryMode::Eager);
    vc.on_every_node(|mc: MemoryChannel| {
        let bad = Config {
            ring_bytes: 1000,
            ..Config::default()
        };
        assert!(matches!(Node::open(&mc, bad), Err(UmpError::Config(_))));
        let node = Node::open(&mc, small_rings()).unwrap();
        let u = Ump::init(&node);
        assert!(matches!(
            u.open(5, 5, Transport::Auto),
            Err(UmpError::SameEndpoint(5))
        ));
        let ch = u.open(1, 2, Transport::Auto).unwrap();
        assert!(matches!(
            u.open(1, 2, Transport::Auto),
            Err(UmpError::ChannelExists { .. })
        ));
        // A pending channel: nothing to wait for yet.
        assert_eq!(u.wait(Some(ch), Duration::from_millis(5)).unwrap(), None);
        assert!(matches!(
            u.read(ChannelId(999), &mut [0u8; 4]),
            Err(UmpError::NoSuchChannel(_))
        ));
        // The other end, in a second task: over shared memory; a buffer
        // too small leaves the message where it is.
        let v = Ump::init(&node);
        let back = v.open(2, 1, Transport::Auto).unwrap();
        u.write(ch, &[7u8; 100]).unwrap();
        let mut small = [0u8; 10];
        assert!(matches!(
            v.read(back, &mut small),
            Err(UmpError::BufferTooSmall { len: 100, .. })
        ));
        assert_eq!(read_msg(&v, back, 100), vec![7u8; 100]);
        // Shared memory cannot reach another node; Memory Channel between
        // two tasks of one node works (loopback).
        let w = Ump::init(&node);
        let x = w.open(3, 4, Transport::MemoryChannel).unwrap();
        let y = v.open(4, 3, Transport::Auto).unwrap();
        w.write(x, b"loop").unwrap();
        assert_eq!(read_msg(&v, y, 8), b"loop");
        assert_eq!(
            v.info()
                .channels
                .iter()
                .find(|c| c.id == y)
                .unwrap()
                .transport,
            Some(Transport::MemoryChannel)
        );
        u.exit().unwrap();
        v.exit().unwrap();
        w.exit().unwrap();
    });
}
