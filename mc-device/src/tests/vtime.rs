//! Virtual time on the device (issue 29, docs/virtual-time.md): stamped
//! records parsed, their arrivals written into the receiver's arrival table
//! before the data, the table's registration checked and forgotten where it
//! must be. Fake guests, with the model as the oracle.

use firmware_model::abi::{fifo, CtrlRequest, Status, TxRecordHeader};
use firmware_model::{vtime, ClusterConfig, DeliveryMode, GlobalAddr, Nanos, PctEntry};
use vm_memory::{Bytes, GuestAddress};

use crate::tests::fake_guest::*;

/// Where the fake guests put their arrival tables, and its granule.
const TABLE: u64 = 0x380000;
const SHIFT: u32 = 8;
/// A small address space, so the table fits the fake guests' RAM.
const SPACE: u64 = 8 << 20;

fn config(delivery: DeliveryMode) -> ClusterConfig {
    ClusterConfig {
        address_space: SPACE,
        delivery,
        ..ClusterConfig::new(3)
    }
}

fn entry(rig: &Rig, node: usize, addr: u64) -> u64 {
    rig.guests[node]
        .mem()
        .read_obj::<u64>(GuestAddress(TABLE + 8 * (addr >> SHIFT)))
        .unwrap()
}

fn register(rig: &mut Rig, node: usize) {
    let r = rig.ctrl(
        node,
        &CtrlRequest::SetArrivalTable {
            gpa: TABLE,
            granule_shift: SHIFT,
        },
    );
    assert_eq!(r.status, Status::Ok as u32, "{r:?}");
}

/// Page 4 broadcast from node 0 to nodes 1 and 2; tables on 1 and 2.
fn rig(delivery: DeliveryMode) -> Rig {
    let mut rig = Rig::with_config(config(delivery));
    rig.set_pct(0, 4, PctEntry::transmit_broadcast());
    rig.set_pct(1, 4, PctEntry::receive());
    rig.set_pct(2, 4, PctEntry::receive());
    register(&mut rig, 1);
    register(&mut rig, 2);
    rig
}

/// Post stamped stores from node 0, run the hub until everything landed,
/// and feed the model the same stores.
fn send(rig: &mut Rig, stores: &[(u64, Vec<u8>, u64)]) {
    for (addr, data, vt) in stores {
        rig.guests[0].post_stamped(*addr, data, *vt);
    }
    for _ in 0..100_000 {
        rig.pump();
        if rig.st.nothing_pending() && rig.guests[0].fifo_header().consumed == rig.guests[0].tail {
            break;
        }
        std::thread::sleep(std::time::Duration::from_micros(100));
    }
    assert!(rig.st.nothing_pending(), "everything was delivered");
    for (addr, data, _) in stores {
        rig.shadow
            .store(&mut rig.model, Nanos(0), id(0), GlobalAddr(*addr), data)
            .unwrap();
    }
}

fn check_stamps(delivery: DeliveryMode) {
    let mut rig = rig(delivery);
    let base = 4 * PAGE;
    // Two stores of different times (not merged), the second over part of
    // the first's granules: the last packet's arrival wins there.
    let first = (base + 100, vec![7u8; 600], 1_000_000);
    let second = (base + 512, vec![9u8; 40], 2_000_000);
    send(&mut rig, &[first.clone(), second.clone()]);
    rig.check_against_model();
    let arrival = |send: u64, through: u64| vtime::arrival(Nanos(send), through).0;
    for n in [1, 2] {
        // Granule 0 of the page holds bytes 100..256 of the first store:
        // packets up to address base+256 (the store's first 156 bytes,
        // packets cut at 32-byte blocks).
        assert_eq!(entry(&rig, n, base), arrival(first.2, 156), "node{n}");
        // Granule 2 (512..768): the second store wrote 512..552 last.
        assert_eq!(entry(&rig, n, base + 512), arrival(second.2, 40), "node{n}");
        // Granule 1 (256..512): the first store's packets through byte 412.
        assert_eq!(entry(&rig, n, base + 256), arrival(first.2, 412), "node{n}");
        // Nothing outside what the stores touched.
        assert_eq!(entry(&rig, n, base + 768), 0);
        assert_eq!(entry(&rig, n, base - 1), 0);
    }
    // The sender has no table (and does not receive): its RAM has none.
    assert_eq!(entry(&rig, 0, base), 0);
}

#[test]
fn a_stamped_store_writes_its_arrival_into_every_receivers_table() {
    check_stamps(DeliveryMode::Eager);
}

#[test]
fn queued_deliveries_write_their_arrival_too() {
    for seed in [1, 0x5eed, 77] {
        check_stamps(DeliveryMode::skewed(seed));
    }
}

#[test]
fn stores_sent_at_one_virtual_time_wait_for_each_other_in_the_table() {
    // The model's links (docs/virtual-time.md s.3): node 0's second store,
    // stamped at the same time, goes up its link after the first.
    let mut rig = rig(DeliveryMode::Eager);
    let base = 4 * PAGE;
    send(
        &mut rig,
        &[
            (base, vec![1; 256], 1_000),
            (base + 512, vec![2; 64], 1_000),
        ],
    );
    rig.check_against_model();
    let first = vtime::VIRTUAL_LINK.serialisation(256).0;
    for n in [1, 2] {
        assert_eq!(entry(&rig, n, base), vtime::arrival(Nanos(1_000), 256).0);
        assert_eq!(
            entry(&rig, n, base + 512),
            vtime::arrival(Nanos(1_000), 64).0 + first
        );
    }
}

#[test]
fn stamped_and_plain_stores_mix_and_no_table_means_no_stamps() {
    let mut rig = Rig::with_config(config(DeliveryMode::Eager));
    rig.set_pct(0, 4, PctEntry::transmit_broadcast());
    rig.set_pct(1, 4, PctEntry::receive());
    let before = rig.guests[1].ram();
    rig.guests[0].post_record(4 * PAGE, &[1, 2, 3]);
    send(&mut rig, &[(4 * PAGE + 8, vec![4, 5], 500)]);
    let _ = rig.shadow.store(
        &mut rig.model,
        Nanos(0),
        id(0),
        GlobalAddr(4 * PAGE),
        &[1, 2, 3],
    );
    rig.check_against_model();
    let after = rig.guests[1].ram();
    let start = usize::try_from(TABLE).unwrap();
    let table = start..start + 4096;
    assert_eq!(&before[table.clone()], &after[table], "no table, no stamps");
}

#[test]
fn malformed_stamped_records_break_the_fifo_as_before() {
    for (flags, len, slots) in [
        // Padding and a time together.
        (fifo::FLAG_PAD | fifo::FLAG_VTIME, 8, 1),
        // An unknown flag bit.
        (4 | fifo::FLAG_VTIME, 8, 1),
        // Too long.
        (fifo::FLAG_VTIME, 1 << 20, 1),
    ] {
        let mut rig = rig(DeliveryMode::Eager);
        let h = TxRecordHeader {
            addr: 4 * PAGE,
            len,
            flags,
        };
        rig.guests[0].post_raw(&h.to_bytes(), &[0u8; 16], slots);
        while rig.pump() > 0 {}
        let f = rig.guests[0].fifo_header();
        assert_eq!(f.state, fifo::State::Broken as u32, "flags {flags:#x}");
        assert_ne!(f.last_status, Status::Ok as u32);
    }
    // A stamped record whose time would run past the end of the ring.
    let mut rig = rig(DeliveryMode::Eager);
    for _ in 0..(FIFO_SLOTS - 1) {
        rig.guests[0].post_record(4 * PAGE, &[1]);
        while rig.pump() > 0 {}
    }
    // 9 bytes: one slot unstamped, two with the time.
    let h = TxRecordHeader {
        addr: 4 * PAGE,
        len: 9,
        flags: fifo::FLAG_VTIME,
    };
    assert_eq!(TxRecordHeader::slots(9), 1);
    // One slot left, a record of two claimed as one.
    rig.guests[0].post_raw(&h.to_bytes(), &[0u8; 17], 1);
    while rig.pump() > 0 {}
    assert_eq!(
        rig.guests[0].fifo_header().state,
        fifo::State::Broken as u32
    );
}

#[test]
fn a_bad_arrival_table_is_refused() {
    let mut rig = Rig::with_config(config(DeliveryMode::Eager));
    for (gpa, shift, status) in [
        (TABLE + 4, SHIFT, Status::BadAddress),
        (RAM as u64 - 8, SHIFT, Status::BadAddress),
        (u64::MAX - 7, SHIFT, Status::BadAddress),
        (TABLE, 3, Status::Malformed),
        (TABLE, 40, Status::Malformed),
    ] {
        let r = rig.ctrl(
            0,
            &CtrlRequest::SetArrivalTable {
                gpa,
                granule_shift: shift,
            },
        );
        assert_eq!(r.status, status as u32, "{gpa:#x} {shift}");
    }
    assert!(rig.st.node(id(0)).arrival().is_none());
}

#[test]
fn reset_and_gpa_zero_unregister_the_table() {
    let mut rig = rig(DeliveryMode::Eager);
    let r = rig.ctrl(1, &CtrlRequest::Reset);
    assert_eq!(r.status, Status::Ok as u32);
    assert!(rig.st.node(id(1)).arrival().is_none());
    let r = rig.ctrl(
        2,
        &CtrlRequest::SetArrivalTable {
            gpa: 0,
            granule_shift: 0,
        },
    );
    assert_eq!(r.status, Status::Ok as u32);
    assert!(rig.st.node(id(2)).arrival().is_none());
}

#[test]
fn a_memory_table_that_leaves_the_table_out_unregisters_it() {
    let mut rig = rig(DeliveryMode::Eager);
    // The same RAM again keeps it.
    let same = rig.guests[1].atomic.clone();
    rig.st.memory_table_changed(id(1), same);
    assert!(rig.st.node(id(1)).arrival().is_some());
    // RAM that ends before the table drops it.
    let small = crate::tests::rig::GuestRam::new(0x200000, 0, crate::tests::rig::Backing::Sealable)
        .unwrap();
    rig.st.memory_table_changed(id(1), small.atomic());
    assert!(rig.st.node(id(1)).arrival().is_none());
}
