//! SPEC §5: the fixed recovery table now lives in the model
//! (`model::recovery`), where `agent_step` calls it and the checker
//! explores it; re-exported here for the journal's legacy records and for
//! callers that named it `agent::recovery`.

pub use model::recovery::{exit, ErrorClass, Exit, Observed, Position, Reading, Row, StageFailure};
