//! The `StorageDownload` family beyond CRUD (the conformance line has that): the download task
//! before the container that uses the template, a checksum PVE refuses, and what is refused
//! before any write.

use sha2::Digest;

use crate::common;

use common::{requests, sim, stack, writes};

use pve_resources::contract::ErrorKind;
use pve_resources::engine::Action;
use pve_resources::families::lxc::Lxc;
use pve_resources::families::storage_download::StorageDownload;

const TEMPLATE: &[u8] = b"a root file system";
const URL: &str = "https://images.example/debian-12-standard.tar.zst";

fn sha256(bytes: &[u8]) -> String {
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn template(sum: String) -> StorageDownload {
    StorageDownload::template("pve1", "local", "debian-12-standard.tar.zst", URL, sum)
}

#[tokio::test]
async fn s29_a_template_is_downloaded_by_a_task_before_the_container_that_uses_it() {
    let sim = sim().await;
    sim.serve_file(URL, TEMPLATE);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    let mut ct = Lxc::new("pve1", 200);
    ct.ostemplate = Some("local:vztmpl/debian-12-standard.tar.zst".into());
    ct.rootfs = Some(pve_resources::kit::volume::Disk::new("local-lvm", 8));
    s.add("ct", ct).expect("adds");
    s.add("tmpl", template(sha256(TEMPLATE))).expect("adds");
    let plan = s.plan().await.expect("plans");
    assert!(
        plan.to_string().contains(&format!("      > downloads {URL} into local:vztmpl/debian-12-standard.tar.zst on pve1, checked against its sha256 checksum\n")),
        "{plan}"
    );
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(report.converged(), "{plan}\n{report}");
    let w = writes(&sim);
    assert_eq!(
        w[0],
        format!(
            "POST /nodes/pve1/storage/local/download-url checksum={}&checksum-algorithm=sha256&content=vztmpl&filename=debian-12-standard.tar.zst&url={URL}",
            sha256(TEMPLATE)
        )
    );
    assert!(w[1].starts_with("POST /nodes/pve1/lxc "), "{w:?}");
    // S29: the task's UPID was awaited; the state records the file with its checksum.
    let state = common::state_text(dir.path());
    assert!(
        state.contains(&format!("sha256:{}", sha256(TEMPLATE))),
        "{state}"
    );
    sim.clear_log();
    assert!(s.plan().await.expect("plans").is_noop());
    assert!(sim.writes().is_empty());
}

#[tokio::test]
async fn s04_a_download_whose_checksum_pve_refuses_leaves_no_file_and_is_an_error() {
    let sim = sim().await;
    sim.serve_file(URL, TEMPLATE);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    s.add("tmpl", template(sha256(b"what the publisher announced")))
        .expect("adds");
    let plan = s.plan().await.expect("plans");
    let report = s.deploy(&plan, |_| {}).await.expect("deploys");
    let (kind, reason) = common::failure(&report, "tmpl");
    assert_eq!(kind, ErrorKind::TaskFailed, "{reason}");
    assert!(reason.contains("checksum mismatch: got '"), "{reason}");
    // S14: the recorded task is looked at once more, found failed, and forgotten.
    let again = s.plan().await.expect("plans");
    assert!(
        matches!(again.entries[0].action, Action::Resume { .. }),
        "{again}"
    );
    let report = s.deploy(&again, |_| {}).await.expect("deploys");
    assert!(common::failure(&report, "tmpl")
        .1
        .contains("the next plan starts over"));
    sim.clear_log();
    // Nothing was stored: the next plan creates it again, judged from the content list.
    let third = s.plan().await.expect("plans");
    assert!(
        matches!(third.entries[0].action, Action::Create { .. }),
        "{third}"
    );
    assert_eq!(
        requests(&sim),
        ["GET /nodes/pve1/storage/local/content content=vztmpl"]
    );
}

#[tokio::test]
async fn s08_a_download_without_a_checksum_or_with_a_foreign_extension_is_refused_before_any_write()
{
    let sim = sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = stack(&sim, dir.path());
    let mut unchecked = template(String::new());
    unchecked.request.checksum = None;
    unchecked.request.checksum_algorithm = None;
    s.add("unchecked", unchecked).expect("adds");
    s.add(
        "exe",
        StorageDownload::iso("pve1", "local", "setup.exe", URL, sha256(TEMPLATE)),
    )
    .expect("adds");
    let plan = s.plan().await.expect("plans");
    let refusals = common::refusals(&plan);
    assert_eq!(refusals.len(), 2, "{plan}");
    assert!(
        refusals.iter().any(|r| r.contains("checksum: is required")),
        "{refusals:?}"
    );
    assert!(
        refusals
            .iter()
            .any(|r| r.contains("filename: has no extension PVE takes for iso content")),
        "{refusals:?}"
    );
    s.deploy(&plan, |_| {}).await.expect("deploys");
    assert!(sim.writes().is_empty());
}

#[tokio::test]
async fn s11_a_download_has_nothing_to_update_and_any_edit_is_refused_naming_its_key() {
    use pve_resources::families::config::{ConfigObject, Edit};
    let sim = sim().await;
    let client = sim.client();
    let d = template(sha256(TEMPLATE));
    let mut edit = Edit::default();
    edit.set
        .insert("url".into(), "https://elsewhere.example/t.tar.zst".into());
    let err = ConfigObject::update(&d, &client, &edit)
        .await
        .expect_err("nothing is updatable");
    assert_eq!(err.kind(), ErrorKind::Inexpressible);
    assert!(err.to_string().contains("\"url\""), "{err}");
    assert!(sim.requests().is_empty(), "nothing was sent");
}
