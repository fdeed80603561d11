//! Answers shaped as real PVE sends them, not as its schema says, decode: fields left out or
//! `null`, a whole answer of `null`, and fields of another type (fixed by `response-fields`
//! patches). A field a patch asserts fails naming its JSON path, with the body kept; and
//! `send_raw` reads any answer undecoded. Each test asserts the exact requests made.

use pve_sdk::error::{Body, ClientErrorKind};
use pve_sdk::generated::cluster::mapping::usb::ListUsb as UsbMappings;
use pve_sdk::generated::cluster::resources::Resources;
use pve_sdk::generated::nodes::node::disks::list::List as DiskList;
use pve_sdk::generated::nodes::node::lxc::vmid::interfaces::Ip as LxcInterfaces;
use pve_sdk::generated::nodes::node::vzdump::defaults::Defaults as VzdumpDefaults;
use pve_sdk::{Client, OperationError, Outcome};
use pve_sim::wire::{Reply, WireServer};
use serde_json::json;

fn client(server: &WireServer) -> Client {
    Client::builder(server.url())
        .token("root@pam!t", "s")
        .build()
        .expect("client")
}

fn lines(server: &WireServer) -> Vec<String> {
    server.requests().iter().map(|r| r.line()).collect()
}

#[tokio::test]
async fn fields_pve_leaves_out_or_nulls_decode_as_none() {
    // pve-manager PVE/API2/Disks.pm list answers pve-storage src/PVE/Diskmanage.pm get_disks:
    // `mounted = 1 if exists $mounted->{$devpath}` (else unset), and `osdid-list` is only
    // filled for disks holding OSDs.
    let server = WireServer::start(vec![
        Reply::json(
            "200 OK",
            &json!({"data": [{"devpath": "/dev/sda", "gpt": 1, "osdid": -1,
                               "osdid-list": null, "size": 1000, "used": "LVM"}]}),
        ),
        // pve-container src/PVE/API2/LXC.pm `{vmid}/interfaces` returns
        // src/PVE/LXC.pm get_interfaces, which is `return if $@` (undef) when the container
        // has no pid: it is stopped.
        Reply::json("200 OK", &json!({"data": null})),
        // pve-manager PVE/API2/Cluster/Mapping/USB.pm index: the schema's `error` is never
        // sent (with check-node the handler fills `errors`).
        Reply::json(
            "200 OK",
            &json!({"data": [{"id": "stick", "map": ["node=pve1,id=0951:1666"]}]}),
        ),
    ])
    .await
    .expect("starts");
    let c = client(&server);

    let disks = c.send(&DiskList::new("pve1")).await.expect("decodes").data;
    assert_eq!(disks.len(), 1);
    assert_eq!(disks[0].devpath.as_deref(), Some("/dev/sda"));
    assert_eq!(disks[0].mounted, None, "absent");
    assert_eq!(disks[0].osdid_list, None, "null");
    assert_eq!(disks[0].gpt, Some(true));
    assert_eq!(disks[0].osdid, Some(-1));

    let ifaces = c
        .send(&LxcInterfaces::new("pve1", 101))
        .await
        .expect("a null answer decodes")
        .data;
    assert!(ifaces.is_empty(), "a null list is an empty list");

    let maps = c.send(&UsbMappings::default()).await.expect("decodes").data;
    assert_eq!(maps[0].id.as_deref(), Some("stick"));
    assert_eq!(maps[0].error, None);
    assert_eq!(
        maps[0].map.as_deref(),
        Some(&["node=pve1,id=0951:1666".to_owned()][..])
    );

    assert_eq!(
        lines(&server),
        [
            "GET /api2/json/nodes/pve1/disks/list",
            "GET /api2/json/nodes/pve1/lxc/101/interfaces",
            "GET /api2/json/cluster/mapping/usb",
        ]
    );
}

#[tokio::test]
async fn retyped_fields_decode_as_pve_sends_them() {
    // pve-manager PVE/VZDump.pm read_vzdump_defaults and PVE/API2/VZDump.pm defaults:
    // fleecing and performance are hashes, exclude-path a comma-joined string.
    let server = WireServer::start(vec![Reply::json(
        "200 OK",
        &json!({"data": {
            "fleecing": {"enabled": 0},
            "performance": {"max-workers": 16, "pbs-entries-max": 1048576},
            "exclude-path": "/tmp/?*,/var/tmp/?*",
            "prune-backups": "keep-all=1",
            "storage": "local",
            "mode": "snapshot"
        }}),
    )])
    .await
    .expect("starts");
    let c = client(&server);
    let d = c
        .send(&VzdumpDefaults::new("pve1"))
        .await
        .expect("decodes")
        .data;
    let fleecing = d.fleecing.expect("fleecing");
    assert_eq!(fleecing.enabled, Some(false));
    assert_eq!(fleecing.storage, None);
    let perf = d.performance.expect("performance");
    assert_eq!(
        (perf.max_workers, perf.pbs_entries_max),
        (Some(16), Some(1_048_576))
    );
    assert_eq!(d.exclude_path.as_deref(), Some("/tmp/?*,/var/tmp/?*"));
    assert_eq!(d.storage.as_deref(), Some("local"));
    assert_eq!(
        lines(&server),
        ["GET /api2/json/nodes/pve1/vzdump/defaults"]
    );
}

#[tokio::test]
async fn a_required_field_missing_names_its_path_and_keeps_the_body() {
    let rows = json!({"data": [
        {"id": "qemu/100", "type": "qemu", "vmid": 100, "node": "pve1"},
        {"type": "lxc", "vmid": 101, "node": "pve1"}
    ]});
    let server = WireServer::start(vec![
        Reply::json("200 OK", &rows),
        Reply::json("200 OK", &rows),
    ])
    .await
    .expect("starts");
    let c = client(&server);
    let e = c
        .send(&Resources::new())
        .await
        .expect_err("row 1 has no id");
    assert_eq!(e.outcome(), Outcome::AppliedUnreadable);
    let Some(ClientErrorKind::Decode { body, source }) = e.client_error().map(|c| &c.kind) else {
        panic!("{e:?}");
    };
    assert_eq!(source.path(), ".[1].id");
    assert_eq!(source.message(), Some("required field is missing"));
    let body: &Body = body.as_ref().expect("kept: no secrets here");
    assert_eq!(body.text(), rows.to_string());
    assert!(!body.is_truncated());
    assert!(
        e.to_string()
            .contains("the answer does not match the schema at .[1].id"),
        "{e}"
    );

    // The same answer, undecoded, through the same operation.
    let raw = c.send_raw(&Resources::new()).await.expect("raw");
    assert_eq!(raw.data, rows["data"]);
    assert_eq!(
        lines(&server),
        [
            "GET /api2/json/cluster/resources",
            "GET /api2/json/cluster/resources"
        ]
    );
}

#[tokio::test]
async fn a_huge_answer_is_kept_up_to_64_kib() {
    let big = "x".repeat(200 * 1024);
    let server = WireServer::start(vec![Reply::json(
        "200 OK",
        &json!({"data": [{"id": 5, "type": ["qemu"], "name": big}]}),
    )])
    .await
    .expect("starts");
    let e = client(&server)
        .send(&Resources::new())
        .await
        .expect_err("type is no string");
    let Some(ClientErrorKind::Decode { body, source }) = e.client_error().map(|c| &c.kind) else {
        panic!("{e:?}");
    };
    assert_eq!(source.path(), ".[0].type");
    let body = body.as_ref().expect("kept");
    assert!(body.is_truncated());
    assert_eq!(body.text().len(), Body::LIMIT);
    assert!(body.len() > 200 * 1024);
    assert!(e.to_string().len() < 1024, "the message stays short");
}
