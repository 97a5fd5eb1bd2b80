use super::*;
use crate::shadow::ShadowCluster;
use crate::sink::{ErrorKind, Event};
use crate::sink::{RecordingSink, SinkRecord};
use crate::timing::LinkTiming;

const PS: u64 = 8192;

fn addr(page: u32, offset: u64) -> GlobalAddr {
    GlobalAddr(u64::from(page) * PS + offset)
}

fn hub(nodes: u8) -> Hub {
    Hub::new(ClusterConfig::new(nodes)).unwrap()
}

/// Node 0 transmits page `p` by broadcast; every other node receives it.
fn broadcast_page(h: &mut Hub, p: u32) {
    h.set_pct(NodeId(0), PageNumber(p), PctEntry::transmit_broadcast())
        .unwrap();
    for n in 1..h.nodes() {
        h.set_pct(NodeId(n), PageNumber(p), PctEntry::receive())
            .unwrap();
    }
}

#[test]
fn remote_write_lands_in_every_receiver_but_not_the_sender() {
    let mut h = hub(4);
    broadcast_page(&mut h, 3);
    let mut shadow = ShadowCluster::new(8192);
    let data: Vec<u8> = (0..100).collect();
    let s = shadow
        .store(&mut h, Nanos(0), NodeId(0), addr(3, 10), &data)
        .unwrap();
    assert_eq!(s.packets, 4); // 10..32, 32..64, 64..96, 96..110: cut at 32-byte blocks
    assert_eq!(s.deliveries, 12);
    for n in 1..4 {
        assert_eq!(shadow.read(NodeId(n), addr(3, 10), 100), data);
    }
    assert!(shadow.page(NodeId(0), PageNumber(3)).is_none());
}

#[test]
fn loopback_needs_both_loopback_and_receive() {
    let mut h = hub(2);
    let p = PageNumber(1);
    h.set_pct(NodeId(0), p, PctEntry::transmit_broadcast().with_loopback())
        .unwrap();
    let mut sink = RecordingSink::new();
    h.transmit(Nanos(0), NodeId(0), addr(1, 0), 8, &mut sink)
        .unwrap();
    assert_eq!(sink.deliveries().count(), 0);
    h.set_pct(
        NodeId(0),
        p,
        PctEntry::transmit_broadcast()
            .with_loopback()
            .with_receive(),
    )
    .unwrap();
    h.transmit(Nanos(0), NodeId(0), addr(1, 0), 8, &mut sink)
        .unwrap();
    let got: Vec<_> = sink.deliveries().map(|d| d.receiver).collect();
    assert_eq!(got, vec![NodeId(0)]);
}

#[test]
fn point_to_point_reaches_only_its_destination() {
    let mut h = hub(4);
    let p = PageNumber(2);
    h.set_pct(NodeId(1), p, PctEntry::transmit_to(NodeId(3)))
        .unwrap();
    for n in [0, 2, 3] {
        h.set_pct(NodeId(n), p, PctEntry::receive()).unwrap();
    }
    let mut sink = RecordingSink::new();
    h.transmit(Nanos(0), NodeId(1), addr(2, 0), 64, &mut sink)
        .unwrap();
    assert!(sink.deliveries().all(|d| d.receiver == NodeId(3)));
    assert_eq!(sink.deliveries().count(), 2);
}

#[test]
fn refused_store_changes_nothing_but_the_protection_count() {
    let mut h = hub(2);
    broadcast_page(&mut h, 0);
    let mut sink = RecordingSink::new();
    // Spans page 0 (enabled) and page 1 (not): refused whole.
    let err = h
        .transmit(Nanos(0), NodeId(0), addr(0, 8180), 32, &mut sink)
        .unwrap_err();
    assert_eq!(
        err,
        ModelError::TransmitDisabled {
            node: NodeId(0),
            page: PageNumber(1)
        }
    );
    assert_eq!(sink.deliveries().count(), 0);
    assert_eq!(h.hub_counters().packets, 0);
    assert_eq!(h.error_status(NodeId(0)).unwrap().protection_errors, 1);
    assert_eq!(h.cluster_error_count(), 0);
    assert!(matches!(
        sink.events().next(),
        Some(Event::Error {
            kind: ErrorKind::Protection,
            ..
        })
    ));

    let size = h.config().address_space;
    for (a, len) in [(size - 4, 8), (u64::MAX - 2, 8), (size, 1)] {
        let e = h
            .transmit(Nanos(0), NodeId(0), GlobalAddr(a), len, &mut sink)
            .unwrap_err();
        assert!(matches!(e, ModelError::AddressOutOfRange { .. }), "{e}");
    }
    assert_eq!(
        h.transmit(Nanos(0), NodeId(0), addr(0, 0), 0, &mut sink),
        Err(ModelError::EmptyStore)
    );
    assert!(matches!(
        h.transmit(Nanos(0), NodeId(9), addr(0, 0), 8, &mut sink),
        Err(ModelError::NoSuchNode { .. })
    ));
    assert_eq!(h.error_status(NodeId(0)).unwrap().protection_errors, 5);
}

#[test]
fn ack_page_reports_every_adapter_after_earlier_packets() {
    let mut h = Hub::new(ClusterConfig {
        fault_seed: 1,
        ..ClusterConfig::new(3)
    })
    .unwrap();
    broadcast_page(&mut h, 0);
    h.set_pct(NodeId(0), PageNumber(7), PctEntry::ack_page())
        .unwrap();
    let mut shadow = ShadowCluster::new(8192);
    let corrupt_to_2 = FaultCommand::Packets {
        fault: PacketFault::Corrupt,
        scope: FaultScope::Link {
            from: NodeId(0),
            to: NodeId(2),
        },
        rate: Rate::ALWAYS,
    };
    h.apply_fault(Nanos(0), corrupt_to_2, &mut shadow.sink())
        .unwrap();
    shadow
        .store(&mut h, Nanos(0), NodeId(0), addr(0, 0), &[1; 64])
        .unwrap();
    let s = shadow
        .store(&mut h, Nanos(0), NodeId(0), addr(7, 16), &[0; 4])
        .unwrap();
    assert!(s.ack);
    let report = shadow.acks.last().unwrap();
    assert_eq!(report.words.len(), 3);
    let st: Vec<_> = report
        .words
        .iter()
        .map(|w| AdapterErrorStatus::from_word(*w))
        .collect();
    assert_eq!(
        st.iter().map(|s| s.network_errors).collect::<Vec<_>>(),
        vec![0, 0, 2]
    );
    assert!(st.iter().all(|s| s.online && s.link_up));
    // The words are in the writer's receive memory, little-endian, word i for node i.
    let mem = shadow.read(NodeId(0), addr(7, 16), 12);
    assert_eq!(
        u32::from_le_bytes(mem[8..12].try_into().unwrap()),
        report.words[2]
    );
    assert_eq!(h.cluster_error_count(), 2);
    assert_eq!(report.seq, h.last_seq());
}

#[test]
fn ack_slot_must_fit_in_the_page() {
    let mut h = hub(8);
    h.set_pct(NodeId(0), PageNumber(0), PctEntry::ack_page())
        .unwrap();
    let mut sink = RecordingSink::new();
    let e = h
        .transmit(Nanos(0), NodeId(0), addr(0, 8192 - 16), 4, &mut sink)
        .unwrap_err();
    assert!(matches!(e, ModelError::AckSlotOutOfPage { .. }));
    h.transmit(Nanos(0), NodeId(0), addr(0, 8192 - 32), 4, &mut sink)
        .unwrap();
    h.set_pct(NodeId(0), PageNumber(1), PctEntry::transmit_broadcast())
        .unwrap();
    let e = h
        .transmit(Nanos(0), NodeId(0), addr(0, 8190), 4, &mut sink)
        .unwrap_err();
    assert_eq!(
        e,
        ModelError::AckStoreSpansPages {
            page: PageNumber(0)
        }
    );
}

#[test]
fn interrupt_pages_notify_once_per_store() {
    let mut h = hub(2);
    h.set_pct(NodeId(0), PageNumber(0), PctEntry::transmit_broadcast())
        .unwrap();
    h.set_pct(
        NodeId(1),
        PageNumber(0),
        PctEntry::receive().with_interrupt(),
    )
    .unwrap();
    let mut sink = RecordingSink::new();
    h.transmit(Nanos(0), NodeId(0), addr(0, 0), 256, &mut sink)
        .unwrap();
    let ev: Vec<_> = sink.events().collect();
    assert_eq!(ev.len(), 1);
    assert!(matches!(
        ev[0],
        Event::PageWritten {
            node: NodeId(1),
            page: PageNumber(0),
            source: NodeId(0),
            ..
        }
    ));
    // The notification comes after the store's last delivery.
    assert!(matches!(sink.records.last(), Some(SinkRecord::Event(_))));
}

#[test]
fn link_down_loses_traffic_and_is_an_error_until_it_comes_back() {
    let mut h = hub(3);
    broadcast_page(&mut h, 0);
    let mut sink = RecordingSink::new();
    h.apply_fault(Nanos(0), FaultCommand::LinkDown(NodeId(2)), &mut sink)
        .unwrap();
    let s = h
        .transmit(Nanos(0), NodeId(0), addr(0, 0), 32, &mut sink)
        .unwrap();
    assert_eq!((s.deliveries, s.lost), (1, 1));
    // Going down is an error, and so is each packet lost to the down link.
    let st = h.error_status(NodeId(2)).unwrap();
    assert!(!st.link_up && st.network_errors == 2);
    assert_eq!(h.cluster_error_count(), 2);
    h.apply_fault(Nanos(1), FaultCommand::LinkUp(NodeId(2)), &mut sink)
        .unwrap();
    let s = h
        .transmit(Nanos(2), NodeId(0), addr(0, 0), 32, &mut sink)
        .unwrap();
    assert_eq!((s.deliveries, s.lost), (2, 0));
    // A sender whose link is down loses everything it sends.
    h.apply_fault(Nanos(3), FaultCommand::LinkDown(NodeId(0)), &mut sink)
        .unwrap();
    let before = h.last_seq();
    let s = h
        .transmit(Nanos(4), NodeId(0), addr(0, 0), 64, &mut sink)
        .unwrap();
    assert_eq!((s.packets, s.deliveries, s.lost), (2, 0, 2));
    assert_eq!(h.last_seq(), before);
    assert_eq!(h.node_counters(NodeId(0)).unwrap().drops, 2);
    assert_eq!(h.error_status(NodeId(0)).unwrap().network_errors, 3);
}

/// Seed 004's "save the count, write, check": a store lost while a link was
/// down moves the count even when the count was saved after the link went
/// down and the link is up again by the check.
#[test]
fn a_store_lost_to_a_down_link_moves_the_error_count() {
    for down in [0u8, 2] {
        let mut h = hub(3);
        broadcast_page(&mut h, 0);
        let mut sink = RecordingSink::new();
        h.apply_fault(Nanos(0), FaultCommand::LinkDown(NodeId(down)), &mut sink)
            .unwrap();
        let saved = h.cluster_error_count();
        let s = h
            .transmit(Nanos(1), NodeId(0), addr(0, 0), 8, &mut sink)
            .unwrap();
        assert!(s.lost >= 1, "node {down} down: {s:?}");
        h.apply_fault(Nanos(2), FaultCommand::LinkUp(NodeId(down)), &mut sink)
            .unwrap();
        assert!(h.error_status(NodeId(down)).unwrap().link_up);
        assert!(
            h.cluster_error_count() > saved,
            "node {down}'s link: a lost store left the count at {saved}"
        );
    }
}

#[test]
fn crash_and_rejoin_change_membership() {
    let mut h = hub(3);
    broadcast_page(&mut h, 0);
    let mut sink = RecordingSink::new();
    assert_eq!(h.membership().epoch, 1);
    h.apply_fault(Nanos(5), FaultCommand::Crash(NodeId(1)), &mut sink)
        .unwrap();
    let m = h.membership();
    assert_eq!((m.epoch, m.members), (2, NodeSet(0b101)));
    let told: Vec<_> = sink
        .events()
        .filter_map(|e| match e {
            Event::MembershipChanged { node, epoch: 2, .. } => Some(*node),
            _ => None,
        })
        .collect();
    assert_eq!(told, vec![NodeId(0), NodeId(2)]);
    // The crashed node receives nothing and cannot send.
    let s = h
        .transmit(Nanos(6), NodeId(0), addr(0, 0), 8, &mut sink)
        .unwrap();
    assert_eq!(s.deliveries, 1);
    assert_eq!(
        h.transmit(Nanos(6), NodeId(1), addr(0, 0), 8, &mut sink),
        Err(ModelError::NodeOffline(NodeId(1)))
    );
    assert!(h
        .apply_fault(Nanos(7), FaultCommand::Crash(NodeId(1)), &mut sink)
        .is_err());
    // It rejoins with an empty PCT.
    h.apply_fault(Nanos(8), FaultCommand::Rejoin(NodeId(1)), &mut sink)
        .unwrap();
    assert_eq!(h.membership().epoch, 3);
    assert_eq!(h.pct(NodeId(1)).unwrap().enabled().count(), 0);
    assert!(h
        .apply_fault(Nanos(9), FaultCommand::Rejoin(NodeId(1)), &mut sink)
        .is_err());
}

#[test]
fn hub_stall_delays_but_keeps_order() {
    let mut h = Hub::new(ClusterConfig::mc2(2)).unwrap();
    broadcast_page(&mut h, 0);
    let mut sink = RecordingSink::new();
    h.apply_fault(
        Nanos(0),
        FaultCommand::StallHub {
            duration: Nanos::from_millis(1),
        },
        &mut sink,
    )
    .unwrap();
    h.transmit(Nanos(10), NodeId(0), addr(0, 0), 8, &mut sink)
        .unwrap();
    h.transmit(Nanos(20), NodeId(0), addr(0, 8), 8, &mut sink)
        .unwrap();
    let at: Vec<_> = sink.deliveries().map(|d| d.at.0).collect();
    assert!(at[0] >= 1_000_000 + 2_900 && at[1] >= at[0], "{at:?}");
    assert_eq!(h.stalled_until(), Nanos(1_000_000));
}

#[test]
fn mc2_timing_stamps_deliveries() {
    let mut h = Hub::new(ClusterConfig {
        link: LinkTiming::MC2,
        ..ClusterConfig::new(2)
    })
    .unwrap();
    broadcast_page(&mut h, 0);
    let mut sink = RecordingSink::new();
    let s = h
        .transmit(Nanos(1_000), NodeId(0), addr(0, 0), 8, &mut sink)
        .unwrap();
    let one_way = s.done_at.0 - 1_000;
    assert!((2_900..=3_100).contains(&one_way), "{one_way}");
}

#[test]
fn scheduled_faults_apply_when_time_reaches_them() {
    let mut h = hub(2);
    broadcast_page(&mut h, 0);
    h.schedule_fault(Nanos(100), FaultCommand::LinkUp(NodeId(1)))
        .unwrap();
    h.schedule_fault(Nanos(50), FaultCommand::LinkDown(NodeId(1)))
        .unwrap();
    assert!(h
        .schedule_fault(Nanos(1), FaultCommand::Crash(NodeId(7)))
        .is_err());
    let mut sink = RecordingSink::new();
    assert_eq!(
        h.transmit(Nanos(10), NodeId(0), addr(0, 0), 8, &mut sink)
            .unwrap()
            .deliveries,
        1
    );
    assert_eq!(
        h.transmit(Nanos(60), NodeId(0), addr(0, 0), 8, &mut sink)
            .unwrap()
            .lost,
        1
    );
    assert_eq!(h.scheduled_faults().len(), 1);
    assert_eq!(
        h.transmit(Nanos(100), NodeId(0), addr(0, 0), 8, &mut sink)
            .unwrap()
            .deliveries,
        1
    );
    assert!(h.scheduled_faults().is_empty());
}

#[test]
fn sixty_four_nodes_broadcast() {
    let mut h = Hub::new(ClusterConfig {
        hub_ports: 64,
        ..ClusterConfig::new(64)
    })
    .unwrap();
    broadcast_page(&mut h, 0);
    let mut sink = RecordingSink::new();
    assert_eq!(
        h.transmit(Nanos(0), NodeId(0), addr(0, 0), 8, &mut sink)
            .unwrap()
            .deliveries,
        63
    );
}

#[test]
fn offline_node_cannot_be_programmed_and_reset_clears_state() {
    let mut h = hub(2);
    broadcast_page(&mut h, 0);
    let mut sink = RecordingSink::new();
    let _ = h.transmit(Nanos(0), NodeId(0), addr(1, 0), 8, &mut sink);
    assert_eq!(h.error_status(NodeId(0)).unwrap().protection_errors, 1);
    h.reset_adapter(NodeId(0)).unwrap();
    assert_eq!(h.error_status(NodeId(0)).unwrap().protection_errors, 0);
    assert_eq!(h.pct(NodeId(0)).unwrap().enabled().count(), 0);
    h.apply_fault(Nanos(0), FaultCommand::Crash(NodeId(1)), &mut sink)
        .unwrap();
    assert_eq!(
        h.set_pct(NodeId(1), PageNumber(0), PctEntry::receive()),
        Err(ModelError::NodeOffline(NodeId(1)))
    );
}

#[test]
fn a_stamped_store_gives_each_packet_its_virtual_arrival_at_every_receiver() {
    let mut h = hub(4);
    broadcast_page(&mut h, 3);
    let mut sink = RecordingSink::new();
    let send = Nanos(1_000_000);
    h.transmit_stamped(Nanos(0), NodeId(0), addr(3, 0), 100, Some(send), &mut sink)
        .unwrap();
    let mut last = Nanos::ZERO;
    for d in sink.deliveries() {
        let through = u64::from(d.packet.store_offset + d.packet.len);
        let vt =
            d.vt.expect("a stamped store's deliveries carry their arrival");
        assert_eq!(vt, crate::vtime::arrival(send, through));
        assert!(vt >= last || d.packet.store_offset == 0);
        last = vt;
    }
    // A broadcast arrives at the same virtual time everywhere.
    for p in 0..4u32 {
        let arrivals: Vec<_> = sink
            .deliveries()
            .filter(|d| d.packet.store_offset == p * 32)
            .map(|d| d.vt)
            .collect();
        assert!(arrivals.windows(2).all(|w| w[0] == w[1]), "{arrivals:?}");
    }
    // Unstamped stores carry none, whatever the link timing.
    let mut plain = RecordingSink::new();
    h.transmit(Nanos(0), NodeId(0), addr(3, 0), 8, &mut plain)
        .unwrap();
    assert!(plain.deliveries().all(|d| d.vt.is_none()));
}
