//! Charts as pixels (feature `raster`): parse an SVG chart as a browser
//! would, with the system's fonts, and rasterise it, so that tests can check
//! that every chart draws and people can look at the PNGs.

use std::path::Path;

/// Sans-serif families to draw `sans-serif` text with, the first installed.
const SANS_SERIF: [&str; 6] = [
    "Arial",
    "Helvetica",
    "Liberation Sans",
    "DejaVu Sans",
    "Noto Sans",
    "FreeSans",
];

/// A chart that could not be read, parsed or drawn.
#[derive(Debug, thiserror::Error)]
pub enum RasterError {
    #[error("{}", path.display())]
    Io {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} does not parse as SVG", path.display())]
    Parse {
        path: std::path::PathBuf,
        #[source]
        source: resvg::usvg::Error,
    },
    #[error("{}: an empty picture ({width} x {height})", path.display())]
    Empty {
        path: std::path::PathBuf,
        width: u32,
        height: u32,
    },
    #[error("{}: cannot write the PNG: {message}", path.display())]
    Png {
        path: std::path::PathBuf,
        message: String,
    },
}

/// A chart drawn on white.
pub struct Raster {
    pub pixmap: resvg::tiny_skia::Pixmap,
}

impl Raster {
    /// The picture's size in pixels.
    pub fn size(&self) -> (u32, u32) {
        (self.pixmap.width(), self.pixmap.height())
    }

    /// The share of pixels that are not (nearly) white.
    pub fn inked(&self) -> f64 {
        let px = self.pixmap.pixels();
        let inked = px
            .iter()
            .filter(|p| p.red() < 240 || p.green() < 240 || p.blue() < 240)
            .count();
        inked as f64 / px.len() as f64
    }

    /// Save it as a PNG.
    pub fn save_png(&self, path: &Path) -> Result<(), RasterError> {
        self.pixmap.save_png(path).map_err(|e| RasterError::Png {
            path: path.to_path_buf(),
            message: e.to_string(),
        })
    }
}

/// Parse and draw the SVG file at `svg`.
pub fn rasterise(svg: &Path) -> Result<Raster, RasterError> {
    let data = std::fs::read(svg).map_err(|source| RasterError::Io {
        path: svg.to_path_buf(),
        source,
    })?;
    let mut opt = resvg::usvg::Options::default();
    let fonts = opt.fontdb_mut();
    fonts.load_system_fonts();
    // The charts ask for `sans-serif`, which fontdb maps to Arial unless
    // told otherwise: take the first sans-serif family installed, as a
    // browser would.
    let installed = |name: &str| {
        fonts
            .faces()
            .any(|f| f.families.iter().any(|(n, _)| n == name))
    };
    if let Some(family) = SANS_SERIF.iter().find(|f| installed(f)) {
        fonts.set_sans_serif_family(*family);
    }
    let tree = resvg::usvg::Tree::from_data(&data, &opt).map_err(|source| RasterError::Parse {
        path: svg.to_path_buf(),
        source,
    })?;
    let size = tree.size().to_int_size();
    let mut pixmap =
        resvg::tiny_skia::Pixmap::new(size.width(), size.height()).ok_or(RasterError::Empty {
            path: svg.to_path_buf(),
            width: size.width(),
            height: size.height(),
        })?;
    pixmap.fill(resvg::tiny_skia::Color::WHITE);
    resvg::render(
        &tree,
        resvg::tiny_skia::Transform::default(),
        &mut pixmap.as_mut(),
    );
    Ok(Raster { pixmap })
}
