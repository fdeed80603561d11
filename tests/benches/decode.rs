//! Benchmark: decoding a VM config answer: JSON to Value alone, and on to the typed, lenient
//! `VmConfigResponse`. `cargo bench -p pve-tests --bench decode`
use pve_sdk::generated::nodes::node::qemu::vmid::config::VmConfigResponse;
use std::time::Instant;
fn main() {
    let body = br#"{"data":{"name":"bench","cores":"4","memory":"4096","net0":"virtio=BC:24:11:00:00:01,bridge=vmbr0,firewall=1","scsi0":"local-lvm:vm-100-disk-0,iothread=1,size=32G","ostype":"l26","onboot":"1","digest":"0123456789012345678901234567890123456789"}}"#;
    let t = Instant::now();
    for _ in 0..10_000 {
        let v: serde_json::Value = serde_json::from_slice(body).expect("json");
        std::hint::black_box(v);
    }
    println!("value parse: {:?}/req", t.elapsed() / 10_000);
    let t = Instant::now();
    for _ in 0..10_000 {
        let mut v: serde_json::Value = serde_json::from_slice(body).expect("json");
        let d = v["data"].take();
        let c: VmConfigResponse = pve_sdk::lenient::from_value(d).expect("decodes");
        std::hint::black_box(c);
    }
    println!("value + typed: {:?}/req", t.elapsed() / 10_000);
}
