//! epoll, eventfd, signalfd and CPU pinning (no root needed).

use std::sync::Arc;
use std::time::{Duration, Instant};

use std::os::fd::AsRawFd;
use tep_sys::{Epoll, EventFd, Signal, Signals};

#[test]
fn eventfd_notify_from_another_thread_wakes_epoll() {
    let epoll = Epoll::new().unwrap();
    let efd = Arc::new(EventFd::new().unwrap());
    epoll.add(efd.as_raw_fd(), 7, true, false).unwrap();
    let mut events = Vec::with_capacity(16);
    assert_eq!(epoll.wait(&mut events, 0).unwrap(), 0);
    assert!(events.is_empty());
    assert_eq!(efd.drain().unwrap(), 0, "nothing pending");

    let notifier = {
        let efd = Arc::clone(&efd);
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            efd.notify().unwrap();
        })
    };
    let start = Instant::now();
    assert_eq!(epoll.wait(&mut events, 2000).unwrap(), 1);
    assert!(start.elapsed() < Duration::from_millis(1500));
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].token, 7);
    assert!(events[0].readable && !events[0].writable && !events[0].hangup);
    notifier.join().unwrap();

    // Level-triggered: still readable until drained.
    assert_eq!(epoll.wait(&mut events, 0).unwrap(), 1);
    efd.notify().unwrap();
    assert_eq!(efd.drain().unwrap(), 2);
    assert_eq!(epoll.wait(&mut events, 0).unwrap(), 0);

    // An eventfd is always writable.
    epoll.modify(efd.as_raw_fd(), 8, false, true).unwrap();
    assert_eq!(epoll.wait(&mut events, 0).unwrap(), 1);
    assert_eq!(events[0].token, 8);
    assert!(events[0].writable && !events[0].readable);
    epoll.delete(efd.as_raw_fd()).unwrap();
    assert_eq!(epoll.wait(&mut events, 0).unwrap(), 0);
    assert!(epoll.add(-1, 0, true, false).is_err());
}

#[test]
fn epoll_wait_returns_at_most_the_capacity() {
    let epoll = Epoll::new().unwrap();
    let fds: Vec<EventFd> = (0..4).map(|_| EventFd::new().unwrap()).collect();
    for (i, fd) in fds.iter().enumerate() {
        epoll.add(fd.as_raw_fd(), i as u64, true, false).unwrap();
        fd.notify().unwrap();
    }
    let mut events = Vec::with_capacity(2);
    let cap = events.capacity();
    let n = epoll.wait(&mut events, 0).unwrap();
    assert!(n >= 1 && n <= cap, "{n} events for capacity {cap}");
    assert_eq!(events.capacity(), cap, "no reallocation");
    let mut events = Vec::with_capacity(8);
    assert_eq!(epoll.wait(&mut events, 0).unwrap(), 4);
}

#[test]
fn signalfd_reads_a_blocked_hangup() {
    // Its own thread: the mask is per thread, the rest of the test binary keeps SIGHUP.
    std::thread::spawn(|| {
        let signals = Signals::new(&[Signal::Hangup, Signal::Terminate]).unwrap();
        assert_eq!(signals.read().unwrap(), None);
        // SAFETY: SIGHUP is blocked in this thread (Signals::new), so it stays
        // pending for the signalfd instead of killing the process.
        let r = unsafe { libc::pthread_kill(libc::pthread_self(), libc::SIGHUP) };
        assert_eq!(r, 0);
        assert_eq!(signals.read().unwrap(), Some(Signal::Hangup));
        assert_eq!(signals.read().unwrap(), None);

        // And it wakes epoll.
        let epoll = Epoll::new().unwrap();
        epoll.add(signals.as_raw_fd(), 1, true, false).unwrap();
        let mut events = Vec::with_capacity(4);
        assert_eq!(epoll.wait(&mut events, 0).unwrap(), 0);
        // SAFETY: as above, SIGTERM is blocked in this thread.
        let r = unsafe { libc::pthread_kill(libc::pthread_self(), libc::SIGTERM) };
        assert_eq!(r, 0);
        assert_eq!(epoll.wait(&mut events, 1000).unwrap(), 1);
        assert_eq!(signals.read().unwrap(), Some(Signal::Terminate));
    })
    .join()
    .unwrap();
    assert_eq!(
        Signal::from_number(Signal::Interrupt.number()),
        Some(Signal::Interrupt)
    );
}

#[test]
fn pin_current_thread_to_cpu_0() {
    assert!(tep_sys::thread::online_cpus() >= 1);
    std::thread::spawn(|| {
        tep_sys::thread::pin_current_thread(0).unwrap();
        // SAFETY: cpu_set_t is plain data; sched_getaffinity fills it.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: `set` is live and its size is passed.
        let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
        assert_eq!(r, 0);
        // SAFETY: reading bits of an initialised set.
        assert!(unsafe { libc::CPU_ISSET(0, &set) });
        // SAFETY: as above.
        assert_eq!(unsafe { libc::CPU_COUNT(&set) }, 1);
    })
    .join()
    .unwrap();
    assert!(tep_sys::thread::pin_current_thread(1 << 20).is_err());
}
