//! The status page: a page of DMA memory the adapter keeps up to date
//! (cluster error count, update counter, ...; docs/device.md), registered
//! with SET_STATUS_PAGE and read without asking the device.

use firmware_model::abi::{self, CtrlRequest, StatusPage, STATUS_PAGE_SIZE};

use super::Adapter;
use crate::backoff::{poll_until_with, BackoffPolicy};
use crate::dma::DmaRegion;
use crate::error::{Error, Result};
use crate::transport::Transport;

/// A view of the status page, cheap to clone and usable from any thread.
#[derive(Clone, Debug)]
pub struct StatusView {
    region: DmaRegion,
}

/// How long [`StatusView::read`] keeps trying for a consistent copy.
const STATUS_READ_GIVE_UP: std::time::Duration = std::time::Duration::from_secs(1);

impl StatusView {
    /// The cluster error count: one aligned 64-bit load (`imc_rderrcnt`).
    pub fn cluster_error_count(&self) -> Result<u64> {
        self.load(abi::status_page::CLUSTER_ERROR_COUNT)
    }

    /// The update counter (incremented after every update of the page).
    pub fn updates(&self) -> Result<u64> {
        self.load(abi::status_page::UPDATES)
    }

    fn load(&self, off: usize) -> Result<u64> {
        Ok(u64::from_le(
            self.region
                .atomic_u64(off)?
                .load(std::sync::atomic::Ordering::Acquire),
        ))
    }

    /// The whole page, consistent: re-read while the device updated it meanwhile.
    pub fn read(&self) -> Result<StatusPage> {
        let mut buf = [0u8; STATUS_PAGE_SIZE];
        // A sequence lock: odd while the device is writing the page. The
        // device's writer may be preempted half-way through an update (cores
        // are shared), so a reader backs off rather than giving up at once.
        let whole = poll_until_with(
            BackoffPolicy::DEFAULT,
            STATUS_READ_GIVE_UP,
            || -> Result<_> {
                let before = self.updates()?;
                if before % 2 != 0 {
                    return Ok(None);
                }
                self.region.read(0, &mut buf)?;
                std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
                Ok((self.updates()? == before).then_some(()))
            },
        )?;
        match whole {
            Some(()) => StatusPage::from_bytes(&buf).ok_or(Error::StatusPageNotReady),
            // Never whole for this long: the device is not updating it sanely.
            None => Err(Error::StatusPageNotReady),
        }
    }
}

impl<T: Transport> Adapter<T> {
    /// Allocate the status page in DMA memory (once) and register it with the
    /// adapter, which writes it in full before answering.
    pub fn set_status_page(&mut self) -> Result<StatusView> {
        let page = match &self.status_page {
            Some(p) => p.clone(),
            None => {
                let p = self.alloc.alloc(4096, 4096)?;
                self.status_page = Some(p.clone());
                p
            }
        };
        self.ctrl_ok(
            "SET_STATUS_PAGE",
            &CtrlRequest::SetStatusPage { gpa: page.gpa() },
        )?;
        Ok(StatusView {
            region: page.sub(0, STATUS_PAGE_SIZE)?,
        })
    }

    /// A view of the status page, if one was registered.
    pub fn status_view(&self) -> Result<StatusView> {
        let p = self.status_page.as_ref().ok_or(Error::NoStatusPage)?;
        Ok(StatusView {
            region: p.sub(0, STATUS_PAGE_SIZE)?,
        })
    }

    /// The status page as the device last wrote it.
    pub fn status(&self) -> Result<StatusPage> {
        self.status_view()?.read()
    }

    /// The cluster error count from the status page: one 64-bit load.
    pub fn cluster_error_count(&self) -> Result<u64> {
        self.status_view()?.cluster_error_count()
    }
}
