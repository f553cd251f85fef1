//! Records a task workflow's history in the SDK's JSON form, for the replay
//! tests (`tests/histories/`):
//!
//! ```sh
//! cargo run -p rackflow-temporal --example record_history -- \
//!     http://127.0.0.1:7233 <task id> > crates/temporal/tests/histories/NAME.json
//! ```

use std::io::Write;
use std::str::FromStr;

use rackflow_temporal::workflow::TaskWorkflow;
use temporalio_client::{Client, ClientOptions, Connection, ConnectionOptions};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(address), Some(workflow_id)) = (args.next(), args.next()) else {
        return Err("usage: record_history <temporal address> <workflow id>".into());
    };
    let connection =
        Connection::connect(ConnectionOptions::new(url::Url::from_str(&address)?).build()).await?;
    let client = Client::new(connection, ClientOptions::new("default").build())?;
    let history = client
        .get_workflow_handle::<TaskWorkflow>(workflow_id)
        .fetch_history(Default::default())
        .to_json()
        .await?;
    std::io::stdout().write_all(&history)?;
    Ok(())
}
