//! Rasterise SVG charts to PNG beside them, to look at them:
//! `cargo run -p mc-report --features raster --example rasterise -- docs/report/*.svg`.

fn main() {
    for a in std::env::args().skip(1) {
        let svg = std::path::Path::new(&a);
        match mc_report::raster::rasterise(svg) {
            Ok(r) => {
                let png = svg.with_extension("png");
                if let Err(e) = r.save_png(&png) {
                    eprintln!("{e}");
                    std::process::exit(1);
                }
                let (w, h) = r.size();
                println!(
                    "{}: {w} x {h}, {:.1}% inked",
                    png.display(),
                    r.inked() * 100.0
                );
            }
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(1);
            }
        }
    }
}
