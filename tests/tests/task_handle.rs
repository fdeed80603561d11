//! The task handle: `client.start` answers a `Task` (its UPID, `wait`, a stream of status
//! changes, the log in pages), and the generic pager reads what PVE pages with start/limit.
//! The simulator's log shows the exact requests.

use std::time::Duration;

use futures_util::StreamExt;
use pve_sdk::generated::nodes::node::qemu::CreateVm;
use pve_sdk::task::{AwaitOptions, Task, TaskError};
use pve_sdk::Client;
use pve_sim::{SimConfig, Simulator, TaskOutcome};

fn client(sim: &Simulator) -> Client {
    Client::builder(sim.url())
        .token("root@pam!sim", "sim-secret")
        .build()
        .expect("client")
}

fn fast() -> AwaitOptions {
    AwaitOptions {
        deadline: Duration::from_secs(5),
        interval: Duration::from_millis(5),
        max_interval: Duration::from_millis(10),
        log_tail: 3,
    }
}

#[tokio::test]
async fn start_gives_a_handle_that_waits_with_the_same_semantics() {
    let sim = Simulator::start(SimConfig::default())
        .await
        .expect("starts");
    let c = client(&sim);
    let task: Task = c.start(&CreateVm::new("pve1", 100)).await.expect("starts");
    assert_eq!(
        (task.upid().task_type(), task.upid().id()),
        ("qmcreate", "100")
    );
    let mut seen = Vec::new();
    let done = task
        .wait_with(fast(), |p| {
            seen.push((p.status.clone(), p.exit_status.clone()))
        })
        .await
        .expect("succeeds");
    assert_eq!(done.exit_status, "OK");
    assert_eq!(seen, [("stopped".to_owned(), Some("OK".to_owned()))]);

    // A failing task: its log's last lines come with the error; a handle attached to the
    // UPID later (from state) waits the same way.
    sim.with_cluster(|cl| {
        cl.next_task_outcomes.insert(
            "qmcreate".into(),
            vec![TaskOutcome::Exit("disk full".into())],
        )
    });
    let failed = c.start(&CreateVm::new("pve1", 101)).await.expect("starts");
    let again = Task::attach(&c, failed.upid().clone());
    match again.wait(fast()).await {
        Err(TaskError::Failed {
            exit_status,
            log_tail,
            ..
        }) => {
            assert_eq!(exit_status, "disk full");
            assert_eq!(log_tail, ["disk full"]);
        }
        other => panic!("expected a failure, got {other:?}"),
    }
    // A UPID is one path segment; its `!` (of the token id) is percent-encoded.
    let upid0 = task.upid().as_str().replace('!', "%21");
    let upid1 = failed.upid().as_str().replace('!', "%21");
    let lines: Vec<String> = sim.requests().iter().map(|r| r.line()).collect();
    assert_eq!(
        lines,
        [
            "POST /nodes/pve1/qemu".to_owned(),
            format!("GET /nodes/pve1/tasks/{upid0}/status"),
            "POST /nodes/pve1/qemu".to_owned(),
            format!("GET /nodes/pve1/tasks/{upid1}/status"),
            format!("GET /nodes/pve1/tasks/{upid1}/log"),
        ]
    );
}

#[tokio::test]
async fn changes_stream_one_item_per_status_change_and_ends_when_stopped() {
    let sim = Simulator::start(SimConfig::default())
        .await
        .expect("starts");
    let c = client(&sim);
    sim.with_cluster(|cl| {
        cl.next_task_outcomes
            .insert("qmcreate".into(), vec![TaskOutcome::Never])
    });
    let task = c.start(&CreateVm::new("pve1", 100)).await.expect("starts");
    let mut changes = Box::pin(task.changes(fast()));
    let first = changes.next().await.expect("an item").expect("readable");
    assert_eq!(
        (first.status.as_str(), first.exit_status.as_deref()),
        ("running", None)
    );
    // While the stream polls "running" again (no items for those), the task stops.
    let key = task.upid().as_str().to_owned();
    let (next, ()) = tokio::join!(changes.next(), async {
        tokio::time::sleep(Duration::from_millis(40)).await;
        sim.with_cluster(|cl| {
            cl.tasks.get_mut(&key).expect("task").exit = Some("WARNINGS: 1".into());
        });
    });
    let last = next.expect("an item").expect("readable");
    assert_eq!(
        (last.status.as_str(), last.exit_status.as_deref()),
        ("stopped", Some("WARNINGS: 1"))
    );
    assert!(
        last.polls > first.polls + 1,
        "{} then {}",
        first.polls,
        last.polls
    );
    assert!(changes.next().await.is_none(), "the stream ends at stopped");

    // The deadline is an error item, then the end.
    sim.with_cluster(|cl| {
        cl.next_task_outcomes
            .insert("qmcreate".into(), vec![TaskOutcome::Never])
    });
    let stuck = c.start(&CreateVm::new("pve1", 101)).await.expect("starts");
    let opts = AwaitOptions {
        deadline: Duration::from_millis(30),
        ..fast()
    };
    let items: Vec<_> = stuck.changes(opts).collect().await;
    assert_eq!(items.len(), 2, "{items:?}");
    assert!(matches!(&items[0], Ok(p) if p.status == "running"));
    assert!(matches!(&items[1], Err(TaskError::Timeout { .. })));
}

#[tokio::test]
async fn the_log_is_read_in_pages_as_pve_pages_it() {
    let sim = Simulator::start(SimConfig::default())
        .await
        .expect("starts");
    let c = client(&sim);
    let task = c.start(&CreateVm::new("pve1", 100)).await.expect("starts");
    let key = task.upid().as_str().to_owned();
    sim.with_cluster(|cl| {
        cl.tasks.get_mut(&key).expect("task").log =
            (1..=120).map(|i| format!("line {i}")).collect();
    });
    sim.clear_log();

    let mut pager = task.log(50);
    let mut sizes = Vec::new();
    while let Some(page) = pager.next_page().await {
        sizes.push(page.expect("readable").len());
    }
    assert_eq!(sizes, [50, 50, 20]);
    assert_eq!(pager.position(), 120);
    let asked: Vec<Vec<(String, String)>> =
        sim.requests().iter().map(|r| r.params.clone()).collect();
    let page = |start: &str| {
        vec![
            ("limit".to_owned(), "50".to_owned()),
            ("start".to_owned(), start.to_owned()),
        ]
    };
    assert_eq!(asked, [page("0"), page("50"), page("100")]);

    // As a stream of lines, in order.
    let lines: Vec<String> = task
        .log(7)
        .items()
        .map(|l| l.expect("readable").t.unwrap_or_default())
        .collect()
        .await;
    assert_eq!(lines.len(), 120);
    assert_eq!(
        (lines[0].as_str(), lines[119].as_str()),
        ("line 1", "line 120")
    );

    // A page size that divides the log exactly: the total ends it without an empty page.
    sim.clear_log();
    let mut pager = task.log(60);
    while let Some(page) = pager.next_page().await {
        page.expect("readable");
    }
    assert_eq!(sim.requests().len(), 2, "{:?}", sim.requests());
}

#[tokio::test]
async fn every_start_limit_operation_is_paged_by_the_same_pager() {
    use pve_sdk::generated::nodes::node;
    use pve_sdk::pager::Paged;
    fn paged<O: Paged>(req: O) -> O {
        req.page(10, 5)
    }
    // The task log and the 7 other GETs PVE pages with start/limit.
    let page = pve_sdk::form::encode(&paged(node::syslog::Syslog::new("pve1"))).expect("encodes");
    assert_eq!(
        page.params,
        [
            ("limit".to_owned(), "5".to_owned()),
            ("start".to_owned(), "10".to_owned())
        ]
    );
    paged(node::tasks::NodeTasks::new("pve1"));
    paged(node::ceph::log::Log::new("pve1"));
    paged(node::firewall::log::Log::new("pve1"));
    paged(node::qemu::vmid::firewall::log::Log::new("pve1", 100));
    paged(node::lxc::vmid::firewall::log::Log::new("pve1", 100));
    paged(node::replication::id::log::ReadJobLog::new("pve1", "100-0"));
    paged(node::tasks::upid::log::ReadTaskLog::new("pve1", "UPID:..."));

    // Against the simulator (which answers syslog with an empty list): one request, no page.
    let sim = Simulator::start(SimConfig::default())
        .await
        .expect("starts");
    let mut pager = client(&sim).pages(&node::syslog::Syslog::new("pve1").start(3), 100);
    assert_eq!(
        pager.position(),
        3,
        "the request's own start is the first page's"
    );
    assert!(pager.next_page().await.is_none());
    let asked: Vec<String> = sim.requests().iter().map(|r| r.line()).collect();
    assert_eq!(asked, ["GET /nodes/pve1/syslog"]);
    assert_eq!(
        sim.requests()[0].params,
        [
            ("limit".to_owned(), "100".to_owned()),
            ("start".to_owned(), "3".to_owned())
        ]
    );
}

/// Syslog lines `{n, t}` numbered from `from`, `count` of them.
fn syslog_page(from: u64, count: u64) -> serde_json::Value {
    let lines: Vec<serde_json::Value> = (from..from + count)
        .map(|n| serde_json::json!({"n": n, "t": format!("line {n}")}))
        .collect();
    serde_json::json!({ "data": lines })
}

fn wire_client(server: &pve_sim::wire::WireServer) -> Client {
    Client::builder(server.url())
        .token("root@pam!t", "s")
        .build()
        .expect("client")
}

#[tokio::test]
async fn a_server_ignoring_start_and_limit_without_a_total_is_read_once_not_forever() {
    use pve_sdk::generated::nodes::node::syslog::Syslog;
    use pve_sim::wire::{Reply, WireServer};
    // Every answer is the whole log (5 lines), whatever start and limit say, and no total.
    let all = Reply::json("200 OK", &syslog_page(1, 5));
    let server = WireServer::start(vec![all.clone(), all.clone(), all])
        .await
        .expect("starts");
    let mut pager = wire_client(&server).pages(&Syslog::new("pve1"), 2);
    let first = pager.next_page().await.expect("a page").expect("decodes");
    assert_eq!(
        first.len(),
        5,
        "longer than the limit: everything the server had"
    );
    assert!(pager.next_page().await.is_none(), "and so the last page");
    assert_eq!(pager.position(), 5);
    let asked: Vec<String> = server.requests().iter().map(|r| r.line()).collect();
    assert_eq!(asked, ["GET /api2/json/nodes/pve1/syslog?limit=2&start=0"]);
}

#[tokio::test]
async fn a_server_ignoring_start_but_keeping_limit_ends_at_the_first_repeated_page() {
    use pve_sdk::generated::nodes::node::syslog::Syslog;
    use pve_sim::wire::{Reply, WireServer};
    // Always the first 2 lines, for any start: the repeat is not yielded, the reading ends.
    let head = Reply::json("200 OK", &syslog_page(1, 2));
    let server = WireServer::start(vec![head.clone(), head.clone(), head])
        .await
        .expect("starts");
    let pager = wire_client(&server).pages(&Syslog::new("pve1"), 2);
    let lines: Vec<_> = pager.items().collect().await;
    let numbers: Vec<Option<i64>> = lines.into_iter().map(|l| l.expect("decodes").n).collect();
    assert_eq!(numbers, [Some(1), Some(2)]);
    let asked: Vec<String> = server.requests().iter().map(|r| r.line()).collect();
    assert_eq!(
        asked,
        [
            "GET /api2/json/nodes/pve1/syslog?limit=2&start=0",
            "GET /api2/json/nodes/pve1/syslog?limit=2&start=2"
        ]
    );

    // A server that pages as asked, also without a total, is read to the end.
    let server = WireServer::start(vec![
        Reply::json("200 OK", &syslog_page(1, 2)),
        Reply::json("200 OK", &syslog_page(3, 2)),
        Reply::json("200 OK", &syslog_page(5, 1)),
    ])
    .await
    .expect("starts");
    let lines: Vec<_> = wire_client(&server)
        .pages(&Syslog::new("pve1"), 2)
        .items()
        .collect()
        .await;
    assert_eq!(lines.len(), 5);
    assert_eq!(server.requests().len(), 3);
}
