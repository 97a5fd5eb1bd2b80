//! One channel as a task holds it: who its ends are, its state (being
//! opened, open, closed by the peer), its link once open, and the writing
//! and reading state machines of its two directions, each behind its own
//! lock (the background writer and the task's threads share the writing
//! end; only the task's threads read).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use crate::error::{Damage, Transport, UmpError};
use crate::link::Link;
use crate::stream::{OutMsg, Reader, Writer};
use crate::ChannelId;

/// The data of a non-blocking write, kept until it is written.
pub type Payload = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// Why a started write did not complete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum WriteFailure {
    Damaged(Damage),
    Closed,
    Other(String),
}

/// The outcome of one non-blocking write, shared with its handle.
#[derive(Default)]
pub(crate) struct WriteStatus {
    done: Mutex<Option<Result<(), WriteFailure>>>,
    cv: Condvar,
}

impl WriteStatus {
    pub(crate) fn complete(&self, r: Result<(), WriteFailure>) {
        *self.done.lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
        self.cv.notify_all();
    }
}

/// A started non-blocking write (`ump_nbwrite`): the background thread
/// finishes it.
#[derive(Clone)]
pub struct PendingWrite {
    pub(crate) channel: ChannelId,
    pub(crate) status: Arc<WriteStatus>,
}

impl PendingWrite {
    /// Whether the whole message is in the peer's ring (or failed).
    pub fn is_done(&self) -> bool {
        self.status
            .done
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// Wait until it is done, at most `timeout`; `Ok(false)` if not yet.
    pub fn wait(&self, timeout: Duration) -> Result<bool, UmpError> {
        let g = self.status.done.lock().unwrap_or_else(|p| p.into_inner());
        let (g, _) = self
            .status
            .cv
            .wait_timeout_while(g, timeout, |d| d.is_none())
            .unwrap_or_else(|p| p.into_inner());
        match &*g {
            None => Ok(false),
            Some(Ok(())) => Ok(true),
            Some(Err(f)) => Err(failure_error(self.channel, f)),
        }
    }
}

pub(crate) fn failure_error(channel: ChannelId, f: &WriteFailure) -> UmpError {
    match f {
        WriteFailure::Damaged(d) => UmpError::Damaged {
            channel,
            damage: *d,
        },
        WriteFailure::Closed => UmpError::Closed(channel),
        WriteFailure::Other(s) => UmpError::Config(format!("the write failed: {s}")),
    }
}

/// A queued message of a non-blocking write.
pub(crate) struct Queued {
    pub(crate) data: Payload,
    pub(crate) msg: Option<OutMsg>,
    pub(crate) status: Arc<WriteStatus>,
}

/// The writing end.
pub(crate) struct TxSide {
    pub(crate) writer: Writer,
    pub(crate) queue: VecDeque<Queued>,
    pub(crate) failed: Option<WriteFailure>,
}

impl TxSide {
    /// Fail every queued write (the channel broke or closed).
    pub(crate) fn fail_all(&mut self, f: WriteFailure) {
        for q in self.queue.drain(..) {
            q.status.complete(Err(f.clone()));
        }
        self.failed.get_or_insert(f);
    }
}

/// A channel as one task holds it.
pub(crate) struct Chan {
    pub(crate) id: ChannelId,
    pub(crate) local: u64,
    pub(crate) remote: u64,
    pub(crate) uid: u32,
    pub(crate) side_a: bool,
    /// This end's Memory Channel ring, if it has one.
    pub(crate) my_off: Mutex<Option<u32>>,
    pub(crate) link: OnceLock<(Arc<dyn Link>, Transport)>,
    pub(crate) peer_closed: AtomicBool,
    pub(crate) tx: Mutex<TxSide>,
    pub(crate) rx: Mutex<Reader>,
    pub(crate) sent: AtomicU64,
    pub(crate) received: AtomicU64,
}

impl Chan {
    pub(crate) fn new(
        id: ChannelId,
        local: u64,
        remote: u64,
        uid: u32,
        side_a: bool,
        config: &crate::Config,
    ) -> Chan {
        Chan {
            id,
            local,
            remote,
            uid,
            side_a,
            my_off: Mutex::new(None),
            link: OnceLock::new(),
            peer_closed: AtomicBool::new(false),
            tx: Mutex::new(TxSide {
                writer: Writer::new(config.fragment_bytes, config.checksum, config.writer_check),
                queue: VecDeque::new(),
                failed: None,
            }),
            rx: Mutex::new(Reader::new(config.checksum, config.receiver_check)),
            sent: AtomicU64::new(0),
            received: AtomicU64::new(0),
        }
    }

    pub(crate) fn link(&self) -> Option<&dyn Link> {
        self.link.get().map(|(l, _)| &**l)
    }

    pub(crate) fn is_open(&self) -> bool {
        self.link.get().is_some()
    }

    pub(crate) fn peer_closed(&self) -> bool {
        self.peer_closed.load(Ordering::Acquire)
    }

    pub(crate) fn tx(&self) -> MutexGuard<'_, TxSide> {
        self.tx.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn rx(&self) -> MutexGuard<'_, Reader> {
        self.rx.lock().unwrap_or_else(|p| p.into_inner())
    }
}
