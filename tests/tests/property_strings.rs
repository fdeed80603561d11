//! Round-trip property tests for generated property-string types: for every value that PVE's
//! grammar can carry (no quoting: pve-common `src/PVE/JSONSchema.pm`), `parse(print(value)) ==
//! value`, including default keys, key aliases and keys a newer PVE might add; every other
//! value is refused when encoded, naming the key.

use std::collections::BTreeMap;

use proptest::prelude::*;
use pve_sdk::generated::nodes::node::lxc::Mp;
use pve_sdk::generated::nodes::node::qemu::{Agent, Memory, Net};
use pve_sdk::open_enum::OpenEnum;
use pve_sdk::PropertyString;

/// Printable ASCII (commas, quotes, `=` and backslashes included), sometimes a line break or
/// non-ASCII text, sometimes empty.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => "[ -~]{0,12}",
        1 => "[ -~]{0,4}\n[ -~]{0,4}",
        1 => "[a-z\u{e9}\u{2013}]{1,6}",
    ]
}

fn open<E: OpenEnum + std::fmt::Debug>() -> impl Strategy<Value = E> {
    prop_oneof![
        proptest::sample::select(E::VALUES).prop_map(E::from_wire),
        "[a-z0-9-]{0,8}".prop_map(|s| E::from_wire(&s)),
    ]
}

fn finite() -> impl Strategy<Value = f64> {
    prop_oneof![Just(0.0), -1e9f64..1e9, proptest::num::f64::NORMAL]
}

/// Keys the schema does not know (so neither its keys nor its aliases).
fn extra<T: PropertyString>() -> impl Strategy<Value = BTreeMap<String, String>> {
    proptest::collection::btree_map("[a-z][a-z0-9_-]{0,8}", text(), 0..3).prop_map(|m| {
        m.into_iter()
            .filter(|(k, _)| {
                !T::SPEC.keys.contains(&k.as_str()) && !T::SPEC.aliases.iter().any(|a| a.key == k)
            })
            .collect()
    })
}

fn net() -> impl Strategy<Value = Net> {
    (
        open(),
        proptest::option::of(text()),
        proptest::option::of(any::<bool>()),
        proptest::option::of(any::<bool>()),
        proptest::option::of(text()),
        proptest::option::of(any::<i64>()),
        proptest::option::of(0i64..64),
        proptest::option::of(finite()),
        proptest::option::of(1i64..4094),
        proptest::option::of(text()),
        extra::<Net>(),
    )
        .prop_map(
            |(
                model,
                bridge,
                firewall,
                link_down,
                macaddr,
                mtu,
                queues,
                rate,
                tag,
                trunks,
                other_keys,
            )| {
                // Generated structs are `#[non_exhaustive]`: built with `new` and fields.
                let mut n = Net::new(model);
                n.bridge = bridge;
                n.firewall = firewall;
                n.link_down = link_down;
                n.macaddr = macaddr;
                n.mtu = mtu;
                n.queues = queues;
                n.rate = rate;
                n.tag = tag;
                n.trunks = trunks;
                n.other_keys = other_keys;
                n
            },
        )
}

fn mp() -> impl Strategy<Value = Mp> {
    (
        (
            proptest::option::of(any::<bool>()),
            proptest::option::of(any::<bool>()),
            proptest::option::of(text()),
            proptest::option::of(any::<bool>()),
            proptest::option::of(text()),
            text(),
        ),
        (
            proptest::option::of(any::<bool>()),
            proptest::option::of(any::<bool>()),
            proptest::option::of(any::<bool>()),
            proptest::option::of(any::<bool>()),
            proptest::option::of(text()),
            text(),
            extra::<Mp>(),
        ),
    )
        .prop_map(
            |(
                (acl, backup, idmap, keepattrs, mountoptions, mp),
                (quota, replicate, ro, shared, size, volume, other_keys),
            )| {
                let mut m = Mp::new(mp, volume);
                m.acl = acl;
                m.backup = backup;
                m.idmap = idmap;
                m.keepattrs = keepattrs;
                m.mountoptions = mountoptions;
                m.quota = quota;
                m.replicate = replicate;
                m.ro = ro;
                m.shared = shared;
                m.size = size;
                m.other_keys = other_keys;
                m
            },
        )
}

fn agent() -> impl Strategy<Value = Agent> {
    (
        any::<bool>(),
        proptest::option::of(any::<bool>()),
        proptest::option::of(any::<bool>()),
        proptest::option::of(open()),
        extra::<Agent>(),
    )
        .prop_map(
            |(enabled, freeze_fs, fstrim_cloned_disks, type_, other_keys)| {
                let mut a = Agent::new(enabled);
                a.freeze_fs = freeze_fs;
                a.fstrim_cloned_disks = fstrim_cloned_disks;
                a.type_ = type_;
                a.other_keys = other_keys;
                a
            },
        )
}

fn memory() -> impl Strategy<Value = Memory> {
    (any::<i64>(), extra::<Memory>()).prop_map(|(current, other_keys)| {
        let mut m = Memory::new(current);
        m.other_keys = other_keys;
        m
    })
}

fn round_trip<T>(value: &T) -> Result<(), TestCaseError>
where
    T: PropertyString
        + std::fmt::Display
        + std::str::FromStr
        + PartialEq
        + std::fmt::Debug
        + serde::Serialize,
    <T as std::str::FromStr>::Err: std::fmt::Display,
{
    let text = value.to_string();
    match pve_sdk::propstr::check(value) {
        Ok(()) => {
            match text.parse::<T>() {
                Ok(back) => prop_assert_eq!(&back, value, "printed as {}", text),
                Err(e) => return Err(TestCaseError::fail(format!("{text:?} does not parse: {e}"))),
            }
            // Serde goes through the same text.
            let json =
                serde_json::to_value(value).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(json, serde_json::Value::String(text));
        }
        Err(e) => {
            // Refused when encoded, with the key named.
            prop_assert!(e.message().starts_with("key "), "{}", e);
            let refused = serde_json::to_value(value).expect_err("serialization refuses it");
            prop_assert!(refused.to_string().contains(e.message()), "{}", refused);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn qemu_net_round_trips(v in net()) {
        round_trip(&v)?;
    }

    #[test]
    fn lxc_mount_point_round_trips(v in mp()) {
        round_trip(&v)?;
    }

    #[test]
    fn qemu_agent_round_trips(v in agent()) {
        round_trip(&v)?;
    }

    #[test]
    fn qemu_memory_round_trips(v in memory()) {
        round_trip(&v)?;
    }
}

/// Values with a comma, line break or nothing in them: never sent.
#[test]
fn a_request_with_an_unwritable_property_string_is_refused_naming_field_and_key() {
    use pve_sdk::form::FormError;
    use pve_sdk::generated::nodes::node::qemu::CreateVm;
    let mut req = CreateVm::new("pve1", 100);
    req.net
        .insert(
            0,
            Net::new(pve_sdk::generated::nodes::node::qemu::NetModel::Virtio)
                .bridge("vmbr0,firewall=1"),
        )
        .expect("index 0");
    match pve_sdk::form::encode(&req) {
        Err(FormError::Field { field, message }) => {
            assert_eq!(field, "net0");
            assert!(
                message.starts_with("property string key 'bridge': the value holds a `,`"),
                "{message}"
            );
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn key_alias_and_default_key_print_the_canonical_form() {
    let net: Net = "model=virtio,macaddr=BC:24:11:00:00:01,bridge=vmbr0"
        .parse()
        .expect("parses");
    assert_eq!(net.to_string(), "virtio=BC:24:11:00:00:01,bridge=vmbr0");
    let agent: Agent = "enabled=1,freeze-fs-on-backup=0"
        .parse()
        .expect("alias of freeze-fs");
    assert_eq!(agent.freeze_fs, Some(false));
    assert_eq!(agent.to_string(), "1,freeze-fs=0");
    let mem: Memory = "4096".parse().expect("bare default key");
    assert_eq!(mem.current, 4096);
}
