//! The public route end to end: a real Python app under the supervisor,
//! the proxy stamping its identity, and the probe judging the answer.

use agent::probe::{probe, ProbeExpect};
use agent::proxy::{serve, Backend, Route};
use agent::supervisor::{route_process, AppSpec, Instance};
use model::{Digest, ProbeVerdict};
use std::collections::HashMap;
use std::path::PathBuf;

fn hello_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/hello")
}

/// The sample app as the supervisor starts it for a bundle of version v1:
/// the agent sets FLEETWEFT_VERSION from the manifest.
fn spec(release: Digest, extra_env: Vec<(String, String)>) -> AppSpec {
    let mut env = vec![("FLEETWEFT_VERSION".to_string(), "v1".to_string())];
    env.extend(extra_env);
    AppSpec {
        release,
        code: release,
        dir: hello_dir(),
        run: vec!["python3".into(), "app.py".into()],
        env,
        limits: Default::default(),
        cgroups: true,
        data: None,
    }
}

fn expect() -> ProbeExpect {
    ProbeExpect {
        path: "/hello".into(),
        expect_status: 200,
        expect_body: "hello from v1".into(),
        expect_json: None,
    }
}

async fn public_route(route: Route) -> u16 {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(serve(listener, route));
    port
}

#[tokio::test]
async fn route_serves_the_instance_and_names_it() {
    let release = Digest::repeat(0xa1);
    let mut app = Instance::start(spec(release, vec![]))
        .await
        .expect("start app");
    let route = Route::default();
    let port = public_route(route.clone()).await;

    // Nothing installed yet: unreachable, no identity claimed.
    let (nothing, _) = probe(port, &expect(), None).await;
    assert_eq!(nothing.verdict, ProbeVerdict::Unreachable);
    assert_eq!(nothing.identity, None);
    assert_eq!(nothing.process_restarts, None, "no process was observed");

    route.switch(Some(Backend {
        port: app.port,
        release,
    }));
    let (seen, answer) = probe(port, &expect(), Some(app.sample())).await;
    assert_eq!(seen.verdict, ProbeVerdict::Pass, "{answer:?}");
    assert_eq!(seen.identity, Some(release));
    assert_eq!(seen.process_restarts, Some(0));

    // The process dies: the route no longer answers and claims nothing.
    app.stop().await;
    let (down, _) = probe(port, &expect(), Some(app.sample())).await;
    assert_eq!(down.verdict, ProbeVerdict::Unreachable);
    assert_eq!(down.identity, None);
    assert!(!down.process_healthy);
    assert_eq!(
        down.process_uptime_ms,
        Some(0),
        "a dead process has no uptime"
    );

    // The supervisor brings it back.
    assert!(app.keep_alive().await);
    let (back, _) = probe(port, &expect(), Some(app.sample())).await;
    assert_eq!(back.verdict, ProbeVerdict::Pass);
    assert_eq!(app.restart_count, 1);
    app.stop().await;
}

/// The observation the daemon records carries the supervisor's own numbers
/// for the process behind the route: its real restart count (also across a
/// fresh start that replaced a dead instance) and the current process's
/// uptime.
#[tokio::test]
async fn the_route_observation_carries_the_supervisors_restart_count_and_uptime() {
    let release = Digest::repeat(0xa3);
    let first = Instance::start(spec(release, vec![]))
        .await
        .expect("start app");
    let route = Route::default();
    let port = public_route(route.clone()).await;
    let backend = Backend {
        port: first.port,
        release,
    };
    route.switch(Some(backend));
    let mut instances = HashMap::from([(release, first)]);

    // Only the release the route forwards to is sampled.
    assert_eq!(route_process(None, &mut instances), None);
    let other = Backend {
        port: backend.port,
        release: Digest::repeat(0xff),
    };
    assert_eq!(route_process(Some(other), &mut instances), None);

    // Killed twice, restarted twice by the supervisor.
    for _ in 0..2 {
        let app = instances.get_mut(&release).expect("instance");
        app.stop().await;
        assert!(app.keep_alive().await);
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let (seen, answer) = probe(
        port,
        &expect(),
        route_process(route.current(), &mut instances),
    )
    .await;
    assert_eq!(seen.verdict, ProbeVerdict::Pass, "{answer:?}");
    assert!(seen.process_healthy);
    assert_eq!(seen.process_restarts, Some(2));
    let uptime = seen.process_uptime_ms.expect("uptime observed");
    assert!(
        (300..60_000).contains(&uptime),
        "uptime of the restarted process: {uptime} ms"
    );

    // A fresh start replacing a dead instance is one more restart.
    let mut dead = instances.remove(&release).expect("instance");
    dead.stop().await;
    let mut fresh = Instance::start(spec(release, vec![]))
        .await
        .expect("start app");
    fresh.carry_restarts_from(&dead);
    route.switch(Some(Backend {
        port: fresh.port,
        release,
    }));
    instances.insert(release, fresh);
    let (seen, _) = probe(
        port,
        &expect(),
        route_process(route.current(), &mut instances),
    )
    .await;
    assert_eq!(seen.process_restarts, Some(3));
    for app in instances.values_mut() {
        app.stop().await;
    }
}

#[tokio::test]
async fn a_healthy_process_with_the_wrong_answer_is_a_wrong_answer() {
    let release = Digest::repeat(0xa2);
    let mut app = Instance::start(spec(
        release,
        vec![("HELLO_ANSWER_WRONGLY".into(), "1".into())],
    ))
    .await
    .expect("start app");
    let route = Route::default();
    route.switch(Some(Backend {
        port: app.port,
        release,
    }));
    let port = public_route(route).await;
    let (seen, answer) = probe(port, &expect(), Some(app.sample())).await;
    assert_eq!(seen.verdict, ProbeVerdict::WrongAnswer, "{answer:?}");
    assert_eq!(seen.identity, Some(release));
    assert!(seen.process_healthy);
    app.stop().await;
}

/// SPEC §6 "exact or JSON field": the same app judged by a field of its
/// JSON answer, including the release digest the supervisor injected and
/// the app echoes; a wrong value (healthy process) is a wrong answer.
#[tokio::test]
async fn a_probe_can_judge_a_json_field_of_the_answer() {
    use protocol::bundle::JsonField;
    let release = Digest::repeat(0xa3);
    let json = |field: &str| ProbeExpect {
        path: "/status".into(),
        expect_status: 200,
        expect_body: String::new(),
        expect_json: Some(JsonField::parse(field).expect("field")),
    };
    for (env, field, verdict) in [
        (vec![], r#"/version="v1""#.to_string(), ProbeVerdict::Pass),
        (
            vec![],
            format!("/release={:?}", release.to_hex()),
            ProbeVerdict::Pass,
        ),
        (
            vec![],
            r#"/version="v2""#.to_string(),
            ProbeVerdict::WrongAnswer,
        ),
        (
            vec![("HELLO_ANSWER_WRONGLY".to_string(), "1".to_string())],
            r#"/version="v1""#.to_string(),
            ProbeVerdict::WrongAnswer,
        ),
    ] {
        let mut app = Instance::start(spec(release, env.clone()))
            .await
            .expect("start app");
        let route = Route::default();
        route.switch(Some(Backend {
            port: app.port,
            release,
        }));
        let port = public_route(route).await;
        let (seen, answer) = probe(port, &json(&field), Some(app.sample())).await;
        assert_eq!(seen.verdict, verdict, "{env:?} {field}: {answer:?}");
        assert!(seen.process_healthy);
        app.stop().await;
    }
}
