//! `wirelat`: the command-line entry point.

fn main() {}
