//! Parsers of flag values that clap does not know: durations, phase plans,
//! safety gates, component types, server addresses.
//!
//! Every parser returns a `String` error without the flag name; clap adds
//! `invalid value '…' for '--flag <VALUE>'` in front, so the message always
//! names the flag. The same parsers read the run spec file, whose errors name
//! the file key instead.

use std::fmt;
use std::time::Duration;

use rackflow_domain::ComponentType;
use serde::{Deserialize, Serialize};

/// Parses a duration such as `30s`, `5m`, `1h`, `1h30m`, `250ms` or `2d`.
///
/// Units: `ms`, `s`, `m`, `h`, `d`; parts may be chained (`1h30m`). A bare
/// number is rejected because its unit would be a guess.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("empty duration (use e.g. 30s, 5m, 1h)".to_string());
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(format!(
                "invalid duration {text:?}: expected a number at {rest:?}"
            ));
        }
        let number: u64 = rest[..digits]
            .parse()
            .map_err(|_| format!("invalid duration {text:?}: number too large"))?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let part = match unit {
            "ms" => Duration::from_millis(number),
            "s" => Duration::from_secs(number),
            "m" => Duration::from_secs(number.saturating_mul(60)),
            "h" => Duration::from_secs(number.saturating_mul(3600)),
            "d" => Duration::from_secs(number.saturating_mul(86_400)),
            "" => {
                return Err(format!(
                    "invalid duration {text:?}: missing unit (use ms, s, m, h or d, e.g. 30s)"
                ));
            }
            other => {
                return Err(format!(
                    "invalid duration {text:?}: unknown unit {other:?} (use ms, s, m, h or d)"
                ));
            }
        };
        total = total
            .checked_add(part)
            .ok_or_else(|| format!("invalid duration {text:?}: too large"))?;
    }
    Ok(total)
}

/// Renders a duration in the form [`parse_duration`] reads (`1h30m`, `30s`,
/// `250ms`; `0s` for zero).
pub fn format_duration(duration: Duration) -> String {
    let mut secs = duration.as_secs();
    let millis = duration.subsec_millis();
    let mut out = String::new();
    for (unit, size) in [("d", 86_400), ("h", 3600), ("m", 60), ("s", 1)] {
        if secs >= size {
            out.push_str(&format!("{}{unit}", secs / size));
            secs %= size;
        }
    }
    if millis > 0 {
        out.push_str(&format!("{millis}ms"));
    }
    if out.is_empty() {
        out.push_str("0s");
    }
    out
}

/// How the targets of a run are split into phases (`--phases`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PhasePlan {
    /// `equal:K` — K phases of (nearly) equal size.
    Equal(i32),
    /// `percentage:10,30,60` — cumulative shares, must sum to 100.
    Percentage(Vec<i32>),
    /// `count:1,3` — fixed early phase sizes; a last phase takes the rest.
    Count(Vec<i32>),
}

impl fmt::Display for PhasePlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let join = |v: &[i32]| v.iter().map(i32::to_string).collect::<Vec<_>>().join(",");
        match self {
            PhasePlan::Equal(k) => write!(f, "equal:{k}"),
            PhasePlan::Percentage(p) => write!(f, "percentage:{}", join(p)),
            PhasePlan::Count(c) => write!(f, "count:{}", join(c)),
        }
    }
}

/// Parses `equal:K`, `percentage:P1,P2,…` or `count:C1,C2,…`.
///
/// Checks the shape the server would reject anyway (positive numbers,
/// percentages 1..=100 summing to 100) so that the error names the flag.
pub fn parse_phases(text: &str) -> Result<PhasePlan, String> {
    let (kind, values) = text.trim().split_once(':').ok_or_else(|| {
        format!(
            "invalid phase plan {text:?}: expected equal:K, percentage:P1,P2,… or count:C1,C2,…"
        )
    })?;
    let numbers = || -> Result<Vec<i32>, String> {
        values
            .split(',')
            .map(|v| {
                let v = v.trim();
                v.parse::<i32>().map_err(|_| {
                    format!("invalid phase plan {text:?}: {v:?} is not a whole number")
                })
            })
            .collect()
    };
    match kind.trim().to_ascii_lowercase().as_str() {
        "equal" => {
            let k: i32 = values.trim().parse().map_err(|_| {
                format!("invalid phase plan {text:?}: equal takes one phase count, e.g. equal:3")
            })?;
            if k <= 0 {
                return Err(format!(
                    "invalid phase plan {text:?}: phase count must be greater than 0"
                ));
            }
            Ok(PhasePlan::Equal(k))
        }
        "percentage" | "percent" | "pct" => {
            let p = numbers()?;
            if p.iter().any(|v| !(1..=100).contains(v)) {
                return Err(format!(
                    "invalid phase plan {text:?}: percentages must be between 1 and 100"
                ));
            }
            let sum: i64 = p.iter().map(|v| i64::from(*v)).sum();
            if sum != 100 {
                return Err(format!(
                    "invalid phase plan {text:?}: percentages must sum to 100 (they sum to {sum})"
                ));
            }
            Ok(PhasePlan::Percentage(p))
        }
        "count" => {
            let c = numbers()?;
            if c.iter().any(|v| *v <= 0) {
                return Err(format!(
                    "invalid phase plan {text:?}: counts must be greater than 0"
                ));
            }
            Ok(PhasePlan::Count(c))
        }
        other => Err(format!(
            "invalid phase plan {text:?}: unknown kind {other:?} (use equal, percentage or count)"
        )),
    }
}

/// Scope of a safety gate: the current phase or the whole run so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateScope {
    #[default]
    #[serde(alias = "current_phase")]
    Current,
    #[serde(alias = "cumulative_run")]
    Cumulative,
}

impl GateScope {
    pub fn parse(text: &str) -> Result<GateScope, String> {
        match text.trim().to_ascii_lowercase().replace('-', "_").as_str() {
            "current" | "current_phase" => Ok(GateScope::Current),
            "cumulative" | "cumulative_run" => Ok(GateScope::Cumulative),
            other => Err(format!(
                "unknown gate scope {other:?} (use current or cumulative)"
            )),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            GateScope::Current => "current",
            GateScope::Cumulative => "cumulative",
        }
    }
}

/// A safety gate with its threshold: `--failure-rate 10:current`,
/// `--failure-count 3:cumulative`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// Failed targets over planned targets, in percent (1..=100).
    FailureRate { percent: i32, scope: GateScope },
    /// Number of failed targets (> 0).
    FailureCount { count: i32, scope: GateScope },
}

fn split_scope(text: &str) -> Result<(&str, GateScope), String> {
    match text.split_once(':') {
        Some((value, scope)) => Ok((value.trim(), GateScope::parse(scope)?)),
        None => Ok((text.trim(), GateScope::Current)),
    }
}

/// Parses `PCT[:scope]` (`10`, `10%`, `25:cumulative`).
pub fn parse_failure_rate(text: &str) -> Result<Gate, String> {
    let (value, scope) = split_scope(text)?;
    let value = value.strip_suffix('%').unwrap_or(value);
    let percent: i32 = value
        .parse()
        .map_err(|_| format!("invalid failure rate {text:?}: expected PCT[:current|cumulative]"))?;
    if !(1..=100).contains(&percent) {
        return Err(format!(
            "invalid failure rate {text:?}: percent must be between 1 and 100"
        ));
    }
    Ok(Gate::FailureRate { percent, scope })
}

/// Parses `N[:scope]` (`3`, `1:cumulative`).
pub fn parse_failure_count(text: &str) -> Result<Gate, String> {
    let (value, scope) = split_scope(text)?;
    let count: i32 = value
        .parse()
        .map_err(|_| format!("invalid failure count {text:?}: expected N[:current|cumulative]"))?;
    if count <= 0 {
        return Err(format!(
            "invalid failure count {text:?}: count must be greater than 0"
        ));
    }
    Ok(Gate::FailureCount { count, scope })
}

/// Parses one component type name, case-insensitively, with the CLI aliases
/// (`compute`, `nvswitch`/`nvl-switch`, `powershelf`/`power-shelf`,
/// `torswitch`/`tor-switch`, `ums`, `cdu`).
pub fn parse_component_type(text: &str) -> Result<ComponentType, String> {
    ComponentType::parse(text).ok_or_else(|| {
        format!(
            "unknown component type {text:?} (use compute, nvswitch, powershelf, torswitch, ums or cdu)"
        )
    })
}

/// Parses a UUID (for `--exclude-run`, `--rule-id`, run ids).
pub fn parse_uuid(text: &str) -> Result<uuid::Uuid, String> {
    let id = uuid::Uuid::parse_str(text.trim()).map_err(|e| format!("not a UUID: {e}"))?;
    if id.is_nil() {
        return Err("the nil UUID is not a valid id".to_string());
    }
    Ok(id)
}

/// Normalises a server address: `host:port` gets `http://` in front; an
/// address with a scheme is kept as it is.
pub fn normalize_server(text: &str) -> Result<String, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("empty server address".to_string());
    }
    let uri = if text.contains("://") {
        text.to_string()
    } else {
        format!("http://{text}")
    };
    uri.parse::<tonic::transport::Uri>()
        .map_err(|e| format!("invalid server address {text:?}: {e}"))?;
    Ok(uri)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_round_trip() {
        for text in ["30s", "5m", "1h", "1h30m", "250ms", "2d", "1m500ms"] {
            let d = parse_duration(text).unwrap();
            assert_eq!(format_duration(d), text);
        }
    }
}
