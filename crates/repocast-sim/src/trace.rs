//! Web-server logs in Common Log Format as a workload trace (SPEC 5, sweep
//! 9). Each document (request path) is an item, sized by the largest byte
//! count the log gives it; the requests of one host within 1 s of the first
//! form one object, which becomes one client wanting those documents.
//!
//! A line looks like
//! `host ident user [10/Oct/2000:13:55:36 -0700] "GET /a.html HTTP/1.0" 200 2326`.
//! Only successful (2xx) GET requests count: a 304 was served from the
//! host's cache, so it wants nothing. Other and unparsable lines are
//! skipped and counted.

use std::collections::BTreeMap;

/// One object of the trace: a host's requests within the window.
#[derive(Debug, Clone, PartialEq)]
pub struct Object {
    /// Seconds since the trace's first request.
    pub at_s: f64,
    /// Document indices (into [`Trace::documents`]), without repeats.
    pub documents: Vec<u32>,
}

/// A parsed trace.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trace {
    /// (path, bytes) per document, in order of first request.
    pub documents: Vec<(String, u64)>,
    /// Objects in time order.
    pub objects: Vec<Object>,
    /// Lines that were not a usable request.
    pub skipped: usize,
}

struct Line<'a> {
    host: &'a str,
    at: i64,
    path: &'a str,
    bytes: u64,
}

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `10/Oct/2000:13:55:36 -0700` as seconds since the epoch (UTC).
fn parse_time(s: &str) -> Option<i64> {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let (stamp, zone) = s.split_once(' ').unwrap_or((s, "+0000"));
    let mut f = stamp.split(['/', ':']);
    let d: i64 = f.next()?.parse().ok()?;
    let mon = f.next()?;
    let m = MONTHS.iter().position(|x| *x == mon)? as i64 + 1;
    let y: i64 = f.next()?.parse().ok()?;
    let hh: i64 = f.next()?.parse().ok()?;
    let mm: i64 = f.next()?.parse().ok()?;
    let ss: i64 = f.next()?.parse().ok()?;
    if !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    let z = zone.trim();
    let sign = if z.starts_with('-') { -1 } else { 1 };
    let zd: i64 = z.trim_start_matches(['+', '-']).parse().ok()?;
    let offset = sign * ((zd / 100) * 3600 + (zd % 100) * 60);
    Some(days_from_civil(y, m, d) * 86_400 + hh * 3600 + mm * 60 + ss - offset)
}

fn parse_line(l: &str) -> Option<Line<'_>> {
    let host = l.split_whitespace().next()?;
    let open = l.find('[')?;
    let close = open + l[open..].find(']')?;
    let at = parse_time(&l[open + 1..close])?;
    let rest = &l[close + 1..];
    let q1 = rest.find('"')?;
    let q2 = q1 + 1 + rest[q1 + 1..].find('"')?;
    let mut req = rest[q1 + 1..q2].split_whitespace();
    if req.next()? != "GET" {
        return None;
    }
    let path = req.next()?;
    let mut tail = rest[q2 + 1..].split_whitespace();
    let status: u16 = tail.next()?.parse().ok()?;
    if !(200..300).contains(&status) {
        return None;
    }
    let bytes = match tail.next()? {
        "-" => 0,
        b => b.parse().ok()?,
    };
    Some(Line {
        host,
        at,
        path,
        bytes,
    })
}

impl Trace {
    /// Parses a log; requests by one host within `window_s` of the first
    /// of its open object join that object.
    pub fn parse(text: &str, window_s: f64) -> Trace {
        let mut t = Trace::default();
        let mut doc_of: BTreeMap<&str, u32> = BTreeMap::new();
        let mut lines = Vec::new();
        for l in text.lines().filter(|l| !l.trim().is_empty()) {
            match parse_line(l) {
                Some(x) => lines.push(x),
                None => t.skipped += 1,
            }
        }
        // Logs are written in completion order: sort by time, stably.
        lines.sort_by_key(|x| x.at);
        let Some(start) = lines.first().map(|x| x.at) else {
            return t;
        };
        // Open object per host: (index into objects, its first time).
        let mut open: BTreeMap<&str, (usize, i64)> = BTreeMap::new();
        for x in &lines {
            let doc = *doc_of.entry(x.path).or_insert_with(|| {
                t.documents.push((x.path.to_string(), 0));
                t.documents.len() as u32 - 1
            });
            let size = &mut t.documents[doc as usize].1;
            *size = (*size).max(x.bytes);
            let joins = open
                .get(x.host)
                .filter(|(_, first)| ((x.at - first) as f64) < window_s.max(0.0) + 1e-9);
            match joins {
                Some(&(o, _)) => {
                    let docs = &mut t.objects[o].documents;
                    if !docs.contains(&doc) {
                        docs.push(doc);
                    }
                }
                None => {
                    open.insert(x.host, (t.objects.len(), x.at));
                    t.objects.push(Object {
                        at_s: (x.at - start) as f64,
                        documents: vec![doc],
                    });
                }
            }
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_one_hosts_requests_within_a_second_into_objects() {
        let log = "\
a.example - - [10/Oct/2000:13:55:36 -0700] \"GET /index.html HTTP/1.0\" 200 2326
a.example - - [10/Oct/2000:13:55:37 -0700] \"GET /logo.gif HTTP/1.0\" 200 900
b.example - - [10/Oct/2000:13:55:37 -0700] \"GET /logo.gif HTTP/1.0\" 304 -
a.example - - [10/Oct/2000:13:55:39 -0700] \"GET /index.html HTTP/1.0\" 200 2400
b.example - - [10/Oct/2000:13:55:37 -0700] \"POST /form HTTP/1.0\" 200 10
garbage line
c.example - - [10/Oct/2000:13:55:40 -0700] \"GET /missing HTTP/1.0\" 404 200
";
        let t = Trace::parse(log, 1.0);
        assert_eq!(
            t.documents,
            vec![("/index.html".into(), 2400), ("/logo.gif".into(), 900)]
        );
        assert_eq!(
            t.objects,
            vec![
                Object {
                    at_s: 0.0,
                    documents: vec![0, 1]
                },
                Object {
                    at_s: 3.0,
                    documents: vec![0]
                },
            ]
        );
        assert_eq!(t.skipped, 4);
    }

    #[test]
    fn times_are_utc_seconds() {
        assert_eq!(parse_time("01/Jan/1970:00:00:00 +0000"), Some(0));
        assert_eq!(parse_time("01/Jan/1970:01:00:00 +0100"), Some(0));
        assert_eq!(parse_time("29/Feb/2000:12:00:00 +0000"), Some(951_825_600));
        assert_eq!(parse_time("32/Jan/2000:12:00:00 +0000"), None);
        assert_eq!(parse_time("01/Foo/2000:12:00:00 +0000"), None);
    }
}
