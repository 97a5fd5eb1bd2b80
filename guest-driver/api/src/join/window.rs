//! The coherent state (control pages, then the arena) as one byte range: what
//! a server retransmits to a joiner and what `coherent_snapshot` reads.

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
