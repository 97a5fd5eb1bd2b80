//! Which Cashmere protocol variant a run uses (seed 000 Table I), as
//! `mc-guest csm --variant` names it and records carry it. Only CSM-DMS
//! exists today; the other variants (MS, S, None, MS-Mg, None-Mg, ADB) are
//! added here as Cashmere grows them.

/// A protocol variant of Cashmere.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ProtocolVariant {
    /// CSM-DMS: data, metadata and synchronisation by Memory Channel remote
    /// writes, broadcast and total order (seed 000 s.2.3.1.1).
    #[default]
    Dms,
}

impl ProtocolVariant {
    /// The name on the command line and in records.
    pub fn name(self) -> &'static str {
        match self {
            ProtocolVariant::Dms => "dms",
        }
    }
}
