//! A counterexample as a message sequence chart (issue #27 item 1): one
//! lane for the operator, the controller, its log and the network, then
//! each node's agent and, where the path touches it, the node's app.
//! Sends go onto the network lane and deliveries come off it, so a message
//! in flight, lost or duplicated reads as such; appends go to the log lane
//! and the moment they become durable is marked there; crashes and
//! restarts are notes on their lane; the broken rule closes the chart.

use crate::fleet::{Action, AppFault, FleetModel, Place, Told};
use crate::world::{Msg, World};
use model::NodeId;
use seqchart::{Chart, Fate, Lane, Tone};

/// The lanes of one counterexample's chart.
struct Lanes {
    operator: Lane,
    controller: Lane,
    log: Lane,
    network: Lane,
    /// Per node: its agent's lane, and its app's if the path touches it.
    nodes: Vec<(Lane, Option<Lane>)>,
}

impl Lanes {
    fn new(chart: &mut Chart, model: &FleetModel, path: &[(World, Option<Action>)]) -> Lanes {
        let operator = chart.lane("operator");
        let controller = chart.lane("controller");
        let log = chart.lane("log");
        let network = chart.lane("network");
        let apps: Vec<NodeId> = path
            .iter()
            .filter_map(|(_, action)| action.and_then(app_touched))
            .collect();
        let nodes = model
            .nodes()
            .map(|node| {
                let agent = chart.lane(&node.to_string());
                let app = apps
                    .contains(&node)
                    .then(|| chart.lane(&format!("{node}'s app")));
                (agent, app)
            })
            .collect();
        Lanes {
            operator,
            controller,
            log,
            network,
            nodes,
        }
    }

    fn node(&self, node: NodeId) -> Lane {
        self.nodes[node.0 as usize].0
    }

    /// The node's app lane (its agent's when the app has none).
    fn app(&self, node: NodeId) -> Lane {
        let (agent, app) = self.nodes[node.0 as usize];
        app.unwrap_or(agent)
    }

    /// Where a message ends up.
    fn receiver(&self, msg: &Msg) -> Lane {
        match msg {
            Msg::ToAgent(node, _) => self.node(*node),
            Msg::ToController(..) => self.controller,
        }
    }
}

/// The node whose app an action touches, if any.
fn app_touched(action: Action) -> Option<NodeId> {
    match action {
        Action::ProbeRoute(node)
        | Action::SwapOld(node)
        | Action::ForeignRoute(node)
        | Action::OldConfig(node) => Some(node),
        Action::Deliver {
            msg: Msg::ToAgent(node, _),
            fault: Some(AppFault::WrongAnswer | AppFault::RestoredDies),
        } => Some(node),
        _ => None,
    }
}

/// Builds the chart of a counterexample step by step: [`Steps::step`] for
/// each action with what the transition told, [`Steps::broken`] at the end.
pub struct Steps {
    chart: Chart,
    lanes: Lanes,
    /// Events appended since the last durable mark.
    appended: usize,
}

impl Steps {
    /// A chart with the lanes `path` needs and the starting state.
    pub fn new(model: &FleetModel, path: &[(World, Option<Action>)]) -> Steps {
        let mut chart = Chart::new();
        let lanes = Lanes::new(&mut chart, model, path);
        chart.note_all(model.start_words(), Tone::Plain);
        Steps {
            chart,
            lanes,
            appended: 0,
        }
    }

    /// Step `number`: `action` (told as `said`) and what it made happen.
    pub fn step(&mut self, number: usize, action: Action, said: &str, told: &[Told]) {
        let text = format!("{number}. {said}");
        self.action(action, text);
        for told in told {
            self.told(told);
        }
    }

    /// Where the repeating part of a lasso (a liveness counterexample)
    /// starts: a note across every lane.
    pub fn loop_starts(&mut self, text: &str) {
        self.chart.note_all(text, Tone::Fault);
    }

    /// The rule broken at the end of the path.
    pub fn broken(mut self, text: &str) -> Chart {
        self.chart.note_all(text, Tone::Broken);
        self.chart
    }

    fn action(&mut self, action: Action, text: String) {
        let l = &self.lanes;
        let c = &mut self.chart;
        match action {
            Action::Deliver { msg, .. } | Action::DeliverToDeposed(msg) => {
                c.arrow(l.network, l.receiver(&msg), text, Fate::Delivered)
            }
            Action::Duplicate(msg) => c.arrow(l.network, l.receiver(&msg), text, Fate::Duplicated),
            Action::Drop(msg) => c.arrow(l.network, l.receiver(&msg), text, Fate::Lost),
            Action::Retry(node) | Action::FetchChunk(node) => {
                c.note(l.node(node), text, Tone::Plain)
            }
            Action::RetryFailing(node, _)
            | Action::CrashAgent(node)
            | Action::CrashMidFetch(node, _) => c.note(l.node(node), text, Tone::Fault),
            Action::Partition(node) => c.note_span(l.network, l.node(node), text, Tone::Fault),
            Action::Heal(node) => c.note_span(l.network, l.node(node), text, Tone::Plain),
            Action::Timeout(_) => c.note(l.controller, text, Tone::Plain),
            Action::CrashController | Action::Failover | Action::TornSnapshot => {
                c.note(l.controller, text, Tone::Fault)
            }
            Action::Flush | Action::Snapshot | Action::Archive => {
                c.arrow(l.controller, l.log, text, Fate::Delivered)
            }
            Action::ProbeRoute(node) => c.arrow(l.controller, l.app(node), text, Fate::Delivered),
            Action::SwapOld(node) | Action::ForeignRoute(node) | Action::OldConfig(node) => {
                c.note(l.app(node), text, Tone::Fault)
            }
            Action::Pause(_)
            | Action::Resume(_)
            | Action::Approve(_)
            | Action::Resolve(_)
            | Action::RollBack(_)
            | Action::Start
            | Action::StartNarrow
            | Action::Supersede
            | Action::Prove(_)
            | Action::Observe(_)
            | Action::Retire(_)
            | Action::SetConfig
            | Action::ViewerApproves(_)
            | Action::ReleaseNode(_) => c.arrow(l.operator, l.controller, text, Fate::Delivered),
            Action::IdentityConflict(node) => c.note(l.node(node), text, Tone::Fault),
        }
    }

    fn told(&mut self, told: &Told) {
        let l = &self.lanes;
        let c = &mut self.chart;
        let (at, text) = match told {
            Told::Durable => {
                if self.appended > 0 {
                    let events = self.appended;
                    let text = format!("durable: {events} event(s) appended and flushed");
                    c.note(l.log, text, Tone::Durable);
                }
                self.appended = 0;
                return;
            }
            Told::Sent { from, text } => {
                c.arrow(l.node(*from), l.network, text.as_str(), Fate::Delivered);
                return;
            }
            Told::Line { at, text } => (*at, text.trim()),
        };
        match at {
            Place::Appends => {
                self.appended += 1;
                c.arrow(l.controller, l.log, text, Fate::Delivered)
            }
            Place::Sends(_) => c.arrow(l.controller, l.network, text, Fate::Delivered),
            Place::Controller => c.note(l.controller, text, Tone::Plain),
            Place::ControllerFault => c.note(l.controller, text, Tone::Fault),
            Place::Node(node) => c.note(l.node(node), text, Tone::Plain),
            Place::NodeFault(node) => c.note(l.node(node), text, Tone::Fault),
            Place::Operator => c.note(l.operator, text, Tone::Plain),
            // The duplicate is marked on the delivery's arrow.
            Place::Network => {}
        }
    }
}
