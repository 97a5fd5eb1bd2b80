//! The crate's error type. Every error type of the guest side either names
//! its cause in its message or returns it from `source()`, never both, so
//! [`firmware_model::ErrorChain`] prints each cause once.

use std::time::Duration;

use firmware_model::abi::Status;

use crate::dma::DmaError;
use crate::transport::TransportError;
use crate::virtqueue::QueueError;

/// Everything the driver can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Dma(#[from] DmaError),
    #[error(transparent)]
    Queue(#[from] QueueError),
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// The device answered a request with a status other than OK.
    #[error("{request} refused by the adapter: {} (status {status}, detail {detail})", status_name(*.status))]
    Refused {
        request: &'static str,
        status: u32,
        detail: u32,
    },
    /// The device did not complete a request in time.
    #[error("{what}: no answer from the adapter after {after:?}")]
    Timeout { what: &'static str, after: Duration },
    /// The device answered with a value its field cannot hold (a PCT
    /// entry is a 32-bit word).
    #[error("{what}: the adapter answered {value:#x}, which does not fit its field")]
    BadAnswer { what: &'static str, value: u64 },
    /// The device completed a request without writing a whole answer.
    #[error("{what}: the adapter wrote {len} bytes, {need} expected")]
    ShortAnswer {
        what: &'static str,
        len: u32,
        need: usize,
    },
    /// The device completed a chain the driver did not post on that queue,
    /// or not the one it waits for.
    #[error("{queue} queue: completion for chain {chain}, which the driver is not waiting for")]
    StrayCompletion { queue: &'static str, chain: u16 },
    /// A control request larger than the control buffer.
    #[error("a control request of {len} bytes (the largest is {max})")]
    RequestTooLarge { len: usize, max: usize },
    /// A page range that runs past the last page number.
    #[error("{count} pages from page {first_page}")]
    PageRange { first_page: u32, count: u32 },
    #[error("zero pages of receive memory")]
    NoPages,
    #[error("{pages} pages of {page_size} bytes of receive memory")]
    ReceiveTooLarge { pages: u32, page_size: u32 },
    /// One store longer than a record can say (its length is 32 bits).
    #[error("a store of {len} bytes")]
    StoreTooLarge { len: usize },
    /// A transmit FIFO size the device would not take.
    #[error("a transmit FIFO of {slots} slots (a power of two from 128 to 524288)")]
    FifoSize { slots: u32 },
    /// The device stopped taking this node's FIFO: a record did not parse.
    #[error("the adapter stopped taking the transmit FIFO at position {position}: {} (detail {detail})", status_name(*.status))]
    FifoBroken {
        status: u32,
        detail: u32,
        position: u64,
    },
    /// A previous request timed out and is still in flight.
    #[error("{0} is busy: an earlier request has not completed")]
    Busy(&'static str),
    #[error("an arrival table of {bytes} bytes does not fit in the {budget} bytes of DMA memory it may take (give the guest more memory)")]
    ArrivalTableTooLarge { bytes: u64, budget: u64 },
    #[error("no status page: call set_status_page first")]
    NoStatusPage,
    #[error("the status page has not been written by the adapter")]
    StatusPageNotReady,
    #[error("the adapter's register file reports a page size of {0} bytes")]
    BadPageSize(u32),
}

fn status_name(s: u32) -> String {
    match Status::from_u32(s) {
        Some(st) => st.to_string(),
        None => format!("unknown status {s}"),
    }
}

impl Error {
    /// The device's status, if this is a refusal.
    pub fn status(&self) -> Option<Status> {
        match self {
            Error::Refused { status, .. } | Error::FifoBroken { status, .. } => {
                Status::from_u32(*status)
            }
            _ => None,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use firmware_model::ErrorChain;

    #[test]
    fn a_chain_prints_each_cause_once() {
        let e = crate::OpenError::Pci {
            source: Error::Transport(TransportError::Io {
                what: "reading the BAR",
                source: std::io::Error::other("gone"),
            }),
        };
        let text = ErrorChain(&e).to_string();
        assert_eq!(text.matches("gone").count(), 1, "{text}");
        assert!(text.starts_with("no vhost-user socket given"), "{text}");
        assert!(text.ends_with("reading the BAR: gone"), "{text}");
    }
}
