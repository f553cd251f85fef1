//! BMC credentials. The password never leaves this type except into the
//! `Authorization` header: `Debug` prints `***`, there is no `Display`, and
//! nothing in this module's callers puts it in a `tracing` field.

use std::fmt;

/// A BMC user name and password for HTTP basic authentication.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    username: String,
    password: String,
}

impl Credentials {
    pub fn new(username: impl Into<String>, password: impl Into<String>) -> Self {
        Credentials {
            username: username.into(),
            password: password.into(),
        }
    }

    pub fn username(&self) -> &str {
        &self.username
    }

    /// Only the HTTP client reads the password, to build the header.
    pub(crate) fn password(&self) -> &str {
        &self.password
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &"***")
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_the_password() {
        let c = Credentials::new("admin", "s3cr3t-Pa55");
        let shown = format!("{c:?}");
        assert!(!shown.contains("s3cr3t-Pa55"), "{shown}");
        assert!(shown.contains("***") && shown.contains("admin"), "{shown}");
        let pretty = format!("{c:#?}");
        assert!(!pretty.contains("s3cr3t-Pa55"), "{pretty}");
        assert_eq!(c.password(), "s3cr3t-Pa55");
    }
}
