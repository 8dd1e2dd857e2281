//! Staging survives a power cut: once `install` has returned, the release
//! is whole under its final name, whatever a cut drops afterwards (run on
//! the lazy filesystem, which keeps unsynced data and names pending and
//! drops them at a cut). Skips loudly without FUSE unless
//! FLEETWEFT_REQUIRE_FUSE=1.

use agent::staging::{install, load, observe, Installed};
use lazyfs::{LazyConfig, LazyMount, TearMode};
use protocol::bundle::{self, ManifestFields, ProbeSpec};

fn signed(signing: &ed25519_dalek::SigningKey) -> Vec<u8> {
    bundle::sign(
        signing,
        b"print('hello')\n",
        ManifestFields {
            name: "hello".into(),
            version: "1".into(),
            app_file_name: "app.py".into(),
            run: vec!["python3".into(), "app.py".into()],
            probe: ProbeSpec {
                path: "/hello".into(),
                expect_status: 200,
                expect_body: "hello".into(),
                expect_json: None,
            },
        },
    )
    .expect("sign")
}

#[test]
fn an_installed_release_is_whole_after_a_power_cut() {
    let backing = tempfile::tempdir().expect("tempdir");
    let mnt = tempfile::tempdir().expect("tempdir");
    let mut config = LazyConfig::new(backing.path());
    config.tear = TearMode::Zero;
    let mount = match LazyMount::mount(mnt.path(), config) {
        Ok(mount) => mount,
        Err(e) if std::env::var("FLEETWEFT_REQUIRE_FUSE").as_deref() != Ok("1") => {
            eprintln!("\n!!!!! SKIPPING staging power-loss test: cannot mount FUSE ({e}) !!!!!\n");
            return;
        }
        Err(e) => panic!("FUSE mount failed and FLEETWEFT_REQUIRE_FUSE=1: {e}"),
    };
    // The data directory itself is durable, as the agent finds it.
    let data = mnt.path().join("data");
    std::fs::create_dir(&data).expect("data dir");
    std::fs::File::open(mnt.path())
        .and_then(|d| d.sync_all())
        .expect("sync the mount root");
    let (signing, verifying) = bundle::keygen();
    let bytes = signed(&signing);
    let digest = bundle::bundle_digest(&bytes);
    install(&data, &verifying, digest, &bytes).expect("install");
    let report = mount.cut();
    assert!(
        matches!(
            observe(&data, &verifying, model::platform::Arch::current(), digest),
            Installed::ReVerified(_)
        ),
        "after the cut the installed release must re-verify; the cut dropped {:?}",
        report.details
    );
    load(&data, &verifying, model::platform::Arch::current(), digest).expect("load after the cut");
}

/// Every crash point of `install` (a cut at each of its syncs, and one
/// after it returned): the release is absent or whole, never half there
/// under its final name; once `install` returned Ok it is whole.
#[test]
fn install_survives_a_cut_at_every_sync_point() {
    use lazyfs::enumerate::{every_sync_point, CutPoint};
    let dir = tempfile::tempdir().expect("tempdir");
    let (signing, verifying) = bundle::keygen();
    let bytes = signed(&signing);
    let digest = bundle::bundle_digest(&bytes);
    let setup = |backing: &std::path::Path| {
        std::fs::create_dir_all(backing.join("data")).expect("durable data dir");
    };
    let write =
        |mnt: &std::path::Path| install(&mnt.join("data"), &verifying, digest, &bytes).is_ok();
    let check = |mnt: &std::path::Path, point: CutPoint, ok: bool| {
        let seen = observe(
            &mnt.join("data"),
            &verifying,
            model::platform::Arch::current(),
            digest,
        );
        match seen {
            Installed::ReVerified(_) => {}
            Installed::Absent if !ok => {}
            other => panic!("cut {point:?} (install returned ok: {ok}): {other:?}"),
        }
    };
    match every_sync_point(dir.path(), setup, write, check) {
        Ok(figures) => {
            eprintln!("crash points: {figures:?}");
            assert!(figures.syncs >= 4, "{figures:?}");
        }
        Err(e) if std::env::var("FLEETWEFT_REQUIRE_FUSE").as_deref() != Ok("1") => {
            eprintln!("\n!!!!! SKIPPING crash-point enumeration: cannot mount FUSE ({e}) !!!!!\n");
        }
        Err(e) => panic!("FUSE mount failed and FLEETWEFT_REQUIRE_FUSE=1: {e}"),
    }
}

/// Every crash point of `load` rewriting an altered app file from its
/// verified bundle: the app file is the altered one or the bundle's, never
/// torn (an in-place rewrite left zeros after a cut).
#[test]
fn load_rewrites_an_altered_app_file_old_or_new_at_every_crash_point() {
    use lazyfs::enumerate::{every_sync_point, CutPoint};
    let dir = tempfile::tempdir().expect("tempdir");
    let (signing, verifying) = bundle::keygen();
    let bytes = signed(&signing);
    let digest = bundle::bundle_digest(&bytes);
    let altered = b"print('not what was signed')\n".to_vec();
    // Installed durably (outside any mount), then the app file altered.
    let template = tempfile::tempdir().expect("tempdir");
    install(template.path(), &verifying, digest, &bytes).expect("install");
    let app_rel = format!("releases/{}/app.py", digest.to_hex());
    std::fs::write(template.path().join(&app_rel), &altered).expect("alter");
    let setup = |backing: &std::path::Path| {
        lazyfs::enumerate::copy_tree(template.path(), &backing.join("data")).expect("copy")
    };
    let write = |mnt: &std::path::Path| {
        load(
            &mnt.join("data"),
            &verifying,
            model::platform::Arch::current(),
            digest,
        )
        .is_ok()
    };
    let check = |mnt: &std::path::Path, point: CutPoint, ok: bool| {
        let app = std::fs::read(mnt.join("data").join(&app_rel)).expect("the app file survives");
        let signed_app = b"print('hello')\n".to_vec();
        assert!(
            app == altered || app == signed_app,
            "{point:?}: the app file is torn: {app:?}"
        );
        assert!(!(ok && app != signed_app), "{point:?}: load returned Ok");
    };
    match every_sync_point(dir.path(), setup, write, check) {
        Ok(figures) => {
            eprintln!("crash points: {figures:?}");
            assert!(figures.syncs >= 2, "{figures:?}");
        }
        Err(e) if std::env::var("FLEETWEFT_REQUIRE_FUSE").as_deref() != Ok("1") => {
            eprintln!("\n!!!!! SKIPPING crash-point enumeration: cannot mount FUSE ({e}) !!!!!\n");
        }
        Err(e) => panic!("FUSE mount failed and FLEETWEFT_REQUIRE_FUSE=1: {e}"),
    }
}
