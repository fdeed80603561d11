//! Generated operations against real-shaped PVE data: decoding answers leniently, encoding
//! requests into PVE's flat form, rendering paths.

use pve_sdk::form::encode;
use pve_sdk::generated::cluster::sdn::fabrics::fabric::{
    ListFabricResponseItem, ListFabricResponseItemProtocol,
};
use pve_sdk::generated::nodes::node::network::{ListNetwork, ListNetworkResponse};
use pve_sdk::generated::nodes::node::qemu::vmid::config::{VmConfig, VmConfigResponse};
use pve_sdk::generated::nodes::node::qemu::{CreateVm, Net, NetModel, Numa, Ostype, Scsi};
use pve_sdk::generated::nodes::node::storage::storage::content::volume::Info as VolumeInfo;
use pve_sdk::{Method, Operation};
use serde_json::json;

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn qemu_config_decodes_loose_types_indexed_keys_and_property_strings() {
    // The shape `GET /nodes/pve1/qemu/100/config` answers: numbers as strings, booleans as 0/1,
    // indexed keys, property strings.
    let data = json!({
        "digest": "3c6f2ab2c3f1e0d4e2a0b1c2d3e4f5a6b7c8d9e0",
        "name": "web1",
        "cores": "2",
        "memory": "2048",
        "onboot": 1,
        "numa": "1",
        "numa0": "cpus=0-1,memory=1024",
        "net0": "virtio=BC:24:11:2E:4C:01,bridge=vmbr0,firewall=1",
        "net1": "e1000,bridge=vmbr1,tag=20",
        "scsi0": "local-lvm:vm-100-disk-0,iothread=1,size=32G",
        "unused0": "local:100/vm-100-disk-1.qcow2",
        "ostype": "l26",
        "somethingnew": "kept out of the typed view"
    });
    let cfg: VmConfigResponse = pve_sdk::lenient::from_value(data).expect("decodes");
    assert_eq!(cfg.cores, Some(2));
    assert_eq!(cfg.onboot, Some(true));
    assert_eq!(cfg.numa, Some(true));
    assert_eq!(cfg.memory.as_ref().map(|m| m.current), Some(2048));
    assert_eq!(cfg.ostype, Some(Ostype::L26));
    let numa0: &Numa = cfg.numa_n.get(0).expect("numa0");
    assert_eq!(numa0.cpus, "0-1");
    assert_eq!(numa0.memory, Some(1024.0));
    let net0: &Net = cfg.net.get(0).expect("net0");
    assert_eq!(net0.model, NetModel::Virtio);
    assert_eq!(net0.macaddr.as_deref(), Some("BC:24:11:2E:4C:01"));
    assert_eq!(net0.bridge.as_deref(), Some("vmbr0"));
    assert_eq!(net0.firewall, Some(true));
    assert_eq!(
        net0.to_string(),
        "virtio=BC:24:11:2E:4C:01,bridge=vmbr0,firewall=1"
    );
    let net1 = cfg.net.get(1).expect("net1");
    assert_eq!((net1.model.clone(), net1.tag), (NetModel::E1000, Some(20)));
    let scsi0: &Scsi = cfg.scsi.get(0).expect("scsi0");
    assert_eq!(scsi0.file, "local-lvm:vm-100-disk-0");
    assert_eq!(scsi0.iothread, Some(true));
    assert_eq!(scsi0.size.as_deref(), Some("32G"));
    assert_eq!(
        cfg.unused.get(0).map(|u| u.file.as_str()),
        Some("local:100/vm-100-disk-1.qcow2")
    );
    assert_eq!(cfg.net.len(), 2);
}

#[test]
fn config_read_with_a_wrong_type_is_an_error_naming_the_field() {
    let err =
        pve_sdk::lenient::from_value::<VmConfigResponse>(json!({"digest": "x", "cores": "two"}))
            .expect_err("cores must be an integer");
    assert!(err.to_string().contains("integer"), "{err}");
    let err = pve_sdk::lenient::from_value::<VmConfigResponse>(
        json!({"digest": "x", "net0": "bridge=vmbr0"}),
    )
    .expect_err("net0 has no model");
    assert!(err.to_string().contains("'model' is missing"), "{err}");
}

#[test]
fn create_vm_encodes_to_pves_flat_form() {
    // Chainable setters: `impl Into<String>` for strings, the value itself for scalars, enums
    // and property strings; indexed parameters take their index.
    let req = CreateVm::new("pve1", 100)
        .name("web1")
        .cores(2)
        .numa(true)
        .numa_n(0, "cpus=0-1".parse().expect("numa0"))
        .net(0, Net::new(NetModel::Virtio).bridge("vmbr0").firewall(true))
        .onboot(false);
    let enc = encode(&req).expect("encodes");
    assert_eq!(enc.method, Method::Post);
    assert_eq!(enc.path, "/nodes/pve1/qemu");
    assert_eq!(
        enc.params,
        pairs(&[
            ("cores", "2"),
            ("name", "web1"),
            ("net0", "virtio,bridge=vmbr0,firewall=1"),
            ("numa", "1"),
            ("numa0", "cpus=0-1"),
            ("onboot", "0"),
            ("vmid", "100"),
        ])
    );
    assert_eq!(CreateVm::ID, "create_vm");
    assert_eq!(CreateVm::PATH, "/nodes/{node}/qemu");
    // `Indexed::insert` refuses an index above the bound at once...
    let mut checked = req.clone();
    let e = checked
        .net
        .insert(32, "virtio".parse().expect("net"))
        .expect_err("net32 is out of range");
    assert_eq!(
        e.to_string(),
        "index 32 is out of range for net[n] (0 to 31)"
    );
    // ...and the setter lets it through to encoding, which refuses it naming the key.
    let over = req.net(32, Net::new(NetModel::Virtio));
    match encode(&over) {
        Err(pve_sdk::form::FormError::Custom(m)) => assert_eq!(
            m,
            "field `net32`: index 32 is out of range for net[n] (0 to 31)"
        ),
        other => panic!("net32 must not encode: {other:?}"),
    }
}

#[test]
fn answers_are_buildable_for_tests_and_setters_avoid_trait_method_names() {
    // An answer without required fields: `Default`, then fields (the struct is
    // `#[non_exhaustive]`, so a newer schema's fields are not a breaking change).
    let mut row = pve_sdk::generated::nodes::node::disks::list::ListResponseItem::default();
    row.devpath = Some("/dev/sda".into());
    assert_eq!(row.mounted, None);
    // With required fields: `new(required...)`.
    let cfg = VmConfigResponse::new("digest-1");
    assert_eq!(cfg.digest, "digest-1");
    // Or from JSON, as the client decodes it.
    let cfg: VmConfigResponse =
        pve_sdk::lenient::from_value(json!({"digest": "d", "cores": "4"})).expect("decodes");
    assert_eq!(cfg.cores, Some(4));
    // A key named like a trait method gets `with_`: `clone(self, v)` would shadow
    // `Clone::clone`.
    let bw = pve_sdk::generated::Bwlimit::new()
        .with_clone(100.0)
        .with_default(50.0);
    assert_eq!(bw.clone().to_string(), "clone=100,default=50");
}

#[test]
fn path_parameters_are_percent_encoded_and_leave_the_query() {
    let req = VolumeInfo::new("pve1", "local", "local:iso/debian 12.iso");
    let enc = encode(&req).expect("encodes");
    assert_eq!(
        enc.path,
        "/nodes/pve1/storage/local/content/local:iso%2Fdebian%2012.iso"
    );
    assert!(enc.params.is_empty(), "{:?}", enc.params);
    let get = VmConfig::new("pve1", 100);
    let enc = encode(&get).expect("encodes");
    assert_eq!(enc.path, "/nodes/pve1/qemu/100/config");
    assert!(
        enc.params.is_empty(),
        "a read sends only its path parameters: {:?}",
        enc.params
    );
}

#[test]
fn network_list_reads_enums_and_keeps_unknown_values() {
    let data = json!([
        {"iface": "vmbr0", "type": "bridge", "active": 1, "autostart": "1", "families": ["inet"],
         "priority": 3, "method": "static", "method6": "manual"},
        {"iface": "xy0", "type": "future-kind", "priority": "4"}
    ]);
    let list: ListNetworkResponse = pve_sdk::lenient::from_value(data).expect("decodes");
    assert_eq!(list.len(), 2);
    assert_eq!(list[0].active, Some(true));
    assert_eq!(list[0].autostart, Some(true));
    let type_of = |i: usize| list[i].type_.as_ref().map(ToString::to_string);
    assert_eq!(type_of(0).as_deref(), Some("bridge"));
    assert_eq!(type_of(1).as_deref(), Some("future-kind"));
    assert_eq!(ListNetwork::METHOD, Method::Get);
}

#[test]
fn union_answers_decode_by_their_tag() {
    let data = json!([
        {"id": "f1", "protocol": "ospf", "area": "0", "ip_prefix": "10.0.0.0/24", "digest": "d"},
        {"id": "f2", "protocol": "openfabric", "hello_interval": "3", "digest": "d"},
        {"id": "f3", "protocol": "carrier-pigeon", "digest": "d"}
    ]);
    let items: Vec<ListFabricResponseItem> = pve_sdk::lenient::from_value(data).expect("decodes");
    match &items[0].protocol {
        Some(ListFabricResponseItemProtocol::Ospf(v)) => assert_eq!(v.area.as_deref(), Some("0")),
        other => panic!("expected ospf, got {other:?}"),
    }
    match &items[1].protocol {
        Some(ListFabricResponseItemProtocol::Openfabric(v)) => {
            assert_eq!(v.hello_interval, Some(3.0))
        }
        other => panic!("expected openfabric, got {other:?}"),
    }
    match &items[2].protocol {
        Some(ListFabricResponseItemProtocol::Other { tag, fields }) => {
            assert_eq!(tag, "carrier-pigeon");
            assert!(fields.is_empty(), "{fields:?}");
        }
        other => panic!("expected an unknown variant, got {other:?}"),
    }
    // Without its tag, a row still decodes: the union is absent, the rest is kept.
    let items: Vec<ListFabricResponseItem> =
        pve_sdk::lenient::from_value(json!([{"id": "f4", "area": "0"}])).expect("decodes");
    assert_eq!(items[0].protocol, None);
    assert_eq!(items[0].id.as_deref(), Some("f4"));
}

#[test]
fn union_requests_send_the_tag_and_the_variants_fields() {
    use pve_sdk::generated::cluster::sdn::fabrics::fabric::{
        AddFabric, AddFabricProtocol, AddFabricProtocolOspf,
    };
    let req = AddFabric::new(
        "f1",
        AddFabricProtocol::Ospf(
            AddFabricProtocolOspf::new()
                .area("0")
                .redistribute(vec!["source=static".parse().expect("redistribute")]),
        ),
    );
    let enc = encode(&req).expect("encodes");
    assert_eq!(enc.path, "/cluster/sdn/fabrics/fabric");
    assert_eq!(
        enc.params,
        pairs(&[
            ("id", "f1"),
            ("protocol", "ospf"),
            ("area", "0"),
            ("redistribute", "source=static"),
        ])
    );
}
