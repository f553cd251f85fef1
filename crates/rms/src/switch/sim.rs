//! The `sim` switch back end: in-process simulated NVLink switch trays.
//!
//! Behaviour:
//! * Switches appear on first touch running `initial_build` on
//!   `partition1`, `partition2` empty, nothing staged.
//! * An install stages the file, writes the image's build (its `version=`
//!   line, else the file stem) to the standby partition, makes it next,
//!   "reboots" and runs it — each step after `install_latency_ms / 4`.
//! * Credentials: a switch accepts any login until a password is set
//!   (the factory default); from then on only that password. A full
//!   factory reset brings the factory login back and re-enables every
//!   service's mTLS; an SDN reset clears only the SDN configuration.
//! * Firmware components `BMC`, `FPGA`, `EROT`, `CPLD`, `BIOS`,
//!   `TRANSCEIVER` at `1.0.0`; a push stages the file on its component.
//! * SPDM evidence of `BMC`, `FPGA`, `EROT`: measurements = SHA-256 of
//!   (node id, component, nonce), a fixed certificate chain naming the node.
//! * Faults by node id (`*` = every node): `fail` (the install action
//!   fails), `no_return` (the switch does not come back after the reboot:
//!   a timeout, the old build still running), `hang` (never returns).

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::{SwitchBackend, SwitchError, SwitchTarget, SystemImages};

/// `[nodes.switch_sim]`: the simulated switches. Every default is here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SwitchSimConfig {
    /// Milliseconds a whole system-image install takes.
    pub install_latency_ms: u64,
    /// Milliseconds a read takes.
    pub read_latency_ms: u64,
    /// NVOS build every switch runs on first touch.
    pub initial_build: String,
    /// Injected faults.
    pub faults: Vec<SwitchSimFault>,
}

impl Default for SwitchSimConfig {
    fn default() -> Self {
        SwitchSimConfig {
            install_latency_ms: 400,
            read_latency_ms: 5,
            initial_build: "25.01.1000".to_owned(),
            faults: Vec::new(),
        }
    }
}

/// One injected switch fault.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchSimFault {
    /// Node id, or `*` for every switch.
    pub node_id: String,
    pub effect: SwitchSimFaultEffect,
}

/// What a switch fault does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SwitchSimFaultEffect {
    Fail,
    NoReturn,
    Hang,
}

#[derive(Debug, Clone)]
struct SimSwitch {
    partitions: BTreeMap<String, String>,
    current: String,
    next: String,
    files: Vec<String>,
    /// `None`: the factory login (any password).
    password: Option<String>,
    /// Services whose mTLS is off.
    mtls_off: Vec<String>,
    /// SDN configuration (reset by either reset).
    sdn_configured: bool,
    /// Files pushed per firmware component.
    staged: BTreeMap<String, Vec<String>>,
    /// Service → the subject of the certificate it presents.
    certificates: BTreeMap<String, String>,
}

/// The sim's switch firmware components.
const SIM_FIRMWARE: [&str; 6] = ["BMC", "FPGA", "EROT", "CPLD", "BIOS", "TRANSCEIVER"];
/// The components the sim attests.
const SIM_ATTESTED: [&str; 3] = ["BMC", "FPGA", "EROT"];

/// The simulated switches.
#[derive(Debug)]
pub struct SwitchSim {
    config: SwitchSimConfig,
    switches: Mutex<BTreeMap<(String, String), SimSwitch>>,
}

impl SwitchSim {
    pub fn new(config: SwitchSimConfig) -> SwitchSim {
        SwitchSim {
            config,
            switches: Mutex::new(BTreeMap::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<(String, String), SimSwitch>> {
        self.switches.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn with_switch<T>(&self, target: &SwitchTarget, f: impl FnOnce(&mut SimSwitch) -> T) -> T {
        let mut switches = self.lock();
        let switch = switches
            .entry((target.rack_id.clone(), target.node_id.clone()))
            .or_insert_with(|| SimSwitch {
                partitions: [
                    ("partition1".to_owned(), self.config.initial_build.clone()),
                    ("partition2".to_owned(), String::new()),
                ]
                .into(),
                current: "partition1".to_owned(),
                next: "partition1".to_owned(),
                files: Vec::new(),
                password: None,
                mtls_off: Vec::new(),
                sdn_configured: true,
                staged: BTreeMap::new(),
                certificates: BTreeMap::new(),
            });
        f(switch)
    }

    fn fault(&self, target: &SwitchTarget) -> Option<SwitchSimFaultEffect> {
        self.config
            .faults
            .iter()
            .find(|f| f.node_id == "*" || f.node_id == target.node_id)
            .map(|f| f.effect)
    }

    /// Refuses a login whose password is not the switch's.
    fn authenticate(&self, target: &SwitchTarget) -> Result<(), SwitchError> {
        self.with_switch(target, |s| match &s.password {
            Some(p) if p != target.host.credentials.password.expose() => {
                Err(SwitchError::Unauthenticated)
            }
            _ => Ok(()),
        })
    }

    /// Services of a switch whose mTLS is off.
    pub fn mtls_off(&self, rack_id: &str, node_id: &str) -> Vec<String> {
        let switches = self.lock();
        switches
            .get(&(rack_id.to_owned(), node_id.to_owned()))
            .map(|s| s.mtls_off.clone())
            .unwrap_or_default()
    }

    /// Service → certificate subject of a switch.
    pub fn certificates(&self, rack_id: &str, node_id: &str) -> BTreeMap<String, String> {
        let switches = self.lock();
        switches
            .get(&(rack_id.to_owned(), node_id.to_owned()))
            .map(|s| s.certificates.clone())
            .unwrap_or_default()
    }

    /// The build a switch runs now (`None`: never touched).
    pub fn running_build(&self, rack_id: &str, node_id: &str) -> Option<String> {
        let switches = self.lock();
        let switch = switches.get(&(rack_id.to_owned(), node_id.to_owned()))?;
        switch.partitions.get(&switch.current).cloned()
    }
}

/// The build an image installs: its `version=` line, else the file stem.
fn build_of(filename: &str, image: &[u8]) -> String {
    String::from_utf8_lossy(image)
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("version=")
                .map(|v| v.trim().to_owned())
        })
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| {
            filename
                .rsplit_once('.')
                .map_or(filename, |(stem, _)| stem)
                .to_owned()
        })
}

#[async_trait]
impl SwitchBackend for SwitchSim {
    fn kind(&self) -> &'static str {
        "sim"
    }

    async fn system_images(&self, switch: &SwitchTarget) -> Result<SystemImages, SwitchError> {
        tokio::time::sleep(Duration::from_millis(self.config.read_latency_ms)).await;
        self.authenticate(switch)?;
        Ok(self.with_switch(switch, |s| SystemImages {
            current: s.partitions.get(&s.current).cloned().unwrap_or_default(),
            next: s.partitions.get(&s.next).cloned().unwrap_or_default(),
            partitions: s.partitions.clone(),
            files: s.files.clone(),
        }))
    }

    async fn install_system_image(
        &self,
        switch: &SwitchTarget,
        filename: &str,
        image: &[u8],
        progress: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<String, SwitchError> {
        let step = Duration::from_millis(self.config.install_latency_ms / 4);
        let build = build_of(filename, image);
        let fault = self.fault(switch);
        self.authenticate(switch)?;
        progress("Fetching system image");
        tokio::time::sleep(step).await;
        self.with_switch(switch, |s| {
            if !s.files.iter().any(|f| f == filename) {
                s.files.push(filename.to_owned());
            }
        });
        progress("Installing system image");
        tokio::time::sleep(step).await;
        match fault {
            Some(SwitchSimFaultEffect::Fail) => {
                return Err(SwitchError::ActionFailed(format!(
                    "install of {filename} failed (sim fault)"
                )));
            }
            Some(SwitchSimFaultEffect::Hang) => std::future::pending::<()>().await,
            _ => {}
        }
        let standby = self.with_switch(switch, |s| {
            let standby = if s.current == "partition1" {
                "partition2"
            } else {
                "partition1"
            };
            s.partitions.insert(standby.to_owned(), build.clone());
            s.next = standby.to_owned();
            standby.to_owned()
        });
        progress("Rebooting into the new system image");
        tokio::time::sleep(step).await;
        if fault == Some(SwitchSimFaultEffect::NoReturn) {
            return Err(SwitchError::Timeout(
                "the switch did not come back after rebooting into the new image".to_owned(),
            ));
        }
        self.with_switch(switch, |s| s.current = standby);
        progress("Verifying the running system image");
        tokio::time::sleep(step).await;
        Ok(build)
    }

    async fn set_password(
        &self,
        switch: &SwitchTarget,
        _username: &str,
        password: &super::Secret,
    ) -> Result<(), SwitchError> {
        tokio::time::sleep(Duration::from_millis(self.config.read_latency_ms)).await;
        self.authenticate(switch)?;
        if self.fault(switch) == Some(SwitchSimFaultEffect::Fail) {
            return Err(SwitchError::ActionFailed(
                "password change failed (sim fault)".to_owned(),
            ));
        }
        self.with_switch(switch, |s| s.password = Some(password.expose().to_owned()));
        Ok(())
    }

    async fn disable_mtls(
        &self,
        switch: &SwitchTarget,
        services: &[String],
    ) -> Result<(), SwitchError> {
        tokio::time::sleep(Duration::from_millis(self.config.read_latency_ms)).await;
        self.authenticate(switch)?;
        self.with_switch(switch, |s| {
            for service in services {
                if !s.mtls_off.contains(service) {
                    s.mtls_off.push(service.clone());
                }
            }
        });
        Ok(())
    }

    async fn factory_reset(
        &self,
        switch: &SwitchTarget,
        scope: super::ResetScope,
    ) -> Result<(), SwitchError> {
        self.authenticate(switch)?;
        tokio::time::sleep(Duration::from_millis(self.config.install_latency_ms / 2)).await;
        if self.fault(switch) == Some(SwitchSimFaultEffect::NoReturn) {
            return Err(SwitchError::Timeout(
                "the switch did not come back after the reset".to_owned(),
            ));
        }
        self.with_switch(switch, |s| {
            s.sdn_configured = false;
            if scope == super::ResetScope::Full {
                s.password = None;
                s.mtls_off.clear();
                s.certificates.clear();
            }
        });
        Ok(())
    }

    async fn list_firmware(
        &self,
        switch: &SwitchTarget,
    ) -> Result<Vec<super::SwitchFirmwareEntry>, SwitchError> {
        tokio::time::sleep(Duration::from_millis(self.config.read_latency_ms)).await;
        self.authenticate(switch)?;
        Ok(self.with_switch(switch, |s| {
            SIM_FIRMWARE
                .iter()
                .map(|c| super::SwitchFirmwareEntry {
                    component: (*c).to_owned(),
                    version: "1.0.0".to_owned(),
                    staged_files: s.staged.get(*c).cloned().unwrap_or_default(),
                })
                .collect()
        }))
    }

    async fn push_firmware(
        &self,
        switch: &SwitchTarget,
        component: &str,
        filename: &str,
        _file: &[u8],
    ) -> Result<(), SwitchError> {
        tokio::time::sleep(Duration::from_millis(self.config.read_latency_ms)).await;
        self.authenticate(switch)?;
        if !SIM_FIRMWARE.contains(&component) {
            return Err(SwitchError::Rejected(format!(
                "no firmware component {component}"
            )));
        }
        self.with_switch(switch, |s| {
            let files = s.staged.entry(component.to_owned()).or_default();
            if !files.iter().any(|f| f == filename) {
                files.push(filename.to_owned());
            }
        });
        Ok(())
    }

    async fn attestation_evidence(
        &self,
        switch: &SwitchTarget,
        nonce: &[u8],
    ) -> Result<Vec<super::ComponentEvidence>, SwitchError> {
        use sha2::{Digest as _, Sha256};
        tokio::time::sleep(Duration::from_millis(self.config.read_latency_ms)).await;
        self.authenticate(switch)?;
        if self.fault(switch) == Some(SwitchSimFaultEffect::Fail) {
            return Err(SwitchError::ActionFailed(
                "SPDM evidence collection failed (sim fault)".to_owned(),
            ));
        }
        Ok(SIM_ATTESTED
            .iter()
            .map(|component| {
                let mut hasher = Sha256::new();
                hasher.update(switch.node_id.as_bytes());
                hasher.update(component.as_bytes());
                hasher.update(nonce);
                super::ComponentEvidence {
                    component_id: (*component).to_owned(),
                    measurements: hasher.finalize().to_vec(),
                    certificate_chain: format!(
                        "sim certificate chain of {} {component}",
                        switch.node_id
                    )
                    .into_bytes(),
                }
            })
            .collect())
    }

    async fn install_certificate(
        &self,
        switch: &SwitchTarget,
        services: &[String],
        domain: &str,
        _test_hello: bool,
    ) -> Result<super::InstalledCertificate, SwitchError> {
        use sha2::{Digest as _, Sha256};
        tokio::time::sleep(Duration::from_millis(self.config.read_latency_ms)).await;
        self.authenticate(switch)?;
        if self.fault(switch) == Some(SwitchSimFaultEffect::Fail) {
            return Err(SwitchError::ActionFailed(
                "certificate install failed (sim fault)".to_owned(),
            ));
        }
        let subject = format!("CN={}.{domain}", switch.node_id);
        let fingerprint = Sha256::digest(subject.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>();
        self.with_switch(switch, |s| {
            for service in services {
                s.certificates.insert(service.clone(), subject.clone());
                s.mtls_off.retain(|m| m != service);
            }
        });
        Ok(super::InstalledCertificate {
            subject,
            fingerprint,
            services: services.to_vec(),
        })
    }
}
