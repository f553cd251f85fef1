//! The gRPC client of the Flow service and the one place where errors become
//! the process's stderr line and exit code.
//!
//! Client commands never touch the database: everything goes through the
//! Flow API.

use std::time::Duration;

use rackflow_api::v1::flow_client::FlowClient;
use rackflow_api::v1::flow_extensions_client::FlowExtensionsClient;
use rackflow_security::ClientTlsFiles;
use rackflow_security::tls::ClientTlsKeys;
use tonic::transport::Channel;

/// The flow server a client command talks to: its address (`http://` or
/// `https://`) and the TLS files of `--tls-ca`, `--tls-cert`, `--tls-key`.
/// Reads as its address (`Deref<Target = str>`, `Display`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerAddress {
    url: String,
    tls: ClientTlsFiles,
}

impl ServerAddress {
    /// `url` (already normalised, with a scheme) with TLS files.
    pub fn new(url: impl Into<String>, tls: ClientTlsFiles) -> Self {
        ServerAddress {
            url: url.into(),
            tls,
        }
    }

    /// The TLS files given with the address.
    pub fn tls(&self) -> &ClientTlsFiles {
        &self.tls
    }

    /// A plaintext (or system-roots `https://`) address without files.
    pub fn plain(url: impl Into<String>) -> Self {
        ServerAddress::new(url, ClientTlsFiles::default())
    }

    /// The `rackflow …` prefix a printed hint ("continue with: …") needs to
    /// reach this server again: the address and the TLS flags.
    pub fn command_prefix(&self) -> String {
        let mut prefix = crate::watch::command_prefix(Some(&self.url));
        for (flag, path) in [
            ("--tls-ca", &self.tls.ca),
            ("--tls-cert", &self.tls.cert),
            ("--tls-key", &self.tls.key),
        ] {
            if let Some(path) = path {
                prefix.push_str(&format!(" {flag} {}", path.display()));
            }
        }
        if let Some(name) = &self.tls.server_name {
            prefix.push_str(&format!(" --tls-server-name {name}"));
        }
        prefix
    }
}

impl std::ops::Deref for ServerAddress {
    type Target = str;

    fn deref(&self) -> &str {
        &self.url
    }
}

impl std::fmt::Display for ServerAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.url)
    }
}

/// Connected client of the server: the reference's `v1.Flow` (reached through
/// `Deref`) and rackflow's own `v1.FlowExtensions` ([`Flow::extensions`]) on
/// one channel.
#[derive(Debug, Clone)]
pub struct Flow {
    flow: FlowClient<Channel>,
    extensions: FlowExtensionsClient<Channel>,
}

impl Flow {
    /// Both clients over one connected channel.
    pub fn new(channel: Channel) -> Self {
        Flow {
            flow: FlowClient::new(channel.clone()),
            extensions: FlowExtensionsClient::new(channel),
        }
    }

    /// rackflow's own RPCs (`PreviewOperationRun`, `WatchOperationRun`).
    pub fn extensions(&mut self) -> &mut FlowExtensionsClient<Channel> {
        &mut self.extensions
    }
}

impl std::ops::Deref for Flow {
    type Target = FlowClient<Channel>;

    fn deref(&self) -> &Self::Target {
        &self.flow
    }
}

impl std::ops::DerefMut for Flow {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.flow
    }
}

/// How long connecting to the server may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Deadline of one RPC. Planning a run over many racks is the slowest call;
/// a minute is far above what it needs and still fails a hung server.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// The server could not be reached at all (as opposed to an RPC error).
#[derive(Debug)]
pub struct ConnectError {
    pub server: String,
    pub detail: String,
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cannot connect to the flow server at {}: {} (is `rackflow serve` running? set --server or RACKFLOW_SERVER)",
            self.server, self.detail
        )
    }
}

impl std::error::Error for ConnectError {}

/// Connects to `server`.
pub async fn connect(server: &ServerAddress) -> anyhow::Result<Flow> {
    connect_with(server, Some(REQUEST_TIMEOUT)).await
}

/// Connects without a per-call deadline: for server-streaming calls such as
/// `WatchOperationRun`, which stay open as long as the run is watched.
pub async fn connect_streaming(server: &ServerAddress) -> anyhow::Result<Flow> {
    connect_with(server, None).await
}

async fn connect_with(server: &ServerAddress, timeout: Option<Duration>) -> anyhow::Result<Flow> {
    // TLS files with an http:// address, or unreadable files, are a usage
    // error: never a silent plaintext connection.
    let mut endpoint = server
        .tls
        .endpoint(&server.url, ClientTlsKeys::CLI)?
        .connect_timeout(CONNECT_TIMEOUT);
    if let Some(timeout) = timeout {
        endpoint = endpoint.timeout(timeout);
    }
    let channel = endpoint.connect().await.map_err(|e| ConnectError {
        server: server.to_string(),
        detail: error_chain(&e),
    })?;
    Ok(Flow::new(channel))
}

/// The error and its sources joined by `: `.
fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        let next = s.to_string();
        if !text.ends_with(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = s.source();
    }
    text
}

/// The stderr line for a failed command.
///
/// A gRPC status anywhere in the chain gives `error: <code>: <message>`
/// (with the outer context, if any, in parentheses); anything else gives
/// `error: <the error chain>`.
pub fn error_line(err: &anyhow::Error) -> String {
    let status = err.chain().find_map(|e| e.downcast_ref::<tonic::Status>());
    match status {
        Some(status) => {
            let mut line = format!("error: {:?}: {}", status.code(), status.message());
            let context: Vec<String> = err
                .chain()
                .take_while(|e| e.downcast_ref::<tonic::Status>().is_none())
                .map(ToString::to_string)
                .collect();
            if !context.is_empty() {
                line.push_str(&format!(" ({})", context.join(": ")));
            }
            line
        }
        None => format!("error: {err:#}"),
    }
}

/// A failure the command has already explained on stdout (e.g. `task watch`
/// printing `task … failed: …`): exit code 1 without an error line.
#[derive(Debug)]
pub struct SilentFailure;

impl std::fmt::Display for SilentFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("command failed")
    }
}

impl std::error::Error for SilentFailure {}

/// An outcome the command has already explained on stdout that ends the
/// process with a specific exit code (e.g. `run watch --exit-on-pause`: 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exit(pub u8);

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "exit code {}", self.0)
    }
}

impl std::error::Error for Exit {}

/// The process exit code for a failed command: the code of an [`Exit`],
/// else 1.
pub fn exit_code(err: &anyhow::Error) -> u8 {
    err.downcast_ref::<Exit>().map_or(1, |e| e.0)
}

/// Prints the error line to stderr (nothing for a [`SilentFailure`] or an
/// [`Exit`]); the caller exits with [`exit_code`].
pub fn report_error(err: &anyhow::Error) {
    if err.downcast_ref::<SilentFailure>().is_none() && err.downcast_ref::<Exit>().is_none() {
        eprintln!("{}", error_line(err));
    }
}

/// Whether a failed call is worth retrying after a pause: the server is
/// restarting or the connection broke.
pub fn transient_status(status: &tonic::Status) -> bool {
    matches!(
        status.code(),
        tonic::Code::Unavailable
            | tonic::Code::DeadlineExceeded
            | tonic::Code::Unknown
            | tonic::Code::Cancelled
            | tonic::Code::Aborted
    )
}

/// [`transient_status`] for a status anywhere in an error chain.
pub fn transient(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<tonic::Status>()
            .is_some_and(transient_status)
    }) || err.downcast_ref::<ConnectError>().is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn status_errors_print_code_and_message() {
        let err = anyhow::Error::new(tonic::Status::not_found("operation run not found: x"));
        assert_eq!(
            error_line(&err),
            "error: NotFound: operation run not found: x"
        );
        let err: anyhow::Result<()> =
            Err(tonic::Status::invalid_argument("name is required")).context("create run");
        assert_eq!(
            error_line(&err.unwrap_err()),
            "error: InvalidArgument: name is required (create run)"
        );
    }
}
