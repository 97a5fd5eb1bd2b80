//! Device tests without sockets: fake guests (see `fake_guest.rs`) and the
//! backend's queue handlers driven directly, every result checked against the
//! model (`ShadowCluster`), the oracle.

use firmware_model::abi::{self, CtrlRequest, Status, StatusPage, TxRecordHeader};
use firmware_model::{AdapterErrorStatus, FaultCommand, GlobalAddr, Nanos, NodeId, PctEntry};
use vm_memory::{Bytes, GuestAddress};

use crate::fake_guest::*;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
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
    assert_eq!((c.status, c.records_done), (Status::Ok as u32, 1));
    let after = rig.guests[1].ram();
    let base = frames[0] as usize + 100;
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
    assert_eq!(rig.transmit(0, &[(PAGE + 8, pattern(1000, 1))]).status, 0);
    assert_eq!(
        rig.transmit(
            3,
            &[
                (2 * PAGE, pattern(64, 2)),
                (2 * PAGE + 4000, pattern(4000, 3))
            ]
        )
        .records_done,
        2
    );
    rig.check_against_model();
    let snap_total: u64 = (0..4)
        .map(|n| {
            rig.st
                .hub
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
    // Each node posts several chains before the hub runs; the hub takes them
    // round-robin, and the model is fed in the same order.
    let mut posted = Vec::new();
    for round in 0..4u8 {
        for n in 0..3usize {
            let addr = 5 * PAGE + 8 * u64::from(round); // overlapping writes: order decides
            let data = pattern(40, round * 3 + n as u8);
            let comp = rig.post_tx(n, &[(addr, data.clone())]);
            posted.push((n, addr, data, comp));
        }
    }
    for n in 0..3 {
        assert_eq!(rig.st.process_tx(n), 4);
        for (m, addr, data, _) in posted.iter().filter(|p| p.0 == n) {
            rig.shadow
                .store(
                    &mut rig.model,
                    Nanos(0),
                    NodeId(*m as u8),
                    GlobalAddr(*addr),
                    data,
                )
                .unwrap();
        }
    }
    rig.check_against_model();
    for (n, _, _, comp) in posted {
        assert_eq!(rig.completion(n, comp).status, 0);
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
    assert_eq!(rig.st.process_tx(0), 0);
    let comp = rig.post_tx(0, &[(3 * PAGE, pattern(64, 9))]);
    rig.st.process_tx(0);
    rig.st.refresh_status_pages();
    assert_eq!(rig.completion(0, comp).status, 0);
    assert_eq!(read_status(&rig).cluster_error_count, 2);
    // The ACK answer: node 2 reports its two CRC errors.
    let c = rig.post_tx(0, &[(4 * PAGE + 64, vec![1])]);
    rig.st.process_tx(0);
    assert_eq!(rig.completion(0, c).status, 0);
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
        g.post(abi::EVENT_QUEUE, &[(*b, abi::EVENT_SIZE as u32, true)]);
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
    let frames_of = |rig: &Rig, n: usize| rig.st.nodes[n].frames.get(2).unwrap().to_vec();

    // Helper: the receivers' frames never change.
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

    // 1. Store to a page not enabled for transmit.
    let c = rig.transmit(0, &[(7 * PAGE, pattern(16, 1))]);
    assert_eq!(
        (c.status, c.records_done),
        (Status::TransmitDisabled as u32, 0)
    );
    // 2. An empty record stops the chain: the record after it is not sent.
    let c = rig.transmit(0, &[(2 * PAGE, vec![]), (2 * PAGE, pattern(8, 1))]);
    assert_eq!((c.status, c.records_done), (Status::Empty as u32, 0));
    // 3. Outside the global address space.
    let c = rig.transmit(0, &[(1 << 40, pattern(8, 1))]);
    assert_eq!(c.status, Status::OutOfRange as u32);
    // 4. Oversize record header (length beyond the limit, data absent).
    let g = &mut rig.guests[0];
    let buf = g.alloc(64);
    let comp = g.alloc(8);
    let hdr = TxRecordHeader {
        addr: 2 * PAGE,
        len: abi::MAX_RECORD_DATA + 1,
        flags: 0,
    }
    .to_bytes();
    g.mem().write_slice(&hdr, GuestAddress(buf)).unwrap();
    g.post(0, &[(buf, 16, false), (comp, 8, true)]);
    rig.st.process_tx(0);
    assert_eq!(rig.completion(0, comp).status, Status::TooLarge as u32);
    // 5. Reserved flags set; truncated data.
    let g = &mut rig.guests[0];
    let hdr = TxRecordHeader {
        addr: 2 * PAGE,
        len: 8,
        flags: 1,
    }
    .to_bytes();
    g.mem().write_slice(&hdr, GuestAddress(buf)).unwrap();
    g.post(0, &[(buf, 24, false), (comp, 8, true)]);
    rig.st.process_tx(0);
    assert_eq!(rig.completion(0, comp).status, Status::Malformed as u32);
    let g = &mut rig.guests[0];
    let hdr = TxRecordHeader {
        addr: 2 * PAGE,
        len: 100,
        flags: 0,
    }
    .to_bytes();
    g.mem().write_slice(&hdr, GuestAddress(buf)).unwrap();
    g.post(0, &[(buf, 40, false), (comp, 8, true)]);
    rig.st.process_tx(0);
    assert_eq!(rig.completion(0, comp).status, Status::Malformed as u32);
    // 6. Descriptor pointing outside guest RAM.
    let g = &mut rig.guests[0];
    g.post(0, &[(RAM as u64 + 0x1000, 64, false), (comp, 8, true)]);
    rig.st.process_tx(0);
    assert_eq!(rig.completion(0, comp).status, Status::BadAddress as u32);
    // 7. Readable after writable.
    let g = &mut rig.guests[0];
    g.post(0, &[(comp, 8, true), (buf, 24, false)]);
    rig.st.process_tx(0);
    assert_eq!(rig.completion(0, comp).status, Status::Malformed as u32);
    // 8. No room for a completion: consumed with length 0.
    let g = &mut rig.guests[0];
    g.post(0, &[(buf, 24, false)]);
    rig.st.process_tx(0);
    let g = &mut rig.guests[0];
    assert_eq!(g.reap(0).last().map(|u| u.1), Some(0));

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
    rig.st.refuse_config_write(0, 0x08, 4);
    assert_eq!(rig.st.registers(0).node_id, 0);

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
        .hub
        .error_status(NodeId(0))
        .unwrap()
        .protection_errors;
    assert_eq!(prot, 18, "protection errors {prot}");
    for n in 1..3 {
        assert_eq!(
            rig.st
                .hub
                .error_status(NodeId(n))
                .unwrap()
                .protection_errors,
            0
        );
    }
    // And traffic still flows.
    assert_eq!(rig.transmit(0, &[(2 * PAGE, pattern(32, 5))]).status, 0);
    rig.check_against_model();
}

#[test]
fn register_file_reports_the_cluster() {
    let rig = Rig::new(4);
    let r = rig.st.registers(2);
    assert_eq!(
        (r.node_id, r.nodes, r.page_size, r.max_payload),
        (2, 4, 8192, 32)
    );
    assert_eq!(r.members, 0b1111);
    assert!(r.error().online && r.error().link_up);
    let b = r.to_bytes();
    assert_eq!(abi::Registers::from_bytes(&b), Some(r));
}

/// Looping and overlong descriptor chains are cut off, answered, and leave
/// everything else alone; the queue keeps working.
#[test]
fn looping_and_overlong_chains_are_contained() {
    let mut rig = Rig::new(2);
    rig.set_pct(0, 2, PctEntry::transmit_broadcast());
    let frames = rig.set_pct(1, 2, PctEntry::receive());
    let before = rig.guests[1].ram();
    let g = &mut rig.guests[0];
    let buf = g.alloc(64);
    let comp = g.alloc(8);
    // Descriptors 40 -> 41 -> 40 -> ...: a loop through readable buffers.
    let mem = g.mem();
    g.rings[abi::TX_QUEUE as usize].post_raw(
        &mem,
        &[(40, buf, 16, 1, 41), (41, buf, 16, 1, 40)],
        40,
    );
    drop(mem);
    rig.st.process_tx(0);
    let done = rig.guests[0].reap(abi::TX_QUEUE);
    assert_eq!(done.len(), 1);
    assert_eq!(
        done[0].1, 0,
        "no completion buffer was reachable: used length 0"
    );
    // A chain whose readable part is over the 1 MiB limit.
    let g = &mut rig.guests[0];
    let big = g.alloc(64);
    g.post(
        abi::TX_QUEUE,
        &[
            (big, 600 << 10, false),
            (FRAME_BASE - (600 << 10), 600 << 10, false),
            (comp, 8, true),
        ],
    );
    rig.st.process_tx(0);
    assert_eq!(rig.completion(0, comp).status, Status::TooLarge as u32);
    assert!(rig.guests[1].ram() == before, "node 1's memory changed");
    // And the queue still works.
    assert_eq!(rig.transmit(0, &[(2 * PAGE, pattern(16, 3))]).status, 0);
    let mut got = [0u8; 16];
    rig.guests[1]
        .mem()
        .read_slice(&mut got, GuestAddress(frames[0]))
        .unwrap();
    assert_eq!(&got[..], &pattern(16, 3)[..]);
}
