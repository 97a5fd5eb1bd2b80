//! Bringing every node's report to node 0 for the run's record, through the
//! Memory Channel API after Cashmere has finished (so the counters are not
//! disturbed): a coherent region with a slot per node; each node writes its
//! report (JSON) into its slot, then a trailer (length, sequence number).
//! Total order means node 0, once it sees a node's new sequence number,
//! sees the report written before it.

use std::time::Duration;

use mc_api::backoff::poll_until;
use mc_api::{McError, MemoryChannel, Sharing};

use crate::record::NodeReport;

/// The region's key.
const KEY: u32 = 0x5245_5054; // "REPT"
/// Bytes per node: the report and, in the last 16 bytes, its length and
/// sequence number.
const SLOT: usize = 16 << 10;
/// How long node 0 waits for the others' reports.
const WAIT: Duration = Duration::from_secs(120);

#[derive(Debug, thiserror::Error)]
pub enum GatherError {
    #[error(transparent)]
    Mc(#[from] McError),
    #[error("node {node}'s report is {len} bytes, more than a slot's {max}")]
    TooLarge { node: u32, len: usize, max: usize },
    #[error("no report from nodes {missing:?} within {WAIT:?}")]
    Missing { missing: Vec<u32> },
    #[error("node {node}'s report does not parse")]
    Decode {
        node: u32,
        #[source]
        source: serde_json::Error,
    },
    #[error("cannot encode this node's report")]
    Encode(#[source] serde_json::Error),
}

/// Send this node's report; on node 0, wait for and return every node's
/// (in node order). Every node calls it once per run.
pub fn collect(
    mc: &MemoryChannel,
    mine: &NodeReport,
) -> Result<Option<Vec<NodeReport>>, GatherError> {
    let nodes = mc.nodes() as usize;
    let me = mc.node_id().index();
    let id = mc.region_alloc(KEY, (nodes * SLOT) as u64, true)?;
    let tx = mc.attach_transmit(id, Sharing::Shared, true)?;
    let rx = mc.attach_receive(id, Sharing::Shared, false)?;
    let trailer = |n: usize| n * SLOT + SLOT - 16;
    // Sequence numbers continue from this node's last report, so a cluster
    // that runs several programs never mistakes an old report for a new one.
    let seq = rx.load_u64(trailer(me) + 8)? + 1;
    let body = serde_json::to_vec(mine).map_err(GatherError::Encode)?;
    if body.len() > SLOT - 16 {
        return Err(GatherError::TooLarge {
            node: mine.node,
            len: body.len(),
            max: SLOT - 16,
        });
    }
    tx.write(me * SLOT, &body)?;
    let mut t = [0u8; 16];
    t[..8].copy_from_slice(&(body.len() as u64).to_le_bytes());
    t[8..].copy_from_slice(&seq.to_le_bytes());
    tx.write(trailer(me), &t)?;
    mc.flush()?;
    if me != 0 {
        return Ok(None);
    }
    let arrived = |n: usize| rx.load_u64(trailer(n) + 8).is_ok_and(|s| s >= seq);
    if poll_until(WAIT, || (0..nodes).all(arrived).then_some(())).is_none() {
        return Err(GatherError::Missing {
            missing: (0..nodes)
                .filter(|&n| !arrived(n))
                .map(|n| u32::try_from(n).expect("a node number fits u32"))
                .collect(),
        });
    }
    (0..nodes)
        .map(|n| {
            let len = usize::try_from(rx.load_u64(trailer(n))?).unwrap_or(usize::MAX);
            let bytes = rx.to_vec(n * SLOT, len.min(SLOT - 16))?;
            serde_json::from_slice(&bytes).map_err(|source| GatherError::Decode {
                node: u32::try_from(n).expect("a node number fits u32"),
                source,
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}
