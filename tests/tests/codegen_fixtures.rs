//! The generator over small fixture schemas, one per tricky case, with insta snapshots of the
//! emitted code (or of the error a case must raise).

use std::path::{Path, PathBuf};

use pve_codegen::{Config, Error};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

fn config(case: &str) -> Config {
    Config {
        spec: fixtures().join("specs").join(format!("{case}.json")),
        patches: fixtures().join("patches"),
        version: Some((9, 2)),
        history: Some(Vec::new()),
        upstream_docs: false,
        lock: None,
        since: None,
    }
}

/// Every emitted file of a case, in order, each under a `==> name <==` line.
fn emitted(case: &str) -> String {
    let out = match pve_codegen::run(&config(case)) {
        Ok(o) => o,
        Err(e) => panic!("fixture {case} failed to generate:\n{e}"),
    };
    let mut text = String::new();
    for (name, body) in &out.files {
        text.push_str(&format!("==> {name} <==\n{body}\n"));
    }
    text
}

fn failure(case: &str) -> String {
    match pve_codegen::run(&config(case)) {
        Ok(_) => panic!("fixture {case} must not generate"),
        Err(Error::Input(d)) => d.to_string(),
        Err(e) => panic!("fixture {case} failed for another reason: {e}"),
    }
}

#[test]
fn property_string_with_default_key_and_key_alias() {
    insta::assert_snapshot!(emitted("property_string"));
}

#[test]
fn indexed_param_beside_plain_param_of_the_same_name() {
    insta::assert_snapshot!(emitted("indexed_param"));
}

#[test]
fn keyword_and_dashed_names() {
    insta::assert_snapshot!(emitted("keywords_dashed"));
}

#[test]
fn untyped_returns_fall_back_to_value_and_are_counted() {
    let out = pve_codegen::run(&config("untyped_return")).expect("generates");
    let fallbacks: Vec<String> = out
        .api
        .fallbacks
        .iter()
        .map(|f| format!("{}: {}", f.location, f.reason))
        .collect();
    assert_eq!(
        fallbacks,
        vec![
            "GET /things returns items: an object without \"properties\"",
            "GET /things/any param \"ids\": an array without \"items\"",
            "GET /things/any returns: the schema gives no type",
        ]
    );
    insta::assert_snapshot!(emitted("untyped_return"));
}

#[test]
fn discriminated_union_is_a_tagged_enum() {
    insta::assert_snapshot!(emitted("union"));
}

#[test]
fn path_param_missing_from_parameters_comes_from_the_template() {
    insta::assert_snapshot!(emitted("path_param_missing"));
}

#[test]
fn name_collision_is_an_error_not_a_rename() {
    insta::assert_snapshot!(failure("name_collision"));
}

#[test]
fn generation_is_deterministic() {
    for case in [
        "property_string",
        "indexed_param",
        "keywords_dashed",
        "untyped_return",
        "union",
        "path_param_missing",
        "path_params",
    ] {
        assert_eq!(
            emitted(case),
            emitted(case),
            "{case} differs between two runs"
        );
    }
}

#[test]
fn written_output_is_byte_identical_across_runs() {
    for case in ["property_string", "indexed_param", "union"] {
        let a = tempfile::tempdir().expect("tempdir");
        let b = tempfile::tempdir().expect("tempdir");
        pve_codegen::generate(&config(case), &a.path().join("g")).expect("first run");
        pve_codegen::generate(&config(case), &b.path().join("g")).expect("second run");
        let ta = pve_codegen::format::read_tree(&a.path().join("g")).expect("reads");
        let tb = pve_codegen::format::read_tree(&b.path().join("g")).expect("reads");
        assert!(!ta.is_empty());
        assert_eq!(ta, tb, "{case}");
    }
}

#[test]
fn upstream_prose_only_with_docs_upstream() {
    let spec = fixtures().join("specs/keywords_dashed.json");
    let text = std::fs::read_to_string(&spec).expect("reads");
    // The fixture has no prose; add some to a copy.
    let with_prose = text.replacen(
        "\"name\" : \"create_route-map\",",
        "\"description\" : \"Create a route map (prose).\",\n                  \"name\" : \"create_route-map\",",
        1,
    );
    assert_ne!(with_prose, text);
    let dir = tempfile::tempdir().expect("tempdir");
    let copy = dir.path().join("keywords_dashed.json");
    std::fs::write(&copy, with_prose).expect("writes");
    let mut cfg = config("keywords_dashed");
    cfg.spec = copy;
    let facts_only = pve_codegen::run(&cfg).expect("generates");
    assert!(!facts_only.files.values().any(|f| f.contains("(prose)")));
    cfg.upstream_docs = true;
    let upstream = pve_codegen::run(&cfg).expect("generates");
    let file = &upstream.files["cluster/route_maps.rs"];
    assert!(file.contains("/// Create a route map (prose)."), "{file}");
}

fn with_patches(case: &str, patches: &std::path::Path) -> Config {
    Config {
        patches: patches.to_path_buf(),
        ..config(case)
    }
}

#[test]
fn typed_error_variant_from_a_patch() {
    let out = pve_codegen::run(&with_patches(
        "property_string",
        &fixtures().join("patches-typed-error"),
    ))
    .expect("generates");
    let text = format!(
        "==> errors.rs <==\n{}\n==> nodes/node/device.rs (error enum) <==\n{}",
        out.files["errors.rs"],
        out.files["nodes/node/device.rs"]
            .lines()
            .filter(|l| l.contains("operation_error!"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    insta::assert_snapshot!(text);
}

#[test]
fn path_checks_from_formats_and_path_rest_patches() {
    let out = pve_codegen::run(&with_patches(
        "path_params",
        &fixtures().join("patches-path-checks"),
    ))
    .expect("generates");
    let ops = |file: &str| -> String {
        let text = &out.files[file];
        let mut keep = Vec::new();
        let mut inside = false;
        for line in text.lines() {
            if line.contains("impl crate::Operation for") {
                inside = true;
            }
            if inside {
                keep.push(line);
            }
            if inside && line == "}" {
                inside = false;
            }
        }
        keep.join("\n")
    };
    let text = format!(
        "==> formats.rs <==\n{}\n==> nodes/node/mod.rs (operations) <==\n{}\n==> nodes/node/volumes/volume.rs (operations) <==\n{}\n==> things/id.rs (operations) <==\n{}",
        out.files["formats.rs"],
        ops("nodes/node/mod.rs"),
        ops("nodes/node/volumes/volume.rs"),
        ops("things/id.rs"),
    );
    insta::assert_snapshot!(text);
}

#[test]
fn broken_format_path_rest_and_predicate_patches_are_reported_together() {
    let dir = tempfile::tempdir().expect("tempdir");
    let write =
        |name: &str, text: &str| std::fs::write(dir.path().join(name), text).expect("writes");
    let head = |kind: &str| format!("kind = \"{kind}\"\nreason = \"r\"\nevidence = [\"e\"]\n");
    write(
        "a-formats.toml",
        &format!(
            "{}[[formats]]\nname = \"x\"\npattern = \"[a-z]+\"\nevidence = \"e\"\n[[formats]]\nname = \"y\"\npattern = \"^(a$\"\nevidence = \"\"\n[[formats]]\nname = \"z\"\npattern = \"^z$\"\nmin-length = 5\nmax-length = 2\nevidence = \"e\"\n[[formats]]\nname = \"w\"\npattern = \"^w$\"\nevidence = \"e\"\ncolour = \"red\"\n",
            head("formats")
        ),
    );
    write(
        "b-formats.toml",
        &format!(
            "{}[[formats]]\nname = \"z\"\npattern = \"^z$\"\nevidence = \"e\"\n",
            head("formats")
        ),
    );
    // A property-string format: an unknown fact, a `requires` naming no key, a key that is not
    // a table, both a pattern and keys, neither.
    write(
        "b2-formats.toml",
        &format!(
            "{}[[formats]]\nname = \"ps\"\nevidence = \"e\"\n[formats.keys.ip]\ncolour = \"red\"\n[formats.keys.gw]\nrequires = \"nope\"\n\n[[formats]]\nname = \"ps2\"\nevidence = \"e\"\npattern = \"^a$\"\n[formats.keys]\nip = 1\n\n[[formats]]\nname = \"ps3\"\nevidence = \"e\"\n",
            head("formats")
        ),
    );
    write(
        "c-rest.toml",
        &format!(
            "{}paths = [\"/nodes/{{node}}/gone/{{x}}\", \"/nodes\", \"/nodes/{{node}}/volumes/{{volume}}\"]\n",
            head("path-rest")
        ),
    );
    write(
        "d-rest.toml",
        &format!(
            "{}paths = [\"/nodes/{{node}}/volumes/{{volume}}\"]\n",
            head("path-rest")
        ),
    );
    write("e-rest-empty.toml", &head("path-rest"));
    write(
        "f-predicate.toml",
        &format!(
            "{}name = \"not_is\"\ndoc = \"d\"\nvariant = \"V\"\n[match]\nstatus = 500\nmessage = \"gone\"\n",
            head("predicate")
        ),
    );
    write(
        "g-predicate.toml",
        &format!(
            "{}name = \"is_permission_denied\"\ndoc = \"d\"\n[match]\nstatus = 403\nmessage = \"^.*$\"\n",
            head("predicate")
        ),
    );
    write(
        "h-predicate.toml",
        &format!(
            "{}name = \"is_other\"\ndoc = \"d\"\n[match]\nstatus = 403\nmessage = \"^.*$\"\n",
            head("predicate")
        ),
    );
    write(
        "i-predicate.toml",
        &format!("{}name = \"is_x\"\n", head("predicate")),
    );
    let err = match pve_codegen::run(&with_patches("path_params", dir.path())) {
        Err(pve_codegen::Error::Input(d)) => d.to_string(),
        other => panic!("must fail, got {other:?}"),
    };
    let dir_text = dir.path().display().to_string();
    insta::assert_snapshot!(err.replace(&dir_text, "<patches>"));
}

#[test]
fn broken_error_patches_are_reported_together() {
    let dir = tempfile::tempdir().expect("tempdir");
    let write =
        |name: &str, text: &str| std::fs::write(dir.path().join(name), text).expect("writes");
    let head = "kind = \"error\"\nreason = \"r\"\nevidence = [\"e\"]\ndoc = \"d\"\n";
    write("a-bad-regex.toml", &format!("{head}variant = \"A\"\ndisplay = \"a\"\nfields = []\noperations = [\"PUT /nodes/{{node}}/device\"]\n[match]\nstatus = 500\nmessage = \"^(unclosed$\"\n"));
    write("b-unanchored.toml", &format!("{head}variant = \"B\"\ndisplay = \"b\"\nfields = []\noperations = [\"PUT /nodes/{{node}}/device\"]\n[match]\nstatus = 500\nmessage = \"busy\"\n"));
    write("c-missing-op.toml", &format!("{head}variant = \"C\"\ndisplay = \"c\"\nfields = []\noperations = [\"GET /nodes/{{node}}/gone\"]\n[match]\nstatus = 500\nmessage = \"^gone$\"\n"));
    write("d-no-source.toml", &format!("{head}variant = \"D\"\ndisplay = \"{{vmid}}\"\nfields = [\"vmid\"]\noperations = [\"PUT /nodes/{{node}}/device\"]\n[match]\nstatus = 500\nmessage = \"^d$\"\n"));
    write("e-collides.toml", &format!("{head}variant = \"E\"\ndisplay = \"e\"\nfields = []\noperations = [\"PUT /nodes/{{node}}/device\"]\n[match]\nstatus = 500\nmessage = \"^d$\"\n"));
    write("f-redefines.toml", &format!("{head}variant = \"D\"\ndisplay = \"other\"\nfields = []\noperations = [\"PUT /nodes/{{node}}/device\"]\n[match]\nstatus = 500\nmessage = \"^f$\"\n"));
    write("g-absence.toml", &format!("{head}variant = \"G\"\ndisplay = \"g\"\nfields = []\noperations = [\"PUT /nodes/{{node}}/device\"]\nabsence = [\"PUT /nodes/{{node}}/device\", \"GET /nodes/{{node}}/device\"]\n[match]\nstatus = 500\nmessage = \"^g$\"\n"));
    let err = match pve_codegen::run(&with_patches("property_string", dir.path())) {
        Err(pve_codegen::Error::Input(d)) => d.to_string(),
        other => panic!("must fail, got {other:?}"),
    };
    let dir_text = dir.path().display().to_string();
    insta::assert_snapshot!(err.replace(&dir_text, "<patches>"));
}

#[test]
fn patch_targets_carry_the_version_they_apply_since() {
    let dir = tempfile::tempdir().expect("tempdir");
    let write =
        |name: &str, text: &str| std::fs::write(dir.path().join(name), text).expect("writes");
    let head = |kind: &str| format!("kind = \"{kind}\"\nreason = \"r\"\nevidence = [\"e\"]\n");
    std::fs::copy(
        fixtures().join("patches/index-bounds.toml"),
        dir.path().join("index-bounds.toml"),
    )
    .expect("copies");
    // A target newer than the schema, and one the schema has but the patch applies to only
    // from a later version: both skipped with a note, neither applied.
    write(
        "tasks.toml",
        &format!(
            "{}operations = [{{ op = \"POST /nodes/{{node}}/gone\", since = \"9.3\" }}, {{ op = \"PUT /nodes/{{node}}/device\", since = \"10.0\" }}]\n",
            head("tasks")
        ),
    );
    // A whole file newer than the schema.
    write(
        "error-newer.toml",
        &format!(
            "{}since = \"9.3\"\nvariant = \"Gone\"\ndoc = \"d\"\ndisplay = \"gone\"\nfields = []\noperations = [\"DELETE /nodes/{{node}}/gone\"]\n[match]\nstatus = 500\nmessage = \"^gone$\"\n",
            head("error")
        ),
    );
    let out = pve_codegen::run(&with_patches("property_string", dir.path())).expect("generates");
    assert!(out.patches.tasks.is_empty(), "{:?}", out.patches.tasks);
    assert!(out.patches.errors.is_empty());
    assert_eq!(
        out.patches.skipped,
        [
            "patches/error-newer.toml: skipped: the patch applies since PVE 9.3, the schema is PVE 9.2",
            "patches/tasks.toml: target \"POST /nodes/{node}/gone\" skipped: the patch applies since PVE 9.3, the schema is PVE 9.2",
            "patches/tasks.toml: target \"PUT /nodes/{node}/device\" skipped: the patch applies since PVE 10.0, the schema is PVE 9.2",
        ]
    );

    // From its `since` on, a missing target fails generation again; so does a bad version.
    let mut cfg = with_patches("property_string", dir.path());
    cfg.version = Some((9, 3));
    let err = match pve_codegen::run(&cfg) {
        Err(Error::Input(d)) => d.to_string(),
        other => panic!("must fail, got {other:?}"),
    };
    assert!(
        err.contains("patches/tasks.toml: target operation \"POST /nodes/{node}/gone\" does not exist")
            && err.contains("patches/error-newer.toml: target operation \"DELETE /nodes/{node}/gone\" does not exist"),
        "{err}"
    );
    write(
        "tasks.toml",
        &format!(
            "{}operations = [{{ op = \"PUT /nodes/{{node}}/device\", since = \"nine\" }}]\n",
            head("tasks")
        ),
    );
    write(
        "error-newer.toml",
        &format!("{}since = \"9\"\n", head("error")),
    );
    let err = match pve_codegen::run(&with_patches("property_string", dir.path())) {
        Err(Error::Input(d)) => d.to_string(),
        other => panic!("must fail, got {other:?}"),
    };
    assert!(
        err.contains("since \"nine\" of target \"PUT /nodes/{node}/device\" is not a PVE version")
            && err.contains("patches/error-newer.toml: since \"9\" is not a PVE version"),
        "{err}"
    );
}

#[test]
fn response_fields_patch_keeps_a_field_required_or_retypes_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let write =
        |name: &str, text: &str| std::fs::write(dir.path().join(name), text).expect("writes");
    std::fs::copy(
        fixtures().join("patches/index-bounds.toml"),
        dir.path().join("index-bounds.toml"),
    )
    .expect("copies");
    let head = "kind = \"response-fields\"\nreason = \"r\"\nevidence = [\"e\"]\n";
    write(
        "response-fields.toml",
        &format!("{head}[[fields]]\noperation = \"GET /lists/{{id}}/entries/{{url_seq}}\"\nfield = \"seq\"\nrequired = true\ntype = {{ type = \"string\" }}\nevidence = \"handler sets it\"\n"),
    );
    let out = pve_codegen::run(&with_patches("path_param_missing", dir.path())).expect("generates");
    let file = out
        .files
        .iter()
        .find(|(_, t)| t.contains("pub seq:"))
        .map(|(_, t)| t.clone())
        .expect("the answer struct");
    assert!(file.contains("pub seq: String,"), "{file}");
    assert!(file.contains("seq: f.req(\"seq\")?,"), "{file}");
    assert!(out.files["samples.rs"].contains(r#"[[".seq",true]]]"#));
    assert_eq!(out.api.answer_fields.kept_required, 1);
    assert_eq!(out.api.answer_fields.retyped, 1);
    assert_eq!(out.api.answer_fields.made_optional, 0);

    // Without the patch the field is optional, and counted as made so.
    std::fs::remove_file(dir.path().join("response-fields.toml")).expect("removes");
    let out = pve_codegen::run(&with_patches("path_param_missing", dir.path())).expect("generates");
    assert_eq!(out.api.answer_fields.made_optional, 1);
    assert!(out.files["samples.rs"].contains(r#"[[".seq",false]]]"#));

    // Every broken entry is reported at once.
    let op = "operation = \"GET /lists/{id}/entries/{url_seq}\"";
    write(
        "response-fields.toml",
        &format!(
            "{head}\
[[fields]]\n{op}\nfield = \"gone\"\nrequired = true\nevidence = \"e\"\n\
[[fields]]\n{op}\nfield = \"gone\"\nrequired = true\nevidence = \"e\"\n\
[[fields]]\n{op}\nfield = \"a..b\"\nrequired = true\nevidence = \"e\"\n\
[[fields]]\n{op}\nfield = \"seq\"\nevidence = \"e\"\n\
[[fields]]\noperation = \"GET /nowhere\"\nfield = \"x\"\nrequired = true\nevidence = \"e\"\n\
[[fields]]\n{op}\nfield = \"seq\"\nrequired = true\nevidence = \" \"\ntype = {{ type = \"strang\" }}\n\
[[fields]]\n{op}\nfield = \"other\"\nrequired = true\nevidence = \"e\"\ncolour = \"red\"\n"
        ),
    );
    let err = match pve_codegen::run(&with_patches("path_param_missing", dir.path())) {
        Err(Error::Input(d)) => d.to_string(),
        other => panic!("must fail, got {other:?}"),
    };
    insta::assert_snapshot!(err);
    // The stage after the patch checks reports a field the answer does not have.
    write(
        "response-fields.toml",
        &format!("{head}[[fields]]\n{op}\nfield = \"[].seq\"\nrequired = true\nevidence = \"e\"\n"),
    );
    let err = match pve_codegen::run(&with_patches("path_param_missing", dir.path())) {
        Err(Error::Input(d)) => d.to_string(),
        other => panic!("must fail, got {other:?}"),
    };
    assert!(
        err.contains("patches/response-fields.toml: field \"[].seq\" is not in the answer of \"GET /lists/{id}/entries/{url_seq}\""),
        "{err}"
    );
}
