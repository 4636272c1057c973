//! Results: `<dir>/<scenario>.csv` (one row per series and x) and a
//! markdown table of average delay (rows x, one column per series).

use crate::SimError;
use crate::sweep::Point;
use std::fmt::Write as _;
use std::path::Path;

/// The CSV text.
pub fn csv(points: &[Point]) -> String {
    let mut o = String::from(
        "series,x,avg_delay_s,ci95_delay_s,p95_delay_s,loss_weighted_delay_s,clients,arrived,data_packets,repair_packets,naks,avg_seek_s,avg_transfer_s,max_delay_s\n",
    );
    for p in points {
        let _ = writeln!(
            o,
            "\"{}\",{},{:.3},{:.3},{:.3},{:.3},{:.1},{:.1},{:.1},{:.1},{:.1},{:.3},{:.3},{:.3}",
            p.series.replace('"', "'"),
            p.x,
            p.avg_delay_s,
            p.ci95_s,
            p.p95_delay_s,
            p.loss_weighted_delay_s,
            p.clients,
            p.arrived,
            p.data_packets,
            p.repair_packets,
            p.naks,
            p.avg_seek_s,
            p.avg_transfer_s,
            p.max_delay_s
        );
    }
    o
}

/// A markdown table of average delay in seconds (± 95% CI).
pub fn markdown(points: &[Point], variable: &str) -> String {
    let mut series: Vec<&str> = Vec::new();
    let mut xs: Vec<f64> = Vec::new();
    for p in points {
        if !series.contains(&p.series.as_str()) {
            series.push(&p.series);
        }
        if !xs.contains(&p.x) {
            xs.push(p.x);
        }
    }
    let mut o = format!(
        "| {variable} | {} |\n|---|{}\n",
        series.join(" | "),
        "---|".repeat(series.len())
    );
    for x in xs {
        let cells: Vec<String> = series
            .iter()
            .map(|s| {
                points
                    .iter()
                    .find(|p| p.series == *s && p.x == x)
                    .map_or("-".into(), |p| {
                        format!("{:.0} ± {:.0}", p.avg_delay_s, p.ci95_s)
                    })
            })
            .collect();
        let _ = writeln!(o, "| {x} | {} |", cells.join(" | "));
    }
    o
}

/// Writes `<dir>/<name>.csv`, `.md`, `.svg` and `.png`.
pub fn write(dir: &Path, name: &str, points: &[Point], variable: &str) -> Result<(), SimError> {
    let err = |p: &Path, e| SimError::Output {
        path: p.display().to_string(),
        source: e,
    };
    std::fs::create_dir_all(dir).map_err(|e| err(dir, e))?;
    let c = dir.join(format!("{name}.csv"));
    std::fs::write(&c, csv(points)).map_err(|e| err(&c, e))?;
    let m = dir.join(format!("{name}.md"));
    std::fs::write(&m, markdown(points, variable)).map_err(|e| err(&m, e))?;
    let g = dir.join(format!("{name}.svg"));
    std::fs::write(&g, crate::plot::svg(points, variable, name)).map_err(|e| err(&g, e))?;
    let p = dir.join(format!("{name}.png"));
    std::fs::write(&p, crate::plot::png(points, variable, name)).map_err(|e| err(&p, e))?;
    Ok(())
}
