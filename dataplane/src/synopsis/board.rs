//! Where the workers find the parts of the control thread's work it shares with them (issue
//! 24): a queue of tickets, each a handle on an open job ([`crate::synopsis::rda::share`]'s
//! filing, [`crate::synopsis::lds::flows::share`]'s flow lists). A worker takes a ticket, does
//! one chunk and puts the ticket back ([`Board::help`]); the one that finds every chunk taken
//! drops it. The control thread posts tickets when it lends a job and withdraws those left
//! before it takes the job back; it keeps its own handle, so a worker's drop never frees a job.

use std::sync::Arc;

use crossbeam::queue::ArrayQueue;

/// What one call of a job's `help` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Help {
    /// Did a chunk.
    Filed,
    /// Left a chunk to the control thread (the helper had no room for it).
    Declined,
    /// Every chunk is taken.
    NoneLeft,
}

/// A job whose chunks any thread may do, one per call.
pub trait SharedJob: Send + Sync {
    /// What a helper brings to a chunk (RDA's sorter; nothing for the flow lists).
    type Scratch;
    /// Does the next chunk nobody has taken. Never allocates, locks or blocks.
    fn help(&self, scratch: &mut Self::Scratch) -> Help;
    /// True when no chunk is left to take.
    fn is_taken(&self) -> bool;
}

/// Tickets a board holds at most: two jobs (the directions) of 128 workers each.
const TICKETS: usize = 256;

/// The ticket queue of one kind of job.
#[derive(Debug)]
pub struct Board<J> {
    tickets: ArrayQueue<Arc<J>>,
}

impl<J> Default for Board<J> {
    fn default() -> Self {
        Self { tickets: ArrayQueue::new(TICKETS) }
    }
}

impl<J: SharedJob> Board<J> {
    /// Does at most one chunk of an open job with `scratch`; `None` when no job is open. A
    /// worker's call, on an idle poll: never allocates, locks or blocks, and costs two atomic
    /// loads when there is nothing to do.
    pub fn help(&self, scratch: &mut J::Scratch) -> Option<Help> {
        let job = self.tickets.pop()?;
        let done = job.help(scratch);
        // Put back only while chunks are left: once every chunk is drawn, each helper drops its
        // ticket as it finishes, so the owner waits for the chunks in progress and no longer.
        if done != Help::NoneLeft && !job.is_taken() {
            // Cannot fail: this ticket was just taken out.
            let _ = self.tickets.push(job);
        }
        Some(done)
    }
}

impl<J> Board<J> {
    /// Posts `helpers` tickets on `job` (as many as the queue has room for).
    pub fn post(&self, job: &Arc<J>, helpers: usize) {
        for _ in 0..helpers {
            if self.tickets.push(job.clone()).is_err() {
                break;
            }
        }
    }

    /// Takes back every ticket still posted. A worker in the middle of a chunk still holds its
    /// ticket, and puts it back if chunks are left: the owner withdraws until it holds the job
    /// alone ([`Self::withdraw_all`]).
    pub fn withdraw(&self) {
        while self.tickets.pop().is_some() {}
    }

    /// Withdraws the tickets on `job` until the caller's handle is the only one left, yielding
    /// while a worker finishes the chunk it holds (one chunk: at most a few ms). The control
    /// thread's step before it takes a job back.
    pub fn withdraw_all(&self, job: &Arc<J>) {
        loop {
            self.withdraw();
            if Arc::strong_count(job) == 1 {
                return;
            }
            std::thread::yield_now();
        }
    }
}
