//! Forensics never write: `fleetweft log verify` and `fleetweft log show`
//! leave the directory they are given byte for byte as they found it, for
//! every kind of damage `corruption.rs` does (and the raw damage to sled's
//! own file a tester did), for an intact log, for directories that are not
//! a log, and for a log in use; and they still name the damage.
//!
//! Each case SHA-256-hashes every file (and lists every directory) before
//! and after each command, runs the real binary with `TMPDIR` pointed at a
//! directory of its own, and checks that the private copy is gone after.

use crate::common;
use crate::fleet;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use agent::journal::{Journal, Record, Stage};
use common::{edit_raw, key};
use eventlog::{Envelope, EventLog, LOG_FORMAT_VERSION};
use fleet::{plan, Fleet};
use model::agent::{AgentEvent, AgentInput};
use model::controller::{apply, step, ControllerState, Event, Input, Outcome};
use model::{Digest, Generation, NodeId, OpId};
use sha2::{Digest as _, Sha256};

/// Every entry below `dir` by relative path: a file's SHA-256, `None` for a
/// directory. A missing `dir` is an empty map.
fn tree(dir: &Path) -> BTreeMap<PathBuf, Option<[u8; 32]>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Option<[u8; 32]>>) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for entry in entries {
            let path = entry.expect("entry").path();
            let relative = path.strip_prefix(root).expect("below root").to_path_buf();
            if path.is_dir() {
                out.insert(relative, None);
                walk(root, &path, out);
            } else {
                let bytes = fs::read(&path).expect("read");
                out.insert(relative, Some(Sha256::digest(&bytes).into()));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// What differs between two `tree`s, by name.
fn changes(
    before: &BTreeMap<PathBuf, Option<[u8; 32]>>,
    after: &BTreeMap<PathBuf, Option<[u8; 32]>>,
) -> String {
    let mut out = Vec::new();
    for (path, hash) in before {
        match after.get(path) {
            None => out.push(format!("{} removed", path.display())),
            Some(new) if new != hash => out.push(format!("{} rewritten", path.display())),
            Some(_) => {}
        }
    }
    for path in after.keys().filter(|path| !before.contains_key(*path)) {
        out.push(format!("{} created", path.display()));
    }
    out.join(", ")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs `fleetweft log <command> <flag> <dir>` with its own `TMPDIR`, and
/// checks that the private copy it made there is gone afterwards.
fn run(command: &str, flag: &str, dir: &Path) -> Output {
    let tmp = tempfile::tempdir().expect("TMPDIR");
    let out = Command::new(env!("CARGO_BIN_EXE_fleetweft"))
        .args(["log", command, flag])
        .arg(dir)
        .env("TMPDIR", tmp.path())
        .output()
        .expect("run fleetweft");
    let left: Vec<_> = fs::read_dir(tmp.path()).expect("list TMPDIR").collect();
    assert!(
        left.is_empty(),
        "log {command} left its copy behind: {left:?}"
    );
    out
}

/// Waits until no sled handle of this process still holds `dir`'s lock:
/// sled's background threads write for a moment after a database handle is
/// dropped (see `eventlog::sled_dir::wait_for_lock_release`), and what
/// they write must not be blamed on the command under test. `verify`
/// waits for the lock itself and never writes.
fn settle(dir: &Path) {
    let _ = eventlog::verify(dir);
}

/// Runs `log verify` and `log show` on `dir`, asserting that neither
/// changes a byte of it, that both exit with `code`, and that each one's
/// stderr contains one of `names` (when given).
fn inspect_unchanged(case: &str, flag: &str, dir: &Path, code: i32, names: &[&str]) {
    for command in ["verify", "show"] {
        // `show` checks no rules: a log that only breaks one shows fine.
        let (code, names) = match (command, code, names) {
            ("show", 1, [name]) if name.starts_with("rule ") => (0, &[][..]),
            _ => (code, names),
        };
        settle(dir);
        let before = tree(dir);
        let out = run(command, flag, dir);
        let after = tree(dir);
        assert!(
            before == after,
            "{case}: `log {command}` changed the directory it inspected: {}",
            changes(&before, &after)
        );
        let stderr = text(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(code),
            "{case}: `log {command}`: {stderr}{}",
            text(&out.stdout)
        );
        assert!(
            names.is_empty() || names.iter().any(|name| stderr.contains(name)),
            "{case}: `log {command}` must name the damage ({names:?}): {stderr}"
        );
    }
}

/// A closed controller log of a few hundred entries, made once: a rollout
/// waiting for approval after its canary, and many reconnections.
fn template() -> &'static Path {
    static TEMPLATE: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let (_, dir) = TEMPLATE.get_or_init(|| {
        let temp = tempfile::tempdir().expect("temp dir");
        let dir = temp.path().join("log");
        let mut fleet = Fleet::new(&dir, 3);
        fleet
            .controller(Input::StartRollout { plan: plan(true) })
            .expect("start");
        fleet.run();
        for _ in 0..80 {
            for node in 0..3 {
                fleet.agent(NodeId(node), AgentInput::Connected);
            }
        }
        fleet.run();
        fleet.close().expect("close");
        settle(&dir);
        (temp, dir)
    });
    dir
}

/// A fresh copy of the template in its own temp dir (as `DIR/log`).
fn controller_log() -> (tempfile::TempDir, PathBuf) {
    let temp = tempfile::tempdir().expect("temp dir");
    let dir = temp.path().join("log");
    copy_dir(template(), &dir);
    (temp, dir)
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("mkdir");
    for entry in fs::read_dir(from).expect("list") {
        let path = entry.expect("entry").path();
        let target = to.join(path.file_name().expect("name"));
        if path.is_dir() {
            copy_dir(&path, &target);
        } else {
            fs::copy(&path, &target).expect("copy");
        }
    }
}

fn entries() -> u64 {
    logtools::inspect::verify_controller_log(template())
        .expect("the template is sound")
        .entries
}

fn raw_value(dir: &Path, sequence: u64) -> Vec<u8> {
    let mut value = None;
    edit_raw(dir, |_, entries| {
        value = entries
            .get(key(sequence))
            .expect("read")
            .map(|v| v.to_vec());
    });
    value.expect("entry present")
}

fn put_raw(dir: &Path, sequence: u64, value: Vec<u8>) {
    edit_raw(dir, |_, entries| {
        entries.insert(key(sequence), value).expect("insert");
    });
}

/// sled's database file is one preallocated segment: the end of its data.
fn used_bytes(db: &[u8]) -> usize {
    db.iter().rposition(|b| *b != 0).expect("data") + 1
}

/// One damage from `corruption.rs` (same names), done to a controller log.
struct Case {
    name: &'static str,
    damage: fn(&Path),
    /// Exit code of `log verify`.
    code: i32,
    /// Text in stderr that names the damage (any of them).
    names: &'static [&'static str],
}

fn flip_sled_file(dir: &Path, offset: usize) {
    let path = dir.join("db");
    let mut bytes = fs::read(&path).expect("read db file");
    assert!(used_bytes(&bytes) > offset + 16, "the log is big enough");
    for byte in &mut bytes[offset..offset + 16] {
        *byte ^= 0xff;
    }
    fs::write(&path, &bytes).expect("write db file");
}

/// What a flipped byte inside sled's own file is reported as: sled's
/// corruption error, or entries below the durable watermark gone.
const SLED_DAMAGE: &[&str] = &["is corrupt", "is missing"];

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "intact_log_verifies_and_reopens_with_every_event",
            damage: |_| {},
            code: 0,
            names: &[],
        },
        Case {
            name: "flipped_payload_byte_in_the_last_entry_is_a_checksum_mismatch",
            damage: |dir| {
                let last = entries() - 1;
                let mut value = raw_value(dir, last);
                // version, sequence (2 bytes from 128 on), prev_hash, length.
                value[40] ^= 0x01;
                put_raw(dir, last, value);
            },
            code: 1,
            names: &["checksum mismatch"],
        },
        Case {
            name: "flipped_checksum_byte_in_a_middle_entry_is_detected",
            damage: |dir| {
                let mut value = raw_value(dir, 4);
                let last_byte = value.len() - 1;
                value[last_byte] ^= 0x80;
                put_raw(dir, 4, value);
            },
            code: 1,
            names: &["sequence 4: checksum mismatch"],
        },
        Case {
            name: "truncated_value_is_undecodable",
            damage: |dir| {
                let value = raw_value(dir, 5);
                put_raw(dir, 5, value[..value.len() / 2].to_vec());
            },
            code: 1,
            names: &["sequence 5: undecodable entry"],
        },
        Case {
            name: "removed_key_is_a_gap",
            damage: |dir| {
                edit_raw(dir, |_, entries| {
                    entries.remove(key(3)).expect("remove");
                })
            },
            code: 1,
            names: &["sequence 3 is missing (the next entry present is sequence 4)"],
        },
        Case {
            name: "removed_last_key_is_caught_by_the_durable_watermark",
            damage: |dir| {
                edit_raw(dir, |_, entries| {
                    entries.remove(key(entries_len() - 1)).expect("remove");
                })
            },
            code: 1,
            names: &["were durable, but the log ends before it"],
        },
        Case {
            name: "removed_first_key_is_a_gap_at_zero",
            damage: |dir| {
                edit_raw(dir, |_, entries| {
                    entries.remove(key(0)).expect("remove");
                })
            },
            code: 1,
            names: &["sequence 0 is missing"],
        },
        Case {
            name: "key_that_is_not_a_sequence_is_foreign",
            damage: |dir| {
                edit_raw(dir, |_, entries| {
                    entries.insert(b"junk", b"value".to_vec()).expect("insert");
                })
            },
            code: 1,
            names: &["foreign key 0x6a756e6b"],
        },
        Case {
            name: "short_key_sorting_before_sequence_zero_is_foreign",
            damage: |dir| {
                edit_raw(dir, |_, entries| {
                    entries.insert([0u8], b"value".to_vec()).expect("insert");
                })
            },
            code: 1,
            names: &["foreign key 0x00 in the entries tree where sequence 0 was expected"],
        },
        Case {
            name: "key_in_the_wrong_tree_is_foreign",
            damage: |dir| {
                edit_raw(dir, |db, _| {
                    db.insert(key(0), b"stray".to_vec()).expect("insert");
                })
            },
            code: 1,
            names: &["foreign data in sled tree \"__sled__default\""],
        },
        Case {
            name: "unexpected_tree_is_foreign",
            damage: |dir| {
                edit_raw(dir, |db, _| {
                    db.open_tree("extra").expect("tree");
                })
            },
            code: 1,
            names: &["foreign data in sled tree \"extra\""],
        },
        Case {
            name: "valid_entry_with_wrong_prev_hash_breaks_the_chain",
            damage: |dir| {
                let original = Envelope::decode(&raw_value(dir, 6)).expect("decodes");
                let forged = Envelope::seal(6, [7; 32], original.payload)
                    .encode()
                    .expect("encodes");
                put_raw(dir, 6, forged);
            },
            code: 1,
            names: &["sequence 6: broken hash chain"],
        },
        Case {
            name: "swapped_entries_are_detected_at_the_first",
            damage: |dir| {
                let (two, three) = (raw_value(dir, 2), raw_value(dir, 3));
                put_raw(dir, 2, three);
                put_raw(dir, 3, two);
            },
            code: 1,
            names: &["sequence 2: the entry claims sequence 3"],
        },
        Case {
            name: "unsupported_version_is_reported",
            damage: |dir| {
                let mut envelope = Envelope::decode(&raw_value(dir, 2)).expect("decodes");
                envelope.format_version = LOG_FORMAT_VERSION + 1;
                envelope.checksum = envelope.compute_checksum();
                let bytes = bincode::serde::encode_to_vec(&envelope, bincode::config::standard())
                    .expect("encode");
                put_raw(dir, 2, bytes);
            },
            code: 1,
            names: &["sequence 2: unsupported format version"],
        },
        Case {
            name: "damage_inside_sleds_file_is_refused_not_silently_truncated (offset 30)",
            damage: |dir| flip_sled_file(dir, 30),
            code: 1,
            names: SLED_DAMAGE,
        },
        Case {
            name: "damage_inside_sleds_file_is_refused_not_silently_truncated (offset 2000)",
            damage: |dir| flip_sled_file(dir, 2_000),
            code: 1,
            names: SLED_DAMAGE,
        },
        Case {
            name: "damage_inside_sleds_file_is_refused_not_silently_truncated (offset 20000)",
            damage: |dir| flip_sled_file(dir, 20_000),
            code: 1,
            names: SLED_DAMAGE,
        },
        Case {
            name: "sled_corruption_error_names_the_path",
            damage: |dir| flip_sled_file(dir, 30),
            code: 1,
            names: &["no automatic repair is attempted", "is missing"],
        },
        Case {
            name: "missing_watermark_is_refused",
            damage: |dir| fs::remove_file(dir.join("fleetweft-durable")).expect("remove"),
            code: 1,
            names: &["durable watermark file `fleetweft-durable` is missing"],
        },
        Case {
            name: "wrong_log_marker_is_not_a_log",
            damage: |dir| {
                edit_raw(dir, |db, _| {
                    db.open_tree("meta")
                        .and_then(|meta| meta.insert("format", "something-else"))
                        .expect("overwrite marker");
                })
            },
            code: 2,
            names: &["unknown log marker \"something-else\""],
        },
        Case {
            name: "payload_hook_sees_every_event_and_can_reject_one (a rule broken)",
            damage: |dir| {
                // Replaced by a log whose last event breaks S3, written
                // behind the controller's back (as in cli.rs).
                fs::remove_dir_all(dir).expect("remove");
                let mut state = ControllerState::default();
                let mut events = Vec::new();
                for input in [
                    Input::StartRollout { plan: plan(false) },
                    Input::Timeout { op: OpId(0) },
                ] {
                    for event in step(&state, &input).expect("accepted") {
                        apply(&mut state, &event);
                        events.push(event);
                    }
                }
                events.push(Event::OpSettled {
                    op: OpId(0),
                    outcome: Outcome::NotApplied,
                });
                let (log, _) = EventLog::<Event>::open(dir).expect("open");
                let _acknowledged = log.append(events).expect("append");
                log.close().expect("close");
            },
            code: 1,
            names: &["rule S3"],
        },
        // The tester's cases: raw damage to sled's own file.
        Case {
            name: "tester: three flipped bytes in sled's file",
            damage: |dir| {
                let path = dir.join("db");
                let mut bytes = fs::read(&path).expect("read db file");
                let used = used_bytes(&bytes);
                for offset in [used / 4, used / 2, 3 * used / 4] {
                    bytes[offset] ^= 0x5a;
                }
                fs::write(&path, &bytes).expect("write db file");
            },
            code: 1,
            names: SLED_DAMAGE,
        },
        Case {
            name: "tester: sled's file truncated to half",
            damage: |dir| {
                let path = dir.join("db");
                let bytes = fs::read(&path).expect("read db file");
                fs::write(&path, &bytes[..used_bytes(&bytes) / 2]).expect("truncate");
            },
            code: 1,
            names: SLED_DAMAGE,
        },
    ]
}

/// `entries()` for use inside a sled edit (the template is already built).
fn entries_len() -> u64 {
    entries()
}

#[test]
fn every_damage_leaves_the_log_unchanged_and_is_still_named() {
    let cases = cases();
    for case in &cases {
        let (_temp, dir) = controller_log();
        (case.damage)(&dir);
        inspect_unchanged(case.name, "--data", &dir, case.code, case.names);
        // And once more through the data directory that holds `log/`.
        if case.code != 0 {
            continue;
        }
        let data = dir.parent().expect("data dir");
        inspect_unchanged(case.name, "--data", data, 0, &[]);
    }
    eprintln!(
        "{} cases x {{verify, show}}: every file's SHA-256 unchanged",
        cases.len()
    );
}

#[test]
fn the_damage_is_named_as_before_and_the_summary_is_the_same_through_the_data_dir() {
    let (temp, dir) = controller_log();
    let direct = run("verify", "--data", &dir);
    let via_data = run("verify", "--data", temp.path());
    assert_eq!(direct.status.code(), Some(0), "{}", text(&direct.stderr));
    assert_eq!(
        via_data.status.code(),
        Some(0),
        "{}",
        text(&via_data.stderr)
    );
    assert_eq!(text(&direct.stdout), text(&via_data.stdout));
    assert!(text(&direct.stdout).contains(&format!("entries:       {}", entries())));
    // The damaged sequence is named as `corruption.rs` names it.
    let last = entries() - 1;
    let mut value = raw_value(&dir, last);
    value[40] ^= 0x01;
    put_raw(&dir, last, value);
    let out = run("verify", "--data", temp.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains(&format!("sequence {last}: checksum mismatch")),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn directories_without_a_log_are_not_a_log_and_stay_as_they_were() {
    let temp = tempfile::tempdir().expect("temp dir");
    let missing = temp.path().join("missing");
    inspect_unchanged(
        "missing",
        "--data",
        &missing,
        2,
        &["is not a Fleetweft log"],
    );
    assert!(!missing.exists(), "nothing created");

    let empty = temp.path().join("empty");
    fs::create_dir(&empty).expect("mkdir");
    inspect_unchanged("empty", "--data", &empty, 2, &["is not a Fleetweft log"]);

    let other = temp.path().join("other-files");
    fs::create_dir(&other).expect("mkdir");
    fs::write(other.join("notes.txt"), "hello").expect("write");
    inspect_unchanged(
        "other files",
        "--data",
        &other,
        2,
        &["is not a Fleetweft log"],
    );

    // A sled database that is not a log: opening it in place would write.
    let plain = temp.path().join("plain-sled");
    {
        let db = eventlog::sled_config(&plain).open().expect("plain sled db");
        db.insert("k", "v").expect("insert");
        db.flush().expect("flush");
    }
    inspect_unchanged(
        "plain sled db",
        "--data",
        &plain,
        2,
        &["the sled database has no `meta` tree"],
    );
}

/// An agent journal with an accepted op and a failed fetch.
fn agent_journal(dir: &Path) {
    let mut journal = Journal::open(dir).expect("journal");
    journal
        .append(vec![
            Record::Core(AgentEvent::Accepted {
                op: OpId(7),
                generation: Generation(1),
                release: Digest::repeat(2),
            }),
            Record::Pending {
                op: OpId(7),
                stage: Stage::Fetch,
                fingerprint: Digest::repeat(2),
                attempt_id: 1,
                budget_left: 2,
            },
            Record::Failed {
                op: OpId(7),
                stage: Stage::Fetch,
                class: agent::recovery::ErrorClass::Transient,
                bundle_missing: false,
                reason: "connection reset".into(),
            },
        ])
        .expect("append");
    journal.close().expect("close");
}

#[test]
fn an_agent_journal_is_read_with_journal_and_named_with_data() {
    let temp = tempfile::tempdir().expect("temp dir");
    let agent_data = temp.path().join("agent");
    let journal = agent_data.join("journal");
    agent_journal(&journal);

    for dir in [&journal, &agent_data] {
        settle(&journal);
        let before = tree(dir);
        let out = run("verify", "--journal", dir);
        let stdout = text(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{}{stdout}", text(&out.stderr));
        assert!(stdout.contains("agent journal"), "{stdout}");
        assert!(stdout.contains("entries:       3"), "{stdout}");
        assert!(
            stdout.contains("op:            op7 (v2, gen 1)"),
            "{stdout}"
        );
        assert!(
            stdout.contains("op7: fetch failed (transient): connection reset"),
            "{stdout}"
        );
        let out = run("show", "--journal", dir);
        let stdout = text(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert!(
            stdout.contains("accepts op7 (v2, gen 1) and starts staging it"),
            "{stdout}"
        );
        assert!(stdout.contains("op7: fetch starts (attempt 1"), "{stdout}");
        let after = tree(dir);
        assert!(before == after, "changed: {}", changes(&before, &after));
    }

    // Pointed at with --data, the journal is named, not called damaged.
    inspect_unchanged(
        "journal via --data",
        "--data",
        &journal,
        2,
        &["is an agent journal, not a controller log: use --journal"],
    );
    inspect_unchanged(
        "agent data dir via --data",
        "--data",
        &agent_data,
        2,
        &["data directory of an agent"],
    );
    // And a controller log with --journal.
    let (_log_temp, log) = controller_log();
    inspect_unchanged(
        "controller log via --journal",
        "--journal",
        &log,
        2,
        &["is a controller log, not an agent journal: use --data"],
    );
    let out = run("verify", "--data", &journal);
    let stderr = text(&out.stderr);
    assert!(!stderr.contains("damaged"), "{stderr}");
}

#[test]
fn a_damaged_agent_journal_is_damaged_under_journal_and_unchanged() {
    let temp = tempfile::tempdir().expect("temp dir");
    let journal = temp.path().join("journal");
    agent_journal(&journal);
    let mut value = raw_value(&journal, 1);
    let last_byte = value.len() - 1;
    value[last_byte] ^= 0x01;
    put_raw(&journal, 1, value);
    inspect_unchanged(
        "damaged journal",
        "--journal",
        &journal,
        1,
        &["sequence 1: checksum mismatch"],
    );
}

#[test]
fn a_log_in_use_is_reported_in_use_not_damaged_and_not_read() {
    let (temp, dir) = controller_log();
    let controller = controller::driver::Controller::open(&dir).expect("open");
    std::thread::sleep(std::time::Duration::from_millis(200));
    let before = tree(&dir);
    for command in ["verify", "show"] {
        let out = run(command, "--data", temp.path());
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "`log {command}`: {stderr}");
        assert!(
            stderr.contains("is in use by a running controller"),
            "{stderr}"
        );
        assert!(!stderr.contains("damaged"), "{stderr}");
        assert!(out.stdout.is_empty(), "nothing shown");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_fleetweft"))
        .args(["log", "verify", "--json", "--data"])
        .arg(&dir)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(3));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(json["error"], "in use");
    let after = tree(&dir);
    assert!(
        before == after,
        "the commands wrote: {}",
        changes(&before, &after)
    );
    drop(controller);
}

#[test]
fn printable_escapes_every_control_character_and_the_backslash() {
    use logtools::inspect::printable;
    assert_eq!(printable("plain text, ünïcödé"), "plain text, ünïcödé");
    assert!(matches!(printable("plain"), std::borrow::Cow::Borrowed(_)));
    assert_eq!(
        printable("a\x1b[31mb\rc\nd\te\u{7f}f\u{9b}g\0"),
        r"a\u{1b}[31mb\rc\nd\te\u{7f}f\u{9b}g\u{0}"
    );
    // An escape can never be forged by typing one.
    assert_eq!(printable(r"x\u{1b}"), r"x\\u{1b}");
    for c in (0..=0x10ffff).filter_map(char::from_u32) {
        let shown = printable(&c.to_string()).into_owned();
        assert!(!shown.chars().any(char::is_control), "{c:?} -> {shown:?}");
    }
}

#[test]
fn printable_json_escapes_what_json_leaves_raw() {
    use logtools::inspect::printable_json;
    let json = serde_json::to_string(&serde_json::json!({ "t": "a\u{7f}b\u{9b}c\x1b\u{a0}" }))
        .expect("json");
    let shown = printable_json(&json);
    assert_eq!(
        shown,
        r#"{"t":"a\u007fb\u009bc\u001b\u00a0"}"#.replace(r"\u00a0", "\u{a0}")
    );
    assert!(!shown.chars().any(char::is_control));
    let back: serde_json::Value = serde_json::from_str(&shown).expect("still JSON");
    assert_eq!(back["t"], "a\u{7f}b\u{9b}c\x1b\u{a0}");
}
