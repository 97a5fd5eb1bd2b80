//! UMP multicast through outbufs (seed 004: "lock-controlled single-writer,
//! multiple-reader buffers ... written only by task 1 but mapped for
//! transmission to all other cluster members"): one copy of a multicast
//! message, references down each channel, in order with the channels'
//! other messages; every size from 0 bytes past the outbuf's slot limit
//! (larger ones stream per channel); readers that join late; eagerly and
//! with skewed delivery; and under drops and corruption, where no reader
//! takes damaged or missing data for a message.

use std::sync::Arc;
use std::time::Duration;

use firmware_model::{FaultCommand, PacketFault};
use integration::delivery::{for_each_delivery, for_each_delivery_up_to};
use integration::ump_rig::{degrade_link_0_to_1, message, small_rings};
use integration::VirtualCluster;
use mc_api::{Barrier, MemoryChannel};
use ump::{ChannelId, Config, Event, Node, Transport, Ump, UmpError, OUTBUF_MAX_PAYLOAD};

const T: Duration = Duration::from_secs(60);

const SIZES: &[usize] = &[
    0,
    1,
    256,
    1000,
    1023,
    1024,
    1025,
    9000,
    OUTBUF_MAX_PAYLOAD,
    OUTBUF_MAX_PAYLOAD + 1,
    40_000,
];

/// Node 0 multicasts every size, several times over (more than the outbuf
/// holds, so its slots are reused), to two channels on each of nodes 1 and
/// 2, with a plain write between multicasts; node 2 opens its channels
/// late. Every reader gets every message, in order, and the ones that fit
/// the outbuf went through it once.
#[test]
fn multicasts_go_through_the_outbuf_once_in_order_to_late_joiners() {
    for_each_delivery(&[5, 6], |mode| {
        let vc = VirtualCluster::with_delivery(3, mode);
        vc.on_every_node(move |mc: MemoryChannel| {
            let me = u64::from(mc.node_id().0);
            let node = Node::open(&mc, small_rings()).unwrap();
            let u = Ump::init(&node);
            let mut barrier = Barrier::new(&mc, 0x554f_0001).unwrap();
            if me == 2 {
                // The late joiner: its channels open after node 0 started
                // waiting on them.
                std::thread::sleep(Duration::from_millis(50));
            }
            let ends = |n: u64| [10 * n, 10 * n + 1];
            let chans: Vec<ChannelId> = if me == 0 {
                [1, 2]
                    .iter()
                    .flat_map(|&n| ends(n))
                    .map(|e| u.open(e + 1000, e, Transport::Auto).unwrap())
                    .collect()
            } else {
                ends(me)
                    .iter()
                    .map(|&e| u.open(e, e + 1000, Transport::Auto).unwrap())
                    .collect()
            };
            const ROUNDS: u64 = 3;
            let mut through = 0;
            for round in 0..ROUNDS {
                for (i, &len) in SIZES.iter().enumerate() {
                    let tag = round * 100 + i as u64;
                    if me == 0 {
                        u.mcast(&chans, &message(tag, len)).unwrap();
                        u.write(chans[0], &tag.to_le_bytes()).unwrap();
                        if (ump::OUTBUF_MIN_PAYLOAD..=OUTBUF_MAX_PAYLOAD).contains(&len) {
                            through += 1;
                        }
                    } else {
                        for (k, &ch) in chans.iter().enumerate() {
                            let mut buf = vec![0u8; 50_000];
                            let n = u.read(ch, &mut buf).unwrap();
                            assert!(
                                buf[..n] == message(tag, len)[..],
                                "{mode}: node {me} channel {k}: message {tag} ({len} B) wrong"
                            );
                        }
                        if me == 1 {
                            // The plain write after the multicast comes
                            // after it on its channel.
                            let mut buf = [0u8; 8];
                            assert_eq!(u.read(chans[0], &mut buf).unwrap(), 8);
                            assert_eq!(buf, tag.to_le_bytes());
                        }
                    }
                }
            }
            // Forty of the largest: 160 KiB through the
            // 64 KiB outbuf, so its slots are reused as readers free them.
            for m in 0..40u64 {
                let msg = message(9000 + m, OUTBUF_MAX_PAYLOAD);
                if me == 0 {
                    u.mcast(&chans, &msg).unwrap();
                    through += 1;
                } else {
                    for &ch in &chans {
                        let mut buf = vec![0u8; OUTBUF_MAX_PAYLOAD];
                        assert_eq!(u.read(ch, &mut buf).unwrap(), OUTBUF_MAX_PAYLOAD);
                        assert!(
                            buf == msg,
                            "{mode}: node {me}: reused slot, message {m} wrong"
                        );
                    }
                }
            }
            if me == 0 {
                assert_eq!(u.info().outbuf_multicasts, through);
            }
            barrier.wait(T).unwrap();
            u.exit().unwrap();
        });
    });
}

/// A reader whose buffer is too small for a message behind a reference is
/// told so, and reads it afterwards; `peek` and `nbread` see the real
/// message too.
#[test]
fn a_referenced_message_is_read_like_any_other() {
    let vc = VirtualCluster::with_delivery(2, firmware_model::DeliveryMode::Eager);
    vc.on_every_node(|mc: MemoryChannel| {
        let me = u64::from(mc.node_id().0);
        let node = Node::open(&mc, small_rings()).unwrap();
        let u = Ump::init(&node);
        let chans: Vec<ChannelId> = (0..3)
            .map(|k| u.open(2 * k + me, 2 * k + 1 - me, Transport::Auto).unwrap())
            .collect();
        let msg = message(7, 3000);
        if me == 0 {
            u.mcast(&chans, &msg).unwrap();
            assert_eq!(u.info().outbuf_multicasts, 1);
        } else {
            let mut small = vec![0u8; 100];
            assert!(matches!(
                u.read(chans[0], &mut small),
                Err(UmpError::BufferTooSmall { len: 3000, .. })
            ));
            assert_eq!(u.peek(chans[0]).unwrap(), Some((3000, 0)));
            let mut buf = vec![0u8; 4000];
            assert_eq!(u.read(chans[0], &mut buf).unwrap(), 3000);
            assert_eq!(&buf[..3000], &msg[..]);
            let p = u.nbread(chans[1], &mut buf, 1).unwrap().unwrap();
            assert_eq!((p.copied, p.len, p.remaining), (3000, 3000, 0));
            assert_eq!(&buf[..3000], &msg[..]);
            while !matches!(u.wait(Some(chans[2]), T).unwrap(), Some(Event::Message(_))) {}
            assert_eq!(u.read(chans[2], &mut buf).unwrap(), 3000);
            assert_eq!(&buf[..3000], &msg[..]);
        }
        Barrier::new(&mc, 0x554f_0002).unwrap().wait(T).unwrap();
        u.exit().unwrap();
    });
}

/// Drops and corruption on node 0's packets to node 1 while node 0
/// multicasts to two channels there: every message a reader takes is the
/// one written, and the losses are reported (damaged), never passed on.
#[test]
fn losses_in_the_outbuf_are_reported_never_passed_on() {
    for_each_delivery_up_to(&[31], 1, |mode| {
        let vc = VirtualCluster::with_delivery(2, mode);
        let cluster = vc.cluster.clone();
        let step = Arc::new(std::sync::Barrier::new(2));
        const ROUNDS: u64 = 10;
        const MESSAGES: u64 = 30;
        const LEN: usize = 1500;
        let out = vc.on_every_node(move |mc: MemoryChannel| {
            let me = u64::from(mc.node_id().0);
            let config = Config {
                ring_bytes: 8192,
                fragment_bytes: 2048,
                timeout: Duration::from_secs(3),
                ..Config::default()
            };
            let node = Node::open(&mc, config).unwrap();
            let u = Ump::init(&node);
            let (mut good, mut damaged, mut other) = (0u64, 0u64, Vec::new());
            for round in 0..ROUNDS {
                let chans: Vec<ChannelId> = (0..2)
                    .map(|k| {
                        let e = 10 * round + 2 * k;
                        u.open(e + me, e + 1 - me, Transport::MemoryChannel)
                            .unwrap()
                    })
                    .collect();
                for &ch in &chans {
                    while !matches!(u.wait(Some(ch), T).unwrap(), Some(Event::Opened(_))) {}
                }
                step.wait();
                if me == 0 {
                    degrade_link_0_to_1(
                        &cluster,
                        &[(PacketFault::Drop, 0.002), (PacketFault::Corrupt, 0.002)],
                    );
                }
                step.wait();
                let mut stopped = [false; 2];
                for m in 0..MESSAGES {
                    let msg = message(round * 1000 + m, LEN);
                    if me == 0 {
                        if u.mcast(&chans, &msg).is_err() {
                            break;
                        }
                        continue;
                    }
                    for (k, &ch) in chans.iter().enumerate() {
                        if stopped[k] {
                            continue;
                        }
                        let mut buf = vec![0u8; LEN];
                        match u.read(ch, &mut buf) {
                            Ok(n) => {
                                assert!(
                                    n == LEN && buf == msg,
                                    "{mode}: round {round}: message {m} taken with wrong bytes"
                                );
                                good += 1;
                            }
                            Err(UmpError::Damaged { .. }) => {
                                damaged += 1;
                                stopped[k] = true;
                            }
                            Err(e) => {
                                other.push(e.to_string());
                                stopped[k] = true;
                            }
                        }
                    }
                }
                step.wait();
                if me == 0 {
                    cluster.apply_fault(FaultCommand::ClearPackets).unwrap();
                }
                step.wait();
                for ch in chans {
                    u.close(ch).unwrap();
                }
                step.wait();
            }
            if me == 0 {
                assert!(u.info().outbuf_multicasts > 0);
            }
            (good, damaged, other)
        });
        let (good, damaged, other) = &out[1];
        eprintln!("{mode}: good {good}, damaged {damaged}, other {other:?}");
        assert!(
            *damaged > 0 || !other.is_empty(),
            "{mode}: faults at 0.2% hit no multicast"
        );
    });
}
