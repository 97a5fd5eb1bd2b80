//! CSM-ADB at a page's home (seed 000 s.2.3.3): how many consumers asked
//! for each page, and whether this node has a copy of it placed in the
//! broadcast buffers. The heuristics: requests answered in the same pass
//! over the requests, two or more in the home's current interval (between
//! its releases), or two or more in the previous one.

pub(crate) struct AdbInterest {
    /// Requests answered in the interval `interval` (the home's release
    /// count then) and in the interval before.
    count: Vec<u16>,
    prev: Vec<u16>,
    interval: Vec<u64>,
    /// The serving pass of the last request answered.
    pass: Vec<u64>,
    placed: Vec<bool>,
}

impl AdbInterest {
    pub(crate) fn new(pages: u32) -> AdbInterest {
        let n = pages as usize;
        AdbInterest {
            count: vec![0; n],
            prev: vec![0; n],
            interval: vec![0; n],
            pass: vec![u64::MAX; n],
            placed: vec![false; n],
        }
    }

    /// A request for page `p` was answered in interval `now` during serving
    /// pass `pass`: whether the page has several consumers.
    pub(crate) fn requested(&mut self, p: u32, now: u64, pass: u64) -> bool {
        let i = p as usize;
        if self.interval[i] != now {
            self.prev[i] = if self.interval[i] + 1 == now {
                self.count[i]
            } else {
                0
            };
            self.count[i] = 0;
            self.interval[i] = now;
        }
        self.count[i] = self.count[i].saturating_add(1);
        let simultaneous = self.pass[i] == pass;
        self.pass[i] = pass;
        simultaneous || self.count[i] >= 2 || self.prev[i] >= 2
    }

    /// This node has a copy of `p` placed in the buffers.
    pub(crate) fn placed(&self, p: u32) -> bool {
        self.placed[p as usize]
    }

    pub(crate) fn set_placed(&mut self, p: u32, placed: bool) {
        self.placed[p as usize] = placed;
    }
}
