//! A control request waits for the hub to take the stores its node had
//! committed before it (docs/device.md: a control request is ordered after
//! the node's earlier stores). Above `transmit` and `node`, which hold the
//! progress it reads, and beside the device whose lock it takes.

use std::time::{Duration, Instant};

use firmware_model::NodeId;
use log::debug;

use crate::device::Device;
use crate::node::Node;

/// The longest a control request waits for the hub to take its node's
/// earlier stores (a sender held back by its own backlog of deliveries may
/// not be taken from for a while); it is then served anyway.
const ORDER_WAIT: Duration = Duration::from_secs(2);

/// Wait until the hub has taken every record `node` had committed when
/// this was called (bounded by [`ORDER_WAIT`]), without holding the
/// device lock.
pub(crate) fn wait_for_committed_stores(device: &Device, node: NodeId) {
    let (f, mem, progress, generation) = {
        let st = device.lock();
        let Some(n) = st.nodes().get(node.index()) else {
            return;
        };
        let (Some((f, p)), Some(mem)) = (n.tx().order_point(), n.memory()) else {
            return;
        };
        let g = p.generation();
        (f, mem, p, g)
    };
    let target = f.committed_end(&mem);
    drop(mem);
    if target <= f.head() {
        return;
    }
    device.wake_hub();
    let start = Instant::now();
    let mut spins = 0u32;
    while progress.generation() == generation && progress.head() < target {
        if start.elapsed() > ORDER_WAIT {
            debug!(
                "{}: control request served before the hub took its earlier stores",
                Node(node)
            );
            return;
        }
        spins = spins.saturating_add(1);
        if spins < 64 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Duration::from_micros(20));
        }
    }
}
