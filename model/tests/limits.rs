//! Every named limit of `model` at the limit and just past it: a limit
//! that is off by one either way fails here. (`OBSERVATION_INTERVAL_MIN_MS`
//! is tested at and just before the interval in `observe.rs`;
//! `PROCESS_RESTARTS_MAX` is read by the proof crate only, and tested there.)

use model::controller::{
    apply, referents_exist, step, ControllerState, Event, Input, MissingReferent, Refusal,
    CLAIM_TEXT_MAX, OP_EVIDENCE_MAX,
};
use model::plan::{PlanError, FOLLOWERS_MAX, FOLLOWERS_PER_EVENT_MAX, NODES_MAX, SLOTS_MAX_LIMIT};
use model::{
    Digest, Generation, NodeId, OpId, Plan, ProbeVerdict, ReportKind, RouteObservation,
    ToController,
};

use testkit::feed;

const V1: Digest = Digest::repeat(1);
const V2: Digest = Digest::repeat(2);
const OP: OpId = OpId(0);

fn plan(followers: usize, slots_max: u16) -> Plan {
    Plan {
        release: V2,
        canary: NodeId(0),
        followers: (1..=followers as u32).map(NodeId).collect(),
        slots_max,
        approval_after_canary: false,
    }
}

/// A one-node rollout of v2 whose canary op0 is granted.
fn granted() -> ControllerState {
    let mut state = ControllerState::default();
    let hello = ToController::Hello {
        serving: Some(V1),
        generation: Generation(0),
    };
    feed(
        &mut state,
        Input::FromAgent {
            node: NodeId(0),
            msg: hello,
        },
    )
    .expect("hello");
    feed(&mut state, Input::StartRollout { plan: plan(0, 1) }).expect("start");
    state
}

fn claim(owner: &str, review_by: &str) -> Input {
    Input::Claim {
        op: OP,
        owner: owner.to_string(),
        review_by: review_by.to_string(),
    }
}

#[test]
fn a_claim_text_of_exactly_claim_text_max_characters_is_accepted() {
    // Counted in characters, not bytes: 'é' is two bytes.
    let at_limit = "é".repeat(CLAIM_TEXT_MAX);
    assert!(at_limit.len() > CLAIM_TEXT_MAX);
    for input in [claim(&at_limit, "t"), claim("alice", &at_limit)] {
        let mut state = granted();
        let events = feed(&mut state, input).expect("a text at the limit is accepted");
        assert!(matches!(events.as_slice(), [Event::OpClaimed { .. }]));
    }
}

#[test]
fn a_claim_text_one_character_past_claim_text_max_is_refused_naming_the_field() {
    let past = "x".repeat(CLAIM_TEXT_MAX + 1);
    for (input, field) in [
        (claim(&past, "t"), "owner"),
        (claim("alice", &past), "review_by"),
    ] {
        let mut state = granted();
        let before = state.clone();
        match feed(&mut state, input) {
            Err(Refusal::InvalidClaim(why)) => {
                assert!(why.starts_with(field), "{why}");
                assert!(why.contains(&CLAIM_TEXT_MAX.to_string()), "{why}");
            }
            other => panic!("expected an invalid claim, got {other:?}"),
        }
        assert_eq!(state, before, "a refusal changes nothing");
    }
}

#[test]
fn a_plan_with_followers_max_followers_is_valid_and_one_more_is_not() {
    assert_eq!(plan(FOLLOWERS_MAX, 1).validate(), Ok(()));
    assert_eq!(
        plan(FOLLOWERS_MAX + 1, 1).validate(),
        Err(PlanError::TooManyFollowers(FOLLOWERS_MAX + 1))
    );
}

/// The text of a whole-fleet plan's events stays a line a log collector
/// takes: the first followers by name, the rest counted (the plan itself is
/// whole in the events, as the test below checks).
#[test]
fn a_whole_fleet_plan_is_worded_in_a_bounded_line() {
    use model::controller::event::FOLLOWERS_SHOWN_MAX;
    let mut state = ControllerState::default();
    let events = feed(
        &mut state,
        Input::StartRollout {
            plan: plan(FOLLOWERS_MAX, 3),
        },
    )
    .expect("valid");
    let started = events[0].to_string();
    let rest = FOLLOWERS_PER_EVENT_MAX - FOLLOWERS_SHOWN_MAX;
    assert!(
        started.contains(&format!("node-i and {rest} more, slots 3")),
        "{started}"
    );
    for event in &events {
        let text = event.to_string();
        assert!(text.len() < 400, "{} bytes: {text}", text.len());
    }
    let goes_on = events[1].to_string();
    assert!(goes_on.contains("'s plan goes on: "), "{goes_on}");
    assert!(goes_on.ends_with(&format!(" and {rest} more")), "{goes_on}");
}

/// A rollout may span the whole fleet: a plan of NODES_MAX nodes is
/// recorded in entries of at most FOLLOWERS_PER_EVENT_MAX followers each
/// (one log entry stays bounded), and the fold puts the whole plan back
/// together, in order, before its first grant.
#[test]
fn a_plan_over_the_whole_fleet_is_recorded_in_bounded_chunks_and_folded_whole() {
    assert_eq!(
        FOLLOWERS_MAX + 1,
        NODES_MAX,
        "canary and followers: the fleet"
    );
    let whole = plan(FOLLOWERS_MAX, 3);
    let mut state = ControllerState::default();
    let events = feed(
        &mut state,
        Input::StartRollout {
            plan: whole.clone(),
        },
    )
    .expect("valid");
    let chunks = FOLLOWERS_MAX.div_ceil(FOLLOWERS_PER_EVENT_MAX);
    let mut recorded = Vec::new();
    for (i, event) in events.iter().take(chunks).enumerate() {
        let part = match (i, event) {
            (0, Event::RolloutStarted { plan, .. }) => &plan.followers,
            (1.., Event::RolloutFollowersAdded { followers, .. }) => followers,
            other => panic!("entry {i} of the plan is {other:?}"),
        };
        assert!((1..=FOLLOWERS_PER_EVENT_MAX).contains(&part.len()));
        recorded.extend_from_slice(part);
    }
    assert_eq!(
        recorded, whole.followers,
        "every follower once, in plan order"
    );
    assert!(
        matches!(
            events.get(chunks),
            Some(Event::OpGranted {
                node: NodeId(0),
                ..
            })
        ),
        "the canary's grant comes after the whole plan: {:?}",
        events.get(chunks)
    );
    let r = state.active_rollout().expect("active");
    assert_eq!(*r.plan, whole, "the fold holds the plan as asked");
    assert_eq!(
        state
            .intended_rollout(NodeId(FOLLOWERS_MAX as u32))
            .map(|r| r.id),
        Some(r.id)
    );
    // A plan at the limit of one entry stays one entry.
    let mut state = ControllerState::default();
    let events = feed(
        &mut state,
        Input::StartRollout {
            plan: plan(FOLLOWERS_PER_EVENT_MAX, 1),
        },
    );
    assert!(!events
        .expect("valid")
        .iter()
        .any(|e| matches!(e, Event::RolloutFollowersAdded { .. })));
}

/// Followers join only a plan still being recorded (the latest rollout,
/// before its policy and its first grant), in chunks of
/// 1..=FOLLOWERS_PER_EVENT_MAX: `apply` asserts it.
#[test]
fn followers_join_only_a_plan_still_being_recorded_in_bounded_chunks() {
    let state = granted();
    let r = state.active_rollout().expect("active").id;
    let add = |n: usize| Event::RolloutFollowersAdded {
        rollout: r,
        followers: (10..10 + n as u32).map(NodeId).collect(),
    };
    // granted(): the canary's op exists, so the plan is closed.
    assert_eq!(
        referents_exist(&state, &add(1)),
        Err(MissingReferent::PlanClosed(r))
    );
    let mut open = ControllerState::default();
    let started = step(&open, &Input::StartRollout { plan: plan(1, 1) }).expect("valid");
    apply(&mut open, &started[0]);
    assert_eq!(referents_exist(&open, &add(1)), Ok(()));
    assert_eq!(
        referents_exist(&open, &add(FOLLOWERS_PER_EVENT_MAX)),
        Ok(())
    );
    for n in [0, FOLLOWERS_PER_EVENT_MAX + 1] {
        assert_eq!(
            referents_exist(&open, &add(n)),
            Err(MissingReferent::PlanClosed(r))
        );
    }
}

#[test]
fn slots_max_is_valid_from_one_to_slots_max_limit_only() {
    assert_eq!(plan(1, 1).validate(), Ok(()));
    assert_eq!(plan(1, SLOTS_MAX_LIMIT).validate(), Ok(()));
    for slots in [0, SLOTS_MAX_LIMIT + 1] {
        assert_eq!(
            plan(1, slots).validate(),
            Err(PlanError::SlotsOutOfRange(slots))
        );
    }
    // The controller refuses such a plan with the plan's own words.
    let mut state = granted();
    let refused = feed(
        &mut state,
        Input::StartRollout {
            plan: plan(1, SLOTS_MAX_LIMIT + 1),
        },
    );
    assert!(
        matches!(&refused, Err(Refusal::InvalidPlan(why)) if why.contains("slots_max")),
        "{refused:?}"
    );
}

/// An observation that differs from every other one by its restart count.
fn down(restarts: u32) -> RouteObservation {
    RouteObservation {
        process_restarts: Some(restarts),
        ..RouteObservation::new(ProbeVerdict::Unreachable, None, false)
    }
}

fn report_not_applied(state: &mut ControllerState, restarts: u32) {
    let msg = ToController::Report {
        op: OP,
        kind: ReportKind::NotApplied,
        observation: down(restarts),
    };
    feed(
        state,
        Input::FromAgent {
            node: NodeId(0),
            msg,
        },
    )
    .expect("a report is taken");
}

#[test]
fn an_op_keeps_op_evidence_max_items_and_drops_the_oldest_past_it() {
    let mut state = granted();
    for restarts in 0..OP_EVIDENCE_MAX as u32 {
        report_not_applied(&mut state, restarts);
    }
    let kept: Vec<Option<u32>> = state.ops[&model::OpId(0)]
        .evidence
        .iter()
        .map(|e| e.observation.process_restarts)
        .collect();
    let all: Vec<Option<u32>> = (0..OP_EVIDENCE_MAX as u32).map(Some).collect();
    assert_eq!(kept, all, "at the limit every item is kept");
    report_not_applied(&mut state, OP_EVIDENCE_MAX as u32);
    let kept: Vec<Option<u32>> = state.ops[&model::OpId(0)]
        .evidence
        .iter()
        .map(|e| e.observation.process_restarts)
        .collect();
    let newest: Vec<Option<u32>> = (1..=OP_EVIDENCE_MAX as u32).map(Some).collect();
    assert_eq!(kept, newest, "one past the limit drops the oldest");
}
