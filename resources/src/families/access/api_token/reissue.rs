//! A token's reissue (S26, S29): delete, create again with its ACL entries put back, hand the
//! new secret over, each step recorded so that a killed deploy goes on from where it stopped.

use super::*;

impl ApiToken {
    /// The pending reissue (an update whose word is not the recorded one), if any.
    pub(super) fn pending_reissue<'a>(&self, ask: &Ask<'a>) -> Option<&'a Intent> {
        let i = ask.pending.filter(|i| i.action == "update")?;
        let recorded = ask
            .recorded
            .and_then(|r| r.get("reissue"))
            .map(String::as_str);
        (word_of(i) != recorded).then_some(i)
    }

    /// The plan for a token that is not there while a reissue of it is pending past its
    /// delete: the reissue goes on from its create, with the fields and ACL entries its
    /// delete step recorded (S29). `None` when no such reissue is pending.
    pub(super) fn plan_resumed_reissue(&self, ask: &Ask<'_>) -> Option<Probe> {
        let i = self.pending_reissue(ask)?;
        let step = i.notes.get("step").map(String::as_str)?;
        let word = word_of(i).unwrap_or_default();
        let mut carry: BTreeMap<String, String> = i
            .notes
            .get("fields")
            .and_then(|f| serde_json::from_str(f).ok())
            .unwrap_or_default();
        let grants = i.notes.get("acl").cloned().unwrap_or_default();
        carry.insert("acl".to_owned(), grants.clone());
        let change = Change {
            key: RESUME_CREATE.to_owned(),
            old: Some(format!(
                "word {word}, interrupted at its {step}: the token is not there"
            )),
            new: format!(
                "create the token, put back its ACL entries {grants}, hand the new secret over"
            ),
        };
        Some(Probe::Present {
            changes: vec![change],
            guard: Guard {
                carry,
                recovers: true,
                ..Guard::default()
            },
        })
    }

    /// The token's ACL entries (path and propagate, with their roles), as read now.
    pub(super) async fn read_grants(&self, client: &Client) -> Result<Grants, Failure> {
        let full = self.full_id();
        let acl = client.send(&ReadAcl::new()).await.map_err(Failure::read)?;
        let mut grants = Grants::new();
        for e in acl.into_data() {
            let mine = e.type_ == Some(ReadAclResponseItemType::Token)
                && e.ugid.as_deref() == Some(full.as_str());
            if let (true, Some(path), Some(role)) = (mine, e.path, e.roleid) {
                let propagate = e.propagate.unwrap_or(true);
                grants.entry((path, propagate)).or_default().push(role);
            }
        }
        Ok(grants)
    }

    /// Puts `grants` back on the token; what could not be put back is named.
    pub(super) async fn put_back(&self, client: &Client, grants: &Grants) -> Result<(), Failure> {
        let full = self.full_id();
        let mut lost = Vec::new();
        for ((path, propagate), roles) in grants {
            let put = UpdateAcl::new(path.clone(), roles.join(","))
                .tokens(full.clone())
                .propagate(*propagate);
            if let Err(f) = write::send(client, &put).await {
                lost.push(format!("{path} {} ({f})", roles.join(",")));
            }
        }
        if lost.is_empty() {
            return Ok(());
        }
        let why = format!(
            "its secret was handed over, but its ACL entries were not all put back: {}",
            lost.join("; ")
        );
        Err(Failure::new(ErrorKind::NotConverged, why))
    }

    /// Deletes it and creates it again with the declared (else the live) fields, its ACL
    /// entries put back, the new secret handed over. Each step is recorded, durably, before
    /// its request leaves (S29): the delete with the token's fields and ACL entries, the
    /// create, the hand-over; so the next plan knows how far a killed reissue got.
    pub(super) async fn recreate(
        &self,
        client: &Client,
        carry: &BTreeMap<String, String>,
        rec: OnStarted<'_>,
    ) -> Result<(), Failure> {
        let grants = self.read_grants(client).await?;
        let notes = BTreeMap::from([
            ("acl".to_owned(), grants_text(&grants)),
            (
                "fields".to_owned(),
                serde_json::to_string(carry).unwrap_or_default(),
            ),
        ]);
        rec.step(DELETE, notes.clone()).await.map_err(recording)?;
        let remove = RemoveToken::new(self.userid.clone(), self.tokenid.clone());
        write::send(client, &remove).await?;
        self.create_and_put_back(client, carry, &grants, rec, notes)
            .await
    }

    /// The rest of a reissue from its create: the create (recorded first), the hand-over, the
    /// ACL entries put back.
    pub(super) async fn create_and_put_back(
        &self,
        client: &Client,
        carry: &BTreeMap<String, String>,
        grants: &Grants,
        rec: OnStarted<'_>,
        notes: BTreeMap<String, String>,
    ) -> Result<(), Failure> {
        rec.step(CREATE, notes.clone()).await.map_err(recording)?;
        let made = self.create_with(client, carry, rec, notes).await;
        if let Err(f) = made {
            // The token was deleted and no new one made: the write is not "nothing", so its
            // intent (with the recorded entries) stays for the next plan to go on from.
            if matches!(f.kind(), ErrorKind::WriteRefused | ErrorKind::Refused) {
                return Err(f.with_kind(ErrorKind::NotConverged));
            }
            // It may exist: its entries go back on it; the create's failure is the answer.
            let _ = self.put_back(client, grants).await;
            return Err(f);
        }
        self.put_back(client, grants).await
    }
}

/// `grants` as a note: `[[path, propagate, "role,role"], ...]`.
pub(super) fn grants_text(grants: &Grants) -> String {
    let rows: Vec<serde_json::Value> = grants
        .iter()
        .map(|((path, propagate), roles)| json!([path, propagate, roles.join(",")]))
        .collect();
    serde_json::Value::Array(rows).to_string()
}

/// A note's grants; `None` when it is not one.
pub(super) fn grants_of(text: &str) -> Option<Grants> {
    let rows: Vec<(String, bool, String)> = serde_json::from_str(text).ok()?;
    Some(
        rows.into_iter()
            .map(|(path, propagate, roles)| {
                let roles = roles
                    .split(',')
                    .filter(|r| !r.is_empty())
                    .map(str::to_owned);
                ((path, propagate), roles.collect())
            })
            .collect(),
    )
}
