//! `report render`: a results file into report.md and the SVG charts.

use std::path::{Path, PathBuf};

use crate::clock::TimeBasis;
use crate::error::ReportError;
use crate::results::{self, ResultSet};
use crate::{charts, tables};

/// What `report render` wrote, and from which clock.
#[derive(Debug)]
pub struct Rendered {
    pub files: Vec<PathBuf>,
    pub basis: TimeBasis,
    /// Predicted times were the default but the file holds none (its runs
    /// kept the wall clock), so the report shows wall-clock times.
    pub fell_back_to_wall: bool,
}

/// Write report.md and the charts for `results` into `out`, their times on
/// `basis`; `None`: predicted times when the file has them (the default),
/// else wall-clock ones, said in [`Rendered::fell_back_to_wall`].
pub fn render(
    results: &Path,
    out: &Path,
    basis: Option<TimeBasis>,
) -> Result<Rendered, ReportError> {
    let records = results::load(results)?;
    if records.is_empty() {
        return Err(ReportError::NoRuns {
            path: results.to_path_buf(),
        });
    }
    let predicted = records
        .iter()
        .any(|r| r.time(TimeBasis::Predicted.compute_field()).is_some());
    let (basis, fell_back_to_wall) = match basis {
        Some(TimeBasis::Predicted) if !predicted => {
            return Err(ReportError::NoPredictedTimes {
                path: results.to_path_buf(),
            })
        }
        Some(b) => (b, false),
        None if predicted => (TimeBasis::Predicted, false),
        None => (TimeBasis::Wall, true),
    };
    std::fs::create_dir_all(out).map_err(ReportError::io(out))?;
    let set = ResultSet::new(records).with_basis(basis);
    let mut files = charts::write_all(&set, out)?;
    let md = out.join("report.md");
    let charts: Vec<String> = files
        .iter()
        .filter_map(|f| f.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    std::fs::write(&md, tables::report_md(&set, results, &charts)).map_err(ReportError::io(&md))?;
    files.insert(0, md);
    Ok(Rendered {
        files,
        basis,
        fell_back_to_wall,
    })
}
