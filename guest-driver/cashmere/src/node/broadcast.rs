//! CSM-ADB's protocol side (seed 000 s.2.3.3): at a page's home, killing
//! its broadcast copy before the page changes and placing one when the
//! home sees several consumers (`AdbInterest`); at a consumer, taking a
//! valid copy instead of asking the home. The buffers themselves are
//! `crate::adb`.

use super::Node;
use crate::state::ProtocolState;
use crate::CsmError;

impl Node {
    /// CSM-ADB: page `p` is about to change at its home (a diff applied, a
    /// write by the home): kill any broadcast copy of it first, so a node
    /// that synchronises with the change and looks in the buffers finds
    /// none older (the kill is ordered before the change's acknowledgement
    /// or write notices). A copy may be there if this node placed it, or an
    /// earlier home did (ordered before this node became the home, so in
    /// its receive copy now).
    pub(super) fn adb_invalidate(&self, st: &mut ProtocolState, p: u32) -> Result<(), CsmError> {
        let Some(adb) = &self.adb else {
            return Ok(());
        };
        if st.adb.placed(p) || adb.holds(p)? {
            adb.invalidate(p)?;
            st.adb.set_placed(p, false);
            st.stats.adb_invalidations += 1;
        }
        Ok(())
    }

    /// CSM-ADB at the home, having answered node `r`'s request for `p`
    /// (whose data is `data`): count the request in the home's interval
    /// (its releases), and place the page in the broadcast buffers when
    /// seed 000 s.2.3.3's heuristics see several consumers: requests
    /// answered in the same pass, two or more in this interval, or two or
    /// more in the previous one. Never while a thread here writes the page.
    pub(super) fn adb_consider(
        &self,
        st: &mut ProtocolState,
        p: u32,
        data: &[u8],
    ) -> Result<(), CsmError> {
        let Some(adb) = &self.adb else {
            return Ok(());
        };
        let several = st.adb.requested(p, st.stats.releases, st.serve_pass);
        let writing = matches!(
            st.pages[p as usize].state,
            crate::state::PageState::ReadWrite | crate::state::PageState::Exclusive
        );
        if several && !writing && !st.adb.placed(p) {
            adb.place(p, data)?;
            st.adb.set_placed(p, true);
            st.stats.adb_placements += 1;
        }
        Ok(())
    }

    /// CSM-ADB at a consumer: a valid broadcast copy of `p` into `out`, if
    /// the buffers hold one. First this node's echo: its directory word
    /// (posted just before) is back, so every kill ordered before it is
    /// here (a change this node must see was announced after its kill).
    pub(super) fn adb_copy(
        &self,
        st: &mut ProtocolState,
        p: u32,
        out: &mut [u8],
    ) -> Result<bool, CsmError> {
        let Some(adb) = &self.adb else {
            return Ok(false);
        };
        st.stats.echo_waits += 1;
        let mark = self.data.post_echo()?;
        self.await_echo(Some(st), mark)?;
        let hit = adb.read(p, out)?;
        if hit {
            st.stats.adb_hits += 1;
        }
        Ok(hit)
    }
}
