//! Links the addon against Node's N-API symbols.
fn main() {
    napi_build::setup();
}
