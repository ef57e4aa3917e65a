//! `cpu_affinity`: every thread of the pipeline runs on the cores given
//! (the record thread, where record maps run, and the workers, where batch
//! maps run), and the output does not change.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use infeed::example::ParsedBatch;
use infeed::pipeline::{Pipeline, PipelineError};

use super::parse::lm_spec;
use super::testdata;

/// The calling thread's allowed cores, as the kernel lists them.
fn allowed_here() -> String {
    let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim()
        .to_owned()
}

/// The process's first allowed core.
fn first_core() -> usize {
    let list = allowed_here();
    let first = list.split([',', '-']).next().unwrap();
    first.parse().unwrap()
}

fn run(pin: Option<usize>, seen: Arc<Mutex<BTreeSet<(String, String)>>>) -> Vec<ParsedBatch> {
    let on_records = seen.clone();
    let mut p = Pipeline::from_files([testdata("lm-sample.tfrecord.gz")])
        .unwrap()
        .shuffle(64)
        .seed(3)
        .map(move |r| {
            on_records
                .lock()
                .unwrap()
                .insert(("records".into(), allowed_here()));
            r
        });
    if let Some(core) = pin {
        p = p.cpu_affinity([core]).threads(2);
    }
    p.parse(lm_spec())
        .map_batch(move |b| {
            seen.lock()
                .unwrap()
                .insert(("workers".into(), allowed_here()));
            Ok(b)
        })
        .batch(16, false)
        .build_columns()
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn every_thread_runs_on_the_budget_and_the_output_stays() {
    let core = first_core();
    let seen = Arc::new(Mutex::new(BTreeSet::new()));
    let pinned = run(Some(core), seen.clone());
    let want: BTreeSet<(String, String)> = [
        ("records".to_string(), core.to_string()),
        ("workers".to_string(), core.to_string()),
    ]
    .into();
    assert_eq!(*seen.lock().unwrap(), want);
    let free = run(None, Arc::new(Mutex::new(BTreeSet::new())));
    assert_eq!(pinned.len(), 16);
    assert_eq!(pinned, free);
}

#[test]
fn cores_the_process_may_not_use_are_refused() {
    let e = Pipeline::from_files([testdata("lm-sample.tfrecord.gz")])
        .unwrap()
        .cpu_affinity([1 << 20])
        .parse(lm_spec())
        .batch(16, false)
        .build_columns();
    let Err(PipelineError::Setting(e)) = e else {
        panic!("not refused as a setting");
    };
    assert_eq!((e.setting, e.value.as_str()), ("cpu_affinity", "[1048576]"));
    assert!(
        e.limit
            .starts_with("a non-empty set of the cores this process may run on: [0")
    );
}
