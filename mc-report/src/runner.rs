//! Running the matrix: each run is a child `mc-host run ... -- mc-guest
//! csm ... --json FILE`, its output in a log file of its own; the guest's
//! record is completed with how the run went and on what host, and
//! appended to the results file (JSON lines). Runs whose key already has a
//! successful record there are skipped, so an interrupted matrix resumes.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::Instant;

use clap::Args;
use serde_json::{json, Value};

use crate::error::ReportError;
use crate::host_info::HostInfo;
use crate::matrix::{check_preset, parse_apps, parse_shapes, Matrix, RunSpec};
use crate::progress::Progress;
use crate::results;
use crate::run_clock::{
    committed_paper_scales, paper_scale, protocol_scale, ClockError, ClockSpec, CpuScale,
    PaperScales, RunClock, RunWork,
};

#[derive(Args, Debug, Clone)]
pub struct RunMatrixArgs {
    /// Applications, comma-separated, or `all` (the ten of seed 000 Table
    /// III), or `seed001` (seed 001's seven, Table 5).
    #[arg(long)]
    pub apps: String,
    /// Protocol variants, comma-separated, passed to `mc-guest csm` as
    /// `--variant` (default: mc-guest's own, CSM-DMS).
    #[arg(long)]
    pub variants: Option<String>,
    /// Cluster shapes NODES:THREADS, comma-separated (2:2 is 2 nodes of 2
    /// threads: the paper's 4:2, run with the two-level protocol); add /1L
    /// for the one-level protocol, each thread its own protocol node
    /// (2:2/1L; seed 000 Fig. 1 compares the two).
    #[arg(long, default_value = "2:1,2:2,4:1")]
    pub config: String,
    /// The DSM protocol of every run (`mc-guest csm --protocol`): cashmere
    /// (the default), naive or hlrc. Homes are imposed under Cashmere only.
    #[arg(long)]
    pub protocol: Option<String>,
    /// Problem size preset: small, medium, paper, seed001-scaled or seed001
    /// (default: mc-guest's, small).
    #[arg(long)]
    pub preset: Option<String>,
    /// The results file (JSON lines), appended to.
    #[arg(long)]
    pub results: PathBuf,
    /// Where each run's log goes (default: RESULTS.logs/).
    #[arg(long)]
    pub logs: Option<PathBuf>,
    /// Delivery mode of every run: eager or skewed.
    #[arg(long, default_value = "eager")]
    pub delivery: String,
    /// Seed of skewed delivery.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Link timing of every run: unthrottled, mc1 or mc2.
    #[arg(long, default_value = "unthrottled")]
    pub link: String,
    /// Seconds before a run is stopped.
    #[arg(long, default_value_t = 1800)]
    pub timeout: u64,
    /// Skip the sequential baselines (speedups then need them from an
    /// earlier matrix in the same file).
    #[arg(long)]
    pub no_baselines: bool,
    /// Let every variant find its own homes by first touch. By default the
    /// other variants run with the homes CSM-DMS's first touch gave on the
    /// same application and shape (seed 000 s.3.4.1), and CSM-DMS runs
    /// first on each shape, added if not among --variants.
    #[arg(long)]
    pub first_touch_homes: bool,
    /// Skip Table II's micro-benchmark (by default `mc-guest bench csm`
    /// under CSM-DMS and CSM-None on 2 nodes, once per results file).
    #[arg(long)]
    pub no_table2: bool,
    /// The guests' clock: `virtual` (the default: times predicted for
    /// Memory Channel 2 hardware, whatever this host) or `wall` (this
    /// host's clock; docs/virtual-time.md).
    #[arg(long, value_enum, default_value_t = RunClock::Virtual)]
    pub clock: RunClock,
    /// With the virtual clock: what measures the guests' computing,
    /// `counted` (the default: scripts/build-counted.sh's mc-guest, the
    /// same on every run) or `cpu-time` (this host's CPU time, any build).
    #[arg(long, value_enum)]
    pub work: Option<RunWork>,
    /// With the virtual clock: virtual ns per ns of this host's CPU time (1
    /// = this host's processor), or `paper` (needs --preset paper): under
    /// counted work the paper processor's committed rates, under CPU time
    /// per application seed 000 Table III's sequential time over its
    /// sequential CPU time here and the protocol's from Table II.
    #[arg(long, value_name = "X|paper")]
    pub cpu_scale: Option<CpuScale>,
    /// With the virtual clock: how far (us of virtual time) a running
    /// thread may get ahead of the slowest (mc-host run's default: 100).
    #[arg(long, value_name = "US", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub quantum_us: Option<u64>,
}

impl RunMatrixArgs {
    /// The clock every run keeps, checked against the preset.
    pub fn clock_spec(&self) -> Result<ClockSpec, ReportError> {
        if self.clock == RunClock::Wall && self.cpu_scale.is_some() {
            return Err(ClockError::NeedsVirtual("--cpu-scale").into());
        }
        if self.clock == RunClock::Wall && self.work.is_some() {
            return Err(ClockError::NeedsVirtual("--work").into());
        }
        let spec = ClockSpec {
            clock: self.clock,
            work: self.work.unwrap_or_default(),
            scale: self.cpu_scale.unwrap_or_default(),
            quantum_us: self.quantum_us,
        };
        spec.check(self.preset.as_deref())?;
        Ok(spec)
    }

    pub fn matrix(&self) -> Result<Matrix, ReportError> {
        Ok(Matrix {
            apps: parse_apps(&self.apps)?,
            variants: self.variants.as_ref().map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect()
            }),
            shapes: parse_shapes(&self.config)?,
            preset: self.preset.as_deref().map(check_preset).transpose()?,
            delivery: self.delivery.clone(),
            seed: self.seed,
            link: self.link.clone(),
            baselines: !self.no_baselines,
            impose_homes: !self.first_touch_homes,
            clock: self.clock_spec()?,
            protocol: self.protocol.clone(),
        })
    }

    fn logs_dir(&self) -> PathBuf {
        self.logs.clone().unwrap_or_else(|| {
            let mut p = self.results.clone().into_os_string();
            p.push(".logs");
            PathBuf::from(p)
        })
    }
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

/// Append `record` to the results file as one line.
pub fn append(path: &Path, record: &Value) -> Result<(), ReportError> {
    let mut line = record.to_string();
    line.push('\n');
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(ReportError::io(path))?;
    f.write_all(line.as_bytes()).map_err(ReportError::io(path))
}

/// What became of one run.
pub struct RunOutcome {
    pub ok: bool,
    pub wall_s: f64,
    pub record: Value,
}

/// A run's files in the logs directory: its log (mc-host's stdout and
/// stderr) and the JSON record the guest writes (an old one removed).
struct RunFiles {
    log_path: PathBuf,
    json_path: PathBuf,
    log: std::fs::File,
}

impl RunFiles {
    fn create(logs: &Path, stem: &str) -> Result<RunFiles, ReportError> {
        let log_path = logs.join(format!("{stem}.log"));
        let json_path = absolute(&logs.join(format!("{stem}.json")));
        let _ = std::fs::remove_file(&json_path);
        let log = std::fs::File::create(&log_path).map_err(ReportError::io(&log_path))?;
        Ok(RunFiles {
            log_path,
            json_path,
            log,
        })
    }
}

/// `mc_host HOST_ARGS -- GUEST_ARGS`, its output to the run's log; then
/// the guest's record (the JSON file's last line), if it wrote one.
fn run_mc_host(
    mc_host: &Path,
    host_args: &[String],
    guest_args: &[String],
    files: &RunFiles,
) -> Result<(ExitStatus, Option<Value>), ReportError> {
    let log = files
        .log
        .try_clone()
        .map_err(ReportError::io(&files.log_path))?;
    let err_log = files
        .log
        .try_clone()
        .map_err(ReportError::io(&files.log_path))?;
    let status = Command::new(mc_host)
        .args(host_args)
        .arg("--")
        .args(guest_args)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(err_log)
        .status()
        .map_err(|source| ReportError::Spawn {
            program: mc_host.to_path_buf(),
            source,
        })?;
    let record = std::fs::read_to_string(&files.json_path)
        .ok()
        .and_then(|t| t.lines().last().and_then(|l| serde_json::from_str(l).ok()));
    Ok((status, record))
}

/// Run `spec` with `mc_host`, its output to a log in `logs`; `scale` is the
/// application's scales when the matrix's is `paper`.
pub fn run_one(
    mc_host: &Path,
    spec: &RunSpec,
    logs: &Path,
    timeout_s: u64,
    scale: Option<PaperScales>,
) -> Result<RunOutcome, ReportError> {
    let files = RunFiles::create(logs, &spec.file_stem())?;
    let host_args = spec.host_args(timeout_s, scale);
    let guest_args = spec.guest_args(&files.json_path);
    {
        let mut l = &files.log;
        let _ = writeln!(
            l,
            "$ {} {} -- {}",
            mc_host.display(),
            host_args.join(" "),
            guest_args.join(" ")
        );
    }
    let before = HostInfo::now();
    let t = Instant::now();
    let (status, guest_record) = run_mc_host(mc_host, &host_args, &guest_args, &files)?;
    let wall_s = t.elapsed().as_secs_f64();
    let after = HostInfo::now();
    let ok = status.success() && guest_record.is_some();
    let run = json!({
        "key": spec.key(),
        "status": if ok { "ok" } else { "failed" },
        "exit_code": status.code(),
        "log": absolute(&files.log_path).display().to_string(),
        "wall_s": wall_s,
        "baseline": spec.baseline,
        "config": spec.shape.to_string(),
        "requested_variant": spec.variant,
        "homes_from": guest_args
            .iter()
            .position(|a| a == "--homes")
            .and_then(|i| guest_args.get(i + 1)),
        "host": {
            "cores": before.cores,
            "load_before": before.load,
            "load_after": after.load,
        },
    });
    let record = match (ok, guest_record) {
        (true, Some(mut v)) => {
            if let Some(o) = v.as_object_mut() {
                o.insert("run".into(), run);
            }
            v
        }
        _ => json!({
            "schema": 1,
            "app": spec.app,
            "preset": spec.preset,
            "variant": spec.variant,
            "nodes": spec.shape.nodes,
            "threads": spec.shape.threads,
            "levels": if spec.shape.levels() == "1L" { 1 } else { 2 },
            "processors": spec.shape.processors(),
            "delivery": spec.delivery,
            "link": spec.link,
            "protocol": spec.protocol.as_deref().unwrap_or("cashmere"),
            "run": run,
        }),
    };
    Ok(RunOutcome { ok, wall_s, record })
}

/// Samples per Table II operation.
const TABLE2_ITERS: u32 = 200;
/// Table II's variants: remote writes (the MC Direct column) and explicit
/// messages (the MC Messages column).
const TABLE2_VARIANTS: [&str; 2] = ["dms", "none"];

/// Table II's micro-benchmark under `variant`: `mc-guest bench csm` on 2
/// nodes, on the matrix's clock (at the `paper` scale, 1: an operation's
/// CPU part at this host's speed), its JSON record completed as a run's is.
fn run_table2(
    mc_host: &Path,
    args: &RunMatrixArgs,
    clock: &ClockSpec,
    variant: &str,
    key: &str,
    logs: &Path,
) -> Result<(bool, Value), ReportError> {
    let files = RunFiles::create(logs, &format!("table2-{variant}"))?;
    let mut host_args: Vec<String> = [
        "run",
        "--nodes",
        "2",
        "--delivery",
        &args.delivery,
        "--link",
        &args.link,
        "--timeout",
        &args.timeout.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if let Some(seed) = args.seed {
        host_args.extend(["--seed".into(), seed.to_string()]);
    }
    host_args.extend(clock.host_args(None));
    let guest_args = [
        "mc-guest".to_string(),
        "bench".into(),
        "csm".into(),
        "--variant".into(),
        variant.into(),
        "--iters".into(),
        TABLE2_ITERS.to_string(),
        "--json".into(),
        files.json_path.display().to_string(),
    ];
    let (status, rec) = run_mc_host(mc_host, &host_args, &guest_args, &files)?;
    let ok = status.success() && rec.is_some();
    let run = json!({
        "key": key,
        "status": if ok { "ok" } else { "failed" },
        "exit_code": status.code(),
        "log": absolute(&files.log_path).display().to_string(),
    });
    let mut v = rec.unwrap_or_else(|| json!({ "schema": 1, "kind": "table2", "variant": variant }));
    if let Some(o) = v.as_object_mut() {
        o.insert("run".into(), run);
    }
    Ok((ok, v))
}

/// The `paper` CPU scale of `app`, from its baseline's sequential CPU time.
fn scale_from(record: &Value, app: &str) -> Option<f64> {
    record["times"]["sequential_cpu_s"]
        .as_f64()
        .and_then(|cpu| paper_scale(app, cpu))
}

/// `report run`: every run of the matrix not yet in the results file.
pub fn run_matrix(args: &RunMatrixArgs) -> Result<(), ReportError> {
    let matrix = args.matrix()?;
    let runs = matrix.runs();
    let clock = matrix.clock;
    let earlier = if args.results.exists() {
        results::load(&args.results)?
    } else {
        Vec::new()
    };
    let done: HashSet<String> = earlier
        .iter()
        .filter(|r| r.ok())
        .filter_map(|r| r.key().map(String::from))
        .collect();
    // At the `paper` scale under CPU time, each application's scale comes
    // from its baseline: recorded earlier (a resumed matrix) or run first
    // below (under counted work, from the committed table: no measurement).
    let mut scales: HashMap<String, f64> = HashMap::new();
    // And the protocol's, from the latest Table II record under CSM-DMS.
    let mut protocol: Option<f64> = None;
    let measure_paper = clock.scale == CpuScale::Paper && !clock.paper_is_committed();
    if measure_paper {
        for r in earlier.iter().filter(|r| r.ok() && r.baseline()) {
            if let Some(s) = scale_from(&r.v, r.app()) {
                scales.insert(r.app().to_string(), s);
            }
        }
        protocol = earlier
            .iter()
            .rev()
            .filter(|r| r.ok() && r.is_table2())
            .find_map(|r| protocol_scale(&r.v));
    }
    let logs = args.logs_dir();
    std::fs::create_dir_all(&logs).map_err(ReportError::io(&logs))?;
    if let Some(dir) = args.results.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(ReportError::io(dir))?;
    }
    let mc_host = std::env::current_exe().map_err(ReportError::CurrentExe)?;
    let mut failed = 0;
    if !args.no_table2 {
        for v in TABLE2_VARIANTS {
            let key = format!(
                "table2|{v}|{}|{}|{}{}",
                args.delivery,
                args.link,
                args.seed.map_or("-".to_string(), |s| s.to_string()),
                clock.key_suffix()
            );
            if done.contains(&key) {
                continue;
            }
            let (ok, rec) = run_table2(&mc_host, args, &clock, v, &key, &logs)?;
            append(&args.results, &rec)?;
            if ok && measure_paper {
                protocol = protocol_scale(&rec).or(protocol);
            }
            eprintln!(
                "Table II micro-benchmark under CSM-{}: {}",
                v.to_uppercase(),
                if ok { "ok" } else { "failed" }
            );
            if !ok {
                failed += 1;
            }
        }
    }
    let protocol = match (clock.scale, protocol) {
        _ if clock.paper_is_committed() => {
            eprintln!(
                "counted work on the paper's processor: the committed rates \
                 (firmware_model::abi::reference::PAPER, scripts/calibrate-work.sh --paper)"
            );
            None
        }
        (CpuScale::Paper, None) => {
            return Err(ReportError::NoProtocolScale {
                path: args.results.clone(),
            })
        }
        (CpuScale::Paper, Some(p)) => {
            eprintln!(
                "protocol work at {p:.1} virtual ns per ns of CPU time here (Table II: the paper's \
                 twin and diffs over this host's)"
            );
            Some(p)
        }
        _ => None,
    };
    let mut progress = Progress::new(runs.len());
    for spec in &runs {
        if done.contains(&spec.key()) {
            progress.skipped(spec);
            continue;
        }
        let scale = if clock.paper_is_committed() {
            committed_paper_scales(&spec.app)
        } else {
            scales
                .get(&spec.app)
                .copied()
                .zip(protocol)
                .map(|(cpu, protocol)| PaperScales { cpu, protocol })
        };
        if clock.scale == CpuScale::Paper && scale.is_none() && !(spec.baseline && measure_paper) {
            progress.no_scale(spec);
            failed += 1;
            continue;
        }
        progress.start(spec);
        let o = run_one(&mc_host, spec, &logs, args.timeout, scale)?;
        append(&args.results, &o.record)?;
        if spec.baseline && o.ok && measure_paper {
            if let Some(s) = scale_from(&o.record, &spec.app) {
                scales.insert(spec.app.clone(), s);
            }
        }
        let times = &o.record["times"];
        progress.finished(
            spec,
            o.ok,
            o.wall_s,
            times["compute_s"].as_f64(),
            times["predicted_s"].as_f64(),
        );
        if !o.ok {
            failed += 1;
        }
    }
    if failed > 0 {
        return Err(ReportError::RunsFailed {
            failed,
            runs: runs.len(),
            logs,
        });
    }
    Ok(())
}
