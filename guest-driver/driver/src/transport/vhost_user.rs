//! The virtual guest: a process that attaches to the backend's vhost-user
//! socket exactly as QEMU does (`vhost_user_backend_init`, `vhost_dev_init`,
//! `vhost_dev_start`), with its "guest RAM" in a memfd shared through
//! SET_MEM_TABLE.

use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use firmware_model::abi::{self, Registers, CONFIG_SIZE, NUM_QUEUES};
use log::{debug, info};
use vhost::vhost_user::message::{
    VhostUserConfigFlags, VhostUserHeaderFlag, VhostUserProtocolFeatures, VhostUserVirtioFeatures,
};
use vhost::vhost_user::{Frontend, VhostUserFrontend};
use vhost::{VhostBackend, VhostUserMemoryRegionInfo, VringConfigData};
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};

use super::error::TransportError;
use super::link::{check_queue, CallSignal, Doorbell, Transport, F_EVENT_IDX, F_VERSION_1};
use crate::dma::{DmaBacking, DmaRegion, MemfdMemory};
use crate::virtqueue::RingLayout;

/// How a virtual guest is set up.
#[derive(Clone, Debug)]
pub struct VhostUserOptions {
    /// Bytes of guest RAM (a memfd shared with the backend).
    pub ram_size: usize,
    /// Guest-physical address of the first byte of RAM. Not 0 by default, so
    /// that a confusion of offsets and GPAs shows up at once.
    pub gpa_base: u64,
    /// How long to wait for any answer from the backend. A backend serves one
    /// guest per node: a second guest on a busy node is accepted by the
    /// socket but never answered, and must say so rather than hang.
    pub answer_timeout: Duration,
}

impl Default for VhostUserOptions {
    fn default() -> Self {
        VhostUserOptions {
            ram_size: 64 << 20,
            gpa_base: 0x4000_0000,
            answer_timeout: Duration::from_secs(10),
        }
    }
}

/// A vhost-user frontend for one adapter.
pub struct VhostUserTransport {
    frontend: Frontend,
    memory: Arc<MemfdMemory>,
    dma: DmaRegion,
    features: u64,
    kicks: Vec<EventFd>,
    calls: Vec<EventFd>,
    configured: Vec<bool>,
    started: bool,
}

impl std::fmt::Debug for VhostUserTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VhostUserTransport")
            .field("dma", &self.dma)
            .field("features", &format_args!("{:#x}", self.features))
            .field("started", &self.started)
            .finish()
    }
}

fn vu(step: &'static str) -> impl FnOnce(vhost::Error) -> TransportError {
    move |source| TransportError::VhostUser { step, source }
}

impl VhostUserTransport {
    /// Connect to the adapter's socket and bring it up to the point where
    /// queues can be set up: features, protocol features, owner, register
    /// file check, memory table.
    pub fn connect(
        path: impl AsRef<Path>,
        opts: &VhostUserOptions,
    ) -> Result<VhostUserTransport, TransportError> {
        let path = path.as_ref();
        let memory = Arc::new(MemfdMemory::new(opts.ram_size, opts.gpa_base)?);
        let sock = UnixStream::connect(path).map_err(|source| TransportError::Io {
            what: "connecting to the adapter's socket",
            source,
        })?;
        probe(&sock, path, opts.answer_timeout)?;
        let mut fe = Frontend::from_stream(sock, NUM_QUEUES as u64);
        // Ask for an ack of every request (effective once REPLY_ACK is negotiated).
        fe.set_hdr_flags(VhostUserHeaderFlag::NEED_REPLY);

        // vhost_user_backend_init
        let offered = fe.get_features().map_err(vu("GET_FEATURES"))?;
        let protocol_bit = VhostUserVirtioFeatures::PROTOCOL_FEATURES.bits();
        for (bit, name) in [
            (F_VERSION_1, "VIRTIO_F_VERSION_1"),
            (F_EVENT_IDX, "VIRTIO_RING_F_EVENT_IDX"),
            (protocol_bit, "VHOST_USER_F_PROTOCOL_FEATURES"),
        ] {
            if offered & bit == 0 {
                return Err(TransportError::MissingFeature(name));
            }
        }
        let pf = fe
            .get_protocol_features()
            .map_err(vu("GET_PROTOCOL_FEATURES"))?;
        let need = VhostUserProtocolFeatures::MQ | VhostUserProtocolFeatures::CONFIG;
        if !pf.contains(need) {
            return Err(TransportError::MissingFeature(
                "the MQ and CONFIG protocol features",
            ));
        }
        fe.set_protocol_features(pf & (need | VhostUserProtocolFeatures::REPLY_ACK))
            .map_err(vu("SET_PROTOCOL_FEATURES"))?;
        let nq = fe.get_queue_num().map_err(vu("GET_QUEUE_NUM"))?;
        if nq < NUM_QUEUES as u64 {
            return Err(TransportError::QueueCount {
                have: nq,
                need: NUM_QUEUES,
            });
        }

        // vhost_dev_init
        fe.set_owner().map_err(vu("SET_OWNER"))?;

        // vhost_dev_start
        let features = offered & (F_VERSION_1 | F_EVENT_IDX | protocol_bit);
        fe.set_features(features).map_err(vu("SET_FEATURES"))?;
        let region = VhostUserMemoryRegionInfo {
            guest_phys_addr: memory.gpa(),
            memory_size: memory.len() as u64,
            userspace_addr: memory.mapping().as_ptr() as u64,
            mmap_offset: 0,
            mmap_handle: memory.fd(),
        };
        fe.set_mem_table(&[region]).map_err(vu("SET_MEM_TABLE"))?;

        let mut kicks = Vec::with_capacity(NUM_QUEUES);
        let mut calls = Vec::with_capacity(NUM_QUEUES);
        for _ in 0..NUM_QUEUES {
            let io = |what| move |source| TransportError::Io { what, source };
            kicks.push(EventFd::new(EFD_NONBLOCK).map_err(io("kick eventfd"))?);
            calls.push(EventFd::new(EFD_NONBLOCK).map_err(io("call eventfd"))?);
        }
        let dma = DmaRegion::new(memory.clone());
        let mut t = VhostUserTransport {
            frontend: fe,
            memory,
            dma,
            features,
            kicks,
            calls,
            configured: vec![false; NUM_QUEUES],
            started: false,
        };
        let regs = t.registers()?;
        info!(
            "connected to {}: node {} of {}, {} B pages, features {features:#x}",
            path.display(),
            regs.node_id,
            regs.nodes,
            regs.page_size
        );
        Ok(t)
    }

    /// The virtio features acked.
    pub fn features(&self) -> u64 {
        self.features
    }

    /// The guest RAM backing.
    pub fn memory(&self) -> &Arc<MemfdMemory> {
        &self.memory
    }

    /// The call eventfd of `queue` (the device writes it when it signals).
    pub fn call_fd(&self, queue: u16) -> Option<&EventFd> {
        self.calls.get(usize::from(queue))
    }

    /// QEMU's `vhost_dev_stop`: disable every ring and fetch its base. The
    /// backend then resets the adapter when the socket closes.
    pub fn stop(&mut self) -> Result<Vec<u32>, TransportError> {
        if !self.started {
            return Ok(Vec::new());
        }
        for q in 0..NUM_QUEUES {
            self.frontend
                .set_vring_enable(q, false)
                .map_err(vu("SET_VRING_ENABLE"))?;
        }
        let mut bases = Vec::with_capacity(NUM_QUEUES);
        for q in 0..NUM_QUEUES {
            bases.push(
                self.frontend
                    .get_vring_base(q)
                    .map_err(vu("GET_VRING_BASE"))?,
            );
        }
        self.started = false;
        Ok(bases)
    }
}

impl Transport for VhostUserTransport {
    fn registers(&mut self) -> Result<Registers, TransportError> {
        let (_, bytes) = self
            .frontend
            .get_config(
                0,
                u32::try_from(CONFIG_SIZE).expect("the register file is a few bytes"),
                VhostUserConfigFlags::WRITABLE,
                &[0u8; CONFIG_SIZE],
            )
            .map_err(vu("GET_CONFIG"))?;
        Registers::from_bytes(&bytes).ok_or(TransportError::BadRegisters)
    }

    fn dma(&self) -> &DmaRegion {
        &self.dma
    }

    /// The guest RAM is a memfd this transport created (zero-filled), and
    /// the device writes only where the driver points it.
    fn dma_zeroed(&self) -> bool {
        true
    }

    fn event_idx(&self) -> bool {
        self.features & F_EVENT_IDX != 0
    }

    fn max_queue_size(&self, _queue: u16) -> u16 {
        abi::MAX_QUEUE_SIZE
    }

    fn setup_queue(
        &mut self,
        queue: u16,
        size: u16,
        rings: &RingLayout,
    ) -> Result<(), TransportError> {
        let q = check_queue(queue, size, self.max_queue_size(queue))?;
        let fe = &mut self.frontend;
        fe.set_vring_num(q, size).map_err(vu("SET_VRING_NUM"))?;
        fe.set_vring_base(q, 0).map_err(vu("SET_VRING_BASE"))?;
        // vhost-user takes the frontend's virtual addresses here; the backend
        // translates them through the SET_MEM_TABLE table.
        let cfg = VringConfigData {
            queue_max_size: size,
            queue_size: size,
            flags: 0,
            desc_table_addr: rings.desc.host_addr(),
            used_ring_addr: rings.used.host_addr(),
            avail_ring_addr: rings.avail.host_addr(),
            log_addr: None,
        };
        fe.set_vring_addr(q, &cfg).map_err(vu("SET_VRING_ADDR"))?;
        fe.set_vring_kick(q, &self.kicks[q])
            .map_err(vu("SET_VRING_KICK"))?;
        fe.set_vring_call(q, &self.calls[q])
            .map_err(vu("SET_VRING_CALL"))?;
        self.configured[q] = true;
        debug!("queue {queue}: {size} entries, {rings}");
        Ok(())
    }

    fn start(&mut self) -> Result<(), TransportError> {
        if self.configured.iter().any(|c| !c) {
            return Err(TransportError::NotReady("every queue must be set up first"));
        }
        for q in 0..NUM_QUEUES {
            self.frontend
                .set_vring_enable(q, true)
                .map_err(vu("SET_VRING_ENABLE"))?;
        }
        self.started = true;
        Ok(())
    }

    fn notify(&self, queue: u16) -> Result<(), TransportError> {
        let kick = self
            .kicks
            .get(usize::from(queue))
            .ok_or(TransportError::NoSuchQueue(queue))?;
        kick.write(1).map_err(|source| TransportError::Io {
            what: "kick",
            source,
        })
    }

    fn doorbell(&self, queue: u16) -> Result<Arc<dyn Doorbell>, TransportError> {
        let kick = self
            .kicks
            .get(usize::from(queue))
            .ok_or(TransportError::NoSuchQueue(queue))?
            .try_clone()
            .map_err(|source| TransportError::Io {
                what: "kick (clone)",
                source,
            })?;
        Ok(Arc::new(KickDoorbell(kick)))
    }

    fn call_signal(&self, queue: u16) -> Result<Option<Arc<dyn CallSignal>>, TransportError> {
        let call = self
            .calls
            .get(usize::from(queue))
            .ok_or(TransportError::NoSuchQueue(queue))?
            .try_clone()
            .map_err(|source| TransportError::Io {
                what: "call (clone)",
                source,
            })?;
        Ok(Some(Arc::new(CallEventFd(call))))
    }
}

/// A queue's call eventfd: the backend writes it when it signals the queue
/// (`signal_used_queue`), as it would raise the guest's interrupt.
#[derive(Debug)]
struct CallEventFd(EventFd);

impl CallSignal for CallEventFd {
    fn wait(&self, timeout: Duration) -> Result<bool, TransportError> {
        let mut pfd = libc::pollfd {
            fd: self.0.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ts = libc::timespec {
            tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: one valid pollfd and a valid timespec, owned by this
        // frame, for the call's duration; no signal mask change.
        let n = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                return Ok(false);
            }
            return Err(TransportError::Io {
                what: "poll (call eventfd)",
                source: e,
            });
        }
        if n == 0 {
            return Ok(false);
        }
        // Non-blocking (EFD_NONBLOCK): consume what was signalled; another
        // reader may have taken it first.
        match self.0.read() {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(false),
            Err(source) => Err(TransportError::Io {
                what: "read (call eventfd)",
                source,
            }),
        }
    }

    fn raise(&self) -> Result<(), TransportError> {
        self.0.write(1).map_err(|source| TransportError::Io {
            what: "write (call eventfd)",
            source,
        })
    }
}

/// A queue's kick eventfd: writing it is the vhost-user notification.
#[derive(Debug)]
struct KickDoorbell(EventFd);

impl Doorbell for KickDoorbell {
    fn ring(&self) -> Result<(), TransportError> {
        self.0.write(1).map_err(|source| TransportError::Io {
            what: "kick",
            source,
        })
    }
}

/// Ask the backend for its features by hand, with a timeout, before the
/// vhost crate's frontend takes the socket (its reads wait forever). A
/// backend serves one guest per node: a second guest's connection is
/// accepted by the kernel but never answered.
fn probe(sock: &UnixStream, path: &Path, timeout: Duration) -> Result<(), TransportError> {
    use std::io::{Read, Write};
    // VHOST_USER_GET_FEATURES (1), version 1 flags, no payload.
    const GET_FEATURES: u32 = 1;
    let mut msg = [0u8; 12];
    msg[..4].copy_from_slice(&GET_FEATURES.to_le_bytes());
    msg[4..8].copy_from_slice(&1u32.to_le_bytes());
    let io = |what: &'static str| move |source| TransportError::Io { what, source };
    sock.set_read_timeout(Some(timeout))
        .map_err(io("setting the socket's timeout"))?;
    (&*sock)
        .write_all(&msg)
        .map_err(io("asking the backend for its features"))?;
    // The reply: a 12-byte header and the 8-byte feature mask.
    let mut reply = [0u8; 20];
    match (&*sock).read_exact(&mut reply) {
        Ok(()) => {}
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            return Err(TransportError::NoAnswer {
                path: path.to_path_buf(),
                after: timeout,
            })
        }
        Err(e) => return Err(io("reading the backend's features")(e)),
    }
    sock.set_read_timeout(None)
        .map_err(io("clearing the socket's timeout"))
}
