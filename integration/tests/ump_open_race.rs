//! A channel opened while the task's background writer looks at the
//! directory (issue 41, docs/pvm.md "Known problems"): the writer read its
//! copy of the directory before the channel's record was written and
//! listed the task's channels after the channel was added, took the
//! missing record for a peer that had closed, and the channel was closed
//! with its queued message. PVM's multicast to freshly spawned tasks hung
//! on it (the message never came). Here one task opens channels to
//! registered endpoints of other nodes and starts a write on each at once,
//! as pvm_mcast does, while its writer is busy with a channel whose peer
//! has not registered yet (so it keeps reading the directory): every write
//! must arrive.

use std::sync::Arc;
use std::time::Duration;

use firmware_model::DeliveryMode;
use integration::ump_rig::message;
use integration::VirtualCluster;
use mc_api::{Barrier, MemoryChannel};
use ump::{Config, Event, Node, Transport, Ump};

const T: Duration = Duration::from_secs(30);
const ROUNDS: u64 = 12;
/// Tasks (threads) on node 0 that open, each with its own writer.
const OPENERS: u64 = 2;
const LISTENERS: u8 = 4;
/// Channels a round opens to each listener's endpoint.
const EACH: u64 = 3;
const LEN: usize = 64;

fn server(node: u8) -> u64 {
    0x5e00 + u64::from(node)
}

/// The endpoint nobody registers until the round's other messages arrived.
fn late(round: u64, opener: u64) -> u64 {
    0x1a7e_0000 + (round << 4) + opener
}

/// One round of opener `t`: a write its writer keeps waiting on (its
/// peer is not registered yet, so the writer reads the directory again
/// and again), then a channel and a write to each listener's endpoint
/// `EACH` times, as pvm_mcast does to freshly spawned tasks. Returns the
/// late write once every other write arrived.
fn open_round(u: &Ump, round: u64, t: u64) -> ump::PendingWrite {
    let base = (round << 12) + (t << 8);
    let lc = u
        .open(0x7000_0000 + base, late(round, t), Transport::Auto)
        .unwrap();
    let lw = u.nbwrite(lc, Arc::new(message(base, LEN))).unwrap();
    let mut pending = Vec::new();
    for k in 0..EACH {
        for n in 1..=LISTENERS {
            let local = 0x8000_0000 + base + (k << 4) + u64::from(n);
            let ch = u.open(local, server(n), Transport::Auto).unwrap();
            let msg = message(round + u64::from(n), LEN);
            pending.push((n, u.nbwrite(ch, Arc::new(msg)).unwrap()));
        }
    }
    for (n, w) in pending {
        match w.wait(T) {
            Ok(true) => {}
            other => panic!(
                "round {round}, opener {t}: the write to node {n}'s endpoint did not arrive: {other:?}"
            ),
        }
    }
    lw
}

/// Wait for `count` messages on any channel of `u`, each `want`.
fn receive(u: &Ump, count: u64, want: &[u8], what: &str) {
    let mut got = 0;
    while got < count {
        match u.wait(None, T).unwrap() {
            None => panic!("{what}: nothing came for {T:?}"),
            Some(Event::Opened(_)) => {}
            Some(Event::Message(ch)) => {
                let mut buf = vec![0u8; want.len()];
                let n = u.read(ch, &mut buf).unwrap();
                assert_eq!((n, &buf[..]), (want.len(), want), "{what}");
                got += 1;
            }
            Some(Event::Closed(ch)) => {
                panic!("{what}: the opener closed channel {ch} before its message came")
            }
        }
    }
}

#[test]
fn writes_on_channels_opened_while_the_writer_reads_the_directory_all_arrive() {
    let vc = VirtualCluster::with_delivery(1 + LISTENERS, DeliveryMode::Eager);
    vc.on_every_node(|mc: MemoryChannel| {
        let me = mc.node_id().0;
        // Small rings: node 0 keeps every round's channels.
        let config = Config {
            ring_bytes: 4096,
            fragment_bytes: 1024,
            region_bytes: 8 << 20,
            ..Config::default()
        };
        let node = Node::open(&mc, config).unwrap();
        let mut b = Barrier::new(&mc, 0x554d_0041).unwrap();
        let tasks: Vec<Ump> = if me == 0 {
            (0..OPENERS).map(|_| Ump::init(&node)).collect()
        } else {
            let u = Ump::init(&node);
            u.listen(server(me), Transport::Auto).unwrap();
            vec![u]
        };
        b.wait(T).unwrap();
        for round in 0..ROUNDS {
            if me == 0 {
                let late: Vec<ump::PendingWrite> = std::thread::scope(|s| {
                    let hs: Vec<_> = (0..OPENERS)
                        .zip(&tasks)
                        .map(|(t, u)| s.spawn(move || open_round(u, round, t)))
                        .collect();
                    hs.into_iter().map(|h| h.join().unwrap()).collect()
                });
                b.wait(T).unwrap();
                for w in late {
                    assert!(matches!(w.wait(T), Ok(true)), "round {round}: a late write");
                }
            } else {
                let u = &tasks[0];
                let what = format!("round {round}, node {me}");
                receive(
                    u,
                    OPENERS * EACH,
                    &message(round + u64::from(me), LEN),
                    &what,
                );
                b.wait(T).unwrap();
                if me == 1 {
                    // The late endpoints register; their messages come.
                    for t in 0..OPENERS {
                        u.listen(late(round, t), Transport::Auto).unwrap();
                        let base = (round << 12) + (t << 8);
                        receive(u, 1, &message(base, LEN), &format!("{what}, late {t}"));
                        u.unlisten(late(round, t)).unwrap();
                    }
                }
            }
            b.wait(T).unwrap();
        }
        for u in tasks {
            u.exit().unwrap();
        }
    });
}
