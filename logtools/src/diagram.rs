//! `fleetweft log show --diagram`: a real controller log drawn as the
//! checker draws a counterexample (the `seqchart` crate), so a scenario's
//! run and a counterexample read the same way.
//!
//! A log holds what the controller recorded, not the messages themselves,
//! so each event is drawn as its cause (an operator's request, a node's
//! message, the controller's probe of a route), the append to the log
//! (the event in its one wording, with its sequence), and the message it
//! releases to a node (an apply, a commit reply, a restore). Events the
//! controller decides on its own (a deadline, a settlement, a rollout's
//! end) are appends only.
//!
//! Bounded: at most [`DIAGRAM_EVENTS_MAX`] events (a chart of more is not
//! read; `log show --from SEQ --diagram` picks the window) and
//! [`DIAGRAM_NODE_LANES_MAX`] node lanes (the rest share one lane).

use model::controller::{Event, PauseReason};
use model::{NodeId, OpId};
use seqchart::{Chart, Fate, Lane, Tone};
use std::collections::HashMap;

/// Events one chart draws; later ones are counted in a closing note.
pub const DIAGRAM_EVENTS_MAX: usize = 400;
/// Nodes with a lane of their own; later nodes share the lane
/// [`OTHER_NODES_LANE`].
pub const DIAGRAM_NODE_LANES_MAX: usize = 12;
/// The lane of the nodes beyond [`DIAGRAM_NODE_LANES_MAX`] and of ops
/// granted before the chart's window.
pub const OTHER_NODES_LANE: &str = "other nodes";

/// Where an event came from.
enum Cause {
    Operator(&'static str),
    Node(NodeId, &'static str),
    /// An op's node sent this (the node looked up from the op's grant).
    OpNode(OpId, &'static str),
    /// The controller probed the route of the op's node.
    Probe(OpId),
    /// The controller itself (a deadline, a settlement, a count).
    Controller,
}

/// A controller log's chart under construction.
pub struct LogChart {
    chart: Chart,
    operator: Lane,
    controller: Lane,
    log: Lane,
    /// Node lanes given so far, by node.
    nodes: HashMap<NodeId, Lane>,
    /// Names from `NodeEnrolled` events inside the window.
    names: HashMap<NodeId, String>,
    /// The node of each op granted inside the window.
    op_nodes: HashMap<OpId, NodeId>,
    drawn: usize,
    left_out: u64,
    last_sequence: Option<u64>,
}

impl Default for LogChart {
    fn default() -> Self {
        LogChart::new()
    }
}

impl LogChart {
    /// An empty chart with the operator, controller and log lanes.
    pub fn new() -> LogChart {
        let mut chart = Chart::new();
        let operator = chart.lane("operator");
        let controller = chart.lane("controller");
        let log = chart.lane("log");
        chart.note(
            log,
            "every event below is durable in the log (its sequence first)",
            Tone::Durable,
        );
        LogChart {
            chart,
            operator,
            controller,
            log,
            nodes: HashMap::new(),
            names: HashMap::new(),
            op_nodes: HashMap::new(),
            drawn: 0,
            left_out: 0,
            last_sequence: None,
        }
    }

    /// Events drawn so far.
    pub fn drawn(&self) -> usize {
        self.drawn
    }

    /// Draws the event at `sequence` (or counts it once the chart is full).
    pub fn event(&mut self, sequence: u64, event: &Event) {
        if self.drawn >= DIAGRAM_EVENTS_MAX {
            self.left_out += 1;
            return;
        }
        self.drawn += 1;
        self.last_sequence = Some(sequence);
        self.remember(event);
        self.cause(event);
        let text = format!("{sequence}  {event}");
        self.chart
            .arrow(self.controller, self.log, text, Fate::Delivered);
        self.effect(event);
    }

    /// Gives `node` its lane now, named `name`, and draws `op`'s messages
    /// on it: for a chart of events picked from the log (one op's), which
    /// may hold neither the node's `NodeEnrolled` nor the op's grant.
    pub fn op_on(&mut self, op: OpId, node: NodeId, name: &str) {
        self.names.insert(node, name.to_string());
        self.op_nodes.insert(op, node);
        self.node_lane(Some(node));
    }

    /// The finished chart, closing with `text` instead of the log's end:
    /// for a chart of events picked from the log, whose last event is not
    /// the log's.
    pub fn finish_with(mut self, text: String) -> Chart {
        self.chart.note_all(text, Tone::Plain);
        self.chart
    }

    /// The finished chart: a closing note says what was left out.
    pub fn finish(self) -> Chart {
        let text = match (self.left_out, self.last_sequence) {
            (0, _) => format!("end of the log: {} event(s) drawn", self.drawn),
            (n, Some(last)) => format!(
                "{} event(s) drawn; {n} more after sequence {last} (log show --from {} --diagram)",
                self.drawn,
                last + 1
            ),
            (n, None) => format!("{n} event(s) not drawn"),
        };
        self.finish_with(text)
    }

    fn remember(&mut self, event: &Event) {
        match event {
            Event::NodeEnrolled { node, name, .. } => {
                self.names.insert(*node, name.clone());
            }
            Event::OpGranted { op, node, .. } => {
                self.op_nodes.insert(*op, *node);
            }
            _ => {}
        }
    }

    /// The lane of `node`, given on first use while lanes remain.
    fn node_lane(&mut self, node: Option<NodeId>) -> Lane {
        let Some(node) = node else {
            return self.chart.lane(OTHER_NODES_LANE);
        };
        if let Some(lane) = self.nodes.get(&node) {
            return *lane;
        }
        if self.nodes.len() >= DIAGRAM_NODE_LANES_MAX {
            return self.chart.lane(OTHER_NODES_LANE);
        }
        let id = node.to_string();
        let label = match self.names.get(&node) {
            Some(name) if *name != id => format!("{name} ({id})"),
            _ => id,
        };
        let lane = self.chart.lane(&label);
        self.nodes.insert(node, lane);
        lane
    }

    fn cause(&mut self, event: &Event) {
        let (from, text) = match cause_of(event) {
            Cause::Controller => return,
            Cause::Operator(what) => (self.operator, what),
            Cause::Node(node, what) => (self.node_lane(Some(node)), what),
            Cause::OpNode(op, what) => {
                let node = self.op_nodes.get(&op).copied();
                (self.node_lane(node), what)
            }
            Cause::Probe(op) => {
                let node = self.op_nodes.get(&op).copied();
                let lane = self.node_lane(node);
                let text = format!("probe of {op}'s route");
                self.chart
                    .arrow(self.controller, lane, text, Fate::Delivered);
                (lane, "the route answers")
            }
        };
        self.chart
            .arrow(from, self.controller, text, Fate::Delivered);
    }

    /// The message an event releases to a node, sent once it is durable.
    fn effect(&mut self, event: &Event) {
        let (op, text) = match event {
            Event::OpGranted { op, release, .. } => (*op, format!("apply {op} ({release})")),
            Event::CommitDecided { op, decision } | Event::CommitReplayed { op, decision } => {
                (*op, format!("commit reply {decision:?} for {op}"))
            }
            Event::RestoreRequested { op } => (*op, format!("restore for {op}")),
            _ => return,
        };
        let node = self.op_nodes.get(&op).copied();
        let lane = self.node_lane(node);
        self.chart
            .arrow(self.controller, lane, text, Fate::Delivered);
    }
}

/// Where each kind of event comes from.
fn cause_of(event: &Event) -> Cause {
    match event {
        Event::RolloutStarted { .. } => Cause::Operator("start a rollout"),
        Event::RolloutPaused {
            reason: PauseReason::Operator,
            ..
        } => Cause::Operator("pause"),
        Event::RolloutResumed { .. } => Cause::Operator("resume"),
        Event::RolloutApproved { .. } => Cause::Operator("approve"),
        Event::OperatorObserved { .. } => Cause::Operator("observe and resolve"),
        Event::OpClaimed { .. } => Cause::Operator("claim"),
        Event::RollBackOrdered { .. } => Cause::Operator("roll back"),
        Event::NodeReleased { .. } => Cause::Operator("release from quarantine"),
        Event::CertRevoked { .. } => Cause::Operator("revoke a certificate"),
        Event::NodeEnrolled { .. } => Cause::Operator("enroll"),
        Event::NodeLabeled { .. } => Cause::Operator("label"),
        Event::NodeRetired { .. } => Cause::Operator("retire"),
        Event::RolloutPolicySet { .. } => Cause::Operator("set the policy"),
        Event::RolloutArchesSet { .. } | Event::RolloutConfigured { .. } => {
            Cause::Operator("start")
        }
        Event::ConfigSet { .. } => Cause::Operator("set a configuration"),
        Event::Acted { .. } => Cause::Operator("act"),
        Event::OperatorAdded { .. } => Cause::Operator("add an operator"),
        Event::CredentialRotated { .. } => Cause::Operator("rotate a credential"),
        Event::OperatorRevoked { .. } => Cause::Operator("revoke an operator"),
        Event::RolloutFollowersAdded { .. } => Cause::Operator("add followers"),
        Event::NodeHello { node, .. } => Cause::Node(*node, "hello"),
        Event::NodePlatform { node, .. } => Cause::Node(*node, "platform"),
        Event::LateReportIgnored { node, .. } => Cause::Node(*node, "late report"),
        Event::StaleCommandRejected { node, .. } => Cause::Node(*node, "stale-command rejection"),
        Event::ForeignMessageIgnored { node, .. } => {
            Cause::Node(*node, "message for another node's op")
        }
        Event::ForgottenOpIgnored { node, .. } => Cause::Node(*node, "message for a forgotten op"),
        Event::CommitDecided { op, .. } => Cause::OpNode(*op, "commit request"),
        Event::CommitReplayed { op, .. } => Cause::OpNode(*op, "commit request again"),
        Event::ReportRecorded { op, .. } => Cause::OpNode(*op, "report"),
        Event::ProbeRecorded { op, .. } => Cause::Probe(*op),
        Event::RolloutSuperseded { .. }
        | Event::RolloutPaused { .. }
        | Event::RolloutCompleted { .. }
        | Event::OpUnknown { .. }
        | Event::OpSettled { .. }
        | Event::NodeObserved { .. }
        | Event::RolloutEnded { .. }
        | Event::NodeQuarantined { .. }
        | Event::OpGranted { .. }
        | Event::RestoreRequested { .. } => Cause::Controller,
    }
}
