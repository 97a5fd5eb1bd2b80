//! Fuzz entry points: what a hostile guest can hand the backend, from raw
//! bytes. Each panics if the backend misbehaves (a panic of its own, a chain
//! left unanswered, a write into another guest's memory outside the frames it
//! bound); the fuzz targets in `../fuzz` call them, and the tests below run them
//! on random inputs and on every saved input in `../fuzz/regressions`.

use firmware_model::abi;
use firmware_model::{NodeId, PctEntry};
use std::cell::RefCell;
use std::os::fd::AsRawFd;

use vm_memory::{Bytes, GuestAddress};

use crate::tests::fake_guest::{fifo_layout, Rig, FIFO_GPA, FIFO_SLOTS, RAM};

/// A cluster of two fake guests: node 0 transmits page 2, node 1 receives
/// it; and node 1's RAM as it must stay outside its frame.
struct Fixture {
    rig: Rig,
    untouchable: Vec<u8>,
}

thread_local! {
    /// Built once per thread: an input only resets node 0 (`Rig::reset_node`),
    /// which puts it back exactly as a fresh rig has it, so an input that
    /// fails here fails alone too.
    static FIXTURE: RefCell<Option<Fixture>> = const { RefCell::new(None) };
}

/// Run `f` on the fixture, with node 0 as a fresh driver leaves it.
fn with_rig<R>(f: impl FnOnce(&mut Rig, &[u8]) -> R) -> R {
    FIXTURE.with(|cell| {
        let mut slot = cell.borrow_mut();
        let fx = slot.get_or_insert_with(|| {
            let mut rig = Rig::new(2);
            rig.set_pct(1, 2, PctEntry::receive());
            let untouchable = untouchable(&rig);
            Fixture { rig, untouchable }
        });
        fx.rig.reset_node(0);
        fx.rig.set_pct(0, 2, PctEntry::transmit_broadcast());
        f(&mut fx.rig, &fx.untouchable)
    })
}

/// Node 1's RAM with its bound frames blanked: the part nobody may write.
fn untouchable(rig: &Rig) -> Vec<u8> {
    let mut ram = rig.guests[1].ram();
    if let Some(frames) = rig.st.node(NodeId(1)).frames(2) {
        for (gpa, len) in frames {
            let start = usize::try_from(*gpa).unwrap();
            ram[start..start + *len as usize].fill(0);
        }
    }
    ram
}

/// Lay `data` out as one chain in node 0's memory: the first bytes choose how
/// the chain is cut into descriptors, where it points and how big the
/// writable part is; the rest is its readable content.
fn post_chain(rig: &mut Rig, queue: u16, data: &[u8]) {
    let (shape, body) = data.split_at(data.len().min(8));
    let mut shape = shape.to_vec();
    shape.resize(8, 0);
    let g = &mut rig.guests[0];
    let buf = g.alloc(body.len().max(1));
    g.mem()
        .write_slice(body, GuestAddress(buf))
        .unwrap_or_default();
    let mut descs = Vec::new();
    let mut off = 0usize;
    for cut in &shape[..3] {
        let n = (usize::from(*cut) % 64 + 1).min(body.len() - off);
        if n == 0 {
            break;
        }
        descs.push((buf + off as u64, u32::try_from(n).unwrap(), false));
        off += n;
    }
    if off < body.len() {
        descs.push((
            buf + off as u64,
            u32::try_from(body.len() - off).unwrap(),
            false,
        ));
    }
    match shape[3] % 8 {
        // A descriptor anywhere: outside RAM, over the rings, at the end of RAM.
        0 => descs.push((
            u64::from_le_bytes([shape[4], shape[5], shape[6], shape[7], 0, 0, 0, 0]) << 8,
            64,
            false,
        )),
        1 => descs.push((RAM as u64 - 8, 64, false)),
        _ => {}
    }
    let writable = [0u32, 4, 8, 16, 32, 64, 8, 16][usize::from(shape[3] >> 5)];
    let out = g.alloc(64);
    if writable > 0 {
        descs.push((out, writable, true));
    }
    if shape[4] % 5 == 0 {
        // Readable after writable.
        descs.push((buf, 8, false));
    }
    if descs.is_empty() {
        descs.push((buf, 0, false));
    }
    g.post(queue, &descs);
}

/// Transmit records: arbitrary bytes in node 0's transmit FIFO, committed.
/// The first byte says how many slots get a valid tag (so the hub takes
/// them); the rest is laid over the slots from the start of the ring, so
/// headers, lengths, flags and padding are all the fuzzer's. The hub must take
/// what parses, refuse or break on the rest, publish how far it got, and write
/// nothing in node 1 outside its frame.
pub fn transmit_records(data: &[u8]) {
    with_rig(|rig, before| transmit_records_on(rig, before, data));
}

fn transmit_records_on(rig: &mut Rig, before: &[u8], data: &[u8]) {
    let (count, body) = data.split_first().unwrap_or((&0, &[]));
    let f = fifo_layout();
    let g = &rig.guests[0];
    let mem = g.mem();
    mem.write_slice(body, GuestAddress(FIFO_GPA + f.slot_offset(0) as u64))
        .unwrap_or_default();
    for p in 0..u64::from(*count) {
        mem.store(
            f.tag(p),
            GuestAddress(FIFO_GPA + f.tag_offset(p) as u64),
            std::sync::atomic::Ordering::Release,
        )
        .unwrap_or_default();
    }
    drop(mem);
    while rig.pump() > 0 {}
    let h = rig.guests[0].fifo_header();
    assert!(h.consumed <= u64::from(*count).max(1) + u64::from(FIFO_SLOTS));
    assert!(
        untouchable(rig) == before,
        "node 1's memory outside its frame changed"
    );
}

/// Control-queue commands: arbitrary chain layout and request bytes.
pub fn control_commands(data: &[u8]) {
    with_rig(|rig, before| control_commands_on(rig, before, data));
}

fn control_commands_on(rig: &mut Rig, before: &[u8], data: &[u8]) {
    post_chain(rig, abi::CTRL_QUEUE, data);
    rig.st.process_ctrl(NodeId(0));
    assert_eq!(
        rig.guests[0].reap(abi::CTRL_QUEUE).len(),
        1,
        "the request was not answered"
    );
    assert!(
        untouchable(rig) == before,
        "node 1's memory outside its frame changed"
    );
    // The adapter still works afterwards.
    rig.set_pct(0, 3, PctEntry::transmit_broadcast());
}

/// Register-file accesses: reads at any offset and size return exactly that
/// many bytes; writes are refused and counted.
pub fn register_writes(data: &[u8]) {
    // Reads and refused writes change nothing but counts: no reset needed.
    thread_local! {
        static RIG: RefCell<Option<Rig>> = const { RefCell::new(None) };
    }
    RIG.with(|cell| {
        let mut slot = cell.borrow_mut();
        register_writes_on(slot.get_or_insert_with(|| Rig::new(2)), data);
    });
}

fn register_writes_on(rig: &mut Rig, data: &[u8]) {
    let mut i = 0;
    while i + 4 <= data.len() {
        let offset = u32::from(data[i]) * 2;
        let size = u32::from(data[i + 1]);
        let regs = rig.st.registers(NodeId(0)).to_bytes();
        let got = crate::vhost_user::config_slice(&regs, offset, size);
        assert_eq!(got.len(), size as usize);
        if data[i + 2] % 2 == 0 {
            let before = rig
                .st
                .hub()
                .error_status(firmware_model::NodeId(0))
                .map(|s| s.protection_errors);
            rig.st
                .refuse_config_write(NodeId(0), offset, usize::from(data[i + 3]));
            let after = rig
                .st
                .hub()
                .error_status(firmware_model::NodeId(0))
                .map(|s| s.protection_errors);
            assert_eq!(after, before.map(|b| b.wrapping_add(1)));
        }
        i += 4;
    }
    assert_eq!(
        rig.st.registers(NodeId(0)).node_id,
        0,
        "a refused write changed a register"
    );
}

/// The cluster the vhost-user target talks to: started once per process.
fn socket_cluster() -> &'static (crate::Cluster, std::path::PathBuf) {
    static CLUSTER: std::sync::OnceLock<(crate::Cluster, std::path::PathBuf)> =
        std::sync::OnceLock::new();
    CLUSTER.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("mc-fuzz-{}", std::process::id()));
        let config = firmware_model::ClusterConfig::new(2);
        let c = crate::Cluster::start(crate::ClusterOptions::new(config, &dir))
            .expect("start a cluster");
        (c, dir)
    })
}

/// Ask node `n`'s socket for its features, as any frontend's first message
/// does: the backend must still be serving.
fn still_serving(dir: &std::path::Path, n: u8) {
    use std::io::{Read, Write};
    let mut s = std::os::unix::net::UnixStream::connect(dir.join(format!("node{n}.sock")))
        .expect("backend gone");
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .ok();
    // VHOST_USER_GET_FEATURES: request 1, flags = version 1, no payload.
    let hdr: Vec<u8> = [1u32, 1, 0].iter().flat_map(|v| v.to_le_bytes()).collect();
    s.write_all(&hdr).expect("send GET_FEATURES");
    let mut reply = [0u8; 20];
    s.read_exact(&mut reply).expect("no answer to GET_FEATURES");
    assert_eq!(
        u32::from_le_bytes([reply[0], reply[1], reply[2], reply[3]]),
        1
    );
}

/// vhost-user messages: arbitrary bytes on an adapter's socket, as a broken or
/// hostile frontend would send. The backend drops that connection, and it and
/// the other node keep serving.
pub fn vhost_user_messages(data: &[u8]) {
    use std::io::{Read, Write};
    let (_, dir) = socket_cluster();
    if let Ok(mut s) = std::os::unix::net::UnixStream::connect(dir.join("node0.sock")) {
        s.set_write_timeout(Some(std::time::Duration::from_millis(200)))
            .ok();
        s.set_read_timeout(Some(std::time::Duration::from_millis(200)))
            .ok();
        let _ = s.write_all(data);
        let _ = s.shutdown(std::net::Shutdown::Write);
        let mut sink = Vec::new();
        let _ = s.read_to_end(&mut sink);
    }
    still_serving(dir, 0);
    still_serving(dir, 1);
}

/// Requests in one [`vhost_user_sequence`] input at most.
const MAX_REQUESTS: usize = 64;

/// An input read front to back; zeros once it is used up.
struct Input<'a>(std::slice::Iter<'a, u8>);

impl Input<'_> {
    fn u8(&mut self) -> u8 {
        self.0.next().copied().unwrap_or(0)
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(std::array::from_fn(|_| self.u8()))
    }
    fn done(&self) -> bool {
        self.0.len() == 0
    }
}

fn le(words: &[u64], sizes: &[usize]) -> Vec<u8> {
    words
        .iter()
        .zip(sizes)
        .flat_map(|(w, n)| w.to_le_bytes()[..*n].to_vec())
        .collect()
}

/// vhost-user message sequences with memory tables, as a broken or hostile
/// frontend would send them to an adapter: each request is chosen and
/// parameterised by the input's bytes (features, owner, memory tables over
/// memfds sealable or not and plain files, regions that lie about their file,
/// queue sizes, ring addresses anywhere, bases, kick and call descriptors,
/// enables, ring stops, register reads and writes), with ring memory written
/// between requests (indices that jump, descriptors anywhere), kicks, and files
/// shrunk under the backend. The backend must not die (SIGBUS, panic), must
/// refuse every table that could raise SIGBUS (a region past the end of its
/// file, a file that can still shrink), must leave no memory it accepted able
/// to shrink, and must keep serving both nodes.
pub fn vhost_user_sequence(data: &[u8]) {
    use crate::tests::rig::frontend::req;
    use crate::tests::rig::{Backing, GuestRam, Hostile};
    use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};

    let (cluster, dir) = socket_cluster();
    let mut input = Input(data.iter());
    let mut fe = Hostile::connect(&dir.join("node0.sock")).expect("backend gone");
    let kicks: Vec<EventFd> = (0..3)
        .map(|_| EventFd::new(EFD_NONBLOCK).expect("eventfd"))
        .collect();
    // The files of the table the backend accepted last.
    let mut table: Vec<GuestRam> = Vec::new();
    for _ in 0..MAX_REQUESTS {
        if input.done() || !fe.is_open() {
            break;
        }
        let op = input.u8();
        let qi = usize::from(input.u8() % 4); // 3: no such queue
        let q = qi as u64;
        match op % 16 {
            0 => {
                fe.raw(req::GET_FEATURES, &[], &[]);
            }
            1 => {
                let v = match input.u8() % 3 {
                    0 => (1 << 32) | (1 << 29) | (1 << 30),
                    1 => (1 << 32) | (1 << 30),
                    _ => input.u64(),
                };
                fe.raw(req::SET_FEATURES, &v.to_le_bytes(), &[]);
            }
            2 => {
                fe.raw(req::SET_OWNER, &[], &[]);
            }
            3 => {
                fe.raw(req::GET_PROTOCOL_FEATURES, &[], &[]);
                // MQ | CONFIG, the same with REPLY_ACK, or anything.
                let v = match input.u8() % 3 {
                    0 => 0x201,
                    1 => 0x209,
                    _ => input.u64(),
                };
                fe.raw(req::SET_PROTOCOL_FEATURES, &v.to_le_bytes(), &[]);
            }
            4 => {
                let regions = 1 + usize::from(input.u8() % 2);
                let mut body = le(&[regions as u64, 0], &[4, 4]);
                let mut rams = Vec::new();
                let mut could_fault = false;
                for r in 0..regions {
                    let b = input.u8();
                    let kind = [
                        Backing::Sealable,
                        Backing::Sealed,
                        Backing::Unsealable,
                        Backing::PlainFile,
                    ][usize::from(b % 4)];
                    let len = (1 + usize::from(b >> 2) % 4) << 16;
                    let Ok(ram) = GuestRam::new(len, 0, kind) else {
                        continue;
                    };
                    let len = len as u64;
                    let (size, offset) = match input.u8() % 6 {
                        3 => (len + 4096, 0), // larger than its file
                        4 => (len, 4096),     // ends past its file
                        5 => (len / 2, len / 2),
                        _ => (len, 0),
                    };
                    could_fault |= offset + size > len
                        || matches!(kind, Backing::Unsealable | Backing::PlainFile);
                    let gpa = ((r as u64) << 24) + (u64::from(input.u8() % 4) << 20);
                    body.extend(le(&[gpa, size, ram.host_addr(0), offset], &[8; 4]));
                    rams.push(ram);
                }
                let fds: Vec<_> = rams.iter().map(GuestRam::fd).collect();
                body[..4].copy_from_slice(&u32::try_from(fds.len()).unwrap_or(0).to_le_bytes());
                body.truncate(8 + 32 * fds.len());
                if fe.raw(req::SET_MEM_TABLE, &body, &fds) {
                    assert!(
                        !could_fault,
                        "a memory table that could raise SIGBUS was accepted"
                    );
                    for ram in &rams {
                        assert!(!ram.can_shrink(), "accepted guest memory can still shrink");
                    }
                    table = rams;
                }
            }
            5 => {
                let num = [16, 64, 1024, 0, 1, 2000, 3][usize::from(input.u8() % 7)];
                fe.raw(req::SET_VRING_NUM, &le(&[q, num], &[4, 4]), &[]);
            }
            6 => {
                let addr = |input: &mut Input<'_>| match (input.u8(), table.len()) {
                    (sel, n) if n > 0 && sel % 4 != 0 => {
                        table[usize::from(sel) % n].host_addr(u64::from(input.u16()) * 2)
                    }
                    _ => input.u64(),
                };
                let (desc, used, avail) = (addr(&mut input), addr(&mut input), addr(&mut input));
                let body = le(&[q, 0, desc, used, avail, 0], &[4, 4, 8, 8, 8, 8]);
                fe.raw(req::SET_VRING_ADDR, &body, &[]);
            }
            7 => {
                let base = u64::from(input.u16());
                fe.raw(req::SET_VRING_BASE, &le(&[q, base], &[4, 4]), &[]);
            }
            8 | 9 => {
                let code = if op % 16 == 8 {
                    req::SET_VRING_KICK
                } else {
                    req::SET_VRING_CALL
                };
                let fd = kicks[qi % 3].as_raw_fd();
                if input.u8() % 4 == 0 {
                    // "No descriptor" flag.
                    fe.raw(code, &(q | 0x100).to_le_bytes(), &[]);
                } else {
                    fe.raw(code, &q.to_le_bytes(), &[fd]);
                }
            }
            10 => {
                let on = u64::from(input.u8() % 2);
                fe.raw(req::SET_VRING_ENABLE, &le(&[q, on], &[4, 4]), &[]);
            }
            11 => {
                fe.raw(req::GET_VRING_BASE, &le(&[q, 0], &[4, 4]), &[]);
            }
            12 => {
                let _ = kicks[qi % 3].write(1);
                // Give the vring worker a moment to take it.
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
            13 => {
                // A store into guest RAM: an index, a descriptor field, anything.
                let (at, v) = (usize::from(input.u16()) * 2, input.u16());
                if let Some(ram) = table.get(qi % table.len().max(1)) {
                    let at = (at % ram.len()) as u64;
                    if ram.holds(at, 2) {
                        ram.write_u16(at, v);
                    }
                }
            }
            14 => {
                let n = table.len().max(1);
                if let Some(ram) = table.get(qi % n) {
                    let half = ram.len() / 2;
                    assert!(
                        ram.set_file_len(half as u64).is_err(),
                        "guest memory the backend uses was shrunk under it"
                    );
                }
            }
            _ => {
                let (offset, size) = (u64::from(input.u8() % 160), u64::from(input.u8() % 160));
                let code = if input.u8() % 2 == 0 {
                    req::GET_CONFIG
                } else {
                    req::SET_CONFIG
                };
                let mut body = le(&[offset, size, 0], &[4, 4, 4]);
                body.resize(12 + usize::try_from(size).unwrap(), 0xa5);
                fe.raw(code, &body, &[]);
            }
        }
    }
    drop(fe);
    // The backend lets the node go, and both nodes still serve.
    let start = std::time::Instant::now();
    while cluster.snapshot().nodes[0].connected {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(10),
            "node 0 kept a closed connection's memory"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    still_serving(dir, 0);
    still_serving(dir, 1);
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use proptest::prelude::*;

    use super::*;

    /// Every input a fuzz run ever kept (crashes fixed since, and seeds).
    fn saved(target: &str) -> Vec<Vec<u8>> {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../fuzz/regressions")
            .join(target);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return Vec::new();
        };
        entries
            .filter_map(|e| e.ok())
            .filter_map(|e| std::fs::read(e.path()).ok())
            .collect()
    }

    #[test]
    fn saved_inputs_stay_fixed() {
        for (target, f) in [
            ("transmit_records", transmit_records as fn(&[u8])),
            ("control_commands", control_commands),
            ("register_writes", register_writes),
            ("vhost_user_messages", vhost_user_messages),
            ("vhost_user_sequence", vhost_user_sequence),
        ] {
            for input in saved(target) {
                f(&input);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        #[test]
        fn random_transmit_records(data in prop::collection::vec(any::<u8>(), 0..300)) {
            transmit_records(&data);
        }

        #[test]
        fn random_control_commands(data in prop::collection::vec(any::<u8>(), 0..300)) {
            control_commands(&data);
        }

        #[test]
        fn random_vhost_user_messages(data in prop::collection::vec(any::<u8>(), 0..200)) {
            vhost_user_messages(&data);
        }

        #[test]
        fn random_vhost_user_sequences(data in prop::collection::vec(any::<u8>(), 0..400)) {
            vhost_user_sequence(&data);
        }

        #[test]
        fn random_register_accesses(data in prop::collection::vec(any::<u8>(), 0..64)) {
            register_writes(&data);
        }
    }
}
