//! Mermaid `sequenceDiagram` text.

use crate::{Chart, Fate, Row, Tone};
use std::fmt::Write as _;

/// Lanes are written as `L0`, `L1`, … with the label as an alias: a label
/// such as `node-a` would otherwise read as the start of an arrow.
pub(crate) fn render(chart: &Chart) -> String {
    let mut out = String::from("sequenceDiagram\n");
    for (index, label) in chart.lanes.iter().enumerate() {
        let _ = writeln!(out, "    participant L{index} as {}", escape(label));
    }
    for row in &chart.rows {
        match row {
            Row::Arrow {
                from,
                to,
                text,
                fate,
            } => {
                let (arrow, text) = match fate {
                    Fate::Delivered => ("->>", escape(text)),
                    Fate::Lost => ("-x", format!("LOST: {}", escape(text))),
                    Fate::Duplicated => (
                        "->>",
                        format!("{} (a duplicate stays in flight)", escape(text)),
                    ),
                };
                let _ = writeln!(out, "    L{}{arrow}L{}: {text}", from.0, to.0);
            }
            Row::Note {
                first,
                last,
                text,
                tone,
            } => {
                let over = match first == last {
                    true => format!("L{}", first.0),
                    false => format!("L{},L{}", first.0, last.0),
                };
                let note = format!("Note over {over}: {}", escape(text));
                match tint(*tone) {
                    Some(rgb) => {
                        let _ = writeln!(out, "    rect rgb({rgb})\n    {note}\n    end");
                    }
                    None => {
                        let _ = writeln!(out, "    {note}");
                    }
                }
            }
        }
    }
    out
}

/// The background of a note of this tone, if it has one.
fn tint(tone: Tone) -> Option<&'static str> {
    match tone {
        Tone::Plain => None,
        Tone::Fault => Some("255, 236, 210"),
        Tone::Durable => Some("222, 245, 222"),
        Tone::Broken => Some("255, 205, 205"),
    }
}

/// Mermaid entity codes for the characters that would end a statement
/// (`;`), start an entity (`#`) or read as HTML (`<`, `>`).
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '#' => out.push_str("#35;"),
            ';' => out.push_str("#59;"),
            '<' => out.push_str("#lt;"),
            '>' => out.push_str("#gt;"),
            c => out.push(c),
        }
    }
    out
}
