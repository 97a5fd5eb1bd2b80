//! Reading a results file back: one record per line (the guest's record
//! completed by the runner, or a failure record), the latest record of each
//! run key, and the questions tables and charts ask of them.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::{Map, Value};

use crate::clock::TimeBasis;
use crate::error::ReportError;
use crate::matrix::{ClusterShape, APPS};

/// One line of a results file.
#[derive(Clone, Debug, PartialEq)]
pub struct RunRecord {
    pub v: Value,
}

impl RunRecord {
    fn str(&self, k: &str) -> Option<&str> {
        self.v.get(k).and_then(Value::as_str)
    }
    fn run(&self, k: &str) -> Option<&Value> {
        self.v.get("run").and_then(|r| r.get(k))
    }
    pub fn app(&self) -> &str {
        self.str("app").unwrap_or("?")
    }
    pub fn preset(&self) -> String {
        self.str("preset").unwrap_or("default").to_string()
    }
    /// The variant the guest reports (or the one asked for, if it failed).
    pub fn variant(&self) -> String {
        self.str("variant")
            .or_else(|| self.run("requested_variant").and_then(Value::as_str))
            .unwrap_or("default")
            .to_string()
    }
    pub fn shape(&self) -> Option<ClusterShape> {
        let n = u32::try_from(self.v.get("nodes")?.as_u64()?).ok()?;
        let t = u32::try_from(self.v.get("threads")?.as_u64()?).ok()?;
        // Records before 1L with several threads have no levels: 2L.
        let levels = self.v.get("levels").and_then(Value::as_u64).unwrap_or(2);
        Some(ClusterShape {
            nodes: n,
            threads: t,
            one_level: levels == 1 && t > 1,
        })
    }
    pub fn key(&self) -> Option<&str> {
        self.run("key").and_then(Value::as_str)
    }
    pub fn ok(&self) -> bool {
        self.run("status").and_then(Value::as_str) == Some("ok")
    }
    pub fn baseline(&self) -> bool {
        self.run("baseline").and_then(Value::as_bool) == Some(true)
    }
    pub fn log(&self) -> Option<&str> {
        self.run("log").and_then(Value::as_str)
    }
    /// A time the record carries under `times` (see [`TimeBasis`]).
    pub fn time(&self, k: &str) -> Option<f64> {
        self.v.get("times")?.get(k)?.as_f64()
    }
    pub fn compute_s(&self) -> Option<f64> {
        self.time("compute_s")
    }
    pub fn sequential_s(&self) -> Option<f64> {
        self.time("sequential_s")
    }
    /// A cluster-total counter.
    pub fn stat(&self, name: &str) -> Option<u64> {
        self.v.get("stats")?.get("total")?.get(name)?.as_u64()
    }
    pub fn page_size(&self) -> u64 {
        self.v
            .get("page_size")
            .and_then(Value::as_u64)
            .unwrap_or(8192)
    }
    /// Bytes the protocol moved: whole pages fetched plus diff runs.
    pub fn data_bytes(&self) -> Option<u64> {
        Some(self.stat("page_transfers")? * self.page_size() + self.stat("diff_bytes")?)
    }
    /// Shared data the problem allocates (the heap, at least 1 MiB, if the
    /// record predates that field).
    pub fn footprint_bytes(&self) -> Option<u64> {
        ["footprint_bytes", "heap_bytes"]
            .iter()
            .find_map(|k| self.v.get(*k).and_then(Value::as_u64))
    }
    /// `n 128, block 16`.
    pub fn problem(&self) -> String {
        match self.v.get("problem").and_then(Value::as_object) {
            Some(m) => m
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", "),
            None => String::from("?"),
        }
    }
    pub fn cores(&self) -> Option<u64> {
        self.run("host")?.get("cores")?.as_u64()
    }
    /// 1-minute load averages before and after the run.
    pub fn loads(&self) -> Vec<f64> {
        ["load_before", "load_after"]
            .iter()
            .filter_map(|k| self.run("host")?.get(k)?.get(0)?.as_f64())
            .collect()
    }
    /// The DSM protocol; records made before the field are Cashmere's.
    pub fn protocol(&self) -> &str {
        self.str("protocol").unwrap_or("cashmere")
    }
    pub fn link(&self) -> String {
        self.str("link").unwrap_or("?").to_string()
    }
    pub fn delivery(&self) -> String {
        self.str("delivery").unwrap_or("?").to_string()
    }
    /// Counters cover the computation only (not verification).
    pub fn counters_at_compute_end(&self) -> bool {
        self.str("counters_until") == Some("compute_end")
    }
    /// More application threads than the host has cores (the protocol
    /// threads and the hub come on top).
    pub fn oversubscribed(&self) -> bool {
        match (self.shape(), self.cores()) {
            (Some(s), Some(c)) => u64::from(s.processors()) > c,
            _ => false,
        }
    }
    /// Cluster-total time breakdown by component (seconds), when recorded.
    pub fn breakdown(&self) -> Option<&Map<String, Value>> {
        self.v.get("breakdown")?.get("total")?.as_object()
    }
    /// A Table II micro-benchmark record (`mc-guest bench csm --json`), not
    /// an application run.
    pub fn is_table2(&self) -> bool {
        self.str("kind") == Some("table2")
    }
    /// Application threads of the run (nodes x threads), 1 if unknown.
    pub fn processors(&self) -> f64 {
        self.shape()
            .map_or(1.0, |s| f64::from(s.processors().max(1)))
    }
}

/// Every record of `path`, in file order.
pub fn load(path: &Path) -> Result<Vec<RunRecord>, ReportError> {
    let text = std::fs::read_to_string(path).map_err(ReportError::io(path))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l)
                .map(|v| RunRecord { v })
                .map_err(|source| ReportError::Parse {
                    path: path.to_path_buf(),
                    line: i + 1,
                    source,
                })
        })
        .collect()
}

/// The record field (under `times`) of the sequential program's CPU time.
const SEQUENTIAL_CPU: &str = "sequential_cpu_s";
/// The record field (under `times`) of a virtual-clock run's CPU scale.
const CPU_SCALE: &str = "cpu_scale";

/// A run's speedup, or why it has none.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Speedup {
    Value(f64),
    Failed,
    /// Wall-clock times with more application threads than cores.
    Oversubscribed,
    /// No sequential time or no time of the run.
    NoBaseline,
}

/// The records a report shows: the latest of each run key, and the clock
/// their times are read from.
pub struct ResultSet {
    pub records: Vec<RunRecord>,
    /// Table II micro-benchmark records (`kind: table2`), latest per key.
    pub table2: Vec<RunRecord>,
    pub basis: TimeBasis,
}

impl ResultSet {
    pub fn new(all: Vec<RunRecord>) -> ResultSet {
        let mut records: Vec<RunRecord> = Vec::new();
        let mut table2: Vec<RunRecord> = Vec::new();
        for r in all {
            let list = if r.is_table2() {
                &mut table2
            } else {
                &mut records
            };
            match r
                .key()
                .and_then(|k| list.iter().position(|x| x.key() == Some(k)))
            {
                Some(i) => list[i] = r,
                None => list.push(r),
            }
        }
        ResultSet {
            records,
            table2,
            basis: TimeBasis::default(),
        }
    }

    /// The same records, their times read from `basis`.
    pub fn with_basis(self, basis: TimeBasis) -> ResultSet {
        ResultSet { basis, ..self }
    }

    /// The records of one preset only (Table II's records kept).
    pub fn only_preset(&self, preset: &str) -> ResultSet {
        ResultSet {
            records: self
                .records
                .iter()
                .filter(|r| r.preset() == preset)
                .cloned()
                .collect(),
            table2: self.table2.clone(),
            basis: self.basis,
        }
    }

    /// A run's computation time on this set's clock.
    pub fn compute_s(&self, r: &RunRecord) -> Option<f64> {
        r.time(self.basis.compute_field())
    }

    /// (application, preset) pairs, in Table III's order.
    pub fn apps(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        let rank = |a: &str| APPS.iter().position(|x| *x == a).unwrap_or(APPS.len());
        for r in &self.records {
            let k = (r.app().to_string(), r.preset());
            if !out.contains(&k) {
                out.push(k);
            }
        }
        out.sort_by_key(|(a, p)| (rank(a), a.clone(), p.clone()));
        out
    }

    /// Variants in the order they first appear (baselines aside).
    pub fn variants(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for r in self.records.iter().filter(|r| !r.baseline()) {
            let v = r.variant();
            if !out.contains(&v) {
                out.push(v);
            }
        }
        out
    }

    /// Cluster shapes of the non-baseline runs, smallest first.
    pub fn shapes(&self) -> Vec<ClusterShape> {
        let s: BTreeSet<(u32, u32, u32, bool)> = self
            .records
            .iter()
            .filter(|r| !r.baseline())
            .filter_map(RunRecord::shape)
            .map(|s| (s.processors(), s.threads, s.nodes, s.one_level))
            .collect();
        s.into_iter()
            .map(|(_, t, n, one_level)| ClusterShape {
                nodes: n,
                threads: t,
                one_level,
            })
            .collect()
    }

    /// The latest successful sequential baseline of an application and
    /// preset that has a sequential time on this set's clock.
    pub fn baseline(&self, app: &str, preset: &str) -> Option<&RunRecord> {
        self.records.iter().rev().find(|r| {
            r.baseline()
                && r.ok()
                && r.app() == app
                && r.preset() == preset
                && match self.basis {
                    TimeBasis::Wall => r.time(TimeBasis::Wall.sequential_field()).is_some(),
                    TimeBasis::Predicted => {
                        r.time(SEQUENTIAL_CPU).is_some()
                            || r.time(TimeBasis::Predicted.sequential_field()).is_some()
                    }
                }
        })
    }

    /// The CPU scale the parallel runs of an application used (at the
    /// `paper` scale it differs from application to application, and the
    /// baseline itself ran at 1).
    fn app_scale(&self, app: &str, preset: &str) -> Option<f64> {
        self.records
            .iter()
            .rev()
            .filter(|r| !r.baseline() && r.ok() && r.app() == app && r.preset() == preset)
            .find_map(|r| r.time(CPU_SCALE))
    }

    /// The CPU and protocol scales the runs of an application and preset
    /// used (virtual-clock runs; the protocol's is the CPU scale in records
    /// made before it had one of its own).
    pub fn scales(&self, app: &str, preset: &str) -> Option<(f64, f64)> {
        let r = self
            .records
            .iter()
            .rev()
            .find(|r| !r.baseline() && r.ok() && r.app() == app && r.preset() == preset)?;
        let cpu = r.time(CPU_SCALE)?;
        Some((cpu, r.time("protocol_scale").unwrap_or(cpu)))
    }

    pub fn get(
        &self,
        app: &str,
        preset: &str,
        variant: &str,
        shape: ClusterShape,
    ) -> Option<&RunRecord> {
        self.records.iter().rev().find(|r| {
            !r.baseline()
                && r.app() == app
                && r.preset() == preset
                && r.variant() == variant
                && r.shape() == Some(shape)
                // Seed 000's tables are Cashmere's (seed001.rs shows HLRC).
                && r.protocol() == "cashmere"
        })
    }

    /// The sequential program's time for an application and preset: on
    /// the virtual clock, its CPU time at the scale the application's runs
    /// used.
    pub fn sequential_s(&self, app: &str, preset: &str) -> Option<f64> {
        self.sequential_at(app, preset, self.app_scale(app, preset))
    }

    fn sequential_at(&self, app: &str, preset: &str, scale: Option<f64>) -> Option<f64> {
        let b = self.baseline(app, preset)?;
        match (self.basis, b.time(SEQUENTIAL_CPU), scale) {
            (TimeBasis::Predicted, Some(cpu), Some(scale)) => Some(cpu * scale),
            _ => b.time(self.basis.sequential_field()),
        }
    }

    /// seq / parallel computation time, unless oversubscribed or missing.
    pub fn speedup(&self, r: &RunRecord) -> Option<f64> {
        match self.speedup_of(r) {
            Speedup::Value(v) => Some(v),
            _ => None,
        }
    }

    /// A run's speedup, or why it has none: what tables and charts show.
    pub fn speedup_of(&self, r: &RunRecord) -> Speedup {
        if !r.ok() {
            return Speedup::Failed;
        }
        if self.basis.host_bound() && r.oversubscribed() {
            return Speedup::Oversubscribed;
        }
        let seq = self.sequential_at(r.app(), &r.preset(), r.time(CPU_SCALE));
        match (seq, self.compute_s(r)) {
            (Some(seq), Some(t)) => Speedup::Value(seq / t),
            _ => Speedup::NoBaseline,
        }
    }

    /// The wall-clock seconds the runs took (each run's `run.wall_s`, the
    /// sequential baselines and Table II's runs included), per preset in
    /// Table III's order, then the whole.
    pub fn run_time(&self) -> (Vec<(String, f64)>, f64) {
        let wall = |r: &RunRecord| r.run("wall_s").and_then(Value::as_f64).unwrap_or(0.0);
        let mut per: Vec<(String, f64)> = Vec::new();
        for r in &self.records {
            let p = r.preset();
            match per.iter_mut().find(|(x, _)| *x == p) {
                Some((_, t)) => *t += wall(r),
                None => per.push((p, wall(r))),
            }
        }
        per.sort_by_key(|(p, _)| (crate::matrix::preset_rank(p), p.clone()));
        let all =
            per.iter().map(|(_, t)| t).sum::<f64>() + self.table2.iter().map(wall).sum::<f64>();
        (per, all)
    }

    pub fn failed(&self) -> Vec<&RunRecord> {
        self.records.iter().filter(|r| !r.ok()).collect()
    }

    /// What every table and chart says under it: the clock its times come
    /// from, then the host.
    pub fn time_line(&self) -> String {
        format!("{}; {}", self.basis.label(), self.host_line())
    }

    /// The host line every table and chart carries.
    pub fn host_line(&self) -> String {
        let cores: BTreeSet<u64> = self.records.iter().filter_map(RunRecord::cores).collect();
        let loads: Vec<f64> = self.records.iter().flat_map(RunRecord::loads).collect();
        let lo = loads.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = loads.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let set = |f: &dyn Fn(&RunRecord) -> String| {
            let s: BTreeSet<String> = self.records.iter().map(f).collect();
            s.into_iter().collect::<Vec<_>>().join("/")
        };
        let cores = cores
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join("/");
        let load = if loads.is_empty() {
            "load unknown".to_string()
        } else {
            format!("1-min load average {lo:.1}-{hi:.1} during the runs")
        };
        format!(
            "host: {cores} cores, {load}; link {}, delivery {}",
            set(&|r| r.link()),
            set(&|r| r.delivery())
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rec(v: Value) -> RunRecord {
        RunRecord { v }
    }

    #[test]
    fn latest_record_of_a_key_wins_and_speedups_need_a_baseline_and_cores() {
        let base = json!({"app":"clu","preset":"small","nodes":1,"threads":1,
            "times":{"compute_s":1.0,"sequential_s":0.8},
            "run":{"key":"b","status":"ok","baseline":true,"host":{"cores":2,"load_before":[1.0,1.0,1.0]}}});
        let fail = json!({"app":"clu","preset":"small","variant":"dms","nodes":2,"threads":1,
            "run":{"key":"k","status":"failed","host":{"cores":2}}});
        let ok = json!({"app":"clu","preset":"small","variant":"dms","nodes":2,"threads":1,
            "page_size":8192,"times":{"compute_s":0.4},
            "stats":{"total":{"page_transfers":2,"diff_bytes":100}},
            "run":{"key":"k","status":"ok","host":{"cores":2,"load_after":[3.5,1.0,1.0]}}});
        let over = json!({"app":"clu","preset":"small","variant":"dms","nodes":4,"threads":1,
            "times":{"compute_s":0.4},"run":{"key":"o","status":"ok","host":{"cores":2}}});
        let set = ResultSet::new(vec![rec(base), rec(fail), rec(ok), rec(over)]);
        assert_eq!(set.records.len(), 3);
        let r = set
            .get("clu", "small", "dms", "2:1".parse().unwrap())
            .unwrap();
        assert!(r.ok());
        assert_eq!(r.data_bytes(), Some(2 * 8192 + 100));
        assert_eq!(set.speedup(r), Some(2.0));
        let o = set
            .get("clu", "small", "dms", "4:1".parse().unwrap())
            .unwrap();
        assert!(o.oversubscribed());
        assert_eq!(set.speedup(o), None);
        assert_eq!(set.variants(), vec!["dms".to_string()]);
        assert!(set
            .host_line()
            .contains("2 cores, 1-min load average 1.0-3.5"));
    }

    #[test]
    fn the_clock_chooses_the_times_the_guard_and_the_label() {
        let base = json!({"app":"sor","preset":"small","nodes":1,"threads":1,
            "times":{"compute_s":1.0,"sequential_s":2.0,"sequential_predicted_s":1.5},
            "run":{"key":"b","status":"ok","baseline":true,"host":{"cores":2}}});
        let over = json!({"app":"sor","preset":"small","variant":"dms","nodes":4,"threads":1,
            "times":{"compute_s":1.0,"predicted_s":0.5},
            "run":{"key":"o","status":"ok","host":{"cores":2}}});
        let wall = ResultSet::new(vec![rec(base), rec(over)]);
        let shape = "4:1".parse().unwrap();
        let r = wall.get("sor", "small", "dms", shape).unwrap().clone();
        assert_eq!(wall.speedup_of(&r), Speedup::Oversubscribed);
        assert_eq!(wall.compute_s(&r), Some(1.0));
        assert!(wall.time_line().starts_with("times are wall-clock"));
        let predicted = wall.with_basis(TimeBasis::Predicted);
        assert_eq!(predicted.compute_s(&r), Some(0.5));
        assert_eq!(predicted.speedup_of(&r), Speedup::Value(3.0));
        assert!(predicted.time_line().starts_with("times are predicted"));
        assert!(predicted.time_line().contains("host: 2 cores"));
    }

    #[test]
    fn a_predicted_speedup_takes_the_sequential_cpu_time_at_the_run_s_scale() {
        // The `paper` scale: the baseline ran at 1, the runs at 10.
        let base = json!({"app":"sor","preset":"paper","nodes":1,"threads":1,
            "times":{"compute_s":2.2,"sequential_s":2.0,"sequential_cpu_s":1.8,
                     "cpu_scale":1.0,"sequential_predicted_s":1.8,"predicted_s":1.9},
            "run":{"key":"b","status":"ok","baseline":true,"host":{"cores":2}}});
        let run = json!({"app":"sor","preset":"paper","variant":"dms","nodes":2,"threads":1,
            "times":{"compute_s":1.0,"predicted_s":9.0,"cpu_scale":10.0},
            "run":{"key":"r","status":"ok","host":{"cores":2}}});
        let set = ResultSet::new(vec![rec(base), rec(run)]).with_basis(TimeBasis::Predicted);
        let r = set
            .get("sor", "paper", "dms", "2:1".parse().unwrap())
            .unwrap()
            .clone();
        assert_eq!(set.speedup_of(&r), Speedup::Value(2.0));
        assert_eq!(set.sequential_s("sor", "paper"), Some(18.0));
        // A wall-clock baseline has no sequential CPU time: no predicted
        // speedup from it.
        let wall_base = json!({"app":"sor","preset":"paper","nodes":1,"threads":1,
            "times":{"compute_s":2.2,"sequential_s":2.0},
            "run":{"key":"w","status":"ok","baseline":true,"host":{"cores":2}}});
        let run2 = json!({"app":"sor","preset":"paper","variant":"dms","nodes":2,"threads":1,
            "times":{"compute_s":1.0,"predicted_s":9.0,"cpu_scale":10.0},
            "run":{"key":"r","status":"ok","host":{"cores":2}}});
        let set = ResultSet::new(vec![rec(wall_base), rec(run2)]).with_basis(TimeBasis::Predicted);
        let r = set
            .get("sor", "paper", "dms", "2:1".parse().unwrap())
            .unwrap()
            .clone();
        assert_eq!(set.speedup_of(&r), Speedup::NoBaseline);
    }
}
