//! SVG plots of a report (plotters, SVG backend), at most [`MAX_SVG_FILES`] files:
//!
//! - `roofline.svg`: x = arithmetic intensity (FLOP/byte), y = achieved TFLOP/s, both log;
//!   lines = the measured copy-bandwidth ceiling and the measured compute ceilings of the
//!   report's profile; points = GPU-measured cases with known work.
//! - `ratios.svg`: one horizontal bar panel per baseline (cuBLAS, untuned, torch) with
//!   `baseline / ours` per case and a line at 1.
//!
//! A plot with nothing real to show is not written (no placeholder figures).

use crate::report::{Case, Clock, Report};
use plotters::prelude::*;
use std::path::{Path, PathBuf};

/// The most SVG files [`write_all`] writes.
pub const MAX_SVG_FILES: usize = 3;

/// A plot could not be drawn or written.
#[derive(Debug, thiserror::Error)]
#[error("plot {path}: {reason}")]
pub struct PlotError {
    /// The file.
    pub path: PathBuf,
    /// The drawing error.
    pub reason: String,
}

fn err<E: std::fmt::Display>(path: &Path) -> impl Fn(E) -> PlotError {
    let path = path.to_path_buf();
    move |e| PlotError {
        path: path.clone(),
        reason: e.to_string(),
    }
}

const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// Cases that belong on the roofline: GPU-measured, with FLOPs, bytes and a TFLOP/s figure.
pub fn roofline_points(r: &Report) -> Vec<(&Case, f64, f64)> {
    r.cases
        .iter()
        .filter(|c| c.is_measured() && c.clock == Clock::Gpu)
        .filter_map(|c| {
            Some((
                c,
                c.arithmetic_intensity()?,
                c.throughput.tflops.filter(|t| *t > 0.0)?,
            ))
        })
        .collect()
}

/// Writes `roofline.svg` into `dir`; `Ok(None)` when no case qualifies.
pub fn roofline(r: &Report, dir: &Path) -> Result<Option<PathBuf>, PlotError> {
    let pts = roofline_points(r);
    if pts.is_empty() {
        return Ok(None);
    }
    let path = dir.join("roofline.svg");
    let e = err(&path);
    let profile = r.device.profile.clone().unwrap_or_default();
    let (mut x0, mut x1) = (f64::INFINITY, 0.0f64);
    let (mut y0, mut y1) = (f64::INFINITY, 0.0f64);
    for (_, ai, t) in &pts {
        x0 = x0.min(*ai);
        x1 = x1.max(*ai);
        y0 = y0.min(*t);
        y1 = y1.max(*t);
    }
    for t in profile.compute_tflops.values() {
        y1 = y1.max(*t);
    }
    let (x0, x1) = (x0 / 4.0, x1 * 4.0);
    let (y0, y1) = (y0 / 4.0, y1 * 2.0);
    {
        let root = SVGBackend::new(&path, (1000, 700)).into_drawing_area();
        root.fill(&WHITE).map_err(&e)?;
        let title = format!("Roofline: {} (measured)", r.device.name());
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 22))
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(65)
            .build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())
            .map_err(&e)?;
        chart
            .configure_mesh()
            .x_desc("arithmetic intensity (FLOP / byte)")
            .y_desc("achieved TFLOP/s")
            .draw()
            .map_err(&e)?;
        if let Some(bw) = profile.copy_gbps {
            // TFLOP/s = GB/s * FLOP/byte / 1000
            let line: Vec<(f64, f64)> = (0..=64)
                .map(|i| x0 * (x1 / x0).powf(i as f64 / 64.0))
                .map(|x| (x, bw * x / 1000.0))
                .filter(|(_, y)| *y >= y0 && *y <= y1)
                .collect();
            chart
                .draw_series(LineSeries::new(line, BLACK.stroke_width(2)))
                .map_err(&e)?
                .label(format!("copy bandwidth {bw:.0} GB/s"))
                .legend(|(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], BLACK.stroke_width(2))
                });
        }
        for (i, (dtype, peak)) in profile.compute_tflops.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            chart
                .draw_series(LineSeries::new(
                    vec![(x0, *peak), (x1, *peak)],
                    color.stroke_width(1),
                ))
                .map_err(&e)?
                .label(format!("{dtype} ceiling {peak:.0} TFLOP/s"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        }
        let mut dtypes: Vec<String> = pts
            .iter()
            .map(|(c, _, _)| c.dtype.clone().unwrap_or_default())
            .collect();
        dtypes.sort();
        dtypes.dedup();
        for (i, d) in dtypes.iter().enumerate() {
            let color = PALETTE[(i + 2) % PALETTE.len()];
            let series: Vec<(f64, f64)> = pts
                .iter()
                .filter(|(c, _, _)| c.dtype.clone().unwrap_or_default() == *d)
                .map(|(_, ai, t)| (*ai, *t))
                .collect();
            chart
                .draw_series(
                    series
                        .into_iter()
                        .map(|p| Circle::new(p, 4, color.filled())),
                )
                .map_err(&e)?
                .label(if d.is_empty() {
                    "cases".to_string()
                } else {
                    format!("{d} cases")
                })
                .legend(move |(x, y)| Circle::new((x + 10, y), 4, color.filled()));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(&e)?;
        root.present().map_err(&e)?;
    }
    Ok(Some(path))
}

/// The `(case name, ratio)` bars of each baseline kind that has any.
pub fn ratio_panels(r: &Report) -> Vec<(&'static str, Vec<(String, f64)>)> {
    let mut panels = Vec::new();
    for kind in ["cublas", "untuned", "torch"] {
        let bars: Vec<(String, f64)> = r
            .cases
            .iter()
            .filter(|c| c.is_measured())
            .filter_map(|c| {
                let b = &c.baselines;
                let ratio = match kind {
                    "cublas" => b.cublas.map(|x| x.ratio),
                    "untuned" => b.untuned.map(|x| x.ratio),
                    _ => b.torch.map(|x| x.ratio),
                }?;
                ratio
                    .is_finite()
                    .then(|| (format!("{}/{}", c.suite, c.name), ratio))
            })
            .collect();
        if !bars.is_empty() {
            panels.push((kind, bars));
        }
    }
    panels
}

/// Writes `ratios.svg` into `dir`; `Ok(None)` when no case has a baseline.
pub fn ratios(r: &Report, dir: &Path) -> Result<Option<PathBuf>, PlotError> {
    let panels = ratio_panels(r);
    if panels.is_empty() {
        return Ok(None);
    }
    let path = dir.join("ratios.svg");
    let e = err(&path);
    let rows: usize = panels.iter().map(|(_, b)| b.len()).sum();
    let height = (120 + rows * 22 + panels.len() * 90).min(6000) as u32;
    {
        let root = SVGBackend::new(&path, (1100, height)).into_drawing_area();
        root.fill(&WHITE).map_err(&e)?;
        let weights: Vec<u32> = panels
            .iter()
            .map(|(_, b)| b.len() as u32 * 22 + 90)
            .collect();
        let mut areas = Vec::new();
        let mut rest = root.clone();
        for w in &weights[..weights.len() - 1] {
            let (top, bottom) = rest.split_vertically(*w);
            areas.push(top);
            rest = bottom;
        }
        areas.push(rest);
        for ((kind, bars), area) in panels.iter().zip(areas) {
            let xmax = bars.iter().map(|(_, r)| *r).fold(1.0f64, f64::max) * 1.15;
            let n = bars.len();
            let names: Vec<String> = bars.iter().map(|(n, _)| n.clone()).collect();
            let mut chart = ChartBuilder::on(&area)
                .caption(
                    format!("{kind} time / our time (> 1: ours faster)"),
                    ("sans-serif", 18),
                )
                .margin(10)
                .x_label_area_size(30)
                .y_label_area_size(330)
                .build_cartesian_2d(0.0..xmax, 0..n)
                .map_err(&e)?;
            chart
                .configure_mesh()
                .disable_y_mesh()
                .y_labels(n)
                .y_label_formatter(&|i: &usize| names.get(*i).cloned().unwrap_or_default())
                .draw()
                .map_err(&e)?;
            chart
                .draw_series(bars.iter().enumerate().map(|(i, (_, r))| {
                    let color = if *r >= 1.0 { PALETTE[2] } else { PALETTE[3] };
                    Rectangle::new([(0.0, i), (*r, i + 1)], color.mix(0.8).filled())
                }))
                .map_err(&e)?;
            chart
                .draw_series(LineSeries::new(
                    vec![(1.0, 0), (1.0, n)],
                    BLACK.stroke_width(1),
                ))
                .map_err(&e)?;
        }
        root.present().map_err(&e)?;
    }
    Ok(Some(path))
}

/// Writes every plot that has data; returns the files written.
pub fn write_all(r: &Report, dir: &Path) -> Result<Vec<PathBuf>, PlotError> {
    std::fs::create_dir_all(dir).map_err(err(dir))?;
    let mut out = Vec::new();
    out.extend(roofline(r, dir)?);
    out.extend(ratios(r, dir)?);
    debug_assert!(out.len() <= MAX_SVG_FILES);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{MeasuredBaseline, MeasuredProfile};

    #[test]
    fn no_gpu_cases_write_no_plots() {
        let mut r = crate::report::tests::sample_report();
        r.cases.retain(|c| !c.is_measured());
        let dir = tempfile::tempdir().unwrap();
        assert!(write_all(&r, dir.path()).unwrap().is_empty());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn writes_roofline_and_ratio_svgs() {
        // Hand-made inputs: the test checks drawing, not any figure.
        let mut r = crate::report::tests::sample_report();
        r.cases[0].baselines.cublas = Some(MeasuredBaseline {
            median_us: 90.0,
            ratio: 0.9,
            interleaved: false,
        });
        let mut p = MeasuredProfile {
            copy_gbps: Some(1000.0),
            source: "test".into(),
            ..Default::default()
        };
        p.compute_tflops.insert("bf16".into(), 2000.0);
        r.device.profile = Some(p);
        let dir = tempfile::tempdir().unwrap();
        let files = write_all(&r, dir.path()).unwrap();
        assert_eq!(files.len(), 2);
        let roof = std::fs::read_to_string(dir.path().join("roofline.svg")).unwrap();
        assert!(
            roof.starts_with("<svg") && roof.contains("arithmetic intensity"),
            "{}",
            &roof[..200.min(roof.len())]
        );
        assert!(roof.contains("bf16 ceiling"));
        let bars = std::fs::read_to_string(dir.path().join("ratios.svg")).unwrap();
        assert!(bars.contains("cublas time / our time") && bars.contains("torch time / our time"));
        assert!(bars.contains("gemm/cublas bf16 4096x4096x4096"));
        assert_eq!(ratio_panels(&r).len(), 2);
    }
}
