//! Adapter error status and the word an ACK page reports for each adapter.
//!
//! Seed 004 ("Error Management"): the hardware detects errors and the kernel keeps a
//! cluster-wide error count; a write to an ACK page makes every adapter write its
//! error status to successive locations of the writer's receive mapping, so that
//! "save count, write, check" detects any error in between.

/// One adapter's error state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct AdapterErrorStatus {
    /// Network errors this adapter detected: packets discarded for a bad CRC and
    /// link losses. Monotone while the adapter is up.
    pub network_errors: u32,
    /// Stores this adapter refused (page not enabled for transmit, address out of
    /// range): the local program's fault, never counted cluster-wide.
    pub protection_errors: u32,
    /// The adapter is a cluster member (not crashed).
    pub online: bool,
    /// The adapter's link to the hub is up.
    pub link_up: bool,
}

/// Bit layout of the status word (see docs/device.md).
pub mod word {
    /// Low 16 bits: network error count, modulo 65536.
    pub const NETWORK_ERRORS_MASK: u32 = 0xffff;
    /// Bits 16..24: protection error count, modulo 256.
    pub const PROTECTION_SHIFT: u32 = 16;
    pub const PROTECTION_MASK: u32 = 0xff << PROTECTION_SHIFT;
    /// Bit 30: link up.
    pub const LINK_UP: u32 = 1 << 30;
    /// Bit 31: adapter online (cluster member).
    pub const ONLINE: u32 = 1 << 31;
}

impl AdapterErrorStatus {
    /// The 32-bit word an ACK page receives for this adapter.
    pub fn to_word(&self) -> u32 {
        let mut w = self.network_errors & word::NETWORK_ERRORS_MASK;
        w |= (self.protection_errors << word::PROTECTION_SHIFT) & word::PROTECTION_MASK;
        if self.link_up {
            w |= word::LINK_UP;
        }
        if self.online {
            w |= word::ONLINE;
        }
        w
    }

    /// Decode a status word (counts come back modulo their field widths).
    pub fn from_word(w: u32) -> Self {
        AdapterErrorStatus {
            network_errors: w & word::NETWORK_ERRORS_MASK,
            protection_errors: (w & word::PROTECTION_MASK) >> word::PROTECTION_SHIFT,
            online: w & word::ONLINE != 0,
            link_up: w & word::LINK_UP != 0,
        }
    }

    /// Healthy: online, link up.
    pub fn is_healthy(&self) -> bool {
        self.online && self.link_up
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_round_trips_within_field_widths() {
        let s = AdapterErrorStatus {
            network_errors: 70_000,
            protection_errors: 3,
            online: true,
            link_up: false,
        };
        let back = AdapterErrorStatus::from_word(s.to_word());
        assert_eq!(back.network_errors, 70_000 % 65_536);
        assert_eq!(back.protection_errors, 3);
        assert!(back.online && !back.link_up);
    }
}
