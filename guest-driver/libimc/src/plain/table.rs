//! The process's transmit mappings, as the signal handlers look them up:
//! a fixed array of slots read without locks. A slot is published (its
//! view address stored last, with release) once complete, and unpublished
//! before it is torn down; handlers count themselves in (`busy`) and the
//! tear-down waits until they are out.

use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::Mutex;

use mc_api::TxRegion;

/// Transmit mappings one process may hold at once.
pub(crate) const SLOTS: usize = 256;

pub(crate) struct Slot {
    /// Start of the view (PROT_NONE pages the program stores into); 0: free.
    view: AtomicUsize,
    /// Bytes of the region (the view and the backing are page-rounded).
    len: AtomicUsize,
    /// Start of the backing memory: what the program's stores wrote.
    backing: AtomicUsize,
    /// The API's transmit handle.
    tx: AtomicPtr<TxRegion>,
    /// Handlers (and imc_write calls) using the slot now.
    busy: AtomicUsize,
}

impl Slot {
    const fn new() -> Slot {
        Slot {
            view: AtomicUsize::new(0),
            len: AtomicUsize::new(0),
            backing: AtomicUsize::new(0),
            tx: AtomicPtr::new(std::ptr::null_mut()),
            busy: AtomicUsize::new(0),
        }
    }
}

static TABLE: [Slot; SLOTS] = [const { Slot::new() }; SLOTS];
/// Serialises publishing and tearing down (never taken by a handler).
static CHANGES: Mutex<()> = Mutex::new(());

/// A slot in use by the caller: the slot cannot be torn down until it is
/// released (dropped, or `leave`d by index after being kept across a step).
pub(crate) struct Entered {
    pub(crate) index: usize,
    pub(crate) view: usize,
    pub(crate) len: usize,
    pub(crate) backing: usize,
    tx: *const TxRegion,
}

impl Entered {
    pub(crate) fn tx(&self) -> &TxRegion {
        // SAFETY: the pointer was published from a live Box and is freed only
        // after `busy` drops to zero, which this entry holds above zero.
        unsafe { &*self.tx }
    }

    /// The backing address of view address `addr`.
    pub(crate) fn backing_of(&self, addr: usize) -> usize {
        addr - self.view + self.backing
    }

    /// Keep the slot entered past this handler (across a single step): the
    /// trap handler calls [`leave`] with the index.
    pub(crate) fn keep(self) -> usize {
        let i = self.index;
        std::mem::forget(self);
        i
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        leave(self.index);
    }
}

/// Release a slot kept with [`Entered::keep`].
pub(crate) fn leave(index: usize) {
    TABLE[index].busy.fetch_sub(1, Ordering::Release);
}

/// The slot whose view holds `addr`, entered. Lock-free: safe in a handler.
pub(crate) fn enter(addr: usize) -> Option<Entered> {
    for (index, s) in TABLE.iter().enumerate() {
        let view = s.view.load(Ordering::Acquire);
        if view == 0 {
            continue;
        }
        let len = s.len.load(Ordering::Acquire);
        if addr < view || addr >= view + len.next_multiple_of(page()) {
            continue;
        }
        s.busy.fetch_add(1, Ordering::SeqCst);
        // Unpublished meanwhile: the tear-down may not have seen us.
        if s.view.load(Ordering::SeqCst) != view {
            leave(index);
            return None;
        }
        return Some(Entered {
            index,
            view,
            len,
            backing: s.backing.load(Ordering::Acquire),
            tx: s.tx.load(Ordering::Acquire),
        });
    }
    None
}

/// The slot at `index`, entered again by a trap handler that kept it (its
/// count is still held); None if it is not published.
pub(crate) fn kept(index: usize) -> Option<Entered> {
    let s = TABLE.get(index)?;
    let view = s.view.load(Ordering::Acquire);
    if view == 0 {
        return None;
    }
    Some(Entered {
        index,
        view,
        len: s.len.load(Ordering::Acquire),
        backing: s.backing.load(Ordering::Acquire),
        tx: s.tx.load(Ordering::Acquire),
    })
}

/// The system page size.
pub(crate) fn page() -> usize {
    4096
}

/// Publish a mapping; None if every slot is taken.
pub(crate) fn publish(
    view: usize,
    len: usize,
    backing: usize,
    tx: Box<TxRegion>,
) -> Result<usize, Box<TxRegion>> {
    let _g = CHANGES.lock().unwrap_or_else(|p| p.into_inner());
    let Some((i, s)) = TABLE.iter().enumerate().find(|(_, s)| {
        s.view.load(Ordering::Acquire) == 0 && s.tx.load(Ordering::Acquire).is_null()
    }) else {
        return Err(tx);
    };
    s.len.store(len, Ordering::Release);
    s.backing.store(backing, Ordering::Release);
    s.tx.store(Box::into_raw(tx), Ordering::Release);
    s.view.store(view, Ordering::Release);
    Ok(i)
}

/// Unpublish the mapping whose view starts at `view`, wait until no
/// handler uses it, and hand back its parts: (len, backing, the API handle).
pub(crate) fn unpublish(view: usize) -> Option<(usize, usize, Box<TxRegion>)> {
    let _g = CHANGES.lock().unwrap_or_else(|p| p.into_inner());
    let s = TABLE
        .iter()
        .find(|s| view != 0 && s.view.load(Ordering::Acquire) == view)?;
    s.view.store(0, Ordering::SeqCst);
    // A handler in the middle of a store (or a single step) finishes it.
    while s.busy.load(Ordering::SeqCst) != 0 {
        std::thread::yield_now();
    }
    let tx = s.tx.swap(std::ptr::null_mut(), Ordering::AcqRel);
    let len = s.len.load(Ordering::Acquire);
    let backing = s.backing.load(Ordering::Acquire);
    // SAFETY: the pointer came from Box::into_raw in `publish`, and no
    // handler holds it any more (busy is zero and the slot unpublished).
    Some((len, backing, unsafe { Box::from_raw(tx) }))
}
