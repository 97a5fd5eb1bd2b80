//! Property tests: the model's guarantees over random clusters, PCTs and traffic.
//!
//! Each property is checked against an independent reference computed here from
//! the PCT settings alone, not from the model's own decisions.

use std::collections::HashMap;

use firmware_model::*;
use proptest::prelude::*;

const PAGE: u32 = 4096;
const DATA_PAGES: u32 = 6;
const ACK_PAGE: u32 = 7;

#[derive(Clone, Debug)]
struct Setup {
    nodes: u8,
    payload: u32,
    /// entries[node][page] for the data pages.
    entries: Vec<Vec<PctEntry>>,
}

#[derive(Clone, Debug)]
enum Op {
    Store {
        src: u8,
        page: u32,
        offset: u32,
        len: u32,
        fill: u8,
    },
    Ack {
        src: u8,
    },
}

fn entry_strategy(owner: u8, nodes: u8) -> impl Strategy<Value = PctEntry> {
    let others: Vec<u8> = (0..nodes).filter(|n| *n != owner).collect();
    (
        0u8..3,
        any::<prop::sample::Index>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(move |(tx, dest, rx, lb, irq)| {
            let transmit = match tx {
                0 => None,
                1 => Some(Destination::Broadcast),
                _ => Some(Destination::Node(NodeId(*dest.get(&others)))),
            };
            PctEntry {
                transmit,
                receive: rx,
                loopback: lb && transmit.is_some(),
                interrupt: irq && rx,
                ack: false,
            }
        })
}

fn setup_strategy() -> impl Strategy<Value = Setup> {
    (2u8..=5, prop::sample::select(vec![8u32, 32, 256])).prop_flat_map(|(nodes, payload)| {
        let per_node: Vec<_> = (0..nodes)
            .map(|n| prop::collection::vec(entry_strategy(n, nodes), DATA_PAGES as usize))
            .collect();
        per_node.prop_map(move |entries| Setup {
            nodes,
            payload,
            entries,
        })
    })
}

fn ops_strategy(nodes: u8, acks: bool) -> impl Strategy<Value = Vec<Op>> {
    let store = (0..nodes, 0..DATA_PAGES, 0..PAGE, 1u32..600, any::<u8>()).prop_map(
        |(src, page, offset, len, fill)| Op::Store {
            src,
            page,
            offset,
            len,
            fill,
        },
    );
    let ack = (0..nodes).prop_map(|src| Op::Ack { src });
    let op = if acks {
        prop_oneof![6 => store, 1 => ack].boxed()
    } else {
        store.boxed()
    };
    prop::collection::vec(op, 1..60)
}

fn build(setup: &Setup, seed: u64, link: LinkTiming) -> Hub {
    build_with(setup, seed, link, DeliveryMode::Eager)
}

fn build_with(setup: &Setup, seed: u64, link: LinkTiming, delivery: DeliveryMode) -> Hub {
    let config = ClusterConfig {
        page_size: PAGE,
        max_payload: setup.payload,
        fault_seed: seed,
        link,
        delivery,
        ..ClusterConfig::new(setup.nodes)
    };
    let mut hub = Hub::new(config).unwrap();
    for (n, pages) in setup.entries.iter().enumerate() {
        let node = NodeId(u8::try_from(n).expect("a hub has at most 64 nodes"));
        for (p, e) in pages.iter().enumerate() {
            let page = u32::try_from(p).expect("a setup has a few pages");
            hub.set_pct(node, PageNumber(page), *e).unwrap();
        }
        hub.set_pct(node, PageNumber(ACK_PAGE), PctEntry::ack_page())
            .unwrap();
    }
    hub
}

fn op_store(op: &Op, nodes: u8) -> (NodeId, GlobalAddr, Vec<u8>) {
    match *op {
        Op::Store {
            src,
            page,
            offset,
            len,
            fill,
        } => {
            let addr = GlobalAddr(u64::from(page * PAGE + offset));
            let data = (0..len)
                .map(|i| fill.wrapping_add(i.to_le_bytes()[0]))
                .collect();
            (NodeId(src), addr, data)
        }
        Op::Ack { src } => {
            // Each writer uses its own slot of the ACK page.
            let slot = u32::from(src) * 4 * u32::from(nodes);
            (
                NodeId(src),
                GlobalAddr(u64::from(ACK_PAGE * PAGE + slot)),
                vec![0; 4],
            )
        }
    }
}

/// Who should receive a packet from `src` on `page`, from the PCTs alone.
fn eligible(setup: &Setup, src: u8, page: u32) -> Vec<u8> {
    let tx = setup.entries[src as usize][page as usize];
    (0..setup.nodes)
        .filter(|&r| {
            let rx = setup.entries[r as usize][page as usize].receive;
            let reaches = if r == src {
                tx.loopback
            } else {
                match tx.transmit {
                    Some(Destination::Broadcast) => true,
                    Some(Destination::Node(d)) => d.0 == r,
                    None => false,
                }
            };
            reaches && rx
        })
        .collect()
}

/// The page that holds byte `addr` of the global space.
fn page_of(addr: u64) -> u32 {
    u32::try_from(addr / u64::from(PAGE)).expect("test addresses lie in the first pages")
}

/// A store's length as the hub takes it.
fn len_u32(data: &[u8]) -> u32 {
    u32::try_from(data.len()).expect("a store is at most a few pages")
}

fn transmits(setup: &Setup, src: u8, addr: GlobalAddr, len: usize) -> bool {
    let first = page_of(addr.0);
    let last = page_of(addr.0 + len as u64 - 1);
    (first..=last)
        .all(|p| p < DATA_PAGES && setup.entries[src as usize][p as usize].transmit.is_some())
}

fn run(hub: &mut Hub, ops: &[Op], step: u64) -> RecordingSink {
    let mut sink = RecordingSink::new();
    for (i, op) in ops.iter().enumerate() {
        let (src, addr, data) = op_store(op, hub.nodes());
        let _ = hub.transmit(Nanos(i as u64 * step), src, addr, len_u32(&data), &mut sink);
    }
    sink
}

fn packet_faults(hub: &mut Hub, drop_ppm: u32, corrupt_ppm: u32, node: u8) {
    let mut sink = RecordingSink::new();
    let cmds = [
        FaultCommand::Packets {
            fault: PacketFault::Drop,
            scope: FaultScope::Everywhere,
            rate: Rate::from_ppm(drop_ppm).unwrap(),
        },
        FaultCommand::Packets {
            fault: PacketFault::Corrupt,
            scope: FaultScope::Node(NodeId(node % hub.nodes())),
            rate: Rate::from_ppm(corrupt_ppm).unwrap(),
        },
    ];
    for c in cmds {
        hub.apply_fault(Nanos(0), c, &mut sink).unwrap();
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Byte for byte, every node's receive memory is what the PCTs say it should be:
    /// packet splitting, broadcast, point-to-point, loopback and receive enable
    /// together, and refused stores leave no trace.
    #[test]
    fn receive_memory_matches_reference(setup in setup_strategy(), ops in ops_strategy(5, false)) {
        let ops: Vec<Op> = ops.into_iter().filter(|o| matches!(o, Op::Store { src, .. } if *src < setup.nodes)).collect();
        let mut hub = build(&setup, 0, LinkTiming::UNTHROTTLED);
        let mut shadow = ShadowCluster::new(PAGE);
        let mut reference: HashMap<(u8, u64), u8> = HashMap::new();
        for (i, op) in ops.iter().enumerate() {
            let (src, addr, data) = op_store(op, setup.nodes);
            let result = shadow.store(&mut hub, Nanos(i as u64), src, addr, &data);
            let ok = transmits(&setup, src.0, addr, data.len());
            prop_assert_eq!(result.is_ok(), ok, "store {:?} -> {:?}", op, result);
            if !ok {
                continue;
            }
            for (k, b) in data.iter().enumerate() {
                let a = addr.0 + k as u64;
                for r in eligible(&setup, src.0, page_of(a)) {
                    reference.insert((r, a), *b);
                }
            }
        }
        for n in 0..setup.nodes {
            for p in 0..DATA_PAGES {
                let base = u64::from(p * PAGE);
                let got = shadow.read(NodeId(n), GlobalAddr(base), PAGE as usize);
                for (k, g) in got.iter().enumerate() {
                    let want = reference.get(&(n, base + k as u64)).copied().unwrap_or(0);
                    prop_assert_eq!(*g, want, "node {} addr {:#x}", n, base + k as u64);
                }
            }
        }
    }

    /// Total order and per-source FIFO: every receiver sees packets in strictly
    /// increasing global sequence, due times never go backwards, and each source's
    /// packets arrive in the order they were sent. Each packet reaches exactly the
    /// eligible receivers, and the sender only with loopback.
    #[test]
    fn total_order_fifo_and_exact_receiver_sets(setup in setup_strategy(), ops in ops_strategy(5, false)) {
        let ops: Vec<Op> = ops.into_iter().filter(|o| matches!(o, Op::Store { src, .. } if *src < setup.nodes)).collect();
        let mut hub = build(&setup, 0, LinkTiming::MC2);
        let sink = run(&mut hub, &ops, 700);

        let mut last_seq_seen = 0;
        for d in sink.deliveries() {
            prop_assert!(d.packet.seq >= last_seq_seen);
            last_seq_seen = d.packet.seq;
        }
        for r in 0..setup.nodes {
            let mine: Vec<&Delivery> = sink.received_by(NodeId(r)).collect();
            for w in mine.windows(2) {
                prop_assert!(w[0].packet.seq < w[1].packet.seq);
                prop_assert!(w[0].at <= w[1].at);
            }
            for s in 0..setup.nodes {
                let from: Vec<(u64, u64)> = mine.iter().filter(|d| d.packet.source == NodeId(s))
                    .map(|d| (d.packet.seq, d.packet.addr.0)).collect();
                for w in from.windows(2) {
                    prop_assert!(w[0].0 < w[1].0);
                }
            }
        }
        let mut by_seq: HashMap<u64, (Packet, Vec<u8>)> = HashMap::new();
        for d in sink.deliveries() {
            by_seq.entry(d.packet.seq).or_insert((d.packet, Vec::new())).1.push(d.receiver.0);
            if d.receiver == d.packet.source {
                let e = setup.entries[d.receiver.index()][d.page.index()];
                prop_assert!(e.loopback && e.receive, "loopback delivery without loopback: {:?}", d);
            }
        }
        for (_, (packet, receivers)) in by_seq {
            let page = page_of(packet.addr.0);
            prop_assert_eq!(receivers, eligible(&setup, packet.source.0, page));
        }
    }

    /// An ACK report comes after every packet sent before it, and word i is node
    /// i's error status at that point in the global order, whatever the faults.
    #[test]
    fn ack_reports_follow_earlier_packets_and_report_every_node(
        setup in setup_strategy(),
        ops in ops_strategy(5, true),
        seed in any::<u64>(),
        drop_ppm in 0u32..200_000,
        corrupt_ppm in 0u32..300_000,
        node in 0u8..5,
    ) {
        let ops: Vec<Op> = ops.into_iter().filter(|o| match o {
            Op::Store { src, .. } | Op::Ack { src } => *src < setup.nodes,
        }).collect();
        let mut hub = build(&setup, seed, LinkTiming::UNTHROTTLED);
        packet_faults(&mut hub, drop_ppm, corrupt_ppm, node);
        let sink = run(&mut hub, &ops, 1);

        let mut network = vec![0u32; setup.nodes as usize];
        let mut protection = vec![0u32; setup.nodes as usize];
        let mut max_seq = 0;
        let mut acks = 0;
        for rec in &sink.records {
            match rec {
                SinkRecord::Deliver(d) => max_seq = max_seq.max(d.packet.seq),
                SinkRecord::Event(Event::Error { node, kind, .. }) => match kind {
                    ErrorKind::Protection => protection[node.index()] += 1,
                    _ => network[node.index()] += 1,
                },
                SinkRecord::Event(_) => {}
                SinkRecord::Ack(a) => {
                    acks += 1;
                    prop_assert!(a.seq > max_seq);
                    max_seq = a.seq;
                    prop_assert_eq!(a.words.len(), setup.nodes as usize);
                    for (i, w) in a.words.iter().enumerate() {
                        let st = AdapterErrorStatus::from_word(*w);
                        prop_assert!(st.online && st.link_up);
                        prop_assert_eq!(st.network_errors, network[i] & 0xffff);
                        prop_assert_eq!(st.protection_errors, protection[i] & 0xff);
                    }
                }
            }
        }
        let expected_acks = ops.iter().filter(|o| matches!(o, Op::Ack { .. })).count();
        prop_assert_eq!(acks, expected_acks);
        prop_assert_eq!(hub.cluster_error_count(), network.iter().map(|n| u64::from(*n)).sum::<u64>());
    }

    /// Same seed, same operations: the same faults and the same outcome.
    #[test]
    fn seeded_fault_runs_replay_exactly(
        setup in setup_strategy(),
        ops in ops_strategy(5, true),
        seed in any::<u64>(),
    ) {
        let ops: Vec<Op> = ops.into_iter().filter(|o| match o {
            Op::Store { src, .. } | Op::Ack { src } => *src < setup.nodes,
        }).collect();
        let go = || {
            let mut hub = build(&setup, seed, LinkTiming::MC1);
            packet_faults(&mut hub, 100_000, 100_000, 1);
            hub.schedule_fault(Nanos(5_000), FaultCommand::LinkDown(NodeId(1))).unwrap();
            hub.schedule_fault(Nanos(9_000), FaultCommand::LinkUp(NodeId(1))).unwrap();
            hub.schedule_fault(Nanos(12_000), FaultCommand::StallHub { duration: Nanos(4_000) }).unwrap();
            let sink = run(&mut hub, &ops, 500);
            let counters: Vec<NodeCounters> =
                (0..setup.nodes).map(|n| hub.node_counters(NodeId(n)).unwrap()).collect();
            (sink, counters, hub.hub_counters())
        };
        let a = go();
        let b = go();
        prop_assert_eq!(a, b);
    }

    /// Per-node counters add up to the hub's, and both match what was delivered.
    #[test]
    fn counters_add_up(
        setup in setup_strategy(),
        ops in ops_strategy(5, true),
        seed in any::<u64>(),
        drop_ppm in 0u32..300_000,
        corrupt_ppm in 0u32..300_000,
        link_flap in any::<bool>(),
    ) {
        let ops: Vec<Op> = ops.into_iter().filter(|o| match o {
            Op::Store { src, .. } | Op::Ack { src } => *src < setup.nodes,
        }).collect();
        let mut hub = build(&setup, seed, LinkTiming::UNTHROTTLED);
        packet_faults(&mut hub, drop_ppm, corrupt_ppm, 0);
        if link_flap {
            hub.schedule_fault(Nanos(10), FaultCommand::LinkDown(NodeId(0))).unwrap();
            hub.schedule_fault(Nanos(30), FaultCommand::LinkUp(NodeId(0))).unwrap();
        }
        let sink = run(&mut hub, &ops, 1);
        let nodes: Vec<NodeCounters> = (0..setup.nodes).map(|n| hub.node_counters(NodeId(n)).unwrap()).collect();
        let h = hub.hub_counters();
        let sum = |f: fn(&NodeCounters) -> u64| nodes.iter().map(f).sum::<u64>();
        let delivered = sink.deliveries().count() as u64;
        let delivered_bytes: u64 = sink.deliveries().map(|d| u64::from(d.packet.len)).sum();
        prop_assert_eq!(sum(|c| c.packets_received), delivered);
        prop_assert_eq!(h.deliveries, delivered);
        prop_assert_eq!(sum(|c| c.bytes_received), delivered_bytes);
        prop_assert_eq!(sum(|c| c.drops), h.drops);
        prop_assert_eq!(sum(|c| c.errors), h.errors);
        prop_assert_eq!(h.errors, hub.cluster_error_count());
        let ack_ops = ops.iter().filter(|o| matches!(o, Op::Ack { .. })).count() as u64;
        prop_assert_eq!(sum(|c| c.acks), ack_ops);
        prop_assert_eq!(h.acks, sink.acks().count() as u64);
        // Every packet that reached the hub was delivered, dropped or discarded at
        // each eligible receiver; packets lost on the sender's link never got there.
        prop_assert!(sum(|c| c.packets_sent) >= h.packets);
        prop_assert!(sum(|c| c.bytes_sent) >= h.bytes);
        prop_assert!(h.broadcasts <= h.packets);
        let crc = sink.events().filter(|e| matches!(e, Event::Error { kind: ErrorKind::Crc, .. })).count() as u64;
        let link = sink.events().filter(|e| matches!(e, Event::Error { kind: ErrorKind::LinkDown, .. })).count() as u64;
        // Every error raised an event, except packets lost to a down link:
        // each is an error (and a drop) without an event of its own.
        prop_assert!(crc + link <= h.errors);
        prop_assert!(h.errors - (crc + link) <= h.drops);
        if !link_flap {
            prop_assert_eq!(crc + link, h.errors);
        }
        let max_seq = sink.deliveries().map(|d| d.packet.seq).chain(sink.acks().map(|a| a.seq)).max().unwrap_or(0);
        prop_assert!(max_seq <= h.packets + h.acks);
        prop_assert_eq!(hub.last_seq(), h.packets + h.acks);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Skewed delivery changes when, never what or in which order: the same
    /// deliveries as eager mode, each receiver's in global order with due
    /// times that never go backwards and never before the eager due time (nor
    /// later than the bound), an ACK answer due after every earlier delivery at
    /// every receiver, and the same seed giving the same schedule.
    #[test]
    fn skewed_delivery_keeps_every_promise(
        setup in setup_strategy(),
        ops in ops_strategy(5, true),
        seed in any::<u64>(),
        mc2 in any::<bool>(),
    ) {
        let ops: Vec<Op> = ops.into_iter().filter(|o| match o {
            Op::Store { src, .. } | Op::Ack { src } => *src < setup.nodes,
        }).collect();
        let link = if mc2 { LinkTiming::MC2 } else { LinkTiming::UNTHROTTLED };
        let mut eager = build(&setup, 0, link);
        let eager_sink = run(&mut eager, &ops, 500);
        let skewed_run = || {
            run(&mut build_with(&setup, 0, link, DeliveryMode::skewed(seed)), &ops, 500)
        };
        let skewed = skewed_run();
        prop_assert_eq!(&skewed, &skewed_run(), "same seed, same schedule");

        let key = |d: &Delivery| (d.packet.seq, d.receiver, d.page, d.page_offset, d.packet.len);
        let e: Vec<_> = eager_sink.deliveries().map(key).collect();
        let s: Vec<_> = skewed.deliveries().map(key).collect();
        prop_assert_eq!(e, s, "same deliveries in the same global order");

        let bound = DeliveryMode::skewed(seed).max_lag();
        // A delivery lags its eager time by at most the bound, or waits for
        // an earlier ACK answer at the same receiver (which waited for
        // everyone): the latest ACK due time at each receiver, by sequence.
        let acks_at = |r: NodeId, seq: u64| {
            skewed
                .acks()
                .filter(|a| a.writer == r && a.seq < seq)
                .map(|a| a.at)
                .max()
                .unwrap_or(Nanos::ZERO)
        };
        let mut last: HashMap<NodeId, (u64, Nanos)> = HashMap::new();
        for (d, de) in skewed.deliveries().zip(eager_sink.deliveries()) {
            prop_assert!(d.at >= de.at, "never earlier than eager");
            let limit = Nanos(de.at.0 + bound.0).max(acks_at(d.receiver, d.packet.seq));
            prop_assert!(d.at <= limit, "bounded lag: {} > {}", d.at, limit);
            if let Some((seq, at)) = last.get(&d.receiver) {
                prop_assert!(d.packet.seq > *seq && d.at >= *at, "receiver order");
            }
            last.insert(d.receiver, (d.packet.seq, d.at));
        }
        for a in skewed.acks() {
            for d in skewed.deliveries().filter(|d| d.packet.seq < a.seq) {
                prop_assert!(a.at >= d.at, "ACK {} due {} before delivery {} due {}", a.seq, a.at, d.packet.seq, d.at);
            }
        }
    }
}

/// A fault plan for [`runs_match_packet_by_packet`]: rules of either kind,
/// each in one scope with a rate that may be zero.
fn fault_plan_strategy() -> impl Strategy<Value = Vec<(bool, u8, u8, u8, u32)>> {
    prop::collection::vec(
        (
            any::<bool>(),
            0u8..3,
            0u8..5,
            0u8..5,
            prop_oneof![Just(0u32), 1u32..400_000],
        ),
        0..3,
    )
}

fn apply_plan(hub: &mut Hub, plan: &[(bool, u8, u8, u8, u32)]) {
    let n = hub.nodes();
    let mut sink = RecordingSink::new();
    for &(drop, kind, a, b, ppm) in plan {
        let scope = match kind {
            0 => FaultScope::Everywhere,
            1 => FaultScope::Node(NodeId(a % n)),
            _ => FaultScope::Link {
                from: NodeId(a % n),
                to: NodeId(b % n),
            },
        };
        let fault = if drop {
            PacketFault::Drop
        } else {
            PacketFault::Corrupt
        };
        let rate = Rate::from_ppm(ppm).unwrap();
        hub.apply_fault(
            Nanos(0),
            FaultCommand::Packets { fault, scope, rate },
            &mut sink,
        )
        .unwrap();
    }
}

/// Stores of up to a few pages, some carrying a virtual time.
fn long_ops_strategy(nodes: u8) -> impl Strategy<Value = Vec<(Op, Option<u64>)>> {
    let store = (0..nodes, 0..DATA_PAGES, 0..PAGE, 1u32..9000, any::<u8>()).prop_map(
        |(src, page, offset, len, fill)| Op::Store {
            src,
            page,
            offset,
            len,
            fill,
        },
    );
    let ack = (0..nodes).prop_map(|src| Op::Ack { src });
    let op = prop_oneof![8 => store, 1 => ack];
    let vt = prop_oneof![3 => Just(None), 1 => (0u64..1_000_000).prop_map(Some)];
    prop::collection::vec((op, vt), 1..40)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Forwarding a page's packets as one run (`Hub::set_packet_runs`, on
    /// by default) changes nothing the model promises: against the
    /// packet-by-packet path on random PCTs, stores (some stamped with a
    /// virtual time), fault plans (drops and corruption at packet
    /// granularity, a link going down and up, a hub stall), link timings
    /// and delivery modes, every delivery (its packet, sequence number,
    /// receiver, place, due time and virtual arrival), ACK answer and event
    /// comes in the same order, and every counter, error status, clock and
    /// random stream ends the same.
    #[test]
    fn runs_match_packet_by_packet(
        setup in setup_strategy(),
        ops in long_ops_strategy(5),
        seed in any::<u64>(),
        plan in fault_plan_strategy(),
        flap in any::<bool>(),
        stall in any::<bool>(),
        mc2 in any::<bool>(),
        skewed in any::<bool>(),
    ) {
        let ops: Vec<_> = ops.into_iter().filter(|(o, _)| match o {
            Op::Store { src, .. } | Op::Ack { src } => *src < setup.nodes,
        }).collect();
        let link = if mc2 { LinkTiming::MC2 } else { LinkTiming::UNTHROTTLED };
        let delivery = if skewed { DeliveryMode::skewed(seed) } else { DeliveryMode::Eager };
        let go = |runs: bool| {
            let mut hub = build_with(&setup, seed, link, delivery);
            hub.set_packet_runs(runs);
            apply_plan(&mut hub, &plan);
            if flap {
                hub.schedule_fault(Nanos(3_000), FaultCommand::LinkDown(NodeId(1))).unwrap();
                hub.schedule_fault(Nanos(6_000), FaultCommand::LinkUp(NodeId(1))).unwrap();
            }
            if stall {
                hub.schedule_fault(Nanos(2_000), FaultCommand::StallHub { duration: Nanos(4_000) }).unwrap();
            }
            let mut sink = RecordingSink::new();
            let mut results = Vec::new();
            for (i, (op, vt)) in ops.iter().enumerate() {
                let (src, addr, data) = op_store(op, hub.nodes());
                results.push(hub.transmit_stamped(
                    Nanos(i as u64 * 400),
                    src,
                    addr,
                    len_u32(&data),
                    vt.map(Nanos),
                    &mut sink,
                ));
            }
            let nodes: Vec<_> = (0..setup.nodes)
                .map(|n| {
                    let id = NodeId(n);
                    (hub.node_counters(id).unwrap(), hub.error_status(id).unwrap(), hub.status_lag(id))
                })
                .collect();
            (sink, results, nodes, hub.hub_counters(), hub.last_seq(), hub.stalled_until())
        };
        let (runs, by_packet) = (go(true), go(false));
        prop_assert_eq!(&runs.0.records, &by_packet.0.records);
        prop_assert_eq!(runs, by_packet);
    }
}

/// Counts the runs a hub hands over, and expands them as a plain sink would.
#[derive(Default)]
struct RunCounter {
    runs: usize,
    inner: RecordingSink,
}

impl DeliverySink for RunCounter {
    fn deliver(&mut self, d: &Delivery) {
        self.inner.deliver(d);
    }
    fn deliver_run(&mut self, run: &PacketRun, to: &[(NodeId, Nanos)]) {
        self.runs += 1;
        self.inner.deliver_run(run, to);
    }
    fn ack(&mut self, a: &AckReport) {
        self.inner.ack(a);
    }
    fn event(&mut self, e: &Event) {
        self.inner.event(e);
    }
}

/// The common case goes as runs: a two-page store on an unthrottled,
/// eager, fault-free cluster is two runs of packets, one per page; a fault
/// rule that can hit the copy sends it packet by packet.
#[test]
fn a_fault_free_store_goes_as_one_run_per_page() {
    let setup = Setup {
        nodes: 2,
        payload: 32,
        entries: vec![
            vec![
                PctEntry {
                    transmit: Some(Destination::Node(NodeId(1))),
                    ..PctEntry::default()
                };
                DATA_PAGES as usize
            ],
            vec![
                PctEntry {
                    receive: true,
                    ..PctEntry::default()
                };
                DATA_PAGES as usize
            ],
        ],
    };
    let mut hub = build(&setup, 1, LinkTiming::UNTHROTTLED);
    let mut sink = RunCounter::default();
    let sent = hub
        .transmit(
            Nanos(0),
            NodeId(0),
            GlobalAddr(u64::from(PAGE) - 64),
            4096,
            &mut sink,
        )
        .unwrap();
    assert_eq!(sink.runs, 2);
    assert_eq!(sent.packets, 128);
    assert_eq!(sink.inner.deliveries().count(), 128);
    assert_eq!(hub.last_seq(), 128);

    apply_plan(&mut hub, &[(true, 2, 0, 1, 1)]);
    let mut sink = RunCounter::default();
    hub.transmit(Nanos(1), NodeId(0), GlobalAddr(0), 64, &mut sink)
        .unwrap();
    assert_eq!(sink.runs, 0);
}
