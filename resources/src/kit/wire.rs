//! Comparing declared and live objects in PVE's wire form (S8): each top-level key to the text
//! PVE would send or print. Booleans become `1`/`0`, numbers their decimal text, property
//! strings their canonical print (their `Serialize` is their `Display`), anything nested its
//! JSON text; `null` is absent.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

/// A wire map: key to the text PVE sends or prints.
pub type Map = BTreeMap<String, String>;

/// `value`'s top-level keys in wire form.
pub fn wire_map<T: Serialize>(value: &T) -> BTreeMap<String, String> {
    let Ok(Value::Object(map)) = serde_json::to_value(value) else {
        return BTreeMap::new();
    };
    map.into_iter()
        .filter_map(|(k, v)| {
            let text = match v {
                Value::Null => return None,
                Value::Bool(b) => if b { "1" } else { "0" }.to_owned(),
                Value::Number(n) => n.to_string(),
                Value::String(s) => s,
                other => other.to_string(),
            };
            Some((k, text))
        })
        .collect()
}

/// The declared keys whose live value differs: (key, live, declared). An empty string and an
/// absent key are the same (S8): PVE drops empty values from a config.
pub fn differences(
    declared: &BTreeMap<String, String>,
    live: &BTreeMap<String, String>,
) -> Vec<(String, Option<String>, String)> {
    declared
        .iter()
        .filter(|(k, v)| live.get(*k).map_or("", String::as_str) != v.as_str())
        .map(|(k, v)| (k.clone(), live.get(k).cloned(), v.clone()))
        .collect()
}

/// A set in the one form both sides are compared in (S8): items trimmed, empty ones dropped,
/// sorted, once each, joined by `,` (what PVE's list parameters take).
pub fn set_text<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    let mut v: Vec<&str> = items
        .into_iter()
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    v.sort_unstable();
    v.dedup();
    v.join(",")
}

/// A set PVE prints with any of its list separators (`,`, `;`, space) as [`set_text`].
pub fn set_of(text: &str) -> String {
    set_text(text.split([',', ';', ' ']))
}

/// `map` with the trailing whitespace of `keys` cut (S8: PVE reads some texts back with a
/// final newline).
pub fn trim_end(mut map: BTreeMap<String, String>, keys: &[&str]) -> BTreeMap<String, String> {
    for k in keys {
        if let Some(v) = map.get_mut(*k) {
            v.truncate(v.trim_end().len());
        }
    }
    map
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn booleans_numbers_strings_and_nulls() {
        let m = wire_map(&json!({"a": true, "b": 0, "c": "2", "d": null, "e": [1]}));
        assert_eq!(
            m,
            BTreeMap::from([
                ("a".to_owned(), "1".to_owned()),
                ("b".to_owned(), "0".to_owned()),
                ("c".to_owned(), "2".to_owned()),
                ("e".to_owned(), "[1]".to_owned()),
            ])
        );
        let declared = BTreeMap::from([
            ("a".to_owned(), "1".to_owned()),
            ("z".to_owned(), "x".to_owned()),
        ]);
        assert_eq!(
            differences(&declared, &m),
            vec![("z".to_owned(), None, "x".to_owned())]
        );
        let empty = BTreeMap::from([("d".to_owned(), String::new())]);
        assert!(differences(&empty, &m).is_empty(), "empty is absent");
        assert_eq!(set_of("b; a,,b c"), "a,b,c");
    }
}
