//! `mc-guest csm`: the parameters from the command line, the heap (and a
//! virtual guest's RAM) sized for the problem, the run, its outcome, and
//! the record if asked.

use mc_api::OpenOptions;
use mc_guest::csm::{self, AppError};

use super::cli::{CsmArgs, GuestCli};
use super::connect::open_with;
use super::error::GuestError;

/// Run `mc-guest csm` as `args` say.
pub(crate) fn main(cli: &GuestCli, args: &CsmArgs) -> Result<(), GuestError> {
    let mut p = csm::Params::new(args.app, args.threads);
    p.size = args.size;
    (p.rows, p.cols) = (args.rows, args.cols);
    p.iters = args.iters;
    p.page_size = args.page_size;
    p.exclusive_mode = !args.no_exclusive;
    p.incoming_diffs = !args.no_incoming_diffs;
    p.home_direct = !args.home_diffs;
    p.time_sequential = args.sequential;
    p.preset = args.preset;
    p.variant = args.variant;
    p.protocol = args.protocol;
    p.time_breakdown = args.stats;
    p.detection = args.detection;
    p.levels = match args.levels {
        1 => cashmere::Levels::One,
        _ => cashmere::Levels::Two,
    };
    if args.sequential_only {
        return sequential_only(&p);
    }
    p.homes = args
        .homes
        .as_deref()
        .map(read_homes)
        .transpose()?
        .map(std::sync::Arc::new);
    csm_main(
        cli,
        p,
        args.heap_kib,
        args.json.as_deref(),
        args.record_homes.as_deref(),
    )
}

/// `--sequential-only`: the sequential program alone, on this node (as a
/// baseline runs it: one processor), its work and wall time printed.
fn sequential_only(p: &csm::Params) -> Result<(), GuestError> {
    let problem = p.problem()?;
    let (wall, work) = csm::suite::time_sequential_cpu(p.app, problem, 1)
        .ok_or(GuestError::NoSequential(p.app.name()))?;
    let meter = mc_api::vclock::config().map_or("cpu-time", |c| c.work.as_str());
    println!(
        "csm {} sequential ({}): work {work:.9} s at scale 1 ({meter}), wall {wall:.4} s",
        p.app.name(),
        problem.describe()
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
    // more); the master copies are in the one home region (the size of the
    // heap: each machine receives the pages its nodes are home of into its
    // RAM), an ordinary region, as are the mailboxes. In 1L every thread is
    // a protocol node, with a mailbox this node's adapter receives.
    let per_node = match p.levels {
        cashmere::Levels::One => p.threads.max(1),
        cashmere::Levels::Two => 1,
    };
    let arena = (4 << 20) + 2 * p.config().space(nodes.max(8) * per_node).arena_bytes(8192);
    // In virtual time the adapter's arrival table takes 16 MiB more (a
    // 512 MiB address space at 256-byte granules, docs/virtual-time.md).
    let table_mib = if mc_api::vclock::enabled() { 32 } else { 0 };
    let ram_mib = cli.ram_mib.unwrap_or_else(|| {
        64.max(((4 << 20) + 2 * p.heap_bytes) >> 20) + 32 * per_node as usize + table_mib
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
        let said = match &e {
            AppError::Csm(c) => c.is_network_loss(),
            AppError::Dsm(d) => d
                .protocol_error::<cashmere::CsmError>()
                .is_some_and(cashmere::CsmError::is_network_loss),
            _ => false,
        };
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
    if let (Some(path), 0, Some(homes)) = (record_homes, mc.node_id().0, &o.homes) {
        std::fs::write(path, homes.render()).map_err(|source| GuestError::HomesFile {
            path: path.to_path_buf(),
            source,
        })?;
    }
    if let Some(path) = json {
        let mine = csm::record::node_report(&o);
        if let Some(all) = dsm_core::gather::collect(&mc, &mine)? {
            let ctx = csm::record::RunContext::from_env(mc.nodes(), mc.registers().link_timing);
            csm::record::append(path, &csm::record::build(&p, &ctx, &all))?;
        }
    }
    Ok(())
}
