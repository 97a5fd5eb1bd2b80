//! HLRC on a simulated network: N engines, per-pair FIFO channels (and,
//! for barriers that broadcast, a second set: the barrier board, read
//! independently of the mailboxes, as a node's communication thread reads
//! them), and a scheduler that interleaves the nodes' steps and the messages' arrivals
//! at random. Data-race-free programs (phases between barriers in which
//! each byte has at most one writer, and counters incremented under locks)
//! must read exactly what sequential consistency gives them, at byte
//! granularity, whatever the interleaving.

use std::collections::VecDeque;

use hlrc::engine::{Access, Engine, Message, Outgoing, PageMemory, Step, To};
use hlrc::{BarrierMode, HomePolicy};
use proptest::prelude::*;

const PAGE: usize = 8;

/// A node's pages, twins and protection, as plain vectors.
struct VecMemory {
    pages: Vec<Vec<u8>>,
    twins: Vec<Option<Vec<u8>>>,
    access: Vec<Access>,
}

impl VecMemory {
    fn new(pages: usize) -> Self {
        VecMemory {
            pages: vec![vec![0; PAGE]; pages],
            twins: vec![None; pages],
            access: vec![Access::None; pages],
        }
    }
}

impl PageMemory for VecMemory {
    type Diff = Vec<(usize, u8)>;
    fn protect(&mut self, page: usize, access: Access) {
        self.access[page] = access;
    }
    fn twin(&mut self, page: usize) {
        self.twins[page] = Some(self.pages[page].clone());
    }
    fn diff(&mut self, page: usize) -> Option<Self::Diff> {
        let twin = self.twins[page].take().expect("a twin to diff against");
        let d: Vec<(usize, u8)> = self.pages[page]
            .iter()
            .zip(&twin)
            .enumerate()
            .filter(|(_, (a, b))| a != b)
            .map(|(i, (a, _))| (i, *a))
            .collect();
        (!d.is_empty()).then_some(d)
    }
    fn apply(
        &mut self,
        page: usize,
        diff: &Self::Diff,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        for &(i, b) in diff {
            *self.pages[page].get_mut(i).ok_or("byte outside the page")? = b;
        }
        Ok(())
    }
    fn page_size(&self) -> usize {
        PAGE
    }
    fn read_page(&self, page: usize) -> Vec<u8> {
        self.pages[page].clone()
    }
    fn install(&mut self, page: usize, data: &[u8]) {
        self.pages[page].copy_from_slice(data);
    }
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Write(usize, u8),
    Read(usize, u8),
    Acquire(usize),
    /// Read a counter byte and write it back plus one.
    Inc(usize),
    Release(usize),
    Barrier,
}

/// A data-race-free program per node, and the counters' final values.
#[derive(Clone, Debug)]
struct Program {
    nodes: usize,
    pages: usize,
    ops: Vec<Vec<Op>>,
    counters: Vec<(usize, u8)>,
}

/// Tiny deterministic generator for the program and the schedule.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % u64::try_from(n).unwrap()).unwrap()
    }
}

fn program(seed: u64, nodes: usize, pages: usize, phases: usize, locks: usize) -> Program {
    let mut rng = Rng(seed | 1);
    let bytes = pages * PAGE;
    // The last `locks` bytes are counters, one per lock; the rest are
    // written in phases, each byte by at most one node a phase.
    let data = bytes - locks;
    let mut value = vec![0u8; bytes];
    let mut ops = vec![Vec::new(); nodes];
    let mut incs = vec![0u32; locks];
    for phase in 0..phases {
        let owner: Vec<Option<usize>> = (0..data)
            .map(|_| {
                let r = rng.below(nodes + 1);
                (r < nodes).then_some(r)
            })
            .collect();
        let start = value.clone();
        for (n, list) in ops.iter_mut().enumerate() {
            let mut view = start.clone();
            let mut steps = Vec::new();
            for (addr, o) in owner.iter().enumerate() {
                if *o == Some(n) {
                    let v = u8::try_from((phase * 31 + n * 7 + addr) % 251 + 1).unwrap();
                    steps.push(Op::Write(addr, v));
                }
            }
            for _ in 0..rng.below(2 * PAGE) {
                let addr = rng.below(data);
                // Another node's byte of this phase is a race: not read.
                if owner[addr].is_none() || owner[addr] == Some(n) {
                    steps.push(Op::Read(addr, 0));
                }
            }
            for _ in 0..rng.below(3) {
                let l = rng.below(locks.max(1));
                if locks > 0 {
                    steps.push(Op::Inc(l));
                }
            }
            // Shuffle, then fill in what each read must see.
            for i in (1..steps.len()).rev() {
                let j = rng.below(i + 1);
                steps.swap(i, j);
            }
            for s in steps {
                match s {
                    Op::Write(a, v) => {
                        view[a] = v;
                        list.push(s);
                    }
                    Op::Read(a, _) => list.push(Op::Read(a, view[a])),
                    Op::Inc(l) => {
                        incs[l] += 1;
                        list.extend([Op::Acquire(l), Op::Inc(data + l), Op::Release(l)]);
                    }
                    _ => unreachable!(),
                }
            }
            list.push(Op::Barrier);
            for (addr, o) in owner.iter().enumerate() {
                if *o == Some(n) {
                    value[addr] = view[addr];
                }
            }
        }
        // Everyone reads every byte after the barrier, next phase's start.
    }
    for (n, list) in ops.iter_mut().enumerate() {
        let _ = n;
        for (addr, v) in value.iter().enumerate().take(data) {
            list.push(Op::Read(addr, *v));
        }
    }
    let counters = (0..locks)
        .map(|l| (data + l, u8::try_from(incs[l] % 256).unwrap()))
        .collect();
    Program {
        nodes,
        pages,
        ops,
        counters,
    }
}

type ByteDiff = Vec<(usize, u8)>;
type Out = Vec<Outgoing<ByteDiff>>;
type Channel = VecDeque<Message<ByteDiff>>;

struct Cluster {
    engines: Vec<Engine<VecMemory>>,
    /// channels[from][to]: the mailboxes, then the barrier board.
    channels: Vec<Vec<Channel>>,
    board: Vec<Vec<Channel>>,
    messages: u64,
}

impl Cluster {
    fn post(&mut self, from: usize, out: &mut Out) {
        for o in out.drain(..) {
            self.messages += 1;
            match o.to {
                To::Node(to) => self.channels[from][to].push_back(o.message),
                To::Every => {
                    for to in (0..self.engines.len()).filter(|&t| t != from) {
                        self.board[from][to].push_back(o.message.clone());
                    }
                }
            }
        }
    }
}

/// Run `p` under `policy` with schedule seed `seed`; returns the failures.
fn run(p: &Program, policy: HomePolicy, seed: u64) -> Result<u64, String> {
    run_with(p, policy, BarrierMode::Manager, seed)
}

fn run_with(p: &Program, policy: HomePolicy, mode: BarrierMode, seed: u64) -> Result<u64, String> {
    let mut c = Cluster {
        engines: (0..p.nodes)
            .map(|n| {
                Engine::new(n, p.nodes, p.pages, policy, VecMemory::new(p.pages)).with_barrier(mode)
            })
            .collect(),
        channels: vec![vec![VecDeque::new(); p.nodes]; p.nodes],
        board: vec![vec![VecDeque::new(); p.nodes]; p.nodes],
        messages: 0,
    };
    let mut pc = vec![0usize; p.nodes];
    let mut lock_step_done = vec![false; p.nodes];
    let mut rng = Rng(seed | 1);
    let mut out: Out = Vec::new();
    loop {
        let runnable: Vec<usize> = (0..p.nodes)
            .filter(|&n| pc[n] < p.ops[n].len() && c.engines[n].ready())
            .collect();
        let busy: Vec<(usize, usize, bool)> = (0..p.nodes)
            .flat_map(|f| (0..p.nodes).flat_map(move |t| [(f, t, false), (f, t, true)]))
            .filter(|&(f, t, b)| !(if b { &c.board } else { &c.channels })[f][t].is_empty())
            .collect();
        if runnable.is_empty() && busy.is_empty() {
            if pc.iter().zip(&p.ops).all(|(pc, ops)| *pc == ops.len()) {
                break;
            }
            return Err(format!("deadlock at {pc:?}"));
        }
        let pick = rng.below(runnable.len() + busy.len());
        if pick >= runnable.len() {
            let (f, t, b) = busy[pick - runnable.len()];
            let m = if b { &mut c.board } else { &mut c.channels }[f][t]
                .pop_front()
                .unwrap();
            if std::env::var("SIM_TRACE").is_ok() {
                eprintln!("{f}->{t}: {m:?}");
            }
            c.engines[t]
                .handle(f, m, &mut out)
                .map_err(|e| e.to_string())?;
            c.post(t, &mut out);
            continue;
        }
        let n = runnable[pick];
        let op = p.ops[n][pc[n]];
        if std::env::var("SIM_TRACE").is_ok() {
            eprintln!(
                "node {n} op {} {op:?} access {:?}",
                pc[n],
                c.engines[n].memory().access
            );
        }
        let e = &mut c.engines[n];
        let page_of = |a: usize| a / PAGE;
        let step = match op {
            Op::Read(a, want) => {
                if e.memory().access[page_of(a)] == Access::None {
                    e.fault(page_of(a), false, &mut out)
                        .map_err(|e| e.to_string())?
                } else {
                    let got = e.memory().pages[page_of(a)][a % PAGE];
                    if got != want {
                        return Err(format!(
                            "node {n} op {} read byte {a}: {got}, want {want}",
                            pc[n]
                        ));
                    }
                    pc[n] += 1;
                    Step::Done
                }
            }
            Op::Write(a, _) | Op::Inc(a) if e.memory().access[page_of(a)] != Access::Write => e
                .fault(page_of(a), true, &mut out)
                .map_err(|e| e.to_string())?,
            Op::Write(a, v) => {
                e.memory_mut().pages[page_of(a)][a % PAGE] = v;
                pc[n] += 1;
                Step::Done
            }
            Op::Inc(a) => {
                let b = &mut e.memory_mut().pages[page_of(a)][a % PAGE];
                *b = b.wrapping_add(1);
                pc[n] += 1;
                Step::Done
            }
            Op::Acquire(l) => {
                if lock_step_done[n] {
                    lock_step_done[n] = false;
                    pc[n] += 1;
                    Step::Done
                } else {
                    lock_step_done[n] = true;
                    e.acquire(l, &mut out).map_err(|e| e.to_string())?
                }
            }
            Op::Release(l) => {
                e.release(l, &mut out).map_err(|e| e.to_string())?;
                pc[n] += 1;
                Step::Done
            }
            Op::Barrier => {
                if lock_step_done[n] {
                    lock_step_done[n] = false;
                    pc[n] += 1;
                    Step::Done
                } else {
                    lock_step_done[n] = true;
                    e.barrier(&mut out).map_err(|e| e.to_string())?
                }
            }
        };
        let _ = step;
        c.post(n, &mut out);
    }
    // The counters, read through the protocol by node 0 after a last
    // barrier (every node ran one as its last op of the last phase; the
    // final reads follow it).
    for &(addr, want) in &p.counters {
        let page = addr / PAGE;
        let mut at = None;
        for n in 0..p.nodes {
            let e = &c.engines[n];
            if e.memory().access[page] != Access::None {
                at = Some(e.memory().pages[page][addr % PAGE]);
            }
        }
        // Some node has a valid copy (the home always does).
        let got = at.ok_or("no valid copy of a counter")?;
        if got != want {
            return Err(format!("counter byte {addr}: {got}, want {want}"));
        }
    }
    Ok(c.messages)
}

#[test]
fn two_nodes_one_page_false_sharing_by_bytes() {
    let p = program(7, 2, 1, 3, 0);
    for seed in 1..50 {
        run(&p, HomePolicy::FirstTouch, seed).unwrap();
        run(&p, HomePolicy::RoundRobin, seed).unwrap();
    }
}

#[test]
fn barriers_by_broadcast_keep_every_byte_with_nodes_a_barrier_apart() {
    // Many phases, so that a node often posts its next arrival before
    // another has read its last: the early arrivals must wait their turn.
    for pseed in 1..40 {
        let p = program(pseed, 4, 2, 6, 1);
        for seed in 1..20 {
            run_with(&p, HomePolicy::FirstTouch, BarrierMode::Broadcast, seed).unwrap();
            run_with(&p, HomePolicy::RoundRobin, BarrierMode::Broadcast, seed).unwrap();
        }
    }
}

#[test]
fn counters_under_locks_count_every_increment() {
    let p = program(11, 3, 2, 2, 2);
    for seed in 1..50 {
        run(&p, HomePolicy::FirstTouch, seed).unwrap();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4000, .. ProptestConfig::default() })]
    #[test]
    fn data_race_free_programs_read_what_they_must(
        pseed in 1u64..u64::MAX,
        sseed in 1u64..u64::MAX,
        nodes in 2usize..5,
        pages in 1usize..4,
        phases in 1usize..4,
        locks in 0usize..3,
        round_robin in any::<bool>(),
        broadcast in any::<bool>(),
    ) {
        let p = program(pseed, nodes, pages, phases, locks);
        let policy = if round_robin { HomePolicy::RoundRobin } else { HomePolicy::FirstTouch };
        let mode = if broadcast { BarrierMode::Broadcast } else { BarrierMode::Manager };
        let r = run_with(&p, policy, mode, sseed);
        prop_assert!(r.is_ok(), "{:?}", r);
    }
}
