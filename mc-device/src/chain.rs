//! Descriptor chains as the device sees them: split into the readable part
//! (the request) and the first writable buffer (where the answer goes), with
//! every range checked against guest RAM; and signalling a used ring.

use firmware_model::abi::Status;
use virtio_queue::DescriptorChain;

use crate::memory::{range_ok, MemGuard, Piece};

/// A descriptor chain split into its readable and writable parts.
pub(crate) struct SplitChain {
    pub(crate) head: u16,
    pub(crate) readable: Vec<Piece>,
    pub(crate) readable_len: u64,
    pub(crate) writable: Option<Piece>,
    /// Why the chain's layout is unusable, if it is.
    pub(crate) defect: Option<Status>,
}

pub(crate) fn split_chain(
    chain: DescriptorChain<MemGuard>,
    mem: &MemGuard,
    max_readable: u64,
) -> SplitChain {
    let mut c = SplitChain {
        head: chain.head_index(),
        readable: Vec::new(),
        readable_len: 0,
        writable: None,
        defect: None,
    };
    for desc in chain {
        let (addr, len) = (desc.addr().0, desc.len());
        if !range_ok(mem, addr, len as usize) {
            c.defect.get_or_insert(Status::BadAddress);
            continue;
        }
        if desc.is_write_only() {
            c.writable.get_or_insert((addr, len));
        } else {
            if c.writable.is_some() {
                // Readable after writable breaks the virtio layout rule.
                c.defect.get_or_insert(Status::Malformed);
            }
            c.readable_len += u64::from(len);
            if c.readable_len > max_readable {
                // Keep walking (the chain length is bounded by the queue) to
                // find the completion buffer, but keep no more data.
                c.defect.get_or_insert(Status::TooLarge);
                continue;
            }
            c.readable.push((addr, len));
        }
    }
    c
}

pub(crate) fn status_str(code: u32) -> String {
    Status::from_u32(code).map_or_else(|| format!("status {code}"), |s| s.to_string())
}
