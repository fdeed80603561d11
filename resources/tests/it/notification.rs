//! Notification endpoints and matchers beyond CRUD (the conformance lines have that): built-ins
//! adopted and never destroyed, what a plan says when `default-matcher` stops mailing root,
//! matchers after their endpoints, names unique across types, a missing target never taken for
//! absence, and the webhook's secrets.

use crate::common;

use common::{requests, sim, stack, writes};

use pve_resources::contract::ErrorKind;
use pve_resources::engine::Action;
use pve_resources::families::notification::{
    GotifyEndpoint, NotificationMatcher, SendmailEndpoint, WebhookEndpoint,
};
use pve_sdk::generated::cluster::notifications::endpoints::sendmail::CreateSendmailEndpoint;
use pve_sdk::generated::cluster::notifications::endpoints::webhook::{
    CreateWebhookEndpoint, Method,
};
use pve_sdk::generated::cluster::notifications::matchers::name::{GetMatcher, GetMatcherError};
use pve_sdk::generated::cluster::notifications::matchers::{CreateMatcher, CreateMatcherError};
use pve_sdk::OperationError;

fn gotify() -> GotifyEndpoint {
    GotifyEndpoint::new("ops", "https://gotify.example", "gotify-token", "r1")
}

fn failures() -> NotificationMatcher {
    let mut m = NotificationMatcher::new("backup-failures").targets(["ops"]);
    m.match_severity = Some(vec!["error".into()]);
    m.match_field = Some(vec!["exact:type=vzdump".into()]);
    m
}

#[tokio::test]
async fn s19_a_matcher_comes_after_its_endpoint_and_is_destroyed_before_it() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("route", failures()).expect("adds");
    s.add("ops", gotify()).expect("adds");
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{plan}\n{report}");
    assert_eq!(
        writes(&sim),
        [
            "POST /cluster/notifications/endpoints/gotify name=ops&server=https://gotify.example&token=gotify-token",
            "POST /cluster/notifications/matchers match-field=exact:type=vzdump&match-severity=error&name=backup-failures&target=ops",
        ]
    );
    assert!(!common::state_text(dir.path()).contains("gotify-token"));
    sim.clear_log();
    assert!(s.plan().await.expect("plans").is_noop());
    let teardown = s.plan_destroy().expect("plans");
    let report = s.deploy(&teardown, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{teardown}\n{report}");
    assert_eq!(
        writes(&sim),
        [
            "DELETE /cluster/notifications/matchers/backup-failures",
            "DELETE /cluster/notifications/endpoints/gotify/ops",
        ]
    );
}

#[tokio::test]
async fn s20_s27_built_ins_are_adopted_and_updated_and_never_destroyed() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    let mut default = NotificationMatcher::new("default-matcher").targets(["mail-to-root", "ops"]);
    default.comment = Some("root and ops".into());
    s.add("ops", gotify()).expect("adds");
    s.add("default", default).expect("adds").adopt();
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{plan}\n{report}");
    let w = writes(&sim);
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(
        w[1].starts_with(
            "PUT /cluster/notifications/matchers/default-matcher comment=root and ops&digest="
        ) && w[1].ends_with("&target=mail-to-root&target=ops"),
        "{w:?}"
    );
    // Dropped, and destroyed: PVE's delete would only revert it, so the stack forgets it.
    let s = {
        drop(s);
        stack(&sim, dir.path())
    };
    let teardown = s.plan_destroy().expect("plans");
    let actions: Vec<(&str, &Action)> = teardown
        .entries
        .iter()
        .map(|e| (e.id.as_str(), &e.action))
        .collect();
    assert!(
        actions.contains(&("default", &Action::Forget)),
        "{teardown}"
    );
    let mut s = s;
    sim.clear_log();
    let report = s.deploy(&teardown, |_| {}).await.expect("deploys");
    // The built-in is left as it is, and it still routes to ops: PVE refuses the endpoint's
    // delete, and the failure names the matcher (ensure_safe_to_delete).
    let (kind, reason) = common::failure(&report, "ops");
    assert_eq!(kind, ErrorKind::WriteRefused);
    assert!(
        reason.contains("notification endpoint ops is a target of default-matcher"),
        "{reason}"
    );
    assert_eq!(
        writes(&sim),
        ["DELETE /cluster/notifications/endpoints/gotify/ops"]
    );
    assert!(sim.with_cluster(|c| c.collections["notification"].contains_key("ops")));
}

#[tokio::test]
async fn a_plan_that_stops_default_matcher_mailing_root_says_so() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    let mut off = NotificationMatcher::new("default-matcher");
    off.disable = Some(true);
    s.add("default", off).expect("adds").adopt();
    let plan = s.plan().await.expect("plans");
    assert!(
        plan.to_string().contains("      > disables default-matcher: backup, replication and fencing mail to root stops unless another matcher routes it\n"),
        "{plan}"
    );
    let mut s = {
        drop(s);
        stack(&sim, dir.path())
    };
    s.add("ops", gotify()).expect("adds");
    s.add(
        "default",
        NotificationMatcher::new("default-matcher").targets(["ops"]),
    )
    .expect("adds")
    .adopt();
    let plan = s.plan().await.expect("plans");
    assert!(
        plan.to_string().contains("      > points default-matcher away from mail-to-root: backup, replication and fencing mail to root stops unless another matcher routes it\n"),
        "{plan}"
    );
}

#[tokio::test]
async fn s08_a_name_another_type_holds_is_refused_before_any_write_naming_the_holder() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add(
        "mail",
        SendmailEndpoint::of(
            CreateSendmailEndpoint::new("ops").mailto(vec!["ops@example.com".to_owned()]),
        ),
    )
    .expect("adds");
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{plan}\n{report}");
    // Another stack declares a gotify endpoint of the same name.
    let other = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, other.path());
    s.add("ops", gotify()).expect("adds");
    let plan = s.plan().await.expect("plans");
    match &plan.entries[0].action {
        Action::Refuse { error } => assert!(
            error
                .to_string()
                .contains("the notification name ops is held by a sendmail endpoint"),
            "{error}"
        ),
        other => panic!("{other:?}"),
    }
    sim.clear_log();
    s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(sim.writes().is_empty());
    // Within one declaration, two objects claiming the name are refused before any read.
    let third = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, third.path());
    s.add("g", gotify()).expect("adds");
    s.add("m", NotificationMatcher::new("ops")).expect("adds");
    assert!(s.plan().await.is_err());
}

#[tokio::test]
async fn s01_a_matcher_naming_a_missing_endpoint_is_not_absence() {
    let sim = sim().await;
    let client = sim.client();
    // The object's 404 is absence; the target's 404 is its own error, never absence.
    let read = client
        .send(&GetMatcher::new("nope"))
        .await
        .expect_err("absent");
    assert!(read.is_absent() && matches!(read, GetMatcherError::NotificationMatcherNotFound(_)));
    let create = client
        .send(&CreateMatcher::new("m1").target(vec!["nowhere".to_owned()]))
        .await
        .expect_err("refused");
    assert!(!create.is_absent());
    assert!(
        matches!(create, CreateMatcherError::NotificationTargetMissing(_)),
        "{create:?}"
    );

    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("m", NotificationMatcher::new("m1").targets(["nowhere"]))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    let (kind, reason) = common::failure(&report, "m");
    assert_ne!(kind, ErrorKind::NotConverged, "{reason}");
    assert!(
        reason.contains("notification endpoint nowhere does not exist"),
        "{reason}"
    );
}

#[tokio::test]
async fn s26_a_webhook_s_url_headers_and_secret_never_reach_state_or_the_plan() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    let mut hook = WebhookEndpoint::of(
        CreateWebhookEndpoint::new(Method::Post, "hook", "https://hooks.example/T0K3N")
            .header(vec![
                "name=X-Key,value=a2V5".into(),
                "name=X-Env,value=cHJvZA==".into(),
            ])
            .secret(vec!["name=signing,value=c2VjcmV0".into()]),
    );
    hook.secret_rotation = Some("h1".into());
    s.add("hook", hook).expect("adds");
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{plan}\n{report}");
    assert_eq!(
        writes(&sim),
        ["POST /cluster/notifications/endpoints/webhook header=name=X-Key,value=a2V5&header=name=X-Env,value=cHJvZA==&method=post&name=hook&secret=name=signing,value=c2VjcmV0&url=https://hooks.example/T0K3N"]
    );
    let state = common::state_text(dir.path());
    for secret in ["T0K3N", "a2V5", "c2VjcmV0"] {
        assert!(!state.contains(secret), "{state}");
        assert!(!plan.to_string().contains(secret));
    }
    sim.clear_log();
    let again = s.plan().await.expect("plans");
    assert!(again.is_noop(), "{again}");
    assert_eq!(
        requests(&sim)
            .iter()
            .filter(|r| !r.contains("/access/permissions"))
            .count(),
        1,
        "one list read: {:?}",
        requests(&sim)
    );
}

#[tokio::test]
async fn s09_a_stale_digest_is_pve_s_400_typed_config_modified_and_read_as_changed() {
    use pve_sdk::generated::cluster::notifications::matchers::name::{
        UpdateMatcher, UpdateMatcherError,
    };
    let sim = sim().await;
    let client = sim.client();
    let stale = UpdateMatcher::new("default-matcher")
        .comment("x")
        .digest("0000000000000000000000000000000000000000000000000000000000000000");
    let err = client.send(&stale).await.expect_err("stale");
    assert!(
        matches!(err, UpdateMatcherError::ConfigModified(_)),
        "{err:?}"
    );
    assert!(err.is_config_modified() && !err.is_absent());
    // The family reads it as "changed since read" (S9), never as another failure.
    use pve_resources::families::notification::MatcherObject;
    use pve_resources::families::schema::Object;
    assert!(<MatcherObject as Object>::stale(&err));
    assert!(sim.writes().len() == 1, "one refused write");
    assert!(
        sim.with_cluster(|c| c.collections["notification"]["default-matcher"]
            .get("comment")
            .is_some_and(|v| v != "x"))
    );
}
