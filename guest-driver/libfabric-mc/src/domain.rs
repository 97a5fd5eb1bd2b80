//! The provider's domain: this process's node of the virtual cluster, its
//! Memory Channel adapter and UMP, opened once per process (an adapter is
//! one process's), shared by every fabric, domain and endpoint it opens.
//!
//! Which node: `MC_SOCKET` names the node's socket as `mc-host run` gives
//! it; under `mc-host mpirun`, `MC_SOCKET_DIR` names the directory of the
//! sockets and the rank (`OMPI_COMM_WORLD_RANK`, `PMIX_RANK`, `PMI_RANK`
//! or `MC_NODE`) picks `node<rank>.sock` in it: rank r is node r.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use mc_api::{McError, MemoryChannel};
use ump::{Config, Node, UmpError};

/// Tag of this provider's addresses (the top 16 bits), so that a foreign
/// address is refused instead of naming some endpoint.
pub const ADDR_TAG: u64 = 0x4d43 << 48;

/// A process's node, as the provider holds it.
pub struct Domain {
    pub node: Arc<Node>,
    pub me: u8,
    next_ep: AtomicU32,
}

/// Why the node could not be opened.
pub type OpenError = String;

fn rank_from_env() -> Option<(String, u32)> {
    ["OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "MC_NODE"]
        .iter()
        .find_map(|v| {
            let s = std::env::var(v).ok()?;
            Some((v.to_string(), s.trim().parse().ok()?))
        })
}

fn connect_options() -> Result<imc::ConnectOptions, OpenError> {
    let mut o = imc::ConnectOptions::from_env();
    if o.socket.is_none() {
        if let Some(dir) = std::env::var_os("MC_SOCKET_DIR").filter(|d| !d.is_empty()) {
            let (var, rank) = rank_from_env().ok_or_else(|| {
                "MC_SOCKET_DIR is set but no rank is (OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK or MC_NODE)".to_string()
            })?;
            let p = PathBuf::from(dir).join(format!("node{rank}.sock"));
            if !p.exists() {
                return Err(format!(
                    "{} (from MC_SOCKET_DIR and {var}={rank}) does not exist: the cluster has fewer nodes than ranks",
                    p.display()
                ));
            }
            o.socket = Some(p);
        }
    }
    Ok(o)
}

/// UMP's configuration: the environment's, with rings sized for MPI unless
/// `MC_UMP_RING_KIB` / `MC_UMP_FRAGMENT_KIB` / `MC_UMP_REGION_KIB` say
/// otherwise. Rings of 32 KiB (UMP's default, the seed's) make a large
/// message wait on its reader every 32 KiB; measured on 2 nodes, 512 KiB
/// rings with 64 KiB fragments tripled the 1 MiB bandwidth, and 2 MiB
/// rings (a whole 1 MiB message fits while the reader is descheduled)
/// raised it again on a loaded host (docs/mpi.md). The rings of the whole
/// cluster are kept within 128 MiB of the global address space (a node
/// holds a ring for each other node): 2 MiB up to 8 nodes, 512 KiB at 16,
/// down to 32 KiB at 64.
fn ump_config(mc: &MemoryChannel) -> Config {
    let mut c = Config::from_env();
    let nodes = u64::from(mc.nodes().max(1));
    if std::env::var_os("MC_UMP_RING_KIB").is_none() {
        let fair = ((128u64 << 20) / (nodes * nodes)).clamp(32 << 10, 2 << 20);
        c.ring_bytes = 1usize << (63 - fair.leading_zeros());
    }
    if std::env::var_os("MC_UMP_FRAGMENT_KIB").is_none() {
        c.fragment_bytes = (c.ring_bytes / 8).max(8 << 10);
    }
    // The provider's blocking UMP calls wait only for what has begun to
    // arrive (the rest of a short message): a packet lost there should end
    // the run in seconds, not UMP's minute.
    if std::env::var_os("MC_UMP_TIMEOUT_S").is_none() {
        c.timeout = c.timeout.min(Duration::from_secs(10));
    }
    if std::env::var_os("MC_UMP_REGION_KIB").is_none() {
        let per_channel = (c.ring_bytes + 4096) as u64;
        // A ring for each other node, and one more: a channel between two
        // endpoints of this node holds a ring here at each end.
        let need = (nodes + 1) * per_channel + (64 << 10);
        c.region_bytes = c.region_bytes.max(need.next_power_of_two());
    }
    c
}

fn open() -> Result<Arc<Domain>, OpenError> {
    let opts = connect_options()?;
    let mc = imc::open_adapter(&opts)
        .map_err(|e| format!("opening the Memory Channel: {}", mc_api::ErrorChain(&e)))?;
    let node = Node::open(&mc, ump_config(&mc))
        .map_err(|e| format!("bringing UMP up: {}", blame_lost_packets(&mc, &e)))?;
    let me = mc.node_id().0;
    log::info!("libfabric-mc: node{me} of {} open", mc.nodes());
    Ok(Arc::new(Domain {
        node,
        me,
        next_ep: AtomicU32::new(1),
    }))
}

/// What a failure of UMP's set-up (its directory, its regions, a channel)
/// says, with its real cause first when that is a lost packet. The Memory
/// Channel API's region table and UMP's directory are written across the
/// network, and a dropped packet is counted by no error count
/// (docs/device.md, faults): it leaves a node's copy of a record
/// incomplete, which then reads as something else. UMP's regions admit
/// every node, and each is attached exclusively only by its own node, so
/// a refusal to attach one, one held by another node, or one that cannot
/// be found, means the table lost a packet (here, or at another node that
/// then changed it at the same time as this one after a lost lock entry),
/// not that permissions forbid it; a table or a directory that never reads whole lost one too.
/// Errors that name the lost packet themselves (mc-api's and UMP's waits)
/// are printed as they are; any other failure after packets were lost on
/// this node's link (the adapter's count: mc-api's `losses`) is printed
/// after that count.
pub fn blame_lost_packets(mc: &MemoryChannel, e: &UmpError) -> String {
    let me = mc.node_id().0;
    let says_so = matches!(
        e,
        UmpError::LostPacket { .. }
            | UmpError::OwnChangeLost { .. }
            | UmpError::Mc(McError::Lost { .. } | McError::LostPacket { .. })
    );
    let what = mc_api::ErrorChain(e).to_string();
    if says_so {
        return what;
    }
    match (mc.error_count(), e) {
        (
            0,
            UmpError::Mc(
                McError::PermissionDenied { .. } | McError::NoSuchRegion(_) | McError::Busy { .. },
            ),
        ) => format!(
            "a packet was lost on the network: node{me}'s copy of the region table does not hold what UMP wrote there (UMP's regions admit every node), and the Memory Channel API reads the incomplete record as: {what}"
        ),
        (0, UmpError::Mc(McError::CorruptTable(_) | McError::UnstableTable(_))) => format!(
            "a packet was lost on the network: node{me}'s copy of the Memory Channel API's tables, written across it, does not read whole: {what}"
        ),
        (0, UmpError::Timeout { what: w, .. }) if w.contains("directory") => format!(
            "a packet was lost on the network: node{me}'s copy of UMP's directory never became whole (each record carries a CRC, so an incomplete one is waited on, not used): {what}"
        ),
        (0, _) => match mc.losses() {
            0 => what,
            n => format!(
                "packets were lost on the network (node{me}'s adapter counted {n} lost on its link), so the state written across it is incomplete; what that broke: {what}"
            ),
        },
        (n, _) => format!(
            "packets were lost on the network (the Memory Channel error count at node{me} is {n}), so the state written across it is incomplete; what that broke: {what}"
        ),
    }
}

/// The process's domain, opened on first use.
pub fn domain() -> Result<Arc<Domain>, OpenError> {
    static DOMAIN: OnceLock<Result<Arc<Domain>, OpenError>> = OnceLock::new();
    DOMAIN.get_or_init(open).clone()
}

impl Domain {
    /// A new endpoint's address: this node and a number of its own.
    pub fn new_address(&self) -> u64 {
        let n = self.next_ep.fetch_add(1, Ordering::Relaxed);
        ADDR_TAG | (u64::from(self.me) << 32) | u64::from(n)
    }

    pub fn memory_channel(&self) -> &MemoryChannel {
        self.node.memory_channel()
    }
}

/// The node an address names, if it is one of this provider's.
pub fn node_of(addr: u64) -> Option<u8> {
    if addr & (0xffff << 48) != ADDR_TAG {
        return None;
    }
    // Bits 32..40 are the node; bits 40..48 must be clear.
    u8::try_from(addr >> 32 & 0xffff).ok()
}
