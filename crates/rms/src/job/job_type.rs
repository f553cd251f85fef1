//! `JobType`: the kind of work a job does.
//!
//! The type names the job's tracing span, words batch descriptions ("Batch
//! firmware update in progress …") and labels workflow metrics. All wording
//! is fixed by the spec's §1.6 table.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The kind of a tracked job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum JobType {
    FirmwareUpdate,
    SwitchCertificate,
    SwitchMtlsDisable,
    SwitchSdnFactoryDefaultReset,
    SwitchFactoryDefaultReset,
    SwitchSystemPasswordUpdate,
    SwitchSystemImageUpdate,
    ConfigureScaleUpFabricManagerV2,
    ColdRebootSequence,
}

impl JobType {
    /// Every job type, in the spec's table order.
    pub const ALL: [JobType; 9] = [
        JobType::FirmwareUpdate,
        JobType::SwitchCertificate,
        JobType::SwitchMtlsDisable,
        JobType::SwitchSdnFactoryDefaultReset,
        JobType::SwitchFactoryDefaultReset,
        JobType::SwitchSystemPasswordUpdate,
        JobType::SwitchSystemImageUpdate,
        JobType::ConfigureScaleUpFabricManagerV2,
        JobType::ColdRebootSequence,
    ];

    /// The tracing span name, also the `workflow_type` metrics label.
    pub fn span_name(self) -> &'static str {
        match self {
            JobType::FirmwareUpdate => "firmware_update",
            JobType::SwitchCertificate => "switch_certificate",
            JobType::SwitchMtlsDisable => "switch_mtls_disable",
            JobType::SwitchSdnFactoryDefaultReset => "switch_sdn_factory_default_reset",
            JobType::SwitchFactoryDefaultReset => "switch_factory_default_reset",
            JobType::SwitchSystemPasswordUpdate => "switch_system_password_update",
            JobType::SwitchSystemImageUpdate => "switch_system_image_update",
            JobType::ConfigureScaleUpFabricManagerV2 => "configure_scale_up_fabric_manager_v2",
            JobType::ColdRebootSequence => "cold_reboot_sequence",
        }
    }

    /// Singular noun used in batch descriptions.
    pub fn batch_noun(self) -> &'static str {
        match self {
            JobType::FirmwareUpdate => "firmware update",
            JobType::SwitchCertificate => "switch certificate install",
            JobType::SwitchMtlsDisable => "switch mTLS disable",
            JobType::SwitchSdnFactoryDefaultReset => "switch SDN factory-default reset",
            JobType::SwitchFactoryDefaultReset => "switch factory-default reset",
            JobType::SwitchSystemPasswordUpdate => "switch system password update",
            JobType::SwitchSystemImageUpdate => "switch system image update",
            JobType::ConfigureScaleUpFabricManagerV2 => "scale-up fabric configuration",
            JobType::ColdRebootSequence => "cold reboot",
        }
    }

    /// Plural noun used in batch descriptions and failure messages.
    pub fn batch_noun_plural(self) -> &'static str {
        match self {
            JobType::FirmwareUpdate => "firmware updates",
            JobType::SwitchCertificate => "switch certificate installs",
            JobType::SwitchMtlsDisable => "switch mTLS disables",
            JobType::SwitchSdnFactoryDefaultReset => "switch SDN factory-default resets",
            JobType::SwitchFactoryDefaultReset => "switch factory-default resets",
            JobType::SwitchSystemPasswordUpdate => "switch system password updates",
            JobType::SwitchSystemImageUpdate => "switch system image updates",
            JobType::ConfigureScaleUpFabricManagerV2 => "scale-up fabric configurations",
            JobType::ColdRebootSequence => "cold reboots",
        }
    }

    /// A new `INFO` span named after this type, with `job_id`, `rack_id` and
    /// `node_id` left empty (the registry records them once the ID is final)
    /// and `parent_job_id` recorded when non-empty.
    pub fn span(self, parent_job_id: &str) -> tracing::Span {
        // A span name must be a compile-time constant at its callsite, so each
        // type needs its own `info_span!` arm.
        macro_rules! spans {
            ($($variant:ident => $name:literal),* $(,)?) => {
                match self {
                    $(JobType::$variant => tracing::info_span!(
                        $name,
                        job_id = tracing::field::Empty,
                        parent_job_id = tracing::field::Empty,
                        rack_id = tracing::field::Empty,
                        node_id = tracing::field::Empty
                    ),)*
                }
            };
        }
        let span = spans!(
            FirmwareUpdate => "firmware_update",
            SwitchCertificate => "switch_certificate",
            SwitchMtlsDisable => "switch_mtls_disable",
            SwitchSdnFactoryDefaultReset => "switch_sdn_factory_default_reset",
            SwitchFactoryDefaultReset => "switch_factory_default_reset",
            SwitchSystemPasswordUpdate => "switch_system_password_update",
            SwitchSystemImageUpdate => "switch_system_image_update",
            ConfigureScaleUpFabricManagerV2 => "configure_scale_up_fabric_manager_v2",
            ColdRebootSequence => "cold_reboot_sequence",
        );
        if !parent_job_id.is_empty() {
            span.record("parent_job_id", tracing::field::display(parent_job_id));
        }
        span
    }
}

impl fmt::Display for JobType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.span_name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wording_matches_the_spec_table() {
        let table = [
            ("firmware_update", "firmware update", "firmware updates"),
            (
                "switch_certificate",
                "switch certificate install",
                "switch certificate installs",
            ),
            (
                "switch_mtls_disable",
                "switch mTLS disable",
                "switch mTLS disables",
            ),
            (
                "switch_sdn_factory_default_reset",
                "switch SDN factory-default reset",
                "switch SDN factory-default resets",
            ),
            (
                "switch_factory_default_reset",
                "switch factory-default reset",
                "switch factory-default resets",
            ),
            (
                "switch_system_password_update",
                "switch system password update",
                "switch system password updates",
            ),
            (
                "switch_system_image_update",
                "switch system image update",
                "switch system image updates",
            ),
            (
                "configure_scale_up_fabric_manager_v2",
                "scale-up fabric configuration",
                "scale-up fabric configurations",
            ),
            ("cold_reboot_sequence", "cold reboot", "cold reboots"),
        ];
        for (job_type, (span, noun, plural)) in JobType::ALL.iter().zip(table) {
            assert_eq!(job_type.span_name(), span);
            assert_eq!(job_type.batch_noun(), noun);
            assert_eq!(job_type.batch_noun_plural(), plural);
            assert_eq!(job_type.to_string(), span);
        }
    }

    #[test]
    fn spans_can_be_built_for_every_type() {
        for job_type in JobType::ALL {
            let _top = job_type.span("");
            let _child = job_type.span("parent-1");
        }
    }
}
