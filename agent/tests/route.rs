//! The public route end to end: a real Python app under the supervisor,
//! the proxy stamping its identity, and the probe judging the answer.

use agent::probe::{probe, ProbeExpect};
use agent::proxy::{serve, Backend, Route};
use agent::supervisor::{AppSpec, Instance};
use model::{Digest, ProbeVerdict};
use std::path::PathBuf;

fn hello_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/hello")
}

fn spec(release: Digest, env: Vec<(String, String)>) -> AppSpec {
    AppSpec {
        release,
        dir: hello_dir(),
        run: vec!["python3".into(), "app.py".into()],
        env,
    }
}

fn expect() -> ProbeExpect {
    ProbeExpect {
        path: "/hello".into(),
        expect_status: 200,
        expect_body: "hello from v1".into(),
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
    let (nothing, _) = probe(port, &expect(), false).await;
    assert_eq!(nothing.verdict, ProbeVerdict::Unreachable);
    assert_eq!(nothing.identity, None);

    route.switch(Some(Backend {
        port: app.port,
        release,
    }));
    let (seen, answer) = probe(port, &expect(), true).await;
    assert_eq!(seen.verdict, ProbeVerdict::Pass, "{answer:?}");
    assert_eq!(seen.identity, Some(release));

    // The process dies: the route no longer answers and claims nothing.
    app.stop().await;
    let (down, _) = probe(port, &expect(), false).await;
    assert_eq!(down.verdict, ProbeVerdict::Unreachable);
    assert_eq!(down.identity, None);

    // The supervisor brings it back.
    assert!(app.keep_alive().await);
    let (back, _) = probe(port, &expect(), true).await;
    assert_eq!(back.verdict, ProbeVerdict::Pass);
    assert_eq!(app.restart_count, 1);
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
    let (seen, answer) = probe(port, &expect(), app.is_alive()).await;
    assert_eq!(seen.verdict, ProbeVerdict::WrongAnswer, "{answer:?}");
    assert_eq!(seen.identity, Some(release));
    assert!(seen.process_healthy);
    app.stop().await;
}
