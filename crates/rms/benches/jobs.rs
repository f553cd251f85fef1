//! Job tracker benchmark (plain binary, `harness = false`).
//!
//! Run: `cargo bench -p rackflow-rms --bench jobs`
//!
//! Prints, each beside a bare baseline measured in the same run:
//! 1. in-process job create + complete per second (goal ≥ 100,000/s);
//! 2. the time for `get_job` to aggregate a 10,000-child batch on read
//!    (goal ≤ 5 ms), both while the batch runs and on the read that seals it.

use std::collections::HashMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use rackflow_rms::job::{JobState, JobTracker, JobType, RmsJobHandle};

const CREATE_COMPLETE_JOBS: usize = 200_000;
const BATCH_CHILDREN: usize = 10_000;
const RUNNING_READS: usize = 50;
const SEAL_ROUNDS: usize = 5;

fn main() {
    println!("rackflow-rms job tracker benchmark (single thread, release build)");
    create_complete();
    aggregate_on_read();
}

fn per_second(count: usize, elapsed: Duration) -> f64 {
    count as f64 / elapsed.as_secs_f64()
}

fn create_complete() {
    // Keep every record (no pruning in the timed loop): the cap is above the
    // number of jobs created.
    let tracker =
        JobTracker::with_retention_limits(Duration::from_secs(86_400), CREATE_COMPLETE_JOBS + 1);
    let nodes: Vec<String> = (0..CREATE_COMPLETE_JOBS)
        .map(|i| format!("node-{i}"))
        .collect();
    let start = Instant::now();
    for node in &nodes {
        let job = tracker
            .create_job_if_node_idle("rack-1", node, JobType::FirmwareUpdate)
            .expect("admitted");
        job.complete("Completed", "{}");
    }
    let tracked = start.elapsed();
    assert_eq!(tracker.registry().len(), CREATE_COMPLETE_JOBS);

    // Same with a visible workflow (metrics on) and a progress step.
    let tracker =
        JobTracker::with_retention_limits(Duration::from_secs(86_400), CREATE_COMPLETE_JOBS + 1);
    let start = Instant::now();
    for node in &nodes {
        let job = tracker
            .create_visible_workflow_job_if_node_idle("rack-1", node, JobType::FirmwareUpdate)
            .expect("admitted");
        job.progress("Flashing");
        job.complete("Completed", "{}");
    }
    let visible = start.elapsed();

    // Baseline: a bare HashMap insert + remove with a fresh UUID string key,
    // the floor of any tracker that names jobs by UUID.
    let mut map: HashMap<String, u64> = HashMap::new();
    let start = Instant::now();
    for i in 0..CREATE_COMPLETE_JOBS {
        let key = uuid::Uuid::new_v4().to_string();
        map.insert(key.clone(), i as u64);
        black_box(map.remove(&key));
    }
    let baseline_uuid = start.elapsed();

    // Baseline without UUID generation.
    let keys: Vec<String> = (0..CREATE_COMPLETE_JOBS)
        .map(|i| format!("k-{i}"))
        .collect();
    let mut map: HashMap<String, u64> = HashMap::new();
    let start = Instant::now();
    for (i, key) in keys.iter().enumerate() {
        map.insert(key.clone(), i as u64);
        black_box(map.remove(key));
    }
    let baseline_plain = start.elapsed();

    println!();
    println!("1. create + complete, {CREATE_COMPLETE_JOBS} jobs (goal >= 100,000/s)");
    println!(
        "   tracker create_job_if_node_idle + complete:       {:>12.0} jobs/s",
        per_second(CREATE_COMPLETE_JOBS, tracked)
    );
    println!(
        "   tracker visible workflow + progress + complete:  {:>12.0} jobs/s",
        per_second(CREATE_COMPLETE_JOBS, visible)
    );
    println!(
        "   baseline HashMap insert+remove, new UUID key:    {:>12.0} ops/s",
        per_second(CREATE_COMPLETE_JOBS, baseline_uuid)
    );
    println!(
        "   baseline HashMap insert+remove, ready key:       {:>12.0} ops/s",
        per_second(CREATE_COMPLETE_JOBS, baseline_plain)
    );
}

fn build_batch(tracker: &JobTracker, rack: &str) -> (String, Vec<RmsJobHandle>, Duration) {
    let start = Instant::now();
    let parent = tracker
        .create_parent_job(rack, JobType::FirmwareUpdate)
        .expect("parent admitted");
    let children = (0..BATCH_CHILDREN)
        .map(|i| {
            tracker
                .create_child_job(&parent, rack, &format!("node-{i}"), JobType::FirmwareUpdate)
                .expect("child admitted")
        })
        .collect();
    (parent, children, start.elapsed())
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1_000.0
}

fn aggregate_on_read() {
    let tracker = JobTracker::with_retention_limits(
        Duration::from_secs(86_400),
        (BATCH_CHILDREN + 1) * (SEAL_ROUNDS + 1),
    );

    // A running batch: half the children completed, the rest queued.
    let (parent, mut children, setup) = build_batch(&tracker, "rack-run");
    for child in children.drain(..BATCH_CHILDREN / 2) {
        child.complete("Completed", r#"{"status":"ok"}"#);
    }
    let running_reads: Vec<Duration> = (0..RUNNING_READS)
        .map(|_| {
            let start = Instant::now();
            let info = tracker.get_job(&parent).expect("parent exists");
            let elapsed = start.elapsed();
            assert_eq!(info.state, JobState::Running);
            assert_eq!(info.child_job_ids.len(), BATCH_CHILDREN);
            elapsed
        })
        .collect();
    for child in children {
        child.complete("Completed", r#"{"status":"ok"}"#);
    }

    // The read that seals a batch whose children all just finished.
    let seal_reads: Vec<Duration> = (0..SEAL_ROUNDS)
        .map(|round| {
            let (parent, children, _) = build_batch(&tracker, &format!("rack-seal-{round}"));
            for child in children {
                child.complete("Completed", r#"{"status":"ok"}"#);
            }
            let start = Instant::now();
            let info = tracker.get_job(&parent).expect("parent exists");
            let elapsed = start.elapsed();
            assert_eq!(info.state, JobState::Completed);
            elapsed
        })
        .collect();

    // Baseline: look up 10,000 ids in a 10,000-entry HashMap, tally a field,
    // and copy the id list (what any read-side aggregation must at least do).
    let ids: Vec<String> = (0..BATCH_CHILDREN)
        .map(|_| uuid::Uuid::new_v4().to_string())
        .collect();
    let map: HashMap<String, u8> = ids.iter().map(|id| (id.clone(), 1)).collect();
    let baseline_reads: Vec<Duration> = (0..RUNNING_READS)
        .map(|_| {
            let start = Instant::now();
            let done: usize = ids
                .iter()
                .filter_map(|id| map.get(id))
                .map(|v| *v as usize)
                .sum();
            let copy = ids.clone();
            black_box((done, copy));
            start.elapsed()
        })
        .collect();

    println!();
    println!("2. aggregate a {BATCH_CHILDREN}-child batch on read (goal <= 5 ms)");
    println!(
        "   get_job(parent), batch running (median of {RUNNING_READS}): {:>8.3} ms",
        ms(median(running_reads))
    );
    println!(
        "   get_job(parent), read that seals it (median of {SEAL_ROUNDS}): {:>6.3} ms",
        ms(median(seal_reads))
    );
    println!(
        "   baseline 10,000 HashMap lookups + id-list copy (median): {:>5.3} ms",
        ms(median(baseline_reads))
    );
    println!(
        "   (setup, not a goal: parent + {BATCH_CHILDREN} children created one by one in {:.0} ms)",
        ms(setup)
    );
}
