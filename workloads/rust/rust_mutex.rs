// Threads that do most of their work under one std::sync::Mutex: a Rust program whose lock
// scalestack names from call stacks. Usage: rust_mutex [THREADS=4] [ITEMS=200000] [EVERY=2]
// (each thread crunches ITEMS values and, every EVERY-th one, inserts two under the lock).
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::thread;

fn crunch(x: u64) -> u64 {
    let mut h = x;
    for _ in 0..2000 { h = h.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407); h ^= h >> 29; }
    h
}

fn insert_counted(map: &Mutex<HashMap<u64, u64>>, k: u64) {
    let mut g = map.lock().unwrap();
    let v = crunch(k);            // work done while holding the lock
    *g.entry(v % 4096).or_insert(0) += 1;
}

fn main() {
    let n: usize = std::env::args().nth(1).map(|s| s.parse().unwrap()).unwrap_or(4);
    let items: u64 = std::env::args().nth(2).map(|s| s.parse().unwrap()).unwrap_or(200000);
    let every: u64 = std::env::args().nth(3).map(|s| s.parse().unwrap()).unwrap_or(2);
    let map = Arc::new(Mutex::new(HashMap::new()));
    let hs: Vec<_> = (0..n).map(|t| {
        let m = Arc::clone(&map);
        thread::Builder::new().name(format!("worker-{t}")).spawn(move || {
            let mut acc = 0u64;
            for i in 0..items {
                acc = acc.wrapping_add(crunch(i * 7 + t as u64));   // parallel work
                if i % every == 0 { insert_counted(&m, i ^ acc); insert_counted(&m, i ^ acc ^ 1); }
            }
            acc
        }).unwrap()
    }).collect();
    let s: u64 = hs.into_iter().map(|h| h.join().unwrap()).fold(0, |a, b| a ^ b);
    println!("{} {}", s, map.lock().unwrap().len());
}
