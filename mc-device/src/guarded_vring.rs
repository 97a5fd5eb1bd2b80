//! The vrings the vhost-user daemon keeps for each queue, with the
//! frontend's kick and call descriptors checked before they are used.
//!
//! vhost-user-backend reads a kick descriptor with a blocking 8-byte read, in
//! its vring worker, holding the vring's lock; the device writes a call
//! descriptor from the hub thread, holding the device lock. Both descriptors
//! come from the frontend, which could pass anything: a pipe that holds fewer
//! than 8 bytes, one eventfd as the kick of two queues (the first read empties
//! it, the second blocks), a full pipe or a saturated blocking eventfd as a
//! call. Any of these blocked a thread for good: the node's connection could
//! never be torn down (so the node was lost), or the hub stopped for every
//! node. So only eventfds are accepted (what vhost-user specifies), set
//! non-blocking, and a kick eventfd in semaphore mode (one write of 2^63 would
//! be as many wake-ups) is refused. A refused descriptor is not kept: that
//! queue just gets no kicks, or its driver no interrupts.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

use log::Level;
use vhost_user_backend::{VringRwLock, VringStateGuard, VringStateMutGuard, VringT};
use virtio_queue::Error as VirtQueError;
use vm_memory::GuestMemoryAtomic;

use crate::memory::Mem;

type Gm = GuestMemoryAtomic<Mem>;

/// A [`VringRwLock`] whose kick and call descriptors are checked.
#[derive(Clone)]
pub(crate) struct GuardedVring(pub(crate) VringRwLock);

/// Why a descriptor was not kept.
fn refusal(f: &File, kick: bool) -> Option<&'static str> {
    let fd = f.as_raw_fd();
    let link = std::fs::read_link(format!("/proc/self/fd/{fd}")).ok()?;
    if link.to_str() != Some("anon_inode:[eventfd]") {
        return Some("not an eventfd");
    }
    if kick {
        // Kernels that say so (6.5 and later): a semaphore eventfd hands out
        // its count one by one.
        let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).unwrap_or_default();
        if info
            .lines()
            .any(|l| l.split_whitespace().eq(["eventfd-semaphore:", "1"]))
        {
            return Some("an eventfd in semaphore mode");
        }
    }
    // SAFETY: F_GETFL/F_SETFL only change the status flags of a descriptor `f`
    // keeps open; no memory is involved.
    let ok = unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        flags >= 0 && libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) == 0
    };
    (!ok).then_some("cannot be made non-blocking")
}

/// `file` if it may serve as a kick (`kick`) or call descriptor.
fn checked(file: Option<File>, kick: bool) -> Option<File> {
    let f = file?;
    match refusal(&f, kick) {
        None => Some(f),
        Some(why) => {
            // The frontend's own queue loses its kicks or interrupts, nobody
            // else is affected: not worth a line at the default level.
            crate::guest_log::unattributed(
                Level::Debug,
                format_args!(
                    "{} descriptor refused: {why}",
                    if kick { "kick" } else { "call" }
                ),
            );
            None
        }
    }
}

impl<'a> VringStateGuard<'a, Gm> for GuardedVring {
    type G = <VringRwLock as VringStateGuard<'a, Gm>>::G;
}

impl<'a> VringStateMutGuard<'a, Gm> for GuardedVring {
    type G = <VringRwLock as VringStateMutGuard<'a, Gm>>::G;
}

impl VringT<Gm> for GuardedVring {
    fn new(mem: Gm, max_queue_size: u16) -> Result<Self, VirtQueError> {
        VringRwLock::new(mem, max_queue_size).map(GuardedVring)
    }

    fn get_ref(&self) -> <Self as VringStateGuard<'_, Gm>>::G {
        self.0.get_ref()
    }

    fn get_mut(&self) -> <Self as VringStateMutGuard<'_, Gm>>::G {
        self.0.get_mut()
    }

    fn add_used(&self, desc_index: u16, len: u32) -> Result<(), VirtQueError> {
        self.0.add_used(desc_index, len)
    }

    fn signal_used_queue(&self) -> io::Result<()> {
        self.0.signal_used_queue()
    }

    fn enable_notification(&self) -> Result<bool, VirtQueError> {
        self.0.enable_notification()
    }

    fn disable_notification(&self) -> Result<(), VirtQueError> {
        self.0.disable_notification()
    }

    fn needs_notification(&self) -> Result<bool, VirtQueError> {
        self.0.needs_notification()
    }

    fn set_enabled(&self, enabled: bool) {
        self.0.set_enabled(enabled)
    }

    fn set_queue_info(
        &self,
        desc_table: u64,
        avail_ring: u64,
        used_ring: u64,
    ) -> Result<(), VirtQueError> {
        self.0.set_queue_info(desc_table, avail_ring, used_ring)
    }

    fn queue_next_avail(&self) -> u16 {
        self.0.queue_next_avail()
    }

    fn set_queue_next_avail(&self, base: u16) {
        self.0.set_queue_next_avail(base)
    }

    fn set_queue_next_used(&self, idx: u16) {
        self.0.set_queue_next_used(idx)
    }

    fn queue_used_idx(&self) -> Result<u16, VirtQueError> {
        self.0.queue_used_idx()
    }

    fn set_queue_size(&self, num: u16) {
        self.0.set_queue_size(num)
    }

    fn set_queue_event_idx(&self, enabled: bool) {
        self.0.set_queue_event_idx(enabled)
    }

    fn set_queue_ready(&self, ready: bool) {
        self.0.set_queue_ready(ready)
    }

    fn set_kick(&self, file: Option<File>) {
        self.0.set_kick(checked(file, true))
    }

    /// A kick with nothing to read (a descriptor shared between queues, whose
    /// count another queue's read took) is a spurious wake-up, not an error.
    fn read_kick(&self) -> io::Result<bool> {
        match self.0.read_kick() {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(self.0.get_ref().is_enabled()),
            r => r,
        }
    }

    fn set_call(&self, file: Option<File>) {
        self.0.set_call(checked(file, false))
    }

    fn set_err(&self, file: Option<File>) {
        self.0.set_err(file)
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::FromRawFd;

    use vm_memory::GuestMemoryMmap;
    use vmm_sys_util::eventfd::EventFd;

    use super::*;

    fn vring() -> GuardedVring {
        GuardedVring::new(GuestMemoryAtomic::new(GuestMemoryMmap::new()), 16).unwrap()
    }

    /// A descriptor of the same eventfd, as the frontend's message carries it.
    fn file_of(e: &EventFd) -> File {
        // SAFETY: dup of a descriptor `e` holds open; the copy is owned here.
        unsafe { File::from_raw_fd(libc::dup(e.as_raw_fd())) }
    }

    #[test]
    fn a_kick_shared_between_queues_never_blocks_its_reader() {
        // Blocking, as a hostile frontend would pass it.
        let kick = EventFd::new(0).unwrap();
        let (a, b) = (vring(), vring());
        a.set_kick(Some(file_of(&kick)));
        b.set_kick(Some(file_of(&kick)));
        kick.write(1).unwrap();
        a.read_kick().unwrap();
        // The count is gone: this read would have blocked for good.
        b.read_kick().unwrap();
    }

    #[test]
    fn only_eventfds_are_kept_as_kicks_and_calls() {
        let v = vring();
        let (r, w) = {
            let mut fds = [0; 2];
            // SAFETY: pipe writes two descriptors into `fds`.
            assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
            // SAFETY: both are fresh descriptors owned by nothing else.
            unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) }
        };
        v.set_kick(Some(r));
        assert!(v.get_ref().get_kick().is_none());
        v.set_call(Some(w));
        assert!(v.get_ref().get_call().is_none());
        let sem = EventFd::new(libc::EFD_SEMAPHORE).unwrap();
        v.set_kick(Some(file_of(&sem)));
        let info =
            std::fs::read_to_string(format!("/proc/self/fdinfo/{}", sem.as_raw_fd())).unwrap();
        if info.contains("eventfd-semaphore") {
            assert!(
                v.get_ref().get_kick().is_none(),
                "a semaphore kick was kept"
            );
        }
        let good = EventFd::new(0).unwrap();
        v.set_call(Some(file_of(&good)));
        assert!(v.get_ref().get_call().is_some());
        // A saturated call never blocks its writer.
        good.write(u64::MAX - 1).unwrap();
        let e = v.signal_used_queue().unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
    }
}
