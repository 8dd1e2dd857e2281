//! Named operators with roles (issue #28 item 2): who may do what is
//! decided by `step`, recorded by `Acted`, and refused in the model's own
//! words when the role, the credential or the operator is not right.

use model::controller::{
    snapshot, step, ActedBy, Actor, ControllerState, Event, Input, Refusal, Role,
};
use model::{Digest, RolloutId};
use testkit::fixtures::{plan, started};
use testkit::{accept, feed};

const ROOT: Digest = Digest::repeat(0xa0);
const ADA: Digest = Digest::repeat(0xa1);
const VERA: Digest = Digest::repeat(0xa2);
const DAN: Digest = Digest::repeat(0xa3);

fn op(name: &str, credential: Digest) -> Actor {
    Actor::Operator {
        name: name.into(),
        credential,
    }
}

fn acting(actor: Actor, input: Input) -> Input {
    Input::Acting {
        actor,
        input: Box::new(input),
    }
}

fn add(name: &str, role: Role, credential: Digest) -> Input {
    acting(
        op("root", ROOT),
        Input::AddOperator {
            name: name.into(),
            role,
            credential,
        },
    )
}

/// A canary-gated rollout whose canary verified, waiting for approval,
/// with root (admin), ada (approver), vera (viewer) and dan (deployer).
fn gated() -> ControllerState {
    let mut state = started(plan(3, 1, true));
    testkit::fixtures::verify(&mut state, 0);
    with_operators(state)
}

/// `state` with root, ada, vera and dan recorded.
fn with_operators(mut state: ControllerState) -> ControllerState {
    let bootstrap = Input::AddOperator {
        name: "root".into(),
        role: Role::Admin,
        credential: ROOT,
    };
    accept(&mut state, bootstrap);
    accept(&mut state, add("ada", Role::Approver, ADA));
    accept(&mut state, add("vera", Role::Viewer, VERA));
    accept(&mut state, add("dan", Role::Deployer, DAN));
    state
}

/// What a surface offers is about the state, not who looks: whether the
/// operator's role allows it is judged when the input comes.
#[test]
fn the_gated_fixture_waits_for_approval_and_offers_it_whoever_looks() {
    let state = gated();
    assert!(state.awaiting_approval(RolloutId(0)));
    let offered = model::controller::rollout_actions(&state, RolloutId(0));
    assert!(
        offered.contains(&model::controller::RolloutAction::Approve),
        "{offered:?}"
    );
}

fn approve() -> Input {
    Input::Approve {
        rollout: RolloutId(0),
    }
}

#[test]
fn the_first_operator_comes_without_an_actor_and_must_be_an_admin() {
    let mut state = ControllerState::default();
    let viewer = Input::AddOperator {
        name: "vera".into(),
        role: Role::Viewer,
        credential: VERA,
    };
    assert!(matches!(
        feed(&mut state, viewer),
        Err(Refusal::InvalidOperator(why)) if why.contains("must be an admin")
    ));
    let root = Input::AddOperator {
        name: "root".into(),
        role: Role::Admin,
        credential: ROOT,
    };
    assert_eq!(accept(&mut state, root.clone()).len(), 1);
    // The second needs an admin acting.
    assert_eq!(feed(&mut state, root), Err(Refusal::OperatorRequired));
}

#[test]
fn a_viewer_approving_is_refused_naming_the_role_it_lacks() {
    let state = gated();
    let refused = step(&state, &acting(op("vera", VERA), approve()));
    assert_eq!(
        refused,
        Err(Refusal::RoleRequired {
            operator: "vera".into(),
            needs: Role::Approver,
            has: Role::Viewer,
        })
    );
    let text = refused.expect_err("refused").to_string();
    assert!(
        text.contains("approver") && text.contains("viewer"),
        "{text}"
    );
    // A deployer may pause but not approve.
    assert!(matches!(
        step(&state, &acting(op("dan", DAN), approve())),
        Err(Refusal::RoleRequired {
            needs: Role::Approver,
            has: Role::Deployer,
            ..
        })
    ));
    let pause = Input::Pause {
        rollout: RolloutId(0),
    };
    assert!(step(&state, &acting(op("dan", DAN), pause)).is_ok());
}

#[test]
fn an_approvers_approval_is_recorded_with_who_approved() {
    let mut state = gated();
    let events = accept(&mut state, acting(op("ada", ADA), approve()));
    assert_eq!(
        events[0],
        Event::Acted {
            by: ActedBy::Operator("ada".into())
        }
    );
    assert!(matches!(events[1], Event::RolloutApproved { .. }));
    assert_eq!(events[0].to_string(), "by operator ada:");
    // An admin may too: roles are ordered.
    let mut again = gated();
    assert!(feed(&mut again, acting(op("root", ROOT), approve())).is_ok());
}

#[test]
fn once_operators_exist_an_operator_input_without_one_is_refused() {
    let mut state = gated();
    assert_eq!(feed(&mut state, approve()), Err(Refusal::OperatorRequired));
    // What agents, deadlines and the controller's probes bring needs none,
    // and may not claim one.
    let hello = testkit::fixtures::hello(model::NodeId(1), None);
    assert!(feed(&mut state, hello.clone()).is_ok());
    assert_eq!(
        step(&state, &acting(op("root", ROOT), hello)),
        Err(Refusal::NotAnOperatorInput)
    );
}

#[test]
fn a_revoked_or_rotated_credential_is_refused_from_that_event_on() {
    let mut state = gated();
    let new_ada = Digest::repeat(0xb1);
    let rotate = Input::RotateCredential {
        name: "ada".into(),
        credential: new_ada,
    };
    // Ada rotates her own credential: a viewer's right.
    accept(&mut state, acting(op("ada", ADA), rotate));
    assert_eq!(
        step(&state, &acting(op("ada", ADA), approve())),
        Err(Refusal::CredentialNotCurrent("ada".into()))
    );
    assert!(step(&state, &acting(op("ada", new_ada), approve())).is_ok());
    let revoke = Input::RevokeOperator { name: "ada".into() };
    accept(&mut state, acting(op("root", ROOT), revoke.clone()));
    assert_eq!(
        step(&state, &acting(op("root", ROOT), revoke)),
        Err(Refusal::OperatorAlreadyRevoked("ada".into()))
    );
    let revoked = step(&state, &acting(op("ada", new_ada), approve()));
    assert_eq!(revoked, Err(Refusal::OperatorRevoked("ada".into())));
    // Worded as itself, naming the operator.
    let text = revoked.expect_err("refused").to_string();
    assert_eq!(text, "operator ada is revoked: its credential is refused");
    assert!(state.operators.by_credential(&new_ada).is_none());
    // The name is never reused.
    assert_eq!(
        step(&state, &add("ada", Role::Approver, Digest::repeat(0xb2))),
        Err(Refusal::OperatorNameTaken("ada".into()))
    );
}

#[test]
fn rotating_someone_elses_credential_needs_an_admin() {
    let state = gated();
    let rotate = Input::RotateCredential {
        name: "ada".into(),
        credential: Digest::repeat(0xb3),
    };
    assert!(matches!(
        step(&state, &acting(op("vera", VERA), rotate.clone())),
        Err(Refusal::RoleRequired {
            needs: Role::Admin,
            ..
        })
    ));
    assert!(step(&state, &acting(op("root", ROOT), rotate)).is_ok());
}

#[test]
fn the_last_admin_cannot_be_revoked_and_a_credential_is_one_operators() {
    let mut state = gated();
    let revoke_root = Input::RevokeOperator {
        name: "root".into(),
    };
    assert_eq!(
        step(&state, &acting(op("root", ROOT), revoke_root.clone())),
        Err(Refusal::LastAdmin("root".into()))
    );
    assert!(matches!(
        step(&state, &add("eve", Role::Admin, ADA)),
        Err(Refusal::InvalidOperator(why)) if why.contains("ada")
    ));
    accept(&mut state, add("eve", Role::Admin, Digest::repeat(0xb4)));
    assert!(step(&state, &acting(op("root", ROOT), revoke_root)).is_ok());
}

#[test]
fn names_are_checked_and_a_claim_is_held_by_who_makes_it() {
    let state = gated();
    for bad in ["", "Ada", "-ada", "a d", &"a".repeat(65)] {
        assert!(
            matches!(
                step(&state, &add(bad, Role::Viewer, Digest::repeat(0xb5))),
                Err(Refusal::InvalidOperator(_))
            ),
            "{bad:?} accepted"
        );
    }
    let live = with_operators(started(plan(3, 1, true)));
    let claim = |owner: &str| Input::Claim {
        op: model::OpId(0),
        owner: owner.into(),
        review_by: "tomorrow".into(),
    };
    assert!(matches!(
        step(&live, &acting(op("ada", ADA), claim("root"))),
        Err(Refusal::InvalidClaim(why)) if why.contains("ada")
    ));
    let mine = step(&live, &acting(op("ada", ADA), claim("ada"))).expect("her own claim");
    assert!(matches!(mine[1], Event::OpClaimed { .. }));
    // An op that does not exist is refused as such first.
    let missing = Input::Claim {
        op: model::OpId(99),
        owner: "root".into(),
        review_by: "tomorrow".into(),
    };
    assert_eq!(
        step(&live, &acting(op("ada", ADA), missing)),
        Err(Refusal::UnknownOp(model::OpId(99)))
    );
}

#[test]
fn the_controller_config_may_only_enroll() {
    let mut state = gated();
    let enroll = testkit::fixtures::enroll("edge-9", Default::default());
    let events = accept(&mut state, acting(Actor::ControllerConfig, enroll));
    assert_eq!(
        events[0],
        Event::Acted {
            by: ActedBy::ControllerConfig
        }
    );
    assert_eq!(
        step(&state, &acting(Actor::ControllerConfig, approve())),
        Err(Refusal::OperatorRequired)
    );
}

#[test]
fn operators_survive_a_replay_and_a_snapshot() {
    let mut state = gated();
    let mut log = Vec::new();
    for input in [
        add("zoe", Role::Deployer, Digest::repeat(0xb6)),
        acting(
            op("root", ROOT),
            Input::RevokeOperator {
                name: "vera".into(),
            },
        ),
    ] {
        log.extend(accept(&mut state, input));
    }
    let mut replayed = gated();
    for event in &log {
        model::controller::apply(&mut replayed, event);
    }
    assert_eq!(replayed, state);
    let bytes = snapshot::encode_state(&state).expect("encodes");
    assert_eq!(snapshot::decode_state(&bytes).expect("decodes"), state);
}
