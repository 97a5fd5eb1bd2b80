//! The paper's own figures (seed 000 Tables III and IV), shown next to the
//! ones measured here.

/// Seed 000 Table III: problem size (with its data size) and sequential
/// time on a 600 MHz Alpha 21164A.
pub fn table3(app: &str) -> Option<(&'static str, f64)> {
    Some(match app {
        "barnes" => ("128K bodies (26 MB)", 120.4),
        "clu" => ("2048 x 2048 (33 MB)", 75.4),
        "lu" => ("2500 x 2500 (50 MB)", 143.8),
        "em3d" => ("64000 nodes (52 MB)", 30.6),
        "gauss" => ("2048 x 2048 (33 MB)", 234.8),
        "ilink" => ("CLP (15 MB)", 212.7),
        "sor" => ("3072 x 4096 (50 MB)", 36.2),
        "tsp" => ("17 cities (1 MB)", 1342.5),
        "water-nsquared" => ("9261 mols. (6 MB)", 332.6),
        "water-spatial" => ("9261 mols. (16 MB)", 20.2),
        _ => return None,
    })
}

/// Seed 000 Table IV, CSM-DMS at 32 processors: speedup, page transfers
/// (thousands), diffs (thousands).
pub fn table4_dms(app: &str) -> Option<(f64, f64, f64)> {
    Some(match app {
        "barnes" => (7.6, 66.0, 60.8),
        "clu" => (18.3, 8.3, 0.0),
        "lu" => (4.0, 44.1, 285.6),
        "em3d" => (13.5, 32.8, 7.1),
        "gauss" => (22.7, 38.2, 3.6),
        "ilink" => (12.5, 50.0, 12.0),
        "sor" => (31.2, 0.3, 1.4),
        "tsp" => (33.9, 12.6, 8.0),
        "water-nsquared" => (20.6, 31.5, 251.1),
        "water-spatial" => (7.7, 4.0, 6.2),
        _ => return None,
    })
}

/// The application's name as the paper writes it.
pub fn display_name(app: &str) -> &str {
    match app {
        "barnes" => "Barnes",
        "clu" => "CLU",
        "lu" => "LU",
        "em3d" => "EM3D",
        "gauss" => "Gauss",
        "ilink" => "Ilink",
        "sor" => "SOR",
        "tsp" => "TSP",
        "water-nsquared" => "Water-Nsquared",
        "water-spatial" => "Water-Spatial",
        other => other,
    }
}

/// CSM-DMS, CSM-MS-Mg, ...: a variant as the paper names it.
pub fn variant_name(v: &str) -> String {
    match v {
        "default" => "CSM (default)".to_string(),
        v => format!(
            "CSM-{}",
            v.to_uppercase()
                .replace("-MG", "-Mg")
                .replace("NONE", "None")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_app_has_paper_figures() {
        for a in crate::matrix::APPS {
            assert!(table3(a).is_some() && table4_dms(a).is_some(), "{a}");
            assert_ne!(display_name(a), a);
        }
        assert_eq!(variant_name("ms-mg"), "CSM-MS-Mg");
        assert_eq!(variant_name("dms"), "CSM-DMS");
        assert_eq!(variant_name("s"), "CSM-S");
        assert_eq!(variant_name("none-mg"), "CSM-None-Mg");
    }
}
