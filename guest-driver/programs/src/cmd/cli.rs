//! `mc-guest`'s command line (clap), and the checks of its values.

use std::path::PathBuf;

use cashmere::CsmVariant;
use cashmere::MessageDetection;
use clap::{Args, Parser, Subcommand};
use mc_guest::bench;
use mc_guest::csm::{
    self,
    variant::{detection_parser, variant_parser},
};

#[derive(Parser, Debug, Clone)]
#[command(
    name = "mc-guest",
    version,
    about = "Memory Channel guest program: info, selftest, bench, csm"
)]
pub(crate) struct GuestCli {
    /// The adapter's vhost-user socket (virtual guest); default $MC_SOCKET.
    #[arg(long, global = true)]
    pub(crate) socket: Option<PathBuf>,
    /// Guest RAM of a virtual guest, in MiB (default 64, or what `csm`'s
    /// shared heap needs if more; at least 8: the adapter's queues and
    /// transmit FIFO take about 1.5 MiB, the Memory Channel API's control
    /// pages and coherent arena about 4.2 MiB, and programs allocate their
    /// regions on top).
    #[arg(long, global = true, value_parser = parse_dma_mib)]
    pub(crate) ram_mib: Option<usize>,
    /// DMA memory of the PCI transport (QEMU guest), in MiB: whole 2 MiB
    /// hugepages, physically contiguous (at least 8, as --ram-mib).
    #[arg(long, global = true, default_value_t = 16, value_parser = parse_dma_mib)]
    pub(crate) dma_mib: usize,
    /// Check every store through the ACK page and repeat it until it went
    /// through clean (survives corrupted packets and link flaps, slower).
    #[arg(long, global = true, env = "MC_RELIABLE")]
    pub(crate) reliable: bool,
    #[command(subcommand)]
    pub(crate) command: GuestCommand,
}

#[derive(Subcommand, Debug, Clone)]
pub(crate) enum GuestCommand {
    /// Show this adapter's register file and status.
    Info,
    /// Run the cluster-wide self test (every node must run it).
    Selftest {
        /// Lock-protected increments per node.
        #[arg(long, default_value_t = 200)]
        iterations: u32,
    },
    /// Measure Memory Channel operations (every node must run it; node 0 prints).
    Bench {
        #[arg(value_enum, default_value_t = bench::Which::All)]
        which: bench::Which,
        /// Samples per measurement (at least 1: a median needs one).
        #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u32).range(1..))]
        iters: u32,
        /// `csm` only: the Cashmere protocol variant to measure (its diffs,
        /// locks and barriers are remote writes or messages; seed 000 Table
        /// II's MC Direct and MC Messages columns).
        #[arg(long, value_parser = variant_parser(), default_value_t = CsmVariant::Dms)]
        variant: CsmVariant,
        /// `csm` only: how the home notices requests: poll (its waiting
        /// application thread answers) or interrupt (its protocol thread,
        /// woken by the adapter's event).
        #[arg(long, value_parser = detection_parser(), default_value_t = MessageDetection::Polling)]
        detection: MessageDetection,
        /// `ump` and `csm` only: also write the report as JSON to FILE
        /// (`csm`: node 0 appends the rows as one line, for `mc-host
        /// report`'s Table II).
        #[arg(long, value_name = "FILE")]
        json: Option<std::path::PathBuf>,
    },
    /// Run a Cashmere program under a protocol variant (CSM-DMS by default),
    /// verified (every node must run it).
    Csm(CsmArgs),
}

/// `mc-guest csm`'s arguments.
#[derive(Args, Debug, Clone)]
pub(crate) struct CsmArgs {
    #[arg(value_enum)]
    pub(crate) app: csm::App,
    /// Application threads per node (how they share the node is
    /// `--levels`); `mc-host run --threads T` sets it for every guest
    /// through MC_THREADS.
    #[arg(long, env = "MC_THREADS", default_value_t = 1)]
    pub(crate) threads: u32,
    /// Named problem size: small (default), medium, or paper (seed 000
    /// Table III); docs/applications.md lists them.
    #[arg(long, value_enum)]
    pub(crate) preset: Option<csm::Preset>,
    /// Problem size, replacing the preset's main dimension (wtest/test:
    /// elements per thread; sor: grid side; gauss, clu, lu: matrix side;
    /// tsp: cities, 3 to 17; barnes: bodies; em3d: graph nodes; ilink:
    /// families; water-*: molecules); 0 keeps the preset's.
    #[arg(long, default_value_t = 0)]
    pub(crate) size: usize,
    /// SOR: interior rows of a rectangular grid (with --cols), replacing
    /// the preset's.
    #[arg(long, default_value_t = 0, requires = "cols", conflicts_with = "size")]
    pub(crate) rows: usize,
    /// SOR: columns of a rectangular grid (with --rows).
    #[arg(long, default_value_t = 0, requires = "rows", conflicts_with = "size")]
    pub(crate) cols: usize,
    /// Rounds, iterations, time steps or likelihood evaluations,
    /// replacing the preset's; 0 keeps them.
    #[arg(long, default_value_t = 0)]
    pub(crate) iters: u32,
    /// Coherence unit in bytes: 8192 or 4096.
    #[arg(long, default_value_t = 8192)]
    pub(crate) page_size: u32,
    /// Shared heap in KiB, 1 to 1048576 (default: what the problem
    /// needs, at least 1024).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=(cashmere::MAX_HEAP_BYTES as i64 >> 10)))]
    pub(crate) heap_kib: Option<u32>,
    /// Do not let a sole-sharer home go Exclusive.
    #[arg(long)]
    pub(crate) no_exclusive: bool,
    /// Invalidate write-noticed pages that local threads are writing
    /// (a shoot-down) instead of updating them by incoming diffs.
    #[arg(long)]
    pub(crate) no_incoming_diffs: bool,
    /// A home keeps a working copy apart from its master copy and diffs
    /// its own writes into it (instead of writing the master copy
    /// directly, seed 000 s.2.3.2).
    #[arg(long)]
    pub(crate) home_diffs: bool,
    /// Also time the sequential version (sor, gauss, tsp) and print the
    /// speedup.
    #[arg(long)]
    pub(crate) sequential: bool,
    /// Run only the sequential version, on this node, and print its work
    /// at scale 1 as the run's meter reads it (counted work under
    /// `--work counted`): no Cashmere run. What `scripts/calibrate-work.sh
    /// --paper` counts (a paper-size parallel run at 1:1 takes longer
    /// than the sequential program it is not needed for).
    #[arg(long, conflicts_with = "sequential")]
    pub(crate) sequential_only: bool,
    /// Protocol variant (seed 000 Table I): dms; ms (diffs as
    /// messages, data outside Memory Channel space); ms-mg (ms with home
    /// migration); adb (ms-mg with adaptive broadcast of widely read
    /// pages); s (ms with the directory and write notices by messages);
    /// none (s with locks, barriers and flags by messages); none-mg
    /// (none with home migration).
    #[arg(long, value_parser = variant_parser(), default_value_t = CsmVariant::Dms)]
    pub(crate) variant: CsmVariant,
    /// The DSM protocol (docs/dsm.md): cashmere (its variant is
    /// --variant); naive (every page at node 0, every copy dropped at an
    /// acquire: a check of the DSM core, not a contender).
    #[arg(long, default_value_t = dsm_select::ProtocolName::Cashmere)]
    pub(crate) protocol: dsm_select::ProtocolName,
    /// Append the run's record (JSON, one line: sizes, times, every
    /// node's counters and the totals) to FILE; node 0 writes it.
    #[arg(long, value_name = "FILE")]
    pub(crate) json: Option<PathBuf>,
    /// Impose the page homes an earlier run recorded (--record-homes)
    /// instead of first touch, as seed 000 imposed CSM-DMS's homes on
    /// the other variants; the cluster size, page size and heap must
    /// match. Every node reads FILE.
    #[arg(long, value_name = "FILE")]
    pub(crate) homes: Option<PathBuf>,
    /// Write every page's home after the run to FILE (node 0 writes it).
    #[arg(long, value_name = "FILE")]
    pub(crate) record_homes: Option<PathBuf>,
    /// Print where each thread's time went in the timed part (compute,
    /// faults, fetches, diffs, barriers, locks, flags, answering other
    /// nodes; time on a core and waiting for one).
    #[arg(long)]
    pub(crate) stats: bool,
    /// How nodes notice each other's requests (seed 000 s.2.1): poll
    /// (application threads at loop back edges and while waiting, the
    /// protocol thread as a fallback) or interrupt (only the protocol
    /// thread, woken by the adapter's event).
    #[arg(long, value_parser = detection_parser(), default_value_t = MessageDetection::Polling)]
    pub(crate) detection: MessageDetection,
    /// Protocol levels (seed 000 s.3.2): 2, the threads of a node share
    /// its frames and protocol state (CSM-2L); 1, each thread is a
    /// protocol node of its own, sharing only the node's adapter
    /// (CSM-1L: --threads T on N nodes is N x T protocol nodes, as many
    /// as the adapter's region table holds: 61 with 8 KiB pages).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=2))]
    pub(crate) levels: u8,
}

/// The least DMA memory the adapter and the API's bring-up fit in.
const MIN_DMA_MIB: usize = 8;

fn parse_dma_mib(s: &str) -> Result<usize, String> {
    let mib: usize = s.parse().map_err(|e| format!("{s:?}: {e}"))?;
    if mib < MIN_DMA_MIB {
        return Err(format!(
            "{mib} MiB is too little: at least {MIN_DMA_MIB} MiB (the adapter's queues and \
             transmit FIFO take about 1.5 MiB, the Memory Channel API's control pages and \
             coherent arena about 4.2 MiB, and programs allocate their regions on top)"
        ));
    }
    if mib > 1 << 20 {
        return Err(format!("{mib} MiB is more than this program can map"));
    }
    Ok(mib)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn too_little_guest_ram_says_what_the_least_is() {
        let e = parse_dma_mib("1").unwrap_err();
        assert!(e.contains("at least 8 MiB"), "{e}");
        assert!(parse_dma_mib("0").is_err());
        assert!(parse_dma_mib("x").is_err());
        assert_eq!(parse_dma_mib("8"), Ok(8));
        assert!(GuestCli::try_parse_from(["mc-guest", "--ram-mib", "1", "info"]).is_err());
    }
}
