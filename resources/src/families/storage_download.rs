//! The `StorageDownload` family (node-scoped, hand-written on [`ConfigObject`]): an ISO, a
//! container template or an import image fetched by URL into a file-based storage. pve-storage
//! `src/PVE/API2/Storage/Status.pm` download_url, whose worker is pve-common
//! `src/PVE/Tools.pm` download_file_from_url:
//!
//! - **The checksum is required** and is part of the object's identity: state records it with
//!   the file's address. A declaration whose checksum differs from the recorded one is a
//!   refusal (an object is never replaced, S18): PVE never overwrites a file from this API
//!   (download_file_from_url without `allow_overwrite` keeps a file whose checksum matches and
//!   aborts on one that does not), so another file takes another name.
//! - **Present when the storage's content list has the volume** (`storage:iso/name`), on the
//!   declared node; the list is the only read (PVE keeps no checksum to read back: a file
//!   adopted as present is trusted to be the declared one, and PVE compares the checksum
//!   whenever it downloads).
//! - **The file name in PVE's spelling** (S36): `normalize_content_filename` keeps the last
//!   path component and replaces every character but `[a-zA-Z0-9_.-]` by `_`; the address
//!   and the volume id use that name. Its extension must be one the content type takes.
//! - **A task**: `download`, whose UPID is recorded before it is awaited (S29).
//! - **No update**: the URL, compression and certificate check say how to fetch the file,
//!   which is then the same file as long as its checksum is; they are not compared.
//! - Comes after its storage; guests that name the volume (a VM's ISO, a container's
//!   `ostemplate`) come after it. Dropped from the declaration, the file is kept (S20); an
//!   explicit destroy deletes the volume (`imgdel`).

use std::collections::BTreeMap;

use pve_sdk::generated::nodes::node::storage::storage::content::volume::Delete as DeleteVolume;
use pve_sdk::generated::nodes::node::storage::storage::content::ListContent;
use pve_sdk::generated::nodes::node::storage::storage::download_url::DownloadUrl;
use pve_sdk::generated::nodes::node::storage::storage::{ChecksumAlgorithm, Content};
use pve_sdk::Client;

use crate::contract::{BoxFuture, Cx, Failure, ObjectRef, OnStarted, Scope};
use crate::families::config::{ConfigObject, Edit};
use crate::families::kinds;

/// A declared download: `StorageDownload::iso("pve1", "local", "debian.iso", url, sha256)`, or
/// any field of its request with [`StorageDownload::of`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct StorageDownload {
    /// The request: node, storage, content type, file name, URL, checksum and how to fetch.
    pub request: DownloadUrl,
}

/// pve-storage `src/PVE/Storage.pm` normalize_content_filename.
fn normalize(name: &str) -> String {
    let name = name.trim_end_matches('\n');
    let last = name.rsplit(['/', '\\']).next().unwrap_or_default();
    last.chars()
        .map(|c| match c.is_ascii_alphanumeric() || "_.-".contains(c) {
            true => c,
            false => '_',
        })
        .collect()
}

impl StorageDownload {
    /// Declares `request`: its node, storage, content type and file name the address.
    pub fn of(request: DownloadUrl) -> Self {
        StorageDownload { request }
    }

    /// An ISO image `filename` in `storage` on `node`, fetched from `url` and checked against
    /// its SHA-256 `sha256`.
    pub fn iso(
        node: impl Into<String>,
        storage: impl Into<String>,
        filename: impl Into<String>,
        url: impl Into<String>,
        sha256: impl Into<String>,
    ) -> Self {
        Self::with(node, storage, Content::Iso, filename, url, sha256)
    }

    /// A container template `filename` (`.tar.zst`, ...), as [`StorageDownload::iso`].
    pub fn template(
        node: impl Into<String>,
        storage: impl Into<String>,
        filename: impl Into<String>,
        url: impl Into<String>,
        sha256: impl Into<String>,
    ) -> Self {
        Self::with(node, storage, Content::Vztmpl, filename, url, sha256)
    }

    fn with(
        node: impl Into<String>,
        storage: impl Into<String>,
        content: Content,
        filename: impl Into<String>,
        url: impl Into<String>,
        sha256: impl Into<String>,
    ) -> Self {
        let request = DownloadUrl::new(node, storage, content, filename, url)
            .checksum(sha256)
            .checksum_algorithm(ChecksumAlgorithm::Sha256);
        StorageDownload { request }
    }

    /// The file name as PVE stores it.
    pub fn filename(&self) -> String {
        normalize(&self.request.filename)
    }

    /// The volume id PVE lists it under (`local:iso/debian.iso`).
    pub fn volid(&self) -> String {
        let r = &self.request;
        format!("{}:{}/{}", r.storage, r.content, self.filename())
    }

    /// `ALGORITHM:HEX`, as recorded (lower-case hex: PVE compares it so).
    fn checksum(&self) -> String {
        let r = &self.request;
        let alg = r.checksum_algorithm.as_ref().map(ToString::to_string);
        let sum = r
            .checksum
            .as_deref()
            .unwrap_or_default()
            .to_ascii_lowercase();
        format!("{}:{sum}", alg.unwrap_or_default())
    }
}

/// The extensions a content type takes (`$ISO_EXT_RE_0` and `$VZTMPL_EXT_RE_1`
/// case-insensitive, `$UPLOAD_IMPORT_EXT_RE_1` as written).
fn extension_ok(content: &Content, name: &str) -> Option<bool> {
    let (name, ends): (String, &[&str]) = match content {
        Content::Iso => (name.to_ascii_lowercase(), &[".iso", ".img"]),
        Content::Vztmpl => (
            name.to_ascii_lowercase(),
            &[".tar", ".tar.gz", ".tar.xz", ".tar.zst", ".tar.bz2"],
        ),
        Content::Import => (name.to_owned(), &[".ova", ".qcow2", ".raw", ".vmdk"]),
        _ => return None,
    };
    Some(
        ends.iter()
            .any(|e| name.len() > e.len() && name.ends_with(e)),
    )
}

impl ConfigObject for StorageDownload {
    const KIND: crate::contract::Kind = kinds::STORAGE_DOWNLOAD;

    fn object(&self) -> ObjectRef {
        ObjectRef::new(
            kinds::STORAGE_DOWNLOAD,
            Scope::Node(self.request.node.clone()),
            self.volid(),
        )
    }

    /// The node, storage, content type and file name, and the checksum: what the file is.
    fn address(&self) -> BTreeMap<String, String> {
        let r = &self.request;
        BTreeMap::from([
            ("node".to_owned(), r.node.clone()),
            ("storage".to_owned(), r.storage.clone()),
            ("content".to_owned(), r.content.to_string()),
            ("filename".to_owned(), self.filename()),
            ("checksum".to_owned(), self.checksum()),
        ])
    }

    /// Nothing is compared: PVE answers no attribute the declaration sets.
    fn declared(&self) -> BTreeMap<String, String> {
        BTreeMap::new()
    }

    /// The volume in the storage's content list of its type, on the declared node.
    fn read<'a>(
        &'a self,
        client: &'a Client,
    ) -> BoxFuture<'a, Result<Option<BTreeMap<String, String>>, Failure>> {
        Box::pin(async move {
            let r = &self.request;
            let mut list = ListContent::new(&r.node, &r.storage);
            list.content = Some(r.content.to_string());
            let rows = client.send(&list).await.map_err(Failure::read)?.into_data();
            let volid = self.volid();
            Ok(rows
                .into_iter()
                .find(|row| row.volid.as_deref() == Some(volid.as_str()))
                .map(|row| {
                    let mut live = BTreeMap::from([("volid".to_owned(), volid)]);
                    if let Some(size) = row.size {
                        live.insert("size".to_owned(), size.to_string());
                    }
                    live
                }))
        })
    }

    fn create<'a>(
        &'a self,
        cx: &'a Cx,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            let mut req = self.request.clone();
            req.filename = self.filename();
            crate::kit::task::write(cx, &req, on_started).await
        })
    }

    /// The request against the SDK's table, a checksum, and the name's extension.
    fn check(&self) -> Result<(), pve_sdk::params::Invalid> {
        let r = &self.request;
        let mut problems = pve_sdk::params::check(r)
            .err()
            .map(|e| e.problems)
            .unwrap_or_default();
        if r.checksum.as_deref().is_none_or(str::is_empty) || r.checksum_algorithm.is_none() {
            problems.entry("checksum".into()).or_insert_with(|| {
                "is required with its algorithm: without one PVE verifies nothing it downloads"
                    .into()
            });
        }
        match extension_ok(&r.content, &self.filename()) {
            Some(true) => {}
            Some(false) => {
                problems.entry("filename".into()).or_insert_with(|| {
                    format!("has no extension PVE takes for {} content", r.content)
                });
            }
            None => {
                problems
                    .entry("content".into())
                    .or_insert_with(|| "is not iso, vztmpl or import".into());
            }
        }
        match problems.is_empty() {
            true => Ok(()),
            false => Err(pve_sdk::params::Invalid {
                operation: format!(
                    "{} {}",
                    <DownloadUrl as pve_sdk::Operation>::METHOD,
                    <DownloadUrl as pve_sdk::Operation>::PATH
                ),
                problems,
            }),
        }
    }

    /// Never asked: nothing is compared, and another checksum is another object.
    fn update<'a>(
        &'a self,
        _: &'a Client,
        edit: &'a Edit<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move { edit.expect(self, &[], false, &[]) })
    }

    /// The volume's delete (`imgdel`).
    fn delete<'a>(
        &'a self,
        cx: &'a Cx,
        on_started: OnStarted<'a>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            let r = &self.request;
            let req = DeleteVolume::new(&r.node, &r.storage, self.volid());
            crate::kit::task::write(cx, &req, on_started).await
        })
    }

    /// Its storage.
    fn requires(&self) -> Vec<ObjectRef> {
        vec![ObjectRef::new(
            kinds::STORAGE,
            Scope::Cluster,
            self.request.storage.clone(),
        )]
    }

    fn summary(&self) -> Vec<String> {
        let r = &self.request;
        vec![format!(
            "downloads {} into {} on {}, checked against its {} checksum",
            r.url,
            self.volid(),
            r.node,
            r.checksum_algorithm
                .as_ref()
                .map_or_else(String::new, ToString::to_string)
        )]
    }
}

/// Rebuilds a managed download from its state entry (for its removal policy).
pub fn rebuild(
    rs: &crate::state::ResourceState,
) -> Option<std::sync::Arc<dyn crate::contract::Resource>> {
    let a = &rs.address;
    let content: Content = pve_sdk::open_enum::OpenEnum::from_wire(a.get("content")?);
    let (alg, sum) = a.get("checksum")?.split_once(':')?;
    let alg: ChecksumAlgorithm = pve_sdk::open_enum::OpenEnum::from_wire(alg);
    let request = DownloadUrl::new(
        a.get("node")?,
        a.get("storage")?,
        content,
        a.get("filename")?,
        "",
    )
    .checksum(sum)
    .checksum_algorithm(alg);
    Some(std::sync::Arc::new(StorageDownload { request }))
}
