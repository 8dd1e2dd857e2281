//! Random inputs straight into the pure cores: operator commands, timeouts,
//! a network that delivers, drops, duplicates and reorders, agent restarts
//! and probes that answer right, wrong or not at all. Every rule is checked
//! at every step (see `common::Harness`); refused inputs are skipped.

mod common;

use common::{Harness, Stats, NODES};
use model::agent::AgentInput;
use model::controller::{Input, Resolution};
use model::{Digest, NodeId, OpId, Plan, ProbeVerdict, RolloutId, RouteObservation};
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, RngAlgorithm, TestRng, TestRunner};

/// A probe answer, resolved against the node when it is used.
#[derive(Clone, Copy, Debug)]
struct Answer {
    /// 0–1 pass, 2 wrong answer, 3 unreachable.
    verdict: u8,
    /// 0–2 what the node serves, 3 none, 4–6 v1, v2, v3.
    identity: u8,
    healthy: bool,
}

impl Answer {
    fn observe(self, serving: Option<Digest>) -> RouteObservation {
        RouteObservation {
            verdict: match self.verdict {
                0 | 1 => ProbeVerdict::Pass,
                2 => ProbeVerdict::WrongAnswer,
                _ => ProbeVerdict::Unreachable,
            },
            identity: match self.identity {
                0..=2 => serving,
                3 => None,
                n => Some(Digest::repeat(n - 3)),
            },
            process_healthy: self.healthy,
            process_uptime_ms: None,
            process_restarts: None,
            artifact: None,
        }
    }
}

fn answer() -> impl Strategy<Value = Answer> {
    (0u8..4, 0u8..7, any::<bool>()).prop_map(|(verdict, identity, healthy)| Answer {
        verdict,
        identity,
        healthy,
    })
}

#[derive(Clone, Debug)]
enum Action {
    Start(Plan),
    Pause(u8),
    Resume(u8),
    Approve(u8),
    /// `identity` here: 0–1 the op's release, 2–3 its baseline, else as
    /// for probes; the controller refuses resolutions the observation does
    /// not back.
    Resolve {
        op: u8,
        answer: Answer,
        resolution: u8,
    },
    Timeout(u8),
    /// An operator orders an op rolled back (refused unless a Commit is
    /// stored and the op has a baseline).
    RollBack(u8),
    DeliverToAgent(u8),
    DropToAgent(u8),
    DuplicateToAgent(u8),
    DeliverToCtrl(u8),
    DropToCtrl(u8),
    DuplicateToCtrl(u8),
    /// A late copy of any command ever sent arrives.
    LateToAgent(u8),
    /// A late copy of any agent message ever sent arrives.
    LateToCtrl(u8),
    /// The agent process restarts; `lost_app` when the app did not come
    /// back and nothing serves.
    AgentRestart {
        node: u8,
        lost_app: bool,
    },
    AgentConnected(u8),
    AgentRetry(u8),
    /// A node's next staging attempt fails (node, which way).
    StageRefused(u8, u8),
    /// Answer the probe a node's agent asked for.
    AgentProbe {
        node: u8,
        answer: Answer,
    },
    /// The controller probes a node's route itself.
    CtrlProbe {
        node: u8,
        answer: Answer,
    },
    /// Fault-free delivery for a while, so runs get somewhere.
    Drain,
}

fn plan() -> impl Strategy<Value = Plan> {
    let nodes: Vec<u32> = (0..NODES).collect();
    (
        Just(nodes).prop_shuffle(),
        3usize..=NODES as usize,
        1u8..=2,
        any::<bool>(),
        2u8..=3,
    )
        .prop_map(|(order, count, slots_max, gate, release)| Plan {
            release: Digest::repeat(release),
            canary: NodeId(order[0]),
            followers: order[1..count].iter().map(|n| NodeId(*n)).collect(),
            slots_max: u16::from(slots_max),
            approval_after_canary: gate,
        })
}

fn action() -> impl Strategy<Value = Action> {
    let node = 0u8..NODES as u8;
    prop_oneof![
        3 => plan().prop_map(Action::Start),
        1 => any::<u8>().prop_map(Action::Pause),
        1 => any::<u8>().prop_map(Action::Resume),
        2 => any::<u8>().prop_map(Action::Approve),
        2 => (any::<u8>(), answer(), 0u8..3)
            .prop_map(|(op, answer, resolution)| Action::Resolve { op, answer, resolution }),
        2 => any::<u8>().prop_map(Action::Timeout),
        1 => any::<u8>().prop_map(Action::RollBack),
        10 => any::<u8>().prop_map(Action::DeliverToAgent),
        2 => any::<u8>().prop_map(Action::DropToAgent),
        2 => any::<u8>().prop_map(Action::DuplicateToAgent),
        10 => any::<u8>().prop_map(Action::DeliverToCtrl),
        2 => any::<u8>().prop_map(Action::DropToCtrl),
        2 => any::<u8>().prop_map(Action::DuplicateToCtrl),
        2 => any::<u8>().prop_map(Action::LateToAgent),
        2 => any::<u8>().prop_map(Action::LateToCtrl),
        2 => (node.clone(), any::<bool>())
            .prop_map(|(node, lost_app)| Action::AgentRestart { node, lost_app }),
        1 => node.clone().prop_map(Action::AgentConnected),
        2 => node.clone().prop_map(Action::AgentRetry),
        1 => (node.clone(), 0..3u8).prop_map(|(node, why)| Action::StageRefused(node, why)),
        6 => (node.clone(), answer()).prop_map(|(node, answer)| Action::AgentProbe { node, answer }),
        3 => (node, answer()).prop_map(|(node, answer)| Action::CtrlProbe { node, answer }),
        4 => Just(Action::Drain),
    ]
}

/// `selector` picks one of `len` things, or `None` when there are none.
fn pick(selector: u8, len: usize) -> Option<usize> {
    (len > 0).then(|| selector as usize % len)
}

/// A rollout id: half the time the latest (the one operators act on),
/// otherwise any, including the next, unknown one.
fn rollout(fleet: &Harness, selector: u8) -> RolloutId {
    let count = fleet.ctrl.rollouts.len();
    if selector < 128 && count > 0 {
        return RolloutId(count as u32 - 1);
    }
    RolloutId((selector as usize % (count + 1)) as u32)
}

fn op(fleet: &Harness, selector: u8) -> OpId {
    OpId((selector as usize % (fleet.ctrl.ops.len() + 1)) as u32)
}

fn run(fleet: &mut Harness, action: &Action) -> Result<(), String> {
    match *action {
        Action::Start(ref plan) => fleet.controller(Input::StartRollout { plan: plan.clone() }),
        Action::Pause(r) => {
            let rollout = rollout(fleet, r);
            fleet.controller(Input::Pause { rollout })
        }
        Action::Resume(r) => {
            let rollout = rollout(fleet, r);
            fleet.controller(Input::Resume { rollout })
        }
        Action::Approve(r) => {
            let rollout = rollout(fleet, r);
            fleet.controller(Input::Approve { rollout })
        }
        Action::Resolve {
            op: o,
            answer,
            resolution,
        } => {
            let op = op(fleet, o);
            let (release, baseline, serving) = match fleet.ctrl.op(op) {
                Some(o) => (
                    Some(o.release),
                    o.baseline,
                    fleet.agents[o.node.0 as usize].serving,
                ),
                None => (None, None, None),
            };
            let mut observation = answer.observe(serving);
            observation.identity = match answer.identity {
                0 | 1 => release,
                2 | 3 => baseline,
                _ => observation.identity,
            };
            let resolution = match resolution {
                0 => Resolution::ConfirmNew,
                1 => Resolution::ConfirmBaseline,
                _ => Resolution::Abandon,
            };
            fleet.controller(Input::Resolve {
                op,
                observation,
                resolution,
            })
        }
        Action::Timeout(o) => {
            let op = op(fleet, o);
            fleet.controller(Input::Timeout { op })
        }
        Action::RollBack(o) => {
            let op = op(fleet, o);
            fleet.controller(Input::RollBack { op })
        }
        Action::DeliverToAgent(i) => match pick(i, fleet.to_agents.len()) {
            Some(i) => fleet.deliver_to_agent(i),
            None => Ok(()),
        },
        Action::DropToAgent(i) => {
            if let Some(i) = pick(i, fleet.to_agents.len()) {
                fleet.to_agents.remove(i);
            }
            Ok(())
        }
        Action::DuplicateToAgent(i) => {
            if let Some(i) = pick(i, fleet.to_agents.len()) {
                fleet.to_agents.push(fleet.to_agents[i]);
            }
            Ok(())
        }
        Action::DeliverToCtrl(i) => match pick(i, fleet.to_ctrl.len()) {
            Some(i) => fleet.deliver_to_ctrl(i),
            None => Ok(()),
        },
        Action::DropToCtrl(i) => {
            if let Some(i) = pick(i, fleet.to_ctrl.len()) {
                fleet.to_ctrl.remove(i);
            }
            Ok(())
        }
        Action::DuplicateToCtrl(i) => {
            if let Some(i) = pick(i, fleet.to_ctrl.len()) {
                fleet.to_ctrl.push(fleet.to_ctrl[i]);
            }
            Ok(())
        }
        Action::LateToAgent(i) => match pick(i, fleet.sent_to_agents.len()) {
            Some(i) => {
                let (node, msg) = fleet.sent_to_agents[i];
                fleet.agent(node, AgentInput::Command(msg))
            }
            None => Ok(()),
        },
        Action::LateToCtrl(i) => match pick(i, fleet.sent_to_ctrl.len()) {
            Some(i) => {
                let (node, msg) = fleet.sent_to_ctrl[i];
                fleet.controller(Input::FromAgent { node, msg })
            }
            None => Ok(()),
        },
        Action::AgentRestart { node, lost_app } => {
            let index = node as usize;
            // Memory is gone, the journal survives; the agent looks at what
            // really serves.
            fleet.probe_due[index] = false;
            let serving = if lost_app {
                None
            } else {
                fleet.agents[index].serving
            };
            fleet.agent(NodeId(node as u32), AgentInput::Restarted { serving })
        }
        Action::AgentConnected(node) => fleet.agent(NodeId(node as u32), AgentInput::Connected),
        Action::AgentRetry(node) => fleet.agent(NodeId(node as u32), AgentInput::Retry),
        Action::StageRefused(node, why) => {
            use model::recovery::StageFailure;
            let failure = match why {
                0 => StageFailure::Permanent,
                1 => StageFailure::Transient {
                    bundle_missing: true,
                },
                _ => StageFailure::MissingEvidence,
            };
            fleet.stage_failure[node as usize] = Some(failure);
            Ok(())
        }
        Action::AgentProbe { node, answer } => {
            let index = node as usize;
            if !fleet.probe_due[index] {
                return Ok(());
            }
            let observation = answer.observe(fleet.agents[index].serving);
            fleet.agent(NodeId(node as u32), AgentInput::Probed(observation))
        }
        Action::CtrlProbe { node, answer } => {
            let observation = answer.observe(fleet.agents[node as usize].serving);
            fleet.controller(Input::RouteProbed {
                node: NodeId(node as u32),
                observation,
            })
        }
        Action::Drain => fleet.drain(40),
    }
}

fn run_all((first, actions): &(Plan, Vec<Action>)) -> Result<Stats, String> {
    let mut fleet = Harness::new()?;
    fleet.controller(Input::StartRollout {
        plan: first.clone(),
    })?;
    for (i, action) in actions.iter().enumerate() {
        run(&mut fleet, action).map_err(|e| format!("action #{i} {action:?}: {e}"))?;
    }
    fleet.drain(400)?;
    fleet.check_log()?;
    Ok(fleet.stats)
}

/// A first rollout (runs that start one late explore little), then up to
/// 60 random actions.
fn actions() -> impl Strategy<Value = (Plan, Vec<Action>)> {
    (plan(), prop::collection::vec(action(), 0..=60))
}

proptest! {
    // 256 cases unless PROPTEST_CASES says otherwise.
    #![proptest_config(Config {
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..Config::default()
    })]

    /// Every rule holds at every step of every random run.
    #[test]
    fn every_rule_holds_under_random_inputs(actions in actions()) {
        run_all(&actions).map_err(TestCaseError::fail)?;
    }
}

/// The generator is only as good as the places it reaches. With a fixed
/// seed, a batch of runs must reach every outcome and fault handling the
/// rules are about; otherwise the property above proves little.
#[test]
fn random_runs_reach_the_interesting_places() {
    let config = Config {
        cases: 128,
        failure_persistence: None,
        ..Config::default()
    };
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]);
    let mut runner = TestRunner::new_with_rng(config, rng);
    let total = std::cell::RefCell::new(Stats::default());
    runner
        .run(&actions(), |actions| {
            let s = run_all(&actions).map_err(TestCaseError::fail)?;
            let mut t = total.borrow_mut();
            t.events += s.events;
            t.agent_events += s.agent_events;
            t.sends += s.sends;
            t.refusals += s.refusals;
            t.follower_grants += s.follower_grants;
            t.verified += s.verified;
            t.rolled_back += s.rolled_back;
            t.not_applied += s.not_applied;
            t.resolved += s.resolved;
            t.unknown += s.unknown;
            t.superseded += s.superseded;
            t.completed += s.completed;
            t.approvals += s.approvals;
            t.late_reports += s.late_reports;
            t.stale_rejections += s.stale_rejections;
            t.restore_owed += s.restore_owed;
            Ok(())
        })
        .unwrap();
    let t = total.into_inner();
    println!("{t:#?}");
    for (what, count) in [
        ("follower grants", t.follower_grants),
        ("verified", t.verified),
        ("rolled back", t.rolled_back),
        ("not applied", t.not_applied),
        ("resolved", t.resolved),
        ("unknown", t.unknown),
        ("superseded", t.superseded),
        ("completed", t.completed),
        ("approvals", t.approvals),
        ("late reports", t.late_reports),
        ("stale rejections", t.stale_rejections),
        ("restores owed mid-batch", t.restore_owed),
    ] {
        assert!(count > 0, "no run reached: {what}\n{t:#?}");
    }
}
