//! What a node's Cashmere chooses, in one value: the variant (seed 000
//! Table I) and the switches that refine it. The protocol asks this value
//! (`Node::choices`); nothing copies a choice into a flag of its own.

use crate::config::Config;
use crate::variant::{CsmVariant, MessageDetection};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Choices {
    variant: CsmVariant,
    exclusive_mode: bool,
    incoming_diffs: bool,
    home_direct: bool,
    detection: MessageDetection,
}

impl Choices {
    pub(crate) fn new(cfg: &Config) -> Choices {
        Choices {
            variant: cfg.variant,
            exclusive_mode: cfg.exclusive_mode,
            // Incoming diffs update pages another thread of this node is
            // writing: with one thread there is none.
            incoming_diffs: cfg.incoming_diffs && cfg.threads > 1,
            home_direct: cfg.home_direct,
            detection: cfg.detection,
        }
    }

    /// Homes migrate to a writer (seed 000 s.2.3.2): the variant says.
    pub(crate) fn migration(self) -> bool {
        self.variant.migration()
    }

    /// CSM-ADB's broadcast buffers (seed 000 s.2.3.3).
    pub(crate) fn broadcast(self) -> bool {
        self.variant == CsmVariant::Adb
    }

    /// A page written by its home alone goes Exclusive.
    pub(crate) fn exclusive_mode(self) -> bool {
        self.exclusive_mode
    }

    /// Write-noticed pages with local writers are updated in place by
    /// incoming diffs (2L).
    pub(crate) fn incoming_diffs(self) -> bool {
        self.incoming_diffs
    }

    /// The home maps its master copy as its working copy
    /// (`Node::map_master`, seed 000 s.2.3.2).
    pub(crate) fn home_direct(self) -> bool {
        self.home_direct
    }

    /// Application threads answer requests when they poll or wait
    /// (`MessageDetection::Polling`).
    pub(crate) fn polling(self) -> bool {
        self.detection == MessageDetection::Polling
    }
}
