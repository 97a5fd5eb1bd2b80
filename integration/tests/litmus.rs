//! Litmus tests of the memory model (docs/device.md section 19), each under
//! eager and skewed delivery, on virtual nodes against the real backend.
//!
//! What the network promises (seed 000 s.2.2): "The network guarantees that
//! broadcast messages will be observed in the same order by all receivers,
//! and that all messages from a single source will be observed in the order
//! sent"; stores are posted ("All I/O operations are fully pipelined"); an
//! ACK-page check (imc_ckerrcnt) proves arrival, and imc_rderrcnt "is not
//! guaranteed to be up-to-date" (seed 004, Table 1). Each test below checks
//! one promise, under eager delivery and skewed delivery with several seeds
//! (`integration::delivery`: a few here, 16 with `MC_TEST_EXHAUSTIVE=1`).
//!
//! And the other side: two planted bugs, programs that are wrong on the
//! hardware (one trusts that a returned store has arrived, one polls the
//! first word of a multi-packet store). Skewed delivery must catch each
//! within a bounded number of seeds; the test says how many it took, and runs
//! the corrected program on every seed it tried.
//!
//! Tests at the driver level (`Adapter`, `TxFifo`, `ReceiveFrames`) look at
//! the network itself; the others are programs on the Memory Channel API.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use firmware_model::{DeliveryMode, FaultCommand, FaultScope, NodeId, PacketFault, PctEntry, Rate};
use integration::delivery::{for_each_delivery, skewed_seeds};
use integration::VirtualCluster;
use mc_api::{Barrier, MemoryChannel, Sharing};
use mc_driver::{Adapter, ReceiveFrames, TxFifo, VhostUserTransport};

const PAGE: u64 = 8192;
const PAGE_USIZE: usize = 8192;
const T: Duration = Duration::from_secs(60);

/// Spin (yielding: more threads than cores here) until `f` holds; panic
/// naming `what` after [`T`].
fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    let mut spins = 0u32;
    while !f() {
        spins = spins.wrapping_add(1);
        if spins % 16 == 0 {
            assert!(start.elapsed() < T, "timed out waiting for {what}");
        }
        std::thread::yield_now();
    }
}

/// One node at the driver level: its adapter (kept alive: dropping it
/// disconnects), its transmit FIFO and its receive memory for the pages the
/// test shares.
struct Node {
    _adapter: Adapter<VhostUserTransport>,
    fifo: Arc<TxFifo>,
    rx: ReceiveFrames,
}

/// Every node maps global pages `1 ..= count` for broadcast transmit with
/// loopback and for receive: each holds a copy, its own stores included.
fn shared_pages(vc: &VirtualCluster, count: u32) -> Vec<Node> {
    let entry = PctEntry::transmit_broadcast()
        .with_loopback()
        .with_receive();
    (0..vc.nodes())
        .map(|n| {
            let mut a = vc.adapter(n);
            let rx = a.map_receive(1, count, entry.to_bits()).unwrap();
            Node {
                fifo: a.fifo().clone(),
                _adapter: a,
                rx,
            }
        })
        .collect()
}

/// Offset in the receive memory of global address `addr` (pages from 1).
fn off(addr: u64) -> usize {
    firmware_model::to_usize(addr - PAGE)
}

fn words(v: u64, n: usize) -> Vec<u8> {
    std::iter::repeat_n(v.to_le_bytes(), n).flatten().collect()
}

fn read_words(rx: &ReceiveFrames, at: usize, n: usize) -> Vec<u64> {
    rx.read_vec(at, 8 * n)
        .unwrap()
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// Message passing: node 0 stores 1 KiB of data (32 packets, across a page
/// boundary), then a flag, round after round without waiting. Every node
/// (node 0 through loopback) reads the flag, then the data: the data is
/// never older than the flag.
#[test]
fn message_passing_the_reader_that_sees_the_flag_sees_the_data() {
    const ROUNDS: u64 = 600;
    const WORDS: usize = 128;
    const DATA: u64 = 3 * PAGE - 512;
    const FLAG: u64 = 3 * PAGE + 1024;
    for_each_delivery(&[1, 2], |mode| {
        let vc = VirtualCluster::with_delivery(3, mode);
        let nodes = shared_pages(&vc, 3);
        std::thread::scope(|s| {
            let writer = nodes[0].fifo.clone();
            s.spawn(move || {
                for i in 1..=ROUNDS {
                    writer.post(DATA, &words(i, WORDS)).unwrap();
                    writer.post(FLAG, &i.to_le_bytes()).unwrap();
                }
                writer.flush().unwrap();
            });
            let readers: Vec<_> = nodes
                .iter()
                .enumerate()
                .map(|(n, node)| {
                    let rx = node.rx.clone();
                    s.spawn(move || {
                        let (mut samples, mut ahead, mut last) = (0u64, 0u64, 0u64);
                        loop {
                            let flag = rx.load_u64(off(FLAG)).unwrap();
                            let data = read_words(&rx, off(DATA), WORDS);
                            assert!(
                                flag >= last,
                                "node {n}: the flag went back {last} -> {flag}"
                            );
                            last = flag;
                            if let Some((w, v)) = data.iter().enumerate().find(|(_, &v)| v < flag) {
                                panic!("{mode}: node {n} saw flag {flag} but data word {w} = {v}");
                            }
                            samples += 1;
                            ahead += u64::from(data.iter().any(|&v| v > flag));
                            if flag == ROUNDS {
                                return (samples, ahead);
                            }
                            std::thread::yield_now();
                        }
                    })
                })
                .collect();
            for (n, r) in readers.into_iter().enumerate() {
                let (samples, ahead) = r.join().unwrap();
                eprintln!("node {n}: {samples} samples, {ahead} with data newer than the flag");
            }
        });
    });
}

/// Competing broadcasts (IRIW): nodes 0 and 1 each count up their own word
/// (on different pages), every node (the writers through loopback) takes
/// consistent snapshots of both. All snapshots, from every node, are
/// prefixes of the one global order: ordered by x, they are ordered by y. A
/// node that saw y's write before x's while another saw x's before y's would
/// break it.
#[test]
fn competing_broadcasts_are_seen_in_one_order_by_every_receiver() {
    const N: u64 = 1500;
    const X: u64 = PAGE;
    const Y: u64 = 2 * PAGE + 8;
    for_each_delivery(&[3, 4], |mode| {
        let vc = VirtualCluster::with_delivery(4, mode);
        let nodes = shared_pages(&vc, 2);
        let start = std::sync::Barrier::new(nodes.len());
        let mut all: Vec<(u64, u64, usize)> = std::thread::scope(|s| {
            let threads: Vec<_> = nodes
                .iter()
                .enumerate()
                .map(|(n, node)| {
                    let (fifo, rx, start) = (node.fifo.clone(), node.rx.clone(), &start);
                    s.spawn(move || {
                        let mine = [Some(X), Some(Y)].get(n).copied().flatten();
                        let mut snaps: Vec<(u64, u64, usize)> = Vec::new();
                        let mut i = 0;
                        start.wait();
                        loop {
                            // A writer's next store once its last one came
                            // back: the two writers' stores interleave.
                            if let Some(addr) = mine.filter(|_| i < N) {
                                if rx.load_u64(off(addr)).unwrap() == i {
                                    i += 1;
                                    fifo.post(addr, &i.to_le_bytes()).unwrap();
                                }
                            }
                            // x, y, x again: if x did not move, (x, y) was
                            // this node's copy at the moment y was read.
                            let x = rx.load_u64(off(X)).unwrap();
                            let y = rx.load_u64(off(Y)).unwrap();
                            if rx.load_u64(off(X)).unwrap() == x && snaps.last() != Some(&(x, y, n))
                            {
                                snaps.push((x, y, n));
                            }
                            if x == N && y == N {
                                return snaps;
                            }
                            std::thread::yield_now();
                        }
                    })
                })
                .collect();
            threads
                .into_iter()
                .flat_map(|t| t.join().unwrap())
                .collect()
        });
        if let Err(e) = one_order(&mut all) {
            panic!("{mode}: {e}");
        }
        let mixed = all
            .iter()
            .filter(|s| (1..N).contains(&s.0) && (1..N).contains(&s.1))
            .count();
        eprintln!(
            "{} snapshots, {mixed} with both writers under way",
            all.len()
        );
    });
}

/// Whether snapshots `(x, y, node)` of two counters are all prefixes of one
/// order of their writes: sorted by x, y never goes down. Otherwise one node
/// saw a write to y that another, further along x, had not seen: the two
/// saw x's and y's writes in opposite orders.
fn one_order(snaps: &mut [(u64, u64, usize)]) -> Result<(), String> {
    snaps.sort_unstable();
    let mut top = (0, 0, 0);
    for &snap in snaps.iter() {
        if snap.1 < top.1 {
            return Err(format!(
                "node {} saw y = {} while x = {}, node {} saw y = {} already while x = {}: \
                 they saw x's and y's writes in opposite orders",
                snap.2, snap.1, snap.0, top.2, top.1, top.0
            ));
        }
        top = snap;
    }
    Ok(())
}

/// The check above can fail: two readers that see x=1 and y=1 in opposite
/// orders (the IRIW outcome the total order forbids) are caught.
#[test]
fn one_order_catches_opposite_orders() {
    assert!(one_order(&mut [(0, 0, 2), (1, 0, 2), (1, 1, 2), (0, 1, 3), (1, 1, 3)]).is_err());
    assert!(one_order(&mut [(0, 0, 2), (1, 0, 2), (1, 1, 2), (1, 0, 3), (1, 1, 3)]).is_ok());
}

/// Per-source FIFO across pages: node 0 stores a sequence number into 61
/// slots scattered over 4 pages, slot after slot, round after round. Every
/// node (node 0 through loopback) sweeps the slots: once it has seen store
/// `s`, every slot it reads after must hold at least the last store to it
/// before `s`.
#[test]
fn one_source_is_seen_in_the_order_sent_across_pages() {
    const K: u64 = 61;
    const TOTAL: u64 = 61 * 200;
    let addr = |k: u64| {
        let p = (k * 7919) % K;
        PAGE * (1 + p % 4) + 256 * (p / 4)
    };
    for_each_delivery(&[5, 6], |mode| {
        let vc = VirtualCluster::with_delivery(3, mode);
        let nodes = shared_pages(&vc, 4);
        std::thread::scope(|s| {
            let writer = nodes[0].fifo.clone();
            s.spawn(move || {
                for seq in 0..TOTAL {
                    writer
                        .post(addr(seq % K), &(seq + 1).to_le_bytes())
                        .unwrap();
                }
                writer.flush().unwrap();
            });
            let readers: Vec<_> = nodes
                .iter()
                .enumerate()
                .map(|(n, node)| {
                    let rx = node.rx.clone();
                    s.spawn(move || {
                        let mut sweeps = 0u64;
                        loop {
                            let mut max_seen: Option<u64> = None;
                            for j in (0..K).rev() {
                                let v = rx.load_u64(off(addr(j))).unwrap();
                                if let Some(m) = max_seen {
                                    // The last store to slot j at or before store m.
                                    let back = (m % K + K - j) % K;
                                    if let Some(need) = m.checked_sub(back) {
                                        assert!(
                                            v > need,
                                            "{mode}: node {n} saw store {m} but slot {j} holds store {} (store {need} went there before {m})",
                                            i128::from(v) - 1
                                        );
                                    }
                                }
                                if v > 0 {
                                    max_seen = max_seen.max(Some(v - 1));
                                }
                            }
                            sweeps += 1;
                            if max_seen == Some(TOTAL - 1) {
                                return sweeps;
                            }
                            std::thread::yield_now();
                        }
                    })
                })
                .collect();
            for (n, r) in readers.into_iter().enumerate() {
                eprintln!("node {n}: {} sweeps", r.join().unwrap());
            }
        });
    });
}

/// Lock entries (Dekker): each round, every node writes its own entry, then
/// reads the others'. Returns, per node and round, which other nodes' entries
/// it saw set. With `wait_for_loopback` a node first waits until its own
/// write comes back, as the cluster spinlock does (seed 000 s.2.3.1.1).
fn lock_entry_rounds(mode: DeliveryMode, rounds: u64, wait_for_loopback: bool) -> Vec<Vec<u64>> {
    let vc = VirtualCluster::with_delivery(3, mode);
    let nodes = shared_pages(&vc, 1);
    let n_nodes = nodes.len();
    let entry = |n: usize| PAGE + 64 * n as u64;
    std::thread::scope(|s| {
        let threads: Vec<_> = nodes
            .iter()
            .enumerate()
            .map(|(n, node)| {
                let (fifo, rx) = (node.fifo.clone(), node.rx.clone());
                s.spawn(move || {
                    let others = (0..n_nodes).filter(|&m| m != n);
                    let mut saw = Vec::with_capacity(firmware_model::to_usize(rounds));
                    for r in 1..=rounds {
                        fifo.post(entry(n), &r.to_le_bytes()).unwrap();
                        if wait_for_loopback {
                            wait_until("this node's own entry", || {
                                rx.load_u64(off(entry(n))).unwrap() == r
                            });
                        }
                        let mask = others
                            .clone()
                            .filter(|&m| rx.load_u64(off(entry(m))).unwrap() >= r)
                            .fold(0u64, |acc, m| acc | 1 << m);
                        saw.push(mask);
                        // Everyone's round-r entry is here before round r + 1.
                        wait_until("the other nodes' entries", || {
                            others
                                .clone()
                                .all(|m| rx.load_u64(off(entry(m))).unwrap() >= r)
                        });
                    }
                    saw
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    })
}

/// Rounds in which two nodes each missed the other's entry: both would have
/// taken the lock.
fn both_missed(saw: &[Vec<u64>]) -> Vec<(usize, usize, usize)> {
    let mut out = Vec::new();
    for r in 0..saw[0].len() {
        for a in 0..saw.len() {
            for b in a + 1..saw.len() {
                if saw[a][r] & 1 << b == 0 && saw[b][r] & 1 << a == 0 {
                    out.push((r + 1, a, b));
                }
            }
        }
    }
    out
}

/// Loopback lock entries: a node's own entry comes back in the same order as
/// the others see it, so of two nodes that set their entries, the later one
/// sees the earlier one's once its own has come back: never both alone.
#[test]
fn lock_entries_come_back_in_the_order_everyone_sees() {
    for_each_delivery(&[7, 8], |mode| {
        let saw = lock_entry_rounds(mode, 300, true);
        let bad = both_missed(&saw);
        assert!(
            bad.is_empty(),
            "{mode}: nodes that waited for their own entry both missed the other's: {:?}",
            &bad[..bad.len().min(5)]
        );
        let everyone = (1u64 << saw.len()) - 1;
        let contended = (0..saw[0].len())
            .filter(|&r| (0..saw.len()).any(|n| saw[n][r] != everyone & !(1 << n)))
            .count();
        eprintln!(
            "{contended} of {} rounds where a node missed another's entry",
            saw[0].len()
        );
    });
}

/// ACK = arrival: node 0 stores a block across a page boundary, then writes
/// its ACK page and waits for the answer; at that moment every node holds
/// the block, and every store node 0 had seen from node 1 (which counts up
/// a word meanwhile): the answer comes after every packet ordered before it,
/// from any source, has reached every receiver (seed 004, Table 1:
/// imc_ckerrcnt "checks each node in the cluster").
#[test]
fn an_ack_answer_means_every_earlier_store_is_everywhere() {
    const ROUNDS: u64 = 150;
    const WORDS: usize = 256;
    const DATA: u64 = 2 * PAGE - 1024;
    const COUNTER: u64 = 2 * PAGE + 4096;
    const ACK_PAGE: u32 = 10;
    for_each_delivery(&[11, 12], |mode| {
        let vc = VirtualCluster::with_delivery(4, mode);
        let mut nodes = shared_pages(&vc, 2);
        let ack = nodes[0]
            ._adapter
            .map_receive(ACK_PAGE, 1, PctEntry::ack_page().to_bits())
            .unwrap();
        let stop = AtomicU64::new(0);
        std::thread::scope(|s| {
            let (counter, copy, stop) = (nodes[1].fifo.clone(), nodes[1].rx.clone(), &stop);
            s.spawn(move || {
                let mut c = 0u64;
                while stop.load(Ordering::Acquire) == 0 {
                    // One store in flight at a time: the next once it came back.
                    if copy.load_u64(off(COUNTER)).unwrap() == c {
                        c += 1;
                        counter.post(COUNTER, &c.to_le_bytes()).unwrap();
                    }
                    std::thread::yield_now();
                }
            });
            let me = &nodes[0];
            for r in 1..=ROUNDS {
                me.fifo.post(DATA, &words(r, WORDS)).unwrap();
                let seen = me.rx.load_u64(off(COUNTER)).unwrap();
                ack.region().fill(0, 64, 0xff).unwrap();
                me.fifo.post(PAGE * u64::from(ACK_PAGE), &[1]).unwrap();
                wait_until("the ACK answer", || {
                    (0..nodes.len()).all(|i| ack.region().read_u32(4 * i).unwrap() != u32::MAX)
                });
                for (n, node) in nodes.iter().enumerate() {
                    let data = read_words(&node.rx, off(DATA), WORDS);
                    assert!(
                        data.iter().all(|&v| v == r),
                        "{mode}: round {r}: node {n} lacks the block when the ACK answered"
                    );
                    let c = node.rx.load_u64(off(COUNTER)).unwrap();
                    assert!(
                        c >= seen,
                        "{mode}: round {r}: node {n} holds node 1's store {c}, node 0 had seen {seen} before its ACK"
                    );
                }
            }
            stop.store(1, Ordering::Release);
        });
        nodes.clear();
    });
}

/// Error-count lag (seed 004, Table 1: imc_rderrcnt "is not guaranteed to be
/// up-to-date for all nodes in the cluster"; imc_ckerrcnt "checks each node
/// in the cluster for any outstanding errors"). Every packet from node 0 to
/// node 2 fails its CRC. Node 0 writes 32 packets and a flag, round after
/// round; node 1, on seeing the flag, reads the count (one load) and then
/// checks it: the check always shows every error so far, and in skewed
/// delivery the load lags behind it. The lag is at most 300 us, so a node 1
/// descheduled that long on a loaded host sees no lag that round: skewed runs
/// go on past the 40 rounds until one lagged (at most 400).
#[test]
fn error_counts_lag_but_check_errors_always_shows_them() {
    const ROUNDS: u64 = 40;
    const MAX_ROUNDS: u64 = 400;
    const KEY: u32 = 0x11_0001;
    for_each_delivery(&[9, 10], |mode| {
        let vc = VirtualCluster::with_delivery(3, mode);
        let cluster = vc.cluster.clone();
        let sync = Arc::new(std::sync::Barrier::new(3));
        let acked = Arc::new(AtomicU64::new(0));
        // The last round, once node 1 has decided it.
        let last = Arc::new(AtomicU64::new(u64::MAX));
        let out = vc.on_every_node(move |mc| {
            let me = mc.node_id().0;
            let id = mc.region_alloc(KEY, 2 * PAGE, false).unwrap();
            let tx = (me == 0).then(|| mc.attach_transmit(id, Sharing::Shared, false).unwrap());
            let rx = (me != 0).then(|| mc.attach_receive(id, Sharing::Shared, false).unwrap());
            let mut b = Barrier::new(&mc, 1).unwrap();
            b.wait(T).unwrap();
            let base = mc.check_errors().unwrap().count;
            sync.wait();
            if me == 0 {
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
            }
            sync.wait();
            let mut lagged = 0;
            let mut r = 0;
            while me != 2 && r != last.load(Ordering::Acquire) {
                r += 1;
                match (me, &tx, &rx) {
                    (0, Some(tx), _) => {
                        tx.write(0, &words(r, 128)).unwrap();
                        tx.write_u64(PAGE_USIZE, r).unwrap();
                        wait_until("node 1's check", || acked.load(Ordering::Acquire) == r);
                    }
                    (1, _, Some(rx)) => {
                        wait_until("node 0's flag", || rx.load_u64(PAGE_USIZE).unwrap() == r);
                        let read = mc.error_count();
                        let check = mc.check_errors().unwrap().count;
                        // 32 data packets and the flag, discarded at node 2.
                        let want = base + 33 * r;
                        assert_eq!(check, want, "{mode}: round {r}: the check misses errors");
                        assert!(
                            read <= check,
                            "{mode}: the count read {read} ran ahead of the check {check}"
                        );
                        lagged += u64::from(read < check);
                        let enough = !mode.is_skewed() || lagged > 0 || r == MAX_ROUNDS;
                        if r >= ROUNDS && enough {
                            last.store(r, Ordering::Release);
                        }
                        acked.store(r, Ordering::Release);
                    }
                    _ => {}
                }
            }
            sync.wait();
            if me == 0 {
                cluster.apply_fault(FaultCommand::ClearPackets).unwrap();
            }
            (lagged, r)
        });
        eprintln!(
            "the count read lagged the check in {} of {} rounds",
            out[1].0, out[1].1
        );
        if mode.is_skewed() {
            assert!(
                out[1].0 > 0,
                "{mode}: the status page was never behind the check in {MAX_ROUNDS} rounds"
            );
        }
    });
}

/// Receiver-only error detection (seed 004, Error Management: "If the
/// transmitter writes the saved error count at the end of the message, the
/// message receiver can determine if any intervening errors have occurred by
/// simply comparing the error count in the message with the current value
/// using imc_rderrcnt. This is possible because of the sequencing guarantees
/// built into the MEMORY CHANNEL network."). 5% of node 0's packets to node 1
/// fail their CRC. Node 0 writes a 1 KiB message ending with its round and
/// its saved count, and sends it again until its own check is clean; node 1,
/// once it sees a round's end, reads the message and then its error count:
/// whenever a packet of the message was lost at node 1, the count differs
/// from the one in the message (its own errors are on its status page before
/// any later packet reaches it: mc-device queues a receiver's CRC discard
/// and writes its status page when the queue reaches it, ahead of every
/// later delivery to that receiver).
#[test]
fn a_receiver_detects_its_own_lost_packets_with_the_count_alone() {
    const ROUNDS: u64 = 60;
    const WORDS: usize = 128;
    for_each_delivery(&[13, 14], |mode| {
        let vc = VirtualCluster::with_delivery(2, mode);
        let cluster = vc.cluster.clone();
        let acked = Arc::new(AtomicU64::new(0));
        let out = vc.on_every_node(move |mc| {
            let me = mc.node_id().0;
            let id = mc.region_alloc(0x11_0004, PAGE, false).unwrap();
            let tx = (me == 0).then(|| mc.attach_transmit(id, Sharing::Shared, false).unwrap());
            let rx = (me == 1).then(|| mc.attach_receive(id, Sharing::Shared, false).unwrap());
            let mut b = Barrier::new(&mc, 1).unwrap();
            b.wait(T).unwrap();
            if me == 0 {
                cluster
                    .apply_fault(FaultCommand::Packets {
                        fault: PacketFault::Corrupt,
                        scope: FaultScope::Link {
                            from: NodeId(0),
                            to: NodeId(1),
                        },
                        rate: Rate::from_probability(0.05).unwrap(),
                    })
                    .unwrap();
            }
            let (mut detected, mut sends, mut missed) = (0u64, 0u64, Vec::new());
            for r in 1..=ROUNDS {
                if let Some(tx) = &tx {
                    // Save the count, write, check; again until clean.
                    loop {
                        let saved = mc.error_count();
                        let mut msg = words(r, WORDS);
                        msg[8 * (WORDS - 1)..].copy_from_slice(&saved.to_le_bytes());
                        tx.write(0, &msg).unwrap();
                        sends += 1;
                        if mc.check_errors().unwrap().count == saved {
                            break;
                        }
                    }
                    wait_until("node 1's ack", || acked.load(Ordering::Acquire) >= r);
                } else if let Some(rx) = &rx {
                    // The message's second-to-last word is its round, its
                    // last the sender's saved count: one packet.
                    let tail = 8 * (WORDS - 2);
                    wait_until("the message's end", || rx.load_u64(tail).unwrap() == r);
                    let saved = rx.load_u64(tail + 8).unwrap();
                    let whole = read_words_rx(rx, WORDS - 1).iter().all(|&v| v == r);
                    let count = mc.error_count();
                    if !whole {
                        if count == saved {
                            missed.push(r);
                        } else {
                            detected += 1;
                        }
                    }
                    acked.store(r, Ordering::Release);
                }
            }
            b.wait(T).unwrap();
            (detected, sends, missed)
        });
        let (detected, missed) = (out[1].0, &out[1].2);
        eprintln!(
            "{} sends for {ROUNDS} messages; node 1 saw {} incomplete: {detected} detected by the count, {} not",
            out[0].1,
            detected + missed.len() as u64,
            missed.len()
        );
        assert!(
            missed.is_empty(),
            "{mode}: in rounds {missed:?} a packet of the message was lost at node 1 \
             and its count still equalled the one in the message"
        );
    });
}

fn read_words_rx(rx: &mc_api::RxRegion, n: usize) -> Vec<u64> {
    rx.to_vec(0, 8 * n)
        .unwrap()
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// Shared between the node threads of one program, outside the Memory
/// Channel: a side channel (as a program might use TCP), and how the test
/// keeps the writer and its readers in step.
#[derive(Default)]
struct SideChannel {
    /// The round the writer says is published.
    round: AtomicU64,
    /// Readers done with the current round, summed over rounds.
    done: AtomicU64,
}

const PROGRAM_ROUNDS: u64 = 150;
const BLOCK_WORDS: usize = 512;

/// A program on 3 nodes: node 0 writes a 4 KiB block and a word on the next
/// page, then tells the others over a side channel that round `r` is out;
/// they read their copies. Planted bug (a) when `check` is false: it trusts
/// that the stores returned means they arrived. With `check`, node 0 calls
/// `check_errors` first: the ACK proves arrival. Returns how many reads
/// found an older copy.
fn publish_then_signal(mode: DeliveryMode, check: bool) -> u64 {
    let vc = VirtualCluster::with_delivery(3, mode);
    let side = Arc::new(SideChannel::default());
    let stale = vc.on_every_node(move |mc: MemoryChannel| {
        let me = mc.node_id().0;
        let id = mc.region_alloc(0x11_0002, 2 * PAGE, false).unwrap();
        let tx = (me == 0).then(|| mc.attach_transmit(id, Sharing::Shared, false).unwrap());
        let rx = (me != 0).then(|| mc.attach_receive(id, Sharing::Shared, false).unwrap());
        let mut b = Barrier::new(&mc, 1).unwrap();
        b.wait(T).unwrap();
        let readers = u64::from(mc.nodes() - 1);
        let mut stale = 0;
        for r in 1..=PROGRAM_ROUNDS {
            if let Some(tx) = &tx {
                tx.write(0, &words(r, BLOCK_WORDS)).unwrap();
                tx.write_u64(PAGE_USIZE, r).unwrap();
                if check {
                    mc.check_errors().unwrap();
                }
                side.round.store(r, Ordering::Release);
                wait_until("the readers", || {
                    side.done.load(Ordering::Acquire) == readers * r
                });
            } else if let Some(rx) = &rx {
                wait_until("the side channel", || {
                    side.round.load(Ordering::Acquire) >= r
                });
                let block = rx.to_vec(0, 8 * BLOCK_WORDS).unwrap();
                let word = rx.load_u64(PAGE_USIZE).unwrap();
                stale += u64::from(block != words(r, BLOCK_WORDS) || word != r);
                side.done.fetch_add(1, Ordering::AcqRel);
            }
        }
        b.wait(T).unwrap();
        stale
    });
    stale.iter().sum()
}

/// A program on 3 nodes: node 0 writes a 4 KiB block (128 packets), every
/// word `r`; the others poll one word of it until it shows `r`, then read the
/// whole block. Planted bug (b) when `poll_last` is false: polling the first
/// word and trusting the rest. Polling the last word is right: packets
/// arrive in address order. Returns how many blocks were read incomplete.
fn poll_then_read(mode: DeliveryMode, poll_last: bool) -> u64 {
    let vc = VirtualCluster::with_delivery(3, mode);
    let side = Arc::new(SideChannel::default());
    let stale = vc.on_every_node(move |mc: MemoryChannel| {
        let me = mc.node_id().0;
        let id = mc.region_alloc(0x11_0003, PAGE, false).unwrap();
        let tx = (me == 0).then(|| mc.attach_transmit(id, Sharing::Shared, false).unwrap());
        let rx = (me != 0).then(|| mc.attach_receive(id, Sharing::Shared, false).unwrap());
        let mut b = Barrier::new(&mc, 1).unwrap();
        b.wait(T).unwrap();
        let readers = u64::from(mc.nodes() - 1);
        let poll = if poll_last { 8 * (BLOCK_WORDS - 1) } else { 0 };
        let mut stale = 0;
        for r in 1..=PROGRAM_ROUNDS {
            if let Some(tx) = &tx {
                tx.write(0, &words(r, BLOCK_WORDS)).unwrap();
                wait_until("the readers", || {
                    side.done.load(Ordering::Acquire) == readers * r
                });
            } else if let Some(rx) = &rx {
                wait_until("the polled word", || rx.load_u64(poll).unwrap() == r);
                stale += u64::from(rx.to_vec(0, 8 * BLOCK_WORDS).unwrap() != words(r, BLOCK_WORDS));
                side.done.fetch_add(1, Ordering::AcqRel);
            }
        }
        b.wait(T).unwrap();
        stale
    });
    stale.iter().sum()
}

/// Skewed seeds a planted bug gets before the test calls it missed.
const PLANTED_MAX_SEEDS: u64 = 8;

/// Run the buggy program under skewed seeds 1, 2, ... until one catches it
/// (a wrong result); panic if none of [`PLANTED_MAX_SEEDS`] does. Returns
/// the seeds tried.
fn catch_planted(what: &str, buggy: impl Fn(DeliveryMode) -> u64) -> Vec<u64> {
    let mut tried = Vec::new();
    for seed in 1..=PLANTED_MAX_SEEDS {
        tried.push(seed);
        let wrong = buggy(DeliveryMode::skewed(seed));
        eprintln!("{what}: skewed seed {seed}: {wrong} wrong reads");
        if wrong > 0 {
            println!(
                "planted bug caught: {what}: by skewed seed {seed}, after {} seed(s)",
                tried.len()
            );
            return tried;
        }
    }
    panic!(
        "planted bug not caught: {what}: no wrong read under skewed seeds 1..={PLANTED_MAX_SEEDS}"
    );
}

/// The corrected program passes eagerly and on every seed tried (and the
/// ordinary skewed set, or all seeds with `MC_TEST_EXHAUSTIVE=1`).
fn correct_everywhere(what: &str, tried: &[u64], correct: impl Fn(DeliveryMode) -> u64) {
    let mut seeds = tried.to_vec();
    for s in skewed_seeds(&[]) {
        if !seeds.contains(&s) {
            seeds.push(s);
        }
    }
    for mode in
        std::iter::once(DeliveryMode::Eager).chain(seeds.into_iter().map(DeliveryMode::skewed))
    {
        assert_eq!(correct(mode), 0, "{what}: {mode}");
        eprintln!("{what}: {mode}: no wrong read");
    }
}

/// Planted bug (a): reading another node's copy right after one's own store
/// returned (here: as soon as a side channel says it did). Caught by skewed
/// delivery; the right program (`check_errors` before telling anyone: the
/// ACK proves arrival) never reads an old copy.
#[test]
fn planted_read_right_after_the_store_returned_is_caught() {
    let tried = catch_planted(
        "reading another node's copy right after the store returned",
        |m| publish_then_signal(m, false),
    );
    correct_everywhere("reading after check_errors", &tried, |m| {
        publish_then_signal(m, true)
    });
}

/// Planted bug (b): polling the first word of a multi-packet store and
/// trusting the rest. Caught by skewed delivery; polling the last word is
/// right on every seed.
#[test]
fn planted_poll_of_the_first_word_is_caught() {
    let tried = catch_planted("polling the first word of a 4 KiB store", |m| {
        poll_then_read(m, false)
    });
    correct_everywhere("polling the last word", &tried, |m| poll_then_read(m, true));
}

/// The lock protocol without its wait: a node that reads the other entries
/// right after its own store returned may find none while another node does
/// the same: both take the lock. Skewed delivery catches it.
#[test]
fn planted_lock_without_waiting_for_loopback_is_caught() {
    let tried = catch_planted("a lock entry read before its loopback", |m| {
        both_missed(&lock_entry_rounds(m, 200, false)).len() as u64
    });
    assert!(!tried.is_empty());
}
