//! The coherent state (control pages, then the arena) as one byte range: what
//! a server retransmits to a joiner and what `coherent_snapshot` reads; and
//! the resync window both ends map while they do it.

use firmware_model::PctEntry;
use log::warn;

use crate::error::McError;
use crate::layout::CONTROL_PAGES;
use crate::node::Node;
use crate::port::ReceiveMemory;

/// Control pages then arena, as one byte range.
pub(crate) struct Window<'a> {
    control: &'a dyn ReceiveMemory,
    arena: &'a dyn ReceiveMemory,
    split: usize,
}

impl<'a> Window<'a> {
    pub(crate) fn of(inner: &'a Node) -> Window<'a> {
        Window {
            control: &*inner.control,
            arena: &*inner.arena,
            split: CONTROL_PAGES as usize * inner.layout.page_size as usize,
        }
    }

    pub(crate) fn read(&self, off: usize, buf: &mut [u8]) {
        let end = off + buf.len();
        if end <= self.split {
            self.control.read(off, buf);
        } else if off >= self.split {
            self.arena.read(off - self.split, buf);
        } else {
            let (a, b) = buf.split_at_mut(self.split - off);
            self.control.read(off, a);
            self.arena.read(0, b);
        }
    }
}

/// Map the resync window (the layout's resync pages) with `entry` over
/// `frames`, run `f`, and unmap the window again whatever `f` returned (an
/// unmapping that fails is logged; `f`'s result is what counts).
pub(crate) fn with_resync_window<T>(
    node: &Node,
    entry: PctEntry,
    frames: &[u64],
    f: impl FnOnce() -> Result<T, McError>,
) -> Result<T, McError> {
    let l = node.layout;
    node.port()
        .set_pct_transient(l.resync_first(), l.resync_pages(), entry, frames)?;
    let r = f();
    if let Err(e) =
        node.port()
            .set_pct_transient(l.resync_first(), l.resync_pages(), PctEntry::DISABLED, &[])
    {
        warn!(
            "node{}: unmapping the resync window: {}",
            node.me,
            crate::ErrorChain(&e)
        );
    }
    r
}
