//! Creating a VM by cloning another (a template, for a linked clone), as an alternative to a
//! plain create, on qemu-server's `POST /nodes/{node}/qemu/{vmid}/clone` (`src/PVE/API2/Qemu.pm`
//! clone_vm).
//!
//! What a clone does, as the plan shows it: the `qmclone` task copies the source's config
//! (every MAC address new, snapshots and unused volumes left out, `template` removed) with the
//! disks cloned (linked: on the template's storage; full: on `storage` if given, else where
//! they were), sets `name` and `description` from the request, and moves the config to the
//! target node. The declared config then follows as an update on the clone (S7: only the
//! declared fields), and declared disks larger than the template's grow by PVE's resize. The
//! plan reads the template's config once (shared by every clone of it) and says which fields
//! the clone sets and which the update sets.
//!
//! Refused before any write: a linked clone with a `storage` (PVE: "parameter 'storage' not
//! allowed for linked clones"), a linked clone of a VM that is not a template, a source that is
//! missing, a container, or on another node than declared, and a declared disk the clone would
//! put on another storage than declared or make larger than declared (S18).

use pve_sdk::generated::nodes::node::qemu::vmid::clone::CloneVm;

use crate::contract::Change;

/// Where a cloned VM comes from, and how it is cloned.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CloneOf {
    /// The vmid cloned.
    pub template: i64,
    /// The node the source is on (`None`: the declared VM's node).
    pub node: Option<String>,
    /// A full copy of every disk (`true`) or a linked clone of a template (`false`).
    pub full: bool,
    /// A full clone's target storage for every disk (`None`: each disk's own storage).
    pub storage: Option<String>,
}

impl CloneOf {
    /// A full clone of `template`.
    pub fn full(template: i64) -> Self {
        CloneOf {
            template,
            node: None,
            full: true,
            storage: None,
        }
    }

    /// A linked clone of `template` (its disks stay on the template's storage).
    pub fn linked(template: i64) -> Self {
        CloneOf {
            full: false,
            ..CloneOf::full(template)
        }
    }

    /// The source is on `node` (PVE clones on the source's node and moves the config to the
    /// target).
    #[must_use]
    pub fn on(mut self, node: impl Into<String>) -> Self {
        self.node = Some(node.into());
        self
    }

    /// A full clone's disks go to `storage`.
    #[must_use]
    pub fn storage(mut self, storage: impl Into<String>) -> Self {
        self.storage = Some(storage.into());
        self
    }

    /// The node the source is on, for a VM declared on `vm_node`.
    pub(crate) fn source_node<'a>(&'a self, vm_node: &'a str) -> &'a str {
        self.node.as_deref().unwrap_or(vm_node)
    }

    /// What PVE would refuse in this clone before anything is sent.
    pub(crate) fn problem(&self) -> Option<String> {
        (!self.full && self.storage.is_some()).then(|| {
            "a linked clone's disks stay on the template's storage: PVE refuses `storage` for a linked clone (declare a full clone to choose a storage)".to_owned()
        })
    }

    /// The clone request for VM `vmid` on `node`, named and described as declared.
    pub(crate) fn request(
        &self,
        node: &str,
        vmid: i64,
        name: Option<&str>,
        description: Option<&str>,
    ) -> CloneVm {
        let source = self.source_node(node);
        let mut req = CloneVm::new(source, self.template, vmid);
        req.full = Some(self.full);
        req.storage.clone_from(&self.storage);
        req.target = (source != node).then(|| node.to_owned());
        req.name = name.map(str::to_owned);
        req.description = description.map(str::to_owned);
        req
    }

    /// The storage the clone puts a source volume of `storage` on.
    pub(crate) fn storage_for<'a>(&'a self, storage: &'a str) -> &'a str {
        match (&self.storage, self.full) {
            (Some(s), true) => s,
            _ => storage,
        }
    }

    /// The plan's sentences for a clone to `node` whose result differs from the declaration
    /// in `changes` (predicted from the template's config): what the clone sets, what the
    /// update after it sets, which disks grow. `declared` lists the declared keys.
    pub(crate) fn steps(&self, node: &str, declared: &[String], changes: &[Change]) -> Vec<String> {
        let source = self.source_node(node);
        let mut how = vec![if self.full { "full" } else { "linked" }.to_owned()];
        if let Some(s) = self.storage.as_deref().filter(|_| self.full) {
            how.push(format!("disks to {s}"));
        }
        if source != node {
            how.push(format!("to node {node}"));
        }
        let changed = |k: &str| {
            changes
                .iter()
                .any(|c| c.key == k || c.key.strip_prefix("resize:") == Some(k))
        };
        let by_request: Vec<&str> = ["name", "description"]
            .into_iter()
            .filter(|k| declared.iter().any(|d| d == k))
            .collect();
        let from_template: Vec<&str> = declared
            .iter()
            .map(String::as_str)
            .filter(|k| !by_request.contains(k) && !changed(k))
            .collect();
        let mut first = format!(
            "clone VM {} on {source} ({})",
            self.template,
            how.join(", ")
        );
        if !by_request.is_empty() {
            first.push_str(&format!("; the clone sets {}", by_request.join(", ")));
        }
        if !from_template.is_empty() {
            first.push_str(&format!(
                "; as declared from the template: {}",
                from_template.join(", ")
            ));
        }
        let mut out = vec![first];
        let update: Vec<&str> = changes
            .iter()
            .filter(|c| !c.key.starts_with("resize:"))
            .map(|c| c.key.as_str())
            .collect();
        if !update.is_empty() {
            out.push(format!("then update: {}", update.join(", ")));
        }
        for c in changes.iter().filter(|c| c.key.starts_with("resize:")) {
            out.push(format!(
                "then resize {} from {} to {}",
                &c.key["resize:".len()..],
                c.old.as_deref().unwrap_or("?"),
                c.new
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s18_a_linked_clone_takes_no_storage_and_the_steps_say_who_sets_what() {
        assert!(CloneOf::linked(9000).storage("ceph").problem().is_some());
        assert!(CloneOf::full(9000).storage("ceph").problem().is_none());
        let c = CloneOf::linked(9000).on("pve1");
        let req = c.request("pve2", 101, Some("web1"), None);
        assert_eq!(
            (
                req.node.as_str(),
                req.vmid,
                req.newid,
                req.target.as_deref(),
                req.full
            ),
            ("pve1", 9000, 101, Some("pve2"), Some(false))
        );
        let declared: Vec<String> = ["cores", "memory", "name", "scsi0"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        let changes = vec![
            Change {
                key: "memory".into(),
                old: Some("2048".into()),
                new: "4096".into(),
            },
            Change {
                key: "resize:scsi0".into(),
                old: Some("8G".into()),
                new: "32G".into(),
            },
        ];
        assert_eq!(
            c.steps("pve2", &declared, &changes),
            vec![
                "clone VM 9000 on pve1 (linked, to node pve2); the clone sets name; as declared from the template: cores".to_owned(),
                "then update: memory".to_owned(),
                "then resize scsi0 from 8G to 32G".to_owned(),
            ]
        );
    }
}
