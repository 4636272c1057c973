//! The simulator: same seed, same numbers, whatever the thread count; the
//! base case gives sane magnitudes; scenarios that name unknown things are
//! refused; the shipped scenarios all load.

use repocast_sim::scenario::Scenario;
use repocast_sim::sweep::sweep;

fn short(text: &str) -> Scenario {
    let s: Scenario = toml::from_str(text).expect("parse");
    s.check().expect("valid");
    s
}

const TWO_SERIES: &str = r#"
name = "t"
duration_s = 3600.0
[sweep]
variable = "client_loss"
values = [0.0, 0.1]
[[series]]
scheme = "FEC(0)+R(inf)"
[[series]]
scheme = "FEC(0.01R)+R(0)"
"#;

#[test]
fn results_do_not_depend_on_the_thread_count() {
    let s = short(TWO_SERIES);
    let one = sweep(&s, 2, 1, &|_, _| {}).expect("sweep");
    let three = sweep(&s, 2, 3, &|_, _| {}).expect("sweep");
    assert_eq!(one, three);
    assert_eq!(one.len(), 4);
}

#[test]
fn an_hour_of_the_base_case_has_sane_magnitudes() {
    let s = short(TWO_SERIES);
    let pts = sweep(&s, 1, 2, &|_, _| {}).expect("sweep");
    for p in &pts {
        // About 900 clients arrive in an hour; a transmission is 60 x 80 ms.
        assert!(p.arrived > 700.0 && p.arrived < 1100.0, "{p:?}");
        // Those arriving in the last minutes of the hour cannot finish.
        assert!(p.clients > 0.6 * p.arrived, "{p:?}");
        assert!(p.avg_delay_s > 4.8 && p.avg_delay_s < 3000.0, "{p:?}");
        assert!(p.p95_delay_s >= p.avg_delay_s, "{p:?}");
    }
    // No loss: NAKs only for RaptorQ's rare failures at exactly K symbols
    // (0.46% of blocks, measured), far fewer than at 10% loss.
    let lossless = pts
        .iter()
        .find(|p| p.x == 0.0 && p.series == "FEC(0)+R(inf)")
        .expect("point");
    let lossy = pts
        .iter()
        .find(|p| p.x == 0.1 && p.series == "FEC(0)+R(inf)")
        .expect("point");
    assert!(lossless.naks * 5.0 < lossy.naks, "{lossless:?} {lossy:?}");
    assert!(lossy.naks > 0.0 && lossy.repair_packets > 0.0);
}

#[test]
fn bad_scenarios_are_refused() {
    for bad in [
        "name='x'\n[[series]]\nscheme='FEC(x)'\n",
        "name='x'\n[[series]]\nscheme='FEC(0)+R(0)'\nscheduler='best'\n",
        "name='x'\n[sweep]\nvariable='colour'\nvalues=[1.0]\n[[series]]\nscheme='FEC(0)+R(0)'\n",
        "name='x'\nseries=[]\n",
    ] {
        let s: Result<Scenario, _> = toml::from_str(bad);
        assert!(s.map(|s| s.check().is_err()).unwrap_or(true), "{bad}");
    }
}

#[test]
fn shipped_scenarios_load() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let mut n = 0;
    for e in std::fs::read_dir(dir).expect("scenarios/") {
        let p = e.expect("entry").path();
        if p.extension().is_some_and(|x| x == "toml") {
            Scenario::load(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            n += 1;
        }
    }
    assert!(n >= 2);
}

/// SPEC 3.1's worked example through the whole simulator: clients A {1,2,3},
/// B {2,4}, C {2,3} arrive together, no loss, one item per time unit T
/// (60 packets x 80 ms = 4.8 s). R/Q sends 2, 3, 1, 4: delays A = 3T,
/// B = 4T, C = 2T, average 3T, plus the request's and the done's travel
/// (80 ms each way here).
#[test]
fn the_rq_worked_example_through_the_simulator() {
    let s = short(
        r#"
name = "rq-example"
duration_s = 60.0
[network]
client_loss = 0.0
nak_travel_min_ms = 80.0
nak_travel_mean_ms = 80.0
[workload]
items = 5
[[series]]
scheme = "FEC(0)+R(0)"
[[client]]
items = [1, 2, 3]
[[client]]
items = [2, 4]
[[client]]
items = [2, 3]
"#,
    );
    let m = repocast_sim::run::run(&s, &s.series[0], 1).expect("run");
    let t = 60.0 * 0.08;
    let expect = [3.0 * t, 4.0 * t, 2.0 * t];
    assert_eq!(m.delays.len(), 3);
    for (d, e) in m.delays.iter().zip(expect) {
        // Request and done travel 0.16 s, plus at most one packet time.
        assert!(
            *d > e + 0.15 && *d < e + 0.25,
            "{:?} vs {expect:?}",
            m.delays
        );
    }
    let avg = m.delays.iter().sum::<f64>() / 3.0;
    assert!((avg - 3.0 * t - 0.16).abs() < 0.1, "{avg}");
}

#[test]
fn the_plot_has_a_line_per_series_and_labelled_axes() {
    let s = short(TWO_SERIES);
    let pts = sweep(&s, 1, 2, &|_, _| {}).expect("sweep");
    let svg = repocast_sim::plot::svg(&pts, "client_loss", "t");
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert_eq!(svg.matches("<polyline").count(), 2);
    assert_eq!(svg.matches("<circle").count(), 4);
    assert!(svg.contains(">client_loss</text>") && svg.contains("average client delay (s)"));
    assert!(svg.contains("FEC(0)+R(inf)") && svg.contains("FEC(0.01R)+R(0)"));
    let png = repocast_sim::plot::png(&pts, "client_loss", "t");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert!(
        png.len() > 1000,
        "a chart, not a blank image: {} bytes",
        png.len()
    );
}

#[test]
fn a_bad_value_fails_at_load_naming_its_field() {
    for (text, field, what) in [
        ("arrivals = \"weekly\"", "arrivals", "weekly"),
        ("popularity = \"zapf\"", "popularity", "zapf"),
    ] {
        let doc =
            format!("name = \"t\"\n[workload]\n{text}\n[[series]]\nscheme = \"FEC(0)+R(0)\"\n");
        let e = toml::from_str::<Scenario>(&doc)
            .expect_err("refused")
            .to_string();
        assert!(e.contains(field) && e.contains(what), "{e}");
    }
    for (text, field, what) in [
        ("scheme = \"FEC(x)\"", "scheme", "FEC(x)"),
        (
            "scheme = \"FEC(0)\"\nscheduler = \"nope\"",
            "scheduler",
            "unknown scheduler",
        ),
        (
            "scheme = \"FEC(0)\"\ncode = \"ldpc\"",
            "code",
            "unknown code",
        ),
        ("scheme = \"FEC(0)\"\nprofile = \"wan\"", "profile", "wan"),
    ] {
        let doc = format!("name = \"t\"\n[[series]]\n{text}\n");
        let e = toml::from_str::<Scenario>(&doc)
            .expect_err("refused")
            .to_string();
        assert!(e.contains(field) && e.contains(what), "{e}");
    }
}

#[test]
fn the_shipped_lan_profile_runs_in_the_simulator() {
    let s = short(
        r#"
name = "lan"
duration_s = 600.0
[network]
packet_time_ms = 0.107
nak_travel_min_ms = 0.1
nak_travel_mean_ms = 0.2
[[series]]
scheme = "FEC(maxloss+0.02)+R(inf)+notify"
profile = "lan"
[[series]]
scheme = "FEC(maxloss+0.02)+R(inf)+notify"
"#,
    );
    let pts = sweep(&s, 1, 2, &|_, _| {}).expect("sweep");
    assert_eq!(
        pts[0].series,
        "FEC(maxloss+0.02)+R(inf)+notify (lan profile)"
    );
    for p in &pts {
        assert!(p.clients > 100.0 && p.clients >= p.arrived - 2.0, "{p:?}");
    }
    // The LAN profile's 5-50 ms NAK window and 500 ms report timeout end
    // repair rounds sooner than the study's 30-210 ms on a LAN.
    assert!(pts[0].avg_delay_s < pts[1].avg_delay_s, "{pts:?}");
}
