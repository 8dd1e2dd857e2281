//! A controller on a real log wired to in-memory agents: the test kit's
//! in-process fleet (as in model/tests/flows.rs) with
//! `controller::driver::Controller` as its core.
#![allow(dead_code)]

mod backend;
pub mod loopback;

use std::path::Path;

pub use backend::{backends, Backend, LogHome};

use controller::driver::{Controller, ControllerError, Ready};
use model::controller::{Effect, Event, Input};
use model::{NodeId, Plan};
use testkit::fleet::Core;

pub use testkit::fixtures::V2;

/// The controller on its log, and the events it acknowledged.
pub struct Driven {
    pub ctrl: Controller,
    /// Every event the controller acknowledged (returned in a `Ready`).
    pub acknowledged: Vec<(u64, Event)>,
}

impl std::ops::Deref for Driven {
    type Target = Controller;
    fn deref(&self) -> &Controller {
        &self.ctrl
    }
}

impl std::ops::DerefMut for Driven {
    fn deref_mut(&mut self) -> &mut Controller {
        &mut self.ctrl
    }
}

impl Core for Driven {
    type Error = ControllerError;
    fn handle(&mut self, input: Input) -> Result<(Vec<Event>, Vec<Effect>), ControllerError> {
        let ready: Ready = self.ctrl.handle(input)?;
        let (events, effects) = ready.into_parts();
        self.acknowledged.extend(events.iter().cloned());
        Ok((events.into_iter().map(|(_, e)| e).collect(), effects))
    }
}

/// The test kit's in-process fleet (issue #22 item 5) on a real log: the
/// controller (`fleet.ctrl`, a [`Driven`]), its agents and the messages in
/// flight to them, and where the log lives.
pub struct Fleet {
    /// Where the controller's log lives (sled or etcd).
    pub home: LogHome,
    pub kit: testkit::fleet::Fleet<Driven>,
}

impl std::ops::Deref for Fleet {
    type Target = testkit::fleet::Fleet<Driven>;
    fn deref(&self) -> &Self::Target {
        &self.kit
    }
}

impl std::ops::DerefMut for Fleet {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.kit
    }
}

impl Fleet {
    /// A fresh controller log in `dir` and `nodes` agents serving v1, connected.
    pub fn new(dir: &Path, nodes: u32) -> Self {
        Self::on(LogHome::new(&Backend::Sled, dir, "fleet"), nodes)
    }

    /// A fresh controller on `home`'s log (any backend) and `nodes` agents
    /// serving v1, connected.
    pub fn on(mut home: LogHome, nodes: u32) -> Self {
        let ctrl = Driven {
            ctrl: home.open(),
            acknowledged: Vec::new(),
        };
        let kit = testkit::fleet::Fleet::new(ctrl, nodes);
        Fleet { home, kit }
    }

    /// Stops the controller (closing its log, or dropping it like a crash)
    /// and starts it again on the same directory; agents keep running.
    /// Messages in flight are lost with the old connections.
    pub fn restart(self, close: bool) -> Self {
        let Fleet { mut home, kit } = self;
        let Driven { ctrl, acknowledged } = kit.ctrl;
        home.stop(ctrl, close);
        let ctrl = Driven {
            ctrl: home.open(),
            acknowledged,
        };
        let mut restarted = testkit::fleet::Fleet::with_agents(ctrl, kit.agents);
        restarted.v2_correct = kit.v2_correct;
        Fleet {
            home,
            kit: restarted,
        }
    }

    /// Closes the controller's log (the driver's `close`).
    pub fn close(self) -> Result<(), ControllerError> {
        self.kit.ctrl.ctrl.close()
    }

    /// Stops the controller in order (on etcd: resigns its leadership) and
    /// hands back its log's home, to read the log back.
    pub fn stop(self) -> LogHome {
        let Fleet { mut home, kit } = self;
        home.stop(kit.ctrl.ctrl, true);
        home
    }
}

/// Canary node-a, followers node-b and node-c, one slot.
pub fn plan(approval_after_canary: bool) -> Plan {
    Plan {
        release: V2,
        canary: NodeId(0),
        followers: vec![NodeId(1), NodeId(2)],
        slots_max: 1,
        approval_after_canary,
    }
}
