//! Device tests without sockets: fake guests (see fake_guest.rs) and the
//! backend's queue handlers driven directly, every result checked against the
//! model (`ShadowCluster`), the oracle.

use firmware_model::abi::{self, CtrlRequest, Status, StatusPage, TxRecordHeader};
use firmware_model::{AdapterErrorStatus, FaultCommand, GlobalAddr, Nanos, NodeId, PctEntry};
use vm_memory::{Bytes, GuestAddress};

use crate::tests::fake_guest::*;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| i.to_le_bytes()[0].wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[test]
fn remote_write_lands_at_the_bound_frame_and_nowhere_else() {
    let mut rig = Rig::new(2);
    rig.set_pct(0, 10, PctEntry::transmit_broadcast());
    let frames = rig.set_pct(1, 10, PctEntry::receive());
    let before = rig.guests[1].ram();
    let data = pattern(300, 7);
    let c = rig.transmit(0, &[(10 * PAGE + 100, data.clone())]);
    assert_eq!((c.refused, c.consumed, c.state), (0, 10, 1), "{c:?}");
    let after = rig.guests[1].ram();
    let base = usize::try_from(frames[0]).unwrap() + 100;
    assert_eq!(&after[base..base + 300], &data[..]);
    // Only those 300 bytes changed in the receiver's RAM.
    let changed: Vec<usize> = (0..RAM).filter(|&k| before[k] != after[k]).collect();
    assert!(
        changed.iter().all(|&k| (base..base + 300).contains(&k)),
        "{} bytes changed outside",
        changed.len()
    );
    rig.check_against_model();
}

#[test]
fn loopback_broadcast_and_point_to_point_match_the_model() {
    let mut rig = Rig::new(4);
    // Page 1: broadcast from node 0 with loopback, all four receive.
    rig.set_pct(
        0,
        1,
        PctEntry::transmit_broadcast()
            .with_loopback()
            .with_receive(),
    );
    for n in 1..4 {
        rig.set_pct(n, 1, PctEntry::receive());
    }
    // Page 2: node 3 -> node 1 only; 0 and 2 also receive the page.
    rig.set_pct(3, 2, PctEntry::transmit_to(NodeId(1)));
    for n in [0, 1, 2] {
        rig.set_pct(n, 2, PctEntry::receive());
    }
    assert_eq!(rig.transmit(0, &[(PAGE + 8, pattern(1000, 1))]).refused, 0);
    let c = rig.transmit(
        3,
        &[
            (2 * PAGE, pattern(64, 2)),
            (2 * PAGE + 4000, pattern(4000, 3)),
        ],
    );
    assert_eq!((c.refused, c.consumed), (0, 3 + 126));
    rig.check_against_model();
    let snap_total: u64 = (0..4)
        .map(|n| {
            rig.st
                .hub()
                .node_counters(NodeId(n))
                .unwrap()
                .packets_received
        })
        .sum();
    assert_eq!(snap_total, rig.model.hub_counters().deliveries);
    assert!(rig
        .shadow
        .page(NodeId(0), firmware_model::PageNumber(2))
        .is_none());
    assert!(rig
        .shadow
        .page(NodeId(2), firmware_model::PageNumber(2))
        .is_none());
}

#[test]
fn concurrent_senders_total_order_matches_the_model() {
    let mut rig = Rig::new(3);
    for n in 0..3 {
        rig.set_pct(
            n,
            5,
            PctEntry::transmit_broadcast()
                .with_loopback()
                .with_receive(),
        );
    }
    // Each node posts several records before the hub runs; the hub takes
    // each FIFO in turn, and the model is fed in the same order.
    let mut posted = Vec::new();
    for round in 0..4u8 {
        for n in 0..3usize {
            let addr = 5 * PAGE + 8 * u64::from(round); // overlapping writes: order decides
            let data = pattern(40, round * 3 + u8::try_from(n).unwrap());
            rig.guests[n].post_record(addr, &data);
            posted.push((n, addr, data));
        }
    }
    assert_eq!(rig.pump(), 12);
    for n in 0..3 {
        for (m, addr, data) in posted.iter().filter(|p| p.0 == n) {
            rig.shadow
                .store(&mut rig.model, Nanos(0), id(*m), GlobalAddr(*addr), data)
                .unwrap();
        }
    }
    rig.check_against_model();
    for n in 0..3 {
        // Four records of 16 + 40 bytes: two slots each.
        assert_eq!(rig.guests[n].fifo_header().consumed, 4 * 2);
    }
}

#[test]
fn ack_page_and_status_page_report_errors() {
    let mut rig = Rig::new(3);
    rig.set_pct(0, 3, PctEntry::transmit_broadcast());
    for n in 1..3 {
        rig.set_pct(n, 3, PctEntry::receive());
    }
    let ack_frames = rig.set_pct(0, 4, PctEntry::ack_page());
    let sp = rig.guests[0].alloc(abi::STATUS_PAGE_SIZE);
    assert_eq!(
        rig.ctrl(0, &CtrlRequest::SetStatusPage { gpa: sp }).status,
        0
    );
    let read_status = |rig: &Rig| {
        let mut b = [0u8; abi::STATUS_PAGE_SIZE];
        rig.guests[0]
            .mem()
            .read_slice(&mut b, GuestAddress(sp))
            .unwrap();
        StatusPage::from_bytes(&b).unwrap()
    };
    assert_eq!(read_status(&rig).cluster_error_count, 0);
    rig.st
        .apply_fault(FaultCommand::Packets {
            fault: firmware_model::PacketFault::Corrupt,
            scope: firmware_model::FaultScope::Node(NodeId(2)),
            rate: firmware_model::Rate::ALWAYS,
        })
        .unwrap();
    assert_eq!(rig.pump(), 0);
    assert_eq!(rig.transmit(0, &[(3 * PAGE, pattern(64, 9))]).refused, 0);
    assert_eq!(read_status(&rig).cluster_error_count, 2);
    // The ACK answer: node 2 reports its two CRC errors.
    assert_eq!(rig.transmit(0, &[(4 * PAGE + 64, vec![1])]).refused, 0);
    let mut words = [0u8; 12];
    rig.guests[0]
        .mem()
        .read_slice(&mut words, GuestAddress(ack_frames[0] + 64))
        .unwrap();
    let st: Vec<_> = words
        .chunks(4)
        .map(|w| AdapterErrorStatus::from_word(u32::from_le_bytes(w.try_into().unwrap())))
        .collect();
    assert_eq!(
        st.iter().map(|s| s.network_errors).collect::<Vec<_>>(),
        vec![0, 0, 2]
    );
    assert!(st.iter().all(|s| s.online && s.link_up));
}

#[test]
fn events_reach_the_event_queue() {
    let mut rig = Rig::new(2);
    rig.set_pct(0, 0, PctEntry::transmit_broadcast());
    rig.set_pct(1, 0, PctEntry::receive().with_interrupt());
    let bufs: Vec<u64> = (0..4)
        .map(|_| rig.guests[1].alloc(abi::EVENT_SIZE))
        .collect();
    for b in &bufs {
        let g = &mut rig.guests[1];
        g.post(
            abi::EVENT_QUEUE,
            &[(*b, u32::try_from(abi::EVENT_SIZE).unwrap(), true)],
        );
    }
    rig.transmit(0, &[(16, pattern(100, 0))]);
    let g = &mut rig.guests[1];
    let done = g.reap(abi::EVENT_QUEUE);
    assert_eq!(done.len(), 1);
    let mut b = [0u8; abi::EVENT_SIZE];
    g.mem().read_slice(&mut b, GuestAddress(bufs[0])).unwrap();
    let e = abi::EventRecord::from_bytes(&b).unwrap();
    assert_eq!((e.kind, e.a, e.v0), (abi::event_type::PAGE_WRITTEN, 0, 0));
    // A crash elsewhere is a membership event.
    rig.st.apply_fault(FaultCommand::Crash(NodeId(0))).unwrap();
    let done = g.reap(abi::EVENT_QUEUE);
    assert_eq!(done.len(), 1);
    g.mem().read_slice(&mut b, GuestAddress(bufs[1])).unwrap();
    let e = abi::EventRecord::from_bytes(&b).unwrap();
    assert_eq!((e.kind, e.v0, e.v1), (abi::event_type::MEMBERSHIP, 2, 0b10));
}

/// Every kind of bad input is refused with a status, counted as a protection
/// error, and leaves every guest's memory untouched (but the answer itself).
#[test]
fn bad_input_is_refused_and_touches_nothing() {
    let mut rig = Rig::new(3);
    rig.set_pct(0, 2, PctEntry::transmit_broadcast());
    rig.set_pct(1, 2, PctEntry::receive());
    rig.set_pct(2, 2, PctEntry::receive());
    let snapshot = |rig: &Rig| -> Vec<Vec<u8>> { rig.guests.iter().map(|g| g.ram()).collect() };
    let frames_of = |rig: &Rig, n: usize| rig.st.node(id(n)).frames(2).unwrap().to_vec();

    // 1. Store to a page not enabled for transmit: refused, counted in the
    //    FIFO header; posted writes go on with the next record.
    let c = rig.transmit(0, &[(7 * PAGE, pattern(16, 1))]);
    assert_eq!(
        (c.refused, c.last_status, c.last_detail),
        (1, Status::TransmitDisabled as u32, 7)
    );
    // 2. An empty record is refused; the record after it is sent.
    let c = rig.transmit(0, &[(2 * PAGE + 64, vec![]), (2 * PAGE, pattern(8, 1))]);
    assert_eq!((c.refused, c.last_status), (2, Status::Empty as u32));
    // 3. Outside the global address space.
    let c = rig.transmit(0, &[(1 << 40, pattern(8, 1))]);
    assert_eq!((c.refused, c.last_status), (3, Status::OutOfRange as u32));
    let reregister = |rig: &mut Rig| {
        let r = rig.ctrl(
            0,
            &CtrlRequest::SetTxFifo {
                gpa: FIFO_GPA,
                slots: FIFO_SLOTS,
            },
        );
        assert_eq!(r.status, 0);
        rig.guests[0].tail = 0;
    };
    // 4-6. Records that do not parse break the FIFO: nothing more is taken
    //      until the driver registers it again.
    let malformed: [(TxRecordHeader, u64, Status); 3] = [
        (
            TxRecordHeader {
                addr: 2 * PAGE,
                len: abi::MAX_RECORD_DATA + 1,
                flags: 0,
            },
            1,
            Status::TooLarge,
        ),
        (
            TxRecordHeader {
                addr: 2 * PAGE,
                len: 8,
                flags: 4,
            },
            1,
            Status::Malformed,
        ),
        (
            // Longer than the ring: it would wrap.
            TxRecordHeader {
                addr: 2 * PAGE,
                len: FIFO_SLOTS * 32,
                flags: 0,
            },
            u64::from(FIFO_SLOTS) + 1,
            Status::Malformed,
        ),
    ];
    for (h, slots, want) in malformed {
        let at = rig.guests[0].post_raw(&h.to_bytes(), &[], slots);
        rig.guests[0].post_record(2 * PAGE, &pattern(8, 2));
        rig.pump();
        let c = rig.guests[0].fifo_header();
        assert_eq!(
            (c.state, c.last_status, c.last_position),
            (abi::fifo::State::Broken as u32, want as u32, at),
            "{h:?}"
        );
        assert_eq!(
            c.consumed, at,
            "nothing at or after the bad record is taken"
        );
        assert_eq!(rig.pump(), 0);
        reregister(&mut rig);
    }
    // 7. SET_TX_FIFO itself: misaligned, a size that is no power of two or
    //    out of bounds, not in guest RAM.
    for (gpa, slots, want) in [
        (FIFO_GPA + 64, FIFO_SLOTS, Status::BadAddress),
        (FIFO_GPA, 1000, Status::Malformed),
        (FIFO_GPA, 64, Status::Malformed),
        (FIFO_GPA, 1 << 20, Status::Malformed),
        (RAM as u64 - 4096, FIFO_SLOTS, Status::BadAddress),
    ] {
        let r = rig.ctrl(0, &CtrlRequest::SetTxFifo { gpa, slots });
        assert_eq!(r.status, want as u32, "{gpa:#x} {slots}");
    }
    // A refused registration leaves the FIFO as it was.
    assert_eq!(rig.transmit(0, &[(2 * PAGE, pattern(8, 4))]).state, 1);

    // Every store that was taken landed as the model says.
    rig.check_against_model();
    // From here on the receivers' frames never change.
    let recv_before: Vec<Vec<u8>> = (1..3)
        .map(|n| {
            let f = frames_of(&rig, n);
            let mut b = vec![0u8; 8192];
            rig.guests[n]
                .mem()
                .read_slice(&mut b, GuestAddress(f[0].0))
                .unwrap();
            b
        })
        .collect();

    let before = snapshot(&rig);
    // 9. Control: frames outside RAM, misaligned frames, unknown command,
    //    invalid PCT, page out of range, status page outside RAM.
    let bad = [
        (
            CtrlRequest::SetPct {
                first_page: 9,
                count: 1,
                entry: PctEntry::receive().to_bits(),
                frames: vec![RAM as u64, RAM as u64 + 4096],
            },
            Status::BadAddress,
        ),
        (
            CtrlRequest::SetPct {
                first_page: 9,
                count: 1,
                entry: PctEntry::receive().to_bits(),
                frames: vec![FRAME_BASE + 8, FRAME_BASE + 4104],
            },
            Status::BadAddress,
        ),
        (
            CtrlRequest::SetPct {
                first_page: 9,
                count: 1,
                entry: PctEntry::receive().to_bits(),
                frames: vec![FRAME_BASE],
            },
            Status::Malformed,
        ),
        (
            CtrlRequest::SetPct {
                first_page: 9,
                count: 1,
                entry: PctEntry::transmit_to(NodeId(0)).to_bits(),
                frames: vec![],
            },
            Status::InvalidPct,
        ),
        (
            CtrlRequest::SetPct {
                first_page: 65535,
                count: 2,
                entry: 1,
                frames: vec![],
            },
            Status::OutOfRange,
        ),
        (
            CtrlRequest::SetStatusPage {
                gpa: RAM as u64 - 64,
            },
            Status::BadAddress,
        ),
        (CtrlRequest::GetPct { page: 1 << 20 }, Status::OutOfRange),
    ];
    for (req, want) in bad {
        let r = rig.ctrl(0, &req);
        assert_eq!(r.status, want as u32, "{req:?} -> {r:?}");
    }
    let r = rig.ctrl_raw(0, &[0x77, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(r.status, Status::UnknownCommand as u32);
    // Only node 0's own request/response buffers and ring changed.
    let after = snapshot(&rig);
    for n in 1..3 {
        assert!(before[n] == after[n], "node{n}'s memory changed");
    }
    let changed: Vec<usize> = (0..RAM).filter(|&k| before[0][k] != after[0][k]).collect();
    assert!(
        changed.iter().all(|&k| (k as u64) < FRAME_BASE),
        "a frame of node 0 changed"
    );
    // 10. A config write to a read-only register.
    rig.st.refuse_config_write(id(0), 0x08, 4);
    assert_eq!(rig.st.registers(id(0)).node_id, 0);

    // Receivers' frames are untouched by all of it.
    for (k, n) in (1..3).enumerate() {
        let f = frames_of(&rig, n);
        let mut b = vec![0u8; 8192];
        rig.guests[n]
            .mem()
            .read_slice(&mut b, GuestAddress(f[0].0))
            .unwrap();
        assert_eq!(b, recv_before[k]);
    }
    // Each refusal counted on node 0 only.
    let prot = rig
        .st
        .hub()
        .error_status(NodeId(0))
        .unwrap()
        .protection_errors;
    // 3 refused stores, 3 broken FIFOs, 5 bad FIFO registrations, 8 bad
    // control requests, 1 register write.
    assert_eq!(prot, 20, "protection errors {prot}");
    for n in 1..3 {
        assert_eq!(
            rig.st
                .hub()
                .error_status(NodeId(n))
                .unwrap()
                .protection_errors,
            0
        );
    }
    // And traffic still flows.
    let c = rig.transmit(0, &[(2 * PAGE, pattern(32, 5))]);
    assert_eq!(
        (c.refused, c.state),
        (0, 1),
        "counted since it was registered again"
    );
    rig.check_against_model();
}

#[test]
fn register_file_reports_the_cluster() {
    let rig = Rig::new(4);
    let r = rig.st.registers(id(2));
    assert_eq!(
        (r.node_id, r.nodes, r.page_size, r.max_payload),
        (2, 4, 8192, 32)
    );
    assert_eq!(r.members, 0b1111);
    assert!(r.error().online && r.error().link_up);
    let b = r.to_bytes();
    assert_eq!(abi::Registers::from_bytes(&b), Some(r));
}

/// The transmit virtqueue is only a doorbell: whatever a guest posts on it
/// (loops, garbage) is never read, and its rings are never written.
#[test]
fn the_transmit_virtqueue_is_never_touched() {
    let mut rig = Rig::new(2);
    rig.set_pct(0, 2, PctEntry::transmit_broadcast());
    let frames = rig.set_pct(1, 2, PctEntry::receive());
    let g = &mut rig.guests[0];
    let buf = g.alloc(64);
    // Descriptors 40 -> 41 -> 40 -> ...: a loop through readable buffers.
    g.post_raw_chain(
        abi::TX_QUEUE,
        &[(40, buf, 16, 1, 41), (41, buf, 16, 1, 40)],
        40,
    );
    let before = rig.guests[0].ram();
    rig.pump();
    assert!(!rig.st.arm_doorbells(), "nothing is committed");
    rig.st.disarm_doorbells();
    let after = rig.guests[0].ram();
    let changed: Vec<usize> = (0..RAM).filter(|&k| before[k] != after[k]).collect();
    let fifo = usize::try_from(FIFO_GPA).unwrap()
        ..usize::try_from(FIFO_GPA).unwrap() + abi::fifo::HEADER_SIZE;
    assert!(
        changed.iter().all(|k| fifo.contains(k)),
        "only the FIFO header may change: {changed:?}"
    );
    assert!(rig.guests[0].reap(abi::TX_QUEUE).is_empty());
    // And stores still flow.
    assert_eq!(rig.transmit(0, &[(2 * PAGE, pattern(16, 3))]).refused, 0);
    let mut got = [0u8; 16];
    rig.guests[1]
        .mem()
        .read_slice(&mut got, GuestAddress(frames[0]))
        .unwrap();
    assert_eq!(&got[..], &pattern(16, 3)[..]);
}
