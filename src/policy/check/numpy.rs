//! numpy's pickles, canonical or refused: a `numpy.dtype`, an ndarray (`_reconstruct`) and a
//! numpy scalar (`scalar`), each exactly as numpy writes it. The sources cited are numpy 2.4.6
//! (`git show v2.4.6:<path>` in github.com/numpy/numpy); the table of every dtype's pickle made
//! by real numpy is `tests/corpus/numpy/dtypes.tsv` (`tests/python/gen_numpy.py`).
//!
//! Why: numpy's unpickler takes what the pickle says. `arraydescr_setstate`
//! (`numpy/_core/src/multiarray/descriptor.c:2883`) copies the flags from the state, so an
//! object dtype whose state clears `NPY_ITEM_REFCOUNT` makes an object array whose pointers
//! are raw bytes; `array_setstate` (`methods.c:2029`) then takes bytes for such an array and
//! the first `repr` dereferences attacker-chosen pointers. `_setlist_pkl` (`methods.c:1761`)
//! reads `prod(shape)` items from the list without looking at its length, and `array_scalar`
//! (`multiarraymodule.c:2127`) reads `itemsize` bytes from longer bytes and treats an object
//! dtype's bytes as a pointer. So nothing is taken on trust: each value must be the one the
//! writer produces for the type it claims.

use crate::value::{Arena, NodeId, Value};

/// numpy's dtype flags (`numpy/_core/include/numpy/ndarraytypes.h:583-608`).
const ITEM_REFCOUNT: u64 = 0x01;
const LIST_PICKLE: u64 = 0x02;
const ITEM_IS_POINTER: u64 = 0x04;
const NEEDS_INIT: u64 = 0x08;
const NEEDS_PYAPI: u64 = 0x10;
const ALIGNED_STRUCT: u64 = 0x80;
/// `NPY_FROM_FIELDS`: the flags a structured dtype takes from its fields.
const FROM_FIELDS: u64 = NEEDS_INIT | LIST_PICKLE | ITEM_REFCOUNT | NEEDS_PYAPI;
/// `NPY_OBJECT_DTYPE_FLAGS`: `LIST_PICKLE | USE_GETITEM | ITEM_IS_POINTER | ITEM_REFCOUNT |
/// NEEDS_INIT | NEEDS_PYAPI`, the flags of `O`.
const OBJECT_FLAGS: u64 = 0x3f;

/// The most dimensions of an array (`NPY_MAXDIMS`, `npy_common.h:41`).
pub(crate) const MAX_DIMS: usize = 64;

/// The largest element size numpy keeps (`elsize` is a C `int` in the pickled state).
const MAX_ELSIZE: u64 = i32::MAX as u64;

/// What a dtype is to the reader: the facts the other checks need.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Dtype {
    /// The kind letter of its type string (`b'f'` for `f8`).
    pub(crate) kind: u8,
    /// Bytes per element (`itemsize`).
    pub(crate) itemsize: u64,
    /// `alignment`.
    pub(crate) alignment: u64,
    /// numpy's flags.
    pub(crate) flags: u64,
    /// Plain, structured (fields) or a sub-array.
    pub(crate) layout: Layout,
    /// Its byte order is `>` (its state said so; `<`, native on the platforms numpy's writers
    /// this reads ran on, otherwise).
    pub(crate) big_endian: bool,
}

/// The shape of a `V` dtype's element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Layout {
    /// A scalar type, or raw void bytes.
    Plain,
    /// Named fields (`names`, `fields`).
    Structured,
    /// A sub-array of another dtype (`subarray`).
    Subarray,
}

impl Dtype {
    /// Whether its elements are Python objects (`NPY_ITEM_REFCOUNT`): an array of it pickles
    /// its data as a list.
    pub(crate) fn holds_objects(&self) -> bool {
        self.flags & (ITEM_REFCOUNT | LIST_PICKLE | ITEM_IS_POINTER) != 0
    }
}

/// Whether a type takes a byte order (`<` or `>`) or none (`|`), as `arraydescr_reduce`
/// writes `self->byteorder` (`descriptor.c:2776-2782`: `=` is written as the native order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Order {
    /// `|`: one-byte numbers, bool, bytes, void, object.
    None,
    /// `<` or `>`.
    Endian,
}

/// The built-in types numpy pickles by a type string, `kind` followed by the element size in
/// decimal (`descriptor.c:2769`, `"%c%d"`; for `U` the size in characters), with their size,
/// alignment, flags and byte order as numpy 2.4 on a 64-bit platform makes them (the table
/// `tests/corpus/numpy/dtypes.tsv` holds each as real numpy pickles it). `None` for any other
/// type string: numpy writes no other for a legacy dtype; user and new-style dtypes (the
/// `StringDType`) pickle otherwise and are refused.
fn builtin(kind: u8, size: u64) -> Option<(Dtype, Order)> {
    let plain = |itemsize, alignment, flags, order| {
        Some((
            Dtype {
                kind,
                itemsize,
                alignment,
                flags,
                layout: Layout::Plain,
                big_endian: false,
            },
            order,
        ))
    };
    match (kind, size) {
        (b'b', 1) => plain(1, 1, 0, Order::None),
        (b'i' | b'u', 1) => plain(1, 1, 0, Order::None),
        (b'i' | b'u', 2 | 4 | 8) => plain(size, size, 0, Order::Endian),
        (b'f', 2 | 4 | 8 | 16) => plain(size, size, 0, Order::Endian),
        // complex: the alignment of its parts.
        (b'c', 8 | 16 | 32) => plain(size, size / 2, 0, Order::Endian),
        (b'M' | b'm', 8) => plain(8, 8, 0, Order::Endian),
        (b'O', 8) => plain(8, 8, OBJECT_FLAGS, Order::None),
        (b'S' | b'V', n) if n <= MAX_ELSIZE => plain(n, 1, 0, Order::None),
        // UCS4: 4 bytes a character, and NPY_NEEDS_INIT (arraytypes.c.src:4004).
        (b'U', n) if n <= MAX_ELSIZE / 4 => plain(n * 4, 4, NEEDS_INIT, Order::Endian),
        _ => None,
    }
}

/// Whether `kind` is one of numpy's flexible types, whose state carries its element size and
/// alignment (`PyTypeNum_ISEXTENDED`, `descriptor.c:2827`).
fn flexible(kind: u8) -> bool {
    matches!(kind, b'S' | b'U' | b'V')
}

/// The int a node holds (an int, not a bool).
fn int(arena: &Arena<'_>, id: NodeId) -> Option<i64> {
    match arena.get(id) {
        Some(Value::Int(i)) => Some(i),
        _ => None,
    }
}

/// The text of a str node (no lone surrogates).
fn text<'d>(arena: &'d Arena<'_>, id: NodeId) -> Option<&'d str> {
    match arena.get(id) {
        Some(Value::Str(s)) => s.as_str(),
        _ => None,
    }
}

/// A tuple's items.
fn tuple<'d>(arena: &'d Arena<'_>, id: NodeId) -> Option<&'d [NodeId]> {
    match arena.get(id) {
        Some(Value::Tuple(items)) => Some(items),
        _ => None,
    }
}

/// Whether a node is `None`.
fn is_none(arena: &Arena<'_>, id: NodeId) -> bool {
    matches!(arena.get(id), Some(Value::None))
}

/// The type string of a `numpy.dtype` call, parsed: kind and size, when it is written as
/// numpy writes it (a letter, then the size in decimal without a sign or leading zero).
fn type_string(s: &str) -> Option<(u8, u64)> {
    let (&kind, digits) = s.as_bytes().split_first()?;
    let canonical = !digits.is_empty()
        && digits.iter().all(u8::is_ascii_digit)
        && (digits.len() == 1 || digits.first() != Some(&b'0'))
        && digits.len() <= 10;
    if !canonical {
        return None;
    }
    let size = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some((kind, size))
}

/// The arguments of `numpy.dtype(...)`: `(type, False, True)`, as `arraydescr_reduce` writes
/// them (`descriptor.c:2771`, `Py_BuildValue("(NOO)", obj, Py_False, Py_True)`; numpy before
/// 1.19 wrote `(type, 0, 1)`, which is kept). The dtype it makes before any BUILD: the
/// built-in type in native byte order.
///
/// # Errors
/// Why the arguments are not numpy's.
pub(crate) fn dtype_args(arena: &Arena<'_>, argv: &[NodeId]) -> Result<Dtype, String> {
    let &[ty, align, copy] = argv else {
        return Err(format!(
            "{} arguments, numpy writes 3: (type, False, True)",
            argv.len()
        ));
    };
    let flags_ok = matches!(
        (arena.get(align), arena.get(copy)),
        (Some(Value::Bool(false)), Some(Value::Bool(true)))
            | (Some(Value::Int(0)), Some(Value::Int(1)))
    );
    if !flags_ok {
        return Err("the arguments after the type are not False, True (arraydescr_reduce)".into());
    }
    let Some(s) = text(arena, ty) else {
        // A class (numpy.record, a user dtype's type) in the type's place: not a type numpy
        // pickles by name.
        return Err("the type is not a str".into());
    };
    type_string(s)
        .and_then(|(kind, size)| builtin(kind, size))
        .map(|(d, _)| d)
        .ok_or_else(|| format!("type {:?} is not one numpy pickles", shorten(s)))
}

/// Attacker text cut for a message (the error escapes it).
fn shorten(s: &str) -> String {
    s.chars().take(24).collect()
}

/// The datetime units numpy pickles, `_datetime_strings` (`datetime.c`), as bytes.
const DATETIME_UNITS: [&[u8]; 14] = [
    b"Y", b"M", b"W", b"D", b"h", b"m", b"s", b"ms", b"us", b"ns", b"ps", b"fs", b"as", b"generic",
];

/// The BUILD state of a `numpy.dtype` made by [`dtype_args`] (`base`), checked against the
/// state `arraydescr_reduce` writes for that type (`descriptor.c:2722-2840`):
///
/// - `(3, endian, subarray, names, fields, elsize, alignment, flags)`, or for `M8` and `m8`
///   `(4, ..., flags, (None, (unit, num, 1, 1)))` (`_get_pickleabletype_from_datetime_metadata`,
///   `descriptor.c:2665`); a version 4 state with a metadata dict (a dtype made with
///   `metadata=`) is refused;
/// - `endian` `<` or `>` for multi-byte numbers, `U`, datetimes; `|` for the rest;
/// - `elsize` and `alignment` `-1` except for `S`, `U` and `V`, where they are the type's
///   (numpy ignores them for the others, so any other value is not numpy's);
/// - `flags` the type's: 0, `O`'s 63, `U`'s 8 (numpy copies them from the state, so an `O`
///   whose flags lose `NPY_ITEM_REFCOUNT` would hold raw pointers);
/// - a `V` may be structured (`names`, `fields`) or a sub-array (`subarray`), checked by
///   [`structured`] and [`subarray`]; every other type has `None` for all three.
///
/// `lookup` gives what is known of a dtype record the state refers to (a field's or a
/// sub-array's base), and refuses a node that is no checked dtype.
///
/// # Errors
/// Why the state is not numpy's.
pub(crate) fn dtype_state(
    arena: &Arena<'_>,
    state: NodeId,
    base: &Dtype,
    lookup: &mut dyn FnMut(NodeId) -> Result<Dtype, String>,
) -> Result<Dtype, String> {
    let ty = TypeName(base);
    let Some(items) = tuple(arena, state) else {
        return Err(format!("the state of {ty} is not a tuple"));
    };
    let datetime = matches!(base.kind, b'M' | b'm');
    let (version, len) = if datetime { (4, 9) } else { (3, 8) };
    let &[v, endian, sub, names, fields, elsize, alignment, flags, ref rest @ ..] = items else {
        return Err(format!(
            "the state of {ty} has {} items, numpy writes {len}",
            items.len()
        ));
    };
    if items.len() != len {
        return Err(format!(
            "the state of {ty} has {} items, numpy writes {len}",
            items.len()
        ));
    }
    if int(arena, v) != Some(version) {
        return Err(format!("the state of {ty} is not version {version}"));
    }
    let (_, order) = builtin(base.kind, size_of_type(base)).ok_or_else(|| format!("{ty}"))?;
    let endian_ok = matches!(
        (text(arena, endian), order),
        (Some("|"), Order::None) | (Some("<" | ">"), Order::Endian)
    );
    if !endian_ok {
        let want = if order == Order::None {
            "'|'"
        } else {
            "'<' or '>'"
        };
        return Err(format!("the byte order of {ty} is not {want}"));
    }
    let layout = match (
        is_none(arena, sub),
        is_none(arena, names),
        is_none(arena, fields),
    ) {
        (true, true, true) => Layout::Plain,
        (true, false, false) if base.kind == b'V' => Layout::Structured,
        (false, true, true) if base.kind == b'V' => Layout::Subarray,
        _ => {
            return Err(format!(
                "the subarray, names and fields of {ty} are not numpy's (None, or a V's \
                 fields or sub-array)"
            ))
        }
    };
    let base = &Dtype {
        big_endian: text(arena, endian) == Some(">"),
        ..*base
    };
    let made = match layout {
        Layout::Plain => *base,
        Layout::Structured => structured(arena, base, names, fields, flags, lookup)?,
        Layout::Subarray => subarray(arena, base, sub, lookup)?,
    };
    let (want_size, want_align) = if flexible(base.kind) {
        (
            i64::try_from(made.itemsize).unwrap_or(-1),
            i64::try_from(made.alignment).unwrap_or(-1),
        )
    } else {
        (-1, -1)
    };
    if int(arena, elsize) != Some(want_size) || int(arena, alignment) != Some(want_align) {
        return Err(format!(
            "the elsize and alignment of {ty} are not numpy's ({want_size}, {want_align}; \
             arraydescr_reduce writes -1 for a type that is not S, U or V)"
        ));
    }
    if int(arena, flags) != i64::try_from(made.flags).ok() {
        return Err(format!(
            "the flags of {ty} are not numpy's ({}): numpy takes them from the state",
            made.flags
        ));
    }
    if datetime {
        let unit_ok = rest.first().is_some_and(|&m| datetime_metadata(arena, m));
        if !unit_ok {
            return Err(format!(
                "the metadata of {ty} is not (None, (unit, num, 1, 1)) with a unit numpy \
                 writes"
            ));
        }
    }
    Ok(made)
}

/// The size in the type string of `d` (characters for `U`).
fn size_of_type(d: &Dtype) -> u64 {
    if d.kind == b'U' {
        d.itemsize / 4
    } else {
        d.itemsize
    }
}

/// `{ty}` in messages: the type string numpy writes (`'f8'`).
struct TypeName<'d>(&'d Dtype);

impl std::fmt::Display for TypeName<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "numpy.dtype '{}{}'",
            char::from(self.0.kind),
            size_of_type(self.0)
        )
    }
}

/// `(None, (unit, num, 1, 1))`: no metadata dict, a unit of `_datetime_strings` as bytes, a
/// positive count, as `_get_pickleabletype_from_datetime_metadata` writes it.
fn datetime_metadata(arena: &Arena<'_>, m: NodeId) -> bool {
    let Some(&[dict, info]) = tuple(arena, m) else {
        return false;
    };
    let Some(&[unit, num, one, two]) = tuple(arena, info) else {
        return false;
    };
    let unit_ok = match arena.get(unit) {
        Some(Value::Bytes(b)) => b.len() <= 7 && DATETIME_UNITS.contains(&&*b.to_cow()),
        _ => false,
    };
    // A count of 1, or more for any unit but `generic`; numpy keeps it in a C int.
    let generic = matches!(arena.get(unit), Some(Value::Bytes(b)) if b.len() == 7);
    let num_ok = match int(arena, num) {
        Some(1) => true,
        Some(n) => !generic && n > 1 && n <= i64::from(i32::MAX),
        None => false,
    };
    is_none(arena, dict)
        && unit_ok
        && num_ok
        && int(arena, one) == Some(1)
        && int(arena, two) == Some(1)
}

/// A structured `V` dtype: `names` a tuple of distinct non-empty strs, `fields` a dict of
/// exactly those names, each `(dtype, offset)` (a title would add a third item and a second
/// key: refused), each field inside `elsize`. The flags are numpy's rule for a structured
/// dtype (`_convert_from_array_descr`, `descriptor.c:411-583`): `NPY_NEEDS_PYAPI`, the fields'
/// flags within `NPY_FROM_FIELDS`, and `NPY_ALIGNED_STRUCT` for an aligned one, whose
/// alignment is the largest of its fields' and divides its size and every field's offset
/// (else 1). A field holding Python objects is refused: numpy requires such fields not to
/// overlap, a rule not checked here, and no writer of the files read here makes them.
fn structured(
    arena: &Arena<'_>,
    base: &Dtype,
    names: NodeId,
    fields: NodeId,
    flags: NodeId,
    lookup: &mut dyn FnMut(NodeId) -> Result<Dtype, String>,
) -> Result<Dtype, String> {
    let ty = TypeName(base);
    let names = tuple(arena, names).ok_or_else(|| format!("the names of {ty} are not a tuple"))?;
    let Some(Value::Dict(pairs)) = arena.get(fields) else {
        return Err(format!("the fields of {ty} are not a dict"));
    };
    if pairs.len() != names.len() {
        return Err(format!(
            "the fields of {ty} are not its names (titles are not read)"
        ));
    }
    let aligned = int(arena, flags).is_some_and(|f| f & ALIGNED_STRUCT as i64 != 0);
    let mut from_fields = 0;
    let mut alignment = 1;
    for (i, &name) in names.iter().enumerate() {
        let Some(n) = text(arena, name).filter(|n| !n.is_empty()) else {
            return Err(format!("a name of {ty} is not a non-empty str"));
        };
        // Each name once, and the fields in the names' order (numpy's dict is made from them
        // in order; the dict's keys are distinct, so this is a one-to-one match).
        let Some(&(key, value)) = pairs.get(i) else {
            return Err(format!("the fields of {ty} are not its names"));
        };
        if text(arena, key) != Some(n) {
            return Err(format!("the fields of {ty} are not its names, in order"));
        }
        let Some(&[field, offset]) = tuple(arena, value) else {
            return Err(format!(
                "field {:?} of {ty} is not (dtype, offset)",
                shorten(n)
            ));
        };
        let d = lookup(field)?;
        if d.holds_objects() {
            return Err(format!(
                "field {:?} of {ty} holds Python objects (not read in a structured dtype)",
                shorten(n)
            ));
        }
        let offset = int(arena, offset)
            .and_then(|o| u64::try_from(o).ok())
            .ok_or_else(|| {
                format!(
                    "the offset of field {:?} of {ty} is not an int >= 0",
                    shorten(n)
                )
            })?;
        if offset
            .checked_add(d.itemsize)
            .is_none_or(|end| end > base.itemsize)
        {
            return Err(format!(
                "field {:?} of {ty} runs past its {} bytes",
                shorten(n),
                base.itemsize
            ));
        }
        if aligned && !offset.is_multiple_of(d.alignment.max(1)) {
            return Err(format!(
                "field {:?} of aligned {ty} is not at a multiple of its alignment",
                shorten(n)
            ));
        }
        from_fields |= d.flags & FROM_FIELDS;
        alignment = alignment.max(d.alignment);
    }
    let (flags, alignment) = if aligned {
        if !base.itemsize.is_multiple_of(alignment) {
            return Err(format!(
                "aligned {ty} is not a multiple of its alignment {alignment}"
            ));
        }
        (NEEDS_PYAPI | from_fields | ALIGNED_STRUCT, alignment)
    } else {
        (NEEDS_PYAPI | from_fields, 1)
    };
    Ok(Dtype {
        flags,
        alignment,
        layout: Layout::Structured,
        ..*base
    })
}

/// A sub-array `V` dtype: `(base, shape)`, `shape` a tuple of ints >= 0
/// (`arraydescr_subdescr_get`), whose size, alignment and flags are its base's
/// (`_convert_from_tuple`, `descriptor.c:346-354`): `elsize` the base's times the shape's
/// product. The base may not hold objects nor be a sub-array itself (numpy folds nested
/// sub-arrays into one).
fn subarray(
    arena: &Arena<'_>,
    base: &Dtype,
    sub: NodeId,
    lookup: &mut dyn FnMut(NodeId) -> Result<Dtype, String>,
) -> Result<Dtype, String> {
    let ty = TypeName(base);
    let Some(&[inner, shape]) = tuple(arena, sub) else {
        return Err(format!("the subarray of {ty} is not (dtype, shape)"));
    };
    let d = lookup(inner)?;
    if d.holds_objects() || d.layout == Layout::Subarray {
        return Err(format!(
            "the subarray base of {ty} holds objects or is a sub-array"
        ));
    }
    let (count, _) = shape_product(arena, shape, MAX_DIMS)
        .ok_or_else(|| format!("the subarray shape of {ty} is not a tuple of ints >= 0"))?;
    let size = count.checked_mul(d.itemsize).filter(|&s| s <= MAX_ELSIZE);
    if size != Some(base.itemsize) {
        return Err(format!(
            "{ty} is not its sub-array's size ({} elements of {} bytes)",
            count, d.itemsize
        ));
    }
    Ok(Dtype {
        alignment: d.alignment,
        flags: d.flags,
        layout: Layout::Subarray,
        ..*base
    })
}

/// The product of a shape tuple (ints >= 0, at most `max_dims`), and whether it stays
/// within `npy_intp` at every step as `array_setstate` multiplies it (`methods.c:2096-2111`,
/// `npy_mul_sizes_with_overflow`); `None` for anything else.
pub(crate) fn shape_product(
    arena: &Arena<'_>,
    shape: NodeId,
    max_dims: usize,
) -> Option<(u64, usize)> {
    let dims = tuple(arena, shape)?;
    if dims.len() > max_dims {
        return None;
    }
    let mut product = 1u64;
    for &d in dims {
        let d = u64::try_from(int(arena, d)?).ok()?;
        product = product.checked_mul(d).filter(|&p| p <= i64::MAX as u64)?;
    }
    Some((product, dims.len()))
}

/// Whether two shape tuples (checked by [`shape_product`]) hold the same ints, each in its
/// own arena.
pub(crate) fn same_shape(a: &Arena<'_>, x: NodeId, b: &Arena<'_>, y: NodeId) -> bool {
    match (tuple(a, x), tuple(b, y)) {
        (Some(p), Some(q)) => {
            p.len() == q.len()
                && p.iter()
                    .zip(q)
                    .all(|(&i, &j)| int(a, i).is_some() && int(a, i) == int(b, j))
        }
        _ => false,
    }
}

/// The arguments of `_reconstruct`: `(numpy.ndarray, (0,), b'b')`, as `array_reduce` writes
/// them (`methods.c:1783`, `Py_BuildValue("ONc", Py_TYPE(self), (0,), 'b')`). Subclasses
/// (`numpy.matrix`) pickle the same way with their own class: refused, as their
/// `__array_finalize__` is theirs.
///
/// # Errors
/// Why the arguments are not numpy's.
pub(crate) fn reconstruct_args(arena: &Arena<'_>, argv: &[NodeId]) -> Result<(), String> {
    let ndarray = |id| {
        matches!(arena.get(id), Some(Value::Global(g))
            if g.module == "numpy" && g.name == "ndarray")
    };
    let code_b = |id| {
        matches!(arena.get(id), Some(Value::Bytes(b))
            if b.len() == 1 && *b.to_cow() == *b"b")
    };
    let ok = match argv {
        &[cls, shape, code] => {
            ndarray(cls)
                && matches!(tuple(arena, shape), Some(&[z]) if int(arena, z) == Some(0))
                && code_b(code)
        }
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err("the arguments are not (numpy.ndarray, (0,), b'b') (array_reduce)".into())
    }
}

/// The BUILD state of a `_reconstruct` ndarray: `(1, shape, dtype, is_fortran, data)` as
/// `array_reduce` writes it (`methods.c:1783-1860`): `shape` a tuple of at most 64
/// non-negative ints whose product (and times the itemsize) fits `npy_intp`; `dtype` a
/// checked plain or structured dtype (an array never has a sub-array dtype: numpy folds it
/// into the shape);
/// `is_fortran` a bool; `data` for a dtype holding objects (`NPY_LIST_PICKLE`) a list of
/// exactly `prod(shape)` items (`_getlist_pkl`), never bytes; otherwise bytes of exactly
/// `prod(shape) x itemsize` (`PyArray_ToString`; what `_codecs.encode(text, 'latin1')` makes
/// at protocol 2 is bytes), never a list.
///
/// # Errors
/// Why the state is not numpy's.
pub(crate) fn ndarray_state(
    arena: &Arena<'_>,
    state: NodeId,
    lookup: &mut dyn FnMut(NodeId) -> Result<Dtype, String>,
) -> Result<(), String> {
    let Some(&[v, shape, dtype, fortran, data]) = tuple(arena, state) else {
        return Err("the state is not (1, shape, dtype, is_fortran, data) (array_reduce)".into());
    };
    if int(arena, v) != Some(1) {
        return Err("the state is not version 1 (array_reduce)".into());
    }
    let (count, _) = shape_product(arena, shape, MAX_DIMS)
        .ok_or("the shape is not a tuple of at most 64 ints >= 0 whose product fits 63 bits")?;
    let d = lookup(dtype)?;
    if d.layout == Layout::Subarray {
        return Err("the dtype is a sub-array (numpy folds it into the shape)".into());
    }
    if !matches!(arena.get(fortran), Some(Value::Bool(_))) {
        return Err("is_fortran is not a bool".into());
    }
    let objects = d.flags & LIST_PICKLE != 0;
    match arena.get(data) {
        Some(Value::List(items)) if objects => {
            if items.len() as u64 != count {
                return Err(format!(
                    "a list of {} objects for an array of {count} (numpy reads prod(shape) \
                     items without looking at the list's length)",
                    items.len()
                ));
            }
        }
        Some(Value::Bytes(b)) if !objects => {
            let want = count
                .checked_mul(d.itemsize)
                .filter(|&n| n <= i64::MAX as u64);
            if want != Some(b.len() as u64) {
                return Err(format!(
                    "{} bytes of data for {count} elements of {} bytes",
                    b.len(),
                    d.itemsize
                ));
            }
            ucs4_ok(&d, &b)?;
        }
        _ if objects => {
            return Err(
                "the data of an array holding objects is not a list (numpy would read \
                        its bytes as pointers)"
                    .into(),
            )
        }
        _ => return Err("the data is not bytes".into()),
    }
    Ok(())
}

/// The arguments of `scalar`: `(dtype, bytes)`, a checked dtype holding no objects (numpy's
/// own scalars of those pickle otherwise, and `array_scalar` reads an object dtype's bytes as
/// a pointer, `multiarraymodule.c:2172`) and not a sub-array, and bytes of exactly its itemsize
/// (`array_scalar` takes longer bytes, `multiarraymodule.c:2210`; numpy writes the element's
/// bytes).
///
/// # Errors
/// Why the arguments are not numpy's.
pub(crate) fn scalar_args(
    arena: &Arena<'_>,
    argv: &[NodeId],
    lookup: &mut dyn FnMut(NodeId) -> Result<Dtype, String>,
) -> Result<(), String> {
    let &[dtype, data] = argv else {
        return Err(format!(
            "{} arguments, numpy writes 2: (dtype, bytes)",
            argv.len()
        ));
    };
    let d = lookup(dtype)?;
    if d.holds_objects() || d.layout == Layout::Subarray {
        return Err("a scalar of a dtype holding objects or of a sub-array".into());
    }
    match arena.get(data) {
        Some(Value::Bytes(b)) if b.len() as u64 == d.itemsize => ucs4_ok(&d, &b),
        Some(Value::Bytes(b)) => Err(format!(
            "{} bytes for a scalar of {} bytes",
            b.len(),
            d.itemsize
        )),
        _ => Err("the scalar's data is not bytes".into()),
    }
}

/// The data of a `U` dtype (a plain one: UCS4 code units in its byte order): every unit a code
/// point, at most U+10FFFF, as numpy stores them (it fills a `U` array from Python strs, which
/// hold no more; `UNICODE_setitem`). A larger unit is data numpy never writes, which reading
/// the element turns into `SystemError: invalid maximum character passed to PyUnicode_New`
/// (`PyUnicode_FromKindAndData` in `UNICODE_getitem`).
fn ucs4_ok(d: &Dtype, data: &crate::value::PyBytes<'_>) -> Result<(), String> {
    if d.kind != b'U' || d.layout != Layout::Plain {
        return Ok(());
    }
    let owned;
    let bytes = match data.as_slice() {
        Some(b) => b,
        None => {
            owned = data.to_vec();
            &owned[..]
        }
    };
    let bad = bytes.chunks_exact(4).any(|c| {
        let unit = [c.first(), c.get(1), c.get(2), c.get(3)].map(|b| b.copied().unwrap_or(0));
        let v = if d.big_endian {
            u32::from_be_bytes(unit)
        } else {
            u32::from_le_bytes(unit)
        };
        v > 0x10_FFFF
    });
    if bad {
        return Err(
            "the data of a U array holds a code unit above U+10FFFF (numpy stores \
                    Python strs' code points)"
                .into(),
        );
    }
    Ok(())
}
