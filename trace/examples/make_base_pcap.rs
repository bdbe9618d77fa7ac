//! Regenerates the bundled base capture `trace/data/base.pcap` (deterministic; the test
//! `bundled_base_is_reproducible` fails until this is rerun after a generator change).
//!
//! `cargo run -p wirelat-trace --example make_base_pcap`

fn main() -> anyhow::Result<()> {
    let bytes = wirelat_trace::generate::make_bundled_base()?;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data/base.pcap");
    std::fs::write(&path, &bytes)?;
    println!("wrote {} ({} bytes)", path.display(), bytes.len());
    Ok(())
}
