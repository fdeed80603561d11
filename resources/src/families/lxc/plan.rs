//! How a container is planned: what is refused before any write (values, features its writer
//! may not set), its ownership in the cluster index (S17) and its config compared.

use super::*;

/// What a probe decided.
pub(super) enum Plan {
    Create,
    Present {
        changes: Vec<Change>,
        digest: String,
    },
    Refuse(String),
    InProgress(String),
}

impl Lxc {
    /// **S8** What PVE would refuse in this declaration, checked before anything is sent:
    /// keys its property strings do not know, mount point keys and paths, volumes that cannot
    /// be written, and the parameter table's verdict on the create request.
    pub(super) fn refused(&self) -> Option<String> {
        let names = |m: &BTreeMap<String, String>| m.keys().cloned().collect::<Vec<_>>().join(", ");
        let mut bad: Vec<String> = self
            .net
            .iter()
            .filter(|(_, n)| !n.other_keys.is_empty())
            .map(|(i, n)| format!("net{i}: {}", names(&n.other_keys)))
            .collect();
        if let Some(f) = self.features.as_ref().filter(|f| !f.other_keys.is_empty()) {
            bad.push(format!("features: {}", names(&f.other_keys)));
        }
        for (k, d) in &self.mounts {
            if Indexed::<Mp, MpIndex>::index_of(k).is_none() {
                bad.push(format!("{k} is not a mount point key (mp0, mp1, ...)"));
            } else if !d.options.contains_key("mp") {
                bad.push(format!("{k} has no mount path (Disk::mount)"));
            }
        }
        if self
            .rootfs
            .as_ref()
            .is_some_and(|r| r.options.contains_key("mp"))
        {
            bad.push("rootfs is always mounted at /; it takes no mp".to_owned());
        }
        for (k, d) in self.volumes() {
            if let Some(p) = d.problem() {
                bad.push(format!("{k}: {p}"));
            }
        }
        if !bad.is_empty() {
            return Some(format!(
                "container {} on {} declares keys PVE's schema does not know ({}); nothing is sent",
                self.vmid,
                self.node,
                bad.join("; ")
            ));
        }
        let req = match self.create_request() {
            Ok(req) => req,
            Err(e) => return Some(e.to_string()),
        };
        pve_sdk::params::check(&req).err().map(|e| {
            let fields: Vec<String> = e
                .problems
                .iter()
                .map(|(k, v)| format!("{k}: {}", v.trim_end()))
                .collect();
            format!("PVE would refuse {}; nothing is sent", fields.join("; "))
        })
    }

    /// **S18** The refusal of feature flags the deploying credential may not set: pve-container
    /// `src/PVE/LXC.pm` check_ct_modify_config_perm lets only `root@pam` change flags of a
    /// privileged container, or any flag but `nesting`. `old` is the live flags (none at
    /// create), `new` the flags to write, `creating` whether the container is yet to be made.
    pub(super) fn features_refusal(
        &self,
        writer: &str,
        unprivileged: bool,
        old: Option<&Features>,
        new: &Features,
        creating: bool,
    ) -> Option<String> {
        if writer == "root@pam" {
            return None;
        }
        let (old, new) = (
            old.map(|f| pairs(&f.to_string())).unwrap_or_default(),
            pairs(&new.to_string()),
        );
        let mut changed: Vec<&String> = old
            .keys()
            .chain(new.keys())
            .filter(|k| old.get(*k) != new.get(*k))
            .collect();
        changed.sort_unstable();
        changed.dedup();
        // "new container or no features defined": every flag given counts.
        let others = if old.is_empty() {
            new.keys().any(|k| k != "nesting")
        } else {
            changed.iter().any(|k| k.as_str() != "nesting")
        };
        if unprivileged && !others {
            return None;
        }
        let why = if unprivileged {
            "flags other than nesting"
        } else {
            "flags of a privileged container"
        };
        Some(format!(
            "PVE lets only root@pam set feature {why}, and this stack deploys as {writer}: {} `pct set {} --features {}` as root on {}, then plan again",
            if creating {
                "declare the container without them, create it, and run"
            } else {
                "run"
            },
            self.vmid,
            new.iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(","),
            self.node
        ))
    }

    pub(super) async fn plan(
        &self,
        cx: &Cx,
        owner: Owner,
        ask: Ask<'_>,
    ) -> Result<Plan, GuestError> {
        if let Some(why) = self.refused() {
            return Ok(Plan::Refuse(why));
        }
        if let Owner::Elsewhere(why) = owner {
            return Ok(Plan::Refuse(why));
        }
        Ok(match self.read(cx.client()).await? {
            None if owner == Owner::Free => self.plan_create(cx.writer_id()),
            // A create an earlier deploy sent, not written yet: waited for (S29).
            None if ask.pending.is_some_and(|i| i.action == "create") => Plan::InProgress(format!(
                "container {} is listed on {} and its config is not there yet, after a create an earlier deploy sent",
                self.vmid, self.node
            )),
            None => Plan::Refuse(format!(
                "container {} is listed on {} but its config is missing; refusing to guess",
                self.vmid, self.node
            )),
            Some(live) if guest::making(live.lock.as_deref()) => Plan::InProgress(format!(
                "container {} on {} is being made (its config holds lock: {})",
                self.vmid,
                self.node,
                live.lock.as_deref().unwrap_or_default()
            )),
            Some(live) => match self.all_changes(&live, cx.writer_id()) {
                Err(why) => Plan::Refuse(why),
                Ok(changes) => Plan::Present {
                    changes,
                    digest: live.digest,
                },
            },
        })
    }

    /// A create needs its template, a root volume when it has mount points (PVE: "mount
    /// points configured, but 'rootfs' not set - aborting"), and feature flags the writer may
    /// set.
    pub(super) fn plan_create(&self, writer: &str) -> Plan {
        let refuse =
            |why: String| Plan::Refuse(format!("container {} on {}: {why}", self.vmid, self.node));
        if self.ostemplate.is_none() {
            return refuse(
                "it does not exist, and no ostemplate is declared to create it from".to_owned(),
            );
        }
        if !self.mounts.is_empty() && self.rootfs.is_none() {
            return refuse(
                "mount points are declared without a rootfs, which PVE refuses".to_owned(),
            );
        }
        // PVE makes a container unprivileged unless told otherwise (pve-container
        // src/PVE/API2/LXC.pm create_vm: `$unprivileged = 1 if !defined($unprivileged)`).
        let unprivileged = self.unprivileged.unwrap_or(true);
        match self
            .features
            .as_ref()
            .and_then(|f| self.features_refusal(writer, unprivileged, None, f, true))
        {
            Some(why) => refuse(why),
            None => Plan::Create,
        }
    }
}
