//! An SVG line chart of average delay against the swept variable, one line
//! per series, with labelled axes and a legend. Written by hand (no plotting
//! dependency); PNG output is not done yet.

use crate::sweep::Point;
use std::fmt::Write as _;

const W: f64 = 760.0;
const H: f64 = 460.0;
const L: f64 = 70.0; // left margin (y labels)
const R: f64 = 200.0; // right margin (legend)
const T: f64 = 40.0;
const B: f64 = 60.0;
const COLOURS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// "Nice" tick step for a range.
fn step(range: f64) -> f64 {
    let raw = (range / 5.0).max(1e-9);
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag)
}

/// The chart as SVG text.
pub fn svg(points: &[Point], variable: &str, title: &str) -> String {
    let mut series: Vec<&str> = Vec::new();
    for p in points {
        if !series.contains(&p.series.as_str()) {
            series.push(&p.series);
        }
    }
    let (x0, x1) = points
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.x), b.max(p.x)));
    let y1 = points.iter().map(|p| p.avg_delay_s).fold(0.0, f64::max);
    let (x0, x1) = if x1 > x0 {
        (x0, x1)
    } else {
        (x0 - 1.0, x0 + 1.0)
    };
    let ys = step(y1.max(1.0));
    let y1 = (y1 / ys).ceil().max(1.0) * ys;
    let px = |x: f64| L + (x - x0) / (x1 - x0) * (W - L - R);
    let py = |y: f64| H - B - y / y1 * (H - T - B);
    let mut o = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">{}</text>\n",
        (L + W - R) / 2.0,
        esc(title)
    );
    // Axes, ticks and labels.
    let _ = writeln!(
        o,
        "<line x1=\"{L}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>",
        H - B,
        W - R,
        H - B
    );
    let _ = writeln!(
        o,
        "<line x1=\"{L}\" y1=\"{T}\" x2=\"{L}\" y2=\"{}\" stroke=\"black\"/>",
        H - B
    );
    let mut y = 0.0;
    while y <= y1 + 1e-9 {
        let _ = writeln!(
            o,
            "<line x1=\"{L}\" y1=\"{0}\" x2=\"{1}\" y2=\"{0}\" stroke=\"#ddd\"/><text x=\"{2}\" y=\"{3}\" text-anchor=\"end\">{4}</text>",
            py(y),
            W - R,
            L - 6.0,
            py(y) + 4.0,
            y
        );
        y += ys;
    }
    let xs = step(x1 - x0);
    let mut x = (x0 / xs).ceil() * xs;
    while x <= x1 + 1e-9 {
        let label = format!("{:.3}", x)
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string();
        let _ = writeln!(
            o,
            "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\"/><text x=\"{0}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>",
            px(x),
            H - B,
            H - B + 5.0,
            H - B + 20.0,
            label
        );
        x += xs;
    }
    let _ = writeln!(
        o,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
        (L + W - R) / 2.0,
        H - 18.0,
        esc(variable)
    );
    let _ = writeln!(
        o,
        "<text x=\"18\" y=\"{0}\" text-anchor=\"middle\" transform=\"rotate(-90 18 {0})\">average client delay (s)</text>",
        (T + H - B) / 2.0
    );
    // One line per series, and the legend.
    for (i, s) in series.iter().enumerate() {
        let c = COLOURS[i % COLOURS.len()];
        let mut pts: Vec<&Point> = points.iter().filter(|p| p.series == *s).collect();
        pts.sort_by(|a, b| a.x.total_cmp(&b.x));
        let path: Vec<String> = pts
            .iter()
            .map(|p| format!("{:.1},{:.1}", px(p.x), py(p.avg_delay_s)))
            .collect();
        let _ = writeln!(
            o,
            "<polyline fill=\"none\" stroke=\"{c}\" stroke-width=\"2\" points=\"{}\"/>",
            path.join(" ")
        );
        for p in &pts {
            let _ = writeln!(
                o,
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{c}\"/>",
                px(p.x),
                py(p.avg_delay_s)
            );
        }
        let ly = T + 10.0 + i as f64 * 20.0;
        let _ = writeln!(
            o,
            "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"{c}\" stroke-width=\"2\"/><text x=\"{3}\" y=\"{4}\">{5}</text>",
            W - R + 15.0,
            ly,
            W - R + 40.0,
            W - R + 46.0,
            ly + 4.0,
            esc(s)
        );
    }
    o.push_str("</svg>\n");
    o
}
