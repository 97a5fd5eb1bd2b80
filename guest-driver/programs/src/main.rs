//! `mc-guest`: the program that runs in every guest of a Memory Channel cluster.
//!
//! In a virtual guest (`mc-host run --nodes N -- mc-guest ...`) it reaches its
//! adapter over vhost-user on the socket named by `--socket` or `MC_SOCKET`.
//! Without either it drives the adapter's PCI function directly: as root inside
//! a QEMU guest (`mc-host qemu-boot`, `mc-host cluster`), no kernel module.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use firmware_model::abi::{self, features};
use firmware_model::{AdapterErrorStatus, NodeSet};
use mc_api::{AdapterPort, McError, MemoryChannel, OpenOptions};
use mc_driver::{
    Adapter, AdapterOptions, PciOptions, PciTransport, Transport, VhostUserOptions,
    VhostUserTransport,
};
use mc_guest::bench::{self, BenchError};
use mc_guest::csm::{self, AppError};
use mc_guest::selftest::{self, SelftestError};

/// Why `mc-guest` failed.
#[derive(Debug, thiserror::Error)]
enum GuestError {
    /// The virtual guest's vhost-user socket.
    #[error("{}: {source}", socket.display())]
    Connect {
        socket: PathBuf,
        #[source]
        source: mc_driver::Error,
    },
    #[error("{source} (no --socket or MC_SOCKET given, so the PCI adapter was tried)")]
    Pci {
        #[source]
        source: mc_driver::Error,
    },
    #[error(transparent)]
    Adapter(#[from] mc_driver::Error),
    #[error(transparent)]
    Api(#[from] McError),
    #[error(transparent)]
    Selftest(#[from] SelftestError),
    #[error(transparent)]
    Bench(#[from] BenchError),
    #[error(transparent)]
    BenchUmp(#[from] mc_guest::bench_ump::BenchUmpError),
    #[error(transparent)]
    Csm(#[from] AppError),
    #[error(transparent)]
    Gather(#[from] csm::gather::GatherError),
    #[error(transparent)]
    Record(#[from] csm::record::RecordError),
    /// A Cashmere run failed while the network was losing packets and the
    /// API was not reliable: the loss is the likely cause, whatever symptom
    /// the run reported.
    #[error(
        "{source} (the network lost or damaged packets during the run: the cluster error \
         count went from {before} to {now}, and without --reliable nothing retransmits them; \
         rerun with --reliable)"
    )]
    LostOnNetwork {
        #[source]
        source: Box<GuestError>,
        before: u64,
        now: u64,
    },
    #[error("home assignment {}: {source}", path.display())]
    HomesFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("home assignment {}: {source}", path.display())]
    Homes {
        path: PathBuf,
        #[source]
        source: cashmere::HomesError,
    },
}

#[derive(Parser, Debug, Clone)]
#[command(
    name = "mc-guest",
    version,
    about = "Memory Channel guest program: info, selftest, bench, csm"
)]
struct GuestCli {
    /// The adapter's vhost-user socket (virtual guest); default $MC_SOCKET.
    #[arg(long, global = true)]
    socket: Option<PathBuf>,
    /// Guest RAM of a virtual guest, in MiB (default 64, or what `csm`'s
    /// shared heap needs if more; at least 8: the adapter's queues and
    /// transmit FIFO take about 1.5 MiB, the Memory Channel API's control
    /// pages and coherent arena about 4.2 MiB, and programs allocate their
    /// regions on top).
    #[arg(long, global = true, value_parser = parse_dma_mib)]
    ram_mib: Option<usize>,
    /// DMA memory of the PCI transport (QEMU guest), in MiB: whole 2 MiB
    /// hugepages, physically contiguous (at least 8, as --ram-mib).
    #[arg(long, global = true, default_value_t = 16, value_parser = parse_dma_mib)]
    dma_mib: usize,
    /// Check every store through the ACK page and repeat it until it went
    /// through clean (survives corrupted packets and link flaps, slower).
    #[arg(long, global = true, env = "MC_RELIABLE")]
    reliable: bool,
    #[command(subcommand)]
    command: GuestCommand,
}

#[derive(Subcommand, Debug, Clone)]
enum GuestCommand {
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
        #[arg(long, value_enum, default_value_t = csm::ProtocolVariant::Dms)]
        variant: csm::ProtocolVariant,
        /// `csm` only: how the home notices requests: poll (its waiting
        /// application thread answers) or interrupt (its protocol thread,
        /// woken by the adapter's event).
        #[arg(long, value_enum, default_value_t = csm::Detection::Poll)]
        detection: csm::Detection,
        /// `ump` only: also write the report as JSON to this file.
        #[arg(long)]
        json: Option<std::path::PathBuf>,
    },
    /// Run a Cashmere program under a protocol variant (CSM-DMS by default),
    /// verified (every node must run it).
    Csm {
        #[arg(value_enum)]
        app: csm::App,
        /// Application threads per node (how they share the node is
        /// `--levels`); `mc-host run --threads T` sets it for every guest
        /// through MC_THREADS.
        #[arg(long, env = "MC_THREADS", default_value_t = 1)]
        threads: u32,
        /// Named problem size: small (default), medium, or paper (seed 000
        /// Table III); docs/applications.md lists them.
        #[arg(long, value_enum)]
        preset: Option<csm::Preset>,
        /// Problem size, replacing the preset's main dimension (wtest/test:
        /// elements per thread; sor: grid side; gauss, clu, lu: matrix side;
        /// tsp: cities, 3 to 17; barnes: bodies; em3d: graph nodes; ilink:
        /// families; water-*: molecules); 0 keeps the preset's.
        #[arg(long, default_value_t = 0)]
        size: usize,
        /// SOR: interior rows of a rectangular grid (with --cols), replacing
        /// the preset's.
        #[arg(long, default_value_t = 0, requires = "cols", conflicts_with = "size")]
        rows: usize,
        /// SOR: columns of a rectangular grid (with --rows).
        #[arg(long, default_value_t = 0, requires = "rows", conflicts_with = "size")]
        cols: usize,
        /// Rounds, iterations, time steps or likelihood evaluations,
        /// replacing the preset's; 0 keeps them.
        #[arg(long, default_value_t = 0)]
        iters: u32,
        /// Coherence unit in bytes: 8192 or 4096.
        #[arg(long, default_value_t = 8192)]
        page_size: u32,
        /// Shared heap in KiB, 1 to 1048576 (default: what the problem
        /// needs, at least 1024).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=(cashmere::MAX_HEAP_BYTES as i64 >> 10)))]
        heap_kib: Option<u32>,
        /// Do not let a sole-sharer home go Exclusive.
        #[arg(long)]
        no_exclusive: bool,
        /// Invalidate write-noticed pages that local threads are writing
        /// (a shoot-down) instead of updating them by incoming diffs.
        #[arg(long)]
        no_incoming_diffs: bool,
        /// A home keeps a working copy apart from its master copy and diffs
        /// its own writes into it (instead of writing the master copy
        /// directly, seed 000 s.2.3.2).
        #[arg(long)]
        home_diffs: bool,
        /// Also time the sequential version (sor, gauss, tsp) and print the
        /// speedup.
        #[arg(long)]
        sequential: bool,
        /// Protocol variant (seed 000 Table I): dms; ms (diffs as
        /// messages, data outside Memory Channel space); ms-mg (ms with home
        /// migration); adb (ms-mg with adaptive broadcast of widely read
        /// pages); s (ms with the directory and write notices by messages);
        /// none (s with locks, barriers and flags by messages); none-mg
        /// (none with home migration).
        #[arg(long, value_enum, default_value_t = csm::ProtocolVariant::Dms)]
        variant: csm::ProtocolVariant,
        /// Append the run's record (JSON, one line: sizes, times, every
        /// node's counters and the totals) to FILE; node 0 writes it.
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
        /// Impose the page homes an earlier run recorded (--record-homes)
        /// instead of first touch, as seed 000 imposed CSM-DMS's homes on
        /// the other variants; the cluster size, page size and heap must
        /// match. Every node reads FILE.
        #[arg(long, value_name = "FILE")]
        homes: Option<PathBuf>,
        /// Write every page's home after the run to FILE (node 0 writes it).
        #[arg(long, value_name = "FILE")]
        record_homes: Option<PathBuf>,
        /// Print where each thread's time went in the timed part (compute,
        /// faults, fetches, diffs, barriers, locks, flags, answering other
        /// nodes; time on a core and waiting for one).
        #[arg(long)]
        stats: bool,
        /// How nodes notice each other's requests (seed 000 s.2.1): poll
        /// (application threads at loop back edges and while waiting, the
        /// protocol thread as a fallback) or interrupt (only the protocol
        /// thread, woken by the adapter's event).
        #[arg(long, value_enum, default_value_t = csm::Detection::Poll)]
        detection: csm::Detection,
        /// Protocol levels (seed 000 s.3.2): 2, the threads of a node share
        /// its frames and protocol state (CSM-2L); 1, each thread is a
        /// protocol node of its own, sharing only the node's adapter
        /// (CSM-1L: --threads T on N nodes is N x T protocol nodes, as many
        /// as the adapter's region table holds: 61 with 8 KiB pages).
        #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=2))]
        levels: u8,
    },
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

fn adapter(cli: &GuestCli) -> Result<Adapter<Box<dyn Transport>>, GuestError> {
    let socket = cli
        .socket
        .clone()
        .or_else(|| std::env::var_os("MC_SOCKET").map(PathBuf::from));
    let t: Box<dyn Transport> = match socket {
        Some(socket) => {
            let opts = VhostUserOptions {
                ram_size: cli.ram_mib.unwrap_or(64) << 20,
                ..Default::default()
            };
            let t =
                VhostUserTransport::connect(&socket, &opts).map_err(|e| GuestError::Connect {
                    socket: socket.clone(),
                    source: e.into(),
                })?;
            Box::new(t)
        }
        None => {
            let opts = PciOptions {
                dma_size: cli.dma_mib << 20,
                ..Default::default()
            };
            Box::new(PciTransport::open(&opts).map_err(|e| GuestError::Pci { source: e.into() })?)
        }
    };
    // Spin only briefly before yielding: guests, the hub and its workers share
    // the cores, and a long spin starves the very thread it waits for.
    let opts = AdapterOptions {
        spin: 64,
        ..Default::default()
    };
    Ok(Adapter::new(t, opts)?)
}

fn open(cli: &GuestCli) -> Result<MemoryChannel, GuestError> {
    open_with(cli, &OpenOptions::default())
}

fn open_with(cli: &GuestCli, opts: &OpenOptions) -> Result<MemoryChannel, GuestError> {
    let port = AdapterPort::new(adapter(cli)?)?;
    let opts = OpenOptions {
        reliable: opts.reliable || cli.reliable,
        ..opts.clone()
    };
    Ok(MemoryChannel::open(Box::new(port), &opts)?)
}

fn info(cli: &GuestCli) -> Result<(), GuestError> {
    let mut a = adapter(cli)?;
    let r = a.registers()?;
    let status = a.set_status_page().and_then(|v| v.read())?;
    let names = [
        (features::BROADCAST, "broadcast"),
        (features::POINT_TO_POINT, "point-to-point"),
        (features::LOOPBACK, "loopback"),
        (features::ACK_PAGE, "ack-pages"),
        (features::INTERRUPT, "interrupts"),
        (features::STATUS_PAGE, "status-page"),
    ];
    let feats: Vec<&str> = names
        .iter()
        .filter(|(b, _)| r.features & b != 0)
        .map(|(_, n)| *n)
        .collect();
    let link = match r.link_timing {
        0 => "unthrottled",
        1 => "mc1",
        2 => "mc2",
        _ => "custom",
    };
    let e = AdapterErrorStatus::from_word(r.error_status);
    println!("Memory Channel adapter: node {} of {}", r.node_id, r.nodes);
    println!(
        "  members {} (epoch {})",
        NodeSet(r.members),
        r.membership_epoch
    );
    println!(
        "  page size {} B, address space {} MiB, packet payload {} B, link {link}",
        r.page_size,
        r.address_space >> 20,
        r.max_payload
    );
    println!("  features: {}", feats.join(" "));
    println!(
        "  link {}, {}; errors: {} network, {} refused; cluster error count {}",
        if r.link_state & abi::link::UP != 0 {
            "up"
        } else {
            "down"
        },
        if r.link_state & abi::link::ONLINE != 0 {
            "online"
        } else {
            "offline"
        },
        e.network_errors,
        e.protection_errors,
        status.cluster_error_count
    );
    Ok(())
}

/// A home assignment recorded by `--record-homes`.
fn read_homes(path: &std::path::Path) -> Result<cashmere::HomeAssignment, GuestError> {
    let text = std::fs::read_to_string(path).map_err(|source| GuestError::HomesFile {
        path: path.to_path_buf(),
        source,
    })?;
    cashmere::HomeAssignment::parse(&text).map_err(|source| GuestError::Homes {
        path: path.to_path_buf(),
        source,
    })
}

/// Refuse output paths that cannot be written before the run, not after it
/// (a paper-size run takes hours). Every node checks: node 0 writes, and
/// before the adapter is open no node knows which it is.
fn check_outputs(
    json: Option<&std::path::Path>,
    record_homes: Option<&std::path::Path>,
) -> Result<(), GuestError> {
    if let Some(path) = json {
        // Appending creates the file; an empty JSON-lines file is valid.
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|source| csm::record::RecordError::Write {
                path: path.display().to_string(),
                source,
            })?;
    }
    if let Some(path) = record_homes {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => std::path::Path::new("."),
        };
        let why = if path.is_dir() {
            Some("is a directory")
        } else if !dir.is_dir() {
            Some("its directory does not exist")
        } else {
            None
        };
        if let Some(why) = why {
            return Err(GuestError::HomesFile {
                path: path.to_path_buf(),
                source: std::io::Error::other(why),
            });
        }
    }
    Ok(())
}

/// `mc-guest csm`: size the heap (and a virtual guest's RAM) for the
/// problem, run it, print the outcome, and append the record if asked.
fn csm_main(
    cli: &GuestCli,
    mut p: csm::Params,
    heap_kib: Option<u32>,
    json: Option<&std::path::Path>,
    record_homes: Option<&std::path::Path>,
) -> Result<(), GuestError> {
    check_outputs(json, record_homes)?;
    let nodes: u32 = std::env::var("MC_NODES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1);
    p.heap_bytes = match heap_kib {
        // Bounded by clap (1 KiB to cashmere::MAX_HEAP_BYTES).
        Some(k) => k as usize * 1024,
        // Every node must agree on the heap; MC_NODES (set by `mc-host run`)
        // sizes the per-processor pools before the adapter says how many
        // nodes there are, and the heap is checked again below.
        None => p.heap_needed(nodes)?.max(1 << 20),
    };
    // The coherent arena holds Cashmere's directory, write-notice bins and
    // synchronisation words (sized here for up to 8 nodes, or MC_NODES if
    // more); the master copies are in each node's home region, an ordinary
    // region the guest receives into its RAM, as are the mailboxes.
    // In 1L every thread is a protocol node, with a home region (the size
    // of the heap) and a mailbox this node's adapter receives.
    let per_node = match p.levels {
        cashmere::Levels::One => p.threads.max(1),
        cashmere::Levels::Two => 1,
    };
    let arena = (4 << 20) + 2 * p.config().space(nodes.max(8) * per_node).arena_bytes(8192);
    let ram_mib = cli.ram_mib.unwrap_or_else(|| {
        64.max(((4 << 20) + (1 + per_node as usize) * p.heap_bytes) >> 20) + 32 * per_node as usize
    });
    let cli = GuestCli {
        ram_mib: Some(ram_mib),
        ..cli.clone()
    };
    let opts = OpenOptions {
        arena_bytes: arena,
        ..Default::default()
    };
    let mc = open_with(&cli, &opts)?;
    if heap_kib.is_none() && p.heap_needed(mc.nodes())? > p.heap_bytes {
        return Err(AppError::from(csm::verify::SuiteError::Shape {
            app: p.app.name(),
            why: format!(
                "the heap was sized for {nodes} nodes (MC_NODES) but the cluster has {}: \
                 give --heap-kib {}",
                mc.nodes(),
                p.heap_needed(mc.nodes())? >> 10
            ),
        })
        .into());
    }
    let errors_before = mc.error_count();
    let o = csm::run(&mc, &p).map_err(|e| {
        let now = mc.error_count();
        let lost = !mc.is_reliable() && now != errors_before;
        // Cashmere's own check already says so.
        let said = matches!(&e, AppError::Csm(c) if c.is_network_loss());
        if lost && !said {
            GuestError::LostOnNetwork {
                source: Box::new(e.into()),
                before: errors_before,
                now,
            }
        } else {
            e.into()
        }
    })?;
    println!("{o}");
    if let (Some(path), 0) = (record_homes, mc.node_id().0) {
        std::fs::write(path, o.homes.render()).map_err(|source| GuestError::HomesFile {
            path: path.to_path_buf(),
            source,
        })?;
    }
    if let Some(path) = json {
        let mine = csm::record::NodeReport::from_outcome(&o);
        if let Some(all) = csm::gather::collect(&mc, &mine)? {
            let ctx = csm::record::RunContext::from_env(mc.nodes(), mc.registers().link_timing);
            csm::record::append(path, &csm::record::build(&p, &ctx, &all))?;
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let cli = GuestCli::parse();
    let r = match &cli.command {
        GuestCommand::Info => info(&cli),
        GuestCommand::Selftest { iterations } => open(&cli).and_then(|mc| {
            let n = selftest::run(&mc, *iterations, &mut |l| println!("{l}"))?;
            println!("selftest: {n} checks passed on node {}", mc.node_id().0);
            Ok(())
        }),
        GuestCommand::Bench {
            which: bench::Which::Ump,
            iters,
            json,
            ..
        } => open(&cli).and_then(|mc| {
            let report = mc_guest::bench_ump::run(&mc, *iters, json.as_deref())?;
            if let Some(r) = report {
                print!("{}", mc_guest::bench_ump::format(&r));
            }
            Ok(())
        }),
        GuestCommand::Bench {
            which: bench::Which::Csm,
            iters,
            variant,
            detection,
            ..
        } => open(&cli).and_then(|mc| {
            let rows = csm::bench::run(&mc, *iters, *variant, *detection)?;
            if mc.node_id().0 == 0 {
                print!(
                    "{}",
                    csm::bench::format(&rows, mc.nodes(), *variant, *detection)
                );
            }
            Ok(())
        }),
        GuestCommand::Csm {
            app,
            threads,
            size,
            rows,
            cols,
            preset,
            iters,
            page_size,
            heap_kib,
            no_exclusive,
            no_incoming_diffs,
            home_diffs,
            sequential,
            variant,
            json,
            stats,
            homes,
            record_homes,
            detection,
            levels,
        } => {
            let mut p = csm::Params::new(*app, *threads);
            p.size = *size;
            (p.rows, p.cols) = (*rows, *cols);
            p.iters = *iters;
            p.page_size = *page_size;
            p.exclusive_mode = !no_exclusive;
            p.incoming_diffs = !no_incoming_diffs;
            p.home_direct = !home_diffs;
            p.time_sequential = *sequential;
            p.preset = *preset;
            p.variant = *variant;
            p.time_breakdown = *stats;
            p.detection = *detection;
            p.levels = match levels {
                1 => cashmere::Levels::One,
                _ => cashmere::Levels::Two,
            };
            match homes.as_deref().map(read_homes).transpose() {
                Ok(h) => {
                    p.homes = h.map(std::sync::Arc::new);
                    csm_main(&cli, p, *heap_kib, json.as_deref(), record_homes.as_deref())
                }
                Err(e) => Err(e),
            }
        }
        GuestCommand::Bench { which, iters, .. } => open(&cli).and_then(|mc| {
            let report = bench::run(&mc, *which, *iters)?;
            if mc.node_id().0 == 0 {
                print!("{}", bench::format(&report));
            }
            Ok(())
        }),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mc-guest: error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
