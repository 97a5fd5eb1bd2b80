//! Every log line a guest can cause goes through its node's allowance
//! (guest_log.rs): each refusal and failure path driven 10,000 times logs a
//! bounded number of lines, and what was left out is summarised.

use std::cell::RefCell;
use std::sync::Once;
use std::time::{Duration, Instant};

use firmware_model::abi::{self, CtrlRequest, Status, TxRecordHeader, FRAME_SIZE};
use firmware_model::PctEntry;

use crate::guest_log::{BURST, INTERVAL};
use crate::tests::fake_guest::*;

const TIMES: usize = 10_000;

thread_local! {
    static LINES: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// Counts the lines each test thread logs (tests run side by side).
struct Capture;

impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }
    fn log(&self, record: &log::Record<'_>) {
        LINES.with(|l| l.borrow_mut().push(record.args().to_string()));
    }
    fn flush(&self) {}
}

static CAPTURE: Capture = Capture;

fn capture() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = log::set_logger(&CAPTURE);
        log::set_max_level(log::LevelFilter::Trace);
    });
    LINES.with(|l| l.borrow_mut().clear());
}

fn lines() -> Vec<String> {
    LINES.with(|l| l.borrow().clone())
}

/// Run `path` [`TIMES`] times on a fresh two-node rig and check the lines
/// it logged: at most a burst per node and interval (plus the summaries),
/// and, once an interval has passed, one line saying how many were left out.
fn bounded(what: &str, setup: impl FnOnce(&mut Rig), mut path: impl FnMut(&mut Rig, usize)) {
    let mut rig = Rig::new(2);
    setup(&mut rig);
    capture();
    let start = Instant::now();
    for k in 0..TIMES {
        path(&mut rig, k);
    }
    let intervals = start.elapsed().as_secs() / INTERVAL.as_secs().max(1) + 2;
    let logged = lines();
    let bound = 2 * (u64::from(BURST) + 1) * intervals;
    assert!(
        logged.len() as u64 <= bound,
        "{what}: {} lines for {TIMES} refusals (at most {bound}); first: {:?}",
        logged.len(),
        &logged[..logged.len().min(30)]
    );
    assert!(!logged.is_empty(), "{what}: the first refusal is logged");
    // A flood that stopped is summarised once its interval is over.
    std::thread::sleep(INTERVAL + Duration::from_millis(50));
    rig.st.advance();
    let all = lines();
    assert!(
        all.iter().any(|l| l.contains("suppressed")),
        "{what}: no summary of the lines left out: {:?}",
        &all[logged.len()..]
    );
}

#[test]
fn refused_stores() {
    bounded(
        "refused stores",
        |_| {},
        |rig, k| {
            // Page 5 is not enabled for transmit.
            rig.guests[0].post_record(5 * PAGE + (k as u64 % 64) * 8, &[1; 8]);
            rig.pump();
        },
    );
}

#[test]
fn malformed_control_requests() {
    bounded(
        "malformed control requests",
        |_| {},
        |rig, _| {
            let r = rig.ctrl_raw(0, &[0xff; 12]);
            assert_ne!(r.status, Status::Ok as u32);
        },
    );
}

#[test]
fn control_requests_without_a_response_buffer() {
    bounded(
        "requests without a response buffer",
        |_| {},
        |rig, _| {
            let g = &mut rig.guests[0];
            let req = BUF_BASE;
            let bytes = CtrlRequest::GetStatus.encode();
            g.mem().write_slice(&bytes, GuestAddress(req)).unwrap();
            g.post(
                abi::CTRL_QUEUE,
                &[(req, u32::try_from(bytes.len()).unwrap(), false)],
            );
            rig.st.process_ctrl(id(0));
            assert_eq!(rig.guests[0].reap(abi::CTRL_QUEUE).len(), 1);
        },
    );
}

#[test]
fn register_writes_and_unusable_event_buffers() {
    bounded(
        "register writes with unusable event buffers",
        |_| {},
        |rig, _| {
            // A read-only "event buffer": returned unused, a protection error.
            rig.guests[0].post(abi::EVENT_QUEUE, &[(BUF_BASE, 64, false)]);
            rig.st.refuse_config_write(id(0), 0x10, 4);
            rig.guests[0].reap(abi::EVENT_QUEUE);
        },
    );
}

#[test]
fn broken_fifos_registered_again() {
    bounded(
        "broken FIFOs",
        |_| {},
        |rig, _| {
            // A record with an unknown flag breaks the FIFO...
            let h = TxRecordHeader {
                addr: 0,
                len: 8,
                flags: 0x80,
            };
            rig.guests[0].post_raw(&h.to_bytes(), &[0; 8], 1);
            rig.pump();
            // ...and the driver registers it again (the device clears it).
            let r = rig.ctrl(
                0,
                &CtrlRequest::SetTxFifo {
                    gpa: FIFO_GPA,
                    slots: FIFO_SLOTS,
                },
            );
            assert_eq!(r.status, Status::Ok as u32);
            rig.guests[0].tail = 0;
        },
    );
}

#[test]
fn memory_tables_that_leave_out_bound_frames() {
    let frames = RefCell::new(Vec::new());
    let small = rig_table(1);
    bounded(
        "memory tables under bound frames",
        |rig| *frames.borrow_mut() = rig.set_pct(1, 4, PctEntry::receive()),
        |rig, _| {
            // A table without the frames: the page is unbound, an error.
            let small = small
                .borrow_mut()
                .get_or_insert_with(|| shrunk(rig))
                .clone();
            rig.st.memory_table_changed(id(1), small);
            assert!(rig.st.node(id(1)).frames(4).is_none());
            // The full table again, and the page bound again.
            let full = rig.guests[1].full_table();
            rig.st.memory_table_changed(id(1), full);

            let r = rig.ctrl(
                1,
                &CtrlRequest::SetPct {
                    first_page: 4,
                    count: 1,
                    entry: PctEntry::receive().to_bits(),
                    frames: frames.borrow().clone(),
                },
            );
            assert_eq!(r.status, Status::Ok as u32);
        },
    );
    assert_eq!(
        frames.borrow().len(),
        usize::try_from(PAGE).unwrap() / FRAME_SIZE as usize
    );
}

#[test]
fn status_pages_left_out_of_the_memory_table() {
    let small = rig_table(1);
    bounded(
        "status pages left out",
        |_| {},
        |rig, _| {
            let gpa = u64::try_from(RAM).unwrap() - 4096;
            let r = rig.ctrl(1, &CtrlRequest::SetStatusPage { gpa });
            assert_eq!(r.status, Status::Ok as u32);
            let small = small
                .borrow_mut()
                .get_or_insert_with(|| shrunk(rig))
                .clone();
            rig.st.memory_table_changed(id(1), small);
            // Something to show: the page is written, and found gone.
            rig.st.refuse_config_write(id(1), 0, 4);
            let full = rig.guests[1].full_table();
            rig.st.memory_table_changed(id(1), full);
        },
    );
}

/// Node 1's memory table without its frames, made once per test.
fn rig_table(_node: usize) -> RefCell<Option<GuestMemoryAtomic<crate::memory::Mem>>> {
    RefCell::new(None)
}

fn shrunk(rig: &Rig) -> GuestMemoryAtomic<crate::memory::Mem> {
    rig.guests[1].shrunk_table(usize::try_from(FRAME_BASE).unwrap())
}

use vm_memory::{Bytes, GuestAddress, GuestMemoryAtomic};
