//! A scraped `/metrics` body read back through a parser that conforms to
//! the OpenMetrics test suite: a test fails on a malformed exposition, not
//! only on a missing line, and reads values by family and labels instead of
//! matching text.

use std::collections::HashMap;

use openmetrics_parser::{MetricFamily, OpenMetricsType, OpenMetricsValue};

pub use openmetrics_parser::OpenMetricsType as MetricType;

type Family = MetricFamily<OpenMetricsType, OpenMetricsValue>;

/// A parsed exposition.
pub struct Scrape {
    families: HashMap<String, Family>,
    text: String,
}

impl std::fmt::Debug for Scrape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// Parses `text`; panics (showing it) when it is not valid OpenMetrics.
pub fn parse(text: &str) -> Scrape {
    match openmetrics_parser::openmetrics::parse_openmetrics(text) {
        Ok(exposition) => Scrape {
            families: exposition.families,
            text: text.to_owned(),
        },
        Err(e) => panic!("/metrics is not valid OpenMetrics: {e:?}\n{text}"),
    }
}

impl Scrape {
    /// The family (its name without `_total`, `_bucket`, …); panics when
    /// absent.
    fn family(&self, name: &str) -> &Family {
        self.families
            .get(name)
            .unwrap_or_else(|| panic!("no family {name} in /metrics:\n{}", self.text))
    }

    /// Whether the family is exposed (with or without series).
    pub fn has(&self, name: &str) -> bool {
        self.families.contains_key(name)
    }

    /// The family's type; panics when absent.
    pub fn kind(&self, name: &str) -> OpenMetricsType {
        self.family(name).family_type
    }

    /// The values of the family's series whose labels include every pair
    /// of `labels`: a counter's total, a gauge's value, a histogram's count.
    pub fn values(&self, name: &str, labels: &[(&str, &str)]) -> Vec<f64> {
        self.family(name)
            .iter_samples()
            .filter(|sample| {
                let Ok(set) = sample.get_labelset() else {
                    return false;
                };
                labels
                    .iter()
                    .all(|(k, v)| set.get_label_value(k) == Some(*v))
            })
            .map(|sample| match &sample.value {
                OpenMetricsValue::Counter(c) => c.value.as_f64(),
                OpenMetricsValue::Gauge(n) | OpenMetricsValue::Unknown(n) => n.as_f64(),
                OpenMetricsValue::Histogram(h) | OpenMetricsValue::GaugeHistogram(h) => {
                    h.count.unwrap_or(0) as f64
                }
                other => panic!("{name}: unexpected value {other:?}"),
            })
            .collect()
    }

    /// The sum of [`Scrape::values`].
    pub fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.values(name, labels).into_iter().sum()
    }

    /// The one series matching `labels`; panics when there is not exactly
    /// one.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        match self.values(name, labels).as_slice() {
            [one] => *one,
            other => panic!(
                "{name}{labels:?}: {} series match, not one:\n{}",
                other.len(),
                self.text
            ),
        }
    }

    /// A histogram series' sum of observations (seconds for a duration).
    pub fn histogram_sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.family(name)
            .iter_samples()
            .filter(|sample| {
                sample.get_labelset().is_ok_and(|set| {
                    labels
                        .iter()
                        .all(|(k, v)| set.get_label_value(k) == Some(*v))
                })
            })
            .map(|sample| match &sample.value {
                OpenMetricsValue::Histogram(h) => h.sum.as_ref().map_or(0.0, |s| s.as_f64()),
                other => panic!("{name}: not a histogram: {other:?}"),
            })
            .sum()
    }
}

/// Turns on the Flow server's `/metrics` listener in `config` on a free
/// loopback port, and returns that address.
pub fn enable(config: &mut rackflow_server::Config) -> std::net::SocketAddr {
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port");
    config.metrics.enabled = true;
    config.metrics.listen = addr;
    addr
}

/// `GET /metrics` at `addr`: the status line and the body as sent.
pub async fn get(addr: std::net::SocketAddr) -> (String, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connect to /metrics");
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await
        .expect("send the scrape");
    let mut answer = String::new();
    stream
        .read_to_string(&mut answer)
        .await
        .expect("read the scrape");
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP head in {answer:?}"));
    let status = head.lines().next().unwrap_or_default().to_string();
    // axum answers a known length; a chunked body would need decoding.
    assert!(
        !head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked"),
        "{head}"
    );
    (status, body.to_string())
}

/// Scrapes `/metrics` at `addr` (200 required) and parses it.
pub async fn scrape(addr: std::net::SocketAddr) -> Scrape {
    let (status, body) = get(addr).await;
    assert!(status.contains("200"), "GET /metrics: {status}\n{body}");
    parse(&body)
}
