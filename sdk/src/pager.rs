//! Reading what PVE pages with `start` and `limit`: the task log and task list, syslog, the
//! Ceph log, the firewall logs and the replication log. Each such operation implements
//! [`Paged`] (generated), and [`Client::pages`] reads it page by page, as pages or as a stream
//! of items.
//!
//! A page shorter than asked for is the last one; so is a page that reaches the `total` PVE
//! sends beside the task log's lines (pve-manager `PVE/API2/Tasks.pm` `read_task_log`:
//! `set_result_attrib('total', $count)`). An empty page ends the reading too, so a log that
//! shrinks (rotated) never loops.
//!
//! A server that does not page as asked never makes the reading loop: a page longer than the
//! `limit` asked for means the server ignored `limit` and sent all it had, so it is the last one;
//! and without a `total`, a page equal to the one before means the server ignored `start`, so
//! the repeat is not yielded and the reading ends (with a warning).

use futures_util::stream::{self, Stream, StreamExt};

use crate::client::{Client, Response};
use crate::operation::Operation;

/// An operation PVE pages with `start` (first item, from 0) and `limit` (items per page).
pub trait Paged: Operation<Response = Vec<<Self as Paged>::Item>> + Clone + Send + Sync {
    /// One item of a page.
    type Item: Send + std::fmt::Debug;

    /// The first item this request asks for: its own `start`, or 0.
    fn first_item(&self) -> u64;

    /// This request for the page of `limit` items from `start`.
    fn page(&self, start: u64, limit: u64) -> Self;
}

/// Reads a [`Paged`] operation page by page ([`Client::pages`]).
#[derive(Debug)]
pub struct Pager<O> {
    client: Client,
    request: O,
    start: u64,
    limit: u64,
    done: bool,
    /// A digest of the last page, to notice a server that ignores `start`.
    last_page: Option<u64>,
}

/// A digest of a page's items (their `Debug`, which every generated item has).
fn digest<T: std::fmt::Debug>(items: &[T]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    format!("{items:?}").hash(&mut h);
    h.finish()
}

impl<O: Paged> Pager<O> {
    /// The next page, or `None` once the last one was read. An error ends the reading (the
    /// next call answers `None`): a page is never skipped silently.
    ///
    /// # Errors
    ///
    /// The operation's error for the page that could not be read.
    pub async fn next_page(&mut self) -> Option<Result<Vec<O::Item>, O::Error>> {
        if self.done {
            return None;
        }
        let page = self.request.page(self.start, self.limit);
        let r: Response<Vec<O::Item>> = match self.client.send(&page).await {
            Ok(r) => r,
            Err(e) => {
                self.done = true;
                return Some(Err(e));
            }
        };
        let got = r.data.len() as u64;
        if got == 0 {
            self.done = true;
            return None;
        }
        if r.total.is_none() {
            let this = digest(&r.data);
            if self.last_page == Some(this) {
                tracing::warn!(
                    operation = O::ID,
                    start = self.start,
                    "the server answered the same page for a later start: it ignores `start`; \
                     the reading ends here"
                );
                self.done = true;
                return None;
            }
            self.last_page = Some(this);
        }
        self.start += got;
        let reached_total = r.total.is_some_and(|t| self.start >= t);
        // Shorter than asked: the last page. Longer: the server ignored `limit` and sent all
        // it had from `start`.
        if got != self.limit || reached_total {
            self.done = true;
        }
        Some(Ok(r.data))
    }

    /// Where the next page starts.
    pub fn position(&self) -> u64 {
        self.start
    }

    /// Every item of every page, in order; an error is the last item.
    pub fn items(self) -> impl Stream<Item = Result<O::Item, O::Error>> + Send
    where
        O: 'static,
        O::Error: Send,
    {
        stream::unfold(self, |mut pager| async move {
            let page = pager.next_page().await?;
            let items: Vec<Result<O::Item, O::Error>> = match page {
                Ok(items) => items.into_iter().map(Ok).collect(),
                Err(e) => vec![Err(e)],
            };
            Some((stream::iter(items), pager))
        })
        .flatten()
    }
}

impl Client {
    /// Reads `request` page by page, `page_size` items at a time (at least 1), starting at the
    /// request's own `start` (or 0).
    ///
    /// ```no_run
    /// # async fn f(client: &pve_sdk::Client) -> Result<(), Box<dyn std::error::Error>> {
    /// use pve_sdk::generated::nodes::node::syslog::Syslog;
    /// let mut pages = client.pages(&Syslog::new("pve1"), 500);
    /// while let Some(page) = pages.next_page().await {
    ///     for line in page? {
    ///         println!("{}", line.t.unwrap_or_default());
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub fn pages<O: Paged>(&self, request: &O, page_size: u64) -> Pager<O> {
        Pager {
            client: self.clone(),
            request: request.clone(),
            start: request.first_item(),
            limit: page_size.max(1),
            done: false,
            last_page: None,
        }
    }
}
