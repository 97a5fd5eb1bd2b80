//! `mc-host demo`: a guided run of the firmware model, no guests needed.
//!
//! It plays the seed's scenarios on one hub: a broadcast region with loopback
//! (seed 004, Figure 2 and the global-counter example), a point-to-point channel,
//! "save count, write, check" over an ACK page under link corruption (seed 004,
//! "Error Management"), a node crash and rejoin, and prints the counters.

use std::fmt::Write as _;

use clap::Args;
use firmware_model::*;

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Adapters in the cluster (2..=64).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u8).range(2..=64))]
    nodes: u8,
    /// Link timing preset: mc1, mc2, clan (seed 001's cLAN VIA, also in virtual time) or unthrottled.
    #[arg(long, default_value = "mc2")]
    link: LinkTiming,
    /// Seed of the fault injector (the default shows a few retries).
    #[arg(long, default_value_t = 2)]
    seed: u64,
    /// Probability that a packet to the last node is corrupted (0..1).
    #[arg(long, default_value = "0.01", value_parser = parse_rate)]
    corrupt: Rate,
}

#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Fault(#[from] FaultError),
    #[error("the demo's own check failed: {0}")]
    Check(DemoCheck),
}

/// The demo's own checks of what the model did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DemoCheck {
    #[error("every write reaches every node")]
    BroadcastReachesEveryNode,
    #[error("point-to-point reaches one node")]
    PointToPointReachesOneNode,
    #[error("a clean check means the data arrived")]
    CleanCheckMeansDataArrived,
    #[error("lost packets leave a hole")]
    LostPacketsLeaveAHole,
}

/// A `--corrupt` value that is not a probability.
#[derive(Debug, thiserror::Error)]
pub enum RateArgError {
    #[error("{text:?} is not a number")]
    NotANumber {
        text: String,
        #[source]
        source: std::num::ParseFloatError,
    },
    #[error(transparent)]
    OutOfRange(#[from] FaultError),
}

fn parse_rate(s: &str) -> Result<Rate, RateArgError> {
    let p: f64 = s.parse().map_err(|source| RateArgError::NotANumber {
        text: s.to_string(),
        source,
    })?;
    Ok(Rate::from_probability(p)?)
}

const REGION_PAGE: u32 = 16;
const P2P_PAGE: u32 = 17;
const ACK_PAGE: u32 = 18;

fn ensure(cond: bool, what: DemoCheck) -> Result<(), DemoError> {
    if cond {
        Ok(())
    } else {
        Err(DemoError::Check(what))
    }
}

pub fn run(args: &DemoArgs) -> Result<(), DemoError> {
    let config = ClusterConfig {
        link: args.link,
        fault_seed: args.seed,
        hub_ports: args.nodes.max(8),
        ..ClusterConfig::new(args.nodes)
    };
    let page_size = u64::from(config.page_size);
    let mut hub = Hub::new(config)?;
    let n = hub.nodes();
    let last = NodeId(n - 1);
    let at = |page: u32, off: u64| GlobalAddr(u64::from(page) * page_size + off);
    println!(
        "Memory Channel cluster: {n} nodes, {} MiB global space, {} B pages, {} B packets, link {}",
        hub.config().address_space >> 20,
        hub.config().page_size,
        hub.config().max_payload,
        hub.config().link
    );

    // 1. A coherent broadcast region: every node transmits with loopback and
    //    receives, so every node sees every write, its own included.
    for node in 0..n {
        let entry = PctEntry::transmit_broadcast()
            .with_loopback()
            .with_receive();
        hub.set_pct(NodeId(node), PageNumber(REGION_PAGE), entry)?;
    }
    let mut shadow = ShadowCluster::new(hub.config().page_size);
    let mut now = Nanos(0);
    for node in 0..n {
        let msg = format!("hello from node {node}");
        let s = shadow.store(
            &mut hub,
            now,
            NodeId(node),
            at(REGION_PAGE, 64 * u64::from(node)),
            msg.as_bytes(),
        )?;
        now = now.max(s.done_at);
    }
    println!(
        "\n1. broadcast + loopback region ({}):",
        PageNumber(REGION_PAGE)
    );
    for reader in [NodeId(0), last] {
        let mut line = String::new();
        for writer in 0..n {
            let len = format!("hello from node {writer}").len();
            let bytes = shadow.read(reader, at(REGION_PAGE, 64 * u64::from(writer)), len);
            let _ = write!(line, "[{}] ", String::from_utf8_lossy(&bytes));
        }
        println!("   {reader} reads {line}");
        ensure(
            line.matches("hello").count() == usize::from(n),
            DemoCheck::BroadcastReachesEveryNode,
        )?;
    }

    // 2. Point-to-point: node 0 -> last node only.
    hub.set_pct(NodeId(0), PageNumber(P2P_PAGE), PctEntry::transmit_to(last))?;
    for node in 1..n {
        hub.set_pct(NodeId(node), PageNumber(P2P_PAGE), PctEntry::receive())?;
    }
    let s = shadow.store(&mut hub, now, NodeId(0), at(P2P_PAGE, 0), b"just for you")?;
    now = now.max(s.done_at);
    println!(
        "\n2. point-to-point node0 -> {last}: {} packet(s), {} delivery; node1 sees {:?}, {last} sees {:?}",
        s.packets,
        s.deliveries,
        String::from_utf8_lossy(&shadow.read(NodeId(1), at(P2P_PAGE, 0), 12)),
        String::from_utf8_lossy(&shadow.read(last, at(P2P_PAGE, 0), 12)),
    );
    ensure(s.deliveries == 1, DemoCheck::PointToPointReachesOneNode)?;

    // 3. Save count, write, check (seed 004, "Error Management") with a noisy link.
    let rate = args.corrupt;
    hub.apply_fault(
        now,
        FaultCommand::Packets {
            fault: PacketFault::Corrupt,
            scope: FaultScope::Node(last),
            rate,
        },
        &mut shadow.sink(),
    )?;
    hub.set_pct(NodeId(0), PageNumber(ACK_PAGE), PctEntry::ack_page())?;
    println!("\n3. save count, write, check: corrupting {rate} of packets on {last}'s link");
    let mut attempts: u32 = 0;
    loop {
        attempts += 1;
        // A fresh pattern each attempt, so "intact" speaks for this attempt only.
        // The low byte of each count: the pattern wraps every 256 bytes.
        let payload: Vec<u8> = (0..4096u32)
            .map(|i| (i + attempts * 7).to_le_bytes()[0])
            .collect();
        let saved = hub.cluster_error_count();
        let s = shadow.store(&mut hub, now, NodeId(0), at(REGION_PAGE, 1024), &payload)?;
        let a = shadow.store(&mut hub, s.done_at, NodeId(0), at(ACK_PAGE, 0), &[1])?;
        now = now.max(a.done_at);
        let words = shadow.read(NodeId(0), at(ACK_PAGE, 0), 4 * usize::from(n));
        let statuses: Vec<AdapterErrorStatus> = words
            .chunks_exact(4)
            .map(|w| AdapterErrorStatus::from_word(u32::from_le_bytes([w[0], w[1], w[2], w[3]])))
            .collect();
        let errors: Vec<u32> = statuses.iter().map(|s| s.network_errors).collect();
        let clean = hub.cluster_error_count() == saved;
        println!(
            "   attempt {attempts}: {} packets, {} lost, ACK statuses (errors per node) {errors:?} -> {}",
            s.packets,
            s.lost,
            if clean { "clean" } else { "error seen, retry" }
        );
        let good = (0..n).all(|r| shadow.read(NodeId(r), at(REGION_PAGE, 1024), 4096) == payload);
        if clean {
            println!("   every node holds this attempt's 4 KiB message intact: {good}");
            ensure(good, DemoCheck::CleanCheckMeansDataArrived)?;
            break;
        }
        ensure(!good || s.lost == 0, DemoCheck::LostPacketsLeaveAHole)?;
        if attempts == 50 {
            println!("   giving up after 50 attempts: the link is too noisy for a 4 KiB message");
            break;
        }
    }
    hub.apply_fault(now, FaultCommand::ClearPackets, &mut shadow.sink())?;

    // 4. A node crashes and rejoins: membership epochs.
    hub.apply_fault(now, FaultCommand::Crash(last), &mut shadow.sink())?;
    let m = hub.membership();
    println!(
        "\n4. {last} crashes: epoch {} members {}",
        m.epoch, m.members
    );
    let s = shadow.store(
        &mut hub,
        now,
        NodeId(0),
        at(REGION_PAGE, 0),
        b"while you were out",
    )?;
    println!("   a broadcast now reaches {} node(s)", s.deliveries);
    hub.apply_fault(now, FaultCommand::Rejoin(last), &mut shadow.sink())?;
    let m = hub.membership();
    println!(
        "   {last} rejoins with an empty PCT: epoch {} members {}",
        m.epoch, m.members
    );

    // 5. Counters.
    println!("\n5. counters");
    println!(
        "   {:<6} {:>8} {:>9} {:>8} {:>9} {:>6} {:>6}",
        "node", "pkts tx", "bytes tx", "pkts rx", "bytes rx", "drops", "errors"
    );
    for node in 0..n {
        let c = hub.node_counters(NodeId(node))?;
        println!(
            "   {:<6} {:>8} {:>9} {:>8} {:>9} {:>6} {:>6}",
            NodeId(node).to_string(),
            c.packets_sent,
            c.bytes_sent,
            c.packets_received,
            c.bytes_received,
            c.drops,
            c.errors
        );
    }
    let h = hub.hub_counters();
    println!(
        "   hub: {} packets ({} broadcast), {} deliveries, {} drops, cluster error count {}, {} ACKs",
        h.packets, h.broadcasts, h.deliveries, h.drops, h.errors, h.acks
    );
    println!(
        "   model time elapsed: {:.1} us (link {})",
        now.0 as f64 / 1e3,
        hub.config().link
    );
    Ok(())
}
