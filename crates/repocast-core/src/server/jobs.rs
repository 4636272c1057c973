//! The block encoders a server hands its driver to prepare off the
//! sending path ([`super::encoders::PrepareJob`]), and the counters of
//! push mode's symbols made ahead. Part of [`super::Server`].

use super::{Server, encoders};

impl Server {
    /// Push mode: repair symbols of a streamed item held made ahead in
    /// memory (the sender's memory for an item larger than
    /// `push_span_bytes`).
    pub fn push_symbols_ahead(&self) -> usize {
        self.push_cache().map_or(0, |c| c.ahead_symbols())
    }

    /// Push mode: repair symbols of a streamed item made ahead into the
    /// driver's spool.
    pub fn push_symbols_spooled(&self) -> usize {
        self.push_cache().map_or(0, |c| c.spooled_symbols())
    }

    /// Push mode: times the driver's spool failed (the pass went on with
    /// its symbols in memory).
    pub fn push_spool_errors(&self) -> u64 {
        self.push_cache().map_or(0, |c| c.spool_errors())
    }

    /// The next block encoder to prepare off the sending path
    /// ([`super::ServerConfig::prepare_jobs`]). Run it
    /// ([`encoders::PrepareJob::run`]) on any thread and hand it back with
    /// [`Server::prepared`]. A driver that never does holds a few blocks'
    /// copies, and its blocks are prepared on the sending path, at their
    /// first repair symbol.
    pub fn poll_prepare(&mut self) -> Option<encoders::PrepareJob> {
        self.job_cache()?.poll_job()
    }

    /// A job from [`Server::poll_prepare`], run: later symbols of its
    /// block come from its encoder if the one kept has not done the work
    /// itself by now. The packets are the same either way.
    pub fn prepared(&mut self, job: encoders::PrepareJob) {
        if let Some(c) = self.job_cache() {
            c.job_done(job);
        }
    }

    /// How the jobs of [`Server::poll_prepare`] stand.
    pub fn prepare_jobs(&self) -> encoders::JobCounts {
        let push = || self.push_cache();
        (self.encoders.as_ref().or_else(push))
            .map(|c| c.job_counts())
            .unwrap_or_default()
    }

    /// The cache whose jobs [`Server::poll_prepare`] hands out: request
    /// mode's, or push mode's (held by the pass on air, else between
    /// passes).
    fn job_cache(&mut self) -> Option<&mut encoders::EncoderCache> {
        if self.encoders.is_some() {
            return self.encoders.as_mut();
        }
        let on_air = self.current.as_mut().and_then(|t| t.encoders_mut());
        on_air.or(self.push_encoders.as_mut())
    }

    fn push_cache(&self) -> Option<&encoders::EncoderCache> {
        let on_air = self.current.as_ref().and_then(|t| t.encoders());
        self.push_encoders.as_ref().or(on_air)
    }
}
