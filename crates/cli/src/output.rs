//! Output: aligned text tables, key/value blocks and JSON.
//!
//! Generated proto messages carry no serde derives, so every command converts
//! them into its own small `*View` structs (plain serde data) for JSON and
//! reads the same views to print tables.

use std::io::{self, Write};

use clap::ValueEnum;
use serde::Serialize;

/// `--output`: human tables or JSON.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// Aligned tables and key/value blocks.
    #[default]
    Table,
    /// One pretty-printed JSON document on stdout.
    Json,
}

/// Writes `text` to stdout. A closed pipe (`rackflow … | head`) ends the
/// process quietly with success, as other command-line tools do.
pub fn write_out(text: &str) {
    let mut out = io::stdout().lock();
    if let Err(err) = out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        if err.kind() == io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("error: write to stdout: {err}");
        std::process::exit(1);
    }
}

/// `println!` through [`write_out`].
#[macro_export]
macro_rules! outln {
    () => {
        $crate::output::write_out("\n")
    };
    ($($arg:tt)*) => {
        $crate::output::write_out(&format!("{}\n", format_args!($($arg)*)))
    };
}

/// Writes `value` as pretty JSON followed by a newline.
pub fn print_json<T: Serialize>(value: &T) -> anyhow::Result<()> {
    let mut text = serde_json::to_string_pretty(value)?;
    text.push('\n');
    write_out(&text);
    Ok(())
}

/// A text table whose columns are padded to their widest cell. The last
/// column is not padded, so lines carry no trailing blanks.
#[derive(Debug, Clone, Default)]
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new<I, S>(headers: I) -> Table
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Table {
            headers: headers.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row; missing cells are blank, extra cells are dropped.
    pub fn row<I, S>(&mut self, cells: I)
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut row: Vec<String> = cells.into_iter().map(Into::into).collect();
        row.resize(self.headers.len(), String::new());
        self.rows.push(row);
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Renders the table, one line per row, header first.
    pub fn render(&self) -> String {
        let columns = self.headers.len();
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate() {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let mut out = String::new();
        for line in std::iter::once(&self.headers).chain(self.rows.iter()) {
            let mut text = String::new();
            for (i, cell) in line.iter().enumerate() {
                text.push_str(cell);
                if i + 1 < columns {
                    let pad = widths[i] - cell.chars().count() + 2;
                    text.extend(std::iter::repeat_n(' ', pad));
                }
            }
            out.push_str(text.trim_end());
            out.push('\n');
        }
        out
    }

    pub fn print(&self) {
        write_out(&self.render());
    }
}

/// Key/value lines with the keys padded to one width.
#[derive(Debug, Clone, Default)]
pub struct Fields {
    lines: Vec<(String, String)>,
}

impl Fields {
    pub fn new() -> Fields {
        Fields::default()
    }

    pub fn add(&mut self, key: impl Into<String>, value: impl Into<String>) -> &mut Self {
        self.lines.push((key.into(), value.into()));
        self
    }

    pub fn render(&self) -> String {
        let width = self
            .lines
            .iter()
            .map(|(k, _)| k.chars().count())
            .max()
            .unwrap_or(0);
        let mut out = String::new();
        for (key, value) in &self.lines {
            let line = format!(
                "{key}:{}{value}",
                " ".repeat(width - key.chars().count() + 2)
            );
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }

    pub fn print(&self) {
        write_out(&self.render());
    }
}

/// RFC 3339 (UTC, whole seconds) of a protobuf timestamp.
pub fn timestamp(ts: Option<&prost_types::Timestamp>) -> Option<String> {
    let ts = ts?;
    let nanos = u32::try_from(ts.nanos).unwrap_or(0);
    chrono::DateTime::from_timestamp(ts.seconds, nanos)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
}

/// A protobuf enum value name without its prefix, in lower case:
/// `OPERATION_RUN_STATUS_COMPLETED_WITH_FAILURES` → `completed_with_failures`.
pub fn enum_name(full: &str, prefix: &str) -> String {
    full.strip_prefix(prefix)
        .unwrap_or(full)
        .to_ascii_lowercase()
}

/// `-` for an empty cell.
pub fn or_dash(value: &str) -> String {
    if value.is_empty() {
        "-".to_string()
    } else {
        value.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_aligns_columns_without_trailing_blanks() {
        let mut t = Table::new(["A", "LONG HEADER", "C"]);
        t.row(["xxxx", "y", ""]);
        t.row(["z", "", "last"]);
        assert_eq!(
            t.render(),
            "A     LONG HEADER  C\nxxxx  y\nz                  last\n"
        );
    }
}
