//! The request guard: every string, byte string and list of a unary Flow
//! request, checked against one table of limits before any handler or
//! store sees it — identically on both stores. A NUL character is refused
//! everywhere (PostgreSQL cannot store one); texts and lists have a
//! documented size ([`limit_for`], `docs/security.md`). The answer is
//! INVALID_ARGUMENT naming the field by its path in the request and the
//! limit.
//!
//! It reads the request with the compiled descriptors (prost-reflect), so a
//! new field is covered without code; a client-streaming call's handler
//! (ImportRacks) runs each message through [`RequestGuard::check_streamed`].

use std::collections::HashMap;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::future::BoxFuture;
use http_body_util::BodyExt;
use prost_reflect::{DescriptorPool, DynamicMessage, MessageDescriptor, ReflectMessage, Value};
use tonic::body::Body;

/// Most characters of a text field without its own limit.
pub const DEFAULT_TEXT: usize = 1024;
/// Most items of a list without its own limit.
pub const DEFAULT_LIST: usize = 10_000;

/// The limit of a text field: (message, field) first, then the field name
/// alone, then [`DEFAULT_TEXT`].
pub fn limit_for(message: &str, field: &str) -> usize {
    // A rule's name (128) is the rule validation's, with the reference's
    // message; the guard only bounds it by the default.
    match (message, field) {
        ("CreateOperationRuleRequest" | "UpdateOperationRuleRequest", "rule_definition_json") => {
            1 << 20
        }
        ("CreateOperationRunRequest" | "ScheduleConfig", "name") => 255,
        (_, "operation_code") => 64,
        (_, "description") => 4096,
        // A version, or a JSON object of per-type versions.
        (_, "target_version") => 4096,
        // Firmware credentials.
        ("FirmwareAuthenticationData" | "PerComponentFirmwareAuthenticationData", _) => 4096,
        _ => DEFAULT_TEXT,
    }
}

/// The limit of a list field.
pub fn list_limit_for(message: &str, field: &str) -> usize {
    match (message, field) {
        ("Rack", "components") => 1_000,
        ("Component", "bmcs") | ("PatchComponentRequest", "bmcs") => 16,
        _ => DEFAULT_LIST,
    }
}

/// Input types of the guarded RPCs, by gRPC path.
pub struct RequestGuard {
    inputs: HashMap<String, MessageDescriptor>,
    /// Client-streaming RPCs: their handlers check each message
    /// ([`RequestGuard::check_streamed`]).
    streamed: HashMap<String, MessageDescriptor>,
}

impl RequestGuard {
    /// The guard of every RPC of `services` in the compiled descriptors
    /// (unary requests in the layer, client streams per message).
    pub fn new(services: &[&str]) -> Result<RequestGuard, prost_reflect::DescriptorError> {
        let pool = DescriptorPool::decode(rackflow_api::FILE_DESCRIPTOR_SET)?;
        let mut inputs = HashMap::new();
        let mut streamed = HashMap::new();
        for name in services {
            let Some(service) = pool.get_service_by_name(name) else {
                continue;
            };
            for method in service.methods() {
                let path = format!("/{}/{}", name, method.name());
                if method.is_client_streaming() {
                    streamed.insert(path, method.input());
                } else {
                    inputs.insert(path, method.input());
                }
            }
        }
        Ok(RequestGuard { inputs, streamed })
    }

    /// Checks one encoded request message of `path`; `Err` is the text of
    /// the INVALID_ARGUMENT answer. A message that does not decode is left
    /// to tonic (which answers as it always did).
    pub fn check(&self, path: &str, message: &[u8]) -> Result<(), String> {
        check_encoded(self.inputs.get(path), message)
    }

    /// Checks one message of a client stream of `path` (its handler calls
    /// this per message), by the same limits.
    pub fn check_streamed(&self, path: &str, message: &impl prost::Message) -> Result<(), String> {
        check_encoded(self.streamed.get(path), &message.encode_to_vec())
    }

    fn guards(&self, path: &str) -> bool {
        self.inputs.contains_key(path)
    }
}

/// Decodes `message` as `input` and checks it; nothing to check without an
/// input type or when it does not decode.
fn check_encoded(input: Option<&MessageDescriptor>, message: &[u8]) -> Result<(), String> {
    let Some(input) = input else {
        return Ok(());
    };
    match DynamicMessage::decode(input.clone(), message) {
        Ok(decoded) => check_message(&decoded, ""),
        Err(_) => Ok(()),
    }
}

fn check_message(message: &DynamicMessage, prefix: &str) -> Result<(), String> {
    let owner = message.descriptor().name().to_string();
    for (field, value) in message.fields() {
        let path = if prefix.is_empty() {
            field.name().to_string()
        } else {
            format!("{prefix}.{}", field.name())
        };
        check_value(&owner, field.name(), value, &path)?;
    }
    Ok(())
}

fn check_value(owner: &str, field: &str, value: &Value, path: &str) -> Result<(), String> {
    match value {
        Value::String(text) => {
            if text.contains('\0') {
                return Err(format!("{path}: contains a NUL character"));
            }
            let limit = limit_for(owner, field);
            let length = text.chars().count();
            if length > limit {
                return Err(format!("{path}: {length} characters; at most {limit}"));
            }
        }
        Value::Bytes(bytes) => {
            let limit = limit_for(owner, field);
            if bytes.len() > limit {
                return Err(format!("{path}: {} bytes; at most {limit}", bytes.len()));
            }
        }
        Value::Message(inner) => check_message(inner, path)?,
        Value::List(items) => {
            let limit = list_limit_for(owner, field);
            if items.len() > limit {
                return Err(format!("{path}: {} entries; at most {limit}", items.len()));
            }
            for (i, item) in items.iter().enumerate() {
                check_value(owner, field, item, &format!("{path}[{i}]"))?;
            }
        }
        Value::Map(entries) => {
            let limit = list_limit_for(owner, field);
            if entries.len() > limit {
                return Err(format!(
                    "{path}: {} entries; at most {limit}",
                    entries.len()
                ));
            }
            for (key, item) in entries {
                if let prost_reflect::MapKey::String(k) = key {
                    check_value(
                        owner,
                        field,
                        &Value::String(k.clone()),
                        &format!("{path} key"),
                    )?;
                }
                check_value(owner, field, item, &format!("{path}[…]"))?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// The tower layer running [`RequestGuard`] in front of the handlers.
#[derive(Clone)]
pub struct GuardLayer(pub Arc<RequestGuard>);

impl<S> tower::Layer<S> for GuardLayer {
    type Service = GuardService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        GuardService {
            inner,
            guard: self.0.clone(),
        }
    }
}

#[derive(Clone)]
pub struct GuardService<S> {
    inner: S,
    guard: Arc<RequestGuard>,
}

impl<S> tower::Service<http::Request<Body>> for GuardService<S>
where
    S: tower::Service<http::Request<Body>, Response = http::Response<Body>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let guard = self.guard.clone();
        Box::pin(async move {
            let path = request.uri().path().to_owned();
            if !guard.guards(&path) {
                return inner.call(request).await;
            }
            let (parts, body) = request.into_parts();
            // A unary request is one message, bounded by tonic's decoding
            // limit: buffering it costs what decoding it would.
            let bytes = match body.collect().await {
                Ok(collected) => collected.to_bytes(),
                Err(status) => return Ok(status.into_http()),
            };
            // gRPC framing: a compression flag, a 4-byte length, the message.
            if let [0, a, b, c, d, rest @ ..] = &bytes[..] {
                let length = u32::from_be_bytes([*a, *b, *c, *d]) as usize;
                if let Some(message) = rest.get(..length)
                    && let Err(why) = guard.check(&path, message)
                {
                    tracing::debug!(rpc = %path, %why, "request refused by its limits");
                    return Ok(tonic::Status::invalid_argument(why).into_http());
                }
            }
            let request =
                http::Request::from_parts(parts, Body::new(http_body_util::Full::new(bytes)));
            inner.call(request).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;
    use rackflow_api::v1 as pb;

    fn guard() -> RequestGuard {
        RequestGuard::new(&["v1.Flow", "v1.FlowExtensions"]).expect("descriptors")
    }

    #[test]
    fn strings_lists_and_nul_are_checked_by_path() {
        let g = guard();
        let mut rack = pb::Rack {
            info: Some(pb::DeviceInfo {
                name: "rack-1".into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let req = |rack: &pb::Rack| {
            pb::CreateExpectedRackRequest {
                rack: Some(rack.clone()),
            }
            .encode_to_vec()
        };
        let path = "/v1.Flow/CreateExpectedRack";
        assert_eq!(g.check(path, &req(&rack)), Ok(()));
        rack.info.as_mut().unwrap().name = "a\0b".into();
        assert_eq!(
            g.check(path, &req(&rack)),
            Err("rack.info.name: contains a NUL character".into())
        );
        rack.info.as_mut().unwrap().name = "n".repeat(1025);
        assert_eq!(
            g.check(path, &req(&rack)),
            Err("rack.info.name: 1025 characters; at most 1024".into())
        );
        rack.info.as_mut().unwrap().name = "é".repeat(1024);
        assert_eq!(g.check(path, &req(&rack)), Ok(()), "characters, not bytes");
        rack.components = vec![pb::Component::default(); 1001];
        assert_eq!(
            g.check(path, &req(&rack)),
            Err("rack.components: 1001 entries; at most 1000".into())
        );
        rack.components = vec![pb::Component::default(); 3];
        rack.components[2].component_id = "c\0".into();
        assert_eq!(
            g.check(path, &req(&rack)),
            Err("rack.components[2].component_id: contains a NUL character".into())
        );
        // Unguarded paths and undecodable bytes pass (tonic answers those).
        assert_eq!(g.check("/v1.Other/Rpc", b"\0\0"), Ok(()));
        assert_eq!(g.check(path, b"\xff\xff\xff"), Ok(()));
    }

    #[test]
    fn named_fields_have_their_own_limits() {
        let g = guard();
        let run = |name: &str| {
            pb::CreateOperationRunRequest {
                name: name.into(),
                ..Default::default()
            }
            .encode_to_vec()
        };
        let path = "/v1.Flow/CreateOperationRun";
        assert_eq!(g.check(path, &run(&"r".repeat(255))), Ok(()));
        assert_eq!(
            g.check(path, &run(&"r".repeat(256))),
            Err("name: 256 characters; at most 255".into())
        );
        let rule = pb::CreateOperationRuleRequest {
            rule_definition_json: "x".repeat(100_000),
            ..Default::default()
        }
        .encode_to_vec();
        assert_eq!(g.check("/v1.Flow/CreateOperationRule", &rule), Ok(()));
        assert!(g.guards("/v1.FlowExtensions/PreviewOperationRun"));
        assert!(
            !g.guards("/v1.FlowExtensions/ImportRacks"),
            "streams check their batches"
        );
    }
}
