//! `report run`'s progress on stderr: a bar while a run goes (on a
//! terminal), and one line per run when it ends, so a long matrix shows
//! where it is and what each run gave.

use std::io::{IsTerminal, Write};
use std::time::Instant;

use crate::matrix::RunSpec;

pub struct Progress {
    total: usize,
    done: usize,
    tty: bool,
    started: Instant,
}

/// `[####......]` for `done` of `total`, `width` wide.
pub fn bar(done: usize, total: usize, width: usize) -> String {
    let full = (done * width)
        .checked_div(total)
        .map_or(width, |f| f.min(width));
    format!("[{}{}]", "#".repeat(full), ".".repeat(width - full))
}

fn label(spec: &RunSpec) -> String {
    let what = if spec.baseline {
        "sequential baseline".to_string()
    } else {
        spec.variant.clone().unwrap_or_else(|| "default".into())
    };
    format!(
        "{} {} {} {} ({} {})",
        spec.app,
        spec.preset.as_deref().unwrap_or("default"),
        what,
        spec.shape,
        spec.shape.levels(),
        spec.delivery
    )
}

impl Progress {
    pub fn new(total: usize) -> Progress {
        Progress {
            total,
            done: 0,
            tty: std::io::stderr().is_terminal(),
            started: Instant::now(),
        }
    }

    fn counter(&self) -> String {
        let w = self.total.to_string().len();
        format!("[{:>w$}/{}]", self.done, self.total)
    }

    pub fn start(&self, spec: &RunSpec) {
        if self.tty {
            let mut e = std::io::stderr();
            let _ = write!(
                e,
                "\r{} {} {} ... ({:.0} s so far)\x1b[K",
                bar(self.done, self.total, 20),
                self.counter(),
                label(spec),
                self.started.elapsed().as_secs_f64()
            );
            let _ = e.flush();
        }
    }

    pub fn skipped(&mut self, spec: &RunSpec) {
        self.done += 1;
        self.line(&format!(
            "{} {}: already in the results, skipped",
            self.counter(),
            label(spec)
        ));
    }

    pub fn finished(
        &mut self,
        spec: &RunSpec,
        ok: bool,
        wall_s: f64,
        compute_s: Option<f64>,
        predicted_s: Option<f64>,
    ) {
        self.done += 1;
        let predicted = predicted_s.map_or(String::new(), |p| format!(", predicted {p:.3} s"));
        let how = match (ok, compute_s) {
            (true, Some(c)) => format!("ok in {wall_s:.1} s (computation {c:.3} s{predicted})"),
            (true, None) => format!("ok in {wall_s:.1} s"),
            (false, _) => format!("FAILED after {wall_s:.1} s"),
        };
        self.line(&format!("{} {}: {how}", self.counter(), label(spec)));
    }

    /// A run left out: the `paper` CPU scale of its application is not
    /// known, since its sequential baseline failed or was not run.
    pub fn no_scale(&mut self, spec: &RunSpec) {
        self.done += 1;
        self.line(&format!(
            "{} {}: NOT RUN: no `paper` CPU scale for {} (under CPU time: its sequential \
             baseline failed or was not run; under counted work: no committed rate, \
             scripts/calibrate-work.sh --paper)",
            self.counter(),
            label(spec),
            spec.app
        ));
    }

    fn line(&self, text: &str) {
        let mut e = std::io::stderr();
        if self.tty {
            let _ = writeln!(e, "\r{text}\x1b[K");
        } else {
            let _ = writeln!(e, "{text}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bar_fills_in_proportion() {
        assert_eq!(bar(0, 4, 8), "[........]");
        assert_eq!(bar(2, 4, 8), "[####....]");
        assert_eq!(bar(5, 4, 8), "[########]");
    }
}
