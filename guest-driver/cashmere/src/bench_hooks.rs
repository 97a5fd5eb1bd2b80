//! The hooks `mc-guest bench csm` times (seed 000 Table II): a null
//! message, a page fetch, a twin and a diff, each on its own and outside
//! the protocol's bookkeeping.

use crate::error::CsmError;
use crate::handle::Csm;
use crate::messages::Request;
use crate::twin;

impl Csm {
    /// One null request/reply with `home` (the Table II "null message").
    pub fn null_round_trip(&self, home: u32) -> Result<(), CsmError> {
        let mut st = self.node.lock_state();
        self.node.fetch(&mut st, home, Request::Null, &mut [])
    }

    /// Fetch a copy of `page` from its home by request/reply and return it,
    /// leaving the working copy and the page's state alone (for the
    /// benchmark and for tests of the message layer).
    pub fn bench_fetch(&self, page: u32) -> Result<Vec<u8>, CsmError> {
        let n = &self.node;
        let mut st = n.lock_state();
        let home = n.bench_home(&mut st, page)?;
        let mut buf = vec![0u8; n.ps()];
        n.fetch(&mut st, home, Request::Page(page), &mut buf)?;
        Ok(buf)
    }

    /// Make a twin of `page` from the working copy (the Table II "twin"
    /// operation: a copy of the page into twin memory; here a scratch page,
    /// so the page's real twin, if any, is left alone).
    pub fn bench_twin(&self, page: u32) -> Result<(), CsmError> {
        let n = &self.node;
        let mut st = n.lock_state();
        let mut t = std::mem::take(&mut st.words);
        n.heap().read_words(page as usize * n.ps(), &mut t);
        std::hint::black_box(&t);
        st.words = t;
        Ok(())
    }

    /// Diff `page` against a twin that differs from it in its first `words`
    /// words and send the diff to the page's home (the Table II "diff"
    /// operation: remote writes, or a message and its acknowledgement). The words written equal the working copy's, which this
    /// node must not have modified. Returns the bytes sent.
    pub fn bench_diff(&self, page: u32, words: usize) -> Result<usize, CsmError> {
        let n = &self.node;
        let mut st = n.lock_state();
        let home = n.bench_home(&mut st, page)?;
        let nw = n.ps() / 4;
        let mut cur = vec![0u32; nw];
        n.heap().read_words(page as usize * n.ps(), &mut cur);
        let mut twin = cur.clone();
        for w in twin.iter_mut().take(words) {
            *w = !*w;
        }
        let mut diff = twin::Diff::new(nw);
        diff.compute(&cur, &mut twin);
        n.send_diff(&mut st, home, page, &cur, &diff)
    }
}
