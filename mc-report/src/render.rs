//! `report render`: a results file into report.md and the SVG charts.

use std::path::{Path, PathBuf};

use crate::error::ReportError;
use crate::results::{self, ResultSet};
use crate::{charts, tables};

/// Write report.md and the charts for `results` into `out`; returns the
/// files written.
pub fn render(results: &Path, out: &Path) -> Result<Vec<PathBuf>, ReportError> {
    let records = results::load(results)?;
    if records.is_empty() {
        return Err(ReportError::NoRuns {
            path: results.to_path_buf(),
        });
    }
    std::fs::create_dir_all(out).map_err(ReportError::io(out))?;
    let set = ResultSet::new(records);
    let mut files = charts::write_all(&set, out)?;
    let md = out.join("report.md");
    let charts: Vec<String> = files
        .iter()
        .filter_map(|f| f.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    std::fs::write(&md, tables::report_md(&set, results, &charts)).map_err(ReportError::io(&md))?;
    files.insert(0, md);
    Ok(files)
}
