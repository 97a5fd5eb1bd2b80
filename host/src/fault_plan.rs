//! Fault plans: a seed and a timeline of faults, so a failing run replays
//! exactly.
//!
//! ```toml
//! seed = 42
//!
//! [[fault]]
//! at = "200ms"                    # time since the cluster started
//! do = "corrupt 1% everywhere"    # the `mc-host fault` syntax
//! ```

use std::ops::Range;
use std::path::Path;

use firmware_model::{parse_duration, FaultCommand, FaultSyntaxError, Nanos};
use serde::Deserialize;

/// Why a fault plan cannot be used; each names the file and, where it can,
/// the line.
#[derive(Debug, thiserror::Error)]
pub enum FaultPlanError {
    #[error("{}", path.display())]
    Read {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{name}:{}: {}", line.map(|l| format!(" line {l}")).unwrap_or_default(), cause.message())]
    Toml {
        name: String,
        line: Option<usize>,
        // Boxed: a toml error is large, and this one travels up the CLI.
        // Its message is printed above (its line, not its snippet), so it
        // is not a `source()`.
        cause: Box<toml::de::Error>,
    },
    #[error("{name}: line {line}: at")]
    At {
        name: String,
        line: usize,
        #[source]
        source: FaultSyntaxError,
    },
    #[error("{name}: line {line}: do")]
    Do {
        name: String,
        line: usize,
        #[source]
        source: FaultSyntaxError,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PlanFile {
    seed: Option<u64>,
    #[serde(default)]
    fault: Vec<PlanEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PlanEntry {
    at: toml::Spanned<String>,
    #[serde(rename = "do")]
    action: toml::Spanned<String>,
}

/// A parsed fault plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultPlan {
    pub seed: Option<u64>,
    pub timeline: Vec<(Nanos, FaultCommand)>,
}

fn line_of(text: &str, span: Range<usize>) -> usize {
    text[..span.start.min(text.len())].matches('\n').count() + 1
}

impl FaultPlan {
    pub fn parse(text: &str, name: &str) -> Result<FaultPlan, FaultPlanError> {
        let file: PlanFile = toml::from_str(text).map_err(|source| FaultPlanError::Toml {
            name: name.to_string(),
            line: source.span().map(|s| line_of(text, s)),
            cause: Box::new(source),
        })?;
        let mut timeline = Vec::new();
        for f in file.fault {
            let at = parse_duration(f.at.get_ref()).map_err(|source| FaultPlanError::At {
                name: name.to_string(),
                line: line_of(text, f.at.span()),
                source,
            })?;
            let cmd: FaultCommand =
                f.action
                    .get_ref()
                    .parse()
                    .map_err(|source| FaultPlanError::Do {
                        name: name.to_string(),
                        line: line_of(text, f.action.span()),
                        source,
                    })?;
            timeline.push((at, cmd));
        }
        Ok(FaultPlan {
            seed: file.seed,
            timeline,
        })
    }

    pub fn load(path: &Path) -> Result<FaultPlan, FaultPlanError> {
        let text = std::fs::read_to_string(path).map_err(|source| FaultPlanError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text, &path.display().to_string())
    }
}

#[cfg(test)]
mod tests {
    use firmware_model::ErrorChain;

    use super::*;

    #[test]
    fn plans_parse() {
        let p = FaultPlan::parse(
            "seed = 7\n[[fault]]\nat = \"1ms\"\ndo = \"corrupt 1%\"\n[[fault]]\nat = \"2s\"\ndo = \"link-down 1\"\n",
            "p",
        )
        .unwrap();
        assert_eq!(p.seed, Some(7));
        assert_eq!(p.timeline.len(), 2);
        assert_eq!(
            p.timeline[1],
            (
                Nanos(2_000_000_000),
                FaultCommand::LinkDown(firmware_model::NodeId(1))
            )
        );
    }

    #[test]
    fn errors_name_the_line_and_reason() {
        let e = FaultPlan::parse(
            "seed = 7\n[[fault]]\nat = \"1ms\"\ndo = \"explode 3\"\n",
            "plan.toml",
        )
        .unwrap_err();
        assert!(matches!(e, FaultPlanError::Do { line: 4, .. }), "{e:?}");
        let e = ErrorChain(&e).to_string();
        assert!(e.starts_with("plan.toml: line 4: do: unknown fault"), "{e}");
        let e = FaultPlan::parse("[[fault]]\nat = \"soon\"\ndo = \"clear\"\n", "p").unwrap_err();
        assert!(matches!(e, FaultPlanError::At { line: 2, .. }), "{e:?}");
        assert!(ErrorChain(&e).to_string().contains("line 2: at: "), "{e}");
        let e = FaultPlan::parse("seed = \"x\"\n", "p").unwrap_err();
        assert!(
            matches!(e, FaultPlanError::Toml { line: Some(1), .. }),
            "{e:?}"
        );
        assert!(e.to_string().contains("line 1"), "{e}");
        let e = FaultPlan::parse("[[fault]]\nat = \"1ms\"\ndo = \"clear\"\nwhen = 3\n", "p")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 4") && e.contains("unknown field"), "{e}");
        let e = FaultPlan::load(Path::new("/nonexistent/plan.toml")).unwrap_err();
        assert!(matches!(e, FaultPlanError::Read { .. }), "{e:?}");
    }
}
