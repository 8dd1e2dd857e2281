//! Step, then apply: how a test drives a controller state, as the real
//! controller does (`step` decides on the state as it is, every event of
//! the batch is applied in order).

use model::controller::{apply, effects, step, ControllerState, Effect, Event, Input, Refusal};

/// Steps `input` on `state`; when accepted, applies each event of the
/// batch in order, calling `before` with the state just before each event
/// is applied and `after` with the state that holds it. A refused input
/// changes nothing.
pub fn feed_with(
    state: &mut ControllerState,
    input: &Input,
    mut before: impl FnMut(&ControllerState, &Event),
    mut after: impl FnMut(&ControllerState, &Event),
) -> Result<Vec<Event>, Refusal> {
    let events = step(state, input)?;
    for event in &events {
        before(state, event);
        apply(state, event);
        after(state, event);
    }
    Ok(events)
}

/// Steps `input` and applies its events; returns them, or the refusal
/// (then `state` is unchanged).
pub fn feed(state: &mut ControllerState, input: Input) -> Result<Vec<Event>, Refusal> {
    feed_with(state, &input, |_, _| {}, |_, _| {})
}

/// [`feed`], appending the events to `log` as well (for a replay or a
/// snapshot compared with the state).
pub fn feed_into(
    state: &mut ControllerState,
    log: &mut Vec<Event>,
    input: Input,
) -> Result<Vec<Event>, Refusal> {
    let events = feed(state, input)?;
    log.extend(events.iter().cloned());
    Ok(events)
}

/// [`feed`] of an input the test expects to be accepted: panics with the
/// input and the refusal otherwise.
#[track_caller]
pub fn accept(state: &mut ControllerState, input: Input) -> Vec<Event> {
    match feed_with(state, &input, |_, _| {}, |_, _| {}) {
        Ok(events) => events,
        Err(refusal) => panic!("{input:?} refused: {refusal:?}"),
    }
}

/// [`feed_into`] of an input the test expects to be accepted.
#[track_caller]
pub fn accept_into(state: &mut ControllerState, log: &mut Vec<Event>, input: Input) -> Vec<Event> {
    let events = accept(state, input);
    log.extend(events.iter().cloned());
    events
}

/// [`accept_into`], returning as well the effects of the events (the
/// commands they send), each computed on the state that holds its event,
/// as the controller computes them.
#[track_caller]
pub fn accept_with_effects(
    state: &mut ControllerState,
    log: &mut Vec<Event>,
    input: Input,
) -> (Vec<Event>, Vec<Effect>) {
    let mut sent = Vec::new();
    let taken = feed_with(
        state,
        &input,
        |_, _| {},
        |state, event| sent.extend(effects(state, event)),
    );
    match taken {
        Ok(events) => {
            log.extend(events.iter().cloned());
            (events, sent)
        }
        Err(refusal) => panic!("{input:?} refused: {refusal:?}"),
    }
}
