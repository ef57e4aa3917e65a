//! `infeed bench` for people: the readable summary of a run's JSON report,
//! the stage that limits the pipeline, and the progress line while it runs.
//!
//! Everything here reads the JSON report (`--json` prints it as it is), so
//! the summary can never show a figure the scripts do not see.

use std::fmt::Write as _;
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use infeed::pipeline::bottleneck::{Bottleneck, STAGES, StageTime};
use serde_json::Value;

/// A stage's share of its threads' time spent working: `busy / (busy +
/// wait)`, or `None` when it recorded no time at all.
fn busy_share(time: StageTime) -> Option<f64> {
    let total = time.busy + time.wait;
    (total > 0.0).then(|| time.busy / total)
}

/// The stages' words in the summary.
const STAGE_WORDS: [(&str, &str); 3] = [
    ("read", "read, CRC, inflate"),
    ("records", "record thread: interleave, shuffle, grouping"),
    ("batch", "workers: parse, assemble"),
];

/// A stage's busy and wait milliseconds (summed over its threads), the
/// workers' wait derived as the library does when the report says how
/// many there were and no wait was measured.
fn stage_times(report: &Value, name: &str) -> StageTime {
    let stage = &report["stages"][name];
    let busy = stage["busy_ms"].as_f64().unwrap_or(0.0);
    let wait = stage["wait_ms"].as_f64().unwrap_or(0.0);
    match (name, report["workers"].as_u64(), report["seconds"].as_f64()) {
        ("batch", Some(workers), Some(seconds)) => {
            StageTime::workers(busy, wait, workers as usize, seconds * 1e3)
        }
        _ => StageTime { busy, wait },
    }
}

/// What limits the pipeline over the run a report covers (the library's
/// rule, [`Bottleneck::of`]).
pub fn limiting_stage(report: &Value) -> Bottleneck {
    let seconds = report["seconds"].as_f64().unwrap_or(0.0);
    let stages = &report["stages"];
    if !stages.is_object() {
        return Bottleneck::Unknown;
    }
    // In milliseconds throughout: the rule is a matter of shares.
    let consumer_wait = stages["consumer_wait_ms"].as_f64().unwrap_or(0.0);
    Bottleneck::of(
        seconds * 1e3,
        report["batches"].as_u64().unwrap_or(0),
        consumer_wait,
        STAGES.map(|name| stage_times(report, name)),
    )
}

/// `1234567.8` → `1,234,568`.
fn thousands(x: f64) -> String {
    let digits = format!("{:.0}", x.max(0.0));
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn percent(share: f64) -> String {
    format!("{:.0}%", share * 100.0)
}

fn stage_words(name: &str) -> &'static str {
    STAGE_WORDS
        .iter()
        .find(|(n, _)| *n == name)
        .map_or("", |(_, words)| words)
}

/// The one line naming what limits the pipeline.
pub fn limit_line(limit: &Bottleneck) -> String {
    match limit {
        Bottleneck::Consumer { wait_share } => format!(
            "limit: the consumer (it waited for batches {} of the run; the pipeline keeps ahead)",
            percent(*wait_share)
        ),
        Bottleneck::Stage { name, busy_share } => format!(
            "limit: {name} ({}; busy {} of its time)",
            stage_words(name),
            percent(*busy_share)
        ),
        Bottleneck::Unclear {
            best: Some((name, share)),
        } => format!(
            "limit: unclear (no stage busy over half its time; busiest: {name}, {}): other processes or the source's latency",
            percent(*share)
        ),
        Bottleneck::Unclear { best: None } | Bottleneck::Unknown => {
            "limit: unknown (no batches or no stage figures)".to_string()
        }
    }
}

/// The readable summary of a report written by `infeed bench`.
pub fn summary(report: &Value) -> String {
    let num = |v: &Value| v.as_f64().unwrap_or(0.0);
    let mut s = String::new();
    let records = num(&report["records"]);
    let _ = writeln!(
        s,
        "{} records in {} batches, {:.2} s",
        thousands(records),
        thousands(num(&report["batches"])),
        num(&report["seconds"])
    );
    let _ = writeln!(
        s,
        "  records/s    {}",
        thousands(num(&report["records_per_sec"]))
    );
    let _ = writeln!(
        s,
        "  MB/s         {:.1} (serialized records)",
        num(&report["bytes_per_sec"]) / 1e6
    );
    let first = match report["first_batch_ms"].as_f64() {
        Some(ms) => format!("{ms:.1} ms"),
        None => "-".into(),
    };
    let _ = writeln!(s, "  first batch  {first}");
    let rss = match report["peak_rss_bytes"].as_f64() {
        Some(b) => format!("{:.1} MB", b / 1e6),
        None => "-".into(),
    };
    let _ = writeln!(s, "  peak RSS     {rss}");
    if let Some(cpu) = report["cpu_seconds"].as_f64() {
        let per_record = if records > 0.0 {
            format!(" ({:.2} µs/record)", cpu / records * 1e6)
        } else {
            String::new()
        };
        let _ = writeln!(s, "  CPU          {cpu:.2} s{per_record}");
    }
    if let Some(digest) = report["digest"].as_str() {
        let _ = writeln!(s, "  digest       {digest}");
    }
    let account = &report["record_account"];
    if let Some(read) = account["read"].as_f64() {
        // Each cause left out, where any is.
        let causes: Vec<String> = account["left_out"]
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(_, n)| n.as_f64().unwrap_or(0.0) > 0.0)
            .map(|(cause, n)| format!("{cause} {}", thousands(n.as_f64().unwrap_or(0.0))))
            .collect();
        let left_out = match causes.is_empty() {
            true => String::new(),
            false => format!(", left out: {}", causes.join(", ")),
        };
        let _ = writeln!(
            s,
            "  records      read {}, delivered {}{left_out}",
            thousands(read),
            thousands(num(&account["delivered"]))
        );
    }
    if let Some(sources) = report["sources"].as_array() {
        // Records taken from each source of a mixture, and their share.
        let total: f64 = sources.iter().filter_map(|x| x["records"].as_f64()).sum();
        for x in sources {
            let n = x["records"].as_f64().unwrap_or(0.0);
            let share = if total > 0.0 { 100.0 * n / total } else { 0.0 };
            let name = x["name"].as_str().unwrap_or("?");
            let _ = writeln!(s, "  source       {name}: {n} records ({share:.1}%)");
        }
    }
    let stages = &report["stages"];
    if stages.is_object() {
        let _ = writeln!(s, "  stage        busy s    wait s   busy");
        for name in STAGES {
            let time = stage_times(report, name);
            let share = busy_share(time).map_or("-".to_string(), percent);
            let _ = writeln!(
                s,
                "  {name:<9} {:>9.2} {:>9.2} {share:>6}",
                time.busy / 1e3,
                time.wait / 1e3
            );
        }
        if let Some(workers) = report["workers"].as_u64() {
            let _ = writeln!(s, "  workers      {workers}");
        }
        let wait = num(&stages["consumer_wait_ms"]) / 1e3;
        let seconds = num(&report["seconds"]);
        let share = if seconds > 0.0 {
            format!(" ({} of the run)", percent(wait / seconds))
        } else {
            String::new()
        };
        let _ = writeln!(s, "  consumer waited {wait:.2} s{share}");
    }
    let _ = writeln!(s, "{}", limit_line(&limiting_stage(report)));
    s
}

/// The progress line on stderr while a bench runs: only when stderr is a
/// terminal, at most 4 updates a second, erased by [`Progress::finish`].
pub struct Progress {
    enabled: bool,
    started: Instant,
    last: Option<Instant>,
    drawn: bool,
}

const PROGRESS_EVERY: Duration = Duration::from_millis(250);

impl Progress {
    pub fn new(wanted: bool) -> Self {
        Progress {
            enabled: wanted && std::io::stderr().is_terminal(),
            started: Instant::now(),
            last: None,
            drawn: false,
        }
    }

    /// Called after every batch; draws when the last draw is 250 ms old.
    pub fn tick(&mut self, records: u64, batches: u64) {
        if !self.enabled {
            return;
        }
        let now = Instant::now();
        if self.last.is_some_and(|t| now - t < PROGRESS_EVERY) {
            return;
        }
        if self.last.is_none() {
            // The first draw waits a quarter second too: a short run shows none.
            self.last = Some(now);
            return;
        }
        self.last = Some(now);
        let seconds = (now - self.started).as_secs_f64();
        let line = progress_line(records, batches, seconds);
        let mut err = std::io::stderr().lock();
        // A failed write to the terminal only loses the progress line.
        let _ = write!(err, "\r\x1b[2K{line}");
        let _ = err.flush();
        self.drawn = true;
    }

    /// Erases the progress line, if one was drawn.
    pub fn finish(&mut self) {
        if self.drawn {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
            self.drawn = false;
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

/// `12,345 records, 48 batches, 1.2 s, 10,288 records/s`.
fn progress_line(records: u64, batches: u64, seconds: f64) -> String {
    let rate = if seconds > 0.0 {
        records as f64 / seconds
    } else {
        0.0
    };
    format!(
        "{} records, {} batches, {seconds:.1} s, {} records/s",
        thousands(records as f64),
        thousands(batches as f64),
        thousands(rate)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn report(consumer_wait_ms: f64, stages: [(f64, f64); 3]) -> Value {
        let stage = |(busy, wait): (f64, f64)| json!({ "busy_ms": busy, "wait_ms": wait });
        json!({
            "records": 40960,
            "batches": 160,
            "seconds": 2.0,
            "records_per_sec": 20480.0,
            "bytes_per_sec": 123_456_789.0,
            "first_batch_ms": 12.345,
            "peak_rss_bytes": 45_600_000,
            "cpu_seconds": 3.5,
            "digest": "0123456789abcdef",
            "stages": {
                "read": stage(stages[0]),
                "records": stage(stages[1]),
                "batch": stage(stages[2]),
                "consumer_wait_ms": consumer_wait_ms,
            },
        })
    }

    #[test]
    fn summary_of_a_fixed_report() {
        let mut r = report(900.0, [(400.0, 1600.0), (200.0, 1800.0), (3720.0, 0.0)]);
        // The workers measure no wait: 2 workers × 2 s − 3.72 s busy = 0.28 s.
        r["workers"] = json!(2);
        assert_eq!(
            summary(&r),
            "40,960 records in 160 batches, 2.00 s\n\
             \x20 records/s    20,480\n\
             \x20 MB/s         123.5 (serialized records)\n\
             \x20 first batch  12.3 ms\n\
             \x20 peak RSS     45.6 MB\n\
             \x20 CPU          3.50 s (85.45 µs/record)\n\
             \x20 digest       0123456789abcdef\n\
             \x20 stage        busy s    wait s   busy\n\
             \x20 read           0.40      1.60    20%\n\
             \x20 records        0.20      1.80    10%\n\
             \x20 batch          3.72      0.28    93%\n\
             \x20 workers      2\n\
             \x20 consumer waited 0.90 s (45% of the run)\n\
             limit: batch (workers: parse, assemble; busy 93% of its time)\n"
        );
    }

    #[test]
    fn summary_without_optional_figures() {
        let r = json!({
            "records": 0, "batches": 0, "seconds": 0.5, "records_per_sec": 0.0,
            "bytes_per_sec": 0.0, "first_batch_ms": null, "peak_rss_bytes": null,
            "cpu_seconds": null, "digest": null,
        });
        assert_eq!(
            summary(&r),
            "0 records in 0 batches, 0.50 s\n\
             \x20 records/s    0\n\
             \x20 MB/s         0.0 (serialized records)\n\
             \x20 first batch  -\n\
             \x20 peak RSS     -\n\
             limit: unknown (no batches or no stage figures)\n"
        );
    }

    #[test]
    fn the_consumer_limits_when_it_hardly_waits() {
        // 0.199 s of 2 s is 9.95%: under 10%, whatever the stages say.
        let r = report(199.0, [(100.0, 1900.0), (100.0, 1900.0), (1990.0, 10.0)]);
        assert_eq!(
            limiting_stage(&r),
            Bottleneck::Consumer { wait_share: 0.0995 }
        );
        // At exactly 10% the stages decide.
        let r = report(200.0, [(100.0, 1900.0), (100.0, 1900.0), (1990.0, 10.0)]);
        assert_eq!(
            limiting_stage(&r),
            Bottleneck::Stage {
                name: "batch",
                busy_share: 0.995
            }
        );
    }

    #[test]
    fn the_busiest_stage_limits() {
        // Shard threads busy 3 s of 4 (75%) beat workers busy 2 s of 4 (50%),
        // though the workers worked as long in total as the readers.
        let r = report(
            1000.0,
            [(3000.0, 1000.0), (500.0, 1500.0), (2000.0, 2000.0)],
        );
        assert_eq!(
            limiting_stage(&r),
            Bottleneck::Stage {
                name: "read",
                busy_share: 0.75
            }
        );
        assert_eq!(
            limit_line(&limiting_stage(&r)),
            "limit: read (read, CRC, inflate; busy 75% of its time)"
        );
        // A tie goes to the later stage.
        let r = report(1000.0, [(1500.0, 500.0), (1500.0, 500.0), (100.0, 900.0)]);
        assert_eq!(
            limiting_stage(&r),
            Bottleneck::Stage {
                name: "records",
                busy_share: 0.75
            }
        );
    }

    #[test]
    fn the_workers_wait_is_the_rest_of_their_time() {
        // 4 workers × 2 s = 8 s: busy 3 s, so waiting 5 s (37.5%); the
        // readers' 60% limits.
        let mut r = report(1000.0, [(1200.0, 800.0), (100.0, 1900.0), (3000.0, 0.0)]);
        r["workers"] = json!(4);
        assert_eq!(
            stage_times(&r, "batch"),
            StageTime {
                busy: 3000.0,
                wait: 5000.0
            }
        );
        assert_eq!(
            limiting_stage(&r),
            Bottleneck::Stage {
                name: "read",
                busy_share: 0.6
            }
        );
        // 1 worker: busy 3 s is past the 2 s run (threads start before the
        // clock); the wait is 0, not negative.
        r["workers"] = json!(1);
        assert_eq!(
            stage_times(&r, "batch"),
            StageTime {
                busy: 3000.0,
                wait: 0.0
            }
        );
        // A measured wait is kept.
        r["stages"]["batch"]["wait_ms"] = json!(250.0);
        assert_eq!(
            stage_times(&r, "batch"),
            StageTime {
                busy: 3000.0,
                wait: 250.0
            }
        );
    }

    #[test]
    fn no_stage_over_half_busy_is_unclear() {
        // 50% exactly is not over half.
        let r = report(1500.0, [(1000.0, 1000.0), (200.0, 1800.0), (900.0, 1100.0)]);
        assert_eq!(
            limiting_stage(&r),
            Bottleneck::Unclear {
                best: Some(("read", 0.5))
            }
        );
        assert_eq!(
            limit_line(&limiting_stage(&r)),
            "limit: unclear (no stage busy over half its time; busiest: read, 50%): other processes or the source's latency"
        );
        // A stage with no time recorded does not count.
        let r = report(1500.0, [(0.0, 0.0), (0.0, 0.0), (0.0, 0.0)]);
        assert_eq!(limiting_stage(&r), Bottleneck::Unclear { best: None });
    }

    #[test]
    fn progress_line_and_numbers() {
        assert_eq!(
            progress_line(12_345, 48, 1.2),
            "12,345 records, 48 batches, 1.2 s, 10,288 records/s"
        );
        assert_eq!(
            progress_line(0, 0, 0.0),
            "0 records, 0 batches, 0.0 s, 0 records/s"
        );
        assert_eq!(thousands(999.0), "999");
        assert_eq!(thousands(1000.0), "1,000");
        assert_eq!(thousands(1_234_567.6), "1,234,568");
    }
}
