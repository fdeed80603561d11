//! Every operation's answer decodes when PVE leaves a field out or sends it `null`, unless a
//! `response-fields` patch says PVE always sends it; then the error names the field's path.
//! The samples (`generated::samples`) hold every field of every answer type.

use serde_json::Value;

use crate::generated::samples;

/// Decodes an answer as an operation's response type.
type Decode = fn(Value) -> Result<(), serde_json::Error>;

/// One step of a jq path from the samples: `.name`, `[0]` or `["key"]`.
enum Step {
    Name(String),
    Index(usize),
}

fn steps(path: &str) -> Vec<Step> {
    let mut out = Vec::new();
    let mut rest = path.strip_prefix('.').unwrap_or(path);
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("[\"") {
            let end = r.find("\"]").expect("closed key");
            let key: String = serde_json::from_str(&format!("\"{}\"", &r[..end])).expect("key");
            out.push(Step::Name(key));
            rest = &r[end + 2..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']').expect("closed index");
            out.push(Step::Index(r[..end].parse().expect("index")));
            rest = &r[end + 1..];
        } else {
            let r = rest.strip_prefix('.').unwrap_or(rest);
            let end = r.find(['.', '[']).unwrap_or(r.len());
            out.push(Step::Name(r[..end].to_owned()));
            rest = &r[end..];
        }
    }
    out
}

/// The object holding the field at `path`, and the field's key.
fn parent<'v>(root: &'v mut Value, path: &str) -> (&'v mut serde_json::Map<String, Value>, String) {
    let mut steps = steps(path);
    let Some(Step::Name(last)) = steps.pop() else {
        panic!("{path} does not end in a field");
    };
    let mut cur = root;
    for s in steps {
        cur = match s {
            Step::Name(k) => cur.get_mut(&k).unwrap_or_else(|| panic!("{path}: no {k}")),
            Step::Index(i) => cur.get_mut(i).unwrap_or_else(|| panic!("{path}: no [{i}]")),
        };
    }
    match cur {
        Value::Object(m) => (m, last),
        other => panic!("{path}: parent is {other}"),
    }
}

/// (jq path, required) of every field of a sample.
type FieldList = Vec<(String, bool)>;

struct Sample<'a> {
    op: &'a str,
    decode: Decode,
    fields: &'a [(String, bool)],
}

fn failure_path(e: &serde_json::Error) -> String {
    let text = e.to_string();
    crate::lenient::jq_path(crate::lenient::split_path(&text).0)
}

/// Every sample, whole and with each field left out or null: (mutations, required-field
/// failures seen, operations tested).
fn exercise(
    decoders: Vec<(&'static str, Decode)>,
    samples_json: &str,
    count: usize,
) -> (usize, usize, usize) {
    let decoders: std::collections::BTreeMap<&str, Decode> = decoders.into_iter().collect();
    let all: Vec<(String, Value, FieldList)> =
        serde_json::from_str(samples_json).expect("samples are JSON");
    assert_eq!(all.len(), count);
    let (mut removed, mut required, mut tested) = (0, 0, 0);
    for (op, sample, fields) in &all {
        let Some(decode) = decoders.get(op.as_str()) else {
            continue; // its feature is off
        };
        tested += 1;
        let s = Sample {
            op,
            decode: *decode,
            fields,
        };
        if let Err(e) = (s.decode)(sample.clone()) {
            panic!("{}: the full sample does not decode: {e}", s.op);
        }
        // A whole answer of null, where an array or object is expected: empty, or the error
        // of its first required field.
        if sample.is_array() || sample.is_object() {
            let top_required: Vec<&str> = s
                .fields
                .iter()
                .filter(|(p, r)| *r && steps(p).len() == 1)
                .map(|(p, _)| p.as_str())
                .collect();
            match ((s.decode)(Value::Null), top_required.first()) {
                (Ok(()), None) => {}
                (Err(e), Some(_)) => assert!(
                    top_required.contains(&failure_path(&e).as_str()),
                    "{}: null fails at {} ({e})",
                    s.op,
                    failure_path(&e)
                ),
                (Ok(()), Some(p)) => panic!("{}: null decodes though {p} is required", s.op),
                (Err(e), None) => panic!("{}: a null answer does not decode: {e}", s.op),
            }
        }
        for (path, req) in s.fields {
            let req = *req;
            for null in [false, true] {
                let mut v = sample.clone();
                let (obj, key) = parent(&mut v, path);
                if null {
                    obj.insert(key, Value::Null);
                } else {
                    assert!(obj.remove(&key).is_some(), "{}: {path} not in sample", s.op);
                }
                removed += 1;
                match ((s.decode)(v), req) {
                    (Ok(()), false) => {}
                    (Err(e), false) => panic!(
                        "{}: without {path} (null: {null}) the answer does not decode: {e}",
                        s.op
                    ),
                    (Ok(()), true) => panic!(
                        "{}: {path} is required, yet the answer decodes without it (null: {null})",
                        s.op
                    ),
                    (Err(e), true) => {
                        required += 1;
                        assert_eq!(&failure_path(&e), path, "{}: {e}", s.op);
                        let why = if null { "is null" } else { "is missing" };
                        assert!(e.to_string().ends_with(why), "{}: {e}", s.op);
                    }
                }
            }
        }
    }
    (removed, required, tested)
}

#[test]
fn every_answer_decodes_without_each_optional_field_and_names_each_required_one() {
    let decoders = samples::decoders()
        .into_iter()
        .map(|(k, d)| (k, d as Decode))
        .collect();
    let (removed, required, tested) = exercise(decoders, samples::SAMPLES, samples::COUNT);
    // Every operation has a sample, and the patches' required fields were all exercised.
    if cfg!(all(
        feature = "access",
        feature = "cluster",
        feature = "nodes",
        feature = "pools",
        feature = "storage",
        feature = "version"
    )) {
        assert_eq!(tested, samples::COUNT, "every operation has a decoder");
    }
    assert!(removed > 1000, "{removed} mutations");
    assert!(required > 0, "no required field was exercised");
}

/// The same for PBS's operations: every one has a sample and a decoder (one feature, `pbs`).
#[cfg(feature = "pbs")]
#[test]
fn every_pbs_answer_decodes_without_each_optional_field() {
    use crate::pbs::samples as pbs;
    let decoders = pbs::decoders()
        .into_iter()
        .map(|(k, d)| (k, d as Decode))
        .collect();
    let (removed, _required, tested) = exercise(decoders, pbs::SAMPLES, pbs::COUNT);
    assert_eq!(tested, pbs::COUNT, "every PBS operation has a decoder");
    assert!(removed > 1000, "{removed} mutations");
}
