//! A standalone SVG picture of a chart: lane heads, lifelines, one row per
//! arrow or note. Text width is estimated (no font metrics): the picture
//! widens to fit the longest row rather than wrap it.

use crate::{Chart, Fate, Lane, Row, Tone};
use std::fmt::Write as _;

/// Distance between two lifelines, in pixels.
const LANE_GAP_PX: usize = 190;
/// Space left of the first lane and right of the widest row, in pixels.
const MARGIN_PX: usize = 24;
/// Height of the lane heads, in pixels.
const HEAD_PX: usize = 34;
/// Height of one row, in pixels.
const ROW_PX: usize = 30;
/// Estimated width of one character at the chart's font size, in pixels.
const CHAR_PX: usize = 7;
/// Half the width of a lane head (and of a one-lane note), in pixels.
const HEAD_HALF_PX: usize = 80;

const STYLE: &str = "text{font:12px sans-serif;fill:#222}\
.head{fill:#eef2f7;stroke:#556}\
.life{stroke:#99a;stroke-dasharray:4 4}\
.arrow{stroke:#224;stroke-width:1.4}\
.lost{stroke:#b00;stroke-dasharray:6 3}\
.cross{stroke:#b00;stroke-width:2}\
.note{stroke:#998}\
.plain{fill:#fffbe6}.fault{fill:#ffecd2}.durable{fill:#def5de}.broken{fill:#ffcdcd}";

pub(crate) fn render(chart: &Chart) -> String {
    let lanes = chart.lanes.len().max(1);
    let x = |lane: Lane| MARGIN_PX + HEAD_HALF_PX + lane.0 * LANE_GAP_PX;
    let mut width = x(Lane(lanes - 1)) + HEAD_HALF_PX + MARGIN_PX;
    for row in &chart.rows {
        width = width.max(row_right(row, &x) + MARGIN_PX);
    }
    let top = MARGIN_PX + HEAD_PX;
    let height = top + (chart.rows.len() + 1) * ROW_PX + MARGIN_PX;
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         viewBox=\"0 0 {width} {height}\">\n<style>{STYLE}</style>\n\
         <rect width=\"{width}\" height=\"{height}\" fill=\"#fff\"/>\n"
    );
    for (index, label) in chart.lanes.iter().enumerate() {
        let cx = x(Lane(index));
        let _ = writeln!(
            out,
            "<line class=\"life\" x1=\"{cx}\" y1=\"{top}\" x2=\"{cx}\" y2=\"{}\"/>\n\
             <rect class=\"head\" x=\"{}\" y=\"{MARGIN_PX}\" width=\"{}\" height=\"{HEAD_PX}\" rx=\"4\"/>\n\
             <text x=\"{cx}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            height - MARGIN_PX,
            cx - HEAD_HALF_PX,
            2 * HEAD_HALF_PX,
            MARGIN_PX + HEAD_PX / 2 + 4,
            escape(label)
        );
    }
    for (index, row) in chart.rows.iter().enumerate() {
        let y = top + (index + 1) * ROW_PX;
        match row {
            Row::Arrow {
                from,
                to,
                text,
                fate,
            } => arrow(&mut out, x(*from), x(*to), y, text, *fate),
            Row::Note {
                first,
                last,
                text,
                tone,
            } => note(&mut out, x(*first), x(*last), y, text, *tone),
        }
    }
    out.push_str("</svg>\n");
    out
}

/// The rightmost pixel a row draws at.
fn row_right(row: &Row, x: &impl Fn(Lane) -> usize) -> usize {
    match row {
        Row::Arrow { from, to, text, .. } => {
            let left = x(*from).min(x(*to));
            (left + 6 + text_px(text) + 60).max(x(*from).max(x(*to)))
        }
        Row::Note { first, text, .. } => x(*first) - HEAD_HALF_PX + 8 + text_px(text),
    }
}

fn text_px(text: &str) -> usize {
    text.chars().count() * CHAR_PX
}

/// A message: a line with an arrowhead (or a cross when lost), its text
/// above it starting at the left end. A message to itself is a short loop.
fn arrow(out: &mut String, x1: usize, x2: usize, y: usize, text: &str, fate: Fate) {
    let class = match fate {
        Fate::Lost => "arrow lost",
        Fate::Delivered | Fate::Duplicated => "arrow",
    };
    let label = match fate {
        Fate::Delivered => escape(text),
        Fate::Lost => format!("LOST: {}", escape(text)),
        Fate::Duplicated => format!("{} (a duplicate stays in flight)", escape(text)),
    };
    let x2 = if x1 == x2 { x1 + 40 } else { x2 };
    let _ = writeln!(
        out,
        "<line class=\"{class}\" x1=\"{x1}\" y1=\"{y}\" x2=\"{x2}\" y2=\"{y}\"/>\n\
         <text x=\"{}\" y=\"{}\">{label}</text>",
        x1.min(x2) + 6,
        y - 6
    );
    // The end: a cross where a lost message stops, else an arrowhead.
    let back: isize = if x2 > x1 { -8 } else { 8 };
    let tip = x2 as isize;
    let (y, yu, yd) = (y as isize, y as isize - 5, y as isize + 5);
    let _ = match fate {
        Fate::Lost => writeln!(
            out,
            "<line class=\"cross\" x1=\"{}\" y1=\"{yu}\" x2=\"{}\" y2=\"{yd}\"/>\
             <line class=\"cross\" x1=\"{}\" y1=\"{yd}\" x2=\"{}\" y2=\"{yu}\"/>",
            tip - 5,
            tip + 5,
            tip - 5,
            tip + 5
        ),
        _ => writeln!(
            out,
            "<path d=\"M{tip} {y} L{} {yu} L{} {yd} Z\" fill=\"#224\"/>",
            tip + back,
            tip + back
        ),
    };
}

/// A note: a tinted box over its lanes with the text inside.
fn note(out: &mut String, x1: usize, x2: usize, y: usize, text: &str, tone: Tone) {
    let class = match tone {
        Tone::Plain => "plain",
        Tone::Fault => "fault",
        Tone::Durable => "durable",
        Tone::Broken => "broken",
    };
    let left = x1 - HEAD_HALF_PX;
    let width = (x2 + HEAD_HALF_PX - left).max(text_px(text) + 16);
    let _ = writeln!(
        out,
        "<rect class=\"note {class}\" x=\"{left}\" y=\"{}\" width=\"{width}\" height=\"22\" rx=\"3\"/>\n\
         <text x=\"{}\" y=\"{}\">{}</text>",
        y - 15,
        left + 8,
        y,
        escape(text)
    );
}

/// XML's five special characters.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}
