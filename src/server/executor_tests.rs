use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

fn light() -> Lane {
    Lane {
        heavy: false,
        tenant: String::new(),
    }
}

fn heavy() -> Lane {
    Lane {
        heavy: true,
        tenant: String::new(),
    }
}

#[tokio::test]
async fn runs_jobs_and_survives_a_panicking_one() {
    let pool = Executor::new(Some(2)).unwrap();
    assert_eq!(pool.run(light(), || 40 + 2).await, Some(42));
    assert_eq!(pool.run(heavy(), || -> u8 { panic!("boom") }).await, None);
    assert_eq!(pool.run(heavy(), || "still here").await, Some("still here"));
}

#[tokio::test]
async fn a_blocked_thread_does_not_stop_the_others() {
    let pool = Executor::new(Some(2)).unwrap();
    let (release, held) = std::sync::mpsc::channel::<()>();
    let holder = pool.clone();
    let blocked = tokio::spawn(async move {
        holder
            .run(light(), move || {
                held.recv_timeout(Duration::from_secs(30)).is_ok()
            })
            .await
    });
    // With one of two threads held, jobs still run on the other.
    for i in 0..10 {
        assert_eq!(pool.run(light(), move || i * 2).await, Some(i * 2));
    }
    release.send(()).unwrap();
    assert_eq!(blocked.await.unwrap(), Some(true));
}

#[tokio::test]
async fn heavy_jobs_leave_one_thread_to_the_light_ones() {
    let pool = Executor::new(Some(2)).unwrap();
    // Two heavy jobs that hold their thread until released: only one
    // may run at once, so the second waits and light jobs still run.
    let (release, held) = std::sync::mpsc::channel::<()>();
    let held = Arc::new(Mutex::new(held));
    let running = Arc::new(AtomicUsize::new(0));
    let mut heavies = Vec::new();
    for _ in 0..2 {
        let (pool, held, running) = (pool.clone(), held.clone(), running.clone());
        heavies.push(tokio::spawn(async move {
            pool.run(heavy(), move || {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                let _ = held.lock().unwrap().recv_timeout(Duration::from_secs(30));
                running.fetch_sub(1, Ordering::SeqCst);
                now
            })
            .await
        }));
    }
    for i in 0..10 {
        assert_eq!(pool.run(light(), move || i + 1).await, Some(i + 1));
    }
    release.send(()).unwrap();
    release.send(()).unwrap();
    for h in heavies {
        // Each heavy job saw itself alone in the lane.
        assert_eq!(h.await.unwrap(), Some(1));
    }
}

#[test]
fn a_tenants_cheap_job_runs_before_another_tenants_backlog() {
    let pool = Executor::new(Some(1)).unwrap();
    let queue = pool.owner.0.clone();
    let order = Arc::new(Mutex::new(Vec::new()));
    let (release, held) = std::sync::mpsc::channel::<()>();
    let job = |name: &'static str, held: Option<std::sync::mpsc::Receiver<()>>| {
        let order = order.clone();
        Box::new(move || {
            if let Some(h) = held {
                let _ = h.recv_timeout(Duration::from_secs(30));
            }
            order.lock().unwrap().push(name);
        }) as Job
    };
    let of = |tenant: &str| Lane {
        heavy: false,
        tenant: tenant.into(),
    };
    // Tenant a holds the only thread and has a backlog of three;
    // b's one job arrives last.
    queue.push(of("a"), job("a0", Some(held)));
    while queue.state.lock().unwrap().running.get("a") != Some(&1) {
        std::thread::sleep(Duration::from_millis(1));
    }
    for name in ["a1", "a2", "a3"] {
        queue.push(of("a"), job(name, None));
    }
    queue.push(of("b"), job("b0", None));
    release.send(()).unwrap();
    drop(pool);
    let give_up = std::time::Instant::now() + Duration::from_secs(60);
    while order.lock().unwrap().len() < 5 {
        assert!(std::time::Instant::now() < give_up, "jobs never ran");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(*order.lock().unwrap(), ["a0", "b0", "a1", "a2", "a3"]);
}

#[test]
fn dropping_the_last_handle_stops_the_threads_after_the_queue() {
    let done = Arc::new(AtomicUsize::new(0));
    let pool = Executor::new(Some(1)).unwrap();
    let queue = pool.owner.0.clone();
    for _ in 0..3 {
        let done = done.clone();
        queue.push(
            light(),
            Box::new(move || {
                done.fetch_add(1, Ordering::SeqCst);
            }),
        );
    }
    drop(pool);
    // Closed, the thread still runs what was queued, then exits.
    let give_up = std::time::Instant::now() + Duration::from_secs(60);
    while done.load(Ordering::SeqCst) < 3 {
        assert!(std::time::Instant::now() < give_up, "queued jobs never ran");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(queue.state.lock().unwrap().closed);
    assert!(queue.next().is_none());
}
