//! Integration tests of the connector runtime against real guest modules written in WAT.
//! One test binary (faster linking); compiled guests are shared through the runtime's cache.

mod disk_cache;
mod guest;
mod http;
mod limits;
mod loading;
mod outcomes;
mod spawn;
mod wasi;
