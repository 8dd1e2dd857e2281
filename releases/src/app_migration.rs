//! A release's data migration (issue #24 item 2): the command the agent
//! runs in the release directory after staging and before the route
//! switch, with the app's data directory in `FLEETWEFT_DATA_DIR`, and
//! whether a roll back after it may put the old data back. Declared by the
//! signer inside the signed manifest (format 5), so a node runs exactly
//! what was signed.

use serde::{Deserialize, Serialize};

use crate::error::ReleaseError;

/// Most arguments in the migrate command (program included): the run
/// command's bound ([`protocol::bundle::RUN_ARGS_MAX`]).
pub const MIGRATE_ARGS_MAX: usize = protocol::bundle::RUN_ARGS_MAX;
/// Longest argument of the migrate command, in bytes: a command line, not
/// a script (a script is a file of the release).
pub const MIGRATE_ARG_BYTES_MAX: usize = 4096;

/// The migration a release declares.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppMigration {
    /// The command, program first, run in the release directory with the
    /// app's environment, user and limits; exit 0 is success.
    pub command: Vec<String>,
    /// A roll back after it does not put the data's snapshot back on its
    /// own: it waits for a person (the new data may not be readable by
    /// the old release, or the migration reached outside the node).
    pub irreversible: bool,
}

impl AppMigration {
    /// Checks the command: a program, at most [`MIGRATE_ARGS_MAX`]
    /// arguments of at most [`MIGRATE_ARG_BYTES_MAX`] bytes, no NUL (exec
    /// cannot pass one).
    pub fn validate(&self) -> Result<(), ReleaseError> {
        let bad = |problem: String| Err(ReleaseError::BadMigration(problem));
        match self.command.first() {
            None => return bad("the migrate command is empty".into()),
            Some(program) if program.is_empty() => {
                return bad("the migrate program is empty".into())
            }
            Some(_) => {}
        }
        if self.command.len() > MIGRATE_ARGS_MAX {
            return bad(format!(
                "the migrate command has {} arguments, over the limit of {MIGRATE_ARGS_MAX}",
                self.command.len()
            ));
        }
        if let Some(long) = self
            .command
            .iter()
            .find(|a| a.len() > MIGRATE_ARG_BYTES_MAX)
        {
            return bad(format!(
                "a migrate argument of {} bytes, over the limit of {MIGRATE_ARG_BYTES_MAX}",
                long.len()
            ));
        }
        if self.command.iter().any(|a| a.contains('\0')) {
            return bad("a migrate argument contains a NUL byte".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn migration(command: &[&str]) -> AppMigration {
        AppMigration {
            command: command.iter().map(|s| s.to_string()).collect(),
            irreversible: false,
        }
    }

    #[test]
    fn each_bound_is_checked_at_and_past_its_value() {
        assert!(migration(&["./migrate", "--to", "2"]).validate().is_ok());
        for bad in [&[][..], &[""][..], &["a\0b"][..], &["./m", "x\0"][..]] {
            let err = migration(bad).validate().expect_err("refused");
            assert!(err.to_string().contains("migrat"), "{err}");
        }
        let args = vec!["a"; MIGRATE_ARGS_MAX];
        assert!(migration(&args).validate().is_ok());
        let args = vec!["a"; MIGRATE_ARGS_MAX + 1];
        assert!(migration(&args).validate().is_err());
        let at = "x".repeat(MIGRATE_ARG_BYTES_MAX);
        assert!(migration(&["./m", &at]).validate().is_ok());
        let over = "x".repeat(MIGRATE_ARG_BYTES_MAX + 1);
        let err = migration(&["./m", &over]).validate().expect_err("long");
        assert!(err.to_string().contains("4096"), "{err}");
    }
}
