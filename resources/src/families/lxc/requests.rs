//! A container's requests: its create and the config write of planned changes, each key one
//! the request has (S11).

use super::*;

impl Lxc {
    pub(super) fn create_request(&self) -> Result<CreateContainer, GuestError> {
        let template = self.ostemplate.clone().unwrap_or_default();
        let mut req = CreateContainer::new(self.node.clone(), template, self.vmid);
        req.hostname.clone_from(&self.hostname);
        req.pool.clone_from(&self.pool);
        req.memory = self.memory;
        req.swap = self.swap;
        req.cores = self.cores;
        req.onboot = self.onboot;
        req.description.clone_from(&self.description);
        req.tags.clone_from(&self.tags);
        req.unprivileged = self.unprivileged;
        req.features.clone_from(&self.features);
        req.net = self.net.clone();
        req.password.clone_from(&self.password);
        req.ssh_public_keys.clone_from(&self.ssh_public_keys);
        let bad = |why: String| GuestError::Inexpressible {
            object: self.object_ref(),
            why,
        };
        if let Some(r) = &self.rootfs {
            req.rootfs = Some(
                r.create_value()
                    .parse()
                    .map_err(|e| bad(format!("rootfs: {e}")))?,
            );
        }
        for (k, d) in &self.mounts {
            let n = Indexed::<Mp, MpIndex>::index_of(k)
                .ok_or_else(|| bad(format!("{k} is not a mount point key")))?;
            let mp: Mp = d
                .create_value()
                .parse()
                .map_err(|e| bad(format!("{k}: {e}")))?;
            req.mp.insert(n, mp).map_err(|e| bad(format!("{k}: {e}")))?;
        }
        Ok(req)
    }

    /// The config write of `changes` with `digest`; every key is one the request has (S11).
    pub(super) fn update_request(
        &self,
        changes: &[&Change],
        digest: &str,
    ) -> Result<UpdateContainer, GuestError> {
        let object = self.object_ref();
        let bad = |why: String| GuestError::Inexpressible {
            object: object.clone(),
            why,
        };
        let mut req = UpdateContainer::new(self.node.clone(), self.vmid);
        req.digest = Some(digest.to_owned());
        for c in changes {
            match c.key.as_str() {
                "hostname" => req.hostname.clone_from(&self.hostname),
                "memory" => req.memory = self.memory,
                "swap" => req.swap = self.swap,
                "cores" => req.cores = self.cores,
                "onboot" => req.onboot = self.onboot,
                "description" => req.description.clone_from(&self.description),
                "tags" => req.tags.clone_from(&self.tags),
                // The planned value: the declared flags with the undeclared ones as read.
                "features" => {
                    req.features = Some(c.new.parse().map_err(|e| bad(format!("features: {e}")))?)
                }
                "rootfs" => {
                    req.rootfs = Some(c.new.parse().map_err(|e| bad(format!("rootfs: {e}")))?)
                }
                key => {
                    if let Some(n) = Indexed::<Net, NetIndex>::index_of(key) {
                        let net = c.new.parse().map_err(|e| bad(format!("{key}: {e}")))?;
                        req.net
                            .insert(n, net)
                            .map_err(|e| bad(format!("{key}: {e}")))?;
                    } else if let Some(n) = Indexed::<Mp, MpIndex>::index_of(key) {
                        let mp = c.new.parse().map_err(|e| bad(format!("{key}: {e}")))?;
                        req.mp
                            .insert(n, mp)
                            .map_err(|e| bad(format!("{key}: {e}")))?;
                    } else {
                        return Err(bad(format!("{key} cannot be expressed as a config update")));
                    }
                }
            }
        }
        Ok(req)
    }
}
