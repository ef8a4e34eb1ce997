//! Runs every fuzz body over its seeds (fuzz/seeds/<target>/) and over a
//! deterministic set of mutations of each seed: how CI exercises the bodies
//! without a fuzzer. A failure prints the target and the input in hex; save
//! it as fuzz/seeds/<target>/crash-<n> to keep it as a regression input.

use std::panic::{self, AssertUnwindSafe};
use std::path::PathBuf;

use tep_fuzz::TARGETS;

/// Mutated inputs per target, spread over its seeds.
const MUTATIONS_PER_TARGET: usize = 3000;

/// Truncations per seed at most (every one for seeds up to this long).
const MAX_TRUNCATIONS: usize = 256;

/// splitmix64: small, deterministic, good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn byte(&mut self) -> u8 {
        // Boundary values find length and flag bugs more often than noise.
        const INTERESTING: [u8; 8] = [0x00, 0x01, 0x02, 0x04, 0x7f, 0x80, 0xfe, 0xff];
        if self.next() & 1 == 0 {
            INTERESTING[self.below(INTERESTING.len())]
        } else {
            self.next() as u8
        }
    }
}

/// One to four edits: bit flips, byte overwrites, truncations, insertions,
/// deletions.
fn mutate(seed: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut v = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        match rng.below(6) {
            0 | 1 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] ^= 1 << rng.below(8);
            }
            2 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] = rng.byte();
            }
            3 => v.truncate(rng.below(v.len() + 1)),
            4 => {
                let i = rng.below(v.len() + 1);
                for _ in 0..1 + rng.below(4) {
                    v.insert(i, rng.byte());
                }
            }
            _ if !v.is_empty() => {
                let i = rng.below(v.len());
                let n = 1 + rng.below((v.len() - i).min(8));
                v.drain(i..i + n);
            }
            _ => v.push(rng.byte()),
        }
    }
    v
}

fn seeds(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("seeds")
        .join(target);
    let mut out: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e} (run fuzz/make-seeds.py)", dir.display()))
        .map(|e| e.unwrap().path())
        .map(|p| {
            let data = std::fs::read(&p).unwrap();
            (p, data)
        })
        .collect();
    out.sort();
    assert!(!out.is_empty(), "{}: no seeds", dir.display());
    out
}

fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

/// Runs `body` and turns a panic into a message naming the input.
fn run(name: &str, what: &str, body: tep_fuzz::Body, data: &[u8]) -> Result<(), String> {
    panic::catch_unwind(AssertUnwindSafe(|| body(data)))
        .map_err(|_| format!("{name}: panic on {what}: input {}", hex(data)))
}

#[test]
fn seeds_and_mutations() {
    let mut failures = vec![];
    let mut total = 0;
    for &(name, body) in TARGETS {
        let seeds = seeds(name);
        let per_seed = MUTATIONS_PER_TARGET.div_ceil(seeds.len());
        for (i, (path, seed)) in seeds.iter().enumerate() {
            let file = path.file_name().unwrap().to_string_lossy();
            failures.extend(run(name, &format!("seed {file}"), body, seed).err());
            // Every truncation of the seed (of a long one, a spread of
            // them: the pipeline targets' seeds run to kilobytes), then
            // random edits.
            let step = seed.len().div_ceil(MAX_TRUNCATIONS).max(1);
            for len in (0..seed.len()).step_by(step) {
                failures.extend(run(name, &format!("{file}[..{len}]"), body, &seed[..len]).err());
            }
            let mut rng = Rng(0x7e9_f022 ^ (i as u64) << 32 ^ name.len() as u64);
            for m in 0..per_seed {
                let input = mutate(seed, &mut rng);
                failures.extend(run(name, &format!("{file} mutation {m}"), body, &input).err());
            }
            total += 1 + seed.len().div_ceil(step) + per_seed;
        }
        // Tiny inputs, exhaustively for the first two bytes' worth.
        for len in 0..=2usize {
            for v in 0..1u32 << (8 * len) {
                let input = &v.to_le_bytes()[..len];
                failures.extend(run(name, "tiny input", body, input).err());
            }
        }
    }
    assert!(total > 0);
    if !failures.is_empty() {
        failures.truncate(20);
        panic!(
            "{} failing inputs:\n{}",
            failures.len(),
            failures.join("\n")
        );
    }
}
