//! Unit tests of the container readers.
