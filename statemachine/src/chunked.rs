//! A deque and min-priority queues that grow a chunk at a time.
//!
//! A `Vec` or `VecDeque` doubles when full and copies every element into the new buffer: at half
//! a million waiters that held up one apply for tens of milliseconds, on every node at the same
//! entry. [`Chunks`] keeps its elements in chunks of [`CHUNK`], so growing costs one chunk
//! however long the line is. The first chunk grows as a `Vec` does, so a small room holds only
//! what it uses.

use std::collections::VecDeque;

/// Elements per chunk (a power of two).
pub(crate) const CHUNK: usize = 4_096;

/// A double-ended sequence of `Copy` elements in chunks. Every chunk but the last holds exactly
/// [`CHUNK`] elements; the first `head` of the first chunk are gone.
#[derive(Debug, Clone)]
pub(crate) struct Chunks<T> {
    chunks: VecDeque<Vec<T>>,
    head: usize,
    len: usize,
}

impl<T> Default for Chunks<T> {
    fn default() -> Self {
        Chunks {
            chunks: VecDeque::new(),
            head: 0,
            len: 0,
        }
    }
}

impl<T: Copy> Chunks<T> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn place(&self, i: usize) -> (usize, usize) {
        let at = self.head + i;
        (at / CHUNK, at % CHUNK)
    }

    pub fn get(&self, i: usize) -> Option<&T> {
        if i >= self.len {
            return None;
        }
        let (c, o) = self.place(i);
        Some(&self.chunks[c][o])
    }

    pub fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        if i >= self.len {
            return None;
        }
        let (c, o) = self.place(i);
        Some(&mut self.chunks[c][o])
    }

    pub fn front(&self) -> Option<&T> {
        self.get(0)
    }

    pub fn push_back(&mut self, v: T) {
        match self.chunks.back_mut() {
            Some(last) if last.len() < CHUNK => last.push(v),
            _ => {
                let mut c = Vec::with_capacity(if self.chunks.is_empty() { 4 } else { CHUNK });
                c.push(v);
                self.chunks.push_back(c);
            }
        }
        self.len += 1;
    }

    pub fn pop_front(&mut self) -> Option<T> {
        let v = *self.front()?;
        self.head += 1;
        self.len -= 1;
        if self.len == 0 {
            self.clear();
        } else if self.head == CHUNK {
            self.chunks.pop_front();
            self.head = 0;
        }
        Some(v)
    }

    pub fn pop_back(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let last = self.chunks.back_mut().expect("a chunk per element");
        let v = last.pop().expect("the last chunk is never empty");
        self.len -= 1;
        if self.len == 0 {
            self.clear();
        } else if last.is_empty() {
            self.chunks.pop_back();
        }
        Some(v)
    }

    pub fn swap(&mut self, i: usize, j: usize) {
        let (a, b) = (self.get(i).copied(), self.get(j).copied());
        let (Some(a), Some(b)) = (a, b) else {
            panic!("swap outside the sequence");
        };
        *self.get_mut(i).expect("checked") = b;
        *self.get_mut(j).expect("checked") = a;
    }

    /// Elements from position `from` on, in order.
    pub fn iter_from(&self, from: usize) -> impl Iterator<Item = &T> + '_ {
        let from = from.min(self.len);
        let (c, o) = self.place(from);
        let skip = if from == self.len { usize::MAX } else { o };
        self.chunks
            .iter()
            .skip(c)
            .enumerate()
            .flat_map(move |(k, chunk)| {
                chunk[if k == 0 { skip.min(chunk.len()) } else { 0 }..].iter()
            })
    }

    pub fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        self.iter_from(0)
    }

    pub fn clear(&mut self) {
        self.chunks.clear();
        self.head = 0;
        self.len = 0;
    }

    /// Heap bytes held by the elements' chunks.
    pub fn heap_bytes(&self) -> usize {
        self.chunks.iter().map(Vec::capacity).sum::<usize>() * std::mem::size_of::<T>()
            + self.chunks.capacity() * std::mem::size_of::<Vec<T>>()
    }
}

/// A binary min-heap kept in [`Chunks`]: `pop` gives the smallest element. Elements that compare
/// equal are equal values here, so the order of pops depends only on what was pushed.
#[derive(Debug, Clone)]
pub(crate) struct MinHeap<T> {
    items: Chunks<T>,
}

impl<T> Default for MinHeap<T> {
    fn default() -> Self {
        MinHeap {
            items: Chunks::default(),
        }
    }
}

impl<T: Copy + Ord> MinHeap<T> {
    /// A heap of `items`, built in linear time.
    pub fn from_vec(items: Vec<T>) -> Self {
        let mut h = MinHeap {
            items: Chunks::default(),
        };
        for v in items {
            h.items.push_back(v);
        }
        for i in (0..h.items.len() / 2).rev() {
            h.sift_down(i);
        }
        h
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn peek(&self) -> Option<&T> {
        self.items.front()
    }

    pub fn push(&mut self, v: T) {
        self.items.push_back(v);
        let mut i = self.items.len() - 1;
        while i > 0 {
            let parent = (i - 1) / 2;
            if self.at(parent) <= self.at(i) {
                break;
            }
            self.items.swap(i, parent);
            i = parent;
        }
    }

    pub fn pop(&mut self) -> Option<T> {
        let n = self.items.len();
        if n == 0 {
            return None;
        }
        self.items.swap(0, n - 1);
        let v = self.items.pop_back();
        if self.items.len() > 1 {
            self.sift_down(0);
        }
        v
    }

    pub fn clear(&mut self) {
        self.items.clear();
    }

    pub fn heap_bytes(&self) -> usize {
        self.items.heap_bytes()
    }

    fn at(&self, i: usize) -> T {
        *self.items.get(i).expect("index inside the heap")
    }

    fn sift_down(&mut self, mut i: usize) {
        let n = self.items.len();
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut least = i;
            if l < n && self.at(l) < self.at(least) {
                least = l;
            }
            if r < n && self.at(r) < self.at(least) {
                least = r;
            }
            if least == i {
                return;
            }
            self.items.swap(i, least);
            i = least;
        }
    }
}

/// A min-priority queue of due times, which are mostly pushed in order (a session is due from
/// its admission, and admissions come in time order): an element no smaller than the last one
/// queued in order goes to the back of a sorted run, any other into a [`MinHeap`], and `pop`
/// takes the smaller of the two fronts. Pushing and popping in order costs O(1) and touches
/// memory in sequence, where a heap of millions walks its height in cache misses. Pops come in
/// the same order as from one heap: elements that compare equal are equal values.
#[derive(Debug, Clone)]
pub(crate) struct DueQueue<T> {
    run: Chunks<T>,
    heap: MinHeap<T>,
}

impl<T> Default for DueQueue<T> {
    fn default() -> Self {
        DueQueue {
            run: Chunks::default(),
            heap: MinHeap::default(),
        }
    }
}

impl<T: Copy + Ord> DueQueue<T> {
    /// A queue of `items` in any order (built in linear time).
    pub fn from_vec(items: Vec<T>) -> Self {
        DueQueue {
            run: Chunks::default(),
            heap: MinHeap::from_vec(items),
        }
    }

    pub fn len(&self) -> usize {
        self.run.len() + self.heap.len()
    }

    fn run_first(&self) -> bool {
        match (self.run.front(), self.heap.peek()) {
            (Some(r), Some(h)) => r <= h,
            (r, _) => r.is_some(),
        }
    }

    pub fn peek(&self) -> Option<&T> {
        if self.run_first() {
            self.run.front()
        } else {
            self.heap.peek()
        }
    }

    pub fn push(&mut self, v: T) {
        match self.run.len().checked_sub(1).and_then(|i| self.run.get(i)) {
            Some(last) if *last > v => self.heap.push(v),
            _ => self.run.push_back(v),
        }
    }

    pub fn pop(&mut self) -> Option<T> {
        if self.run_first() {
            self.run.pop_front()
        } else {
            self.heap.pop()
        }
    }

    pub fn clear(&mut self) {
        self.run.clear();
        self.heap.clear();
    }

    /// Every queued element, in no particular order (for consistency checks).
    pub fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        self.run.iter().chain(self.heap.items.iter())
    }

    pub fn heap_bytes(&self) -> usize {
        self.run.heap_bytes() + self.heap.heap_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    #[derive(Debug, Clone)]
    enum Op {
        PushBack(u32),
        PopFront,
        PopBack,
        Set(usize, u32),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => any::<u32>().prop_map(Op::PushBack),
            2 => Just(Op::PopFront),
            1 => Just(Op::PopBack),
            1 => (any::<usize>(), any::<u32>()).prop_map(|(i, v)| Op::Set(i, v)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        #[test]
        fn chunks_behave_as_a_deque(ops in prop::collection::vec(op(), 0..20_000), from in any::<usize>()) {
            let mut c = Chunks::default();
            let mut model = VecDeque::new();
            for o in ops {
                match o {
                    Op::PushBack(v) => { c.push_back(v); model.push_back(v); }
                    Op::PopFront => prop_assert_eq!(c.pop_front(), model.pop_front()),
                    Op::PopBack => prop_assert_eq!(c.pop_back(), model.pop_back()),
                    Op::Set(i, v) => if !model.is_empty() {
                        let i = i % model.len();
                        *c.get_mut(i).unwrap() = v;
                        model[i] = v;
                    },
                }
                prop_assert_eq!(c.len(), model.len());
                prop_assert_eq!(c.front(), model.front());
            }
            prop_assert!(c.iter().eq(model.iter()));
            let from = if model.is_empty() { 0 } else { from % (model.len() + 1) };
            prop_assert!(c.iter_from(from).eq(model.iter().skip(from)));
            for i in 0..model.len() {
                prop_assert_eq!(c.get(i), model.get(i));
            }
            prop_assert_eq!(c.get(model.len()), None);
        }

        #[test]
        fn min_heap_pops_as_binary_heap_does(
            start in prop::collection::vec(0u16..500, 0..5_000),
            ops in prop::collection::vec(prop::option::of(0u16..500), 0..10_000),
        ) {
            let mut h = MinHeap::from_vec(start.clone());
            let mut model: BinaryHeap<Reverse<u16>> = start.into_iter().map(Reverse).collect();
            for o in ops {
                match o {
                    Some(v) => { h.push(v); model.push(Reverse(v)); }
                    None => prop_assert_eq!(h.pop(), model.pop().map(|r| r.0)),
                }
                prop_assert_eq!(h.peek(), model.peek().map(|r| &r.0));
                prop_assert_eq!(h.len(), model.len());
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Mostly ascending pushes (as due times come), some out of order, pops between.
        #[test]
        fn due_queue_pops_as_binary_heap_does(
            start in prop::collection::vec(0u32..5_000, 0..2_000),
            ops in prop::collection::vec((0u8..10, 0u32..300), 0..10_000),
        ) {
            let mut q = DueQueue::from_vec(start.clone());
            let mut model: BinaryHeap<Reverse<u32>> = start.into_iter().map(Reverse).collect();
            let mut clock = 0u32;
            for (kind, v) in ops {
                match kind {
                    0..=4 => {
                        clock += v % 7;
                        q.push(clock);
                        model.push(Reverse(clock));
                    }
                    5 | 6 => { q.push(v * 20); model.push(Reverse(v * 20)); }
                    _ => prop_assert_eq!(q.pop(), model.pop().map(|r| r.0)),
                }
                prop_assert_eq!(q.peek(), model.peek().map(|r| &r.0));
                prop_assert_eq!(q.len(), model.len());
            }
            while let Some(r) = model.pop() {
                prop_assert_eq!(q.pop(), Some(r.0));
            }
            prop_assert_eq!(q.pop(), None);
        }
    }

    #[test]
    fn in_order_pushes_stay_out_of_the_heap() {
        let mut q = DueQueue::default();
        for t in 0..10_000u64 {
            q.push((t / 3, t));
        }
        q.push((5, 0)); // out of order
        assert_eq!((q.run.len(), q.heap.len()), (10_000, 1));
        let popped: Vec<_> = std::iter::from_fn(|| q.pop()).take(20).collect();
        assert!(popped.windows(2).all(|w| w[0] <= w[1]), "{popped:?}");
        assert!(popped.contains(&(5, 0)));
        q.clear();
        assert_eq!((q.len(), q.peek()), (0, None));
    }

    #[test]
    fn a_long_sequence_crosses_chunks_at_both_ends() {
        let mut c = Chunks::default();
        for i in 0..3 * CHUNK as u64 + 5 {
            c.push_back(i);
        }
        for i in 0..CHUNK as u64 + 1 {
            assert_eq!(c.pop_front(), Some(i));
        }
        assert_eq!(c.get(0), Some(&(CHUNK as u64 + 1)));
        assert_eq!(c.iter_from(CHUNK).next(), Some(&(2 * CHUNK as u64 + 1)));
        assert_eq!(
            c.heap_bytes() / 8 / CHUNK,
            3,
            "the first chunk went with its elements"
        );
    }

    #[test]
    fn growing_never_copies_more_than_a_chunk() {
        // Capacity rises by at most one chunk per push: no buffer is ever copied whole.
        let mut c = Chunks::default();
        let mut before = 0;
        for i in 0..20 * CHUNK as u64 {
            c.push_back(i);
            let after = c.heap_bytes();
            assert!(
                after.saturating_sub(before) <= CHUNK * 8 + 64 * std::mem::size_of::<Vec<u64>>(),
                "grew by {} bytes at {i}",
                after - before
            );
            before = after;
        }
    }
}
