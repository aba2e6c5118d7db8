//! A minimal axum hello-world server: the benchmark's baseline for what one HTTP request costs
//! on this machine. `sluice-hello ADDR` prints `listening ADDR` and serves `GET /`.

use axum::routing::get;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:0".into());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("listening {}", listener.local_addr()?);
    axum::serve(
        listener,
        axum::Router::new().route("/", get(|| async { "Hello, World!" })),
    )
    .await?;
    Ok(())
}
