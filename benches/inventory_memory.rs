//! Memory per object of the inventory: projected (what `serve` and `check`
//! keep: the fields the bundled policies read) against full-object caches
//! (every object whole as `serde_json::Value`, and as kube-runtime's
//! reflector store holds them, `DynamicObject`), over a generated cluster.
//!
//! `cargo bench --bench inventory_memory` (100k objects), or
//! `cargo bench --bench inventory_memory -- --objects 20000`.
//!
//! Heap bytes are counted exactly by a global allocator that tracks what is
//! live, so the figures do not move with the machine's load. The inventory
//! includes its lookup structures (per-kind lists, the policies' declared
//! indexes); the caches hold objects only.

#[path = "support/gen_cluster.rs"]
mod gen_cluster;

use interlock::inventory::Inventory;
use interlock::manifest::{self, LoadOptions};
use interlock::policy::PolicySet;
use kube::core::DynamicObject;
use serde_json::Value;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// Heap bytes that `build` leaves allocated in what it returns, and the
/// time it took.
fn measure<T>(build: impl FnOnce() -> T) -> (T, usize, f64) {
    let before = live();
    let t = Instant::now();
    let held = build();
    let secs = t.elapsed().as_secs_f64();
    (held, live().saturating_sub(before), secs)
}

fn bundled_inventory(project: bool) -> Inventory {
    let mut inventory = Inventory::new();
    let (set, errors) = PolicySet::compile_documents(interlock::bundled::documents().documents);
    inventory.set_indexes(&set.index_decls()).unwrap();
    assert!(errors.is_empty(), "bundled policies: {errors:?}");
    if project {
        inventory.set_projection(set.projection());
    }
    inventory
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let objects = args
        .iter()
        .position(|a| a == "--objects")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(100_000usize);
    let tmp = tempfile::tempdir().expect("temporary directory");
    let generated = gen_cluster::generate(tmp.path(), objects).expect("generate");
    let loaded = manifest::load_paths(&[tmp.path()], &LoadOptions::default());
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors.first());
    let values: Vec<Value> = loaded.documents.into_iter().map(|d| d.value).collect();
    let n = values.len();
    let yaml_bytes = generated.bytes;
    let json_bytes: usize = values
        .iter()
        .map(|v| serde_json::to_vec(v).map_or(0, |b| b.len()))
        .sum();

    let fill = |project: bool| {
        let (inventory, bytes, secs) = measure(|| {
            let mut inventory = bundled_inventory(project);
            for v in &values {
                inventory.upsert(v, None).expect("upsert");
            }
            inventory
        });
        assert_eq!(inventory.len(), n);
        drop(inventory);
        (bytes, secs)
    };
    let (projected, projected_secs) = fill(true);
    let (whole, whole_secs) = fill(false);
    let (store, dynamic, dynamic_secs) = measure(|| {
        values
            .iter()
            .map(|v| serde_json::from_value::<DynamicObject>(v.clone()).expect("object"))
            .collect::<Vec<_>>()
    });
    assert_eq!(store.len(), n);
    drop(store);

    let per = |b: usize| b as f64 / n as f64;
    println!(
        "inventory memory: {n} objects, {:.1} MiB of YAML ({:.0} B/object), {:.1} MiB as compact JSON ({:.0} B/object)",
        yaml_bytes as f64 / 1048576.0,
        per(yaml_bytes as usize),
        json_bytes as f64 / 1048576.0,
        per(json_bytes)
    );
    println!();
    println!("| store | heap | bytes/object | vs projected | fill time |");
    println!("|---|---:|---:|---:|---:|");
    for (name, bytes, secs) in [
        (
            "interlock inventory, projected (bundled policies)",
            projected,
            projected_secs,
        ),
        ("interlock inventory, whole objects", whole, whole_secs),
        (
            "full-object cache: Vec<DynamicObject>",
            dynamic,
            dynamic_secs,
        ),
    ] {
        println!(
            "| {name} | {:.1} MiB | {:.0} | {:.1}x | {:.2} s |",
            bytes as f64 / 1048576.0,
            per(bytes),
            bytes as f64 / projected.max(1) as f64,
            secs
        );
    }
}
