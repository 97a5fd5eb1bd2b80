//! The crate's error type.

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
    /// The device completed a request without writing a whole answer.
    #[error("{what}: the adapter wrote {len} bytes, {need} expected")]
    ShortAnswer {
        what: &'static str,
        len: u32,
        need: usize,
    },
    /// A request or store the driver cannot express.
    #[error("{0}")]
    Invalid(String),
    /// A previous request timed out and is still in flight.
    #[error("{0} is busy: an earlier request has not completed")]
    Busy(&'static str),
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
            Error::Refused { status, .. } => Status::from_u32(*status),
            _ => None,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
