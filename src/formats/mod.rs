//! Formats that carry pickles: readers around the machine that find the pickles, bound what
//! they read and apply the format's own rules.

pub mod mitogen;
