//! The `FirewallRules` and `FirewallGroup` families: ordered lists written so that no
//! intermediate list decides a packet as neither the old nor the new list does (S33), each
//! step after a read that shows the list as the script left it (S9, S31), a list that moved
//! under the writer never met by a blind create, and a security group a rule applies not
//! destroyed.

use std::collections::BTreeMap;

use crate::common;

use common::{failure, refusals, requests, sim, stack, writes};

use pve_resources::contract::ErrorKind;
use pve_resources::families::firewall_rules::{FirewallGroup, FirewallRules, Rule};
use pve_sim::faults::{Action, Rule as Fault};

/// The writes with every digest spelled `D` (the simulator's digests are SHA-1s of the list).
fn shapes(sim: &pve_sim::Simulator) -> Vec<String> {
    writes(sim)
        .into_iter()
        .map(|w| {
            let mut out = String::new();
            let mut rest = w.as_str();
            while let Some(i) = rest.find("digest=") {
                out.push_str(&rest[..i + 7]);
                out.push('D');
                rest = rest[i + 7..].trim_start_matches(|c: char| c.is_ascii_hexdigit());
            }
            out.push_str(rest);
            out
        })
        .collect()
}

fn ssh() -> Rule {
    Rule::inbound("ACCEPT").macro_("SSH").source("192.0.2.10")
}

fn web() -> Rule {
    Rule::inbound("ACCEPT").proto("tcp").dport("443")
}

fn smtp_off() -> Rule {
    Rule::inbound("ACCEPT").proto("tcp").dport("25").disabled()
}

async fn deploy(sim: &pve_sim::Simulator, dir: &std::path::Path, list: FirewallRules) {
    let mut s = stack(sim, dir);
    s.add("rules", list).expect("adds");
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{plan}\n{report}");
}

#[tokio::test]
async fn s33_a_list_is_created_disabled_and_enabled_from_the_top_down() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    deploy(
        &sim,
        dir.path(),
        FirewallRules::cluster()
            .rule(ssh())
            .rule(smtp_off())
            .rule(web()),
    )
    .await;
    // pve-firewall Rules.pm register_create_rule: each create lands at position 0, disabled
    // unless enable is sent; so the last rule goes first, and enabling runs from the top.
    assert_eq!(
        shapes(&sim),
        [
            "POST /cluster/firewall/rules type=in&action=ACCEPT&proto=tcp&dport=443&enable=0",
            "POST /cluster/firewall/rules type=in&action=ACCEPT&proto=tcp&dport=25&enable=0",
            "POST /cluster/firewall/rules type=in&action=ACCEPT&macro=ssh&source=192.0.2.10&enable=0",
            "PUT /cluster/firewall/rules/0 enable=1&digest=D",
            "PUT /cluster/firewall/rules/2 enable=1&digest=D",
        ]
    );
    // Each write after the first follows a read of the list.
    let all = requests(&sim);
    for (i, r) in all.iter().enumerate().skip(1) {
        let write = r.starts_with("POST /cluster/firewall/rules") || r.starts_with("PUT");
        if write && all[..i].iter().any(|p| p.starts_with("POST")) {
            assert_eq!(all[i - 1], "GET /cluster/firewall/rules", "{all:#?}");
        }
    }
    // PVE spells the macro its way (SSH); it reads back as declared.
    let stored = sim.with_cluster(|c| c.firewall.rules["cluster"][0]["macro"].clone());
    assert_eq!(stored, "SSH");
    sim.clear_log();
    let mut s = stack(&sim, dir.path());
    s.add(
        "rules",
        FirewallRules::cluster()
            .rule(ssh())
            .rule(smtp_off())
            .rule(web()),
    )
    .expect("adds");
    let again = s.plan().await.expect("plans");
    assert!(again.is_noop(), "{again}");
    assert!(writes(&sim).is_empty());
}

/// A packet of the tests' toy traffic: source address and destination port.
type Packet = (&'static str, &'static str);

/// How a list of the simulator decides a packet: the first enabled `in` rule whose source
/// and port match (`+set` matching nothing here), else DROP (the inbound policy).
fn decide(list: &[BTreeMap<String, String>], (src, port): Packet) -> String {
    list.iter()
        .find(|r| {
            r.get("enable").map(String::as_str) == Some("1")
                && r.get("source").is_none_or(|s| s == src)
                && r.get("dport").is_none_or(|d| d == port)
        })
        .and_then(|r| r.get("action").cloned())
        .unwrap_or_else(|| "DROP".to_owned())
}

#[tokio::test]
async fn s33_a_changed_list_never_decides_a_packet_as_neither_list_does() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let keep = Rule::inbound("ACCEPT").source("192.0.2.1");
    let old = FirewallRules::cluster()
        .rule(keep.clone())
        .rule(Rule::inbound("DROP").source("192.0.2.66"))
        .rule(Rule::inbound("ACCEPT").proto("tcp").dport("22"))
        .rule(web());
    deploy(&sim, dir.path(), old).await;
    let before = sim.with_cluster(|c| c.firewall.rules["cluster"].clone());
    sim.with_cluster(|c| c.firewall.rule_history.clear());
    sim.clear_log();
    // The bad host is rejected now, and ssh is open only to the admin host, both above the
    // unchanged head and tail.
    let new = FirewallRules::cluster()
        .rule(keep)
        .rule(Rule::inbound("REJECT").source("192.0.2.66"))
        .rule(
            Rule::inbound("ACCEPT")
                .proto("tcp")
                .dport("22")
                .source("192.0.2.10"),
        )
        .rule(web());
    deploy(&sim, dir.path(), new).await;
    assert_eq!(
        shapes(&sim),
        [
            "POST /cluster/firewall/rules type=in&action=ACCEPT&source=192.0.2.10&proto=tcp&dport=22&enable=0",
            "PUT /cluster/firewall/rules/0 moveto=2&digest=D",
            "POST /cluster/firewall/rules type=in&action=REJECT&source=192.0.2.66&enable=0",
            "PUT /cluster/firewall/rules/0 moveto=2&digest=D",
            "PUT /cluster/firewall/rules/1 enable=1&digest=D",
            "PUT /cluster/firewall/rules/2 enable=1&digest=D",
            "DELETE /cluster/firewall/rules/4 digest=D",
            "DELETE /cluster/firewall/rules/3 digest=D",
        ]
    );
    let after = sim.with_cluster(|c| c.firewall.rules["cluster"].clone());
    let history = sim.with_cluster(|c| c.firewall.rule_history.clone());
    assert_eq!(history.len(), 8);
    let packets: [Packet; 6] = [
        ("192.0.2.1", "22"),
        ("192.0.2.66", "22"),
        ("192.0.2.66", "443"),
        ("192.0.2.10", "22"),
        ("198.51.100.7", "22"),
        ("198.51.100.7", "443"),
    ];
    // The change itself: the bad host is rejected instead of dropped, ssh closes for others.
    assert_ne!(decide(&before, packets[1]), decide(&after, packets[1]));
    assert_ne!(decide(&before, packets[4]), decide(&after, packets[4]));
    for (scope, list) in &history {
        assert_eq!(scope, "cluster");
        for p in packets {
            let d = decide(list, p);
            assert!(
                d == decide(&before, p) || d == decide(&after, p),
                "{p:?} decided {d} by an intermediate list {list:#?}"
            );
        }
    }
}

#[tokio::test]
async fn s33_one_changed_rule_is_changed_in_place_and_a_comment_alone_decides_nothing() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    deploy(
        &sim,
        dir.path(),
        FirewallRules::cluster().rule(ssh()).rule(web()),
    )
    .await;
    sim.clear_log();
    deploy(
        &sim,
        dir.path(),
        FirewallRules::cluster()
            .rule(ssh().comment("admins"))
            .rule(Rule::inbound("ACCEPT").proto("tcp").dport("8443")),
    )
    .await;
    assert_eq!(
        shapes(&sim),
        [
            "PUT /cluster/firewall/rules/0 comment=admins&digest=D",
            "PUT /cluster/firewall/rules/1 dport=8443&digest=D",
        ]
    );
}

#[tokio::test]
async fn s09_a_list_that_moved_under_the_writer_stops_the_script_and_nothing_is_created_blindly() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    deploy(&sim, dir.path(), FirewallRules::cluster().rule(web())).await;
    let mut s = stack(&sim, dir.path());
    s.add(
        "rules",
        FirewallRules::cluster()
            .rule(ssh())
            .rule(smtp_off())
            .rule(web()),
    )
    .expect("adds");
    let plan = s.plan().await.expect("plans");
    // Someone else deletes a rule while the script runs: PVE answers the position it no longer
    // has (pve-firewall Rules.pm update_rule: "no rule at position N").
    sim.script(
        Fault::new(
            "PUT",
            "/cluster/firewall/rules/*",
            Action::Respond {
                status: 500,
                body: serde_json::json!({ "data": null, "message": "no rule at position 0\n" }),
            },
        )
        .nth(1),
    );
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    drop(s);
    assert!(!report.converged(), "{report}");
    let (kind, why) = failure(&report, "rules");
    assert_eq!(kind, ErrorKind::Changed, "{why}");
    let w = shapes(&sim);
    // The two disabled inserts, then the enable PVE refused; nothing after it.
    assert_eq!(w.len(), 3, "{w:#?}");
    assert!(w[2].starts_with("PUT /cluster/firewall/rules/0 "), "{w:#?}");
    // The next deploy takes the list as it is (the disabled leftovers decide nothing) and
    // converges.
    let mut s = stack(&sim, dir.path());
    s.add(
        "rules",
        FirewallRules::cluster()
            .rule(ssh())
            .rule(smtp_off())
            .rule(web()),
    )
    .expect("adds");
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{plan}\n{report}");
    let lines: Vec<String> = sim.with_cluster(|c| {
        c.firewall.rules["cluster"]
            .iter()
            .map(|r| {
                format!(
                    "{}:{}",
                    r["enable"],
                    r.get("dport").cloned().unwrap_or_default()
                )
            })
            .collect()
    });
    assert_eq!(lines, ["1:", "0:25", "1:443"]);
}

#[tokio::test]
async fn s09_a_read_that_shows_another_list_mid_script_stops_it() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("rules", FirewallRules::cluster().rule(ssh()).rule(web()))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    sim.clear_log();
    // The writer's first read is true; the one after the first create reads as something
    // else (someone wrote the list meanwhile).
    sim.script(
        Fault::new(
            "GET",
            "/cluster/firewall/rules",
            Action::Respond {
                status: 200,
                body: serde_json::json!({ "data": [
                    { "pos": 0, "type": "in", "action": "ACCEPT", "enable": 1, "digest": "0" },
                    { "pos": 1, "type": "in", "action": "ACCEPT", "proto": "tcp", "dport": "443", "enable": 0, "digest": "0" },
                ]}),
            },
        )
        .nth(2),
    );
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    let (kind, why) = failure(&report, "rules");
    assert_eq!(kind, ErrorKind::Changed, "{why}");
    assert!(
        why.contains("changed while they were being written"),
        "{why}"
    );
    // Only the first create went out.
    assert_eq!(shapes(&sim).len(), 1, "{:#?}", shapes(&sim));
}

#[tokio::test]
async fn s27_a_non_empty_list_the_stack_never_wrote_is_left_alone_unless_adopted() {
    let sim = sim().await;
    sim.with_cluster(|c| {
        c.firewall.rules.insert(
            "cluster".into(),
            vec![BTreeMap::from([
                ("type".to_owned(), "in".to_owned()),
                ("action".to_owned(), "ACCEPT".to_owned()),
                ("enable".to_owned(), "1".to_owned()),
            ])],
        );
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("rules", FirewallRules::cluster().rule(web()))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    let text = plan.to_string();
    assert!(text.contains("unowned") || text.contains("adopt"), "{text}");
    sim.clear_log();
    let _ = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(writes(&sim).is_empty(), "{:#?}", writes(&sim));
}

#[tokio::test]
async fn a_rule_pve_would_refuse_is_refused_before_any_write() {
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add(
        "rules",
        FirewallRules::vnet("v1").rule(Rule::inbound("ACCEPT")),
    )
    .expect("adds");
    s.add("empty", FirewallRules::node("pve1")).expect("adds");
    let plan = s.plan().await.expect("plans");
    let r = refusals(&plan);
    assert_eq!(r.len(), 2, "{plan}");
    assert!(
        r.iter()
            .any(|r| r.contains("rule type \"in\" is not allowed")),
        "{r:#?}"
    );
    assert!(r.iter().any(|r| r.contains("no rule declared")), "{r:#?}");
    assert!(writes(&sim).is_empty());
}

#[tokio::test]
async fn a_security_group_is_made_with_its_rules_then_applied_by_a_guest_list_and_not_destroyed_while_applied(
) {
    let sim = sim().await;
    sim.add_guest("pve1", 100, pve_sim::GuestKind::Qemu, &[]);
    let dir = tempfile::tempdir().expect("tempdir");
    let group = FirewallGroup::new("Web")
        .comment("web servers")
        .rule(web())
        .rule(Rule::inbound("ACCEPT").proto("tcp").dport("80"));
    let guest = FirewallRules::vm("pve1", 100).rule(Rule::group("web").iface("net0"));
    {
        let mut s = stack(&sim, dir.path());
        // The guest's list first in the declaration: the group still comes first.
        s.add("guest-rules", guest.clone()).expect("adds");
        s.add("web", group.clone()).expect("adds");
        let plan = s.plan().await.expect("plans");
        sim.clear_log();
        let report = s.deploy(&plan, |_| {}).await.expect("deploys");
        assert!(report.converged(), "{plan}\n{report}");
    }
    let w = shapes(&sim);
    assert_eq!(
        w,
        [
            "POST /cluster/firewall/groups group=web&comment=web servers",
            "POST /cluster/firewall/groups/web type=in&action=ACCEPT&proto=tcp&dport=80&enable=0",
            "POST /cluster/firewall/groups/web type=in&action=ACCEPT&proto=tcp&dport=443&enable=0",
            "PUT /cluster/firewall/groups/web/0 enable=1&digest=D",
            "PUT /cluster/firewall/groups/web/1 enable=1&digest=D",
            "POST /nodes/pve1/qemu/100/firewall/rules type=group&action=web&iface=net0&enable=0",
            "PUT /nodes/pve1/qemu/100/firewall/rules/0 enable=1&digest=D",
        ]
    );
    // Destroying the group while the declared guest list applies it is refused by the plan.
    let mut s = stack(&sim, dir.path());
    s.add("guest-rules", guest).expect("adds");
    s.destroy_when_dropped("web");
    let plan = s.plan().await.expect("plans");
    assert!(
        plan.to_string().contains(
            "firewall_group web is dropped but \"guest-rules\" (firewall_rules qemu/pve1/100) still names it"
        ),
        "{plan}"
    );
    drop(s);
    // Dropped from the declaration too, the guest's list stays live (retained), and the
    // group's destroy reads it and is refused; nothing is sent.
    let mut s = stack(&sim, dir.path());
    s.destroy_when_dropped("web");
    let plan = s.plan().await.expect("plans");
    sim.clear_log();
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    let (kind, why) = failure(&report, "web");
    assert_eq!(kind, ErrorKind::Refused, "{why}");
    assert!(why.contains("guest 100's firewall rules"), "{why}");
    assert!(writes(&sim).is_empty(), "{:#?}", writes(&sim));
    drop(s);
    // Without the guest's rule, the group goes: its rules from the bottom up, then the group.
    let mut s = stack(&sim, dir.path());
    s.add("guest-rules", FirewallRules::vm("pve1", 100).rule(web()))
        .expect("adds");
    s.destroy_when_dropped("web");
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{plan}\n{report}");
    let w = shapes(&sim);
    assert_eq!(
        w[w.len() - 3..],
        [
            "DELETE /cluster/firewall/groups/web/1 digest=D",
            "DELETE /cluster/firewall/groups/web/0 digest=D",
            "DELETE /cluster/firewall/groups/web",
        ]
    );
}

#[tokio::test]
async fn s19_an_ip_set_a_declared_list_names_is_not_destroyed_even_before_the_list_is_written() {
    use pve_resources::families::firewall_ipset::FirewallIpset;
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let mut s = stack(&sim, dir.path());
        s.add("office", FirewallIpset::new("office").entry("192.0.2.0/24"))
            .expect("adds");
        let plan = s.plan().await.expect("plans");
        assert!(s.deploy(&plan, |_| {}).await.expect("deploys").converged());
    }
    // The set is dropped and destroyed by word, while a newly declared list names it.
    let mut s = stack(&sim, dir.path());
    s.add(
        "rules",
        FirewallRules::cluster().rule(Rule::inbound("ACCEPT").source("+office")),
    )
    .expect("adds");
    s.destroy_when_dropped("office");
    let plan = s.plan().await.expect("plans");
    sim.clear_log();
    assert!(
        plan.to_string()
            .contains("firewall_ipset office is dropped but \"rules\" (firewall_rules cluster) still names it"),
        "{plan}"
    );
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(
        !writes(&sim)
            .iter()
            .any(|w| w.starts_with("DELETE /cluster/firewall/ipset/office")),
        "{plan}\n{report}\n{:#?}",
        writes(&sim)
    );
}

#[tokio::test]
async fn a_guest_list_for_a_guest_that_is_not_there_is_refused_before_any_write() {
    let sim = sim().await;
    sim.add_guest("pve1", 200, pve_sim::GuestKind::Lxc, &[]);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    // No guest 555 anywhere: PVE would still write 555.fw (pve-firewall VM.pm load_vmfw_conf
    // reads a missing file as empty), and a later guest 555 would inherit it.
    s.add("ghost", FirewallRules::vm("pve1", 555).rule(web()))
        .expect("adds");
    // 200 is a container: a VM's path would make a file for a guest that is not there.
    s.add("wrong-type", FirewallRules::vm("pve1", 200).rule(web()))
        .expect("adds");
    s.add(
        "ghost-fw",
        pve_resources::families::firewall_options::FirewallOptions::vm("pve1", 555).enable(true),
    )
    .expect("adds");
    let plan = s.plan().await.expect("plans");
    let r = refusals(&plan);
    assert_eq!(r.len(), 3, "{plan}");
    assert!(
        r.iter()
            .filter(|r| r.contains("guest 555 neither exists nor is declared"))
            .count()
            == 2,
        "{r:#?}"
    );
    assert!(
        r.iter()
            .any(|r| r.contains("guest 200 is a container on pve1, not a VM on pve1")),
        "{r:#?}"
    );
    sim.clear_log();
    let _ = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(writes(&sim).is_empty(), "{:#?}", writes(&sim));
}
