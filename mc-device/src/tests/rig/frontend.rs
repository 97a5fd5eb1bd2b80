//! A vhost-user frontend that sends what it is told: the `vhost` crate's
//! frontend for well-formed requests, and raw messages (any code, body and
//! descriptors, replies read back so a sequence runs in step with the
//! backend) for what that frontend will not send.

use std::io::{self, Read, Write};
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use firmware_model::abi::{Registers, CONFIG_SIZE, NUM_QUEUES};
use vhost::vhost_user::message::{
    VhostUserConfigFlags, VhostUserHeaderFlag, VhostUserProtocolFeatures, VhostUserVirtioFeatures,
};
use vhost::vhost_user::{Frontend, VhostUserFrontend};
use vhost::{VhostBackend, VhostUserMemoryRegionInfo, VringConfigData};
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};
use vmm_sys_util::sock_ctrl_msg::ScmSocket;

use super::{GuestRam, SplitRing};

/// VIRTIO_F_VERSION_1 and VIRTIO_RING_F_EVENT_IDX.
pub const F_VERSION_1: u64 = 1 << 32;
pub const F_EVENT_IDX: u64 = 1 << 29;

/// vhost-user request codes for raw messages.
pub mod req {
    pub const GET_FEATURES: u32 = 1;
    pub const SET_FEATURES: u32 = 2;
    pub const SET_OWNER: u32 = 3;
    pub const SET_MEM_TABLE: u32 = 5;
    pub const SET_VRING_NUM: u32 = 8;
    pub const SET_VRING_ADDR: u32 = 9;
    pub const SET_VRING_BASE: u32 = 10;
    pub const GET_VRING_BASE: u32 = 11;
    pub const SET_VRING_KICK: u32 = 12;
    pub const SET_VRING_CALL: u32 = 13;
    pub const GET_PROTOCOL_FEATURES: u32 = 15;
    pub const SET_PROTOCOL_FEATURES: u32 = 16;
    pub const SET_VRING_ENABLE: u32 = 18;
    pub const GET_CONFIG: u32 = 24;
    pub const SET_CONFIG: u32 = 25;
}

/// Requests the backend answers (without REPLY_ACK, which raw messages
/// never ask for).
fn has_reply(code: u32) -> bool {
    matches!(
        code,
        req::GET_FEATURES | req::GET_PROTOCOL_FEATURES | req::GET_VRING_BASE | req::GET_CONFIG
    )
}

/// A vhost-user frontend that sends what it is told.
pub struct Hostile {
    pub fe: Frontend,
    kicks: Vec<EventFd>,
    calls: Vec<EventFd>,
    /// The same connection, for raw messages.
    raw: UnixStream,
    /// Replies the backend owes to raw messages.
    owed: usize,
    /// The backend still serves this connection (it ends one on any
    /// request it refuses).
    open: bool,
}

impl Hostile {
    /// Connect to `path`; every request asks for an acknowledgement (once
    /// REPLY_ACK is negotiated), so a refusal shows up as an error.
    /// A backend that stops answering shows as an error after 10 s.
    pub fn connect(path: &Path) -> vhost::Result<Hostile> {
        let sock = UnixStream::connect(path).map_err(|e| {
            vhost::Error::VhostUserProtocol(vhost::vhost_user::Error::SocketConnect(e))
        })?;
        for t in [
            sock.set_read_timeout(Some(Duration::from_secs(10))),
            sock.set_write_timeout(Some(Duration::from_secs(10))),
        ] {
            t.map_err(|e| {
                vhost::Error::VhostUserProtocol(vhost::vhost_user::Error::SocketError(e))
            })?;
        }
        let raw = sock.try_clone().map_err(|e| {
            vhost::Error::VhostUserProtocol(vhost::vhost_user::Error::SocketError(e))
        })?;
        let fe = Frontend::from_stream(sock, NUM_QUEUES as u64);
        fe.set_hdr_flags(VhostUserHeaderFlag::NEED_REPLY);
        let mk = || EventFd::new(EFD_NONBLOCK).expect("eventfd");
        Ok(Hostile {
            fe,
            kicks: (0..NUM_QUEUES).map(|_| mk()).collect(),
            calls: (0..NUM_QUEUES).map(|_| mk()).collect(),
            raw,
            owed: 0,
            open: true,
        })
    }

    /// What QEMU does before the memory table: features, protocol features
    /// (MQ, CONFIG, REPLY_ACK), owner.
    pub fn handshake(&mut self, event_idx: bool) -> vhost::Result<()> {
        let offered = self.fe.get_features()?;
        let pf = self.fe.get_protocol_features()?;
        self.fe.set_protocol_features(
            pf & (VhostUserProtocolFeatures::MQ
                | VhostUserProtocolFeatures::CONFIG
                | VhostUserProtocolFeatures::REPLY_ACK),
        )?;
        self.fe.set_owner()?;
        let want = F_VERSION_1
            | VhostUserVirtioFeatures::PROTOCOL_FEATURES.bits()
            | if event_idx { F_EVENT_IDX } else { 0 };
        self.fe.set_features(offered & want)
    }

    pub fn set_mem_table(&self, regions: &[VhostUserMemoryRegionInfo]) -> vhost::Result<()> {
        self.fe.set_mem_table(regions).map(|_| ())
    }

    /// Set queue `q` up on `ring` (size, base, addresses, kick, call, enable),
    /// as QEMU's vhost_virtqueue_start does.
    pub fn setup_queue(&mut self, q: usize, ring: &SplitRing, ram: &GuestRam) -> vhost::Result<()> {
        self.setup_queue_at(
            q,
            ring.size,
            [
                ram.host_addr(ring.desc),
                ram.host_addr(ring.avail),
                ram.host_addr(ring.used),
            ],
        )
    }

    /// Set queue `q` up with ring addresses given as frontend addresses.
    pub fn setup_queue_at(&mut self, q: usize, size: u16, addrs: [u64; 3]) -> vhost::Result<()> {
        self.fe.set_vring_num(q, size)?;
        self.fe.set_vring_base(q, 0)?;
        self.fe.set_vring_addr(
            q,
            &VringConfigData {
                queue_max_size: size,
                queue_size: size,
                flags: 0,
                desc_table_addr: addrs[0],
                used_ring_addr: addrs[2],
                avail_ring_addr: addrs[1],
                log_addr: None,
            },
        )?;
        self.fe.set_vring_kick(q, &self.kicks[q])?;
        self.fe.set_vring_call(q, &self.calls[q])?;
        self.fe.set_vring_enable(q, true)
    }

    /// Stop queue `q` (VHOST_USER_GET_VRING_BASE), as QEMU does before a reset.
    pub fn stop_queue(&self, q: usize) -> vhost::Result<u32> {
        self.fe.get_vring_base(q)
    }

    /// Give queue `q` any descriptor as its kick (`kick`) or call.
    pub fn set_fd(&mut self, q: usize, fd: RawFd, kick: bool) -> vhost::Result<()> {
        // SAFETY: a duplicate of `fd`, owned by the wrapper for the message
        // and closed with it.
        let e = unsafe { EventFd::from_raw_fd(libc::dup(fd)) };
        if kick {
            self.fe.set_vring_kick(q, &e)
        } else {
            self.fe.set_vring_call(q, &e)
        }
    }

    pub fn kick(&self, q: usize) {
        self.kicks[q].write(1).expect("kick");
    }

    /// Whether the backend still serves this connection, as far as raw
    /// messages have seen.
    pub fn is_open(&self) -> bool {
        self.open
    }

    /// Send raw request `code` with `body` and `fds`, then wait until the
    /// backend has handled it (a GET_FEATURES behind it is answered).
    /// Returns whether the connection is still open.
    pub fn raw(&mut self, code: u32, body: &[u8], fds: &[RawFd]) -> bool {
        if !self.open {
            return false;
        }
        self.open = self.send_raw(code, body, fds)
            && self.send_raw(req::GET_FEATURES, &[], &[])
            && self.drain_replies();
        self.open
    }

    fn send_raw(&mut self, code: u32, body: &[u8], fds: &[RawFd]) -> bool {
        let sent = raw_message(&self.raw, code, body, fds).is_ok();
        if sent && has_reply(code) {
            self.owed += 1;
        }
        sent
    }

    /// Read every reply owed to raw messages.
    fn drain_replies(&mut self) -> bool {
        while self.owed > 0 {
            let mut hdr = [0u8; 12];
            if self.raw.read_exact(&mut hdr).is_err() {
                return false;
            }
            let size = u32::from_le_bytes([hdr[8], hdr[9], hdr[10], hdr[11]]) as usize;
            let mut body = vec![0u8; size.min(4096)];
            if size > 4096 || self.raw.read_exact(&mut body).is_err() {
                return false;
            }
            self.owed -= 1;
        }
        true
    }

    /// The register file (VHOST_USER_GET_CONFIG).
    pub fn registers(&mut self) -> vhost::Result<Registers> {
        let (_, bytes) = self.fe.get_config(
            0,
            firmware_model::saturating_u32(CONFIG_SIZE as u64),
            VhostUserConfigFlags::WRITABLE,
            &[0u8; CONFIG_SIZE],
        )?;
        Ok(Registers::from_bytes(&bytes).expect("a register file"))
    }
}

/// Send one raw vhost-user message (`code`, version-1 flags, `body`) with
/// `fds` attached: for what the `vhost` frontend refuses to send.
pub fn raw_message(s: &UnixStream, code: u32, body: &[u8], fds: &[RawFd]) -> io::Result<()> {
    let len = u32::try_from(body.len()).map_err(io::Error::other)?;
    let mut msg = Vec::with_capacity(12 + body.len());
    msg.extend_from_slice(&code.to_le_bytes());
    msg.extend_from_slice(&1u32.to_le_bytes());
    msg.extend_from_slice(&len.to_le_bytes());
    msg.extend_from_slice(body);
    if fds.is_empty() {
        let mut w = s;
        return w.write_all(&msg);
    }
    s.send_with_fds(&[&msg[..]], fds)
        .map(|_| ())
        .map_err(|e| io::Error::from_raw_os_error(e.errno()))
}
