//! Round trips and malformed input for every record family.

use super::*;
use proptest::prelude::*;

#[test]
fn registers_round_trip() {
    let r = Registers {
        node_id: 3,
        nodes: 4,
        page_size: 8192,
        max_payload: 32,
        address_space: 512 << 20,
        features: features::ALL,
        link_state: link::UP | link::ONLINE,
        error_status: 0x8000_0001,
        membership_epoch: 7,
        members: 0b1111,
        cluster_error_count: 9,
        link_timing: 2,
        max_record_data: MAX_RECORD_DATA,
        delivery_mode: 1,
        broken_queues: 0b101,
    };
    assert_eq!(Registers::from_bytes(&r.to_bytes()), Some(r));
    assert_eq!(&r.to_bytes()[0..4], b"MCHN");
    assert_eq!(Registers::from_bytes(&[0u8; CONFIG_SIZE]), None);
}

#[test]
fn ctrl_requests_round_trip() {
    let reqs = [
        CtrlRequest::SetPct {
            first_page: 5,
            count: 2,
            entry: 0b101,
            frames: vec![0x1000, 0x2000, 0x3000, 0x4000],
        },
        CtrlRequest::SetPct {
            first_page: 5,
            count: 1,
            entry: 1,
            frames: vec![],
        },
        CtrlRequest::GetPct { page: 9 },
        CtrlRequest::SetStatusPage { gpa: 0x7000 },
        CtrlRequest::SetTxFifo {
            gpa: 0x10_0000,
            slots: 4096,
        },
        CtrlRequest::SetArrivalTable {
            gpa: 0x20_0000,
            granule_shift: 8,
        },
        CtrlRequest::GetStatus,
        CtrlRequest::Reset,
    ];
    for r in reqs {
        assert_eq!(CtrlRequest::decode(&r.encode()), Ok(r));
    }
}

#[test]
fn malformed_ctrl_requests_get_a_status() {
    let mut arrival = CtrlRequest::SetArrivalTable {
        gpa: 0x1000,
        granule_shift: 8,
    }
    .encode();
    arrival[20] = 1; // the reserved word
    assert_eq!(CtrlRequest::decode(&arrival), Err(Status::Malformed));
    arrival.pop();
    assert_eq!(CtrlRequest::decode(&arrival), Err(Status::Malformed));
    assert_eq!(CtrlRequest::decode(&[]), Err(Status::Malformed));
    assert_eq!(
        CtrlRequest::decode(&[99, 0, 0, 0, 0, 0, 0, 0]),
        Err(Status::UnknownCommand)
    );
    assert_eq!(
        CtrlRequest::decode(&[4, 0, 0, 0, 1, 0, 0, 0]),
        Err(Status::Malformed)
    );
    let mut long = CtrlRequest::GetStatus.encode();
    long.push(0);
    assert_eq!(CtrlRequest::decode(&long), Err(Status::Malformed));
    // A frame count that does not match the bytes present.
    let mut b = CtrlRequest::SetPct {
        first_page: 0,
        count: 1,
        entry: 4,
        frames: vec![0x1000],
    }
    .encode();
    b.truncate(b.len() - 1);
    assert_eq!(CtrlRequest::decode(&b), Err(Status::Malformed));
    let huge = CtrlRequest::SetPct {
        first_page: 0,
        count: 1 << 20,
        entry: 1,
        frames: vec![],
    };
    assert_eq!(CtrlRequest::decode(&huge.encode()), Err(Status::TooLarge));
}

#[test]
fn every_status_converts_back() {
    for v in 0..=11 {
        assert_eq!(Status::from_u32(v).map(|s| s as u32), Some(v));
    }
    assert_eq!(Status::from_u32(12), None);
}

proptest! {
    #[test]
    fn ctrl_decode_never_panics(b in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = CtrlRequest::decode(&b);
    }

    #[test]
    fn a_record_fills_whole_slots(len in 0u32..100_000) {
        let s = TxRecordHeader::slots(len);
        prop_assert!(s * 32 >= 16 + u64::from(len) && s * 32 < 48 + u64::from(len));
        let pad = TxRecordHeader::pad(s);
        prop_assert_eq!(TxRecordHeader::slots(pad.len), s);
    }

    #[test]
    fn a_stamped_record_has_room_for_its_time(len in 0u32..100_000) {
        let s = TxRecordHeader::slots_with(len, true);
        prop_assert!(s * 32 >= 24 + u64::from(len) && s * 32 < 56 + u64::from(len));
        prop_assert!(s >= TxRecordHeader::slots(len));
        let layout = fifo::Layout::new(128).unwrap();
        prop_assert_eq!(layout.data_offset_with(3, true), layout.vtime_offset(3) + 8);
        prop_assert_eq!(layout.data_offset_with(3, false), layout.data_offset(3));
    }

    #[test]
    fn a_tag_commits_only_its_own_lap(pos in any::<u64>(), lap in 1u64..4, log in 7u32..20) {
        let slots = 1u32 << log;
        prop_assert!(fifo::valid_slots(slots));
        prop_assert_ne!(fifo::tag(pos, slots), 0);
        if let Some(earlier) = pos.checked_sub(lap * u64::from(slots)) {
            prop_assert_ne!(fifo::tag(earlier, slots), fifo::tag(pos, slots));
        }
        prop_assert!(fifo::bytes(slots) >= 64 + 36 * slots as usize);
        prop_assert_eq!(fifo::slots_offset(slots) % 64, 0);
    }
}
