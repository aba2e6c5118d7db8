fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/etcd_kv.proto");
    println!("cargo:rerun-if-changed=../api/grpc/proto/sluice.proto");
    tonic_prost_build::configure()
        .build_server(false)
        .compile_protos(
            &["proto/etcd_kv.proto", "../api/grpc/proto/sluice.proto"],
            &["proto", "../api/grpc/proto"],
        )?;
    Ok(())
}
