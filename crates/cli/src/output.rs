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

/// Columns text is wrapped to when stdout is not a terminal (or its width
/// cannot be read).
pub const DEFAULT_WIDTH: usize = 80;

/// The terminal's width when stdout is one, else `COLUMNS`, else
/// [`DEFAULT_WIDTH`].
pub fn output_width() -> usize {
    terminal_size::terminal_size_of(io::stdout())
        .map(|(terminal_size::Width(w), _)| usize::from(w))
        .or_else(|| std::env::var("COLUMNS").ok()?.trim().parse().ok())
        .filter(|w| *w >= 20)
        .unwrap_or(DEFAULT_WIDTH)
}

/// Wraps every line of `text` longer than `width` columns at blanks. A
/// word is never split — an id or a command stays whole and copyable even
/// when it alone is wider than the line — and continuation lines are
/// indented under the text of a `Label:   text` line (else by four).
pub fn wrap_lines(text: &str, width: usize) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    for line in text.split_inclusive('\n') {
        let (body, newline) = match line.strip_suffix('\n') {
            Some(body) => (body, "\n"),
            None => (line, ""),
        };
        out.push_str(&wrap_line(body, width));
        out.push_str(newline);
    }
    out
}

fn wrap_line(line: &str, width: usize) -> String {
    if line.chars().count() <= width {
        return line.to_string();
    }
    // A label column (`Note:     `) or the line's own indent stays as is.
    let (head_chars, indent) = hanging_indent(line);
    let split = line
        .char_indices()
        .nth(head_chars)
        .map_or(line.len(), |(i, _)| i);
    let (head, body) = line.split_at(split);
    fill(head, body, width, indent, "")
}

/// `label` then `command`, wrapped at blanks to `width` columns with a
/// shell line continuation (a trailing ` \`) at each break, continuation lines
/// indented under the command: copied whole, it still runs as one command.
pub fn wrap_command(label: &str, command: &str, width: usize) -> String {
    let indent = label.chars().count() + 2;
    fill(label, command, width, indent, " \\")
}

/// `head`, then the words of `body` one blank apart, a line break (after
/// `marker`, which the line leaves room for) before a word that would pass
/// `width` columns, continuation lines `indent` columns in. A word is never
/// split, even one wider than the line.
fn fill(head: &str, body: &str, width: usize, indent: usize, marker: &str) -> String {
    let reserve = marker.chars().count();
    let mut out = head.to_string();
    let mut column = head.chars().count();
    let mut empty = true;
    for word in body.split(' ').filter(|w| !w.is_empty()) {
        let word_width = word.chars().count();
        if !empty && column + 1 + word_width + reserve > width {
            out.push_str(marker);
            out.push('\n');
            out.push_str(&" ".repeat(indent));
            column = indent;
            empty = true;
        }
        if !empty {
            out.push(' ');
            column += 1;
        }
        out.push_str(word);
        column += word_width;
        empty = false;
    }
    out
}

/// The head kept as written and where continuation lines start, in
/// columns: `Label:   text` (a first word ending in `:`, then blanks) keeps
/// its label column and continues under the text;
/// any other line keeps its own indent and continues two columns further
/// in (four for an unindented line).
fn hanging_indent(line: &str) -> (usize, usize) {
    let leading = line.chars().take_while(|c| *c == ' ').count();
    let trimmed = &line[leading..];
    if let Some(colon) = trimmed.find(':')
        && !trimmed[..colon].contains(' ')
        && trimmed[colon + 1..].starts_with(' ')
        && let Some(after) = trimmed[colon + 1..].find(|c: char| c != ' ')
    {
        let column = leading + trimmed[..colon + 1 + after].chars().count();
        return (column, column);
    }
    (leading, if leading > 0 { leading + 2 } else { 4 })
}

/// [`outln!`] wrapped at the output's width ([`wrap_lines`]): for prose
/// lines that may run long (the demo's banner).
#[macro_export]
macro_rules! outln_wrapped {
    ($($arg:tt)*) => {
        $crate::output::write_out(&$crate::output::wrap_lines(
            &format!("{}\n", format_args!($($arg)*)),
            $crate::output::output_width(),
        ))
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
    fn long_lines_wrap_at_blanks_never_inside_a_word() {
        let id = "3f2a9c1e-0b7d-4e55-9a61-2d8f6c0b9e11";
        let note = format!(
            "Note:     failed targets keep counting: the gate trips again on the next pass \
             unless its cause is fixed; `rackflow run cancel {id}` stops the run\n"
        );
        let wrapped = wrap_lines(&note, 80);
        for line in wrapped.lines() {
            assert!(line.chars().count() <= 80, "{line:?}");
        }
        assert!(wrapped.contains(id), "the id stays whole:\n{wrapped}");
        assert!(wrapped.ends_with('\n'));
        assert_eq!(
            wrapped.split_whitespace().collect::<Vec<_>>(),
            note.split_whitespace().collect::<Vec<_>>(),
            "no word lost"
        );
        // Continuations start under the label's text.
        for line in wrapped.lines().skip(1) {
            assert!(
                line.starts_with("          ") && !line.starts_with("           "),
                "{line:?}"
            );
        }
        // Short lines, and a word wider than the line, stay as they are.
        assert_eq!(wrap_lines("Status:   running\n", 80), "Status:   running\n");
        let long = "x".repeat(100);
        assert_eq!(
            wrap_lines(&format!("a {long}"), 80),
            format!("a\n    {long}")
        );
        // Unlabelled lines continue four columns in.
        assert_eq!(
            wrap_lines("rollout of many racks in phases", 12),
            "rollout of\n    many\n    racks in\n    phases"
        );
    }

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
