//! The background writer of a task (seed 004, UMP: "Deadlock is avoided by
//! using a background thread to write the message"): it finishes the
//! non-blocking writes the task started, in order per channel, while the
//! task's own threads read. It polls the rings it waits on like any other
//! UMP wait (spin, yield, growing sleeps), and blocks on its doorbell when
//! nothing is queued.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::channel::{Chan, WriteFailure};
use crate::error::UmpError;
use crate::stream::Step;
use crate::task::{TaskInner, Ump};

impl TaskInner {
    pub(crate) fn wake_writer(&self) {
        *self.work.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.work_cv.notify_one();
    }
}

impl Ump {
    /// Start the background writer, if it is not running.
    pub(crate) fn start_writer(&self) -> Result<(), UmpError> {
        let mut started = self
            .inner
            .writer_started
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if started.is_some() {
            return Ok(());
        }
        let weak = Arc::downgrade(&self.inner);
        let h = std::thread::Builder::new()
            .name(format!("ump-writer{}", self.inner.id))
            .spawn(move || run(weak))
            .map_err(UmpError::Thread)?;
        *started = Some(h);
        Ok(())
    }
}

/// Push the head of `chan`'s queue as far as the ring allows; true if
/// anything was written or completed.
fn drive(chan: &Chan) -> bool {
    // A blocking write of the task's own holds this end while it waits
    // for room: skip the channel rather than stall every other channel's
    // queue behind it (its queue was empty when that write began).
    let mut tx = match chan.tx.try_lock() {
        Ok(g) => g,
        Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
        Err(std::sync::TryLockError::WouldBlock) => return false,
    };
    let Some(link) = chan.link() else {
        return false;
    };
    if chan.peer_closed() && !tx.queue.is_empty() {
        tx.fail_all(WriteFailure::Closed);
        return true;
    }
    let mut progressed = false;
    while let Some(mut q) = tx.queue.pop_front() {
        let bytes = (*q.data).as_ref();
        let mut m = q
            .msg
            .take()
            .unwrap_or_else(|| tx.writer.start(bytes.len() as u64));
        match tx.writer.step(link, &mut m, bytes) {
            Ok(Step::Done) => {
                chan.sent.fetch_add(1, Ordering::Relaxed);
                q.status.complete(Ok(()));
                progressed = true;
            }
            Ok(s) => {
                progressed |= s == Step::Progress;
                q.msg = Some(m);
                tx.queue.push_front(q);
                break;
            }
            Err(e) => {
                let f = match e {
                    UmpError::Damaged { damage, .. } => WriteFailure::Damaged(damage),
                    UmpError::Closed(_) => WriteFailure::Closed,
                    other => WriteFailure::Other(mc_api::ErrorChain(&other).to_string()),
                };
                q.status.complete(Err(f.clone()));
                tx.fail_all(f);
                progressed = true;
                break;
            }
        }
    }
    progressed
}

fn run(task: Weak<TaskInner>) {
    let Some(mut b) = task.upgrade().map(|t| t.node.config.backoff()) else {
        return;
    };
    loop {
        let Some(t) = task.upgrade() else {
            return;
        };
        if t.stop.load(Ordering::Acquire) {
            return;
        }
        let chans: Vec<Arc<Chan>> = t
            .channels
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect();
        // A write queued on a channel still being opened starts once the
        // peer completes it: look at the directory for that.
        if chans
            .iter()
            .any(|c| !c.is_open() && !c.tx().queue.is_empty())
        {
            if let Err(e) = (Ump { inner: t.clone() }).refresh() {
                log::warn!("UMP background writer: {}", mc_api::ErrorChain(&e));
            }
        }
        let mut busy = false;
        let mut progressed = false;
        for c in &chans {
            progressed |= drive(c);
            busy |= c.tx.try_lock().map_or(true, |t| !t.queue.is_empty());
        }
        if progressed {
            b.restart();
        }
        if busy {
            drop(t);
            b.snooze();
            continue;
        }
        // Nothing queued: sleep on the doorbell (a queued write rings it).
        let mut work = t.work.lock().unwrap_or_else(|p| p.into_inner());
        if !*work {
            let (w, _) = t
                .work_cv
                .wait_timeout(work, Duration::from_millis(100))
                .unwrap_or_else(|p| p.into_inner());
            work = w;
        }
        *work = false;
        b.restart();
    }
}
