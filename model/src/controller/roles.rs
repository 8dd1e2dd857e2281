//! Who may make which input (issue #28 item 2): the role table, decided
//! once. Apart from [`super::operators`] (the roster of operators, which
//! the state holds) because it reads inputs, and inputs name actors.

use super::input::Input;
use super::operators::Role;

/// The role `input` needs from the operator `actor_name` acting; `None`
/// for an input no operator makes (agent messages, probes the controller
/// made, deadlines, identity conflicts). Rotating one's own credential
/// needs no more than [`Role::Viewer`]; anyone else's, [`Role::Admin`].
pub fn required_role(input: &Input, actor_name: Option<&str>) -> Option<Role> {
    Some(match input {
        Input::FromAgent { .. }
        | Input::RouteProbed { .. }
        | Input::Timeout { .. }
        | Input::IdentityConflict { .. }
        | Input::Acting { .. } => return None,
        Input::StartRollout { .. }
        | Input::StartStaged { .. }
        | Input::SetConfig { .. }
        | Input::Pause { .. }
        | Input::Resume { .. }
        | Input::Observe { .. } => Role::Deployer,
        Input::Approve { .. }
        | Input::Resolve { .. }
        | Input::Claim { .. }
        | Input::RollBack { .. } => Role::Approver,
        Input::ReleaseNode { .. }
        | Input::RevokeCert { .. }
        | Input::EnrollNode { .. }
        | Input::LabelNode { .. }
        | Input::RetireNode { .. }
        | Input::AddOperator { .. }
        | Input::RevokeOperator { .. } => Role::Admin,
        Input::RotateCredential { name, .. } if actor_name == Some(name.as_str()) => Role::Viewer,
        Input::RotateCredential { .. } => Role::Admin,
    })
}

/// Whether `input` may come without an actor once operators exist: the
/// inputs no operator makes, and `Observe`, which the controller's own
/// readbacks make as well as an operator's probe.
pub fn runs_without_actor(input: &Input) -> bool {
    matches!(input, Input::Observe { .. }) || required_role(input, None).is_none()
}

/// An operator action that is not an input to the core (it changes no
/// state the rules read): its role is decided here too, so the whole
/// role table is in one place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffLogAction {
    /// Upload a bundle, a release manifest or its chunks.
    UploadRelease,
    /// Remove a stored release (`DELETE /api/releases/{digest}`).
    DeleteRelease,
    /// Read the event stream (`GET /api/events/stream`).
    ReadEvents,
}

/// The role an off-log action needs.
pub fn off_log_role(action: OffLogAction) -> Role {
    match action {
        OffLogAction::ReadEvents => Role::Viewer,
        OffLogAction::UploadRelease => Role::Deployer,
        OffLogAction::DeleteRelease => Role::Admin,
    }
}
