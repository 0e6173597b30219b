//! The opcode table: the 68 opcodes of pickle protocols 0 to 5, named and numbered as
//! CPython's `Lib/pickletools.py` lists them. One source of truth for names, bytes, argument
//! encodings and the protocol that introduced each opcode.

/// How an opcode's argument is encoded in the stream, as `Lib/pickletools.py` names the
/// argument descriptors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Arg {
    /// No argument.
    None,
    /// `uint1`: one unsigned byte.
    U1,
    /// `uint2`: two bytes, little-endian unsigned.
    U2,
    /// `int4`: four bytes, little-endian signed.
    I4,
    /// `uint4`: four bytes, little-endian unsigned.
    U4,
    /// `uint8`: eight bytes, little-endian unsigned.
    U8,
    /// `float8`: eight bytes, big-endian IEEE-754 binary64.
    F8,
    /// A newline-terminated line of text (decimal ints, floats, memo indices, STRING, UNICODE,
    /// PERSID).
    Line,
    /// Two newline-terminated lines (GLOBAL and INST: module, then qualified name).
    TwoLines,
    /// A length prefix of 1 byte followed by that many bytes.
    Len1,
    /// A length prefix of 4 bytes (unsigned, or signed for BINSTRING) followed by that many
    /// bytes.
    Len4,
    /// A length prefix of 8 bytes followed by that many bytes.
    Len8,
}

impl Arg {
    /// The size in bytes of an argument of fixed size (0 for none; 1, 2, 4 or 8), or `None` for
    /// text lines and length-prefixed arguments.
    pub const fn fixed_size(self) -> Option<u8> {
        match self {
            Arg::None => Some(0),
            Arg::U1 => Some(1),
            Arg::U2 => Some(2),
            Arg::I4 | Arg::U4 => Some(4),
            Arg::U8 | Arg::F8 => Some(8),
            Arg::Line | Arg::TwoLines | Arg::Len1 | Arg::Len4 | Arg::Len8 => None,
        }
    }
}

/// One opcode of the pickle virtual machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
#[non_exhaustive]
pub enum Opcode {
    /// `INT` ('I', protocol 0): Push an integer or bool.
    Int = 73,
    /// `BININT` ('J', protocol 1): Push a four-byte signed integer.
    Binint = 74,
    /// `BININT1` ('K', protocol 1): Push a one-byte unsigned integer.
    Binint1 = 75,
    /// `BININT2` ('M', protocol 1): Push a two-byte unsigned integer.
    Binint2 = 77,
    /// `LONG` ('L', protocol 0): Push a long integer.
    Long = 76,
    /// `LONG1` ('\x8a', protocol 2): Long integer using one-byte length.
    Long1 = 138,
    /// `LONG4` ('\x8b', protocol 2): Long integer using found-byte length.
    Long4 = 139,
    /// `STRING` ('S', protocol 0): Push a Python string object.
    String = 83,
    /// `BINSTRING` ('T', protocol 1): Push a Python string object.
    Binstring = 84,
    /// `SHORT_BINSTRING` ('U', protocol 1): Push a Python string object.
    ShortBinstring = 85,
    /// `BINBYTES` ('B', protocol 3): Push a Python bytes object.
    Binbytes = 66,
    /// `SHORT_BINBYTES` ('C', protocol 3): Push a Python bytes object.
    ShortBinbytes = 67,
    /// `BINBYTES8` ('\x8e', protocol 4): Push a Python bytes object.
    Binbytes8 = 142,
    /// `BYTEARRAY8` ('\x96', protocol 5): Push a Python bytearray object.
    Bytearray8 = 150,
    /// `NEXT_BUFFER` ('\x97', protocol 5): Push an out-of-band buffer object.
    NextBuffer = 151,
    /// `READONLY_BUFFER` ('\x98', protocol 5): Make an out-of-band buffer object read-only.
    ReadonlyBuffer = 152,
    /// `NONE` ('N', protocol 0): Push None on the stack.
    None = 78,
    /// `NEWTRUE` ('\x88', protocol 2): Push True onto the stack.
    Newtrue = 136,
    /// `NEWFALSE` ('\x89', protocol 2): Push False onto the stack.
    Newfalse = 137,
    /// `UNICODE` ('V', protocol 0): Push a Python Unicode string object.
    Unicode = 86,
    /// `SHORT_BINUNICODE` ('\x8c', protocol 4): Push a Python Unicode string object.
    ShortBinunicode = 140,
    /// `BINUNICODE` ('X', protocol 1): Push a Python Unicode string object.
    Binunicode = 88,
    /// `BINUNICODE8` ('\x8d', protocol 4): Push a Python Unicode string object.
    Binunicode8 = 141,
    /// `FLOAT` ('F', protocol 0): Newline-terminated decimal float literal.
    Float = 70,
    /// `BINFLOAT` ('G', protocol 1): Float stored in binary form, with 8 bytes of data.
    Binfloat = 71,
    /// `EMPTY_LIST` (']', protocol 1): Push an empty list.
    EmptyList = 93,
    /// `APPEND` ('a', protocol 0): Append an object to a list.
    Append = 97,
    /// `APPENDS` ('e', protocol 1): Extend a list by a slice of stack objects.
    Appends = 101,
    /// `LIST` ('l', protocol 0): Build a list out of the topmost stack slice, after markobject.
    List = 108,
    /// `EMPTY_TUPLE` (')', protocol 1): Push an empty tuple.
    EmptyTuple = 41,
    /// `TUPLE` ('t', protocol 0): Build a tuple out of the topmost stack slice, after markobject.
    Tuple = 116,
    /// `TUPLE1` ('\x85', protocol 2): Build a one-tuple out of the topmost item on the stack.
    Tuple1 = 133,
    /// `TUPLE2` ('\x86', protocol 2): Build a two-tuple out of the top two items on the stack.
    Tuple2 = 134,
    /// `TUPLE3` ('\x87', protocol 2): Build a three-tuple out of the top three items on the stack.
    Tuple3 = 135,
    /// `EMPTY_DICT` ('}', protocol 1): Push an empty dict.
    EmptyDict = 125,
    /// `DICT` ('d', protocol 0): Build a dict out of the topmost stack slice, after markobject.
    Dict = 100,
    /// `SETITEM` ('s', protocol 0): Add a key+value pair to an existing dict.
    Setitem = 115,
    /// `SETITEMS` ('u', protocol 1): Add an arbitrary number of key+value pairs to an existing dict.
    Setitems = 117,
    /// `EMPTY_SET` ('\x8f', protocol 4): Push an empty set.
    EmptySet = 143,
    /// `ADDITEMS` ('\x90', protocol 4): Add an arbitrary number of items to an existing set.
    Additems = 144,
    /// `FROZENSET` ('\x91', protocol 4): Build a frozenset out of the topmost slice, after markobject.
    Frozenset = 145,
    /// `POP` ('0', protocol 0): Discard the top stack item, shrinking the stack by one item.
    Pop = 48,
    /// `DUP` ('2', protocol 0): Push the top stack item onto the stack again, duplicating it.
    Dup = 50,
    /// `MARK` ('(', protocol 0): Push markobject onto the stack.
    Mark = 40,
    /// `POP_MARK` ('1', protocol 1): Pop all the stack objects at and above the topmost markobject.
    PopMark = 49,
    /// `GET` ('g', protocol 0): Read an object from the memo and push it on the stack.
    Get = 103,
    /// `BINGET` ('h', protocol 1): Read an object from the memo and push it on the stack.
    Binget = 104,
    /// `LONG_BINGET` ('j', protocol 1): Read an object from the memo and push it on the stack.
    LongBinget = 106,
    /// `PUT` ('p', protocol 0): Store the stack top into the memo.  The stack is not popped.
    Put = 112,
    /// `BINPUT` ('q', protocol 1): Store the stack top into the memo.  The stack is not popped.
    Binput = 113,
    /// `LONG_BINPUT` ('r', protocol 1): Store the stack top into the memo.  The stack is not popped.
    LongBinput = 114,
    /// `MEMOIZE` ('\x94', protocol 4): Store the stack top into the memo.  The stack is not popped.
    Memoize = 148,
    /// `EXT1` ('\x82', protocol 2): Extension code.
    Ext1 = 130,
    /// `EXT2` ('\x83', protocol 2): Extension code.
    Ext2 = 131,
    /// `EXT4` ('\x84', protocol 2): Extension code.
    Ext4 = 132,
    /// `GLOBAL` ('c', protocol 0): Push a global object (module.attr) on the stack.
    Global = 99,
    /// `STACK_GLOBAL` ('\x93', protocol 4): Push a global object (module.attr) on the stack.
    StackGlobal = 147,
    /// `REDUCE` ('R', protocol 0): Push an object built from a callable and an argument tuple.
    Reduce = 82,
    /// `BUILD` ('b', protocol 0): Finish building an object, via __setstate__ or dict update.
    Build = 98,
    /// `INST` ('i', protocol 0): Build a class instance.
    Inst = 105,
    /// `OBJ` ('o', protocol 1): Build a class instance.
    Obj = 111,
    /// `NEWOBJ` ('\x81', protocol 2): Build an object instance.
    Newobj = 129,
    /// `NEWOBJ_EX` ('\x92', protocol 4): Build an object instance.
    NewobjEx = 146,
    /// `PROTO` ('\x80', protocol 2): Protocol version indicator.
    Proto = 128,
    /// `STOP` ('.', protocol 0): Stop the unpickling machine.
    Stop = 46,
    /// `FRAME` ('\x95', protocol 4): Indicate the beginning of a new frame.
    Frame = 149,
    /// `PERSID` ('P', protocol 0): Push an object identified by a persistent ID.
    Persid = 80,
    /// `BINPERSID` ('Q', protocol 1): Push an object identified by a persistent ID.
    Binpersid = 81,
}

/// Opcodes by byte, built at compile time from [`Opcode::ALL`] (the indexing runs in const
/// evaluation, where an out-of-bounds index is a compile error, never a runtime panic).
#[allow(clippy::indexing_slicing)]
const BY_BYTE: [Option<Opcode>; 256] = {
    let mut table = [None; 256];
    let mut i = 0;
    while i < Opcode::ALL.len() {
        let op = Opcode::ALL[i];
        table[op as usize] = Some(op);
        i += 1;
    }
    table
};

/// By byte, 1 + the size of the fixed-size argument ([`Arg::fixed_size`]) of each of `ops`; 0
/// for every other byte (and for an opcode of `ops` whose argument is not of fixed size).
#[allow(clippy::indexing_slicing)]
const fn arg_table(ops: &[Opcode]) -> [u8; 256] {
    let mut table = [0u8; 256];
    let mut i = 0;
    while i < ops.len() {
        if let Some(size) = ops[i].arg().fixed_size() {
            table[ops[i] as usize] = 1 + size;
        }
        i += 1;
    }
    table
}

/// For the opcodes that push one scalar after a fixed-size argument and touch nothing else
/// (NONE, NEWTRUE, NEWFALSE, BININT1, BININT2, BININT, BINFLOAT): 1 + the argument's size;
/// 0 for every other byte. The scan checks these with one table lookup and a well-predicted
/// branch instead of the dispatch's indirect jump, which mispredicts on the mixed int
/// opcodes of a list of ints.
pub(crate) const SCALAR_ARG: [u8; 256] = arg_table(&[
    Opcode::None,
    Opcode::Newtrue,
    Opcode::Newfalse,
    Opcode::Binint1,
    Opcode::Binint2,
    Opcode::Binint,
    Opcode::Binfloat,
]);

/// For BININT1, BININT2 and BININT: 1 + the argument's size (2, 3, 5); 0 for every other
/// byte. The build reads the three with one branch-free path (see [`SCALAR_ARG`]).
pub(crate) const BININT_ARG: [u8; 256] =
    arg_table(&[Opcode::Binint1, Opcode::Binint2, Opcode::Binint]);

impl Opcode {
    /// All 68 opcodes in `Lib/pickletools.py` order.
    pub const ALL: [Opcode; 68] = [
        Opcode::Int,
        Opcode::Binint,
        Opcode::Binint1,
        Opcode::Binint2,
        Opcode::Long,
        Opcode::Long1,
        Opcode::Long4,
        Opcode::String,
        Opcode::Binstring,
        Opcode::ShortBinstring,
        Opcode::Binbytes,
        Opcode::ShortBinbytes,
        Opcode::Binbytes8,
        Opcode::Bytearray8,
        Opcode::NextBuffer,
        Opcode::ReadonlyBuffer,
        Opcode::None,
        Opcode::Newtrue,
        Opcode::Newfalse,
        Opcode::Unicode,
        Opcode::ShortBinunicode,
        Opcode::Binunicode,
        Opcode::Binunicode8,
        Opcode::Float,
        Opcode::Binfloat,
        Opcode::EmptyList,
        Opcode::Append,
        Opcode::Appends,
        Opcode::List,
        Opcode::EmptyTuple,
        Opcode::Tuple,
        Opcode::Tuple1,
        Opcode::Tuple2,
        Opcode::Tuple3,
        Opcode::EmptyDict,
        Opcode::Dict,
        Opcode::Setitem,
        Opcode::Setitems,
        Opcode::EmptySet,
        Opcode::Additems,
        Opcode::Frozenset,
        Opcode::Pop,
        Opcode::Dup,
        Opcode::Mark,
        Opcode::PopMark,
        Opcode::Get,
        Opcode::Binget,
        Opcode::LongBinget,
        Opcode::Put,
        Opcode::Binput,
        Opcode::LongBinput,
        Opcode::Memoize,
        Opcode::Ext1,
        Opcode::Ext2,
        Opcode::Ext4,
        Opcode::Global,
        Opcode::StackGlobal,
        Opcode::Reduce,
        Opcode::Build,
        Opcode::Inst,
        Opcode::Obj,
        Opcode::Newobj,
        Opcode::NewobjEx,
        Opcode::Proto,
        Opcode::Stop,
        Opcode::Frame,
        Opcode::Persid,
        Opcode::Binpersid,
    ];

    /// The opcode for a byte, or `None` for a byte that is no opcode.
    pub fn from_byte(byte: u8) -> Option<Opcode> {
        BY_BYTE.get(usize::from(byte)).copied().flatten()
    }

    /// The opcode's byte.
    pub fn byte(self) -> u8 {
        self as u8
    }

    /// The name as `Lib/pickletools.py` spells it (`"BINUNICODE"`).
    pub fn name(self) -> &'static str {
        match self {
            Opcode::Int => "INT",
            Opcode::Binint => "BININT",
            Opcode::Binint1 => "BININT1",
            Opcode::Binint2 => "BININT2",
            Opcode::Long => "LONG",
            Opcode::Long1 => "LONG1",
            Opcode::Long4 => "LONG4",
            Opcode::String => "STRING",
            Opcode::Binstring => "BINSTRING",
            Opcode::ShortBinstring => "SHORT_BINSTRING",
            Opcode::Binbytes => "BINBYTES",
            Opcode::ShortBinbytes => "SHORT_BINBYTES",
            Opcode::Binbytes8 => "BINBYTES8",
            Opcode::Bytearray8 => "BYTEARRAY8",
            Opcode::NextBuffer => "NEXT_BUFFER",
            Opcode::ReadonlyBuffer => "READONLY_BUFFER",
            Opcode::None => "NONE",
            Opcode::Newtrue => "NEWTRUE",
            Opcode::Newfalse => "NEWFALSE",
            Opcode::Unicode => "UNICODE",
            Opcode::ShortBinunicode => "SHORT_BINUNICODE",
            Opcode::Binunicode => "BINUNICODE",
            Opcode::Binunicode8 => "BINUNICODE8",
            Opcode::Float => "FLOAT",
            Opcode::Binfloat => "BINFLOAT",
            Opcode::EmptyList => "EMPTY_LIST",
            Opcode::Append => "APPEND",
            Opcode::Appends => "APPENDS",
            Opcode::List => "LIST",
            Opcode::EmptyTuple => "EMPTY_TUPLE",
            Opcode::Tuple => "TUPLE",
            Opcode::Tuple1 => "TUPLE1",
            Opcode::Tuple2 => "TUPLE2",
            Opcode::Tuple3 => "TUPLE3",
            Opcode::EmptyDict => "EMPTY_DICT",
            Opcode::Dict => "DICT",
            Opcode::Setitem => "SETITEM",
            Opcode::Setitems => "SETITEMS",
            Opcode::EmptySet => "EMPTY_SET",
            Opcode::Additems => "ADDITEMS",
            Opcode::Frozenset => "FROZENSET",
            Opcode::Pop => "POP",
            Opcode::Dup => "DUP",
            Opcode::Mark => "MARK",
            Opcode::PopMark => "POP_MARK",
            Opcode::Get => "GET",
            Opcode::Binget => "BINGET",
            Opcode::LongBinget => "LONG_BINGET",
            Opcode::Put => "PUT",
            Opcode::Binput => "BINPUT",
            Opcode::LongBinput => "LONG_BINPUT",
            Opcode::Memoize => "MEMOIZE",
            Opcode::Ext1 => "EXT1",
            Opcode::Ext2 => "EXT2",
            Opcode::Ext4 => "EXT4",
            Opcode::Global => "GLOBAL",
            Opcode::StackGlobal => "STACK_GLOBAL",
            Opcode::Reduce => "REDUCE",
            Opcode::Build => "BUILD",
            Opcode::Inst => "INST",
            Opcode::Obj => "OBJ",
            Opcode::Newobj => "NEWOBJ",
            Opcode::NewobjEx => "NEWOBJ_EX",
            Opcode::Proto => "PROTO",
            Opcode::Stop => "STOP",
            Opcode::Frame => "FRAME",
            Opcode::Persid => "PERSID",
            Opcode::Binpersid => "BINPERSID",
        }
    }

    /// The protocol that introduced the opcode.
    pub fn proto(self) -> u8 {
        match self {
            Opcode::Int => 0,
            Opcode::Binint => 1,
            Opcode::Binint1 => 1,
            Opcode::Binint2 => 1,
            Opcode::Long => 0,
            Opcode::Long1 => 2,
            Opcode::Long4 => 2,
            Opcode::String => 0,
            Opcode::Binstring => 1,
            Opcode::ShortBinstring => 1,
            Opcode::Binbytes => 3,
            Opcode::ShortBinbytes => 3,
            Opcode::Binbytes8 => 4,
            Opcode::Bytearray8 => 5,
            Opcode::NextBuffer => 5,
            Opcode::ReadonlyBuffer => 5,
            Opcode::None => 0,
            Opcode::Newtrue => 2,
            Opcode::Newfalse => 2,
            Opcode::Unicode => 0,
            Opcode::ShortBinunicode => 4,
            Opcode::Binunicode => 1,
            Opcode::Binunicode8 => 4,
            Opcode::Float => 0,
            Opcode::Binfloat => 1,
            Opcode::EmptyList => 1,
            Opcode::Append => 0,
            Opcode::Appends => 1,
            Opcode::List => 0,
            Opcode::EmptyTuple => 1,
            Opcode::Tuple => 0,
            Opcode::Tuple1 => 2,
            Opcode::Tuple2 => 2,
            Opcode::Tuple3 => 2,
            Opcode::EmptyDict => 1,
            Opcode::Dict => 0,
            Opcode::Setitem => 0,
            Opcode::Setitems => 1,
            Opcode::EmptySet => 4,
            Opcode::Additems => 4,
            Opcode::Frozenset => 4,
            Opcode::Pop => 0,
            Opcode::Dup => 0,
            Opcode::Mark => 0,
            Opcode::PopMark => 1,
            Opcode::Get => 0,
            Opcode::Binget => 1,
            Opcode::LongBinget => 1,
            Opcode::Put => 0,
            Opcode::Binput => 1,
            Opcode::LongBinput => 1,
            Opcode::Memoize => 4,
            Opcode::Ext1 => 2,
            Opcode::Ext2 => 2,
            Opcode::Ext4 => 2,
            Opcode::Global => 0,
            Opcode::StackGlobal => 4,
            Opcode::Reduce => 0,
            Opcode::Build => 0,
            Opcode::Inst => 0,
            Opcode::Obj => 1,
            Opcode::Newobj => 2,
            Opcode::NewobjEx => 4,
            Opcode::Proto => 2,
            Opcode::Stop => 0,
            Opcode::Frame => 4,
            Opcode::Persid => 0,
            Opcode::Binpersid => 1,
        }
    }

    /// How the opcode's argument is encoded.
    pub const fn arg(self) -> Arg {
        match self {
            Opcode::Int => Arg::Line,
            Opcode::Binint => Arg::I4,
            Opcode::Binint1 => Arg::U1,
            Opcode::Binint2 => Arg::U2,
            Opcode::Long => Arg::Line,
            Opcode::Long1 => Arg::Len1,
            Opcode::Long4 => Arg::Len4,
            Opcode::String => Arg::Line,
            Opcode::Binstring => Arg::Len4,
            Opcode::ShortBinstring => Arg::Len1,
            Opcode::Binbytes => Arg::Len4,
            Opcode::ShortBinbytes => Arg::Len1,
            Opcode::Binbytes8 => Arg::Len8,
            Opcode::Bytearray8 => Arg::Len8,
            Opcode::NextBuffer => Arg::None,
            Opcode::ReadonlyBuffer => Arg::None,
            Opcode::None => Arg::None,
            Opcode::Newtrue => Arg::None,
            Opcode::Newfalse => Arg::None,
            Opcode::Unicode => Arg::Line,
            Opcode::ShortBinunicode => Arg::Len1,
            Opcode::Binunicode => Arg::Len4,
            Opcode::Binunicode8 => Arg::Len8,
            Opcode::Float => Arg::Line,
            Opcode::Binfloat => Arg::F8,
            Opcode::EmptyList => Arg::None,
            Opcode::Append => Arg::None,
            Opcode::Appends => Arg::None,
            Opcode::List => Arg::None,
            Opcode::EmptyTuple => Arg::None,
            Opcode::Tuple => Arg::None,
            Opcode::Tuple1 => Arg::None,
            Opcode::Tuple2 => Arg::None,
            Opcode::Tuple3 => Arg::None,
            Opcode::EmptyDict => Arg::None,
            Opcode::Dict => Arg::None,
            Opcode::Setitem => Arg::None,
            Opcode::Setitems => Arg::None,
            Opcode::EmptySet => Arg::None,
            Opcode::Additems => Arg::None,
            Opcode::Frozenset => Arg::None,
            Opcode::Pop => Arg::None,
            Opcode::Dup => Arg::None,
            Opcode::Mark => Arg::None,
            Opcode::PopMark => Arg::None,
            Opcode::Get => Arg::Line,
            Opcode::Binget => Arg::U1,
            Opcode::LongBinget => Arg::U4,
            Opcode::Put => Arg::Line,
            Opcode::Binput => Arg::U1,
            Opcode::LongBinput => Arg::U4,
            Opcode::Memoize => Arg::None,
            Opcode::Ext1 => Arg::U1,
            Opcode::Ext2 => Arg::U2,
            Opcode::Ext4 => Arg::I4,
            Opcode::Global => Arg::TwoLines,
            Opcode::StackGlobal => Arg::None,
            Opcode::Reduce => Arg::None,
            Opcode::Build => Arg::None,
            Opcode::Inst => Arg::TwoLines,
            Opcode::Obj => Arg::None,
            Opcode::Newobj => Arg::None,
            Opcode::NewobjEx => Arg::None,
            Opcode::Proto => Arg::U1,
            Opcode::Stop => Arg::None,
            Opcode::Frame => Arg::U8,
            Opcode::Persid => Arg::Line,
            Opcode::Binpersid => Arg::None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast-path tables, derived from `Opcode::arg`, hold 1 + the argument size of exactly
    /// their opcodes.
    #[test]
    fn fixed_argument_tables() {
        let set = |t: &[u8; 256]| -> Vec<(u8, u8)> {
            (0..=255u8)
                .filter(|&b| t[usize::from(b)] != 0)
                .map(|b| (b, t[usize::from(b)]))
                .collect()
        };
        assert_eq!(
            set(&SCALAR_ARG),
            [
                (b'G', 9),
                (b'J', 5),
                (b'K', 2),
                (b'M', 3),
                (b'N', 1),
                (0x88, 1),
                (0x89, 1)
            ]
        );
        assert_eq!(set(&BININT_ARG), [(b'J', 5), (b'K', 2), (b'M', 3)]);
    }

    #[test]
    fn table_is_consistent() {
        assert_eq!(Opcode::ALL.len(), 68);
        for op in Opcode::ALL {
            assert_eq!(Opcode::from_byte(op.byte()), Some(op));
        }
        let known = (0..=255u8)
            .filter(|b| Opcode::from_byte(*b).is_some())
            .count();
        assert_eq!(known, 68);
        assert_eq!(Opcode::from_byte(b'X'), Some(Opcode::Binunicode));
        assert_eq!(Opcode::Binunicode.name(), "BINUNICODE");
        assert_eq!(Opcode::Frame.proto(), 4);
    }
}
