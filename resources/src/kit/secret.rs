//! Write-only secrets, on the engine's one pattern (S26): a user's initial password, a VM's
//! `cipassword`, a storage's credentials. The value is sent at create and never recorded, read
//! back or compared; what state records is the declaration's rotation marker, and the value is
//! sent again only when the declared marker differs from the recorded one.

use std::collections::BTreeMap;

use crate::contract::Change;

/// A write-only secret field: sent at create, never read, recorded or compared (S26), and sent
/// again only when `rotation` differs from the marker recorded at the last deploy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteOnly {
    /// The field's wire key (`password`).
    pub key: &'static str,
    /// Whether the declaration holds a value for it.
    pub has_value: bool,
    /// The rotation marker the user bumps to send the value again (`None`: never re-sent).
    pub rotation: Option<String>,
}

/// Where state records a write-only field's rotation marker (never its value).
pub fn marker_key(key: &str) -> String {
    format!("rotate:{key}")
}

/// The rotation markers of `fields`, as state records them beside the declaration.
pub fn markers(fields: &[WriteOnly]) -> BTreeMap<String, String> {
    fields
        .iter()
        .filter_map(|w| Some((marker_key(w.key), w.rotation.clone()?)))
        .collect()
}

/// The secrets to send again: those whose declared marker differs from the one `recorded` at
/// the last deploy, as changes that show the markers and never the value. An object without a
/// recorded declaration (adopted) records its marker without sending.
///
/// # Errors
///
/// The sentence for a marker moved without a value to send.
pub fn rotations(
    fields: &[WriteOnly],
    recorded: Option<&BTreeMap<String, String>>,
) -> Result<Vec<Change>, String> {
    let mut out = Vec::new();
    for w in fields {
        let (Some(now), Some(last)) = (&w.rotation, recorded) else {
            continue;
        };
        let was = last.get(&marker_key(w.key));
        if was == Some(now) {
            continue;
        }
        if !w.has_value {
            return Err(format!(
                "rotation {now:?} of {} is declared without a value to send",
                w.key
            ));
        }
        out.push(Change {
            key: w.key.to_owned(),
            old: was.map(|m| format!("rotation {m}")),
            new: format!("rotation {now} (write-only: the value is sent, never shown)"),
        });
    }
    Ok(out)
}
