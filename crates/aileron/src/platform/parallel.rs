//! Work over many independent items spread over every core, results kept in the items' order:
//! the daemon's start parsing 10,000 action files, a chain check parsing 100,000 records.

/// `map` of each part of `items`, on up to `available_parallelism` scoped threads, each given at
/// least `min_per_thread` items (fewer items in all: the calling thread does them), the parts'
/// results concatenated in `items`' order. A panic in a part is resumed on the calling thread.
pub(crate) fn map_in_parts<T: Sync, R: Send>(
    items: &[T],
    min_per_thread: usize,
    map: impl Fn(&[T]) -> Vec<R> + Sync,
) -> Vec<R> {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let threads = cores.min(items.len() / min_per_thread.max(1)).max(1);
    if threads == 1 {
        return map(items);
    }
    let map = &map;
    std::thread::scope(|scope| {
        let parts: Vec<_> =
            items.chunks(items.len().div_ceil(threads)).map(|part| scope.spawn(move || map(part))).collect();
        parts
            .into_iter()
            .flat_map(|part| part.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            .collect()
    })
}
