//! A property's verdict, and a path told as numbered steps in domain words
//! and as a sequence chart: shared by the safety runner (`run`) and the
//! liveness reports (`lasso`).

use crate::fleet::{Action, FleetModel, Told};
use crate::world::World;
use serde::Serialize;

/// The verdict on one property.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum Status {
    /// A safety property held in every explored state.
    Pass,
    /// A safety property was violated; see the counterexample.
    Fail,
    /// A reachability property found an example.
    Found,
    /// A reachability property found no example.
    NotFound,
    /// The run stopped at the first failure before this was settled.
    Unsettled,
}

/// One property's result.
#[derive(Clone, Debug, Serialize)]
pub struct PropertyResult {
    pub name: String,
    /// `always` or `sometimes`.
    pub kind: String,
    pub status: Status,
    /// The rule this property stands for (`S1`…`S11`), if any.
    pub rule: Option<String>,
    /// Numbered steps of the shortest counterexample found (failures only).
    pub counterexample: Option<Vec<String>>,
    /// The same counterexample as a sequence chart (not in the JSON
    /// report: `--diagram` writes it).
    #[serde(skip)]
    pub diagram: Option<seqchart::Chart>,
}

/// Tell a path as numbered steps and chart rows, without a verdict; with
/// `loop_at`, mark where the repeating part of a lasso starts (before the
/// step of that index, 0-based in `path`). Returns the world it ends in.
pub fn tell(
    model: &FleetModel,
    path: Vec<(World, Option<Action>)>,
    loop_at: Option<(usize, &str)>,
) -> (Vec<String>, crate::diagram::Steps, Option<World>) {
    let mut steps = vec![model.start_words().to_string()];
    let mut chart = crate::diagram::Steps::new(model, &path);
    let mut last: Option<World> = None;
    for (index, (world, action)) in path.into_iter().enumerate() {
        if let Some((_, note)) = loop_at.filter(|(at, _)| *at == index) {
            steps.push(note.to_string());
            chart.loop_starts(note);
        }
        if let Some(action) = action {
            let mut told = Some(Vec::new());
            let next = model.transition(&world, action, &mut told);
            let told = told.unwrap_or_default();
            let said = model.describe(&world, &action);
            chart.step(index + 1, action, &said, &told);
            let mut text = format!("{}. {said}", index + 1);
            for line in &told {
                if let Told::Line { text: line, .. } = line {
                    text.push('\n');
                    text.push_str(line);
                }
            }
            steps.push(text);
            last = Some(next);
        } else {
            last = Some(world);
        }
    }
    (steps, chart, last)
}
