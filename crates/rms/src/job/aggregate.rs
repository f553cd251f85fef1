//! Parent aggregation (spec §1.12): counting a parent's children and turning
//! the counts into the parent's state, with the spec's exact descriptions,
//! messages and `result_json` shapes.
//!
//! Counting runs under the registry's read lock from the store's per-parent
//! child tally, so reading a 10,000-child batch does not walk its children;
//! building the failure JSON and sealing happen after the lock is released.

use serde::{Deserialize, Serialize};

use super::error::{JobError, JobFailure, job_error_of};
use super::ids::JobId;
use super::job_type::JobType;
use super::registry::{JobSnapshot, failed_state};
use super::state::JobLifecycleState;
use super::store::JobStore;

/// Child tallies of one parent.
#[derive(Debug, Default)]
pub(crate) struct ParentCounts {
    pub total: usize,
    pub completed: usize,
    pub failed: usize,
    pub running: usize,
    pub queued: usize,
    /// Child IDs whose record no longer exists.
    pub missing: usize,
    /// Completed children whose result says `"status":"already_up_to_date"`.
    pub skipped: usize,
    pub failed_children: Vec<FailedChild>,
}

impl ParentCounts {
    /// `completed + failed + missing`.
    pub fn done(&self) -> usize {
        self.completed + self.failed + self.missing
    }
}

/// What a failed child contributes to its parent's failure result.
#[derive(Debug)]
pub(crate) struct FailedChild {
    pub job_id: JobId,
    pub node_id: String,
    pub error_code: JobError,
    pub error_message: String,
    pub result_json: String,
}

/// Counts a parent's children (call under the read lock). The counts come
/// from the store's per-parent tally in O(1); only when every child is done
/// and some failed are the children walked, once, to list the failures in
/// creation order for the failure result.
pub(crate) fn count_children(jobs: &JobStore, parent: &JobSnapshot) -> ParentCounts {
    let tally = jobs.child_tally(&parent.job_id);
    let total = parent.child_job_ids.len();
    let mut counts = ParentCounts {
        total,
        completed: tally.completed,
        failed: tally.failed,
        running: tally.running,
        queued: tally.queued,
        missing: total.saturating_sub(tally.present()),
        skipped: tally.skipped,
        failed_children: Vec::new(),
    };
    if counts.done() == total && counts.failed > 0 {
        counts.failed_children = parent
            .child_job_ids
            .iter()
            .filter_map(|child_id| jobs.get(child_id))
            .filter_map(|child| match &child.state {
                JobLifecycleState::Failed {
                    failure,
                    message,
                    result_json,
                    ..
                } => Some(FailedChild {
                    job_id: child.job_id.clone(),
                    node_id: child.node_id.clone(),
                    error_code: job_error_of(failure.as_ref()),
                    error_message: message.clone(),
                    result_json: result_json.clone(),
                }),
                _ => None,
            })
            .collect();
    }
    counts
}

/// What a refresh does to the parent.
#[derive(Debug)]
pub(crate) enum ParentOutcome {
    /// Some children are still active: a progress description.
    Running(String),
    /// Every child is done: the terminal state to seal.
    Terminal(JobLifecycleState),
}

/// Decides the parent's state from its counts (`total > 0`).
pub(crate) fn parent_outcome(job_type: JobType, counts: ParentCounts) -> ParentOutcome {
    if counts.done() < counts.total {
        return ParentOutcome::Running(running_description(job_type, &counts));
    }
    if counts.failed > 0 || counts.missing > 0 {
        ParentOutcome::Terminal(failed_state(parent_failure(job_type, counts)))
    } else {
        ParentOutcome::Terminal(JobLifecycleState::Completed {
            description: completed_description(job_type, counts.total, counts.skipped),
            result_json: String::new(),
        })
    }
}

/// "Batch {noun} in progress ({done}/{total} complete[, N running][, N queued])".
pub(crate) fn running_description(job_type: JobType, counts: &ParentCounts) -> String {
    format!(
        "Batch {} in progress ({}/{} complete{}{})",
        job_type.batch_noun(),
        counts.done(),
        counts.total,
        count_fragment(counts.running, "running"),
        count_fragment(counts.queued, "queued"),
    )
}

/// The three completed wordings, chosen by how many children were skipped.
pub(crate) fn completed_description(job_type: JobType, total: usize, skipped: usize) -> String {
    if skipped == total {
        format!("All {total} nodes already up to date")
    } else if skipped > 0 {
        format!(
            "{}/{total} {} applied, {skipped} already up to date",
            total - skipped,
            job_type.batch_noun_plural()
        )
    } else {
        format!(
            "All {total} {} completed successfully",
            job_type.batch_noun_plural()
        )
    }
}

/// The parent's failure: code `Other`, message "{failed+missing} of {total}
/// {plural} failed[ ({missing} jobs missing)]", description "Batch complete:
/// {completed}/{total} succeeded, {failed} failed[, {missing} missing]".
pub(crate) fn parent_failure(job_type: JobType, counts: ParentCounts) -> JobFailure {
    let ParentCounts {
        total,
        completed,
        failed,
        missing,
        failed_children,
        ..
    } = counts;
    let description = format!(
        "Batch complete: {completed}/{total} succeeded, {failed} failed{}",
        count_fragment(missing, "missing")
    );
    let missing_suffix = if missing > 0 {
        format!(" ({missing} jobs missing)")
    } else {
        String::new()
    };
    let message = format!(
        "{} of {total} {} failed{missing_suffix}",
        failed + missing,
        job_type.batch_noun_plural(),
    );
    let result_json = match job_type {
        JobType::FirmwareUpdate => serialize_result_json(&FirmwareParentFailureResult {
            completed,
            failed,
            missing,
            total,
            failed_jobs: failed_children
                .into_iter()
                .map(firmware_failed_child_detail)
                .collect(),
        }),
        JobType::SwitchCertificate
        | JobType::SwitchMtlsDisable
        | JobType::SwitchSdnFactoryDefaultReset
        | JobType::SwitchFactoryDefaultReset
        | JobType::SwitchSystemPasswordUpdate
        | JobType::SwitchSystemImageUpdate
        | JobType::ConfigureScaleUpFabricManagerV2
        | JobType::ColdRebootSequence => serialize_result_json(&SwitchParentFailureResult {
            completed,
            failed,
            missing,
            total,
            failed_jobs: failed_children
                .into_iter()
                .map(|child| SwitchFailedChildDetail {
                    job_id: child.job_id.into(),
                    node_id: child.node_id,
                    error_message: child.error_message,
                })
                .collect(),
        }),
    };
    JobFailure::new(JobError::Other, message)
        .with_description(description)
        .with_result_json(result_json)
}

fn count_fragment(count: usize, label: &str) -> String {
    if count > 0 {
        format!(", {count} {label}")
    } else {
        String::new()
    }
}

/// True when `result_json` parses with `"status":"already_up_to_date"`.
pub(crate) fn result_is_already_up_to_date(result_json: &str) -> bool {
    // Fast path for the common case: a result that cannot contain the value,
    // neither literally nor through a `\u` escape, is not parsed at all.
    if !result_json.contains("already_up_to_date") && !result_json.contains("\\u") {
        return false;
    }
    #[derive(Deserialize)]
    struct StatusOnly {
        status: Option<String>,
    }
    serde_json::from_str::<StatusOnly>(result_json)
        .is_ok_and(|result| result.status.as_deref() == Some("already_up_to_date"))
}

/// Serializes a payload; an (unexpected) serializer error yields `""`.
pub(crate) fn serialize_result_json(payload: &impl Serialize) -> String {
    serde_json::to_string(payload).unwrap_or_else(|error| {
        tracing::warn!(error = %error, "failed to serialize job result");
        String::new()
    })
}

/// `FirmwareUpdate` parent failure result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FirmwareParentFailureResult {
    pub completed: usize,
    pub failed: usize,
    pub missing: usize,
    pub total: usize,
    pub failed_jobs: Vec<FirmwareFailedChildDetail>,
}

/// One failed child of a firmware batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FirmwareFailedChildDetail {
    pub job_id: String,
    pub node_id: String,
    /// The child's `JobError` Debug name, e.g. `"ClientError"`.
    pub error_code: String,
    /// The child's failure message.
    #[serde(rename = "error")]
    pub error_message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<FirmwareChildResult>,
    /// The child's original `result_json`, when it did not parse into a
    /// non-empty [`FirmwareChildResult`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_result_json: Option<String>,
}

/// The typed firmware child result; every field optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FirmwareChildResult {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<FirmwareChildResultTarget>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redfish: Option<FirmwareChildResultRedfish>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_error: Option<String>,
}

impl FirmwareChildResult {
    fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// `summary`, falling back to `error_message`.
    fn summary(&self) -> Option<&str> {
        self.summary.as_deref().or(self.error_message.as_deref())
    }
}

/// The firmware target of a child result (both fields required when the
/// object is present, as in the reference's typed shape).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FirmwareChildResultTarget {
    pub component: String,
    pub firmware_file: String,
}

/// Redfish message details of a child result.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FirmwareChildResultRedfish {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<String>,
}

/// Parent failure result of every non-firmware ("switch-shaped") type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwitchParentFailureResult {
    pub completed: usize,
    pub failed: usize,
    pub missing: usize,
    pub total: usize,
    pub failed_jobs: Vec<SwitchFailedChildDetail>,
}

/// One failed child of a switch-shaped batch: no error code, no parsing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwitchFailedChildDetail {
    pub job_id: String,
    pub node_id: String,
    #[serde(rename = "error")]
    pub error_message: String,
}

fn firmware_failed_child_detail(child: FailedChild) -> FirmwareFailedChildDetail {
    let (summary, result, raw_result_json) = if child.result_json.is_empty() {
        // Nothing is added for an empty child result.
        (None, None, None)
    } else {
        match serde_json::from_str::<FirmwareChildResult>(&child.result_json) {
            Ok(result) if !result.is_empty() => {
                (result.summary().map(str::to_owned), Some(result), None)
            }
            Ok(_) | Err(_) => (None, None, Some(child.result_json)),
        }
    };
    FirmwareFailedChildDetail {
        job_id: child.job_id.into(),
        node_id: child.node_id,
        error_code: format!("{:?}", child.error_code),
        error_message: child.error_message,
        summary,
        result,
        raw_result_json,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(
        completed: usize,
        failed: usize,
        running: usize,
        queued: usize,
        missing: usize,
    ) -> ParentCounts {
        ParentCounts {
            total: completed + failed + running + queued + missing,
            completed,
            failed,
            running,
            queued,
            missing,
            ..ParentCounts::default()
        }
    }

    #[test]
    fn running_description_shows_only_non_zero_fragments() {
        let job_type = JobType::FirmwareUpdate;
        assert_eq!(
            running_description(job_type, &counts(1, 0, 1, 1, 0)),
            "Batch firmware update in progress (1/3 complete, 1 running, 1 queued)"
        );
        assert_eq!(
            running_description(job_type, &counts(0, 0, 2, 0, 0)),
            "Batch firmware update in progress (0/2 complete, 2 running)"
        );
        assert_eq!(
            running_description(job_type, &counts(1, 1, 0, 3, 1)),
            "Batch firmware update in progress (3/6 complete, 3 queued)"
        );
    }

    #[test]
    fn completed_descriptions() {
        let t = JobType::FirmwareUpdate;
        assert_eq!(
            completed_description(t, 3, 3),
            "All 3 nodes already up to date"
        );
        assert_eq!(
            completed_description(t, 3, 1),
            "2/3 firmware updates applied, 1 already up to date"
        );
        assert_eq!(
            completed_description(t, 3, 0),
            "All 3 firmware updates completed successfully"
        );
        assert_eq!(
            completed_description(JobType::SwitchSystemImageUpdate, 2, 0),
            "All 2 switch system image updates completed successfully"
        );
    }

    #[test]
    fn failure_wording_with_and_without_missing() {
        let failure = parent_failure(JobType::FirmwareUpdate, counts(1, 1, 0, 0, 0));
        assert_eq!(failure.message, "1 of 2 firmware updates failed");
        assert_eq!(
            failure.description,
            "Batch complete: 1/2 succeeded, 1 failed"
        );
        assert_eq!(failure.error_code(), JobError::Other);
        assert_eq!(
            failure.result_json.as_deref(),
            Some(r#"{"completed":1,"failed":1,"missing":0,"total":2,"failed_jobs":[]}"#)
        );

        let failure = parent_failure(JobType::SwitchCertificate, counts(1, 1, 0, 0, 2));
        assert_eq!(
            failure.message,
            "3 of 4 switch certificate installs failed (2 jobs missing)"
        );
        assert_eq!(
            failure.description,
            "Batch complete: 1/4 succeeded, 1 failed, 2 missing"
        );
        assert_eq!(
            failure.result_json.as_deref(),
            Some(r#"{"completed":1,"failed":1,"missing":2,"total":4,"failed_jobs":[]}"#)
        );
    }

    fn failed_child(result_json: &str) -> FailedChild {
        FailedChild {
            job_id: JobId::from("c-1"),
            node_id: "n-1".into(),
            error_code: JobError::ClientError,
            error_message: "boom".into(),
            result_json: result_json.into(),
        }
    }

    #[test]
    fn firmware_detail_parses_typed_result() {
        let detail = firmware_failed_child_detail(failed_child(
            r#"{"status":"failed","phase":"upload","error_message":"em","target":{"component":"bmc","firmware_file":"f.bin"},"redfish":{"code":"C","severity":"Critical"},"extra":1}"#,
        ));
        assert_eq!(detail.summary.as_deref(), Some("em"));
        assert!(detail.raw_result_json.is_none());
        assert_eq!(
            serialize_result_json(&detail),
            r#"{"job_id":"c-1","node_id":"n-1","error_code":"ClientError","error":"boom","summary":"em","result":{"status":"failed","phase":"upload","error_message":"em","target":{"component":"bmc","firmware_file":"f.bin"},"redfish":{"code":"C","severity":"Critical"}}}"#
        );
    }

    #[test]
    fn firmware_detail_prefers_summary_over_error_message() {
        let detail =
            firmware_failed_child_detail(failed_child(r#"{"summary":"s","error_message":"em"}"#));
        assert_eq!(detail.summary.as_deref(), Some("s"));
    }

    #[test]
    fn firmware_detail_keeps_raw_json_when_unparsable_or_empty() {
        for raw in ["not json", "{}", r#"{"unrelated":true}"#, r#"{"status":5}"#] {
            let detail = firmware_failed_child_detail(failed_child(raw));
            assert_eq!(detail.raw_result_json.as_deref(), Some(raw), "{raw}");
            assert!(detail.result.is_none());
            assert!(detail.summary.is_none());
        }
        let detail = firmware_failed_child_detail(failed_child(""));
        assert_eq!(
            serialize_result_json(&detail),
            r#"{"job_id":"c-1","node_id":"n-1","error_code":"ClientError","error":"boom"}"#
        );
    }

    #[test]
    fn already_up_to_date_detection() {
        assert!(result_is_already_up_to_date(
            r#"{"status":"already_up_to_date"}"#
        ));
        assert!(result_is_already_up_to_date(
            r#"{"status":"\u0061lready_up_to_date"}"#
        ));
        assert!(!result_is_already_up_to_date(r#"{"status":"ok"}"#));
        assert!(!result_is_already_up_to_date(""));
        assert!(!result_is_already_up_to_date(
            r#"{"note":"already_up_to_date"}"#
        ));
        assert!(!result_is_already_up_to_date("already_up_to_date"));
    }
}
