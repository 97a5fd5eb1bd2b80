//! Address vectors: fi_addr_t is an index into the table of inserted
//! addresses (FI_AV_MAP and FI_AV_TABLE alike). Endpoints bound to it open
//! their UMP channels to every address inserted (a channel completes when
//! both ends have opened it).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, Weak};

/// What an address vector tells about the addresses inserted into it: an
/// endpoint bound to it (the endpoint implements this; the vector does not
/// know endpoints otherwise).
pub trait AvUser: Send + Sync {
    /// Open a channel to each of `addrs` not open yet.
    fn connect_all(&self, addrs: &[u64]);
}

#[derive(Default)]
struct Table {
    addrs: Vec<Option<u64>>,
    index: HashMap<u64, u64>,
    eps: Vec<Weak<dyn AvUser>>,
}

#[derive(Default)]
pub struct Av {
    t: Mutex<Table>,
}

impl Av {
    fn t(&self) -> MutexGuard<'_, Table> {
        self.t.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Insert `addrs`; each valid one gets its fi_addr in `out`, an
    /// invalid one `None`. Returns how many were inserted.
    pub fn insert(&self, addrs: &[u64], out: &mut [Option<u64>]) -> usize {
        let mut n = 0;
        let eps;
        {
            let mut t = self.t();
            for (i, &a) in addrs.iter().enumerate() {
                if crate::domain::node_of(a).is_none() {
                    out[i] = None;
                    continue;
                }
                let fi = t.addrs.len() as u64;
                t.addrs.push(Some(a));
                t.index.entry(a).or_insert(fi);
                out[i] = Some(fi);
                n += 1;
            }
            t.eps.retain(|e| e.strong_count() > 0);
            eps = t.eps.clone();
        }
        for e in eps.iter().filter_map(Weak::upgrade) {
            e.connect_all(addrs);
        }
        n
    }

    pub fn remove(&self, fi: u64) -> bool {
        let mut t = self.t();
        let Some(slot) = usize::try_from(fi).ok().and_then(|i| t.addrs.get_mut(i)) else {
            return false;
        };
        let Some(a) = slot.take() else {
            return false;
        };
        if t.index.get(&a) == Some(&fi) {
            t.index.remove(&a);
        }
        true
    }

    pub fn lookup(&self, fi: u64) -> Option<u64> {
        let i = usize::try_from(fi).ok()?;
        self.t().addrs.get(i).copied().flatten()
    }

    /// The fi_addr of `addr`, if it was inserted.
    pub fn reverse(&self, addr: u64) -> Option<u64> {
        self.t().index.get(&addr).copied()
    }

    pub fn all(&self) -> Vec<u64> {
        self.t().addrs.iter().flatten().copied().collect()
    }

    pub fn bind(&self, ep: Weak<dyn AvUser>) {
        self.t().eps.push(ep);
    }
}
