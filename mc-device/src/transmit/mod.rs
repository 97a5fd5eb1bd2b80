//! The transmit side, device half: a driver's FIFO registered, its committed
//! records taken in slot order, sent through the hub (the model decides who
//! receives what, in which order and when) and delivered (delivery/), and
//! the records the model refuses counted. docs/device.md section 14,
//! "Transmit FIFO".
//!
//! Here: a FIFO as the device reads it (fifo.rs), each node's transmit side
//! (side.rs: the FIFO registered, refused, broken, forgotten, its doorbell),
//! and its progress as the control path reads it (progress.rs). Records are
//! taken in one place only, `DeviceState::take_from_fifo` (state/transmit.rs,
//! which needs the hub and the receivers too), which the hub's pass calls for
//! each node in turn with a budget; the control path waits for it
//! (progress.rs) instead of taking itself.
//!
//! A refused store (a page not enabled for transmit, ...) is counted in the
//! FIFO header and as a protection error; the stores after it go on, as
//! posted writes do. A record that does not parse stops the FIFO (state
//! Broken) until the driver registers it again.
//!
//! Consecutive records that continue one another within one transmit page are
//! sent as one store, as the Alpha's write buffer merged stores into one
//! packet: receivers see the same bytes in the same order, in fewer packets.

mod fifo;
mod progress;
mod side;

use firmware_model::{Hub, NodeId, PageNumber};

pub(crate) use fifo::Run;
pub(crate) use side::TxSide;

/// A sender whose deliveries not yet due hold this many bytes is not taken
/// from until they drain: its FIFO fills and its stores wait, as a full write
/// buffer stalls the processor.
pub(crate) const MAX_QUEUED_BYTES: usize = 16 << 20;

/// A store at `addr` may be merged with the next: it lies in one page that
/// `node` transmits on (not an ACK page, where each store is a query).
pub(crate) fn mergeable(hub: &Hub, node: NodeId, addr: u64, len: u32) -> bool {
    let page_size = u64::from(hub.config().page_size);
    let Some(last) = addr
        .checked_add(u64::from(len))
        .and_then(|e| e.checked_sub(1))
    else {
        return false;
    };
    if len == 0 || addr / page_size != last / page_size {
        return false;
    }
    let Ok(page) = u32::try_from(addr / page_size) else {
        return false;
    };
    hub.pct_entry(node, PageNumber(page))
        .is_ok_and(|e| e.transmit.is_some() && !e.ack)
}
