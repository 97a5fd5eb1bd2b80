//! `mc-guest selftest`: every node runs the same checks together, through the
//! Memory Channel API, and reports each one.

use std::time::Duration;

use mc_api::{Barrier, Conflict, McError, MemoryChannel, RegionRef, Sharing};

const T: Duration = Duration::from_secs(60);
const KEY_BARRIER: u32 = 0x5e1f_0001;
const KEY_COHERENT: u32 = 0x5e1f_0002;
const KEY_LOOP: u32 = 0x5e1f_0003;
const KEY_LOCK: u32 = 0x5e1f_0004;
const KEY_COUNTER: u32 = 0x5e1f_0005;
const KEY_ERR: u32 = 0x5e1f_0006;
const KEY_P2P: u32 = 0x5e1f_0007;

/// A failed check.
#[derive(Debug, thiserror::Error)]
pub enum SelftestError {
    #[error("check {check:?} failed: {why}")]
    Check { check: &'static str, why: String },
    #[error("check {check:?}")]
    Api {
        check: &'static str,
        #[source]
        source: McError,
    },
}

/// What one check found: passed (with what it saw) or failed (and why).
enum Verdict {
    Pass(String),
    Fail(String),
}

/// Attribute an API error to `check`.
fn during(check: &'static str) -> impl Fn(McError) -> SelftestError {
    move |source| SelftestError::Api { check, source }
}

struct Selftest<'a> {
    mc: &'a MemoryChannel,
    passed: u32,
    out: &'a mut dyn FnMut(String),
}

impl Selftest<'_> {
    fn check(
        &mut self,
        name: &'static str,
        f: impl FnOnce(&MemoryChannel) -> Result<Verdict, McError>,
    ) -> Result<(), SelftestError> {
        match f(self.mc) {
            Ok(Verdict::Pass(detail)) => {
                self.passed += 1;
                (self.out)(format!("ok   {name}: {detail}"));
                Ok(())
            }
            Ok(Verdict::Fail(why)) => {
                (self.out)(format!("FAIL {name}: {why}"));
                Err(SelftestError::Check { check: name, why })
            }
            Err(source) => {
                (self.out)(format!("FAIL {name}: {source}"));
                Err(SelftestError::Api {
                    check: name,
                    source,
                })
            }
        }
    }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    // The pattern repeats every 256 bytes.
    (0..=u8::MAX)
        .cycle()
        .take(len)
        .map(|i| i.wrapping_mul(13).wrapping_add(seed))
        .collect()
}

/// Selftest every check; returns how many passed.
pub fn run(
    mc: &MemoryChannel,
    iterations: u32,
    out: &mut dyn FnMut(String),
) -> Result<u32, SelftestError> {
    let me = mc.node_id().0;
    let nodes = mc.nodes();
    let mut barrier = Barrier::new(mc, KEY_BARRIER).map_err(during("barrier"))?;
    let mut sync = |check: &'static str| barrier.wait(T).map_err(during(check));
    let mut r = Selftest { mc, passed: 0, out };

    r.check("host list", |mc| {
        let h = mc.hosts();
        Ok(
            if u32::try_from(h.members.len()) == Ok(nodes) && h.members.contains(&mc.node_id()) {
                Verdict::Pass(format!("{} members, epoch {}", h.members.len(), h.epoch))
            } else {
                Verdict::Fail(format!("members {:?} of {nodes}", h.members))
            },
        )
    })?;

    // Regions by key: every node asks for the same key and gets the same region.
    let id = mc
        .region_alloc(KEY_COHERENT, 16 << 10, true)
        .map_err(during("region by key"))?;
    sync("region by key")?;
    r.check("region by key", |mc| {
        let found = mc.region_lookup(KEY_COHERENT)?;
        Ok(if found == id {
            Verdict::Pass(format!(
                "key {KEY_COHERENT:#x} is region {id} on every node"
            ))
        } else {
            Verdict::Fail(format!("lookup gave {found}, alloc gave {id}"))
        })
    })?;

    // Broadcast and coherent late attach: node 0 writes before anyone attaches
    // for receive; every node then attaches and sees the data.
    let data = pattern(16 << 10, 7);
    if me == 0 {
        let tx = mc
            .attach_transmit(id, Sharing::Shared, false)
            .map_err(during("broadcast"))?;
        tx.write(0, &data).map_err(during("broadcast"))?;
    }
    sync("broadcast")?;
    r.check("broadcast + coherent late attach", |mc| {
        let rx = mc.attach_receive(id, Sharing::Shared, false)?;
        let got = rx.to_vec(0, data.len())?;
        Ok(if got == data {
            Verdict::Pass(
                "16 KiB written by node 0 before any receive attach, read on every node".into(),
            )
        } else {
            Verdict::Fail("contents differ".into())
        })
    })?;

    // Loopback on an ordinary region: receivers attach first (no coherence), then
    // node 0 writes with loopback and node 1 (if any) without.
    let lid = mc
        .region_alloc(KEY_LOOP, 8192, false)
        .map_err(during("loopback"))?;
    let lrx = mc
        .attach_receive(lid, Sharing::Shared, false)
        .map_err(during("loopback"))?;
    sync("loopback")?;
    let with_lb = pattern(64, 1);
    let without_lb = pattern(64, 2);
    if me == 0 {
        let tx = mc
            .attach_transmit(lid, Sharing::Shared, true)
            .map_err(during("loopback"))?;
        tx.write(0, &with_lb).map_err(during("loopback"))?;
    }
    if me == 1 {
        let tx = mc
            .attach_transmit(lid, Sharing::Shared, false)
            .map_err(during("loopback"))?;
        tx.write(4096, &without_lb).map_err(during("loopback"))?;
    }
    sync("loopback")?;
    r.check("loopback", |_| {
        let a = lrx.to_vec(0, 64)?;
        let b = lrx.to_vec(4096, 64)?;
        let want_b = if me == 1 {
            vec![0u8; 64]
        } else {
            without_lb.clone()
        };
        Ok(if a != with_lb {
            Verdict::Fail("node 0's write (with loopback) is missing".into())
        } else if nodes > 1 && b != want_b {
            Verdict::Fail(if me == 1 {
                "node 1 saw its own write without loopback".into()
            } else {
                "node 1's write is missing".into()
            })
        } else {
            Verdict::Pass("a write with loopback reaches its writer, one without does not".into())
        })
    })?;
    drop(lrx);

    // Point-to-point (Memory Channel 2): node 0 writes to the last node only;
    // every node has the region mapped for receive.
    let target = nodes - 1;
    let pid = mc
        .region_alloc(KEY_P2P, 8192, false)
        .map_err(during("point-to-point"))?;
    let prx = mc
        .attach_receive(pid, Sharing::Shared, false)
        .map_err(during("point-to-point"))?;
    sync("point-to-point")?;
    let p2p = pattern(256, 9);
    if me == 0 && nodes > 1 {
        let tx = mc
            .attach_transmit_to(
                pid,
                Sharing::Shared,
                firmware_model::NodeId(u8::try_from(target).expect("at most 64 nodes")),
            )
            .map_err(during("point-to-point"))?;
        tx.write(0, &p2p).map_err(during("point-to-point"))?;
    }
    sync("point-to-point")?;
    r.check("point-to-point", |_| {
        let got = prx.to_vec(0, 256)?;
        let want = if u32::from(me) == target && nodes > 1 {
            p2p.clone()
        } else {
            vec![0u8; 256]
        };
        Ok(if got == want {
            Verdict::Pass(format!(
                "node 0 -> node {target} only ({})",
                if got == p2p {
                    "received here"
                } else {
                    "nothing here"
                }
            ))
        } else {
            Verdict::Fail(format!(
                "node {me} {}",
                if got == p2p {
                    "received a write meant for another node"
                } else {
                    "missed the write"
                }
            ))
        })
    })?;
    drop(prx);

    // A cluster spinlock protects a shared counter in a coherent region.
    let cid = mc
        .region_alloc(KEY_COUNTER, 8, true)
        .map_err(during("spinlock"))?;
    let ctx = mc
        .attach_transmit(cid, Sharing::Shared, true)
        .map_err(during("spinlock"))?;
    let crx = mc
        .attach_receive(cid, Sharing::Shared, false)
        .map_err(during("spinlock"))?;
    let locks = mc
        .lock_alloc(KEY_LOCK, 1, false, true)
        .map_err(during("spinlock"))?;
    if locks.holds(0) {
        // This node created the set and holds lock 0: initialise, then let others in.
        ctx.write_u64(0, 0).map_err(during("spinlock"))?;
        locks.release(0).map_err(during("spinlock"))?;
    }
    sync("spinlock")?;
    r.check("spinlock mutual exclusion", |_| {
        for _ in 0..iterations {
            locks.acquire(0)?;
            let v = crx.load_u64(0)?;
            ctx.write_u64(0, v + 1)?;
            locks.release(0)?;
        }
        Ok(Verdict::Pass(format!(
            "{iterations} increments under the lock"
        )))
    })?;
    sync("spinlock")?;
    r.check("shared counter adds up", |_| {
        let v = crx.load_u64(0)?;
        let want = u64::from(iterations) * u64::from(nodes);
        Ok(if v == want {
            Verdict::Pass(format!("{v} = {iterations} x {nodes}"))
        } else {
            Verdict::Fail(format!("counter is {v}, expected {want}"))
        })
    })?;

    // Save count, write, check (seed 004, Error Management).
    let eid = mc
        .region_alloc(KEY_ERR, 4096, true)
        .map_err(during("error check"))?;
    r.check("save count, write, check", |mc| {
        let tx = mc.attach_transmit(eid, Sharing::Shared, false)?;
        let saved = mc.error_count();
        tx.write(0, &pattern(4096, me))?;
        let c = mc.check_errors()?;
        Ok(
            if c.count == saved && c.all_healthy(mc.registers().members) {
                Verdict::Pass(format!(
                    "error count {saved} before and after, every adapter healthy"
                ))
            } else {
                Verdict::Fail(format!(
                    "count {saved} -> {}, statuses {:?}",
                    c.count, c.statuses
                ))
            },
        )
    })?;

    r.check("misuse is refused", |mc| {
        let mut refused = Vec::new();
        match mc.region_lookup(0xdead_beef) {
            Err(McError::NoSuchRegion(RegionRef::Key(0xdead_beef))) => refused.push("unknown key"),
            other => {
                return Ok(Verdict::Fail(format!(
                    "attach of an unknown key gave {other:?}"
                )))
            }
        }
        match locks.release(0) {
            Err(McError::NotHeld { .. }) => refused.push("double release"),
            other => {
                return Ok(Verdict::Fail(format!(
                    "release of an unheld lock gave {other:?}"
                )))
            }
        }
        match ctx.write(8, &[0; 8]) {
            Err(McError::OutOfBounds { .. }) => refused.push("write past the region"),
            other => return Ok(Verdict::Fail(format!("out-of-bounds write gave {other:?}"))),
        }
        match mc.region_dealloc(cid) {
            Err(McError::Busy {
                conflict: Conflict::Attached { .. },
                ..
            }) => refused.push("dealloc while attached"),
            other => {
                return Ok(Verdict::Fail(format!(
                    "dealloc of an attached region gave {other:?}"
                )))
            }
        }
        Ok(Verdict::Pass(refused.join(", ")))
    })?;
    sync("end")?;
    Ok(r.passed)
}
