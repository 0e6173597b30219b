//! Python equality and hashing of dict keys and set items, over the arena.
//!
//! Rules (CPython's `Objects/object.c`, `longobject.c`, `floatobject.c`): numbers compare by
//! value across bool, int, float and complex (`1 == 1.0 == True == 1+0j`); str, bytes compare by
//! content; tuple and frozenset by items; a global by (module, name); a record object by
//! identity; NaN only equals itself (the same node, as CPython's identity shortcut in dict
//! lookup). list, dict, set and bytearray are unhashable, and so is a tuple or frozenset that
//! holds one.
//!
//! Hashes are keyed SipHash (`std::hash::RandomState`), not CPython's hash, so an attacker
//! cannot pick keys that collide (hash flooding). Every walk uses an explicit stack.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, Hash, Hasher};

use hashbrown::HashTable;
use num_bigint::BigInt;
use num_traits::{FromPrimitive, ToPrimitive};

use crate::value::{NodeId, Value};

/// The index of a dict or set: `(hash, position in items)` pairs.
pub(crate) type KeyIndex = HashTable<(u64, u32)>;

/// A value is unhashable (list, dict, set, bytearray, or a tuple/frozenset holding one).
#[derive(Debug)]
pub(crate) struct Unhashable;

/// A number reduced to one canonical form so that equal numbers compare and hash alike.
enum Num {
    I(i64),
    Big(BigInt),
    F(f64),
    C(f64, f64),
}

fn float_num(x: f64) -> Num {
    if x.is_finite() && x.fract() == 0.0 {
        // 2**63, exactly representable.
        let bound = -(i64::MIN as f64);
        if (-bound..bound).contains(&x) {
            // In range and integral: exact conversion.
            return Num::I(x as i64);
        }
        if let Some(b) = BigInt::from_f64(x) {
            return Num::Big(b);
        }
    }
    Num::F(x)
}

fn num_of(v: &Value<'_>) -> Option<Num> {
    Some(match v {
        Value::Bool(b) => Num::I(i64::from(*b)),
        Value::Int(i) => Num::I(*i),
        Value::BigInt(b) => Num::Big((**b).clone()),
        Value::Float(x) => float_num(*x),
        Value::Complex(re, im) => {
            if *im == 0.0 {
                float_num(*re)
            } else {
                Num::C(*re, *im)
            }
        }
        _ => return None,
    })
}

fn num_eq(a: &Num, b: &Num) -> bool {
    match (a, b) {
        (Num::I(x), Num::I(y)) => x == y,
        (Num::Big(x), Num::Big(y)) => x == y,
        (Num::F(x), Num::F(y)) => x == y,
        (Num::C(a, b), Num::C(c, d)) => a == c && b == d,
        _ => false,
    }
}

fn hash_num<H: Hasher>(n: &Num, h: &mut H) {
    match n {
        Num::I(i) => {
            h.write_u8(1);
            h.write_i64(*i);
        }
        Num::Big(b) => {
            h.write_u8(2);
            b.to_signed_bytes_le().hash(h);
        }
        Num::F(x) => {
            h.write_u8(3);
            h.write_u64(x.to_bits());
        }
        Num::C(re, im) => {
            h.write_u8(4);
            // -0.0 == 0.0: hash them alike.
            h.write_u64((re + 0.0).to_bits());
            h.write_u64((im + 0.0).to_bits());
        }
    }
}

/// Hashing and equality over one arena with one key.
pub(crate) struct KeyOps<'n, 'a, S> {
    pub(crate) nodes: &'n [Value<'a>],
    pub(crate) state: &'n S,
}

impl<S: BuildHasher> KeyOps<'_, '_, S> {
    fn node(&self, id: NodeId) -> Option<&Value<'_>> {
        crate::value::lookup(self.nodes, id)
    }

    /// The hash of a hashable value, or `Unhashable`.
    pub(crate) fn hash(&self, root: NodeId) -> Result<u64, Unhashable> {
        // Fast path: scalars.
        if let Some(h) = self.hash_scalar(root)? {
            return Ok(h);
        }
        // Tuples and frozensets: post-order with an explicit stack of frames.
        // Each tuple or frozenset is hashed once per call (`done`), so a DAG of shared tuples
        // (`t = (t', t')` through DUP or the memo) costs its size, not its unfolded size.
        struct Frame<'v, H> {
            id: NodeId,
            items: &'v [NodeId],
            next: usize,
            tuple: bool,
            hasher: H,
            acc: u64,
        }
        let mut done: HashMap<NodeId, u64> = HashMap::new();
        let mut stack: Vec<Frame<'_, S::Hasher>> = Vec::new();
        let mut pending = Some(root);
        loop {
            if let Some(id) = pending.take() {
                let known = match done.get(&id) {
                    Some(&h) => Some(h),
                    None => self.hash_scalar(id)?,
                };
                match known {
                    Some(h) => {
                        // Feed into the parent frame or return.
                        match stack.last_mut() {
                            Some(f) => feed(f.tuple, &mut f.hasher, &mut f.acc, h),
                            None => return Ok(h),
                        }
                    }
                    None => {
                        let (items, tuple) = match self.node(id) {
                            Some(Value::Tuple(items)) => (items.as_slice(), true),
                            Some(Value::FrozenSet(s)) => (s.items.as_slice(), false),
                            _ => return Err(Unhashable),
                        };
                        let mut hasher = self.state.build_hasher();
                        hasher.write_u8(if tuple { 10 } else { 11 });
                        hasher.write_usize(items.len());
                        stack.push(Frame {
                            id,
                            items,
                            next: 0,
                            tuple,
                            hasher,
                            acc: 0,
                        });
                    }
                }
            }
            let Some(top) = stack.last_mut() else {
                return Err(Unhashable);
            };
            if let Some(&child) = top.items.get(top.next) {
                top.next += 1;
                pending = Some(child);
                continue;
            }
            // Frame complete.
            let Some(frame) = stack.pop() else {
                return Err(Unhashable);
            };
            let mut hasher = frame.hasher;
            if !frame.tuple {
                hasher.write_u64(frame.acc);
            }
            let h = hasher.finish();
            done.insert(frame.id, h);
            match stack.last_mut() {
                Some(f) => feed(f.tuple, &mut f.hasher, &mut f.acc, h),
                None => return Ok(h),
            }
        }

        fn feed<H: Hasher>(tuple: bool, hasher: &mut H, acc: &mut u64, h: u64) {
            if tuple {
                hasher.write_u64(h);
            } else {
                // Order-independent for frozensets.
                *acc = acc.wrapping_add(h);
            }
        }
    }

    /// `Some(hash)` for a scalar, `None` for a tuple or frozenset (walked by the caller).
    fn hash_scalar(&self, id: NodeId) -> Result<Option<u64>, Unhashable> {
        let v = self.node(id).ok_or(Unhashable)?;
        let mut h = self.state.build_hasher();
        if let Some(n) = num_of(v) {
            hash_num(&n, &mut h);
            return Ok(Some(h.finish()));
        }
        match v {
            Value::None => h.write_u8(0),
            Value::Str(s) => {
                h.write_u8(5);
                h.write(s.as_bytes());
            }
            Value::Bytes(b) => {
                h.write_u8(6);
                h.write(b);
            }
            Value::Global(g) => {
                h.write_u8(7);
                g.module.hash(&mut h);
                g.name.hash(&mut h);
            }
            Value::Object(_) => {
                h.write_u8(8);
                h.write_u32(id.0);
            }
            Value::Tuple(_) | Value::FrozenSet(_) => return Ok(None),
            _ => return Err(Unhashable),
        }
        Ok(Some(h.finish()))
    }

    /// `Ok` when the value is hashable: a type test for scalars, the full walk (a hash) only
    /// for tuples and frozensets.
    pub(crate) fn check_hashable(&self, id: NodeId) -> Result<(), Unhashable> {
        match self.node(id) {
            Some(
                Value::None
                | Value::Bool(_)
                | Value::Int(_)
                | Value::BigInt(_)
                | Value::Float(_)
                | Value::Complex(..)
                | Value::Str(_)
                | Value::Bytes(_)
                | Value::Global(_)
                | Value::Object(_),
            ) => Ok(()),
            Some(Value::Tuple(_) | Value::FrozenSet(_)) => self.hash(id).map(|_| ()),
            _ => Err(Unhashable),
        }
    }

    /// Python `a == b` for two hashable values (both already hashed successfully).
    #[inline]
    pub(crate) fn eq(&self, a: NodeId, b: NodeId) -> bool {
        if a == b {
            return true;
        }
        // Fast paths for the common keys; everything else walks.
        match (self.node(a), self.node(b)) {
            (Some(Value::Str(p)), Some(Value::Str(q))) => p.as_bytes() == q.as_bytes(),
            (Some(Value::Int(x)), Some(Value::Int(y))) => x == y,
            _ => self.eq_walk(a, b),
        }
    }

    /// `eq` for any two hashable values, with an explicit work list.
    #[inline(never)]
    fn eq_walk(&self, a: NodeId, b: NodeId) -> bool {
        // A pair is compared once: on shared tuples (DAGs) the walk is linear in the pairs of
        // distinct nodes, not in the unfolded trees.
        let mut compared: HashSet<(NodeId, NodeId)> = HashSet::new();
        let mut work = vec![(a, b)];
        while let Some((x, y)) = work.pop() {
            if x == y || !compared.insert((x, y)) {
                continue;
            }
            let (Some(vx), Some(vy)) = (self.node(x), self.node(y)) else {
                return false;
            };
            if let (Some(nx), Some(ny)) = (num_of(vx), num_of(vy)) {
                if !num_eq(&nx, &ny) {
                    return false;
                }
                continue;
            }
            let same = match (vx, vy) {
                (Value::None, Value::None) => true,
                (Value::Str(p), Value::Str(q)) => p.as_bytes() == q.as_bytes(),
                (Value::Bytes(p), Value::Bytes(q)) => p == q,
                (Value::Global(p), Value::Global(q)) => p.module == q.module && p.name == q.name,
                (Value::Tuple(p), Value::Tuple(q)) => {
                    if p.len() != q.len() {
                        return false;
                    }
                    work.extend(p.iter().copied().zip(q.iter().copied()));
                    true
                }
                (Value::FrozenSet(p), Value::FrozenSet(q)) => {
                    if p.items.len() != q.items.len() {
                        return false;
                    }
                    // Pair items by (hash, node id); equal sets pair up equal items.
                    let (Some(ps), Some(qs)) =
                        (self.sorted_by_hash(&p.items), self.sorted_by_hash(&q.items))
                    else {
                        return false;
                    };
                    if ps.iter().map(|e| e.0).ne(qs.iter().map(|e| e.0)) {
                        return false;
                    }
                    work.extend(ps.iter().map(|e| e.1).zip(qs.iter().map(|e| e.1)));
                    true
                }
                _ => false,
            };
            if !same {
                return false;
            }
        }
        true
    }

    fn sorted_by_hash(&self, items: &[NodeId]) -> Option<Vec<(u64, NodeId)>> {
        let mut v = Vec::with_capacity(items.len());
        for &i in items {
            v.push((self.hash(i).ok()?, i));
        }
        v.sort_unstable();
        Some(v)
    }

    /// Finds `key` (with hash `h`) among `keys` through `index`; returns its position.
    pub(crate) fn find(
        &self,
        index: &KeyIndex,
        h: u64,
        key: NodeId,
        key_at: impl Fn(u32) -> Option<NodeId>,
    ) -> Option<u32> {
        index
            .find(h, |&(eh, pos)| {
                eh == h && key_at(pos).is_some_and(|other| self.eq(key, other))
            })
            .map(|&(_, pos)| pos)
    }
}

/// Adds `(h, pos)` to an index (the key is known to be absent).
pub(crate) fn index_insert(index: &mut KeyIndex, h: u64, pos: u32) {
    index.insert_unique(h, (h, pos), |&(eh, _)| eh);
}

/// The f64 nearest to a big int, or `None` if out of range (CPython's OverflowError).
pub(crate) fn bigint_to_f64(b: &BigInt) -> Option<f64> {
    b.to_f64().filter(|x| x.is_finite())
}
