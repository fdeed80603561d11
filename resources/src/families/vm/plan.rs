//! How a VM is planned: its ownership in the cluster index (S17), its config compared, and a
//! clone's steps predicted from its source.

use super::*;

/// What a probe decided.
pub(super) enum Plan {
    Create(Vec<String>),
    Present {
        changes: Vec<Change>,
        digest: String,
    },
    Refuse(String),
    InProgress(String),
}

impl Vm {
    /// One config read; the owner was decided from the stack's one index read (S17).
    pub(super) async fn plan(
        &self,
        cx: &Cx,
        owner: Owner,
        ask: Ask<'_>,
    ) -> Result<Plan, GuestError> {
        if let Some(why) = self.unknown_keys().or_else(|| self.refused_values()) {
            return Ok(Plan::Refuse(why));
        }
        if let Owner::Elsewhere(why) = owner {
            return Ok(Plan::Refuse(why));
        }
        let rotated = match crate::kit::secret::rotations(&self.write_only(), ask.recorded) {
            Ok(r) => r,
            Err(why) => return Ok(Plan::Refuse(why)),
        };
        Ok(match self.read(cx.client()).await? {
            None if owner == Owner::Free => match &self.clone {
                Some(c) => self.plan_clone(cx, c, ask.upstream_changes).await?,
                None => match self.missing_drive(false) {
                    Some(why) => Plan::Refuse(format!("VM {} on {}: {why}", self.vmid, self.node)),
                    None => Plan::Create(Vec::new()),
                },
            },
            // A create an earlier deploy sent, not written yet: waited for (S29).
            None if ask.pending.is_some_and(|i| i.action == "create") => Plan::InProgress(format!(
                "VM {} is listed on {} and its config is not there yet, after a create an earlier deploy sent",
                self.vmid, self.node
            )),
            None => Plan::Refuse(format!(
                "VM {} is listed on {} but its config is missing; refusing to guess",
                self.vmid, self.node
            )),
            Some(live) if guest::making(live.lock.as_deref()) => Plan::InProgress(format!(
                "VM {} on {} is being made (its config holds lock: {})",
                self.vmid,
                self.node,
                live.lock.as_deref().unwrap_or_default()
            )),
            Some(live) => match self.all_changes(&live) {
                Err(why) => Plan::Refuse(why),
                Ok(mut changes) => {
                    changes.extend(rotated);
                    Plan::Present {
                        changes,
                        digest: live.digest,
                    }
                }
            },
        })
    }

    /// A clone's plan: the source found in the stack's index (on the declared node; a
    /// template for a linked clone), its config read once for every clone of it, the clone's
    /// result predicted from it, and the steps named.
    pub(super) async fn plan_clone(
        &self,
        cx: &Cx,
        c: &CloneOf,
        upstream: bool,
    ) -> Result<Plan, GuestError> {
        let source = c.source_node(&self.node).to_owned();
        let rows = cx
            .guest_index()
            .await
            .map_err(|source| GuestError::IndexUnreadable {
                object: self.object_ref(),
                source,
            })?;
        let row = rows.iter().find(|r| r.vmid == Some(c.template));
        let refuse = |why: String| Ok(Plan::Refuse(format!("VM {}: {why}", self.vmid)));
        let Some(row) = row else {
            if upstream {
                return Ok(Plan::Create(vec![format!(
                    "clone VM {} on {source}, which this deploy writes first; what the clone sets is known once it exists",
                    c.template
                )]));
            }
            return refuse(format!("VM {} to clone from does not exist", c.template));
        };
        let kind = row.type_.to_string();
        if kind != "qemu" {
            return refuse(format!(
                "{} is a {kind} guest; a VM is cloned from a VM",
                c.template
            ));
        }
        let at = row.node.as_deref().unwrap_or_default();
        if at != source {
            return refuse(format!(
                "VM {} to clone from is on {at}, not on {source}; declare CloneOf::on({at:?})",
                c.template
            ));
        }
        if !c.full && row.template != Some(true) {
            return refuse(format!(
                "a linked clone needs a template, and VM {} is not one; declare a full clone",
                c.template
            ));
        }
        let key = format!("qemu config {source}/{}", c.template);
        let (node, vmid) = (source.clone(), c.template);
        let template = cx
            .shared(
                &key,
                || async move { read_at(cx.client(), &node, vmid).await },
            )
            .await
            .map_err(|source| GuestError::Unreadable {
                object: self.object_ref(),
                source,
            })?;
        let Some(template) = template.as_ref() else {
            return refuse(format!("VM {} to clone from has no config", c.template));
        };
        let predicted = self.predicted_clone(c, template);
        let mut changes = match self.all_changes(&predicted) {
            Ok(changes) => changes,
            Err(why) => return refuse(format!("after a clone of VM {}: {why}", c.template)),
        };
        if self.cipassword.is_some() {
            changes.push(Change {
                key: "cipassword".into(),
                old: None,
                new: "(write-only: the value is sent, never shown)".into(),
            });
        }
        let declared: Vec<String> = self
            .fields()
            .into_keys()
            .chain(self.volumes().into_keys())
            .collect();
        Ok(Plan::Create(c.steps(&self.node, &declared, &changes)))
    }

    /// What a clone of `template` will look like (qemu-server `src/PVE/API2/Qemu.pm`
    /// clone_vm): its config without `template` and snapshot state, `name` and `description`
    /// from the request (else `Copy-of-VM-NAME`), new MAC addresses, a full clone's disks on
    /// its target storage.
    pub(super) fn predicted_clone(&self, c: &CloneOf, template: &Live) -> Live {
        let mut out = template.clone();
        for k in [
            "template",
            "parent",
            "snaptime",
            "vmstate",
            "runningcpu",
            "runningmachine",
        ] {
            out.map.remove(k);
        }
        out.map.retain(|k, _| !k.starts_with("unused"));
        let old_name = out
            .map
            .get("name")
            .cloned()
            .unwrap_or_else(|| c.template.to_string());
        out.map.insert(
            "name".into(),
            self.name
                .clone()
                .unwrap_or_else(|| format!("Copy-of-VM-{old_name}")),
        );
        if let Some(d) = &self.description {
            out.map.insert("description".into(), d.clone());
        }
        let nets: Vec<(u32, Net)> = out.net.iter().map(|(n, v)| (n, v.clone())).collect();
        for (n, mut net) in nets {
            net.macaddr = None;
            out.map.insert(format!("net{n}"), net.to_string());
            let _ = out.net.insert(n, net);
        }
        for (k, v) in out.map.iter_mut() {
            if !(is_disk_key(k) || k == "efidisk0" || k == "tpmstate0") {
                continue;
            }
            // A CD-ROM's config is copied as it is; every other volume is cloned.
            let cdrom = v.split(',').any(|p| p == "media=cdrom");
            if cdrom && !cloudinit::is_cloudinit_value(v) {
                continue;
            }
            if let Some(storage) = volume::storage_of(v) {
                let target = c.storage_for(&storage);
                if target != storage {
                    *v = format!("{target}{}", &v[storage.len()..]);
                }
            }
        }
        out
    }
}
