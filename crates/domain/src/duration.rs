//! Go-style duration strings (`"15m"`, `"1h30m"`, `"500ms"`, `"2.5s"`), as
//! rule definitions write them.

use std::time::Duration;

/// Parses a Go duration string. Negative durations and unknown units are
/// errors; `"0"` is zero.
pub fn parse_go_duration(text: &str) -> Result<Duration, String> {
    let s = text.trim();
    if s.is_empty() {
        return Err(format!("invalid duration {text:?}"));
    }
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.starts_with('-') {
        return Err(format!("invalid duration {text:?}: negative"));
    }
    let s = s.strip_prefix('+').unwrap_or(s);
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("invalid duration {text:?}: missing unit"))?;
        if number_len == 0 {
            return Err(format!("invalid duration {text:?}"));
        }
        let value: f64 = rest[..number_len]
            .parse()
            .map_err(|_| format!("invalid duration {text:?}"))?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let nanos_per = match unit {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return Err(format!("invalid duration {text:?}: unknown unit {unit:?}")),
        };
        total += value * nanos_per;
    }
    if !total.is_finite() || total > u64::MAX as f64 {
        return Err(format!("invalid duration {text:?}: out of range"));
    }
    Ok(Duration::from_nanos(total.round() as u64))
}

/// Formats like Go's `Duration.String` for whole units (`1h30m0s`, `5s`,
/// `250ms`), which round-trips through [`parse_go_duration`].
pub fn format_go_duration(d: Duration) -> String {
    if d.is_zero() {
        return "0s".to_string();
    }
    let nanos = d.as_nanos();
    if nanos < 1_000_000_000 {
        if nanos.is_multiple_of(1_000_000) {
            return format!("{}ms", nanos / 1_000_000);
        }
        if nanos.is_multiple_of(1_000) {
            return format!("{}us", nanos / 1_000);
        }
        return format!("{nanos}ns");
    }
    let secs = d.as_secs();
    let (h, m, s) = (secs / 3600, (secs % 3600) / 60, secs % 60);
    let frac = d.subsec_nanos();
    let seconds = if frac == 0 {
        format!("{s}s")
    } else {
        let text = format!("{s}.{frac:09}");
        format!("{}s", text.trim_end_matches('0'))
    };
    match (h, m) {
        (0, 0) => seconds,
        (0, m) => format!("{m}m{seconds}"),
        (h, m) => format!("{h}h{m}m{seconds}"),
    }
}

/// Serde for `Duration` fields written as Go duration strings (numbers are
/// accepted as seconds).
pub mod serde_go {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::format_go_duration(*d))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Text(String),
            Seconds(f64),
        }
        match Raw::deserialize(d)? {
            Raw::Text(t) => super::parse_go_duration(&t).map_err(serde::de::Error::custom),
            Raw::Seconds(s) if s >= 0.0 && s.is_finite() => Ok(Duration::from_secs_f64(s)),
            Raw::Seconds(s) => Err(serde::de::Error::custom(format!("invalid duration {s}"))),
        }
    }

    /// The same for `Option<Duration>` (absent or null = `None`).
    pub mod option {
        use std::time::Duration;

        use serde::{Deserialize, Deserializer, Serializer};

        pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
            match d {
                Some(d) => super::serialize(d, s),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
            #[derive(Deserialize)]
            struct Wrap(#[serde(with = "super")] Duration);
            Ok(Option::<Wrap>::deserialize(d)?.map(|w| w.0))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_durations() {
        let cases = [
            ("0", 0),
            ("5s", 5_000),
            ("15m", 900_000),
            ("1h30m", 5_400_000),
            ("500ms", 500),
            ("2.5s", 2_500),
            ("1h0m0s", 3_600_000),
        ];
        for (text, ms) in cases {
            assert_eq!(
                parse_go_duration(text).unwrap(),
                Duration::from_millis(ms),
                "{text}"
            );
        }
        for bad in ["", "5", "-5s", "5x", "s", "1.2.3s"] {
            assert!(parse_go_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn formats_round_trip() {
        for ms in [
            0u64, 1, 250, 1_000, 1_500, 59_000, 60_000, 5_400_000, 86_400_000,
        ] {
            let d = Duration::from_millis(ms);
            assert_eq!(
                parse_go_duration(&format_go_duration(d)).unwrap(),
                d,
                "{ms}"
            );
        }
        assert_eq!(format_go_duration(Duration::from_secs(5400)), "1h30m0s");
        assert_eq!(format_go_duration(Duration::from_millis(250)), "250ms");
    }
}
