//! What a chart shows, apart from how it is drawn: small multiples, one
//! panel per application, each with the same groups (cluster
//! configurations) and the same series (protocol variants) in the same
//! colours, as seed 000's figures compare variants side by side.

/// One bar.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Bar {
    Value(f64),
    /// No run, or no figure for it.
    Missing,
    /// Wall-clock times with more application threads than cores: no
    /// speedup shown.
    Oversubscribed,
    Failed,
}

impl Bar {
    /// What a bar that is not a number says instead.
    pub fn reason(self) -> Option<&'static str> {
        match self {
            Bar::Value(_) => None,
            Bar::Missing => Some("no run"),
            Bar::Oversubscribed => Some("oversubscribed"),
            Bar::Failed => Some("failed"),
        }
    }
}

/// One application's panel of a grouped-bar figure.
pub struct Panel {
    pub title: String,
    /// `values[group][series]`.
    pub values: Vec<Vec<Bar>>,
}

/// Grouped bars as small multiples (seed 000 Fig. 1 style).
pub struct GroupedFigure {
    pub title: String,
    /// The y axis, with its unit.
    pub y_desc: String,
    /// A dashed line at this value, with its meaning (speedup 1: as fast as
    /// the sequential program), in panels whose bars reach near it.
    pub reference: Option<(f64, String)>,
    /// The x axis' groups: cluster configurations.
    pub groups: Vec<String>,
    /// The bars of each group, one colour each: protocol variants.
    pub series: Vec<String>,
    pub panels: Vec<Panel>,
    /// Lines under the figure: the clock, the host, what marks mean.
    pub notes: Vec<String>,
}

/// One application's panel of a stacked-bar figure.
pub struct StackedPanel {
    pub title: String,
    /// `values[group][series]`: each component's height, or None.
    pub values: Vec<Vec<Option<Vec<f64>>>>,
}

/// Stacked bars as small multiples (seed 000 Figs. 2-3 style): in each
/// group one bar per series, split into components (the colours).
pub struct StackedFigure {
    pub title: String,
    pub y_desc: String,
    pub groups: Vec<String>,
    /// Short names written under each bar (the colours are the components').
    pub series: Vec<String>,
    pub components: Vec<String>,
    pub panels: Vec<StackedPanel>,
    pub notes: Vec<String>,
}
