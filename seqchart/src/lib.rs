//! Message sequence charts: one lane per actor, arrows for messages (lost
//! and duplicated ones marked on the arrow), notes for what happens on a
//! lane (a crash, a restart, an append becoming durable), and an alert for
//! the rule a counterexample breaks.
//!
//! The same [`Chart`] renders two ways: [`Chart::mermaid`], a Mermaid
//! `sequenceDiagram` for the Markdown pages reviewers read where they read
//! code, and [`Chart::svg`], a standalone picture for the dashboard and the
//! docs. The checker's counterexamples (`simulations`) and real controller
//! logs (`fleetweft log show --diagram`) both build a chart, so a
//! scenario's run and a counterexample read the same way.
//!
//! Rendering is deterministic: the same chart gives the same bytes (the
//! gallery test compares committed files byte for byte).
// Production functions stay within 70 lines (clippy.toml, issue #22 item 6);
// tests may run longer.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

mod mermaid;
mod svg;

/// A lane of the chart (an index into its participants).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Lane(usize);

/// How an arrow's message fared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Sent, or delivered.
    Delivered,
    /// Lost by the network: the arrow ends in a cross.
    Lost,
    /// Delivered while a copy stays in flight.
    Duplicated,
}

/// What a note means, which sets its colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tone {
    /// Something a lane does or learns.
    Plain,
    /// A fault: a crash, a partition, a wrong answer.
    Fault,
    /// What became durable.
    Durable,
    /// The rule broken at this point.
    Broken,
}

/// One row of the chart, top to bottom.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Row {
    /// A message from one lane to another.
    Arrow {
        from: Lane,
        to: Lane,
        text: String,
        fate: Fate,
    },
    /// A note over the lanes `first..=last` (one lane when equal).
    Note {
        first: Lane,
        last: Lane,
        text: String,
        tone: Tone,
    },
}

/// A sequence chart under construction, then rendered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Chart {
    lanes: Vec<String>,
    rows: Vec<Row>,
}

/// Characters of note or arrow text kept; longer text is cut with `…`
/// (a chart is read at a glance; the numbered text beside it has it all).
pub const TEXT_CHARS_MAX: usize = 160;
/// Lanes a chart may hold: beyond it a chart stops being readable (callers
/// fold the rest of a fleet into one lane).
pub const LANES_MAX: usize = 32;

impl Chart {
    /// An empty chart.
    pub fn new() -> Chart {
        Chart::default()
    }

    /// The lane labelled `label`, added at the right if new.
    ///
    /// # Panics
    /// When a new lane would exceed [`LANES_MAX`] (a caller's bug: callers
    /// fold large fleets into one lane before they get here).
    pub fn lane(&mut self, label: &str) -> Lane {
        if let Some(index) = self.lanes.iter().position(|l| l == label) {
            return Lane(index);
        }
        assert!(self.lanes.len() < LANES_MAX, "more than {LANES_MAX} lanes");
        self.lanes.push(label.to_string());
        Lane(self.lanes.len() - 1)
    }

    /// The lanes' labels, left to right.
    pub fn lanes(&self) -> &[String] {
        &self.lanes
    }

    /// The rows, top to bottom.
    pub fn rows(&self) -> &[Row] {
        &self.rows
    }

    /// A message from `from` to `to`.
    pub fn arrow(&mut self, from: Lane, to: Lane, text: impl Into<String>, fate: Fate) {
        self.rows.push(Row::Arrow {
            from,
            to,
            text: clip(text.into()),
            fate,
        });
    }

    /// A note over one lane.
    pub fn note(&mut self, over: Lane, text: impl Into<String>, tone: Tone) {
        self.note_span(over, over, text, tone);
    }

    /// A note over the lanes from `a` to `b` (in either order).
    pub fn note_span(&mut self, a: Lane, b: Lane, text: impl Into<String>, tone: Tone) {
        self.rows.push(Row::Note {
            first: a.min(b),
            last: a.max(b),
            text: clip(text.into()),
            tone,
        });
    }

    /// A note over every lane (the broken rule, a run's end).
    pub fn note_all(&mut self, text: impl Into<String>, tone: Tone) {
        if self.lanes.is_empty() {
            return;
        }
        let last = Lane(self.lanes.len() - 1);
        self.note_span(Lane(0), last, text, tone);
    }

    /// Mermaid `sequenceDiagram` text (without the code fence).
    pub fn mermaid(&self) -> String {
        mermaid::render(self)
    }

    /// A standalone SVG document.
    pub fn svg(&self) -> String {
        svg::render(self)
    }
}

/// Cuts `text` to [`TEXT_CHARS_MAX`] characters and folds white space runs
/// (newlines included) to one space: a row is one line of the chart.
fn clip(text: String) -> String {
    let folded: Vec<&str> = text.split_whitespace().collect();
    let folded = folded.join(" ");
    if folded.chars().count() <= TEXT_CHARS_MAX {
        return folded;
    }
    let mut cut: String = folded.chars().take(TEXT_CHARS_MAX - 1).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Chart {
        let mut c = Chart::new();
        let op = c.lane("operator");
        let ctrl = c.lane("controller");
        let log = c.lane("log");
        let a = c.lane("node-a");
        c.arrow(op, ctrl, "1. pause r0; now", Fate::Delivered);
        c.arrow(ctrl, log, "rollout r0 paused #1 <x>", Fate::Delivered);
        c.note(log, "durable", Tone::Durable);
        c.arrow(ctrl, a, "apply op0", Fate::Lost);
        c.arrow(a, ctrl, "commit request", Fate::Duplicated);
        c.note(a, "SIGKILL, restarts", Tone::Fault);
        c.note_all("breaks S5", Tone::Broken);
        c
    }

    #[test]
    fn a_lane_is_added_once_and_kept_in_order() {
        let mut c = Chart::new();
        let a = c.lane("a");
        let b = c.lane("b");
        assert_eq!(c.lane("a"), a);
        assert_ne!(a, b);
        assert_eq!(c.lanes(), ["a".to_string(), "b".to_string()]);
    }

    #[test]
    fn mermaid_names_lanes_by_alias_and_marks_fates() {
        let text = sample().mermaid();
        assert!(text.starts_with("sequenceDiagram\n"), "{text}");
        assert!(text.contains("    participant L3 as node-a\n"), "{text}");
        // `;` and `#` would end or start a Mermaid statement or entity.
        assert!(text.contains("L0->>L1: 1. pause r0#59; now\n"), "{text}");
        assert!(
            text.contains("L1->>L2: rollout r0 paused #35;1 #lt;x#gt;\n"),
            "{text}"
        );
        assert!(text.contains("L1-xL3: LOST: apply op0\n"), "{text}");
        assert!(
            text.contains("L3->>L1: commit request (a duplicate stays in flight)\n"),
            "{text}"
        );
        assert!(text.contains("Note over L3: SIGKILL, restarts\n"), "{text}");
        assert!(text.contains("Note over L0,L3: breaks S5\n"), "{text}");
    }

    #[test]
    fn svg_is_one_document_with_every_lane_and_row() {
        let svg = sample().svg();
        assert!(
            svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""),
            "{svg}"
        );
        assert!(svg.trim_end().ends_with("</svg>"), "{svg}");
        for label in ["operator", "controller", "log", "node-a"] {
            assert!(svg.contains(&format!(">{label}</text>")), "{label}: {svg}");
        }
        assert!(svg.contains("rollout r0 paused #1 &lt;x&gt;"), "{svg}");
        assert!(svg.contains("LOST: apply op0"), "{svg}");
        assert_eq!(svg.matches("<line class=\"arrow").count(), 4, "{svg}");
        assert_eq!(svg, sample().svg(), "rendering is deterministic");
    }

    #[test]
    fn long_text_is_cut_and_folded_to_one_line() {
        let mut c = Chart::new();
        let a = c.lane("a");
        c.note(a, format!("x\n{}", "y".repeat(400)), Tone::Plain);
        let Row::Note { text, .. } = &c.rows()[0] else {
            panic!("a note")
        };
        assert_eq!(text.chars().count(), TEXT_CHARS_MAX);
        assert!(text.starts_with("x y") && text.ends_with('…'), "{text}");
    }
}
