//! Node 0's server: the thread that answers every node's page requests
//! (node 0's own too, by loopback, so they follow its own diffs) with the
//! page from the master copy.

use std::sync::Arc;
use std::time::Duration;

use crate::node::NaiveNode;
use crate::space::Layout;
use crate::NaiveError;

/// Answer requests until the node stops. `served` holds each node's last
/// request word answered (what was there at start is not ours).
pub(crate) fn serve(node: Arc<NaiveNode>, mut served: Vec<u64>) -> Result<(), NaiveError> {
    let (Some(requests), Some(master), Some(replies)) = (
        node.regions.request_rx.as_ref(),
        node.regions.master_rx.as_ref(),
        node.regions.reply_tx.as_ref(),
    ) else {
        return Ok(());
    };
    let ps = node.at.page_size;
    let pages = node.heap.len() / ps;
    let mut page = vec![0u8; ps];
    let mut idle = 0u32;
    let mut refused = 0u64;
    while !node.stop.load(std::sync::atomic::Ordering::Acquire) {
        let mut found = false;
        for r in 0..node.nodes {
            let i = usize::try_from(r).expect("a node number fits usize");
            let word = requests.load_u64(Layout::request(r))?;
            if word == served[i] {
                continue;
            }
            served[i] = word;
            found = true;
            let p = usize::try_from(word & 0xffff_ffff).expect("a page number fits usize");
            if p >= pages {
                refused += 1;
                if refused.is_power_of_two() {
                    log::warn!("naive: node {r} asked for page {p} of {pages} ({refused} such)");
                }
                continue;
            }
            master.read(p * ps, &mut page)?;
            // The page, then the header that says it is there.
            replies.write(node.at.reply(r), &page)?;
            replies.write_u64(node.at.reply_header(r), word)?;
            node.served
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        if found {
            idle = 0;
        } else {
            idle = idle.saturating_add(1);
            if idle < 256 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(20));
            }
        }
    }
    Ok(())
}

/// The request words as they are before anyone asks (start-up).
pub(crate) fn served_at_start(node: &NaiveNode) -> Result<Vec<u64>, NaiveError> {
    match node.regions.request_rx.as_ref() {
        None => Ok(Vec::new()),
        Some(rx) => (0..node.nodes)
            .map(|r| Ok(rx.load_u64(Layout::request(r))?))
            .collect(),
    }
}
