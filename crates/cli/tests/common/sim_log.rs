//! A replica's simulated hardware call log (`SimAdmin.GetCallLog`), read
//! incrementally by the real-process cluster tests.

// A failed read is the test's failure report.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;

use rackflow_api::sim::v1::sim_admin_client::SimAdminClient;
use rackflow_api::sim::v1::{CallLogEntry, GetCallLogRequest};
use tonic::transport::Channel;

/// A replica's sim call log, read incrementally (`after_sequence`) and kept
/// whole here: a gap in the sequence numbers (the sim's bounded log dropped
/// entries between two reads) fails the test.
pub struct SimLog {
    pub name: &'static str,
    addr: SocketAddr,
    runtime: tokio::runtime::Runtime,
    client: Option<SimAdminClient<Channel>>,
    pub last: u64,
    pub entries: Vec<CallLogEntry>,
    /// The process was killed: no more reads.
    frozen: bool,
}

impl SimLog {
    pub fn new(name: &'static str, addr: SocketAddr) -> SimLog {
        SimLog {
            name,
            addr,
            runtime: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap(),
            client: None,
            last: 0,
            entries: Vec::new(),
            frozen: false,
        }
    }

    /// Reads the entries after the last one read.
    pub fn refresh(&mut self) {
        if self.frozen {
            return;
        }
        let addr = self.addr;
        let after = self.last;
        let name = self.name;
        let client = self.client.take();
        let (client, new) = self.runtime.block_on(async move {
            let mut client = match client {
                Some(c) => c,
                None => SimAdminClient::connect(format!("http://{addr}"))
                    .await
                    .unwrap_or_else(|e| panic!("connect to SimAdmin of replica {name}: {e}")),
            };
            let entries = client
                .get_call_log(GetCallLogRequest {
                    after_sequence: after,
                })
                .await
                .unwrap_or_else(|e| panic!("GetCallLog of replica {name}: {e}"))
                .into_inner()
                .entries;
            (client, entries)
        });
        self.client = Some(client);
        if let Some(first) = new.first() {
            assert_eq!(
                first.sequence,
                self.last + 1,
                "the sim call log of replica {name} dropped entries between two reads \
                 (read up to {}, next is {}): read it more often",
                self.last,
                first.sequence
            );
            self.last = new.last().unwrap().sequence;
        }
        self.entries.extend(new);
    }

    /// The process is about to be killed: nothing more will be read.
    pub fn freeze(&mut self) {
        self.refresh();
        self.frozen = true;
    }

    /// `firmware_start` entries after sequence `after`.
    pub fn firmware_starts_after(&self, after: u64) -> impl Iterator<Item = &CallLogEntry> {
        self.entries
            .iter()
            .filter(move |e| e.sequence > after && e.call == "firmware_start")
    }

    /// Firmware starts per component.
    pub fn firmware_starts(&self) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for entry in self.firmware_starts_after(0) {
            for component in &entry.components {
                *counts.entry(component.clone()).or_insert(0) += 1;
            }
        }
        counts
    }

    /// Racks (component id prefix `r-NNNN`) with a firmware start.
    pub fn racks_started(&self) -> BTreeSet<String> {
        self.firmware_starts().keys().map(|c| rack_of(c)).collect()
    }

    pub fn summary(&self) -> String {
        let starts: usize = self.firmware_starts().values().sum();
        format!(
            "replica {}: {} calls read{}, {} component firmware starts on racks {:?}",
            self.name,
            self.entries.len(),
            if self.frozen { " (killed)" } else { "" },
            starts,
            self.racks_started()
        )
    }
}

/// `r-0003` of `r-0003-compute-07`.
pub fn rack_of(component: &str) -> String {
    component.get(..6).unwrap_or(component).to_string()
}

impl SimLog {
    /// Components of type `ty` (the sim's type name) given a firmware start.
    pub fn starts_of_type(&self, ty: &str) -> usize {
        self.entries
            .iter()
            .filter(|e| e.call == "firmware_start" && e.component_type == ty)
            .map(|e| e.components.len())
            .sum()
    }
}
