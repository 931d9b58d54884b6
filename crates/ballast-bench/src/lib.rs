//! Ballast's benchmarks (`cargo bench -p ballast-bench`). The library is empty for now; the flash-sale scenario
//! (`ballast bench`) will live here. Benchmarks are not tests: results go to BENCHMARKS.md with their command.
