//! What `report run` runs: applications x protocol variants x cluster
//! shapes at one preset, plus one sequential baseline per application (a
//! 1-node, 1-thread run that also times the sequential program: Table
//! III's time and every speedup's numerator). Each run has a key; a results
//! file that already holds a key's successful record makes the run done.

use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::run_clock::ClockSpec;

/// The applications of seed 000 Table III, as `mc-guest csm` names them.
pub const APPS: [&str; 10] = [
    "barnes",
    "clu",
    "lu",
    "em3d",
    "gauss",
    "ilink",
    "sor",
    "tsp",
    "water-nsquared",
    "water-spatial",
];

/// Seed 001's seven applications (its Table 5), in the table's order.
pub const SEED001_APPS: [&str; 7] = [
    "barnes",
    "fft",
    "lu",
    "ocean",
    "radix",
    "water-nsquared",
    "water-spatial",
];

pub const PRESETS: [&str; 3] = ["small", "medium", "paper"];

/// Seed 001's presets: SPLASH-2's default sizes, then its Table 1's
/// (`mc-guest csm --preset`), for [`SEED001_APPS`] only.
pub const SEED001_PRESETS: [&str; 2] = ["seed001-scaled", "seed001"];

/// Where `preset` sorts among [`PRESETS`] then [`SEED001_PRESETS`]
/// (smallest problem first); any other name after them.
pub fn preset_rank(preset: &str) -> usize {
    PRESETS
        .iter()
        .chain(&SEED001_PRESETS)
        .position(|p| *p == preset)
        .unwrap_or(PRESETS.len() + SEED001_PRESETS.len())
}

/// What is wrong with a matrix on the command line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MatrixError {
    #[error("{0:?} is not a configuration: NODES:THREADS, e.g. 2:1 or 4:2, with /1L for the one-level protocol (4:2/1L)")]
    BadShape(String),
    #[error("{0:?} is not an application (known: {apps}, fft, ocean, radix; or all, seed001)", apps = APPS.join(", "))]
    UnknownApp(String),
    #[error("{0:?} is not a preset (small, medium, paper, seed001-scaled, seed001)")]
    UnknownPreset(String),
    #[error("no {0} given")]
    Empty(&'static str),
}

/// A cluster: nodes, and application threads per node. Seed 000 writes
/// configurations as processors:processors-per-node; 2:2 here (2 nodes, 2
/// threads each) is the paper's 4:2. `2:2/1L` runs the one-level protocol
/// on it (each thread its own protocol node, `mc-guest csm --levels 1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ClusterShape {
    pub nodes: u32,
    pub threads: u32,
    /// CSM-1L with several threads per node (one thread per node is 1L
    /// anyway).
    pub one_level: bool,
}

impl ClusterShape {
    pub fn processors(&self) -> u32 {
        self.nodes * self.threads
    }
    /// The paper's notation, processors:per-node.
    pub fn paper(&self) -> String {
        format!("{}:{}", self.processors(), self.threads)
    }
    /// 1L with one thread per node or when asked for, 2L with more (seed
    /// 000 s.3.3).
    pub fn levels(&self) -> &'static str {
        if self.threads > 1 && !self.one_level {
            "2L"
        } else {
            "1L"
        }
    }
    /// 1L with several threads per node: `--levels 1`.
    pub fn one_level_threads(&self) -> bool {
        self.one_level && self.threads > 1
    }
}

impl std::fmt::Display for ClusterShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.nodes, self.threads)?;
        if self.one_level_threads() {
            f.write_str("/1L")?;
        }
        Ok(())
    }
}

impl FromStr for ClusterShape {
    type Err = MatrixError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || MatrixError::BadShape(s.to_string());
        let (shape, levels) = match s.trim().split_once('/') {
            Some((shape, l)) => (shape, Some(l.trim().to_ascii_uppercase())),
            None => (s.trim(), None),
        };
        let one_level = match levels.as_deref() {
            None | Some("2L") => false,
            Some("1L") => true,
            Some(_) => return Err(bad()),
        };
        let (n, t) = shape.split_once(':').ok_or_else(bad)?;
        let nodes: u32 = n.parse().map_err(|_| bad())?;
        let threads: u32 = t.parse().map_err(|_| bad())?;
        if !(1..=64).contains(&nodes) || !(1..=64).contains(&threads) {
            return Err(bad());
        }
        Ok(ClusterShape {
            nodes,
            threads,
            // 1L with one thread per node is the same run as 2L.
            one_level: one_level && threads > 1,
        })
    }
}

/// Where a run's page homes come from (seed 000 s.3.4.1: "we captured the
/// first-touch assignments from CSM-DMS and used them to explicitly assign
/// home nodes in the other protocols").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HomesRole {
    /// First touch, nothing recorded (baselines; `--first-touch-homes`).
    FirstTouch,
    /// CSM-DMS: first touch, recorded for the other variants of its
    /// application, preset and shape (`mc-guest csm --record-homes`).
    Record,
    /// Another variant: the homes its CSM-DMS run recorded, imposed
    /// (`mc-guest csm --homes`); first touch if that run left none.
    Impose,
}

/// One run of the matrix.
#[derive(Clone, Debug, PartialEq)]
pub struct RunSpec {
    pub app: String,
    pub preset: Option<String>,
    /// Passed as `--variant` when given.
    pub variant: Option<String>,
    pub shape: ClusterShape,
    /// The sequential baseline (1:1, `--sequential`).
    pub baseline: bool,
    pub delivery: String,
    pub seed: Option<u64>,
    pub link: String,
    pub homes: HomesRole,
    /// The clock the run's guests keep.
    pub clock: ClockSpec,
    /// The DSM protocol (`mc-guest csm --protocol`); None: Cashmere,
    /// mc-guest's default.
    pub protocol: Option<String>,
}

/// Whether `variant` (`None`: mc-guest's default) is CSM-DMS.
fn is_dms(variant: Option<&str>) -> bool {
    variant.is_none_or(|v| v == "dms")
}

impl RunSpec {
    /// The file the CSM-DMS run of this run's application, preset and
    /// shape records its homes in, in the directory `dir` of the run logs.
    pub fn homes_file(&self, dir: &Path) -> PathBuf {
        let dms = RunSpec {
            variant: Some("dms".into()),
            baseline: false,
            homes: HomesRole::Record,
            ..self.clone()
        };
        dir.join(format!("{}.homes", dms.file_stem()))
    }

    /// What identifies the run in a results file.
    pub fn key(&self) -> String {
        format!(
            "{}|{}|{}|{}|{}|{}|{}",
            self.app,
            self.preset.as_deref().unwrap_or("default"),
            if self.baseline {
                "baseline"
            } else {
                self.variant.as_deref().unwrap_or("default")
            },
            self.shape,
            self.delivery,
            self.link,
            self.seed.map_or("-".to_string(), |s| s.to_string()),
        ) + &self.clock.key_suffix()
            // Cashmere's runs keep the keys they had before protocols.
            + &self.protocol.as_ref().map_or(String::new(), |p| format!("|{p}"))
    }

    /// A file name for the run's log.
    pub fn file_stem(&self) -> String {
        self.key()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    }

    /// `mc-host run` arguments before `--`; `scale` is the application's
    /// CPU scale when the matrix's is `paper`.
    pub fn host_args(
        &self,
        timeout_s: u64,
        scale: Option<crate::run_clock::PaperScales>,
    ) -> Vec<String> {
        let mut a = vec![
            "run".to_string(),
            "--nodes".into(),
            self.shape.nodes.to_string(),
            "--threads".into(),
            self.shape.threads.to_string(),
            "--delivery".into(),
            self.delivery.clone(),
            "--link".into(),
            self.link.clone(),
            "--timeout".into(),
            timeout_s.to_string(),
        ];
        if let Some(s) = self.seed {
            a.extend(["--seed".into(), s.to_string()]);
        }
        a.extend(self.clock.host_args(scale));
        a
    }

    /// `mc-guest csm ...` with the record going to `json`, and the homes
    /// recorded into, or imposed from, [`RunSpec::homes_file`] beside it
    /// (imposed only if the file is there).
    pub fn guest_args(&self, json: &Path) -> Vec<String> {
        let mut a = vec!["mc-guest".to_string(), "csm".into(), self.app.clone()];
        if let Some(p) = &self.preset {
            a.extend(["--preset".into(), p.clone()]);
        }
        if self.baseline {
            a.push("--sequential".into());
        } else if let Some(v) = &self.variant {
            a.extend(["--variant".into(), v.clone()]);
        }
        if let Some(p) = &self.protocol {
            a.extend(["--protocol".into(), p.clone()]);
        }
        if self.shape.one_level_threads() {
            a.extend(["--levels".into(), "1".into()]);
        }
        let dir = json.parent().unwrap_or(Path::new("."));
        match self.homes {
            HomesRole::FirstTouch => {}
            HomesRole::Record => {
                let f = self.homes_file(dir);
                a.extend(["--record-homes".into(), f.display().to_string()]);
            }
            HomesRole::Impose => {
                let f = self.homes_file(dir);
                if f.exists() {
                    a.extend(["--homes".into(), f.display().to_string()]);
                }
            }
        }
        // Each thread's time breakdown goes into the record (Figs. 2-3).
        a.push("--stats".into());
        a.extend(["--json".into(), json.display().to_string()]);
        a
    }
}

/// The shape of a matrix, from the command line.
#[derive(Clone, Debug)]
pub struct Matrix {
    pub apps: Vec<String>,
    pub variants: Option<Vec<String>>,
    pub shapes: Vec<ClusterShape>,
    pub preset: Option<String>,
    pub delivery: String,
    pub seed: Option<u64>,
    pub link: String,
    pub baselines: bool,
    /// Impose CSM-DMS's first-touch homes on the other variants (seed 000
    /// s.3.4.1), running CSM-DMS on each shape first even if not asked for.
    pub impose_homes: bool,
    pub clock: ClockSpec,
    /// The DSM protocol of every run (None: Cashmere).
    pub protocol: Option<String>,
}

/// Comma-separated applications; `all` for the ten, `seed001` for seed
/// 001's seven.
pub fn parse_apps(list: &str) -> Result<Vec<String>, MatrixError> {
    let mut out = Vec::new();
    for a in list.split(',').map(str::trim).filter(|a| !a.is_empty()) {
        if a == "all" {
            out.extend(APPS.iter().map(|s| s.to_string()));
        } else if a == "seed001" {
            out.extend(SEED001_APPS.iter().map(|s| s.to_string()));
        } else if APPS.contains(&a) || SEED001_APPS.contains(&a) {
            out.push(a.to_string());
        } else {
            return Err(MatrixError::UnknownApp(a.to_string()));
        }
    }
    let mut seen = Vec::new();
    out.retain(|a| {
        let first = !seen.contains(a);
        seen.push(a.clone());
        first
    });
    if out.is_empty() {
        return Err(MatrixError::Empty("applications"));
    }
    Ok(out)
}

pub fn parse_shapes(list: &str) -> Result<Vec<ClusterShape>, MatrixError> {
    let shapes: Vec<ClusterShape> = list
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    if shapes.is_empty() {
        return Err(MatrixError::Empty("configurations"));
    }
    Ok(shapes)
}

pub fn check_preset(p: &str) -> Result<String, MatrixError> {
    if PRESETS.contains(&p) || SEED001_PRESETS.contains(&p) {
        Ok(p.to_string())
    } else {
        Err(MatrixError::UnknownPreset(p.to_string()))
    }
}

impl Matrix {
    /// Every run, application by application: its baseline first, then each
    /// variant on each shape.
    pub fn runs(&self) -> Vec<RunSpec> {
        let base = |app: &str, variant: Option<String>, shape, baseline, homes| RunSpec {
            app: app.to_string(),
            preset: self.preset.clone(),
            variant,
            shape,
            baseline,
            delivery: self.delivery.clone(),
            seed: self.seed,
            link: self.link.clone(),
            homes,
            clock: self.clock,
            protocol: self.protocol.clone(),
        };
        // Homes are recorded and imposed by Cashmere only.
        let cashmere = self.protocol.as_deref().is_none_or(|p| p == "cashmere");
        let impose_homes = self.impose_homes && cashmere;
        let mut variants: Vec<Option<String>> = match &self.variants {
            Some(v) => v.iter().cloned().map(Some).collect(),
            None => vec![None],
        };
        if impose_homes {
            // CSM-DMS first, so the others find its homes.
            if !variants.iter().any(|v| is_dms(v.as_deref())) {
                variants.push(Some("dms".into()));
            }
            variants.sort_by_key(|v| !is_dms(v.as_deref()));
        }
        let mut out = Vec::new();
        for app in &self.apps {
            if self.baselines {
                let one = ClusterShape {
                    nodes: 1,
                    threads: 1,
                    one_level: false,
                };
                out.push(base(app, None, one, true, HomesRole::FirstTouch));
            }
            for s in &self.shapes {
                for v in &variants {
                    let homes = match (impose_homes, is_dms(v.as_deref())) {
                        (false, _) => HomesRole::FirstTouch,
                        (true, true) => HomesRole::Record,
                        (true, false) => HomesRole::Impose,
                    };
                    out.push(base(app, v.clone(), *s, false, homes));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_parse_and_print_both_notations() {
        let s: ClusterShape = "2:2".parse().unwrap();
        assert_eq!((s.nodes, s.threads, s.processors()), (2, 2, 4));
        assert_eq!(s.paper(), "4:2");
        assert_eq!(s.levels(), "2L");
        let one: ClusterShape = "2:2/1l".parse().unwrap();
        assert_eq!((one.nodes, one.threads, one.levels()), (2, 2, "1L"));
        assert_eq!(one.to_string(), "2:2/1L");
        assert_ne!(one, s);
        let single: ClusterShape = "4:1/1L".parse().unwrap();
        assert_eq!(single, "4:1".parse().unwrap());
        for bad in ["2:2/3L", "2:2/", "2/1L"] {
            assert!(bad.parse::<ClusterShape>().is_err(), "{bad}");
        }
        assert_eq!(s.levels(), "2L");
        assert!("2".parse::<ClusterShape>().is_err());
        assert!("0:1".parse::<ClusterShape>().is_err());
        assert_eq!(parse_shapes("2:1, 4:1").unwrap().len(), 2);
        assert_eq!(
            parse_apps("clu,bogus"),
            Err(MatrixError::UnknownApp("bogus".into()))
        );
        assert_eq!(parse_apps("all").unwrap().len(), 10);
    }

    #[test]
    fn matrix_has_a_baseline_per_app_and_passes_the_variant() {
        let m = Matrix {
            apps: vec!["clu".into(), "sor".into()],
            variants: Some(vec!["dms".into()]),
            shapes: parse_shapes("2:1,2:2").unwrap(),
            preset: Some("small".into()),
            delivery: "eager".into(),
            seed: None,
            link: "unthrottled".into(),
            baselines: true,
            impose_homes: false,
            clock: ClockSpec::default(),
            protocol: None,
        };
        let runs = m.runs();
        assert_eq!(runs.len(), 6);
        assert!(runs[0].baseline && runs[0].shape.processors() == 1);
        let g = runs[1].guest_args(Path::new("/r.json"));
        assert_eq!(
            g.join(" "),
            "mc-guest csm clu --preset small --variant dms --stats --json /r.json"
        );
        assert!(runs[0]
            .guest_args(Path::new("/r"))
            .contains(&"--sequential".to_string()));
        assert_eq!(
            runs[1].key(),
            "clu|small|dms|2:1|eager|unthrottled|-|virtual@1@counted"
        );
        let keys: std::collections::HashSet<String> = runs.iter().map(RunSpec::key).collect();
        assert_eq!(keys.len(), runs.len());
        let host = runs[2].host_args(60, None).join(" ");
        assert!(host.starts_with("run --nodes 2 --threads 2"), "{host}");
        assert!(
            host.ends_with("--clock virtual --work counted --cpu-scale 1"),
            "{host}"
        );
        // A wall-clock run keeps the key it always had.
        let wall = RunSpec {
            clock: ClockSpec {
                clock: crate::run_clock::RunClock::Wall,
                ..ClockSpec::default()
            },
            ..runs[1].clone()
        };
        assert_eq!(wall.key(), "clu|small|dms|2:1|eager|unthrottled|-");
        assert!(!wall.host_args(60, None).contains(&"--clock".to_string()));
    }

    #[test]
    fn other_variants_run_after_dms_with_its_homes() {
        let m = Matrix {
            apps: vec!["sor".into()],
            variants: Some(vec!["ms".into(), "none".into()]),
            shapes: parse_shapes("2:1,2:2/1L").unwrap(),
            preset: Some("small".into()),
            delivery: "eager".into(),
            seed: None,
            link: "unthrottled".into(),
            baselines: false,
            impose_homes: true,
            clock: ClockSpec::default(),
            protocol: None,
        };
        let runs = m.runs();
        // CSM-DMS added, first on each shape.
        let order: Vec<String> = runs
            .iter()
            .map(|r| format!("{}@{}", r.variant.as_deref().unwrap(), r.shape))
            .collect();
        assert_eq!(
            order,
            [
                "dms@2:1",
                "ms@2:1",
                "none@2:1",
                "dms@2:2/1L",
                "ms@2:2/1L",
                "none@2:2/1L"
            ]
        );
        let dir = std::env::temp_dir().join(format!("mc-report-homes-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let json = dir.join("r.json");
        let rec = runs[0].guest_args(&json).join(" ");
        let file = runs[0].homes_file(&dir);
        assert!(
            rec.contains(&format!("--record-homes {}", file.display())),
            "{rec}"
        );
        assert_eq!(runs[1].homes_file(&dir), file);
        assert_ne!(runs[3].homes_file(&dir), file, "each shape its own");
        // Imposed only once the CSM-DMS run has left its homes.
        assert!(!runs[1].guest_args(&json).contains(&"--homes".to_string()));
        std::fs::write(&file, "nodes 2\npage_size 8192\npages 1\n").unwrap();
        let imp = runs[1].guest_args(&json).join(" ");
        assert!(
            imp.contains(&format!("--homes {}", file.display())),
            "{imp}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_hlrc_matrix_passes_the_protocol_and_records_no_homes() {
        let m = Matrix {
            apps: parse_apps("seed001").unwrap(),
            variants: None,
            shapes: parse_shapes("8:1").unwrap(),
            preset: Some(check_preset("seed001-scaled").unwrap()),
            delivery: "eager".into(),
            seed: None,
            link: "clan".into(),
            baselines: false,
            impose_homes: true,
            clock: ClockSpec::default(),
            protocol: Some("hlrc".into()),
        };
        let runs = m.runs();
        assert_eq!(runs.len(), 7);
        assert_eq!(runs[1].app, "fft");
        let g = runs[1].guest_args(Path::new("/r.json")).join(" ");
        assert_eq!(
            g,
            "mc-guest csm fft --preset seed001-scaled --protocol hlrc --stats --json /r.json"
        );
        assert_eq!(
            runs[1].key(),
            "fft|seed001-scaled|default|8:1|eager|clan|-|virtual@1@counted|hlrc"
        );
        assert_eq!(parse_apps("lu,seed001").unwrap().len(), 7);
    }
}
