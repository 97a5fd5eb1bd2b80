//! A page's home (seed 000 s.2.3.2, seed 002 s.3): finding it (its own
//! record, an imposed home, the directory, or by first touch through the
//! page's directory manager), mapping the master copy as the home's
//! working copy, and the home's own stores into its master copy.

use super::Node;
use crate::homes::HomeAssignment;
use crate::state::ProtocolState;
use crate::CsmError;

impl Node {
    pub(super) fn home_of(&self, st: &mut ProtocolState, p: u32) -> Result<u32, CsmError> {
        if let Some(h) = st.pages[p as usize].home {
            return Ok(h);
        }
        // An imposed home needs no directory entry: every node imposes the
        // same one.
        let h = match self.imposed_home(p).or_else(|| self.meta.home(p)) {
            Some(h) => h,
            None => match self.meta.messages().map(|m| m.manager(p)) {
                // Message-based metadata: the page's directory manager
                // assigns the home (msg_meta).
                Some(m) if m != self.me => self.ask_home(st, m, p)?,
                _ => {
                    // The master copy is received before the claim can be
                    // seen (CSM-DMS: its receive mapping).
                    self.data.prepare_home(p)?;
                    self.meta.claim_home(p, &|| self.check_failed())?
                }
            },
        };
        st.pages[p as usize].home = Some(h);
        if h == self.me {
            self.map_master(st, p);
        }
        Ok(h)
    }

    /// The home of a page another node touched first, for the Table II
    /// operations: the directory's, or, with message-based metadata, the
    /// page's directory manager's answer (which makes this node the home of
    /// a page nobody touched).
    pub(crate) fn bench_home(&self, st: &mut ProtocolState, p: u32) -> Result<u32, CsmError> {
        if let Some(h) = st.pages[p as usize].home.or_else(|| self.meta.home(p)) {
            return Ok(h);
        }
        match self.meta.messages().map(|m| m.manager(p)) {
            Some(m) if m != self.me => self.ask_home(st, m, p),
            _ => Err(CsmError::NoHome(p)),
        }
    }

    /// Ask page `p`'s directory manager `m` for its home, claiming it for
    /// this node if it has none (message-based metadata, `msg_meta`).
    fn ask_home(&self, st: &mut ProtocolState, m: u32, p: u32) -> Result<u32, CsmError> {
        let mut b = [0u8; 8];
        self.fetch(st, m, crate::messages::Request::Home(p), &mut b)?;
        let h = u32::try_from(u64::from_le_bytes(b)).unwrap_or(u32::MAX);
        if h >= self.nodes {
            return Err(CsmError::BadRequest { from: m, page: p });
        }
        if let Some(mm) = self.meta.messages() {
            mm.learn_home(p, h);
        }
        Ok(h)
    }

    /// At the home, once per page: map the master copy (the receive
    /// mapping) as the page's working copy, so the home's threads write it
    /// directly (seed 000 s.2.3.2). Done before the home's first access to
    /// the page, whose working copy has nothing yet. Where the master copy
    /// cannot be mapped (a private or huge-page receive memory), the home
    /// keeps a separate working copy and diffs its writes into the master
    /// copy by loopback.
    fn map_master(&self, st: &mut ProtocolState, p: u32) {
        let pg = &mut st.pages[p as usize];
        if pg.direct_tried || !(self.choices.home_direct() || self.data.master_in_heap()) {
            return;
        }
        pg.direct_tried = true;
        if self.data.master_in_heap() {
            // CSM-MS: the heap is the master copy at the home already.
            pg.direct = true;
            st.stats.direct_home_pages += 1;
            return;
        }
        debug_assert!(pg.state == crate::state::PageState::Invalid);
        let Some(src) = self.data.master_addr(p) else {
            return;
        };
        match self.copies.alias_master(p, src) {
            Ok(()) => {
                st.pages[p as usize].direct = true;
                st.stats.direct_home_pages += 1;
            }
            Err(e) => {
                if st.stats.direct_home_pages == 0 {
                    log::warn!(
                        "node{}: page {p}: the master copy cannot be the working copy ({e}); \
                         the home diffs its writes into it",
                        self.me
                    );
                }
            }
        }
    }

    /// The home of every page as far as this node knows it: its own,
    /// imposed, or the directory's (`Csm::homes`).
    pub(crate) fn home_assignment(&self) -> HomeAssignment {
        let st = self.lock_state();
        HomeAssignment {
            nodes: self.nodes,
            page_size: self.page_size,
            homes: (0..u32::try_from(st.pages.len()).expect("page numbers fit u32"))
                .map(|p| self.known_home(&st, p))
                .collect(),
        }
    }

    /// The home of `p` as this node knows it (its own record, an imposed
    /// home, the directory).
    pub(super) fn known_home(&self, st: &ProtocolState, p: u32) -> Option<u32> {
        st.pages[p as usize]
            .home
            .or_else(|| self.imposed_home(p))
            .or_else(|| self.meta.home(p))
    }

    /// The home imposed on page `p`, if any.
    pub(super) fn imposed_home(&self, p: u32) -> Option<u32> {
        self.imposed_homes
            .as_ref()
            .and_then(|h| h.homes.get(p as usize).copied().flatten())
    }

    /// Before this node (a home) reads its own master copy of `p` for its
    /// own use: its own last store into it (a diff of its writes, or the
    /// page published as it left Exclusive) must have come back, or it
    /// would read the copy from before its own writes.
    pub(super) fn settle_own_master(&self, st: &mut ProtocolState, p: u32) -> Result<(), CsmError> {
        let want = st.pages[p as usize].own_store_echo;
        if want != 0 && self.data.echo_seen() < want {
            st.stats.echo_waits += 1;
            let mark = self.data.post_echo()?;
            self.await_echo(Some(st), mark)?;
        }
        st.pages[p as usize].own_store_echo = 0;
        Ok(())
    }

    /// This node has just stored into its own master copy of `p`: note the
    /// first echo that will follow it.
    pub(super) fn stored_own_master(&self, st: &mut ProtocolState, p: u32) {
        st.pages[p as usize].own_store_echo = self.data.echo_posted() + 1;
    }
}
