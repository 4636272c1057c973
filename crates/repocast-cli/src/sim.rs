//! `repocast sim SCENARIO.toml`: options in, [`repocast_sim`] out.

use indicatif::{ProgressBar, ProgressStyle};
use repocast_sim::scenario::Scenario;
use repocast_sim::{output, sweep};
use std::path::PathBuf;
use std::process::ExitCode;

/// Options of `repocast sim`.
#[derive(clap::Args, Debug)]
pub struct SimArgs {
    /// The scenario file (see docs/scenarios.md).
    pub scenario: PathBuf,
    /// Where the CSV, markdown table and charts (SVG, PNG) go.
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
    /// Seeds per point (default: the scenario's).
    #[arg(long)]
    pub seeds: Option<u32>,
    /// Threads (default: every core).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Simulated seconds (default: the scenario's, one day in the base case).
    #[arg(long)]
    pub duration: Option<f64>,
}

pub fn run(a: SimArgs) -> ExitCode {
    let mut s = match Scenario::load(&a.scenario) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("repocast sim: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(d) = a.duration {
        s.duration_s = d;
    }
    let seeds = a.seeds.unwrap_or(s.seeds);
    let jobs = a
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} runs, ETA {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_message(s.name.clone());
    let started = std::time::Instant::now();
    let points = sweep::sweep(&s, seeds, jobs, &|done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    });
    bar.finish_and_clear();
    let points = match points {
        Ok(p) => p,
        Err(e) => {
            eprintln!("repocast sim: {e}");
            return ExitCode::FAILURE;
        }
    };
    let variable = s.sweep.as_ref().map_or("x", |w| w.variable.as_str());
    let wall = started.elapsed().as_secs_f64();
    let events: u64 = points.iter().map(|p| p.events).sum();
    // Files first: a closed stdout (`| head`) must not lose the results.
    let written = output::write(&a.out, &s.name, &points, variable);
    let mut report = format!(
        "{}: {} series x {} points x {} seeds in {wall:.2} s on {jobs} threads; \
         {events} events, {:.1} M events/s\n\naverage client delay, seconds (± 95% CI):\n\n{}",
        s.name,
        s.series.len(),
        s.xs().len(),
        seeds,
        events as f64 / wall.max(1e-9) / 1e6,
        output::markdown(&points, variable)
    );
    match written {
        Ok(()) => {
            report.push_str(&format!(
                "\nwrote {}/{}.csv, .md, .svg and .png\n",
                a.out.display(),
                s.name
            ));
            // A closed stdout is not an error worth a panic.
            let _ = std::io::Write::write_all(&mut std::io::stdout(), report.as_bytes());
            ExitCode::SUCCESS
        }
        Err(e) => {
            let _ = std::io::Write::write_all(&mut std::io::stdout(), report.as_bytes());
            eprintln!("repocast sim: {e}");
            ExitCode::FAILURE
        }
    }
}
