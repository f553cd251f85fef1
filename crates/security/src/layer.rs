//! The tower layer in front of every handler of a service, in the
//! reference's order: access log → panic recovery → authorization →
//! handler. It also hands the handler the [`Caller`] (request extensions)
//! and, when given [`RpcMetrics`], counts every call by method and code.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use tonic::body::Body;

use rackflow_telemetry::RpcMetrics;
use rackflow_telemetry::rpc::UNKNOWN_RPC;

use crate::authz::{Decision, Policy};
use crate::identity::Caller;

/// Where refused calls are recorded beyond the log (the flow server's
/// audit trail).
pub trait DenialRecorder: Send + Sync + 'static {
    /// Records that `caller` was refused `rpc` (a gRPC path) with `status`.
    fn record<'a>(
        &'a self,
        caller: &'a Caller,
        rpc: &'a str,
        status: &'a tonic::Status,
    ) -> BoxFuture<'a, ()>;
}

/// Wraps a service's routes; built by [`crate::ServerEdge`].
#[derive(Clone)]
pub struct EdgeLayer {
    service: &'static str,
    policy: Arc<Policy>,
    denials: Option<Arc<dyn DenialRecorder>>,
    metrics: Option<Arc<RpcMetrics>>,
}

impl std::fmt::Debug for EdgeLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EdgeLayer")
            .field("service", &self.service)
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl EdgeLayer {
    pub fn new(service: &'static str, policy: Policy) -> EdgeLayer {
        EdgeLayer {
            service,
            policy: Arc::new(policy),
            denials: None,
            metrics: None,
        }
    }

    /// Every call is also counted in `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<RpcMetrics>) -> EdgeLayer {
        self.metrics = Some(metrics);
        self
    }

    /// Refused calls also go to `recorder`.
    pub fn with_denials(mut self, recorder: Arc<dyn DenialRecorder>) -> EdgeLayer {
        self.denials = Some(recorder);
        self
    }
}

impl<S> tower::Layer<S> for EdgeLayer {
    type Service = EdgeService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        EdgeService {
            inner,
            service: self.service,
            policy: self.policy.clone(),
            denials: self.denials.clone(),
            metrics: self.metrics.clone(),
        }
    }
}

/// The service [`EdgeLayer`] makes.
#[derive(Clone)]
pub struct EdgeService<S> {
    inner: S,
    service: &'static str,
    policy: Arc<Policy>,
    denials: Option<Arc<dyn DenialRecorder>>,
    metrics: Option<Arc<RpcMetrics>>,
}

impl<S, B> tower::Service<http::Request<B>> for EdgeService<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<Body>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        // The ready service is the one `poll_ready` readied; a clone takes
        // its place for the next call.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let service = self.service;
        let started = Instant::now();
        let path = request.uri().path().to_owned();
        let caller = Caller::from_extensions(request.extensions());
        let decision = self.policy.decide(caller.identity.as_deref(), &path);
        let mode = self.policy.mode().as_str();
        let identified = self.policy.callers_identified();
        let denials = self.denials.clone();
        let metrics = self.metrics.clone();
        Box::pin(async move {
            let response = match decision {
                Decision::Deny(refusal) => {
                    let status = refusal.status(&path);
                    tracing::warn!(
                        service, rpc = %path, caller = caller.name(), peer = %caller.peer_display(),
                        code = ?status.code(), "authorization denied the call"
                    );
                    if let Some(denials) = &denials {
                        denials.record(&caller, &path, &status).await;
                    }
                    status.into_http()
                }
                allowed => {
                    if let Decision::AuditRefused(refusal) = &allowed {
                        // Without mTLS every call is anonymous: the one
                        // warning at start says so; per call it is detail.
                        if identified {
                            tracing::warn!(
                                service, rpc = %path, caller = caller.name(), peer = %caller.peer_display(),
                                mode, would_be = %refusal.status(&path).message(),
                                "authorization (audit): enforce would refuse this call; allowed"
                            );
                        } else {
                            tracing::debug!(
                                service, rpc = %path, peer = %caller.peer_display(), mode,
                                "authorization (audit): anonymous call allowed"
                            );
                        }
                    }
                    request.extensions_mut().insert(caller.clone());
                    // A panic in the handler (or in building its future)
                    // answers INTERNAL; the connection and the server live on.
                    let handled = AssertUnwindSafe(async move { inner.call(request).await })
                        .catch_unwind()
                        .await;
                    match handled {
                        Ok(response) => response?,
                        Err(panic) => {
                            let correlation = uuid::Uuid::new_v4();
                            tracing::error!(
                                service, rpc = %path, caller = caller.name(), %correlation,
                                panic = panic_text(&*panic),
                                "handler panicked; answered INTERNAL"
                            );
                            tonic::Status::internal(format!(
                                "internal error (correlation id {correlation}); the server log has the detail"
                            ))
                            .into_http()
                        }
                    }
                }
            };
            // A status in the headers is a failure answered at once; an OK
            // (or a stream's end) travels in the trailers.
            let code = tonic::Status::from_header_map(response.headers())
                .map_or(tonic::Code::Ok, |s| s.code());
            let elapsed = started.elapsed();
            if let Some(metrics) = &metrics {
                let rpc = crate::authz::served_rpc(&path).unwrap_or(UNKNOWN_RPC);
                metrics.observe(service, rpc, code_name(code), elapsed);
            }
            tracing::info!(
                target: "rackflow::access",
                service, rpc = %path, caller = caller.name(), peer = %caller.peer_display(),
                code = ?code, elapsed_ms = elapsed.as_secs_f64() * 1e3,
                "rpc"
            );
            Ok(response)
        })
    }
}

/// The canonical name of a gRPC code (`OK`, `NOT_FOUND`, …).
pub fn code_name(code: tonic::Code) -> &'static str {
    use tonic::Code;
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(not a string)")
}
