//! The API's adapter with a record of every page control table entry it
//! programmed, so a node whose adapter crashed and rejoined (a fresh adapter,
//! its PCT empty) can program it again exactly as before.

use firmware_model::abi::{EventRecord, Registers, StatusPage};
use firmware_model::PctEntry;
use log::debug;
use mc_driver::transport::CallSignal;

use std::sync::Arc;

use super::{McError, McPort, ReceiveMemory};
use crate::port::StorePath;

/// One programmed range: `count` pages from `first`, and their frames when the
/// entry receives.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Record {
    first: u32,
    count: u32,
    entry: PctEntry,
    frames: Vec<u64>,
}

impl Record {
    fn end(&self) -> u32 {
        self.first + self.count
    }

    /// The part of this record in `[from, to)`, if any.
    fn slice(&self, from: u32, to: u32) -> Option<Record> {
        let (a, b) = (from.max(self.first), to.min(self.end()));
        if a >= b {
            return None;
        }
        let frames = if self.frames.is_empty() {
            Vec::new()
        } else {
            let per_page = self.frames.len() / self.count as usize;
            let s = (a - self.first) as usize * per_page;
            let e = (b - self.first) as usize * per_page;
            self.frames
                .get(s..e)
                .map(<[u64]>::to_vec)
                .unwrap_or_default()
        };
        Some(Record {
            first: a,
            count: b - a,
            entry: self.entry,
            frames,
        })
    }
}

/// The adapter the API drives, recording what [`McPort::set_pct`] programmed.
pub(crate) struct RecordingPort {
    port: Box<dyn McPort>,
    log: Vec<Record>,
}

impl RecordingPort {
    pub(crate) fn new(port: Box<dyn McPort>) -> Self {
        RecordingPort {
            port,
            log: Vec::new(),
        }
    }

    /// Program entries that are not to be restored after a rejoin (the resync
    /// window, mapped only while a join is served).
    pub(crate) fn set_pct_transient(
        &mut self,
        first_page: u32,
        count: u32,
        entry: PctEntry,
        frames: &[u64],
    ) -> Result<(), McError> {
        self.port.set_pct(first_page, count, entry, frames)
    }

    /// Program every recorded entry again (after the adapter came back empty).
    pub(crate) fn replay(&mut self) -> Result<(), McError> {
        for r in &self.log {
            debug!("PCT again: pages {}..{} as {:?}", r.first, r.end(), r.entry);
            self.port.set_pct(r.first, r.count, r.entry, &r.frames)?;
        }
        Ok(())
    }

    fn record(&mut self, first: u32, count: u32, entry: PctEntry, frames: &[u64]) {
        let end = first.saturating_add(count);
        // What the new entry overwrites goes; the rest of an older range stays.
        let mut kept = Vec::with_capacity(self.log.len() + 1);
        for r in self.log.drain(..) {
            if r.end() <= first || r.first >= end {
                kept.push(r);
                continue;
            }
            kept.extend(r.slice(r.first, first));
            kept.extend(r.slice(end, r.end()));
        }
        if entry != PctEntry::DISABLED && count > 0 {
            kept.push(Record {
                first,
                count,
                entry,
                frames: frames.to_vec(),
            });
        }
        self.log = kept;
    }
}

impl McPort for RecordingPort {
    fn registers(&self) -> Registers {
        self.port.registers()
    }

    fn alloc_receive(&mut self, pages: u32) -> Result<Box<dyn ReceiveMemory>, McError> {
        self.port.alloc_receive(pages)
    }

    fn set_pct(
        &mut self,
        first_page: u32,
        count: u32,
        entry: PctEntry,
        frames: &[u64],
    ) -> Result<(), McError> {
        self.port.set_pct(first_page, count, entry, frames)?;
        self.record(first_page, count, entry, frames);
        Ok(())
    }

    fn pct_entry(&mut self, page: u32) -> Result<PctEntry, McError> {
        self.port.pct_entry(page)
    }

    fn store_path(&self) -> Arc<dyn StorePath> {
        self.port.store_path()
    }

    fn status(&self) -> StatusPage {
        self.port.status()
    }

    fn cluster_error_count(&self) -> u64 {
        self.port.cluster_error_count()
    }

    fn poll_events(&mut self) -> Vec<EventRecord> {
        self.port.poll_events()
    }

    fn event_signal(&mut self) -> Result<Option<Arc<dyn CallSignal>>, McError> {
        self.port.event_signal()
    }

    fn arrival_table(&self) -> Option<mc_driver::ArrivalTable> {
        self.port.arrival_table()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// (first page, count, entry, frames) of a `set_pct` call.
    type Call = (u32, u32, PctEntry, Vec<u64>);

    /// A port that only remembers the PCT calls it got.
    struct Calls(Arc<Mutex<Vec<Call>>>);

    impl McPort for Calls {
        fn registers(&self) -> Registers {
            Registers::default()
        }
        fn alloc_receive(&mut self, _: u32) -> Result<Box<dyn ReceiveMemory>, McError> {
            unreachable!("the test allocates no receive memory")
        }
        fn set_pct(&mut self, f: u32, c: u32, e: PctEntry, fr: &[u64]) -> Result<(), McError> {
            if f == 999 {
                return Err(McError::Refused {
                    status: firmware_model::abi::Status::OutOfRange,
                    detail: f,
                });
            }
            self.0.lock().unwrap().push((f, c, e, fr.to_vec()));
            Ok(())
        }
        fn pct_entry(&mut self, _: u32) -> Result<PctEntry, McError> {
            unreachable!("the test reads no PCT entry")
        }
        fn store_path(&self) -> Arc<dyn StorePath> {
            unreachable!("the test stores nothing")
        }
        fn status(&self) -> StatusPage {
            StatusPage::default()
        }
        fn cluster_error_count(&self) -> u64 {
            0
        }
        fn poll_events(&mut self) -> Vec<EventRecord> {
            Vec::new()
        }
    }

    #[test]
    fn replay_programs_what_is_still_in_effect() {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let mut p = RecordingPort::new(Box::new(Calls(calls.clone())));
        let rx = PctEntry::receive();
        let tx = PctEntry::transmit_broadcast();
        // Two frames per page.
        p.set_pct(10, 4, rx, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        p.set_pct(20, 2, tx, &[]).unwrap();
        // Overwrite the middle of the first range, disable the second.
        p.set_pct(11, 2, tx, &[]).unwrap();
        p.set_pct(20, 2, PctEntry::DISABLED, &[]).unwrap();
        // Refused: not recorded.
        assert!(p.set_pct(999, 1, tx, &[]).is_err());
        p.set_pct_transient(30, 1, tx, &[]).unwrap();
        calls.lock().unwrap().clear();
        p.replay().unwrap();
        let mut got = calls.lock().unwrap().clone();
        got.sort_by_key(|c| c.0);
        assert_eq!(
            got,
            vec![
                (10, 1, rx, vec![1, 2]),
                (11, 2, tx, vec![]),
                (13, 1, rx, vec![7, 8]),
            ]
        );
    }
}
