fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/sluice.proto");
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    tonic_prost_build::configure()
        // Malformed messages are the client's fault: INVALID_ARGUMENT, not prost's INTERNAL.
        .codec_path("crate::services::StrictCodec")
        .file_descriptor_set_path(out.join("sluice_descriptor.bin"))
        .compile_protos(&["proto/sluice.proto"], &["proto"])?;
    Ok(())
}
