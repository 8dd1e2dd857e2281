//! The console's tests: the overview's (moved from `dashboard.rs`) and
//! every page's, in process on model-built states.

use super::{data, escape, render, DashboardData};
use crate::daemon::view::fixture::fleet;
use crate::daemon::view::{node_page, op_page, NodeDto, NodeQuery, OpQuery, Page, PAGE_LIMIT_MAX};

fn node(drifted: bool) -> NodeDto {
    NodeDto {
        name: "node-a".into(),
        connected: true,
        confirmed: Some("ab".repeat(32)),
        reported_serving: None,
        live_op: None,
        drifted,
        observed: None,
        quarantined: None,
        labels: Default::default(),
        public: "127.0.0.1:8080".into(),
        retired: false,
        state: if drifted { "drifted" } else { "idle" }.into(),
        arch: Some("x86_64".into()),
        os: Some("linux".into()),
    }
}

fn page(drifted: bool) -> String {
    let snap = fleet(1, 1, 0, 0);
    let proof = proof::recorded_node_proof(
        &model::controller::ControllerState::default(),
        model::NodeId(0),
        "node-a",
    );
    let d = data(&snap, vec![]);
    render(&DashboardData {
        nodes: Page {
            items: vec![node(drifted)],
            next: None,
            total: Some(1),
        },
        proofs: vec![proof::NodeProof {
            verdict: proof::Verdict::Verified,
            ..proof
        }],
        ..d
    })
}

/// A standby's page says so and names the leader; a leader's does not.
#[test]
fn a_standby_view_shows_its_banner() {
    let snap = fleet(1, 1, 0, 0);
    let mut d = data(&snap, vec![]);
    assert!(!render(&d).contains("id=\"standby\""));
    d.status.role = crate::daemon::role::Role::Standby;
    d.status.log_sequence = Some(41);
    d.status.leader = Some("http://10.0.0.2:7800".into());
    let html = render(&d);
    assert!(
        html.contains("STANDBY VIEW, leader is <a href=\"http://10.0.0.2:7800/\">"),
        "{html}"
    );
    assert!(html.contains("as of sequence 41"), "{html}");
}

/// At 80% of the storage quota the page shows the view layer's
/// warning, and `/metrics` both gauges; below it, no banner.
#[test]
fn a_nearly_full_storage_shows_its_banner_and_gauges() {
    let mut snap = fleet(1, 1, 0, 0);
    let quota = 1_000_000_000;
    snap.storage = Some(api::view::storage::StorageUse {
        bytes: quota / 2,
        quota_bytes: Some(quota),
    });
    assert!(!render(&data(&snap, vec![])).contains("storage-nearly-full"));
    let m = super::metrics(&snap, std::time::SystemTime::now());
    assert!(m.contains("\nfleetweft_storage_bytes 500000000\n"), "{m}");
    assert!(
        m.contains("\nfleetweft_storage_quota_bytes 1000000000\n"),
        "{m}"
    );
    snap.storage = Some(api::view::storage::StorageUse {
        bytes: quota * 9 / 10,
        quota_bytes: Some(quota),
    });
    let html = render(&data(&snap, vec![]));
    let warning = api::view::storage::sentence(quota * 9 / 10, quota);
    assert!(
        html.contains(&format!(
            "<p class=\"quarantined\" id=\"storage-nearly-full\">{}</p>",
            escape(&warning)
        )),
        "{html}"
    );
}

/// A drifted node has its own style, never the green of a verified one.
#[test]
fn a_drifted_node_is_shown_drifted_not_verified() {
    let drifted = page(true);
    assert!(
        drifted.contains("<td class=\"drifted\">DRIFTED</td>"),
        "{drifted}"
    );
    assert!(!drifted.contains("<td class=\"verified\">"), "{drifted}");
    let fine = page(false);
    assert!(
        fine.contains("<td class=\"verified\">verified</td>"),
        "{fine}"
    );
    assert!(!fine.contains("DRIFTED"));
}

/// A node ahead of the log: a banner on the dashboard (the view's
/// warning) and the `/metrics` gauge; none without one.
#[test]
fn the_log_behind_the_fleet_is_a_banner_and_a_gauge() {
    let mut snap = fleet(2, 1, 0, 0);
    let now = std::time::SystemTime::now();
    let metric = crate::daemon::view::ahead::METRIC;
    assert!(super::metrics(&snap, now).contains(&format!("\n{metric} 0\n")));
    assert!(!render(&data(&snap, vec![])).contains("log-behind-"));
    let log = snap.state.generation.0;
    snap.ahead_of_log
        .insert(model::NodeId(1), model::Generation(log + 1));
    let m = super::metrics(&snap, now);
    assert!(
        m.contains(&format!("# TYPE {metric} gauge\n{metric} 1\n")),
        "{m}"
    );
    let html = render(&data(&snap, vec![]));
    let warning = crate::daemon::view::ahead::sentence("n1", log + 1, log);
    assert!(
        html.contains(&format!(
            "<p class=\"quarantined\" id=\"log-behind-n1\">{}</p>",
            escape(&warning)
        )),
        "{html}"
    );
}

/// Most bytes the dashboard may render for a 10,000-node fleet.
const DASHBOARD_BYTES_MAX: usize = 200 * 1024;

/// 10,000 enrolled nodes and a rollout over all of them (500 slots,
/// 300 ops verified, 150 UNKNOWN): the dashboard stays under 200 KB,
/// shows the counts and the bounded handover list, and every page
/// endpoint's reply is bounded by its limit.
#[test]
fn the_dashboard_of_ten_thousand_nodes_stays_small() {
    let snap = fleet(10_000, 500, 300, 150);
    let html = render(&data(&snap, vec![]));
    eprintln!("dashboard of 10,000 nodes: {} bytes", html.len());
    assert!(
        html.len() < DASHBOARD_BYTES_MAX,
        "{} bytes for 10,000 nodes",
        html.len()
    );
    assert!(html.contains("10000 enrolled"), "the counts are shown");
    assert!(html.contains("150 UNKNOWN"), "the UNKNOWN count is shown");
    assert!(html.contains("<a href=\"/nodes?after=n49\">next page</a>"));
    assert!(
        html.contains("the first 100 of"),
        "the handover list is bounded"
    );
    // The summary behind /api/status is bounded too.
    let summary = serde_json::to_vec(&crate::daemon::view::status_dto(&snap)).expect("json");
    eprintln!("/api/status of 10,000 nodes: {} bytes", summary.len());
    assert!(
        summary.len() < 64 * 1024,
        "{} bytes of status",
        summary.len()
    );
    for limit in [1, 100, PAGE_LIMIT_MAX] {
        let nodes = node_page(
            &snap,
            &NodeQuery {
                limit,
                ..NodeQuery::default()
            },
        );
        assert_eq!(nodes.items.len(), limit);
        let ops = op_page(
            &snap.state,
            &OpQuery {
                limit,
                ..OpQuery::default()
            },
        );
        assert_eq!(ops.items.len(), limit.min(snap.state.ops_granted()));
        let json = serde_json::to_vec(&ops).expect("json").len()
            + serde_json::to_vec(&nodes).expect("json").len();
        // A page's size follows its limit, not the fleet.
        assert!(json < limit * 2_048, "{json} bytes for {limit} items");
    }
}

#[test]
fn escape_covers_markup_and_quotes() {
    assert_eq!(
        escape(r#"<a href="x">&'</a>"#),
        "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;"
    );
}

/// A fleet of `nodes` with every other node quarantined: the fleet map's
/// worst case (no two neighbours alike).
fn checkered(nodes: u32) -> crate::daemon::core::Snapshot {
    let mut snap = fleet(nodes, 500, 300, 150);
    for n in (1..nodes).step_by(2) {
        testkit::accept(
            &mut snap.state,
            model::controller::Input::IdentityConflict {
                node: model::NodeId(n),
                first_peer: "10.0.0.1:1".into(),
                second_peer: "10.0.0.2:2".into(),
            },
        );
    }
    snap
}

/// Every page of a 10,000-node fleet (a rollout over all of it, 500
/// slots, 300 ops verified, 150 UNKNOWN) stays under 200 KB, and so does
/// the fleet map when no two neighbours share a state.
#[test]
fn every_page_of_ten_thousand_nodes_stays_under_200_kb() {
    let snap = fleet(10_000, 500, 300, 150);
    let mut sizes = Vec::new();
    for (name, html) in super::every_page(&snap).expect("rollout 0") {
        sizes.push(format!("{name}: {} bytes", html.len()));
        assert!(
            html.len() < super::PAGE_BYTES_MAX,
            "{name}: {} bytes for 10,000 nodes",
            html.len()
        );
        assert!(html.starts_with("<!DOCTYPE html>"), "{name}");
    }
    let worst = super::fleet::render(&checkered(10_000), 0);
    sizes.push(format!("fleet map, checkered: {} bytes", worst.len()));
    assert!(worst.len() < super::PAGE_BYTES_MAX, "{} bytes", worst.len());
    assert_eq!(
        worst.matches("<b class=mQ>Q</b>").count(),
        5_000,
        "one cell per quarantined node"
    );
    eprintln!("pages of 10,000 nodes:\n  {}", sizes.join("\n  "));
}

/// The lines of `html` that show op `op` (its link text).
fn lines_naming<'a>(html: &'a str, op: &str) -> Vec<&'a str> {
    html.lines()
        .filter(|l| l.contains(&format!(">{op}<")) || l.contains(&format!(">{op} UNKNOWN<")))
        .collect()
}

/// The classes of success.
const GREEN: [&str; 4] = ["class=\"ok\"", "class=\"verified\"", "c-ok", "class=ok"];

/// An UNKNOWN op is never shown in the class of success on any page, and
/// its own page's state reads UNKNOWN in the neutral class; no class
/// mapping makes any state but `verified` green.
#[test]
fn an_unknown_op_is_never_green() {
    use crate::daemon::view::waves::PlanNodeState;
    use crate::daemon::view::OpState;
    for state in OpState::ALL {
        let green = super::op_class(state) == "ok";
        assert_eq!(green, state == OpState::Verified, "{state:?}");
        assert_eq!(super::plan_class(PlanNodeState::Op(state)) == "ok", green);
    }
    assert_ne!(super::plan_class(PlanNodeState::NotGranted), "ok");
    let snap = fleet(60, 10, 5, 3);
    let unknown = crate::daemon::view::unknown_ops(&snap.state, 100);
    assert_eq!(unknown.len(), 3);
    let pages = super::every_page(&snap).expect("rollout 0");
    for o in &unknown {
        let mut shown = 0;
        for (name, html) in &pages {
            for line in lines_naming(html, &o.id) {
                shown += 1;
                for green in GREEN {
                    assert!(
                        !line.contains(green),
                        "{name}: UNKNOWN {} shown as success: {line}",
                        o.id
                    );
                }
            }
        }
        assert!(shown > 0, "{} is shown somewhere", o.id);
    }
    let (_, op_page) = pages.iter().find(|(n, _)| n == "UNKNOWN op").unwrap();
    assert!(
        op_page.contains("<p id=\"op-state\">state <span class=\"unknown\">unknown</span>"),
        "{op_page}"
    );
    assert!(op_page.contains("id=\"why-unknown\""), "{op_page}");
    assert!(
        op_page.contains("<span class=\"unowned\">unowned</span>"),
        "{op_page}"
    );
}

/// A rollout with an op holding a slot never reads `completed`: not while
/// it is active with UNKNOWN ops, and not even if its recorded status
/// said so (a state the model does not reach, forced here).
#[test]
fn a_rollout_with_an_unresolved_op_never_reads_completed() {
    use model::controller::RolloutStatus;
    let mut snap = fleet(60, 10, 5, 3);
    for (name, html) in super::every_page(&snap).expect("rollout 0") {
        assert!(!html.contains(">completed<"), "{name}: {html}");
    }
    let mut r = (*snap.state.rollouts[0]).clone();
    assert!(r.occupied > 0);
    r.status = RolloutStatus::Completed;
    snap.state.rollouts.set(0, std::sync::Arc::new(r));
    let r = snap.state.rollout(model::RolloutId(0)).unwrap();
    let badge = super::rollout::status_badge(&snap.state, r);
    assert!(!badge.contains("completed"), "{badge}");
    assert!(badge.contains("class=\"unknown\""), "{badge}");
    for (name, html) in super::every_page(&snap).expect("rollout 0") {
        assert!(!html.contains(">completed<"), "{name}");
        if name.starts_with("rollout") {
            assert!(html.contains("still holding a slot"), "{name}");
        }
    }
}

/// Text from the state is escaped on every page: a label value with
/// markup shows as text.
#[test]
fn the_pages_escape_what_they_show() {
    let mut snap = fleet(4, 2, 1, 1);
    testkit::accept(
        &mut snap.state,
        model::controller::Input::IdentityConflict {
            node: model::NodeId(2),
            first_peer: "<script>x</script>".into(),
            second_peer: "10.0.0.2:2".into(),
        },
    );
    for (name, html) in super::every_page(&snap).expect("rollout 0") {
        assert!(!html.contains("<script>"), "{name}: {html}");
    }
}

/// An op's sequence diagram draws every event of its timeline with its
/// sequence, the node's lane under the node's name, and says how its
/// timeline ends: complete, cut short (from where the rest is), or not
/// dated by the log index. At the timeline's bound it stays under the
/// page bound.
#[test]
fn an_op_diagram_draws_its_timeline_under_the_nodes_name() {
    use super::op::{diagram_svg, Timeline, OP_TIMELINE_EVENTS_MAX};
    let snap = fleet(10_000, 500, 300, 150);
    let s = &snap.state;
    let op = crate::daemon::view::unknown_ops(s, 1)[0].id[2..]
        .parse()
        .map(model::OpId)
        .expect("an op id");
    let node = s.op_summary(op).expect("the op").node;
    let events = |n: u64| -> Vec<_> {
        (0..n)
            .map(|q| {
                let e = model::controller::Event::OpUnknown {
                    op,
                    reason: model::controller::UnknownReason::Silence,
                };
                crate::daemon::view::event_dto(&s.roster, 9_000 + q, e)
            })
            .collect()
    };
    let whole = Timeline {
        events: events(3),
        stopped_at: None,
    };
    let svg = diagram_svg(&snap, op, Some(&whole));
    assert!(svg.starts_with("<svg"), "{svg}");
    assert!(svg.contains(&escape(&s.roster.display_name(node))), "{svg}");
    for q in 9_000..9_003 {
        assert!(svg.contains(&format!(">{q} {op} is UNKNOWN")), "{q}: {svg}");
    }
    assert!(svg.contains(&format!("{op}: every event of the op, 3 drawn")));
    let cut = Timeline {
        events: events(OP_TIMELINE_EVENTS_MAX as u64),
        stopped_at: Some(19_000),
    };
    let svg = diagram_svg(&snap, op, Some(&cut));
    assert!(svg.contains("the rest from log sequence 19000 on"), "{svg}");
    assert!(
        svg.len() < super::PAGE_BYTES_MAX,
        "{} bytes for {OP_TIMELINE_EVENTS_MAX} events",
        svg.len()
    );
    let undated = diagram_svg(&snap, op, None);
    assert!(undated.contains("not dated by the log index"), "{undated}");
}

/// A rollout's page shows how long its settled ops took: the count in
/// each duration's row, and the ops granted before this controller
/// started counted apart, never given a duration.
#[test]
fn the_rollout_page_shows_op_durations_and_counts_undated_ops_apart() {
    use model::{OpId, RolloutId};
    use std::time::{Duration, Instant};
    let mut snap = fleet(10, 5, 0, 0);
    let r = RolloutId(0);
    let page = |snap: &crate::daemon::core::Snapshot| {
        let rollout = snap.state.rollout(r).expect("the rollout").clone();
        super::rollout::render_one(snap, &rollout, None, None)
    };
    assert!(page(&snap).contains("no op of this rollout settled while this controller ran"));
    // op1 is undated (held a slot at the start), op2 is measured: 700 ms.
    let mut durations = crate::daemon::view::durations::OpDurations::default();
    durations.undate_all(&snap.state);
    let state_before = snap.state.clone();
    let t0 = Instant::now();
    testkit::fixtures::verify(&mut snap.state, 1);
    durations.touched(&snap.state, OpId(1), t0);
    // op6 is granted after the start (op1's slot freed): its clock runs.
    durations.touched(&snap.state, OpId(6), t0);
    assert!(
        state_before.op(OpId(6)).is_none(),
        "op6 is granted by op1's settlement"
    );
    testkit::fixtures::verify(&mut snap.state, 6);
    durations.touched(&snap.state, OpId(6), t0 + Duration::from_millis(700));
    snap.op_durations = durations;
    let html = page(&snap);
    assert!(html.contains("<tr><td>≤ 1 s</td><td>1</td>"), "{html}");
    assert!(html.contains("<tr><td>≤ 500 ms</td><td>0</td>"), "{html}");
    assert!(
        html.contains(
            "1 op(s) measured by this controller's clock; 1 more settled without a duration"
        ),
        "{html}"
    );
}

/// Every page loads the live script and keeps its content in the one
/// `<main id="main">` the script swaps; only the overview reloads by
/// itself without JavaScript, and only inside `<noscript>`.
#[test]
fn every_page_follows_the_log_and_only_the_overview_reloads_without_script() {
    let snap = fleet(100, 10, 5, 2);
    for (name, html) in super::every_page(&snap).expect("rollout 0") {
        assert!(
            html.contains("<script src=\"/live.js\" defer></script>"),
            "{name}"
        );
        assert_eq!(html.matches("<main id=\"main\">").count(), 1, "{name}");
        let reloads = html.contains("http-equiv=\"refresh\"");
        assert_eq!(reloads, name == "overview", "{name}");
        if reloads {
            assert!(
                html.contains("<noscript><meta http-equiv=\"refresh\" content=\"2\"></noscript>"),
                "{name}"
            );
        }
    }
    assert!(super::live::LIVE_JS.contains("new EventSource(\"/live\")"));
    assert!(super::live::LIVE_JS.contains("getElementById(\"main\")"));
}
