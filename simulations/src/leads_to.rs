//! The liveness properties (leads-to, under weak fairness) by name: what
//! the mutants say they break and what `liveness` checks.

/// A leads-to property, checked per rollout or per op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Liveness {
    /// An active, unpaused rollout that awaits no approval eventually
    /// completes, ends, is superseded, pauses or waits for an approval.
    RolloutComesToRest,
    /// An UNKNOWN op holding its slot, whose node is not cut off and whose
    /// rollout is not paused, eventually settles.
    UnknownOpSettles,
    /// An op holding its slot, whose node is not cut off and whose route a
    /// controller probe would settle it on now, eventually frees its slot.
    NoSlotHeldForever,
}

impl Liveness {
    /// Every liveness property, in report order.
    pub const ALL: [Liveness; 3] = [
        Liveness::RolloutComesToRest,
        Liveness::UnknownOpSettles,
        Liveness::NoSlotHeldForever,
    ];

    /// The short code, as rules have (`LV1`…).
    pub fn code(self) -> &'static str {
        match self {
            Liveness::RolloutComesToRest => "LV1",
            Liveness::UnknownOpSettles => "LV2",
            Liveness::NoSlotHeldForever => "LV3",
        }
    }

    /// The property's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Liveness::RolloutComesToRest => "LV1 every rollout comes to rest",
            Liveness::UnknownOpSettles => "LV2 an UNKNOWN op on a reachable node settles",
            Liveness::NoSlotHeldForever => "LV3 no slot held forever by an op a probe would settle",
        }
    }

    /// The property whose name is `name`.
    pub fn parse(name: &str) -> Option<Liveness> {
        Liveness::ALL.into_iter().find(|l| l.name() == name)
    }

    /// What is pending for `entity`, in domain words.
    pub fn what(self, entity: u32) -> String {
        match self {
            Liveness::RolloutComesToRest => format!(
                "rollout r{entity} stays active and unpaused, asking no one, and never completes or ends"
            ),
            Liveness::UnknownOpSettles => format!(
                "op{entity} stays UNKNOWN on a reachable node of an unpaused rollout and never settles"
            ),
            Liveness::NoSlotHeldForever => format!(
                "op{entity} holds its slot forever although a probe of its node's route would settle it"
            ),
        }
    }
}
