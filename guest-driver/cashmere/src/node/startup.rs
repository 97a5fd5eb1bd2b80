//! Starting a node (seed 000 s.2): the heap's two mappings, twins, the
//! mailboxes, the variant's three seams (data, metadata, synchronisation),
//! the protocol state, the fault handler's registration and the protocol
//! thread. `Csm::start` then waits in the start barrier for every node.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use mc_api::MemoryChannel;

use super::protocol_control::ProtocolControl;
use super::protocol_thread::protocol_thread;
use super::served::{request_key, ServedRequests};
use super::working_copies::WorkingCopies;
use super::Node;
use crate::choices::Choices;
use crate::config::Config;
use crate::error::CsmError;
use crate::mailbox::Mailboxes;
use crate::state::ProtocolState;
use crate::twin::TwinSpace;
use crate::vm::HeapMemory;
use crate::wait::FutexBell;
use crate::{adb, dms_data, dms_meta, dms_sync, messages, ms_data, msg_meta, msg_sync, seams};
use crate::{sigsegv, site, times};

/// Build this node's Cashmere at `site` and start its protocol thread.
pub(crate) fn start_node(
    mc: &MemoryChannel,
    cfg: &Config,
    site: site::Site,
) -> Result<(Arc<Node>, JoinHandle<()>), CsmError> {
    times::init();
    let nodes = site.nodes;
    let space = cfg.space(nodes);
    if let Some(h) = &cfg.homes {
        h.check(nodes, cfg.page_size, space.pages)?;
    }
    let ps = cfg.page_size as usize;
    let heap = Arc::new(HeapMemory::new(
        usize::try_from(space.heap_bytes()).expect("the heap is at most MAX_HEAP_BYTES"),
        cfg.heap_base,
    )?);
    let twins = TwinSpace::new(space.pages as usize, ps / 4)?;
    let bell = Arc::new(FutexBell::default());
    // Before the start barrier: no node writes to a mailbox before its
    // owner receives it.
    let mail = Arc::new(Mailboxes::new(mc, space, &site)?);
    let v = cfg.variant;
    let choices = Choices::new(cfg);
    let data: Box<dyn seams::DataPropagation> = if v.data_by_messages() {
        Box::new(ms_data::MsData::new(
            &site,
            space,
            mail.clone(),
            heap.clone(),
        )?)
    } else {
        Box::new(dms_data::DmsData::new(
            mc,
            space,
            mail.clone(),
            &site,
            cfg.homes.as_deref(),
        )?)
    };
    let meta: Box<dyn seams::Metadata> = if v.metadata_by_messages() {
        Box::new(msg_meta::MsgMeta::new(&site, space, mail.clone())?)
    } else {
        Box::new(dms_meta::DmsMeta::new(
            mc,
            space,
            mail.clone(),
            bell.clone(),
            &site,
        )?)
    };
    // Both kinds of synchronisation are built from the same parts.
    let sync: Box<dyn seams::Synchronization> = {
        let (locks, mail, bell) = (cfg.locks, mail.clone(), bell.clone());
        if v.sync_by_messages() {
            Box::new(msg_sync::MsgSync::new(mc, space, locks, mail, bell, &site)?)
        } else {
            Box::new(dms_sync::DmsSync::new(mc, space, locks, mail, bell, &site)?)
        }
    };
    let signal = mc.event_signal()?;
    let node = Arc::new(Node {
        me: site.me,
        nodes,
        shared_adapter: site.per_adapter > 1,
        page_size: cfg.page_size,
        threads: cfg.threads,
        choices,
        adb: if choices.broadcast() {
            Some(adb::BroadcastBuffers::new(mc, space, &site)?)
        } else {
            None
        },
        imposed_homes: cfg.homes.clone(),
        copies: WorkingCopies::new(heap, twins, space.pages, ps),
        registration: AtomicUsize::new(usize::MAX),
        data,
        meta,
        sync,
        mc: mc.clone(),
        mail,
        bell,
        state: Mutex::new(ProtocolState::new(space.pages, nodes, cfg.page_size)),
        served: ServedRequests::new(nodes),
        local: dsm_core::node_barrier::NodeBarrier::default(),
        alloc: dsm_core::Allocator::default(),
        window: dsm_core::TimedWindow::new(),
        control: ProtocolControl::new(signal),
    });
    let registration =
        sigsegv::register(&*node).ok_or(CsmError::TooManyHeaps(sigsegv::MAX_HEAPS))?;
    node.registration.store(registration, Ordering::Release);
    {
        // Requests answered before this start are not ours to answer.
        let mut st = node.lock_state();
        for r in 0..nodes {
            node.served
                .answered(r, request_key(node.data.poll_request(r)));
        }
        // Past every sequence number an earlier run's replies carry, so
        // none of them passes for an answer to this run's requests.
        st.fetch_seq = (0..nodes)
            .map(|n| node.data.reply_seq(messages::ReplySlot::Ack(n)))
            .fold(node.data.reply_seq(messages::ReplySlot::Reply), |a, b| {
                if b.wrapping_sub(a) < u32::MAX / 2 {
                    b
                } else {
                    a
                }
            });
    }
    let n2 = node.clone();
    let server = std::thread::Builder::new()
        .name(format!("csm-proto{}", node.me))
        .spawn(move || protocol_thread(&n2))?;
    Ok((node, server))
}
