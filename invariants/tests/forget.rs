//! A controller that runs for years keeps a state bounded by its fleet:
//! once more than `ROLLOUTS_REMEMBERED` rollouts were archived after one,
//! that rollout's archived ops are forgotten (they stay whole in the log).
//! Every rule is checked at every step (the checked fleet), the log still
//! rebuilds the same state, a message about a forgotten op is acknowledged
//! and never decided again, and the state stops growing with history.

mod common;

use common::Harness;
use invariants::{check_event, check_history, check_state, Rule};
use model::controller::{Event, Input, OpPhase, Outcome, RolloutStatus, ROLLOUTS_REMEMBERED};
use model::{Decision, Digest, NodeId, OpId, Plan, RolloutId, ToAgent, ToController};

const V1: Digest = common::V1;
const V2: Digest = Digest::repeat(2);
const NODES: u32 = 4;

fn plan(release: Digest) -> Plan {
    Plan {
        release,
        canary: NodeId(0),
        followers: (1..NODES).map(NodeId).collect(),
        slots_max: 2,
        approval_after_canary: false,
    }
}

/// `count` more rollouts, alternating releases, each driven to completion.
fn roll(fleet: &mut Harness, count: usize) {
    for _ in 0..count {
        let release = if fleet.ctrl.rollouts.len().is_multiple_of(2) {
            V2
        } else {
            V1
        };
        fleet
            .controller(Input::StartRollout {
                plan: plan(release),
            })
            .unwrap();
        fleet.drain(2_000).unwrap();
        let last = fleet.ctrl.rollouts.last().unwrap();
        assert_eq!(last.status, RolloutStatus::Completed, "{:?}", last.id);
    }
}

/// Hot, archived and forgotten ops, and the rollouts still remembered.
fn sizes(fleet: &Harness) -> (usize, usize, u64, usize) {
    let s = &fleet.ctrl;
    (
        s.ops.len(),
        s.archive.len(),
        s.forgotten_ops,
        s.remembered.len(),
    )
}

#[test]
fn old_rollouts_are_forgotten_and_the_log_still_rebuilds_the_state() {
    let mut fleet = Harness::new().unwrap();
    roll(&mut fleet, ROLLOUTS_REMEMBERED);
    let (_, archived, forgotten, remembered) = sizes(&fleet);
    assert_eq!(forgotten, 0, "nothing forgotten while all are remembered");
    assert!(archived > 0);
    // Each completed rollout was archived as it ended.
    assert_eq!(remembered, ROLLOUTS_REMEMBERED);

    roll(&mut fleet, 3);
    let s = &fleet.ctrl;
    assert!(s.rollouts[0].forgotten && s.rollouts[1].forgotten);
    assert!(s.forgotten_ops > 0, "r0's settled ops were forgotten");
    assert!(
        !s.archive.contains_key(&OpId(0)),
        "r0's canary op left the archive"
    );
    assert!(s.op_forgotten(OpId(0)));
    assert_eq!(s.remembered.len(), ROLLOUTS_REMEMBERED);
    assert_eq!(
        s.ops.len() as u64 + s.archive.len() as u64 + s.forgotten_ops,
        u64::from(s.next_op.0)
    );
    check_state(s).unwrap();
    fleet.check_log().unwrap();
}

#[test]
fn the_state_stops_growing_with_history() {
    let mut fleet = Harness::new().unwrap();
    roll(&mut fleet, ROLLOUTS_REMEMBERED + 2);
    let before = sizes(&fleet);
    roll(&mut fleet, 2 * ROLLOUTS_REMEMBERED);
    let after = sizes(&fleet);
    // Hot ops (each node's latest), archived ops (the remembered rollouts')
    // and remembered rollouts are the same; only the forgotten count grew.
    assert_eq!((before.0, before.1, before.3), (after.0, after.1, after.3));
    assert_eq!(
        after.2 - before.2,
        (2 * ROLLOUTS_REMEMBERED) as u64 * u64::from(NODES)
    );
    check_state(&fleet.ctrl).unwrap();
    fleet.check_log().unwrap();
}

#[test]
fn a_message_about_a_forgotten_op_is_acknowledged_and_never_decided() {
    let mut fleet = Harness::new().unwrap();
    roll(&mut fleet, ROLLOUTS_REMEMBERED + 2);
    assert!(fleet.ctrl.op_forgotten(OpId(1)));
    let owner = NodeId(1);
    let before = fleet.log.len();
    fleet.sent_to_agents.clear();
    fleet
        .controller(Input::FromAgent {
            node: owner,
            msg: ToController::CommitRequest { op: OpId(1) },
        })
        .unwrap();
    let logged = &fleet.log[before..];
    assert_eq!(
        logged,
        [Event::ForgottenOpIgnored {
            node: owner,
            op: OpId(1)
        }]
    );
    assert!(
        fleet
            .sent_to_agents
            .iter()
            .all(|(_, m)| !matches!(m, ToAgent::CommitReply { .. })),
        "no decision is sent for a forgotten op"
    );
    assert!(fleet
        .sent_to_agents
        .iter()
        .any(|(to, m)| *to == owner && matches!(m, ToAgent::Settled { op: OpId(1), .. })));
    // An operator cannot act on it either: it settled.
    let refused = model::controller::step(
        &fleet.ctrl,
        &Input::Claim {
            op: OpId(1),
            owner: "ops".into(),
            review_by: "soon".into(),
        },
    );
    assert!(refused.is_err());
    fleet.check_log().unwrap();
}

#[test]
fn deciding_a_forgotten_op_again_is_caught() {
    let mut fleet = Harness::new().unwrap();
    roll(&mut fleet, ROLLOUTS_REMEMBERED + 2);
    // What a controller that forgot and then decided anew would log (S6: a
    // stored decision is replayed, never re-decided).
    let decided = Event::CommitDecided {
        op: OpId(1),
        decision: Decision::Abort,
    };
    let violation = check_event(&fleet.ctrl, &decided).unwrap_err();
    assert_eq!(violation.rule, Rule::S6, "{violation}");
    assert!(violation.to_string().contains("forgot"), "{violation}");
    let mut log = fleet.log.clone();
    log.push(decided);
    assert!(check_history(&log).is_err());
    // Logging it as foreign would hide that it was the node's own.
    let foreign = Event::ForeignMessageIgnored {
        node: NodeId(1),
        op: OpId(1),
        owner: None,
    };
    assert_eq!(
        check_event(&fleet.ctrl, &foreign).unwrap_err().rule,
        Rule::S8
    );
    // And a hot op is never "forgotten".
    let hot = fleet.ctrl.nodes[&NodeId(1)].last_op.unwrap();
    let wrong = Event::ForgottenOpIgnored {
        node: NodeId(1),
        op: hot,
    };
    assert!(check_event(&fleet.ctrl, &wrong).is_err());
}

#[test]
fn each_nodes_latest_op_stays_hot_in_a_forgotten_rollout() {
    // Node 3 is left out of later rollouts, so its op in r0 stays its
    // latest while r0 is forgotten: a proof still reads it whole.
    let mut fleet = Harness::new().unwrap();
    roll(&mut fleet, 1);
    let op3 = fleet.ctrl.nodes[&NodeId(3)].last_op.unwrap();
    for i in 0..ROLLOUTS_REMEMBERED + 1 {
        let release = if i % 2 == 0 { V1 } else { V2 };
        let mut p = plan(release);
        p.followers.retain(|n| *n != NodeId(3));
        fleet.controller(Input::StartRollout { plan: p }).unwrap();
        fleet.drain(2_000).unwrap();
    }
    let s = &fleet.ctrl;
    let r0 = s.rollout(RolloutId(0)).unwrap();
    assert!(r0.forgotten);
    assert_eq!(r0.ops.iter().copied().collect::<Vec<_>>(), vec![op3]);
    assert_eq!(
        s.op(op3).map(|o| o.phase),
        Some(OpPhase::Settled(Outcome::Verified))
    );
    check_state(s).unwrap();
    fleet.check_log().unwrap();
    // Once node 3 gets newer work, its r0 op is forgotten too.
    let mut fleet = fleet;
    fleet
        .controller(Input::StartRollout { plan: plan(V1) })
        .unwrap();
    fleet.drain(2_000).unwrap();
    assert!(fleet.ctrl.op_forgotten(op3));
    assert!(fleet.ctrl.rollout(RolloutId(0)).unwrap().ops.is_empty());
    check_state(&fleet.ctrl).unwrap();
    fleet.check_log().unwrap();
}
