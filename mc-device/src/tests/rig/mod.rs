//! Test rigs, one of each kind, shared by this crate's tests, the fuzz
//! targets (`../fuzz`) and the integration tests (feature `test-rig`):
//!
//! - [`GuestRam`]: guest RAM as a frontend shares it (a memfd, sealable,
//!   sealed or not, or a plain file), mapped here through `vm-memory` so a
//!   test reads and writes it as the guest would, and tables that lie about it.
//! - [`SplitRing`]: the driver's side of a split virtqueue in that RAM, over
//!   `virtio_queue::mock` (descriptor table, available and used rings), with
//!   the liberties a hostile driver takes: indices that jump, descriptors that
//!   loop, heads anywhere.
//! - [`Hostile`]: a vhost-user frontend that sends what it is told, over the
//!   `vhost` crate's frontend, and raw messages (any code, body and
//!   descriptors) for what that frontend will not send.

pub mod frontend;
mod ram;
mod ring;

pub use frontend::{raw_message, Hostile, F_EVENT_IDX, F_VERSION_1};
pub use ram::{Backing, GuestRam};
pub use ring::{RingMemory, SplitRing};
