//! The driver against the real backend: a 3-node `mc_device::Cluster` in this
//! process, three virtual guests attached to its sockets over vhost-user.

use std::time::{Duration, Instant};

use firmware_model::abi::{event_type, link, CtrlRequest, Status};
use firmware_model::{ClusterConfig, NodeId, PctEntry};
use mc_device::{Cluster, ClusterOptions};
use mc_driver::{Adapter, AdapterOptions, VhostUserOptions, VhostUserTransport};

const PAGE: u64 = 8192;
const TIMEOUT: Duration = Duration::from_secs(10);

/// Dropped in field order: the guests disconnect, then the cluster shuts down
/// (it needs its sockets to stop its server threads), then the directory goes.
struct Rig {
    guests: Vec<Adapter<VhostUserTransport>>,
    _cluster: Cluster,
    _dir: tempfile::TempDir,
}

fn rig(nodes: u8) -> Rig {
    let _ = env_logger::builder().is_test(true).try_init();
    let dir = tempfile::tempdir().expect("tempdir");
    let cluster = Cluster::start(ClusterOptions::new(ClusterConfig::new(nodes), dir.path()))
        .expect("cluster");
    let opts = VhostUserOptions {
        ram_size: 16 << 20,
        ..Default::default()
    };
    let guests = (0..nodes)
        .map(|i| {
            let path = cluster.socket_path(NodeId(i)).expect("socket");
            let t = VhostUserTransport::connect(path, &opts).expect("connect");
            Adapter::new(
                t,
                AdapterOptions {
                    timeout: TIMEOUT,
                    ..Default::default()
                },
            )
            .expect("adapter")
        })
        .collect();
    Rig {
        guests,
        _cluster: cluster,
        _dir: dir,
    }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| i.to_le_bytes()[0].wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[test]
fn registers_identify_each_node() {
    let mut r = rig(3);
    for (i, g) in (0u32..).zip(r.guests.iter_mut()) {
        let regs = g.registers().unwrap();
        assert_eq!(regs.node_id, i);
        assert_eq!(regs.nodes, 3);
        assert_eq!(u64::from(regs.page_size), PAGE);
        assert_ne!(regs.link_state & link::ONLINE, 0);
        assert_eq!(g.node_id(), i);
    }
}

#[test]
fn broadcast_reaches_both_receivers() {
    let mut r = rig(3);
    let [g0, g1, g2] = &mut r.guests[..] else {
        unreachable!()
    };
    g0.set_pct(4, 1, PctEntry::transmit_broadcast().to_bits(), &[])
        .unwrap();
    let rx1 = g1.map_receive(4, 1, PctEntry::receive().to_bits()).unwrap();
    let rx2 = g2.map_receive(4, 1, PctEntry::receive().to_bits()).unwrap();
    assert_eq!(rx1.frames().len(), 2, "an 8 KiB page is two 4 KiB frames");
    assert_eq!(
        g1.get_pct(4).unwrap(),
        (PctEntry::receive().to_bits(), true)
    );

    // A store across the page's two frames, and a small one at its start.
    let data = pattern(6000, 7);
    g0.fifo()
        .post_all(&[(4 * PAGE + 100, &data), (4 * PAGE, b"head")])
        .unwrap();
    g0.flush().unwrap();
    for rx in [&rx1, &rx2] {
        rx.wait_for(100, &data, TIMEOUT).unwrap();
        rx.wait_for(0, b"head", TIMEOUT).unwrap();
    }
    // The sender does not receive its own store (no receive, no loopback).
    let (entry, bound) = g0.get_pct(4).unwrap();
    assert_eq!(entry, PctEntry::transmit_broadcast().to_bits());
    assert!(!bound);
}

#[test]
fn bad_control_requests_get_the_right_status() {
    let mut r = rig(3);
    let g = &mut r.guests[1];
    // Interrupt without receive: refused with its rule number.
    let resp = g
        .ctrl(&CtrlRequest::SetPct {
            first_page: 5,
            count: 1,
            entry: PctEntry::transmit_broadcast().with_interrupt().to_bits(),
            frames: vec![],
        })
        .unwrap();
    assert_eq!(Status::from_u32(resp.status), Some(Status::InvalidPct));
    assert_eq!(resp.detail, 5);
    // Reserved bits.
    let e = g.set_pct(5, 1, 1 << 20, &[]).unwrap_err();
    assert_eq!(e.status(), Some(Status::InvalidPct));
    // Receive with the wrong number of frames: malformed.
    let rx = g.alloc_receive(1).unwrap();
    let frames = rx.frames();
    let e = g
        .set_pct(5, 1, PctEntry::receive().to_bits(), &frames[..1])
        .unwrap_err();
    assert_eq!(e.status(), Some(Status::Malformed));
    // A frame outside guest RAM.
    let e = g
        .set_pct(5, 1, PctEntry::receive().to_bits(), &[0x1000, 0x2000])
        .unwrap_err();
    assert_eq!(e.status(), Some(Status::BadAddress));
    // A page outside the address space.
    let e = g
        .set_pct(1 << 30, 1, PctEntry::transmit_broadcast().to_bits(), &[])
        .unwrap_err();
    assert_eq!(e.status(), Some(Status::OutOfRange));
    // Nothing changed; a good request still works.
    assert_eq!(g.get_pct(5).unwrap(), (0, false));
    g.set_pct(5, 1, PctEntry::receive().to_bits(), &frames)
        .unwrap();
    assert_eq!(g.get_pct(5).unwrap(), (PctEntry::receive().to_bits(), true));
    g.reset().unwrap();
    assert_eq!(g.get_pct(5).unwrap(), (0, false));
}

#[test]
fn refused_stores_are_reported_and_the_rest_go_on() {
    let mut r = rig(2);
    let [g0, g1] = &mut r.guests[..] else {
        unreachable!()
    };
    g0.set_pct(2, 1, PctEntry::transmit_broadcast().to_bits(), &[])
        .unwrap();
    let rx = g1.map_receive(2, 1, PctEntry::receive().to_bits()).unwrap();
    g0.fifo()
        .post_all(&[
            (2 * PAGE, b"ok"),
            (3 * PAGE, b"page 3 is not mapped"),
            (2 * PAGE + 8, b"after"),
        ])
        .unwrap();
    let e = g0.flush().unwrap_err();
    assert_eq!(e.status(), Some(Status::TransmitDisabled), "{e}");
    // Posted writes: the store after the refused one went out.
    rx.wait_for(8, b"after", TIMEOUT).unwrap();
    assert_eq!(g0.fifo().refusals().detail, 3, "the page");
    g0.flush().unwrap();
    for (store, want) in [
        ((2 * PAGE, &b""[..]), Status::Empty),
        ((u64::MAX - 4, &b"end"[..]), Status::OutOfRange),
    ] {
        g0.fifo().post_all(&[store]).unwrap();
        assert_eq!(g0.flush().unwrap_err().status(), Some(want));
    }
}

/// Many stores in flight; stores to one word arrive in order, so the last
/// value written is the one that stays.
#[test]
fn streaming_keeps_order() {
    let mut r = rig(2);
    let [g0, g1] = &mut r.guests[..] else {
        unreachable!()
    };
    g0.set_pct(8, 2, PctEntry::transmit_broadcast().to_bits(), &[])
        .unwrap();
    let rx = g1.map_receive(8, 2, PctEntry::receive().to_bits()).unwrap();
    const N: u64 = 2000;
    for i in 1..=N {
        let bulk = pattern(512, (i & 0xff) as u8);
        let v = i.to_le_bytes();
        g0.fifo()
            .post_all(&[(9 * PAGE + 64, &bulk), (8 * PAGE, &v)])
            .unwrap();
    }
    g0.flush().unwrap();
    assert_eq!(g0.fifo().consumed(), g0.fifo().reserved());
    rx.wait_for(0, &N.to_le_bytes(), TIMEOUT).unwrap();
    assert_eq!(rx.load_u64(0).unwrap(), N);
    assert_eq!(
        rx.read_vec(usize::try_from(PAGE).unwrap() + 64, 512)
            .unwrap(),
        pattern(512, (N & 0xff) as u8)
    );
}

#[test]
fn status_page_and_events() {
    let mut r = rig(2);
    let [g0, g1] = &mut r.guests[..] else {
        unreachable!()
    };
    let view = g0.set_status_page().unwrap();
    let st = g0.status().unwrap();
    assert_eq!(st.cluster_error_count, 0);
    assert_eq!(g0.cluster_error_count().unwrap(), 0);
    assert_ne!(st.link_state & link::ONLINE, 0);
    assert_eq!(st.members, 0b11);

    g0.set_pct(6, 1, PctEntry::transmit_broadcast().to_bits(), &[])
        .unwrap();
    let rx = g1
        .map_receive(6, 1, PctEntry::receive().with_interrupt().to_bits())
        .unwrap();
    g0.store(6 * PAGE + 8, b"ring the bell").unwrap();
    rx.wait_for(8, b"ring the bell", TIMEOUT).unwrap();

    // One PAGE_WRITTEN event for the store.
    let start = Instant::now();
    let ev = loop {
        let evs = g1.poll_events().unwrap();
        if let Some(e) = evs.into_iter().find(|e| e.kind == event_type::PAGE_WRITTEN) {
            break e;
        }
        assert!(start.elapsed() < TIMEOUT, "no PAGE_WRITTEN event");
        std::thread::sleep(Duration::from_millis(1));
    };
    assert_eq!((ev.a, ev.v0), (0, 6));

    // The sender's counters reach its status page.
    let start = Instant::now();
    while view.read().unwrap().packets_sent == 0 {
        assert!(start.elapsed() < TIMEOUT, "status page never updated");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(view.updates().unwrap() > 0);

    // A refused store raises an error event and a protection error.
    g0.store(7 * PAGE, b"no").unwrap();
    assert_eq!(
        g0.flush().unwrap_err().status(),
        Some(Status::TransmitDisabled)
    );
    let start = Instant::now();
    loop {
        let evs = g0.poll_events().unwrap();
        if evs.iter().any(|e| e.kind == event_type::ERROR && e.a == 3) {
            break;
        }
        assert!(start.elapsed() < TIMEOUT, "no protection error event");
        std::thread::sleep(Duration::from_millis(1));
    }
    let start = Instant::now();
    while view.read().unwrap().protection_errors == 0 {
        assert!(
            start.elapsed() < TIMEOUT,
            "protection error not on the status page"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    // Protection errors are not network errors.
    assert_eq!(g0.cluster_error_count().unwrap(), 0);
}

#[test]
fn many_control_requests_in_a_row() {
    let mut r = rig(1);
    let g = &mut r.guests[0];
    for i in 0..600u32 {
        let page = i % 64;
        g.set_pct(page, 1, PctEntry::transmit_broadcast().to_bits(), &[])
            .unwrap();
        assert_eq!(
            g.get_pct(page).unwrap().0,
            PctEntry::transmit_broadcast().to_bits()
        );
    }
    let (errors, _word) = g.get_status().unwrap();
    assert_eq!(errors, 0);
}
