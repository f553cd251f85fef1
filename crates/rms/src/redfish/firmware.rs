//! Firmware of a [`RedfishNode`]: the `UpdateService` inventory, starting an
//! update (`UpdateService.SimpleUpdate` with an `ImageURI` when the BMC
//! advertises it and the caller has a URI, else a multipart push to
//! `MultipartHttpPushUri`), and following the returned Task through the
//! `TaskService` to a terminal state.
//!
//! Starting and following are separate calls ([`RedfishNode::start_firmware_update`],
//! [`RedfishNode::task_status`], [`RedfishNode::wait_task`]) so a job worker
//! can record "started task X" before it polls; [`RedfishNode::update_firmware`]
//! does both. Dropping the future stops following the task (the BMC's task
//! goes on; nothing here can stop a flash in progress).

use std::path::{Path, PathBuf};

use reqwest::multipart::{Form, Part};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::client::Answer;
use super::error::RedfishError;
use super::node::RedfishNode;
use super::types::{FirmwareComponent, TaskState, TaskStatus, member_uris};

const SIMPLE_UPDATE: &str = "#UpdateService.SimpleUpdate";

/// What to flash.
#[derive(Debug, Clone, Default)]
pub struct FirmwareImage {
    /// Where the BMC can fetch the image itself (SimpleUpdate `ImageURI`).
    pub image_uri: Option<String>,
    /// SimpleUpdate `TransferProtocol`, for BMCs that need it spelled out.
    pub transfer_protocol: Option<String>,
    /// The local image file, for a multipart push.
    pub file: Option<PathBuf>,
    /// Firmware inventory URIs to update; empty lets the BMC decide from
    /// the image.
    pub targets: Vec<String>,
}

/// How an update was handed to the BMC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateMethod {
    SimpleUpdate,
    MultipartPush,
}

/// The update methods an `UpdateService` offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpdateServiceInfo {
    pub uri: String,
    /// The SimpleUpdate action target, when advertised.
    pub simple_update: Option<String>,
    pub multipart_push_uri: Option<String>,
    pub firmware_inventory: Option<String>,
}

impl UpdateServiceInfo {
    pub fn parse(uri: &str, body: &Value) -> UpdateServiceInfo {
        let link = |key: &str| {
            body.get(key)
                .and_then(|v| v.get("@odata.id"))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        UpdateServiceInfo {
            uri: uri.to_string(),
            simple_update: body
                .get("Actions")
                .and_then(|a| a.get(SIMPLE_UPDATE))
                .and_then(|a| a.get("target"))
                .and_then(Value::as_str)
                .map(str::to_string),
            multipart_push_uri: body
                .get("MultipartHttpPushUri")
                .and_then(Value::as_str)
                .map(str::to_string),
            firmware_inventory: link("FirmwareInventory"),
        }
    }

    /// Picks the method: SimpleUpdate when advertised and the image has a
    /// URI, else a multipart push when advertised and the image has a file.
    pub fn choose(&self, image: &FirmwareImage) -> Result<UpdateMethod, RedfishError> {
        if self.simple_update.is_some() && image.image_uri.is_some() {
            return Ok(UpdateMethod::SimpleUpdate);
        }
        if self.multipart_push_uri.is_some() && image.file.is_some() {
            return Ok(UpdateMethod::MultipartPush);
        }
        let offered = match (&self.simple_update, &self.multipart_push_uri) {
            (Some(_), Some(_)) => "SimpleUpdate and a multipart push",
            (Some(_), None) => "only SimpleUpdate",
            (None, Some(_)) => "only a multipart push",
            (None, None) => "neither SimpleUpdate nor a multipart push",
        };
        let given = match (&image.image_uri, &image.file) {
            (Some(_), Some(_)) => "an image URI and a file",
            (Some(_), None) => "an image URI only",
            (None, Some(_)) => "an image file only",
            (None, None) => "neither an image URI nor a file",
        };
        Err(RedfishError::UpdateUnsupported(format!(
            "{} offers {offered}, and the image has {given}",
            self.uri
        )))
    }
}

/// An update the BMC accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpdateStarted {
    pub method: UpdateMethod,
    /// The Task (or task monitor) to follow; `None` when the BMC finished
    /// the update within the request.
    pub task_uri: Option<String>,
}

/// A finished update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirmwareUpdateOutcome {
    pub method: UpdateMethod,
    /// The task's final reading; `None` for a synchronous update.
    pub task: Option<TaskStatus>,
}

/// The task to follow after an update request: the Task in the body when
/// there is one, else the `Location` header (task monitor). A `202` must
/// name one or the other.
fn task_of_answer(answer: &Answer) -> Result<Option<String>, RedfishError> {
    let body = answer.json().ok().flatten();
    if let Some(body) = &body
        && TaskStatus::is_task(body)
        && let Some(id) = body.get("@odata.id").and_then(Value::as_str)
    {
        return Ok(Some(id.to_string()));
    }
    if let Some(location) = &answer.location {
        return Ok(Some(location.clone()));
    }
    if answer.status == 202 {
        return Err(RedfishError::InvalidResponse {
            uri: answer.uri.clone(),
            reason: "202 Accepted without a Task or a Location to follow".to_string(),
        });
    }
    Ok(None)
}

impl RedfishNode {
    /// The `UpdateService` and the methods it offers.
    pub async fn update_service(&self) -> Result<UpdateServiceInfo, RedfishError> {
        let uri = self.root_link("UpdateService").await?;
        let body = self.client.get_json(&uri).await?;
        Ok(UpdateServiceInfo::parse(&uri, &body))
    }

    /// Every member of `UpdateService.FirmwareInventory`, with its version.
    pub async fn firmware_inventory(&self) -> Result<Vec<FirmwareComponent>, RedfishError> {
        let service = self.update_service().await?;
        let uri = service
            .firmware_inventory
            .ok_or_else(|| RedfishError::NotAdvertised {
                resource: service.uri.clone(),
                what: "FirmwareInventory".to_string(),
            })?;
        let collection = self.client.get_json(&uri).await?;
        let members = member_uris(&collection).ok_or_else(|| RedfishError::InvalidResponse {
            uri: uri.clone(),
            reason: "the FirmwareInventory collection has no Members".to_string(),
        })?;
        let mut components = Vec::with_capacity(members.len());
        for member in members {
            let body = self.client.get_json(&member).await?;
            components.push(FirmwareComponent::parse(&member, &body));
        }
        Ok(components)
    }

    /// Hands the image to the BMC (see [`UpdateServiceInfo::choose`]) and
    /// returns the task to follow.
    pub async fn start_firmware_update(
        &self,
        image: &FirmwareImage,
    ) -> Result<UpdateStarted, RedfishError> {
        let service = self.update_service().await?;
        let method = service.choose(image)?;
        let answer = match method {
            UpdateMethod::SimpleUpdate => {
                let (Some(target), Some(image_uri)) = (&service.simple_update, &image.image_uri)
                else {
                    return Err(RedfishError::UpdateUnsupported(
                        "SimpleUpdate chosen without a target and an image URI".to_string(),
                    ));
                };
                let mut body = json!({ "ImageURI": image_uri });
                if let Some(protocol) = &image.transfer_protocol {
                    body["TransferProtocol"] = json!(protocol);
                }
                if !image.targets.is_empty() {
                    body["Targets"] = json!(image.targets);
                }
                self.client.post_json(target, &body).await?
            }
            UpdateMethod::MultipartPush => {
                let (Some(push_uri), Some(path)) = (&service.multipart_push_uri, &image.file)
                else {
                    return Err(RedfishError::UpdateUnsupported(
                        "multipart push chosen without a push URI and a file".to_string(),
                    ));
                };
                let form = multipart_form(path, &image.targets).await?;
                self.client.post_multipart(push_uri, form).await?
            }
        };
        let task_uri = task_of_answer(&answer)?;
        tracing::info!(
            method = ?method,
            task = task_uri.as_deref().unwrap_or("(none)"),
            status = answer.status,
            "redfish firmware update accepted"
        );
        Ok(UpdateStarted { method, task_uri })
    }

    /// One reading of a Task or task monitor. A monitor that answers `202`
    /// without a Task body is still running; one that answers `200`/`204`
    /// with something other than a Task has finished.
    pub async fn task_status(&self, task_uri: &str) -> Result<TaskStatus, RedfishError> {
        let answer = self.client.get(task_uri).await?;
        let body = answer.json()?;
        if let Some(body) = &body
            && TaskStatus::is_task(body)
        {
            return Ok(TaskStatus::parse(task_uri, body));
        }
        let mut status = TaskStatus::parse(task_uri, &Value::Null);
        status.state = if answer.status == 202 {
            TaskState::Running
        } else {
            TaskState::Completed
        };
        Ok(status)
    }

    /// Polls a task every `task_poll_interval` until it is terminal, calling
    /// `progress` with each reading that differs from the previous one.
    /// Exception/Killed/Cancelled (or Completed with Critical health) is
    /// [`RedfishError::TaskFailed`] with the BMC's messages. Transient read
    /// failures are tolerated for `task_status_error_grace`.
    pub async fn wait_task(
        &self,
        task_uri: &str,
        progress: &(dyn Fn(&TaskStatus) + Send + Sync),
    ) -> Result<TaskStatus, RedfishError> {
        let config = self.client.config();
        let started = Instant::now();
        let mut last_ok = Instant::now();
        let mut last: Option<TaskStatus> = None;
        loop {
            match self.task_status(task_uri).await {
                Ok(status) => {
                    last_ok = Instant::now();
                    if last.as_ref() != Some(&status) {
                        tracing::debug!(
                            task = %status.id,
                            state = %status.state,
                            percent = status.percent,
                            "redfish task progress"
                        );
                        progress(&status);
                    }
                    if status.is_terminal() {
                        if status.is_failure() {
                            let message = if status.messages.is_empty() {
                                status.health.clone().unwrap_or_default()
                            } else {
                                status.message()
                            };
                            return Err(RedfishError::TaskFailed {
                                task: status.uri.clone(),
                                state: status.state.clone(),
                                message,
                            });
                        }
                        return Ok(status);
                    }
                    last = Some(status);
                }
                Err(e)
                    if e.is_transient() && last_ok.elapsed() < config.task_status_error_grace =>
                {
                    tracing::warn!(task = %task_uri, error = %e, "redfish task status read failed; retrying");
                }
                Err(e) => return Err(e),
            }
            if started.elapsed() >= config.task_timeout {
                return Err(RedfishError::TaskTimeout {
                    task: task_uri.to_string(),
                    state: last
                        .map(|s| s.state)
                        .unwrap_or(TaskState::Unknown(String::new())),
                    waited: started.elapsed(),
                });
            }
            tokio::time::sleep(config.task_poll_interval).await;
        }
    }

    /// Starts an update and follows its task to the end.
    pub async fn update_firmware(
        &self,
        image: &FirmwareImage,
        progress: &(dyn Fn(&TaskStatus) + Send + Sync),
    ) -> Result<FirmwareUpdateOutcome, RedfishError> {
        let started = self.start_firmware_update(image).await?;
        let task = match &started.task_uri {
            Some(uri) => Some(self.wait_task(uri, progress).await?),
            None => None,
        };
        Ok(FirmwareUpdateOutcome {
            method: started.method,
            task,
        })
    }
}

/// The multipart body of a Redfish push update: `UpdateParameters` (JSON)
/// and `UpdateFile` (the image).
async fn multipart_form(path: &Path, targets: &[String]) -> Result<Form, RedfishError> {
    let read_path = path.to_path_buf();
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "firmware.bin".to_string());
    // The job's message names the image by its file name; the server's
    // directory stays in the log.
    let image_error = |message: String| {
        tracing::warn!(path = %path.display(), %message, "firmware image unreadable");
        RedfishError::ImageRead {
            path: file_name.clone(),
            message,
        }
    };
    let bytes = tokio::task::spawn_blocking(move || std::fs::read(&read_path))
        .await
        .map_err(|e| image_error(e.to_string()))?
        .map_err(|e| image_error(e.kind().to_string()))?;
    let parameters = json!({
        "Targets": targets,
        "@Redfish.OperationApplyTime": "Immediate",
    });
    let parameters = Part::text(parameters.to_string())
        .mime_str("application/json")
        .map_err(|e| RedfishError::ClientBuild(e.to_string()))?;
    let file = Part::bytes(bytes)
        .file_name(file_name)
        .mime_str("application/octet-stream")
        .map_err(|e| RedfishError::ClientBuild(e.to_string()))?;
    Ok(Form::new()
        .part("UpdateParameters", parameters)
        .part("UpdateFile", file))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(simple: bool, multipart: bool) -> UpdateServiceInfo {
        let mut body = json!({"FirmwareInventory": {"@odata.id": "/fw"}});
        if simple {
            body["Actions"] = json!({SIMPLE_UPDATE: {"target": "/su"}});
        }
        if multipart {
            body["MultipartHttpPushUri"] = json!("/push");
        }
        UpdateServiceInfo::parse("/redfish/v1/UpdateService", &body)
    }

    fn image(uri: bool, file: bool) -> FirmwareImage {
        FirmwareImage {
            image_uri: uri.then(|| "http://images/fw.bin".to_string()),
            file: file.then(|| PathBuf::from("/tmp/fw.bin")),
            ..FirmwareImage::default()
        }
    }

    #[test]
    fn update_service_parsing() {
        let s = service(true, true);
        assert_eq!(s.simple_update.as_deref(), Some("/su"));
        assert_eq!(s.multipart_push_uri.as_deref(), Some("/push"));
        assert_eq!(s.firmware_inventory.as_deref(), Some("/fw"));
        let none = UpdateServiceInfo::parse("/u", &json!({}));
        assert_eq!(
            (
                none.simple_update,
                none.multipart_push_uri,
                none.firmware_inventory
            ),
            (None, None, None)
        );
    }

    #[test]
    fn method_choice_covers_every_combination() {
        for simple in [false, true] {
            for multipart in [false, true] {
                for uri in [false, true] {
                    for file in [false, true] {
                        let got = service(simple, multipart).choose(&image(uri, file));
                        let expected = if simple && uri {
                            Some(UpdateMethod::SimpleUpdate)
                        } else if multipart && file {
                            Some(UpdateMethod::MultipartPush)
                        } else {
                            None
                        };
                        match (got, expected) {
                            (Ok(m), Some(e)) => assert_eq!(m, e),
                            (Err(RedfishError::UpdateUnsupported(why)), None) => {
                                assert!(why.contains("/redfish/v1/UpdateService"), "{why}")
                            }
                            (got, expected) => panic!(
                                "simple={simple} multipart={multipart} uri={uri} file={file}: {got:?} vs {expected:?}"
                            ),
                        }
                    }
                }
            }
        }
    }

    fn answer(status: u16, location: Option<&str>, body: &str) -> Answer {
        Answer {
            uri: "http://bmc/push".into(),
            status,
            location: location.map(str::to_string),
            body: body.as_bytes().to_vec(),
        }
    }

    #[test]
    fn task_to_follow_prefers_the_task_body() {
        let body = r#"{"@odata.id":"/redfish/v1/TaskService/Tasks/9","TaskState":"New"}"#;
        assert_eq!(
            task_of_answer(&answer(202, Some("/taskmon/9"), body)).unwrap(),
            Some("/redfish/v1/TaskService/Tasks/9".to_string())
        );
        assert_eq!(
            task_of_answer(&answer(202, Some("/taskmon/9"), "")).unwrap(),
            Some("/taskmon/9".to_string())
        );
        // sushy-tools' own SimpleUpdate: 204 with a Location.
        assert_eq!(
            task_of_answer(&answer(204, Some("/redfish/v1/TaskService/Tasks/42"), "")).unwrap(),
            Some("/redfish/v1/TaskService/Tasks/42".to_string())
        );
        assert_eq!(task_of_answer(&answer(200, None, "{}")).unwrap(), None);
        assert_eq!(task_of_answer(&answer(204, None, "")).unwrap(), None);
        assert!(matches!(
            task_of_answer(&answer(202, None, "{}")),
            Err(RedfishError::InvalidResponse { .. })
        ));
    }
}
