//! Which protocol runs (seed 000 Table I: how data, metadata and
//! synchronisation move between nodes), on how many levels (seed 000
//! s.3.2), and how a node notices requests (seed 000 s.2.1).

/// The protocol variant (seed 000 Table I): how data, metadata and
/// synchronisation move between nodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CsmVariant {
    /// CSM-DMS: data, metadata and synchronisation by Memory Channel remote
    /// writes (seed 000 s.2.3.1.1).
    #[default]
    Dms,
    /// CSM-MS: shared data outside Memory Channel space, diffs as messages
    /// with acknowledgements; metadata and synchronisation by Memory Channel
    /// (seed 000 s.2.3.1.2).
    Ms,
    /// CSM-MS-Mg: CSM-MS with home migration to a writer when no thread at
    /// the home is writing the page (seed 000 s.2.3.2).
    MsMg,
    /// CSM-ADB (2L): CSM-MS-Mg, and pages with several consumers are
    /// broadcast through globally received buffers (seed 000 s.2.3.3).
    Adb,
    /// CSM-S: data as CSM-MS, and metadata by explicit messages too
    /// (directory changes to the page's home, piggybacked where they can
    /// be; write notices as messages); synchronisation by Memory Channel
    /// (seed 000 s.2.3.1.3).
    S,
    /// CSM-None: CSM-S, and synchronisation by explicit messages too
    /// (queue locks with a manager per lock, barriers and flags by
    /// messages): no Memory Channel feature beyond low-latency messages
    /// (seed 000 s.2.3.1.4, seed 002 s.6.1).
    None,
    /// CSM-None-Mg: CSM-None with home migration as CSM-MS-Mg's (seed 000
    /// s.2.3.2).
    NoneMg,
}

impl CsmVariant {
    /// Every variant, in Table I's order.
    pub const ALL: [CsmVariant; 7] = [
        CsmVariant::Dms,
        CsmVariant::Ms,
        CsmVariant::MsMg,
        CsmVariant::Adb,
        CsmVariant::S,
        CsmVariant::None,
        CsmVariant::NoneMg,
    ];

    /// Every variant, in Table I's order.
    pub fn all() -> &'static [CsmVariant] {
        &Self::ALL
    }

    /// Its name on the command line and in records (`dms`, `ms-mg`, ...).
    pub fn name(self) -> &'static str {
        match self {
            CsmVariant::Dms => "dms",
            CsmVariant::Ms => "ms",
            CsmVariant::MsMg => "ms-mg",
            CsmVariant::Adb => "adb",
            CsmVariant::S => "s",
            CsmVariant::None => "none",
            CsmVariant::NoneMg => "none-mg",
        }
    }

    /// One line on what it is, for a command line's help.
    pub fn about(self) -> &'static str {
        match self {
            CsmVariant::Dms => {
                "CSM-DMS: data, metadata and synchronisation by Memory Channel remote writes"
            }
            CsmVariant::Ms => "CSM-MS: diffs as messages, data outside Memory Channel space",
            CsmVariant::MsMg => "CSM-MS-Mg: CSM-MS with home migration",
            CsmVariant::Adb => "CSM-ADB: CSM-MS-Mg with adaptive broadcast of widely read pages",
            CsmVariant::S => "CSM-S: CSM-MS with the directory and write notices by messages",
            CsmVariant::None => "CSM-None: CSM-S with locks, barriers and flags by messages",
            CsmVariant::NoneMg => "CSM-None-Mg: CSM-None with home migration",
        }
    }

    /// Shared data outside Memory Channel space, diffs as messages.
    pub fn data_by_messages(self) -> bool {
        !matches!(self, CsmVariant::Dms)
    }

    /// Directory and write notices by explicit messages.
    pub(crate) fn metadata_by_messages(self) -> bool {
        matches!(self, CsmVariant::S | CsmVariant::None | CsmVariant::NoneMg)
    }

    /// Locks, barriers and flags by explicit messages (seed 000 Table II's
    /// "MC Messages" column) rather than Memory Channel.
    pub fn sync_by_messages(self) -> bool {
        matches!(self, CsmVariant::None | CsmVariant::NoneMg)
    }

    /// Homes migrate to a writer (seed 000 s.2.3.2).
    pub(crate) fn migration(self) -> bool {
        matches!(
            self,
            CsmVariant::MsMg | CsmVariant::Adb | CsmVariant::NoneMg
        )
    }
}

impl std::fmt::Display for CsmVariant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is no variant's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no protocol variant is named {given:?} (dms, ms, ms-mg, adb, s, none, none-mg)")]
pub struct UnknownVariant {
    pub given: String,
}

impl std::str::FromStr for CsmVariant {
    type Err = UnknownVariant;

    /// A variant by its [`CsmVariant::name`].
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CsmVariant::ALL
            .into_iter()
            .find(|v| v.name() == s)
            .ok_or_else(|| UnknownVariant {
                given: s.to_string(),
            })
    }
}

/// One or two levels (seed 000 s.3.2, Fig. 1): whether the threads of a
/// machine share its frames and protocol state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Levels {
    /// CSM-1L: every application thread is a protocol node of its own (its
    /// own frames, twins, directory entries, mailbox and home region), and
    /// the threads of a machine share only its adapter ([`Csm::start_one_level`]).
    One,
    /// CSM-2L: the threads of a machine share its frames and protocol state
    /// (hardware coherence inside the node); the machine is the protocol
    /// node.
    #[default]
    Two,
}

/// How a node notices the requests of other nodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MessageDetection {
    /// Application threads poll (seed 000 s.2.1: "each processor ... poll[s]
    /// for messages on every loop back edge"): in the programs' long loops
    /// ([`Csm::poll`]) and while they wait at barriers and flags. The
    /// protocol thread, woken by the adapter's interrupt-on-receive event,
    /// answers what nobody polled for (a node whose threads are all inside
    /// a long stretch without a poll).
    #[default]
    Polling,
    /// Only the protocol thread answers, woken by the interrupt (seed 004's
    /// interrupt-on-receive regions); `Csm::poll` does nothing and waiting
    /// threads do not answer (a thread waiting while it holds the
    /// protocol state still does: nobody else could).
    Interrupt,
}

impl MessageDetection {
    /// Both, polling first.
    pub const ALL: [MessageDetection; 2] = [MessageDetection::Polling, MessageDetection::Interrupt];

    /// Its name on the command line (`--detection`), in `CSM_DETECTION`
    /// and in records: `poll` or `interrupt`.
    pub fn name(self) -> &'static str {
        match self {
            MessageDetection::Polling => "poll",
            MessageDetection::Interrupt => "interrupt",
        }
    }

    /// What it is, in a line (the command line's help).
    pub fn about(self) -> &'static str {
        match self {
            MessageDetection::Polling => {
                "application threads poll at their loops' back edges and while they wait; \
                 the protocol thread answers what nobody polled for"
            }
            MessageDetection::Interrupt => {
                "only the protocol thread answers, woken by the adapter's event"
            }
        }
    }
}

impl std::fmt::Display for MessageDetection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is no way of detecting requests.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no request detection is named {given:?} (poll, interrupt)")]
pub struct UnknownDetection {
    pub given: String,
}

impl std::str::FromStr for MessageDetection {
    type Err = UnknownDetection;

    /// A detection by its [`MessageDetection::name`], in any case.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        MessageDetection::ALL
            .into_iter()
            .find(|d| d.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownDetection {
                given: s.to_string(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_parses_from_its_name() {
        for v in CsmVariant::ALL {
            assert_eq!(v.name().parse::<CsmVariant>(), Ok(v));
            assert_eq!(v.to_string(), v.name());
        }
        let e = "msmg".parse::<CsmVariant>().unwrap_err();
        assert!(e.to_string().contains("ms-mg"), "{e}");
    }

    #[test]
    fn every_detection_parses_from_its_name_in_any_case() {
        for d in MessageDetection::ALL {
            assert_eq!(d.name().parse::<MessageDetection>(), Ok(d));
            assert_eq!(d.name().to_uppercase().parse::<MessageDetection>(), Ok(d));
            assert_eq!(d.to_string(), d.name());
        }
        assert_eq!(MessageDetection::default().name(), "poll");
        assert!("polling".parse::<MessageDetection>().is_err());
    }
}
