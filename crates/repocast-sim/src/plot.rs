//! A line chart of average delay against the swept variable, one line per
//! series, with labelled axes and a legend: laid out once as shapes, then
//! written as SVG text ([`svg`]) or rasterised to PNG ([`png()`], through
//! `crate::raster`). No plotting dependency.

use crate::sweep::Point;
use std::fmt::Write as _;

pub(crate) const W: f64 = 760.0;
pub(crate) const H: f64 = 460.0;
const L: f64 = 70.0; // left margin (y labels)
const R: f64 = 200.0; // right margin (legend)
const T: f64 = 40.0;
const B: f64 = 60.0;
const COLOURS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// Horizontal text alignment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Anchor {
    Start,
    Middle,
    End,
}

/// One drawing element, in pixels from the top left.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Shape {
    Line {
        from: (f64, f64),
        to: (f64, f64),
        colour: &'static str,
        width: f64,
    },
    Polyline {
        points: Vec<(f64, f64)>,
        colour: &'static str,
    },
    Dot {
        at: (f64, f64),
        colour: &'static str,
    },
    Text {
        at: (f64, f64),
        text: String,
        anchor: Anchor,
        size: f64,
        /// Turned 90 degrees anticlockwise (the y axis label).
        vertical: bool,
    },
}

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

fn text(at: (f64, f64), text: String, anchor: Anchor) -> Shape {
    Shape::Text {
        at,
        text,
        anchor,
        size: 12.0,
        vertical: false,
    }
}

/// The chart as shapes.
pub(crate) fn shapes(points: &[Point], variable: &str, title: &str) -> Vec<Shape> {
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
    let line = |from, to, colour| Shape::Line {
        from,
        to,
        colour,
        width: 1.0,
    };
    let mut o = vec![Shape::Text {
        at: ((L + W - R) / 2.0, 22.0),
        text: title.to_string(),
        anchor: Anchor::Middle,
        size: 15.0,
        vertical: false,
    }];
    // Grid, axes, ticks and labels.
    let mut y = 0.0;
    while y <= y1 + 1e-9 {
        o.push(line((L, py(y)), (W - R, py(y)), "#dddddd"));
        o.push(text((L - 6.0, py(y) + 4.0), format!("{y}"), Anchor::End));
        y += ys;
    }
    o.push(line((L, H - B), (W - R, H - B), "#000000"));
    o.push(line((L, T), (L, H - B), "#000000"));
    let xs = step(x1 - x0);
    let mut x = (x0 / xs).ceil() * xs;
    while x <= x1 + 1e-9 {
        let label = format!("{:.3}", x)
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string();
        o.push(line((px(x), H - B), (px(x), H - B + 5.0), "#000000"));
        o.push(text((px(x), H - B + 20.0), label, Anchor::Middle));
        x += xs;
    }
    o.push(text(
        ((L + W - R) / 2.0, H - 18.0),
        variable.to_string(),
        Anchor::Middle,
    ));
    o.push(Shape::Text {
        at: (18.0, (T + H - B) / 2.0),
        text: "average client delay (s)".into(),
        anchor: Anchor::Middle,
        size: 12.0,
        vertical: true,
    });
    // One line per series, and the legend.
    for (i, s) in series.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let mut pts: Vec<&Point> = points.iter().filter(|p| p.series == *s).collect();
        pts.sort_by(|a, b| a.x.total_cmp(&b.x));
        let xy: Vec<(f64, f64)> = pts.iter().map(|p| (px(p.x), py(p.avg_delay_s))).collect();
        o.push(Shape::Polyline {
            points: xy.clone(),
            colour,
        });
        o.extend(xy.into_iter().map(|at| Shape::Dot { at, colour }));
        let ly = T + 10.0 + i as f64 * 20.0;
        o.push(Shape::Line {
            from: (W - R + 15.0, ly),
            to: (W - R + 40.0, ly),
            colour,
            width: 2.0,
        });
        o.push(text((W - R + 46.0, ly + 4.0), s.to_string(), Anchor::Start));
    }
    o
}

/// The chart as SVG text.
pub fn svg(points: &[Point], variable: &str, title: &str) -> String {
    let mut o = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    );
    for sh in shapes(points, variable, title) {
        let _ = match sh {
            Shape::Line {
                from,
                to,
                colour,
                width,
            } => writeln!(
                o,
                "<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{colour}\" stroke-width=\"{width}\"/>",
                from.0, from.1, to.0, to.1
            ),
            Shape::Polyline { points, colour } => {
                let p: Vec<String> = points
                    .iter()
                    .map(|(x, y)| format!("{x:.1},{y:.1}"))
                    .collect();
                writeln!(
                    o,
                    "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\" points=\"{}\"/>",
                    p.join(" ")
                )
            }
            Shape::Dot { at, colour } => writeln!(
                o,
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{colour}\"/>",
                at.0, at.1
            ),
            Shape::Text {
                at,
                text,
                anchor,
                size,
                vertical,
            } => {
                let a = match anchor {
                    Anchor::Start => "start",
                    Anchor::Middle => "middle",
                    Anchor::End => "end",
                };
                let turn = if vertical {
                    format!(" transform=\"rotate(-90 {:.1} {:.1})\"", at.0, at.1)
                } else {
                    String::new()
                };
                writeln!(
                    o,
                    "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"{a}\" font-size=\"{size}\"{turn}>{}</text>",
                    at.0,
                    at.1,
                    esc(&text)
                )
            }
        };
    }
    o.push_str("</svg>\n");
    o
}

/// The chart as a PNG image (RGB, 8 bits).
pub fn png(points: &[Point], variable: &str, title: &str) -> Vec<u8> {
    crate::raster::png(&shapes(points, variable, title), W as u32, H as u32)
}
