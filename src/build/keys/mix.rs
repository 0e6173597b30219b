//! The seeded word mixer of picklewarden's own hash tables: [`MixState`] and its hasher
//! [`Mix`], splitmix64 over the words written from a seed per decode, and the [`splitmix64`]
//! finaliser itself. The reader model's classes, the sealed-record table and a record call's
//! argument walk key their tables with the hasher, the build's key index (`index.rs`) with the
//! finaliser: the keys hold values the peer chooses (CPython hash
//! values, node ids), and without the seed it cannot make them collide in these tables.

/// A keyed hasher for the model's tables: splitmix64 over the words written, from a random
/// seed per decode. The classes' keys hold CPython hash values the peer chooses; without the
/// seed it cannot make them collide in these tables, and the mix costs a few instructions a
/// word where SipHash costs dozens.
#[derive(Clone, Debug)]
pub(crate) struct MixState(u64);

impl Default for MixState {
    /// An unseeded state, for tables that are empty until `ReaderKeys::seed` (`reader.rs`)
    /// replaces it.
    fn default() -> MixState {
        MixState(0)
    }
}

impl MixState {
    /// The state of the seed `seed`.
    pub(crate) fn keyed(seed: u64) -> MixState {
        MixState(seed)
    }

    /// A state from a random seed.
    pub(crate) fn random() -> MixState {
        use std::hash::BuildHasher;
        MixState(std::hash::RandomState::new().hash_one(0x5eed_u64))
    }
}

impl std::hash::BuildHasher for MixState {
    type Hasher = Mix;
    fn build_hasher(&self) -> Mix {
        Mix {
            state: self.0,
            partial: 0,
            pending: 0,
        }
    }
}

/// The hasher of [`MixState`]: a word is mixed into the state (`splitmix64(state ^ word)`);
/// bytes are gathered into words whatever pieces they come in (a value fed in chunks hashes
/// as the whole), the last partial word mixed in with its length at [`Mix::finish`].
pub(crate) struct Mix {
    state: u64,
    /// Bytes written and not yet mixed in (little-endian), `pending` of them.
    partial: u64,
    pending: u32,
}

impl Mix {
    /// Mixes in the partial word, if any (then the next word starts afresh).
    #[inline]
    fn flush(&mut self) {
        if self.pending > 0 {
            self.state = splitmix64(self.state ^ self.partial ^ (u64::from(self.pending) << 59));
            self.partial = 0;
            self.pending = 0;
        }
    }
}

/// The splitmix64 finaliser (a bijection of `u64`).
#[inline(always)]
pub(crate) fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl std::hash::Hasher for Mix {
    fn write(&mut self, mut bytes: &[u8]) {
        // Whole words straight in while none is partly filled.
        while self.pending == 0 {
            let Some((word, rest)) = bytes.split_first_chunk::<8>() else {
                break;
            };
            self.state = splitmix64(self.state ^ u64::from_le_bytes(*word));
            bytes = rest;
        }
        for &b in bytes {
            self.partial |= u64::from(b) << (8 * self.pending);
            self.pending += 1;
            if self.pending == 8 {
                self.state = splitmix64(self.state ^ self.partial);
                self.partial = 0;
                self.pending = 0;
            }
        }
    }
    #[inline]
    fn write_u64(&mut self, x: u64) {
        self.flush();
        self.state = splitmix64(self.state ^ x);
    }
    fn write_u32(&mut self, x: u32) {
        self.write_u64(u64::from(x));
    }
    // A byte or a length is a word of its own (the content hash writes a tag byte before
    // each item, and every tag stands for a fixed sequence of words, so the words of two
    // distinct values differ).
    fn write_u8(&mut self, x: u8) {
        self.write_u64(u64::from(x));
    }
    fn write_usize(&mut self, x: usize) {
        self.write_u64(x as u64);
    }
    fn finish(&self) -> u64 {
        if self.pending > 0 {
            splitmix64(self.state ^ self.partial ^ (u64::from(self.pending) << 59))
        } else {
            self.state
        }
    }
}
