//! Pages bounded by bytes as well as by count. A Lambda function's response is at most 6 MB
//! (6,291,456 bytes), and API Gateway's proxy integration carries the body inside that response
//! as a JSON string, where every quote and backslash doubles: a body must stay under half of it,
//! with room for the envelope. A page of jobs with 200 KiB payloads, or of runs with ten attempts'
//! outputs each, would cross it long before its count limit. So a listing keeps as many items as
//! fit in [`MAX_PAGE_BYTES`] (at least one) and returns `next` after the last one kept: the page
//! is read again with that many items, so the store's own cursor continues it.

use serde::Serialize;

/// The most bytes of items one page holds: under half of Lambda's 6 MB response limit, escaping
/// and envelope included.
pub const MAX_PAGE_BYTES: usize = 2 * 1024 * 1024;

/// How many of the items, of these serialised sizes, fit in `budget` (at least one).
pub fn fitting(sizes: &[usize], budget: usize) -> usize {
    let mut total = 0;
    let kept = sizes.iter().take_while(|size| {
        total += **size + 1;
        total <= budget
    });
    kept.count().max(1)
}

/// `None` if every view fits [`MAX_PAGE_BYTES`]; else how many do (at least one): the page is
/// then read again with that many, so that its `next` is the store's own after the last kept.
pub fn shrink<V: Serialize>(views: &[V]) -> Option<u32> {
    let sizes: Vec<usize> = views.iter().map(|v| serde_json::to_vec(v).map_or(0, |b| b.len())).collect();
    let fit = fitting(&sizes, MAX_PAGE_BYTES);
    (fit < views.len()).then(|| u32::try_from(fit).unwrap_or(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn as_many_as_fit_and_never_none() {
        assert_eq!(fitting(&[10, 10, 10], 100), 3);
        assert_eq!(fitting(&[40, 40, 40], 100), 2);
        assert_eq!(fitting(&[500, 1], 100), 1, "one item always goes, whatever its size");
        assert_eq!(fitting(&[], 100), 1);
    }
}
