//! A VM's requests: its create (or clone) and the config write of planned changes, each key
//! one the request has (S11).

use super::*;

/// A create or update request's drive fields, by bus.
pub(super) struct Drives<'a> {
    scsi: &'a mut Indexed<Scsi, ScsiIndex>,
    virtio: &'a mut Indexed<Virtio, VirtioIndex>,
    sata: &'a mut Indexed<Sata, SataIndex>,
    ide: &'a mut Indexed<Ide, IdeIndex>,
    efidisk0: &'a mut Option<pve_sdk::generated::nodes::node::qemu::Efidisk0>,
    tpmstate0: &'a mut Option<pve_sdk::generated::nodes::node::qemu::Tpmstate0>,
}

impl Drives<'_> {
    /// Puts a volume value (`STORAGE:SIZE...`, `STORAGE:cloudinit`, or a volume with options)
    /// in the typed field of its key.
    pub(super) fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        let bad = |e: &dyn std::fmt::Display| format!("{key}: {value:?} is not a valid disk: {e}");
        if key == "efidisk0" {
            *self.efidisk0 = Some(value.parse().map_err(|e| bad(&e))?);
        } else if key == "tpmstate0" {
            *self.tpmstate0 = Some(value.parse().map_err(|e| bad(&e))?);
        } else if let Some(n) = Indexed::<Scsi, ScsiIndex>::index_of(key) {
            let d = value.parse::<Scsi>().map_err(|e| bad(&e))?;
            self.scsi.insert(n, d).map_err(|e| bad(&e))?;
        } else if let Some(n) = Indexed::<Virtio, VirtioIndex>::index_of(key) {
            let d = value.parse::<Virtio>().map_err(|e| bad(&e))?;
            self.virtio.insert(n, d).map_err(|e| bad(&e))?;
        } else if let Some(n) = Indexed::<Sata, SataIndex>::index_of(key) {
            let d = value.parse::<Sata>().map_err(|e| bad(&e))?;
            self.sata.insert(n, d).map_err(|e| bad(&e))?;
        } else if let Some(n) = Indexed::<Ide, IdeIndex>::index_of(key) {
            let d = value.parse::<Ide>().map_err(|e| bad(&e))?;
            self.ide.insert(n, d).map_err(|e| bad(&e))?;
        } else {
            return Err(format!("{key} cannot be expressed as a config update"));
        }
        Ok(())
    }
}

impl Vm {
    /// The create request of this declaration (volumes allocated from `STORAGE:SIZE`).
    pub(super) fn create_request(&self) -> Result<CreateVm, GuestError> {
        let mut req = CreateVm::new(self.node.clone(), self.vmid);
        req.name.clone_from(&self.name);
        req.pool.clone_from(&self.pool);
        req.memory.clone_from(&self.memory);
        req.cores = self.cores;
        req.sockets = self.sockets;
        req.onboot = self.onboot;
        req.description.clone_from(&self.description);
        req.agent.clone_from(&self.agent);
        req.balloon = self.balloon;
        req.bios.clone_from(&self.bios);
        req.boot.clone_from(&self.boot);
        req.cpu.clone_from(&self.cpu);
        req.numa = self.numa;
        req.ostype.clone_from(&self.ostype);
        req.protection = self.protection;
        req.scsihw.clone_from(&self.scsihw);
        req.tags.clone_from(&self.tags);
        req.net = self.net.clone();
        req.ciuser.clone_from(&self.ciuser);
        req.ipconfig = self.ipconfig.clone();
        req.nameserver.clone_from(&self.nameserver);
        req.searchdomain.clone_from(&self.searchdomain);
        req.sshkeys = self.sshkeys.as_deref().map(cloudinit::encode_keys);
        req.cipassword.clone_from(&self.cipassword);
        let bad = |why: String| GuestError::Inexpressible {
            object: self.object_ref(),
            why,
        };
        for (key, value) in self.volumes() {
            let mut d = Drives {
                scsi: &mut req.scsi,
                virtio: &mut req.virtio,
                sata: &mut req.sata,
                ide: &mut req.ide,
                efidisk0: &mut req.efidisk0,
                tpmstate0: &mut req.tpmstate0,
            };
            d.set(&key, &value).map_err(bad)?;
        }
        Ok(req)
    }

    /// S8: what PVE's parameter verification would refuse in this declaration, checked
    /// against the SDK's table before anything is sent (ranges, enums, formats, the keys and
    /// values of every property string), each field named; a clone's request too.
    pub(super) fn refused_values(&self) -> Option<String> {
        let req = match self.create_request() {
            Ok(req) => req,
            Err(e) => return Some(e.to_string()),
        };
        let mut problems = pve_sdk::params::check(&req)
            .err()
            .map(|e| e.problems)
            .unwrap_or_default();
        if let Some(c) = &self.clone {
            let clone = c.request(
                &self.node,
                self.vmid,
                self.name.as_deref(),
                self.description.as_deref(),
            );
            if let Err(e) = pve_sdk::params::check(&clone) {
                problems.extend(e.problems);
            }
        }
        (!problems.is_empty()).then(|| {
            let fields: Vec<String> = problems
                .iter()
                .map(|(k, v)| format!("{k}: {}", v.trim_end()))
                .collect();
            format!("PVE would refuse {}; nothing is sent", fields.join("; "))
        })
    }

    /// S13, S14, S29, S4: the create (or clone) task recorded and awaited, then read back.
    pub(super) async fn create_(
        &self,
        cx: &Cx,
        on_started: OnStarted<'_>,
    ) -> Result<(), GuestError> {
        let object = self.object_ref();
        if let Some(c) = &self.clone {
            return self.clone_(cx, c, on_started).await;
        }
        let req = self.create_request()?;
        crate::kit::task::run(cx.client(), &req, cx.await_options(), on_started)
            .await
            .map_err(|source| GuestError::Write {
                object,
                action: "create",
                source: guest::taken::<CreateVmError>(source, CreateVmError::is_vmid_exists),
            })?;
        flow::read_back(self, cx, "create").await
    }

    /// The clone task, then the declared config on the clone as an update (with the
    /// `cipassword` a create would send), its disks grown, read back. Anything after the clone
    /// that fails leaves the clone this stack's own.
    pub(super) async fn clone_(
        &self,
        cx: &Cx,
        c: &CloneOf,
        on_started: OnStarted<'_>,
    ) -> Result<(), GuestError> {
        let object = self.object_ref();
        let mut req = c.request(
            &self.node,
            self.vmid,
            self.name.as_deref(),
            self.description.as_deref(),
        );
        // qemu-server clone_vm joins the clone to `pool` in its task.
        req.pool.clone_from(&self.pool);
        crate::kit::task::run(cx.client(), &req, cx.await_options(), on_started)
            .await
            .map_err(|source| GuestError::Write {
                object: object.clone(),
                action: "clone",
                source,
            })?;
        let after = |e: GuestError| GuestError::AfterClone {
            object: object.clone(),
            source: e.into(),
        };
        let live = self
            .read(cx.client())
            .await
            .map_err(after)?
            .ok_or_else(|| GuestError::NotConverged {
                object: object.clone(),
                action: "clone",
                state: "absent".to_owned(),
            })?;
        let mut changes = self.all_changes(&live).map_err(|why| {
            after(GuestError::NotConverged {
                object: object.clone(),
                action: "clone",
                state: why,
            })
        })?;
        if self.cipassword.is_some() {
            changes.push(Change {
                key: "cipassword".into(),
                old: None,
                new: String::new(),
            });
        }
        flow::apply(self, cx, &changes, &live.digest, on_started)
            .await
            .map_err(after)
    }

    /// The config write of `changes`, with `digest`. Every key is one the request has, or the
    /// update is an error, never a dropped key (S11).
    pub(super) fn update_request(
        &self,
        changes: &[&Change],
        digest: &str,
    ) -> Result<UpdateVm, GuestError> {
        let object = self.object_ref();
        let bad = |why: String| GuestError::Inexpressible {
            object: object.clone(),
            why,
        };
        let mut req = UpdateVm::new(self.node.clone(), self.vmid);
        req.digest = Some(digest.to_owned());
        for c in changes {
            match c.key.as_str() {
                "name" => req.name.clone_from(&self.name),
                "memory" => req.memory.clone_from(&self.memory),
                "cores" => req.cores = self.cores,
                "sockets" => req.sockets = self.sockets,
                "onboot" => req.onboot = self.onboot,
                "description" => req.description.clone_from(&self.description),
                "agent" => {
                    req.agent = Some(c.new.parse().map_err(|e| {
                        bad(format!("agent: {:?} is not a valid agent: {e}", c.new))
                    })?)
                }
                "balloon" => req.balloon = self.balloon,
                "bios" => req.bios.clone_from(&self.bios),
                "boot" => req.boot.clone_from(&self.boot),
                "cpu" => req.cpu.clone_from(&self.cpu),
                "numa" => req.numa = self.numa,
                "ostype" => req.ostype.clone_from(&self.ostype),
                "protection" => req.protection = self.protection,
                "scsihw" => req.scsihw.clone_from(&self.scsihw),
                "tags" => req.tags.clone_from(&self.tags),
                "ciuser" => req.ciuser.clone_from(&self.ciuser),
                "nameserver" => req.nameserver.clone_from(&self.nameserver),
                "searchdomain" => req.searchdomain.clone_from(&self.searchdomain),
                "sshkeys" => req.sshkeys = self.sshkeys.as_deref().map(cloudinit::encode_keys),
                "cipassword" => {
                    req.cipassword =
                        Some(self.cipassword.clone().ok_or_else(|| {
                            bad("a cipassword rotation without a value".to_owned())
                        })?)
                }
                key => {
                    if let Some(n) = Indexed::<Net, NetIndex>::index_of(key) {
                        // The planned value: the declared device with its undeclared sub-keys
                        // (the MAC address) as read, so PVE keeps them.
                        let net = c
                            .new
                            .parse::<Net>()
                            .map_err(|e| bad(format!("{key}: {e}")))?;
                        req.net
                            .insert(n, net)
                            .map_err(|e| bad(format!("{key}: {e}")))?;
                    } else if let Some(n) = Indexed::<String, IpconfigIndex>::index_of(key) {
                        let value = self.ipconfig.get(n).cloned().unwrap_or_default();
                        req.ipconfig
                            .insert(n, value)
                            .map_err(|e| bad(format!("{key}: {e}")))?;
                    } else {
                        let mut d = Drives {
                            scsi: &mut req.scsi,
                            virtio: &mut req.virtio,
                            sata: &mut req.sata,
                            ide: &mut req.ide,
                            efidisk0: &mut req.efidisk0,
                            tpmstate0: &mut req.tpmstate0,
                        };
                        d.set(key, &c.new).map_err(bad)?;
                    }
                }
            }
        }
        Ok(req)
    }
}
