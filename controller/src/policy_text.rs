//! The operator's words for waves and failure budgets (`--waves 1%,10%,100%`,
//! `--max-failed 2%`, `--max-unknown 5`), turned into a `model::plan::Policy`
//! once the plan's follower count is known. One place, used by the API (the
//! CLI sends the texts as they were typed).

use model::plan::{Policy, WAVES_MAX};

/// The texts of a rollout start that shape its policy.
#[derive(Clone, Debug, Default)]
pub struct PolicyText<'a> {
    /// Cumulative wave ends: counts of followers or percentages of them.
    pub waves: Option<&'a str>,
    /// Approve before each wave after the first.
    pub approval_between_waves: bool,
    /// A count of follower ops, or a percentage of the followers.
    pub max_failed: Option<&'a str>,
    /// A count of ops UNKNOWN at once.
    pub max_unknown: Option<&'a str>,
}

/// `text` as a count of `of` followers: `"7"` or `"25%"` (rounded up for
/// waves so that 1% of a small fleet is one node, down for budgets).
fn amount(field: &str, text: &str, of: u32, round_up: bool) -> Result<u32, String> {
    let text = text.trim();
    if let Some(percent) = text.strip_suffix('%') {
        let p: u64 = percent
            .trim()
            .parse()
            .map_err(|_| format!("field `{field}`: {text:?} is not a number or a percentage"))?;
        if p > 100 {
            return Err(format!("field `{field}`: {text} is over 100%"));
        }
        let scaled = p * u64::from(of);
        let count = if round_up {
            scaled.div_ceil(100)
        } else {
            scaled / 100
        };
        return Ok(count as u32);
    }
    text.parse()
        .map_err(|_| format!("field `{field}`: {text:?} is not a number or a percentage"))
}

/// One wave end of `waves` as the exact share of the fleet the operator
/// typed, in hundredths of a follower (a count `n` is `100 n`, a percentage
/// `p` of `of` followers is `p × of`), so that `"50%,10%"` is seen as
/// decreasing even where both round to the same count. A plan without
/// followers is read as one follower, so a typo is refused there too. A
/// wave end of 0 sends no follower: refused, naming the part.
fn wave_share(part: &str, of: u32) -> Result<u128, String> {
    let text = part.trim();
    // A percentage of 100 followers is the percentage itself.
    let share = match text.strip_suffix('%') {
        Some(_) => u128::from(amount("waves", text, 100, true)?) * u128::from(of.max(1)),
        None => u128::from(amount("waves", text, of, true)?) * 100,
    };
    if share == 0 {
        return Err(format!(
            "field `waves`: {text:?} ends a wave at 0 followers, so that wave would send no node"
        ));
    }
    Ok(share)
}

impl PolicyText<'_> {
    /// The policy for a plan of `followers` followers. Wave ends that round
    /// to the same count are one wave; the last wave always ends at the
    /// last follower.
    pub fn policy(&self, followers: u32) -> Result<Policy, String> {
        let mut wave_ends = Vec::new();
        if let Some(waves) = self.waves {
            let parts: Vec<&str> = waves.split(',').collect();
            if parts.len() > WAVES_MAX {
                return Err(format!(
                    "field `waves`: {} waves exceed the limit of {WAVES_MAX}",
                    parts.len()
                ));
            }
            let mut previous: Option<(&str, u128)> = None;
            for part in parts {
                let share = wave_share(part, followers)?;
                if let Some((before, earlier)) = previous {
                    if share <= earlier {
                        return Err(format!(
                            "field `waves`: {:?} does not end after {:?}; wave ends are cumulative and strictly increasing (\"5%,10%\", not \"50%,10%\")",
                            part.trim(),
                            before.trim()
                        ));
                    }
                }
                previous = Some((part, share));
                let end = amount("waves", part, followers, true)?.min(followers);
                if end > 0 && wave_ends.last().is_none_or(|last| end > *last) {
                    wave_ends.push(end);
                }
            }
            if wave_ends.last().is_some_and(|last| *last != followers) {
                wave_ends.push(followers);
            }
            if wave_ends.len() > WAVES_MAX {
                return Err(format!("field `waves`: more than {WAVES_MAX} waves"));
            }
        }
        let max_failed = self
            .max_failed
            .map(|t| amount("max_failed", t, followers, false))
            .transpose()?;
        let max_unknown = self
            .max_unknown
            .map(|t| amount("max_unknown", t, followers, false))
            .transpose()?;
        if max_unknown == Some(0) {
            return Err("field `max_unknown`: expected at least 1".into());
        }
        Ok(Policy {
            wave_ends,
            approval_between_waves: self.approval_between_waves,
            max_failed,
            max_unknown,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_become_cumulative_wave_ends_of_the_followers() {
        let text = PolicyText {
            waves: Some("1%,10%,50%,100%"),
            max_failed: Some("2%"),
            max_unknown: Some("5"),
            ..PolicyText::default()
        };
        let p = text.policy(9_999).expect("valid");
        assert_eq!(p.wave_ends, vec![100, 1_000, 5_000, 9_999]);
        assert_eq!(p.max_failed, Some(199));
        assert_eq!(p.max_unknown, Some(5));
        // A small fleet: 1% and 10% of 6 are one node; one wave, then all.
        let p = text.policy(6).expect("valid");
        assert_eq!(p.wave_ends, vec![1, 3, 6]);
    }

    #[test]
    fn bad_texts_name_the_field() {
        for (text, field) in [
            (
                PolicyText {
                    waves: Some("1%,x"),
                    ..Default::default()
                },
                "waves",
            ),
            (
                PolicyText {
                    max_failed: Some("101%"),
                    ..Default::default()
                },
                "max_failed",
            ),
            (
                PolicyText {
                    max_unknown: Some("0"),
                    ..Default::default()
                },
                "max_unknown",
            ),
        ] {
            let err = text.policy(10).expect_err("refused");
            assert!(err.contains(field), "{err}");
        }
        assert_eq!(PolicyText::default().policy(10), Ok(Policy::default()));
    }

    /// A hostile or mistyped `waves` is refused naming the part: a wave end
    /// of 0 sends nobody, and a decreasing list ("50%,10%", a typo for
    /// "5%,10%") would send half the fleet in the first wave.
    #[test]
    fn zero_and_decreasing_wave_ends_are_refused_naming_the_part() {
        for (waves, names) in [
            ("0%", "\"0%\""),
            ("0", "\"0\""),
            ("0%,100%", "\"0%\""),
            ("50%,10%", "\"10%\""),
            ("50%,50%", "\"50%\""),
            ("5,3", "\"3\""),
        ] {
            let text = PolicyText {
                waves: Some(waves),
                ..Default::default()
            };
            for followers in [0, 1, 6, 10] {
                let err = text.policy(followers).expect_err(waves);
                assert!(
                    err.contains("field `waves`") && err.contains(names),
                    "{waves}: {err}"
                );
            }
        }
        // Mixed units compare on the fleet at hand: 50% of 10 is past 4,
        // 50% of 6 is not.
        let mixed = PolicyText {
            waves: Some("50%, 4"),
            ..Default::default()
        };
        let err = mixed.policy(10).expect_err("5 then 4");
        assert!(err.contains("\"4\""), "{err}");
        assert_eq!(mixed.policy(6).expect("3 then 4").wave_ends, vec![3, 4, 6]);
        // Increasing texts that round to the same count are still one wave.
        let text = PolicyText {
            waves: Some("1%,10%,100%"),
            ..Default::default()
        };
        assert_eq!(text.policy(6).expect("valid").wave_ends, vec![1, 6]);
        assert_eq!(text.policy(0).expect("valid").wave_ends, Vec::<u32>::new());
    }
}
